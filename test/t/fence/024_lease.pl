
# The commit fence is a lease (issue 9, findings 1, 3, 5 and 6), on two
# instances and one ZooKeeper:
#  - finding 1: node1's worker is stopped (SIGSTOP) past the session timeout
#    while a transaction holds a lock and has written; ZooKeeper expires the
#    session and grants node2; node1's COMMIT must fail (55P03) and nothing
#    it wrote may be visible.  A commit during a short stop, well within the
#    lease, still passes: the fence is not "worker stopped => fail";
#  - finding 3: PREPARE TRANSACTION of a writing transaction under a lost
#    session lock fails as COMMIT does;
#  - finding 6: a guard watch that could not be set (failpoint before-guard
#    = fail, as if its reply was lost with the connection) is set again, so
#    a later deletion of the node is still noticed and the commit refused;
#  - finding 5: when the worker gives its session up (zklock.hosts
#    reload), held locks are marked lost before the session is closed: at
#    the failpoint between the two, a commit under such a lock fails;
#  - zk_lock_status shows the lease's remaining time and margin.
# Needs the test build (make FAILPOINTS=1), as test/run_tests.sh makes it.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $hosts = zk_start();
my $node1 = zk_node('node1',
	extra_conf => "max_prepared_transactions = 2\nzklock.connect_timeout = '3s'");
my $node2 = zk_node('node2');

$node1->safe_psql('postgres', 'CREATE TABLE guarded(v int)');



# --- the lease is shown ------------------------------------------------------
my ($remaining, $margin, $timeout);
wait_until(
	sub {
		($remaining, $margin, $timeout) = split /\|/,
		  psql1($node1,
			'SELECT coalesce(lease_remaining, 0), lease_margin, session_timeout FROM zk_lock_status');
		return $remaining > $margin;
	},
	timeout => 10);
is($margin, '500', 'zk_lock_status shows the lease margin');
ok($remaining > $margin && $remaining <= $timeout,
	"zk_lock_status shows the lease left ($remaining ms of a $timeout ms session timeout)");

# --- finding 1: a stalled worker ---------------------------------------------
my $worker = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
my $h = zk_session($node1, 'holder');

