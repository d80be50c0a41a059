
# A rolling upgrade: an instance running zklock's last release (git revision
# 2e55121, extension 1.1, node data format 1) and one running this tree's
# library (1.2 or later, format 2, "v=2" first) share one ZooKeeper root.
#  - each one's zk_locks shows the other's locks with their fields (pid,
#    database, user, application, scope, implicit, since, query);
#  - they exclude each other: EXCLUSIVE against EXCLUSIVE either way,
#    SHARED with SHARED together, SHARED against EXCLUSIVE;
#  - zk_lock_revoke on either one reaches a holder on the other;
#  - an explicit lock taken on the new one is seen, and released, from the
#    old one.
# The old library is built by test/run_tests.sh (test/build_old.sh) and
# named by ZKLOCK_OLD_INSTALL; without it this test fails, never skips.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;

my $old_install = $ENV{ZKLOCK_OLD_INSTALL} // '';
ok($old_install ne '' && -x "$old_install/bin/postgres"
	  && -f "$old_install/lib/zklock.so",
	"the last release's zklock is installed (ZKLOCK_OLD_INSTALL=$old_install)")
  or do
{
	# this file fails; the rest of the suite runs on (BAIL_OUT would stop it)
	diag('ZKLOCK_OLD_INSTALL must name a PostgreSQL installation with zklock 2e55121 (test/build_old.sh; test/run_tests.sh builds it as root from a clone)');
	done_testing();
	exit 1;
};

zk_start();
# a rolling upgrade from 1.4 or earlier sets zklock.guard_by_listing off on
# the upgraded instances, so that the old ones' revocations (which post no
# note to the holder's mailbox) are acted on at once; 079 runs with it on
my $new = zk_node('new', node_name => 'new-inst',
	extra_conf => 'zklock.guard_by_listing = off');
my $old = zk_node('old', node_name => 'old-inst', install_path => $old_install);

