
# A grant the backend looks at only after the worker has stopped (issue 28,
# a flake of 076's ba_sigterm): the worker granted the request, then a
# SIGTERM ended it -- it marked the lock lost and closed its session, whose
# node went with it, and another instance was granted the lock -- and only
# then did the waiting backend read its answer.  zk_lock_acquire must not
# return the lock as held then: the session that held its node is gone.
# It fails with 55P03, the entry goes back, and the backend can take the
# lock again from the next worker's session.
#
# Made deterministic with the failpoint backend-before-answer (wait.c),
# which pauses the backend just before it looks at its answer.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my $node1 = zk_node('node1');
my $node2 = zk_node('node2');
my $res = 'gae/r';
my $path = zk_path($res);

# node2 holds the lock; node1's backend waits for it, and pauses before it
# looks at its answer (one step: no parents, as a contended acquire ends)
my $t0 = zk_session($node2, 't0');
$t0->query_ok('BEGIN');
is($t0->query_ok(qq{SELECT zk_lock_acquire('$res', parents => false) > 0}),
	't', 'node2 holds the lock');
ok(zk_set_failpoints($node1, 'backend-before-answer=pause'),
	'failpoint set on node1');
my $log_offset = -s $node1->logfile;
my $s1 = zk_session($node1, 's1');
my $pid = $s1->pid;
$s1->query_ok('BEGIN');
$s1->send(qq{SELECT zk_lock_acquire('$res', parents => false)});
ok(zk_wait_log($node1, qr/failpoint "backend-before-answer" reached/, $log_offset),
	'the backend paused before looking at its answer');
ok( wait_until(
		sub {
			psql1($node1,
				"SELECT count(*) FROM zk_lock_local WHERE pid = $pid AND state = 'waiting'"
			) eq '1';
		},
		timeout => 20),
	'its request waits behind node2');

# node2 lets go: the worker grants node1's request
$t0->query_ok('COMMIT');
ok( wait_until(
		sub {
			psql1($node1,
				"SELECT count(*) FROM zk_lock_local WHERE pid = $pid AND state = 'granted'"
			) eq '1';
		},
		timeout => 20),
	'the worker granted the request meanwhile');
is(zk_count_locks($path), 1, 'its node exists');

# the worker is SIGTERMed: it marks the lock lost and closes its session
my $old = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
kill 'TERM', $old;
ok(zk_wait_count($path, 0, 20), 'the session is closed: the node is gone');

# the other instance is granted the lock
my $t2 = zk_session($node2, 't2');
$t2->query_ok('BEGIN');
is($t2->query_ok(qq{SELECT zk_lock_acquire('$res', timeout => '10 s') > 0}),
	't', 'node2 is granted the lock');
my $t2_granted = time();

# now node1's backend looks at its answer
ok(zk_set_failpoints($node1, ''), 'failpoint released');
my $r = $s1->wait(60);
ok(defined $r, 'the paused acquire returns');
note(sprintf('node1\'s acquire ended %.3f s after node2 was granted the lock: %s',
		time() - $t2_granted, $r ? ($r->{sqlstate} . ' ' . ($r->{out} // '') . ' ' . ($r->{err} // '')) : 'no answer'));
is($r && $r->{sqlstate}, '55P03',
	'zk_lock_acquire does not return a lock whose session was closed (55P03)');
like($r && $r->{err}, qr/zklock lock on resource "gae\/r" was lost as it was granted/,
	'... saying that it was lost as it was granted');
$s1->query_ok('ROLLBACK');

# the next worker: the entry was given back, and the backend works again
ok(zk_wait_connected($node1), 'node1\'s worker restarted and connected');
ok( wait_until(
		sub {
			psql1($node1, "SELECT count(*) FROM zk_lock_local WHERE pid = $pid") eq '0';
		},
		timeout => 20),
	'node1 keeps no entry of the lost grant');
$t2->query_ok('COMMIT');
$s1->query_ok('BEGIN');
is($s1->query_ok(qq{SELECT zk_lock_acquire('$res', timeout => '10 s') > 0}),
	't', 'the same backend takes the lock from the new session');
$s1->query_ok('COMMIT');

$_->quit for ($t0, $s1, $t2);
zk_done_check();
done_testing();