# a short stop, well within the lease: the commit passes
$h->query_ok('BEGIN');
$h->query_ok(q{SELECT zk_lock_acquire('lease/a')});
$h->query_ok('INSERT INTO guarded VALUES (1)');
kill 'STOP', $worker;
my $r = $h->query('COMMIT');
kill 'CONT', $worker;
is($r->{err} // '', '', 'a commit while the worker is stopped but the lease runs passes');
is(psql1($node1, 'SELECT count(*) FROM guarded'), '1', '... and its write is visible');

# a stop past the session timeout: the session expires, node2 is granted,
# and node1's commit must not land
$h->query_ok('BEGIN');
$h->query_ok(q{SELECT zk_lock_acquire('lease/a')});
$h->query_ok('INSERT INTO guarded VALUES (2)');
my $w = zk_session($node2, 'waiter');
$w->send(q{SELECT zk_lock_acquire('lease/a', timeout => '30 s') > 0});
ok(wait_for_waiting($node2, $w->pid), 'node2 waits for the lock');
kill 'STOP', $worker;
my $t_stop = time();
$r = $w->wait(30);
my $granted_after = time() - $t_stop;
ok($r && $r->{out} eq 't', 'node2 is granted once node1\'s session expires');
note sprintf('node2 granted %.1f s after the stop', $granted_after);
my $t_commit = time();
$r = $h->query('COMMIT', 30);
my $commit_took = time() - $t_commit;
kill 'CONT', $worker;
is($r->{sqlstate}, '55P03', 'node1\'s COMMIT fails with 55P03 (finding 1)');
like($r->{err}, qr/not proven held|was lost/, '... saying the lock is not proven held');
cmp_ok($commit_took, '<', 4 + 3 + 5,
	sprintf('... within session_timeout + connect_timeout (%.1f s)', $commit_took));
is(psql1($node1, 'SELECT count(*) FROM guarded'), '1',
	'nothing the fenced transaction wrote is visible');
$w->query_ok('SELECT 1');
ok(zk_wait_connected($node1, 30), 'node1\'s worker has a new session');

# --- a worker that stalls after taking a request: the wait ends, bounded ------
{
	my $holder = zk_session($node1, 'holder_w');
	$holder->query_ok(q{SELECT zk_lock_acquire_session('lease/w', parents => false)});
	my $waiter = zk_session($node1, 'waiter_w');
	$waiter->send(q{SELECT zk_lock_acquire('lease/w', parents => false)});
	ok(wait_for_waiting($node1, $waiter->pid), 'a waiter queues behind the holder');
	ok(zk_wait_count(zk_path('lease/w'), 2, 10), 'the worker has taken its request');
	my $pid = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
	kill 'STOP', $pid;
	my $t = time();
	my $res = $waiter->wait(30);
	my $took = time() - $t;
	kill 'CONT', $pid;
	is($res && $res->{sqlstate}, '55000', 'the wait ends with 55000 when the worker stalls after taking the request');
	like($res && $res->{err}, qr/zklock worker is not responding/, '... saying the worker does not respond');
	cmp_ok($took, '<', 3 + 1 + 6, sprintf('... within connect_timeout and a second (%.1f s)', $took));
	$holder->query_ok(q{SELECT zk_lock_release_all()});
	ok(zk_wait_count(zk_path('lease/w'), 0, 10), 'and nothing is left behind');
	$holder->quit;
	$waiter->quit;
}

# --- a lock taken again is proven held again ---------------------------------
# (every path that reports a lock as held checks the lease: a stacked acquire
# returns the token only while the session is proven alive)
{
	my $s1 = zk_session($node1, 'stacker');
	$s1->query_ok(q{SELECT zk_lock_acquire_session('lease/s', parents => false)});
	my $s2 = zk_session($node2, 'stack_waiter');
	$s2->send(q{SELECT zk_lock_acquire_session('lease/s', parents => false) > 0});
	ok(wait_for_waiting($node2, $s2->pid), 'node2 waits for the lock');
	my $pid = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
	kill 'STOP', $pid;
	my $g = $s2->wait(30);
	ok($g && $g->{out} eq 't', 'node2 is granted once node1\'s session expired');
	my $res = $s1->query(q{SELECT zk_lock_try_acquire_session('lease/s', parents => false)}, 30);
	kill 'CONT', $pid;
	is($res->{sqlstate}, '55P03',
		'taking the lock again on node1 fails instead of returning its token');
	$s2->query_ok(q{SELECT zk_lock_release_all()});
	$s1->query(q{SELECT zk_lock_release_all()});
	$s1->quit;
	$s2->quit;
	ok(zk_wait_connected($node1, 30), 'node1\'s worker has a new session');
}

# --- finding 3: PREPARE of a write under session locks ---------------------
# COMMIT PREPARED comes later, from any session, and cannot be fenced: so no
# transaction can be prepared while its backend holds session locks, whether
# the lock is still held or already lost.
$h->query_ok(q{SELECT zk_lock_acquire_session('lease/p')});
$h->query_ok('BEGIN');
$h->query_ok('INSERT INTO guarded VALUES (3)');
$r = $h->query(q{PREPARE TRANSACTION 'lease_p'});
is($r->{sqlstate}, '0A000', 'PREPARE under a held session lock is refused (finding 3)');
like($r->{err}, qr/COMMIT PREPARED is not fenced/, '... saying why');
my ($path) = zk_lock_nodes(zk_path('lease/p'));
my ($rc) = ZkLockTest::zkutil('delete-r', $path);
is($rc, 0, 'an administrator deletes the session lock\'s node');
ok( wait_until(
		sub {
			psql1($node1, q{SELECT count(*) FROM zk_lock_local WHERE state = 'lost'}) eq '1';
		},
		timeout => 10),
	'the worker notices');
$h->query_ok('BEGIN');
$h->query_ok('INSERT INTO guarded VALUES (3)');
$r = $h->query(q{PREPARE TRANSACTION 'lease_p'});
is($r->{sqlstate}, '0A000', 'so is PREPARE under a lost session lock');
is(psql1($node1, 'SELECT count(*) FROM pg_prepared_xacts'), '0', 'nothing was prepared');
$node1->safe_psql('postgres', q{ROLLBACK PREPARED 'lease_p'})
  if psql1($node1, 'SELECT count(*) FROM pg_prepared_xacts') ne '0';
is(psql1($node1, 'SELECT count(*) FROM guarded'), '1', '... and neither write is visible');
$h->query(q{SELECT zk_lock_release_all()});
$h->query_ok('BEGIN');
$h->query_ok('INSERT INTO guarded VALUES (3)');
$r = $h->query(q{PREPARE TRANSACTION 'lease_ok'});
is($r->{err} // '', '', 'without session locks the transaction can be prepared');
$node1->safe_psql('postgres', q{ROLLBACK PREPARED 'lease_ok'});

# --- finding 6: a guard that could not be set is set again --------------------
my $log_at = -s $node1->logfile;
zk_set_failpoints($node1, 'before-guard=fail');
ok(wait_until(sub { psql1($node1, 'SHOW zklock.failpoints') eq 'before-guard=fail' }, timeout => 10),
	'failpoint set');
$h->query_ok('BEGIN');
$h->query_ok(q{SELECT zk_lock_acquire('lease/g', parents => false)});
$h->query_ok('INSERT INTO guarded VALUES (4)');
ok(zk_wait_log($node1, qr/failpoint "before-guard" reached \(fail\)/, $log_at),
	'the guard watch was not set');
($path) = zk_lock_nodes(zk_path('lease/g'));
($rc) = ZkLockTest::zkutil('delete-r', $path);
is($rc, 0, 'the node is deleted while no guard watches it');
zk_set_failpoints($node1, '');
ok( wait_until(
		sub {
			psql1($node1, q{SELECT count(*) FROM zk_lock_local WHERE state = 'lost'}) eq '1';
		},
		timeout => 10),
	'the guard set again finds the node gone (finding 6)');
$r = $h->query('COMMIT');
is($r->{sqlstate}, '55P03', 'and the commit is refused');
is(psql1($node1, 'SELECT count(*) FROM guarded'), '1', '... its write not visible');

# --- finding 5: held locks are lost before the session is closed ------------
$log_at = -s $node1->logfile;
zk_set_failpoints($node1, 'session-lost-before-close=pause');
ok(wait_until(sub { psql1($node1, 'SHOW zklock.failpoints') =~ /pause/ }, timeout => 10),
	'failpoint set');
$h->query_ok('BEGIN');
$h->query_ok(q{SELECT zk_lock_acquire('lease/c', parents => false)});
$h->query_ok('INSERT INTO guarded VALUES (5)');
# the same server under another name: the worker gives its session up
(my $other_hosts = $hosts) =~ s/127\.0\.0\.1/localhost/g;
$node1->safe_psql('postgres', "ALTER SYSTEM SET zklock.hosts = '$other_hosts'");
$node1->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok(zk_wait_log($node1, qr/failpoint "session-lost-before-close" reached/, $log_at, 20),
	'the worker stops between giving the session up and closing it');
is(zk_count_locks(zk_path('lease/c')), 1, 'the old session\'s node still exists');
$r = $h->query('COMMIT', 30);
is($r->{sqlstate}, '55P03', 'a commit at that point fails: the lock is already lost (finding 5)');
zk_set_failpoints($node1, '');
ok(zk_wait_log($node1, qr/failpoint "session-lost-before-close" released/, $log_at, 20),
	'the worker goes on');
ok(zk_wait_connected($node1, 30), 'node1 connects again');
ok(zk_wait_count(zk_path('lease/c'), 0, 15), 'the old session\'s node is gone');
is(psql1($node1, 'SELECT count(*) FROM guarded'), '1', 'no fenced write is visible');

$h->quit;
$w->quit;
zk_done_check();
done_testing();
