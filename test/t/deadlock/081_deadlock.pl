
# Deadlocks across instances (issue 19, doc/deadlocks.md): a backend whose
# zklock wait has lasted zklock.deadlock_timeout looks for a cycle through
# itself in every instance's published long waits (and, on its own
# instance, PostgreSQL's lock waits); the youngest zklock request of a
# cycle gets 40P01, the others go on.
#  - the two-instance two-resource cross deadlock is broken within the
#    timeout plus a few seconds: exactly one 40P01 (the youngest request),
#    the other commits; DETAIL lists the cycle, the log too
#  - a three-backend cycle across two instances: one victim
#  - a chain with no cycle has no victim, after several timeouts
#  - a mixed cycle on one instance: a zklock holder waits for a row lock
#    held by a backend waiting for that zklock lock
#  - DETAIL masks the pids of other roles' backends for a role that
#    zk_locks would mask them for; the server log has them
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $timeout_s = 1;
my $conf = "zklock.deadlock_timeout = '${timeout_s}s'";
my $hosts = zk_start();
my $node1 = zk_node('node1', extra_conf => $conf);
my $node2 = zk_node('node2', extra_conf => $conf);

for my $n ($node1, $node2)
{
	$n->safe_psql('postgres', q{
		CREATE ROLE alice LOGIN;
		CREATE ROLE bob LOGIN;
		CREATE TABLE t (id int PRIMARY KEY, v int);
		INSERT INTO t VALUES (1, 0);
		GRANT ALL ON t TO PUBLIC;
	});
}

# A generous bound on detection: both members search at the timeout, and
# again each timeout; a wait sleeps at most 1 s between checks
my $bound = 2 * $timeout_s + 6;

