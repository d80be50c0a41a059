
# Deadlock detection's cost and its bounds (doc/deadlocks.md, "The search",
# "Cost", "Known limits"), attacked with zklock.deadlock_timeout = 200 ms:
#  - a mixed cycle closed LATE by a row-lock wait (the zklock waiter's
#    searches spaced out to eight timeouts) is broken within eight
#    timeouts (plus slack); the other party proceeds
#  - a cross-instance cycle closed late by a NEW zklock wait is broken by
#    that wait's own early searches, not delayed by the old wait's spacing
#  - a mixed cycle across instances closed by a new remote zklock wait
#    (only the row-lock instance can see it) is broken within the
#    timeout plus eight timeouts
#  - a stalled worker (2 s) while such a cycle closes: broken within eight
#    timeouts of its resumption, a give-up logged once
#  - cycles of three and four backends, SHARED and EXCLUSIVE mixed: one
#    victim, the youngest request
#  - cost: 24 long waits on two instances for 4 s make ZooKeeper receive
#    a bounded number of packets (the schedule's, about three per search
#    of each wait every eight timeouts), not one search per wait per
#    timeout (the old schedule's: over 1,400 packets)
#  - size: with each of the 24 waiters holding 40 locks (about 1,000
#    published holds), a cycle closed through the queue is broken by its
#    youngest request's own search, no waiter a victim; no watch is left
#  - staleness: a granted wait's line leaves its instance's publication
#    within a generous bound of the 20 ms rebuild; the node is deleted
#    once nobody waits long
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $T = 0.2;    # zklock.deadlock_timeout, seconds
my $conf = "zklock.deadlock_timeout = '200ms'\nzklock.max_locks_per_backend = 64";
zk_start();
my $node1 = zk_node('node1', extra_conf => $conf);
my $node2 = zk_node('node2', extra_conf => $conf);

for my $n ($node1, $node2)
{
	$n->safe_psql('postgres', q{
		CREATE TABLE t (id int PRIMARY KEY, v int);
		INSERT INTO t SELECT g, 0 FROM generate_series(1, 10) g;
	});
}

# Slack for a search and the client's view of it (a search lasts one round
# trip per publishing instance; the test polls psql every 10 ms)
my $slack = 2;

# the instances' publications of long waits (zk_published)
my $sid1 = zk_session_id($node1);
my $sid2 = zk_session_id($node2);

# ---------------------------------------------------------------------------
# A mixed cycle closed late by a row-lock wait: y has waited 6.6 s (its
# searches at 0.2, 0.4, 0.8, 1.6 s, then every 1.6 s) when x, y's zklock
# holder, starts waiting for y's row lock.  y's next search is at most
# eight timeouts away.
{
	my $x = zk_session_as($node1, 'late_x');
	my $y = zk_session_as($node1, 'late_y');
	zk_hold($x, 'late/r');
	zk_hold_row($y, 1);
	zk_ask($y, 'late/r', 'exclusive');
	sleep(6.6);
	ok(!$y->done, 'y still waits after 6.6 s (a chain, no victim)');
	my $t0 = time();
	$x->send('UPDATE t SET v = v + 1 WHERE id = 1');
	zk_result_is($y, '40P01', 'y, the zklock waiter, is the victim of the late mixed cycle', 30);
	my $el = time() - $t0;
	my $bound = 8 * $T + $slack;
	ok($el < $bound, sprintf('found within 8 x timeout + %ds = %.1fs (took %.2fs)', $slack, $bound, $el));
	zk_unwind($y, [ $x, 'x gets its row lock and proceeds' ]);
	$_->quit for ($x, $y);
}

# ---------------------------------------------------------------------------
# Two instances: a has waited 6.6 s for b's lock when b asks for a's: b's
# own searches (at one and two timeouts) break it.
{
	my $a = zk_session_as($node1, 'new_a');
	my $b = zk_session_as($node2, 'new_b');
	zk_hold($a, 'nw/a');
	zk_hold($b, 'nw/b');
	zk_ask($a, 'nw/b', 'exclusive');
	sleep(6.6);
	my $t0 = time();
	$b->send(q{SELECT zk_lock_acquire('nw/a') IS NOT NULL});
	zk_result_is($b, '40P01', 'the new wait (the youngest) is the victim', 30);
	my $el = time() - $t0;
	my $bound = 2 * $T + 1;
	ok($el < $bound, sprintf('found by its own early searches: within 2 x timeout + 1s = %.1fs (took %.2fs)', $bound, $el));
	zk_unwind($b, [ $a, 'the old wait is granted' ]);
	$_->quit for ($a, $b);
}

