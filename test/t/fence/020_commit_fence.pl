
# The commit fence and lost-lock reporting (issue 3), on two instances:
#  - a transaction whose lock node an administrator deleted cannot commit,
#    and nothing it wrote becomes visible; meanwhile the other instance is
#    granted the lock;
#  - a session-level holder whose node was deleted is told on its next
#    zklock call (ERROR on acquire, WARNING on release), and a transaction
#    that writes under that lost lock cannot commit;
#  - zk_lock_local shows the lost lock;
#  - kill -9 of the worker: the instance's nodes vanish as soon as the new
#    worker is up (well before the session timeout, set long here), and a
#    waiter on the other instance proceeds;
#  - a stopped (SIGSTOP) worker: a request fails with 55000 within
#    connect_timeout instead of waiting without a bound;
#  - kill -9 of the postmaster: once the instance is started again, its old
#    nodes go and the waiter on the other instance proceeds, well before the
#    30 s session timeout.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
# a long session timeout, so that prompt cleanup cannot be expiry
my $node1 = zk_node('node1', session_timeout => '30s',
	extra_conf => 'restart_after_crash = on');
my $node2 = zk_node('node2', session_timeout => '30s');

$node1->safe_psql('postgres', 'CREATE TABLE guarded(v int)');

# --- a transaction lock deleted by an administrator -------------------------
my $h = zk_session($node1, 'holder');
$h->query_ok('BEGIN');
my $token = $h->query_ok(q{SELECT zk_lock_acquire('fence/t')});
$h->query_ok('INSERT INTO guarded VALUES (1)');
my ($node_path) = zk_lock_nodes(zk_path('fence/t'));
ok(defined $node_path, 'the holder has a lock node');

my $w = zk_session($node2, 'waiter');
$w->send(q{SELECT zk_lock_acquire('fence/t', timeout => '20 s') > 0});
ok(wait_for_waiting($node2, $w->pid), 'the other instance waits');

my ($rc, $out, $err) = ZkLockTest::zkutil('delete-r', $node_path);
is($rc, 0, 'administrator deletes the holder\'s node');

my $r = $w->wait(20);
ok($r && $r->{out} eq 't', 'the waiter on the other instance is granted the lock');

ok( wait_until(
		sub {
			psql1($node1,
				q{SELECT count(*) FROM zk_lock_local WHERE resource = 'fence/t' AND state = 'lost'}
			) eq '1';
		},
		timeout => 10),
	'zk_lock_local shows the lock as lost');

$r = $h->query('COMMIT');
is($r->{sqlstate}, '55P03', 'COMMIT of the transaction whose lock was lost fails with 55P03');
like($r->{err}, qr/was lost; the transaction cannot commit/, 'and says why');
is(psql1($node1, 'SELECT count(*) FROM guarded'), '0',
	'nothing the fenced transaction wrote is visible');
$w->query_ok('SELECT 1');    # the waiter's statement-level lock is gone

# --- a session lock deleted by an administrator ------------------------------
$h->query_ok(q{SELECT zk_lock_acquire_session('fence/s')});
($node_path) = zk_lock_nodes(zk_path('fence/s'));
($rc) = ZkLockTest::zkutil('delete-r', $node_path);
is($rc, 0, 'administrator deletes a session lock\'s node');
ok( wait_until(
		sub {
			psql1($node1, q{SELECT count(*) FROM zk_lock_local WHERE state = 'lost'}) eq '1';
		},
		timeout => 10),
	'the worker notices');
# work done under the lost session lock does not commit; reading still works
$h->query_ok('BEGIN');
$h->query_ok('INSERT INTO guarded VALUES (2)');
$r = $h->query('COMMIT');
is($r->{sqlstate}, '55P03', 'a writing transaction under a lost session lock fails at COMMIT');
like($r->{err}, qr/"fence\/s" was lost; the transaction cannot commit/, 'naming the lock');
is(psql1($node1, 'SELECT count(*) FROM guarded'), '0', 'and its write is not visible');
$r = $h->query('SELECT count(*) FROM guarded');
is($r->{out}, '0', 'a read-only statement is not fenced');
$r = $h->query(q{SELECT zk_lock_acquire_session('fence/other')});
is($r->{sqlstate}, '55P03', 'the next acquire in that session raises 55P03');
like($r->{err}, qr/"fence\/s" \(exclusive\) was lost/, 'naming the lost lock');
$r = $h->query(q{SELECT zk_lock_release('fence/s')});
is($r->{out}, 't', 'releasing the lost lock succeeds');
like($r->{err}, qr/WARNING:.*was lost/, 'with a WARNING that it had been lost');
$h->query_ok(q{SELECT zk_lock_acquire_session('fence/other') > 0});
$h->query_ok(q{SELECT zk_lock_release_all()});