# ---------------------------------------------------------------------------
# Publication: nothing while a wait is shorter than the timeout; the wait
# in node2's node (its session's) once it is longer; nothing once it ends.
{
	my $sid = zk_session_id($node2);
	my $published = sub { zk_published($sid) };
	my $a = zk_session_as($node1, 'pub_a');
	my $b = zk_session_as($node2, 'pub_b');
	zk_hold($a, 'pub/r');
	my $t0 = time();
	zk_ask($b, 'pub/r');
	my $early = $published->();
	ok(time() - $t0 >= $timeout_s * 0.8 || !defined $early,
		'no publication while the wait is shorter than the timeout');
	my $bpid = $b->pid;
	ok(wait_until(sub { ($published->() // '') =~ /^w\t$bpid\t\d+\tE\t[^\t]*\tpub\/r\/\S*LOCK-EXCLUSIVE-\d{10}$/m },
		timeout => $timeout_s + 5), "node2's node lists b's wait once it is longer")
	  or diag('published: ' . ($published->() // 'nothing'));
	like($published->() // '', qr/^h\t$bpid\tpub\/\S*LOCK-SHARED-\d{10}$/m,
		'and the implicit SHARED node b holds on pub');
	$a->query_ok('COMMIT');
	is($b->wait(20)->{sqlstate}, '00000', 'b is granted');
	$b->query_ok('COMMIT');
	ok(wait_until(sub { !defined $published->() }, timeout => 10),
		'node2\'s node is deleted once nobody waits');
	$_->quit for ($a, $b);
}

# ---------------------------------------------------------------------------
# The cross deadlock between two instances
{
	my $off1 = -s $node1->logfile;
	my $off2 = -s $node2->logfile;
	my $a = zk_session_as($node1, 'cross_a');
	my $b = zk_session_as($node2, 'cross_b');
	my $t0 = zk_cross($a, $b, 'dl/orders', 'dl/customers');
	my $rb = $b->wait($bound + 10);
	my $ra = $a->wait($bound + 10);
	ok(defined $ra && defined $rb, 'both requests were answered');
	my $elapsed = time() - $t0;
	is($rb->{sqlstate}, '40P01', 'the youngest request (node2\'s) is the victim: 40P01');
	like($rb->{err}, qr/ERROR:\s+40P01: deadlock detected/, 'the message is "deadlock detected"');
	is($ra->{sqlstate}, '00000', 'the other request is granted');
	ok($elapsed < $bound, "broken within ${bound}s (took " . sprintf('%.1f', $elapsed) . 's)');
	my $apid = $a->pid;
	my $bpid = $b->pid;
	like($rb->{err},
		qr/node2:$bpid waits for EXCLUSIVE lock on resource "dl\/orders" held by node1:$apid\./,
		'DETAIL: node2\'s wait, held by node1\'s backend');
	like($rb->{err},
		qr/node1:$apid waits for EXCLUSIVE lock on resource "dl\/customers" held by node2:$bpid\./,
		'DETAIL: node1\'s wait, held by node2\'s backend');
	$b->query_ok('ROLLBACK');
	$a->query_ok('COMMIT');
	ok(zk_wait_log($node2, qr/deadlock broken: process $bpid/, $off2),
		'the victim\'s instance logs the break at LOG with the cycle');
	is(zk_log_count($node1, qr/deadlock detected/, $off1), 0,
		'no error on the other instance');
	is($node2->safe_psql('postgres',
			q{SELECT deadlocks FROM zk_lock_stats WHERE resource = 'dl/orders' AND mode = 'exclusive'}),
		'1', 'zk_lock_stats counts the victim\'s deadlock on its instance');
	is($node1->safe_psql('postgres',
			q{SELECT coalesce(sum(deadlocks), 0) FROM zk_lock_stats}),
		'0', 'and none on the other instance');
	$a->quit;
	$b->quit;
	ok(zk_wait_no_locks(zk_path('dl/orders'), 10) && zk_wait_no_locks(zk_path('dl/customers'), 10),
		'no lock node left behind');
}

# ---------------------------------------------------------------------------
# Three backends, two instances: a -> b -> c -> a
{
	my $a = zk_session_as($node1, 'three_a');
	my $b = zk_session_as($node2, 'three_b');
	my $c = zk_session_as($node1, 'three_c');
	zk_hold($a, 'd3/r1');
	zk_hold($b, 'd3/r2');
	zk_hold($c, 'd3/r3');
	zk_ask($a, 'd3/r2');
	zk_ask($b, 'd3/r3');
	zk_ask($c, 'd3/r1');
	zk_result_is($c, '40P01', 'the youngest (c) gets 40P01', $bound + 10);
	zk_unwind($c, [ $b, 'b is granted r3 once c is gone' ],
		[ $a, 'a is granted r2 once b has committed' ]);
	$_->quit for ($a, $b, $c);
}

# ---------------------------------------------------------------------------
# A chain is not a cycle: a holds x1; b waits for x1 holding x2; c waits for
# x2 holding x3 (another instance); d waits for x3.  Nobody is a victim
# after several timeouts, and the chain unwinds once a commits.
{
	my $off1 = -s $node1->logfile;
	my $off2 = -s $node2->logfile;
	my $a = zk_session_as($node1, 'chain_a');
	my $b = zk_session_as($node2, 'chain_b');
	my $c = zk_session_as($node1, 'chain_c');
	my $d = zk_session_as($node2, 'chain_d');
	zk_hold($a, 'ch/x1');
	zk_hold($b, 'ch/x2');
	zk_hold($c, 'ch/x3');
	zk_ask($b, 'ch/x1');
	zk_ask($c, 'ch/x2');
	zk_ask($d, 'ch/x3');
	sleep(4 * $timeout_s + 1);
	ok(!$b->done && !$c->done && !$d->done, 'after four timeouts every waiter still waits');
	ok(zk_log_count($node1, qr/deadlock search/, $off1) + zk_log_count($node2, qr/deadlock search/, $off2) == 0,
		'no search gave up');
	is(zk_log_count($node1, qr/deadlock (found|broken)/, $off1) + zk_log_count($node2, qr/deadlock (found|broken)/, $off2), 0,
		'no cycle was found');
	$a->query_ok('COMMIT');
	is($b->wait(20)->{sqlstate}, '00000', 'b is granted once a commits');
	$b->query_ok('COMMIT');
	is($c->wait(20)->{sqlstate}, '00000', 'then c');
	$c->query_ok('COMMIT');
	is($d->wait(20)->{sqlstate}, '00000', 'then d');
	$d->query_ok('ROLLBACK');
	$_->quit for ($a, $b, $c, $d);
}

# ---------------------------------------------------------------------------
# A mixed cycle on one instance: x holds the zklock lock and waits for the
# row lock y holds; y waits for the zklock lock.  Neither PostgreSQL's
# detector nor a zklock-only graph sees it; the victim is the zklock waiter.
{
	my $x = zk_session_as($node1, 'mixed_x');
	my $y = zk_session_as($node1, 'mixed_y');
	zk_hold($x, 'mx/r');
	zk_hold_row($y, 1);
	zk_ask_row($x, 'UPDATE t SET v = v + 10 WHERE id = 1', 'x waits for the row lock');
	zk_ask($y, 'mx/r');
	my $ry = zk_result_is($y, '40P01', 'the zklock waiter gets 40P01', $bound + 10);
	my ($xpid, $ypid) = ($x->pid, $y->pid);
	like($ry->{err}, qr/node1:$xpid waits for a PostgreSQL lock held by node1:$ypid\./,
		'DETAIL names the row-lock edge');
	zk_unwind($y, [ $x, 'the row lock goes to x' ]);
	is(psql1($node1, 'SELECT v FROM t WHERE id = 1'), '10', 'x committed its update');
	$_->quit for ($x, $y);
}

# ---------------------------------------------------------------------------
# A mixed cycle across instances: y (node1) waits for r1, held by x
# (node2); x waits for the row lock w (node2) holds; w waits for r2, held by
# y.  y's request is the youngest, but only node2's backends can see the
# row-lock edge: the victim is node2's youngest zklock request in the
# cycle, w, and y is granted in the end.
{
	my $x = zk_session_as($node2, 'xmixed_x');
	my $w = zk_session_as($node2, 'xmixed_w');
	my $y = zk_session_as($node1, 'xmixed_y');
	zk_hold($x, 'mc/r1');
	zk_hold($y, 'mc/r2');
	zk_hold_row($w, 1);
	zk_ask_row($x, 'UPDATE t SET v = v + 10 WHERE id = 1', 'x waits for the row lock on node2');
	zk_ask($w, 'mc/r2');
	zk_ask($y, 'mc/r1');
	my $rw = $w->wait($bound + 10);
	ok(defined $rw && $rw->{sqlstate} eq '40P01', 'node2\'s zklock waiter gets 40P01');
	ok(!$y->done, 'y (node1, the youngest request) still waits');
	$w->query_ok('ROLLBACK');
	is($x->wait(20)->{sqlstate}, '00000', 'x gets the row lock');
	$x->query_ok('COMMIT');
	my $ry = $y->wait(20);
	is($ry && $ry->{sqlstate}, '00000', 'y is granted r1 once x has committed');
	$y->query_ok('COMMIT');
	$_->quit for ($x, $w, $y);
}

# ---------------------------------------------------------------------------
# A parent's implicit SHARED lock is a hold like any other: a holds pp/x
# (and so SHARED pp), b holds qq and waits for EXCLUSIVE pp; a waits for qq.
{
	my $a = zk_session_as($node1, 'parent_a');
	my $b = zk_session_as($node2, 'parent_b');
	zk_hold($a, 'pp/x');
	zk_hold($b, 'qq');
	zk_ask($b, 'pp');
	zk_ask($a, 'qq');
	my $ra = zk_result_is($a, '40P01', 'the youngest (a) gets 40P01', $bound + 10);
	like($ra->{err}, qr/waits for EXCLUSIVE lock on resource "pp" held by node1:/,
		'DETAIL: b waits for pp, held (implicitly) by a');
	zk_unwind($a, [ $b, 'b is granted pp' ]);
	$_->quit for ($a, $b);
}

# ---------------------------------------------------------------------------
# SHARED requests: SHARED holders do not block each other, but a SHARED
# request waits behind an earlier EXCLUSIVE one (fair queue).  a holds
# SHARED sh/x; c waits for EXCLUSIVE sh/x behind it; b holds sh/y and asks
# SHARED sh/x: it waits behind c, not behind a.  Then a asks sh/y: a -> b
# -> c -> a is a cycle, a the youngest.
{
	my $a = zk_session_as($node1, 'shared_a');
	my $b = zk_session_as($node2, 'shared_b');
	my $c = zk_session_as($node2, 'shared_c');
	$a->query_ok('BEGIN');
	$a->query_ok(q{SELECT zk_lock_acquire('sh/x', 'shared') IS NOT NULL});
	zk_hold($b, 'sh/y');
	$c->query_ok('BEGIN');
	zk_ask($c, 'sh/x');
	$b->send(q{SELECT zk_lock_acquire('sh/x', 'shared') IS NOT NULL});
	ok(wait_for_queued($node2, $b->pid), 'b\'s SHARED request waits behind c\'s EXCLUSIVE one');
	zk_ask($a, 'sh/y');
	my $ra = zk_result_is($a, '40P01', 'a gets 40P01', $bound + 10);
	like($ra->{err}, qr/waits for SHARED lock on resource "sh\/x" held by node2:/,
		'DETAIL: b\'s SHARED wait is blocked by c');
	zk_unwind($a, [ $c, 'c is granted sh/x' ], [ $b, 'then b' ]);
	$_->quit for ($a, $b, $c);
}

# ---------------------------------------------------------------------------
# Masking: alice is the victim; bob's pid on node1 is not hers to see
{
	my $off2 = -s $node2->logfile;
	my $a = zk_session_as($node1, 'mask_bob', 'bob');
	my $b = zk_session_as($node2, 'mask_alice', 'alice');
	zk_cross($a, $b, 'dm/orders', 'dm/customers');
	my $rb = zk_result_is($b, '40P01', 'alice\'s request is the victim', $bound + 10);
	my ($apid, $bpid) = ($a->pid, $b->pid);
	like($rb->{err}, qr/node2:$bpid waits for EXCLUSIVE lock on resource "dm\/orders" held by node1:\?\./,
		'alice sees her own pid, not bob\'s');
	unlike($rb->{err}, qr/node1:$apid/, 'bob\'s pid is not in alice\'s DETAIL');
	ok(zk_wait_log($node2, qr/node1:$apid waits for EXCLUSIVE lock on resource "dm\/customers"/, $off2),
		'the server log has it');
	zk_unwind($b, [ $a, 'bob is granted' ]);
	$_->quit for ($a, $b);
}

# ---------------------------------------------------------------------------
# Semaphores of limit 1 are mutexes: their cross deadlock is broken too.
# A semaphore of limit 2 is out of scope (any holder frees a waiter): its
# waits are not searched, so the same pattern stays until a timeout.
{
	my $a = zk_session_as($node1, 'sem_a');
	my $b = zk_session_as($node2, 'sem_b');
	$a->query_ok('BEGIN');
	$a->query_ok(q{SELECT zk_semaphore_acquire('ds/one', 1) IS NOT NULL});
	$b->query_ok('BEGIN');
	$b->query_ok(q{SELECT zk_semaphore_acquire('ds/two', 1) IS NOT NULL});
	$a->send(q{SELECT zk_semaphore_acquire('ds/two', 1) IS NOT NULL});
	ok(wait_for_waiting($node1, $a->pid), 'a waits for ds/two');
	$b->send(q{SELECT zk_semaphore_acquire('ds/one', 1) IS NOT NULL});
	ok(wait_for_waiting($node2, $b->pid), 'b waits for ds/one');
	zk_result_is($b, '40P01', 'limit 1: the youngest gets 40P01', $bound + 10);
	zk_unwind($b, [ $a, 'the other is granted' ]);

	my $c = zk_session_as($node2, 'sem_c');
	$a->query_ok('BEGIN');
	$a->query_ok(q{SELECT zk_semaphore_acquire('ds2/one', 1) IS NOT NULL});
	$b->query_ok('BEGIN');
	$b->query_ok(q{SELECT zk_semaphore_acquire('ds2/two', 2) IS NOT NULL});
	$c->query_ok('BEGIN');
	$c->query_ok(q{SELECT zk_semaphore_acquire('ds2/two', 2) IS NOT NULL});
	# b and c hold the two slots of ds2/two
	$a->send(q{SELECT zk_semaphore_acquire('ds2/two', 2, '4 s') IS NOT NULL});
	ok(wait_for_waiting($node1, $a->pid), 'a waits for a slot of ds2/two');
	$b->send(q{SELECT zk_semaphore_acquire('ds2/one', 1) IS NOT NULL});
	ok(wait_for_waiting($node2, $b->pid), 'b waits for ds2/one');
	my $ra = $a->wait(20);
	is($ra && $ra->{sqlstate}, '55P03', 'limit 2: no victim, the timeout ends the wait');
	$a->query_ok('ROLLBACK');
	is($b->wait(20)->{sqlstate}, '00000', 'b is granted');
	$b->query_ok('COMMIT');
	$c->query_ok('COMMIT');
	$_->quit for ($a, $b, $c);
}

# ---------------------------------------------------------------------------
# A victim granted while it verifies is never picked: node2's victim sleeps
# (failpoint) between finding the cycle again and withdrawing; meanwhile
# node1's member is cancelled, which frees the victim's resource.  The
# victim then has its lock, and no 40P01.
{
	ok(zk_set_failpoints($node2, 'deadlock-before-withdraw=sleep:3000'),
		'failpoint set on node2');
	my $off2 = -s $node2->logfile;
	my $a = zk_session_as($node1, 'granted_a');
	my $b = zk_session_as($node2, 'granted_b');
	zk_cross($a, $b, 'dg/orders', 'dg/customers');
	ok(zk_wait_log($node2, qr/failpoint "deadlock-before-withdraw" reached/, $off2, $bound + 10),
		'the victim has verified the cycle');
	psql1($node1, 'SELECT pg_cancel_backend(' . $a->pid . ')');
	my $ra = $a->wait(20);
	is($ra && $ra->{sqlstate}, '57014', 'node1\'s member is cancelled');
	$a->query_ok('ROLLBACK');
	my $rb = $b->wait(20);
	is($rb && $rb->{sqlstate}, '00000', 'the victim was granted meanwhile: its lock, no 40P01');
	is(zk_log_count($node2, qr/deadlock broken/, $off2), 0, 'no break logged');
	$b->query_ok('COMMIT');
	ok(zk_set_failpoints($node2, ''), 'failpoint cleared');
	$_->quit for ($a, $b);
}

# ---------------------------------------------------------------------------
# A waiter that searches is ended by pg_terminate_backend: nothing of it
# stays (its request and any search's request are withdrawn at exit).
{
	my $a = zk_session_as($node1, 'term_a');
	my $b = zk_session_as($node2, 'term_b');
	zk_hold($a, 'dt/r');
	zk_ask($b, 'dt/r');
	sleep(3 * $timeout_s + 0.5);
	psql1($node2, 'SELECT pg_terminate_backend(' . $b->pid . ')');
	$b->wait(20);
	ok(zk_wait_no_entries($node2, 10), 'node2 has no entry left');
	$a->query_ok('COMMIT');
	$a->quit;
}

# ---------------------------------------------------------------------------
# The advisory-lock API is the same locks: two sessions on two instances
# taking keys 1 and 2 crosswise are a deadlock, and one gets 40P01
# (PostgreSQL's own advisory locks would give it too).
{
	my $a = zk_session_as($node1, 'adv_a');
	my $b = zk_session_as($node2, 'adv_b');
	$a->query_ok('BEGIN');
	$a->query_ok('SELECT zk_advisory_xact_lock(81001)');
	$b->query_ok('BEGIN');
	$b->query_ok('SELECT zk_advisory_xact_lock(81002)');
	$a->send('SELECT zk_advisory_xact_lock(81002)');
	ok(wait_for_waiting($node1, $a->pid), 'a waits for key 81002');
	$b->send('SELECT zk_advisory_xact_lock(81001)');
	my $rb = $b->wait($bound + 10);
	my $ra = $a->wait($bound + 10);
	is(join(',', sort map { $_->{sqlstate} } grep { defined } ($ra, $rb)), '00000,40P01',
		'advisory keys taken crosswise: one 40P01, the other granted');
	$_->query_ok('ROLLBACK') for ($a, $b);
	$_->quit for ($a, $b);
}

# the publication is gone once nobody waits
ok(zk_wait_no_publication(10), 'no instance publishes a long wait once none waits');

is(scalar(zk_log_crashes($node1)) + scalar(zk_log_crashes($node2)), 0, 'no crash');
done_testing();