# ---------------------------------------------------------------------------
# A mixed cycle across instances closed by a new remote zklock wait: on
# node1 a holds row 2 and has waited 6.6 s for c's (node2) zklock lock;
# b (node1) holds mx/a and waits for a's row lock; then c asks for mx/a.
# Only node1 sees the row-lock edge: a's next search (eight timeouts at
# most after c's wait is published at its timeout) breaks it.
{
	my $a = zk_session_as($node1, 'mx_a');
	my $b = zk_session_as($node1, 'mx_b');
	my $c = zk_session_as($node2, 'mx_c');
	zk_hold($c, 'mx/c');
	zk_hold($b, 'mx/a');
	zk_hold_row($a, 2);
	zk_ask($a, 'mx/c', 'exclusive');
	zk_ask_row($b, 'UPDATE t SET v = v + 1 WHERE id = 2', 'b waits for a\'s row lock');
	sleep(6.6);
	ok(!$a->done, 'a still waits (a chain, no victim)');
	my $t0 = time();
	$c->send(q{SELECT zk_lock_acquire('mx/a') IS NOT NULL});
	zk_result_is($a, '40P01', 'a, the row-lock instance\'s zklock waiter, is the victim', 30);
	my $el = time() - $t0;
	my $bound = 9 * $T + $slack;
	ok($el < $bound, sprintf('found within 9 x timeout + %ds = %.1fs (took %.2fs)', $slack, $bound, $el));
	ok(!$c->done, 'c, the younger remote request, still waits (not a victim)');
	zk_unwind($a, [ $b, 'b gets the row lock' ], [ $c, 'c is granted once b commits' ]);
	$_->quit for ($a, $b, $c);
}

# ---------------------------------------------------------------------------
# A stalled worker (REVIEW.md 1): y has waited 3 s (its searches spaced
# out) when node1's worker is stopped for 2 s; meanwhile x starts waiting
# for y's row lock.  The searches during the stall give up (logged once for
# the wait) and do not count; once the worker runs again the cycle is
# broken within eight timeouts plus slack, y the victim, x proceeds.
{
	my $x = zk_session_as($node1, 'stall_x');
	my $y = zk_session_as($node1, 'stall_y');
	my $off = -s $node1->logfile;
	zk_hold($x, 'stall/r');
	zk_hold_row($y, 3);
	zk_ask($y, 'stall/r', 'exclusive');
	sleep(3);
	my $worker = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
	kill 'STOP', $worker;
	$x->send('UPDATE t SET v = v + 1 WHERE id = 3');
	sleep(2);
	ok(!$y->done, 'y waits on while the worker is stopped');
	my $t0 = time();
	kill 'CONT', $worker;
	zk_result_is($y, '40P01', 'y is the victim once the worker runs again', 30);
	my $el = time() - $t0;
	my $bound = 8 * $T + $slack;
	ok($el < $bound, sprintf('within 8 x timeout + %ds = %.1fs of the worker\'s resumption (took %.2fs)', $slack, $bound, $el));
	my $ypid = $y->pid;
	ok(zk_log_count($node1, qr/deadlock search of process $ypid gave up/, $off) <= 1,
		'a give-up is logged once per wait at most');
	# (x rolls back: its lease may have run out meanwhile)
	zk_unwind($y, [ $x, 'x gets its row lock and proceeds', 'ROLLBACK' ]);
	$_->quit for ($x, $y);
}

