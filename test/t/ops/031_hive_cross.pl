
# Hive's lock manager across two instances (issue 4):
#  - hierarchy: a partition writer on one instance keeps the table from an
#    EXCLUSIVE lock on the other, while a writer of another partition runs
#    side by side; parents => false locks one node alone;
#  - lock sets taken in opposite orders on both instances at once never
#    deadlock (canonical order), and each set is all or none;
#  - an explicit lock survives a restart of its instance, blocks the other
#    instance, and is removed by the other instance's worker when it expires
#    while its own instance is down;
#  - revocation and force release from the other instance, logged on both:
#    a revoked holder's statement is canceled and the waiter proceeds; a
#    force-released transaction cannot commit.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my $node1 = zk_node('node1', extra_conf => "zklock.sweep_interval = '500ms'");
my $node2 = zk_node('node2', extra_conf => "zklock.sweep_interval = '500ms'");

# --- hierarchy ---------------------------------------------------------------
my $p1 = zk_session($node1, 'part_writer');
$p1->query_ok(q{SELECT zk_lock_acquire_session('db/t/p1')});
is(psql1($node2, q{SELECT zk_lock_try_acquire('db/t') IS NULL}), 't',
	'node2 cannot lock the table EXCLUSIVE while node1 writes a partition');
is(psql1($node2, q{SELECT zk_lock_try_acquire('db/t', parents => false) IS NULL}), 't',
	'nor the table node alone (the writer\'s SHARED lock sits on it)');
is(psql1($node2, q{SELECT zk_lock_try_acquire('db/t', 'shared') > 0}), 't',
	'a SHARED table lock is granted');
is(psql1($node2, q{SELECT zk_lock_try_acquire('db/t/p2') > 0}), 't',
	'a writer of another partition runs side by side');
is(psql1($node2, q{SELECT zk_lock_try_acquire('db/t/p1') IS NULL}), 't',
	'a writer of the same partition does not');
my $tw = zk_session($node2, 'table_writer');
$tw->send(q{SELECT zk_lock_acquire('db/t', timeout => '20 s') > 0});
ok(wait_for_waiting($node2, $tw->pid), 'the table writer waits on node2');
$p1->query_ok(q{SELECT zk_lock_release('db/t/p1')});
my $r = $tw->wait(20);
ok($r && $r->{out} eq 't', 'and is granted when the partition writer releases');

# --- lock sets in opposite orders --------------------------------------------
my @sets = (
	[ $node1, q{ARRAY['set/a', 'set/b/x', 'set/c']} ],
	[ $node2, q{ARRAY['set/c', 'set/b/x', 'set/a']} ],
	[ $node1, q{ARRAY['set/b/x', 'set/c', 'set/a']} ],
	[ $node2, q{ARRAY['set/a', 'set/c', 'set/b/x']} ]);