# --- a stuck worker: requests fail within connect_timeout ------------------------
{
	my $stuck_pid = psql1($node2, 'SELECT worker_pid FROM zk_lock_status');
	my $s = zk_session($node2, 'stuck');
	kill 'STOP', $stuck_pid;
	my $t_stuck = time();
	my $r1 = $s->query(q{SELECT zk_lock_try_acquire('stuck/r')}, 30);
	my $took = time() - $t_stuck;
	kill 'CONT', $stuck_pid;
	is($r1->{sqlstate}, '55000', 'a try-lock sent to a stopped worker fails with 55000');
	like($r1->{err}, qr/zklock worker is not responding/, '... saying the worker does not respond');
	cmp_ok($took, '<', 15, sprintf('... within connect_timeout (%.1f s)', $took));
	is($s->query_ok(q{SELECT zk_lock_try_acquire('stuck/r') > 0}), 't',
		'once the worker runs again, the lock is granted');
	$s->quit;
	ok(zk_wait_count(zk_path('stuck/r'), 0, 10), 'and no node is left behind');
}

# --- kill -9 of the worker -------------------------------------------------------
my $h2 = zk_session($node1, 'holder2');
$h2->query_ok(q{SELECT zk_lock_acquire_session('crash/w')});
ok(zk_wait_count(zk_path('crash/w'), 1, 10), 'holder on node1 has its node');
my $w2 = zk_session($node2, 'waiter2');
$w2->send(q{SELECT zk_lock_acquire('crash/w', timeout => '25 s') > 0});
ok(wait_for_waiting($node2, $w2->pid), 'waiter on node2 queued');

my $worker_pid = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
my $t0 = time();
kill 'KILL', $worker_pid;
$r = $w2->wait(25);
my $elapsed = time() - $t0;
ok($r && $r->{out} eq 't', 'waiter on node2 gets the lock after node1\'s worker is killed');
cmp_ok($elapsed, '<', 20,
	sprintf('... in %.1f s, well before the 30 s session timeout', $elapsed));
note sprintf('handoff after kill -9 of the worker: %.2f s', $elapsed);
$w2->query_ok('SELECT 1');

# node1 went through crash recovery; its new worker reconnects
ok(ZkLockTest::zk_wait_connected($node1, 30), 'node1 is back and connected');
like(slurp_file($node1->logfile), qr/previous ZooKeeper session (?:0x[0-9a-f]+ )?(closed|had already expired)/,
	'the new worker closed the previous session');

$_->quit for ($h, $w, $w2);

# --- kill -9 of the postmaster ---------------------------------------------------
my $h3 = zk_session($node1, 'holder3');
$h3->query_ok(q{SELECT zk_lock_acquire_session('crash/pm')});
ok(zk_wait_count(zk_path('crash/pm'), 1, 10), 'holder on node1 has its node');
my $w3 = zk_session($node2, 'waiter3');
$w3->send(q{SELECT zk_lock_acquire('crash/pm', timeout => '28 s') > 0});
ok(wait_for_waiting($node2, $w3->pid), 'waiter on node2 queued');
my $t_pm = time();
my $pm_pid = $node1->{_pid};
$node1->kill9;
# the orphaned backends and the worker see the postmaster gone and exit;
# once the old postmaster is gone, the instance can start again
my $gone = 0;
for (1 .. 300)
{
	if (!kill(0, $pm_pid)) { $gone = 1; last; }
	sleep 0.1;
}
ok($gone, 'the killed postmaster is gone');
my $started = $node1->start(fail_ok => 1);
ok($started, 'node1 starts again after kill -9 of its postmaster');
ok(ZkLockTest::zk_wait_connected($node1, 30), 'its new worker connects');
$r = $w3->wait(28);
ok($r && $r->{out} eq 't', 'the waiter on node2 gets the lock');
my $pm_elapsed = time() - $t_pm;
cmp_ok($pm_elapsed, '<', 25, sprintf('... in %.1f s, before the 30 s session timeout', $pm_elapsed));
note sprintf('the waiter on node2 was granted the lock %.2f s after kill -9 of the postmaster', $pm_elapsed);
$h3->_kill;
$w3->quit;
zk_done_check();
done_testing();