# ---------------------------------------------------------------------------
# The victim rule with the deduplicated edges: cycles of three and four,
# SHARED and EXCLUSIVE mixed, the members asking 0.5 s apart (the older
# ones' searches spacing out): one victim, the youngest, the last to ask.
for my $case (
	[ 'v3', [ [ $node1, 'shared', 'exclusive' ], [ $node2, 'exclusive', 'shared' ], [ $node1, 'exclusive', 'exclusive' ] ] ],
	[ 'v4', [ [ $node1, 'shared', 'exclusive' ], [ $node2, 'exclusive', 'shared' ],
			  [ $node1, 'exclusive', 'exclusive' ], [ $node2, 'shared', 'exclusive' ] ] ])
{
	my ($tag, $members) = @$case;
	my $n = @$members;
	my @s;
	for my $i (0 .. $n - 1)
	{
		my ($node, $hmode) = @{ $members->[$i] };
		$s[$i] = zk_session_as($node, "${tag}_$i");
		zk_hold($s[$i], "$tag/$i", $hmode);
	}
	# member i asks for member i+1's resource in a mode that conflicts with
	# member i+1's hold (SHARED only against EXCLUSIVE)
	for my $i (0 .. $n - 1)
	{
		zk_ask($s[$i], "$tag/" . (($i + 1) % $n), $members->[$i][2]);
		sleep(0.5) if $i < $n - 1;
	}
	zk_result_is($s[$n - 1], '40P01', "$tag: the youngest request (the last to ask) is the victim");
	$s[$n - 1]->query_ok('ROLLBACK');
	# the others unwind from the one before it backwards
	my $victims = 0;
	for my $i (reverse 0 .. $n - 2)
	{
		my $r = zk_result_is($s[$i], '00000', "$tag: member $i is granted");
		$victims++ if $r && $r->{sqlstate} eq '40P01';
		$s[$i]->query_ok('COMMIT');
	}
	$s[$n - 1]->query_ok('COMMIT');
	is($victims, 0, "$tag: exactly one victim");
	$_->quit for @s;
}

# ---------------------------------------------------------------------------
# Cost: 24 long waits on two instances queued on one resource.  Over a 4 s
# window (all past eight timeouts, searching every 1.6 s), each wait
# searches at most floor(4 / 1.6) + 1 = 3 times; a search is one getChildren
# and one getData per publishing instance (3 packets).  The old schedule
# (every timeout) makes 20 searches per wait: 24 x 20 x 3 = 1,440 packets.
{
	my $per = 12;
	my $W = 4;
	my ($off1, $off2) = (-s $node1->logfile, -s $node2->logfile);
	my $h = zk_session($node1, 'cost_h');
	zk_hold($h, 'cost/q');
	my @w;
	# idle window, with as many sessions connected and nobody waiting
	# each waiter holds 40 locks (session scope): 24 x 42 nodes published
	for my $i (1 .. 2 * $per)
	{
		my $s = zk_session($i % 2 ? $node1 : $node2, "cost_w$i");
		$s->query_ok("SELECT zk_lock_acquire_all_session(array(SELECT 'cost/h$i/' || g FROM generate_series(1, 40) g)) IS NOT NULL");
		push @w, $s;
	}
	my $watches0 = zk_mntr()->{zk_watch_count};
	my $m0 = zk_mntr();
	sleep($W);
	my $m1 = zk_mntr();
	my $idle = $m1->{zk_packets_received} - $m0->{zk_packets_received};
	note "idle window: $idle packets received";
	for my $s (@w)
	{
		$s->send(q{SELECT zk_lock_acquire('cost/q') IS NOT NULL});
	}
	ok(wait_until(sub { zk_count_locks(zk_path('cost/q')) == 2 * $per + 1 }, timeout => 30),
		'24 waiters queued behind the holder');
	my $queued = time();
	ok(wait_until(sub {
		my $a = zk_published($sid1) // '';
		my $b = zk_published($sid2) // '';
		my @l = ("$a\n$b" =~ /^w\t/mg);
		@l == 2 * $per }, timeout => 20),
		'both instances publish their 12 long waits');
	# every wait past its search at eight timeouts
	my $steady = 8 * $T + 1 - (time() - $queued);
	sleep($steady) if $steady > 0;
	$m0 = zk_mntr();
	sleep($W);
	$m1 = zk_mntr();
	my $busy = $m1->{zk_packets_received} - $m0->{zk_packets_received};
	my $extra = $busy - $idle;
	my $nw = 2 * $per;
	my $bound = $nw * (int($W / (8 * $T)) + 2) * 3 + 50;
	my $old = $nw * ($W / $T) * 3;
	note "busy window: $busy packets; extra $extra; bound $bound; the old schedule: about $old";
	ok($extra <= $bound,
		"24 long waits for ${W}s cost at most $bound packets over idle (got $extra; every timeout would be about $old)");
	ok($extra >= $nw, "and they still search (at least one packet per wait: got $extra)");
	ok(!zk_log_count($node1, qr/gave up/, $off1) && !zk_log_count($node2, qr/gave up/, $off2), 'no search gave up');

	# Size: the holder (node1) now asks for a lock that a waiter of node2
	# holds: a cycle of two through 24 waits and 1,000 published holds;
	# the holder's request is the youngest, found by its own search
	my $k = 2 * $per;    # cost_w24, on node2
	my $t0 = time();
	$h->send(qq{SELECT zk_lock_acquire('cost/h$k/7') IS NOT NULL});
	my $rh = $h->wait(30);
	my $el = time() - $t0;
	is($rh && $rh->{sqlstate}, '40P01', 'the holder closing a cycle through the queue is the victim');
	ok($el < 2 * $T + 2, sprintf('found within 2 x timeout + 2s (took %.2fs)', $el));

	# Staleness: grant them all (none a victim); each grant leaves the
	# publication (the victim's error already released its locks)
	$h->query_ok('ROLLBACK');
	for my $s (@w)
	{
		my $r = $s->wait(30);
		is($r && $r->{sqlstate}, '00000', $s->name . ' granted') or last;
	}
	ok(wait_until(sub { !defined zk_published($sid1) && !defined zk_published($sid2) }, timeout => 5),
		'both publications deleted once nobody waits long');
	$_->quit for (@w, $h);
	ok(wait_until(sub { zk_mntr()->{zk_watch_count} <= $watches0 }, timeout => 10),
		"no watch left behind by the searches ($watches0 before)");
}