is(psql1($old, q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
	'1.1', 'the old instance runs extension 1.1');
is(psql1($old, q{SELECT default_version FROM pg_available_extensions WHERE name = 'zklock'}),
	'1.1', 'and knows no later version');
my $new_version = psql1($new,
	q{SELECT default_version FROM pg_available_extensions WHERE name = 'zklock'});
cmp_ok($new_version, 'ge', '1.2', "this tree's default version is 1.2 or later ($new_version)");
is(psql1($new, q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
	$new_version, "the new instance runs extension $new_version");

# --- each one lists the other's locks, with their fields -----------------
my $ho = zk_session($old, 'old_holder');
$ho->query_ok(q{SELECT zk_lock_acquire_session('roll/a', 'shared')});
my $hn = zk_session($new, 'new_holder');
$hn->query_ok(q{BEGIN});
$hn->query_ok(q{SELECT zk_lock_acquire('roll/b')});

my ($na) = zk_lock_nodes(zk_path('roll/a'));
my ($nb) = zk_lock_nodes(zk_path('roll/b'));
my ($rc, $data_a) = ZkLockTest::zkutil('get', $na);
unlike($data_a, qr/^v=/, 'the old instance writes format 1 (no v= line)');
($rc, my $data_b) = ZkLockTest::zkutil('get', $nb);
like($data_b, qr/^v=2\n instance=new-inst\n/x, 'the new instance writes format 2');
# format 2 is format 1 after its first line: the same keys in the same order
my $keys = sub { join(',', map { (split /=/)[0] } split /\n/, $_[0]) };
is($keys->($data_a), 'instance,pid,database,user,application,vxid,scope,implicit,since,query',
	"the old instance's node: format 1's fields");
is($keys->($data_b), 'v,' . $keys->($data_a),
	"the new instance's node: the same fields after v=2");

my $fields = q{SELECT instance, pid, database, username, application_name,
                      scope, implicit, since IS NOT NULL, granted, mode, query
               FROM zk_locks WHERE resource = '%s'};
my $pn = $hn->pid;
my $po = $ho->pid;
like(psql1($old, sprintf($fields, 'roll/b')),
	qr/^new-inst\|$pn\|postgres\|\w+\|new_holder\|transaction\|f\|t\|t\|exclusive\|SELECT zk_lock_acquire\('roll\/b'\);?$/,
	"the old instance's zk_locks shows the new one's lock with its fields");
like(psql1($new, sprintf($fields, 'roll/a')),
	qr/^old-inst\|$po\|postgres\|\w+\|old_holder\|session\|f\|t\|t\|shared\|SELECT zk_lock_acquire_session\('roll\/a', 'shared'\);?$/,
	"the new instance's zk_locks shows the old one's lock with its fields");

# a parent's implicit lock, and a rewrite of scope= by the new one, as read
# by the old one
$hn->query_ok(q{SELECT zk_lock_acquire_session('roll/b')});
is(psql1($old, q{SELECT scope, implicit FROM zk_locks WHERE resource = 'roll/b'}),
	'session|f', "the old instance reads the new one's rewritten scope");
$hn->query_ok(q{COMMIT});
$hn->query_ok(q{SELECT zk_lock_release('roll/b')});
$hn->query_ok(q{SELECT zk_lock_acquire_session('roll/p/c')});
is(psql1($old, q{SELECT string_agg(format('%s %s %s', resource, mode, implicit), ',' ORDER BY resource)
                 FROM zk_locks WHERE resource LIKE 'roll/p%'}),
	'roll/p shared t,roll/p/c exclusive f',
	"the old instance reads the new one's implicit parent lock");
$hn->query_ok(q{SELECT zk_lock_release_all()});

# --- they exclude each other ------------------------------------------------
# SHARED with SHARED: the new one joins the old one's shared lock at once
is($hn->query_ok(q{SELECT zk_lock_try_acquire_session('roll/a', 'shared') IS NOT NULL}), 't',
	'SHARED on the new instance is granted beside SHARED on the old one');
# EXCLUSIVE on the old one waits for both
my $xo = zk_session($old, 'old_exclusive');
$xo->send(q{SELECT zk_lock_acquire_session('roll/a', 'exclusive', timeout => '30 s') > 0});
ok(wait_for_waiting($old, $xo->pid), 'EXCLUSIVE on the old instance waits behind both');
is(psql1($new, q{SELECT string_agg(format('%s %s %s', mode, granted, blocked_by_instance), ',' ORDER BY node)
                 FROM zk_locks WHERE resource = 'roll/a' AND NOT granted}),
	'exclusive f new-inst',
	"the new instance's zk_locks: the old one's waiter is blocked by the new one's node");
$ho->query_ok(q{SELECT zk_lock_release('roll/a', 'shared')});
ok(!$xo->done, 'it still waits for the new instance\'s SHARED');
$hn->query_ok(q{SELECT zk_lock_release('roll/a', 'shared')});
my $r = $xo->wait(30);
ok($r && $r->{out} eq 't', 'and is granted once the new one releases');

# EXCLUSIVE against EXCLUSIVE, old holding
is($hn->query_ok(q{SELECT zk_lock_try_acquire_session('roll/a') IS NOT NULL}), 'f',
	'EXCLUSIVE on the new instance is refused while the old one holds it');
is($hn->query_ok(q{SELECT zk_lock_try_acquire_session('roll/a', 'shared') IS NOT NULL}), 'f',
	'so is SHARED');
$xo->query_ok(q{SELECT zk_lock_release_all()});
is($hn->query_ok(q{SELECT zk_lock_try_acquire_session('roll/a') IS NOT NULL}), 't',
	'EXCLUSIVE on the new instance once the old one released');
# EXCLUSIVE against EXCLUSIVE, new holding
is($xo->query_ok(q{SELECT zk_lock_try_acquire_session('roll/a') IS NOT NULL}), 'f',
	'EXCLUSIVE on the old instance is refused while the new one holds it');
$xo->send(q{SELECT zk_lock_acquire_session('roll/a', timeout => '30 s') > 0});
ok(wait_for_waiting($old, $xo->pid), 'the old instance waits');
$hn->query_ok(q{SELECT zk_lock_release_all()});
$r = $xo->wait(30);
ok($r && $r->{out} eq 't', 'the old one is granted once the new one releases');
$xo->query_ok(q{SELECT zk_lock_release_all()});
$ho->query_ok(q{SELECT zk_lock_release_all()});

# --- revocation across versions ---------------------------------------------
for my $dir ([ 'new', $new, $old ], [ 'old', $old, $new ])
{
	my ($revoker, $rnode, $hnode) = @$dir;
	zk_revoke_across($revoker, 'other instance', $rnode, $hnode, 'roll/r');
}

# --- an explicit lock of the new one, from the old one -------------------------
is(psql1($new, q{SELECT zk_lock_acquire_explicit('roll/e', 'exclusive', '1 hour') > 0}),
	't', 'the new instance takes an explicit lock');
is(psql1($old, q{SELECT format('%s %s %s', scope, expires > now(), granted) FROM zk_locks WHERE resource = 'roll/e'}),
	'explicit t t', 'the old instance sees it, with its expiry');
is($xo->query_ok(q{SELECT zk_lock_try_acquire_session('roll/e') IS NOT NULL}), 'f',
	'and cannot take the resource');
is(psql1($old, q{SELECT zk_lock_release_explicit('roll/e')}), '1',
	'the old instance releases it');
ok(zk_wait_no_locks(zk_path('roll/e'), 20), 'its node is gone');

$_->quit for ($ho, $hn, $xo);
$new->stop;
$old->stop;
zk_done_check();
done_testing();