my @ss;
for my $i (0 .. $#sets)
{
	my ($node, $arr) = @{ $sets[$i] };
	my $s = zk_session($node, "set$i");
	push @ss, [ $s, $arr ];
}
my $rounds = 15;
my $t0 = time();
for my $round (1 .. $rounds)
{
	$_->[0]->send(qq{BEGIN; SELECT array_length(zk_lock_acquire_all($_->[1], NULL, '20 s'), 1); SELECT pg_sleep(0.005); COMMIT;})
	  for @ss;
	my $ok = 1;
	for (@ss)
	{
		my $res = $_->[0]->wait(30);
		$ok = 0
		  unless $res
		  && $res->{sqlstate} eq '00000'
		  && $res->{out} =~ /^3$/m
		  && $res->{err} !~ /ERROR/;
		diag(explain($res)) unless $ok;
	}
	if (!$ok) { fail("round $round of opposite-order sets"); last; }
}
pass(sprintf('%d rounds of 4 sets in opposite orders on two instances, no deadlock (%.1f s)',
		$rounds, time() - $t0));

# all or none: one member held on node1, a try set on node2 gets nothing
$p1->query_ok(q{SELECT zk_lock_acquire_session('set/c')});
is(psql1($node2, q{SELECT zk_lock_try_acquire_all_session(ARRAY['set/a', 'set/b/x', 'set/c']) IS NULL}),
	't', 'a try set with one member held on the other instance is refused');
ok(zk_wait_count(zk_path('set/a'), 0, 10), 'and leaves no node on its other members');
$p1->query_ok(q{SELECT zk_lock_release('set/c')});

# --- explicit locks ----------------------------------------------------------
psql1($node1, q{SELECT zk_lock_acquire_explicit('ex/tbl', 'exclusive', ttl => '1 hour')});
$node1->restart;
ok(ZkLockTest::zk_wait_connected($node1, 30), 'node1 restarted and connected');
is(psql1($node2, q{SELECT count(*) FROM zk_locks WHERE resource = 'ex/tbl' AND scope = 'explicit' AND granted}),
	'1', 'the explicit lock survived the restart of its instance');
is(psql1($node2, q{SELECT zk_lock_try_acquire('ex/tbl') IS NULL}), 't',
	'and still excludes the other instance');
is(psql1($node2, q{SELECT zk_lock_release_explicit('ex/tbl')}), '1',
	'a superuser on the other instance removes it (UNLOCK)');
is(psql1($node2, q{SELECT zk_lock_try_acquire('ex/tbl') > 0}), 't', 'the resource is free');

psql1($node1, q{SELECT zk_lock_acquire_explicit('ex/short', 'shared', ttl => '2 s')});
$node1->stop;
ok( wait_until(
		sub { psql1($node2, q{SELECT count(*) FROM zk_locks WHERE resource = 'ex/short'}) eq '0' },
		timeout => 20),
	'an expired explicit lock of a stopped instance is removed by the other instance\'s worker');
like(slurp_file($node2->logfile), qr/removing expired explicit lock node ".*ex\/short/,
	'node2 logged the removal');
$node1->start;
ok(ZkLockTest::zk_wait_connected($node1, 30), 'node1 is back');

# --- revocation from the other instance --------------------------------------
my $h = zk_session($node1, 'revoked_holder');
$h->send(q{BEGIN; SELECT zk_lock_acquire('rv/r'); SELECT pg_sleep(60);});
ok(zk_wait_count(zk_path('rv/r'), 1, 10), 'the holder on node1 has its node');
# the revocation must find the holder in its sleep, not still in the acquire
ok( wait_until(
		sub {
			psql1($node1, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $h->pid) eq 'PgSleep';
		},
		timeout => 10),
	'the holder has the lock and sleeps');
my $w = zk_session($node2, 'revoke_waiter');
$w->send(q{SELECT zk_lock_acquire('rv/r', timeout => '20 s') > 0});
ok(wait_for_waiting($node2, $w->pid), 'a waiter on node2 queues');
is(psql1($node2, q{SELECT zk_lock_revoke('rv/r', 'cancel')}), '1',
	'zk_lock_revoke on node2 asks the one holder to give up');
$r = $w->wait(20);
ok($r && $r->{out} eq 't', 'the waiter on node2 is granted');
$r = $h->wait(20);
is($r && $r->{sqlstate}, '57014', 'the holder\'s statement was canceled');
$h->query('ROLLBACK');
like(slurp_file($node1->logfile), qr/lock node ".*rv\/r\/.*" was revoked; canceling the statement of backend/,
	'the holder\'s instance logged the revocation');
like(slurp_file($node2->logfile), qr/revoked \(cancel\) exclusive lock node .*rv\/r/,
	'the revoking instance logged it too');

# --- force release from the other instance -----------------------------------
$node1->safe_psql('postgres', 'CREATE TABLE guarded(v int)');
my $f = zk_session($node1, 'forced_holder');
$f->query_ok('BEGIN');
$f->query_ok(q{SELECT zk_lock_acquire('fr/r')});
$f->query_ok('INSERT INTO guarded VALUES (1)');
is(psql1($node2, q{SELECT zk_lock_force_release('fr/r')}), '1',
	'zk_lock_force_release on node2 removes the holder\'s node');
ok( wait_until(
		sub { psql1($node1, q{SELECT count(*) FROM zk_lock_local WHERE state = 'lost'}) eq '1' },
		timeout => 10),
	'the holder\'s worker sees its node go');
$r = $f->query('COMMIT');
is($r->{sqlstate}, '55P03', 'the force-released transaction cannot commit');
is(psql1($node1, 'SELECT count(*) FROM guarded'), '0', 'and its write is not visible');
like(slurp_file($node2->logfile), qr/force-released exclusive lock node .*fr\/r/,
	'the releasing instance logged it');
like(slurp_file($node1->logfile), qr/lock node ".*fr\/r\/.*" was force-released by an administrator/,
	'the holder\'s instance logged it (asked first: issue 28)');

zk_done_check();
done_testing();