# ---------------------------------------------------------------------------
# Staleness of one line: node2 publishes two long waits; one is granted:
# its line leaves the node within a generous bound of the 20 ms rebuild
# plus a round trip (the test reads through a new ZooKeeper client each
# time), the other stays; then the node is deleted.
{
	my ($h1, $h2) = map { zk_session($node1, "st_$_") } qw(h1 h2);
	my ($w1, $w2) = map { zk_session($node2, "st_$_") } qw(w1 w2);
	zk_hold($h1, 'st/a');
	zk_hold($h2, 'st/b');
	zk_ask($w1, 'st/a', 'exclusive');
	zk_ask($w2, 'st/b', 'exclusive');
	my ($pid1, $pid2) = ($w1->pid, $w2->pid);
	ok(zk_wait_published($sid2, [ $pid1, $pid2 ]), 'node2 publishes both long waits');
	my @lag;
	for my $round (1 .. 3)
	{
		$h1->query_ok('COMMIT');
		zk_result_is($w1, '00000', "round $round: w1 granted");
		my $t0 = time();
		my $gone = zk_wait_published($sid2, [ $pid1 ], gone => 1, timeout => 5, interval => 0.01);
		push @lag, time() - $t0;
		ok($gone, "round $round: w1's line left node2's publication");
		like(zk_published($sid2) // '', qr/^w\t$pid2\t/m, "round $round: w2's line stays");
		# again: w1 waits long for h1
		zk_hold($h1, 'st/a');
		zk_ask($w1, 'st/a', 'exclusive');
		ok(zk_wait_published($sid2, [ $pid1 ]), "round $round: w1's new long wait is published");
	}
	@lag = sort { $a <=> $b } @lag;
	ok($lag[1] < 1.5, sprintf('a granted wait\'s line is gone within 1.5 s (median %.2fs; each read is a new client)', $lag[1]));
	$h1->query_ok('COMMIT');
	$h2->query_ok('COMMIT');
	zk_result_is($_, '00000', $_->name . ' granted') for ($w1, $w2);
	ok(wait_until(sub { !defined zk_published($sid2) }, timeout => 5),
		'node2\'s node is deleted once nobody waits long');
	$_->quit for ($h1, $h2, $w1, $w2);
}

is(scalar(zk_log_crashes($node1)) + scalar(zk_log_crashes($node2)), 0, 'no crash in either log');
done_testing();
