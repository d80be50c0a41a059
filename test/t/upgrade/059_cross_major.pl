
# Two PostgreSQL majors on one ZooKeeper root: an instance of the
# PostgreSQL this suite runs on and one of another major (ZKLOCK_OTHER_INSTALL,
# an installation with this tree's zklock built for it), as in a fleet
# upgraded one instance at a time from 15 to 18.
#  - they exclude each other, EXCLUSIVE either way, SHARED together,
#    and a waiter on one is granted when the holder on the other releases;
#  - each one's zk_locks shows the other's locks with their fields;
#  - zk_lock_revoke on either one reaches a holder on the other;
#  - an explicit lock taken on one is released from the other.
# test/run_tests.sh builds the other major (scripts/build-postgres.sh) and
# names it: PostgreSQL 18 for the suite on 15, 15 for the suite on 17 and
# 18.  Without it this test fails, never skips.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;

my $other_install = $ENV{ZKLOCK_OTHER_INSTALL} // '';
ok($other_install ne '' && -x "$other_install/bin/postgres",
	"another PostgreSQL major with zklock is installed (ZKLOCK_OTHER_INSTALL=$other_install)")
  or do
{
	diag('ZKLOCK_OTHER_INSTALL must name a PostgreSQL installation of another major with this tree\'s zklock (test/run_tests.sh prepares one)');
	done_testing();
	exit 1;
};

zk_start();
my $here = zk_node('here', node_name => 'here-inst');
my $there = zk_node('there', node_name => 'there-inst', install_path => $other_install);

my $major = sub {
	psql1($_[0], q{SELECT current_setting('server_version_num')::int / 10000});
};
my ($mh, $mt) = ($major->($here), $major->($there));
isnt($mh, $mt, "the two instances run different majors ($mh and $mt)");
is(psql1($there, q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
	psql1($here, q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
	'and the same extension version');

# --- they exclude each other ------------------------------------------------
my $hh = zk_session($here, 'here_holder');
my $ht = zk_session($there, 'there_holder');
for my $dir ([ $hh, $ht, "$mh holding, $mt asking" ], [ $ht, $hh, "$mt holding, $mh asking" ])
{
	my ($holder, $asker, $what) = @$dir;
	$holder->query_ok(q{BEGIN});
	$holder->query_ok(q{SELECT zk_lock_acquire('major/x')});
	is($asker->query_ok(q{SELECT zk_lock_try_acquire_session('major/x') IS NOT NULL}), 'f',
		"EXCLUSIVE is refused across majors ($what)");
	is($asker->query_ok(q{SELECT zk_lock_try_acquire_session('major/x', 'shared') IS NOT NULL}), 'f',
		"so is SHARED ($what)");
	$asker->send(q{SELECT zk_lock_acquire_session('major/x', timeout => '30 s') > 0});
	ok(wait_for_waiting($asker->node, $asker->pid), "the asker waits ($what)");
	$holder->query_ok(q{COMMIT});
	my $r = $asker->wait(30);
	ok($r && $r->{out} eq 't', "and is granted when the holder commits ($what)");
	$asker->query_ok(q{SELECT zk_lock_release_all()});
}

# SHARED with SHARED, together
is($hh->query_ok(q{SELECT zk_lock_try_acquire_session('major/s', 'shared') IS NOT NULL}), 't',
	"SHARED on $mh");
is($ht->query_ok(q{SELECT zk_lock_try_acquire_session('major/s', 'shared') IS NOT NULL}), 't',
	"SHARED on $mt beside it");

# --- each lists the other's locks, with their fields -------------------------
my $fields = q{SELECT instance, pid, database, application_name, scope, mode, granted
               FROM zk_locks WHERE resource = 'major/s' AND instance = '%s'};
is(psql1($here, sprintf($fields, 'there-inst')),
	'there-inst|' . $ht->pid . '|postgres|there_holder|session|shared|t',
	"the $mh instance's zk_locks shows the $mt one's lock with its fields");
is(psql1($there, sprintf($fields, 'here-inst')),
	'here-inst|' . $hh->pid . '|postgres|here_holder|session|shared|t',
	"the $mt instance's zk_locks shows the $mh one's lock with its fields");
$hh->query_ok(q{SELECT zk_lock_release_all()});
$ht->query_ok(q{SELECT zk_lock_release_all()});

# --- revocation across majors -------------------------------------------------
for my $dir ([ $mh, $here, $there ], [ $mt, $there, $here ])
{
	my ($revoker, $rnode, $hnode) = @$dir;
	zk_revoke_across($revoker, 'other major', $rnode, $hnode, 'major/r');
}

# --- an explicit lock of one, released from the other --------------------------
is(psql1($there, q{SELECT zk_lock_acquire_explicit('major/e', 'exclusive', '1 hour') > 0}),
	't', "the $mt instance takes an explicit lock");
is(psql1($here, q{SELECT format('%s %s', scope, granted) FROM zk_locks WHERE resource = 'major/e'}),
	'explicit t', "the $mh instance sees it");
is($hh->query_ok(q{SELECT zk_lock_try_acquire_session('major/e') IS NOT NULL}), 'f',
	'and cannot take the resource');
is(psql1($here, q{SELECT zk_lock_release_explicit('major/e')}), '1',
	"the $mh instance releases it");
ok(zk_wait_no_locks(zk_path('major/e'), 20), 'its node is gone');

$_->quit for ($hh, $ht);
$here->stop;
$there->stop;
zk_done_check();
done_testing();
