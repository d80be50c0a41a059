
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
use lib "$FindBin::RealBin/..";
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

sub hold
{
	my ($s, $res, $mode) = @_;
	$mode //= 'exclusive';
	$s->query_ok('BEGIN');
	$s->query_ok(qq{SELECT zk_lock_acquire('$res', '$mode') IS NOT NULL});
}

sub ask
{
	my ($s, $res, $mode) = @_;
	$mode //= 'exclusive';
	$s->send(qq{SELECT zk_lock_acquire('$res', '$mode') IS NOT NULL});
	ok(wait_for_waiting($s->node, $s->pid), $s->name . " waits for $res ($mode)");
}

sub pub_path
{
	my ($node) = @_;
	my $sid = psql1($node, q{SELECT lpad(substr(session_id, 3), 16, '0') FROM zk_lock_status});
	return zk_path("zklock.waits/$sid");
}

sub published
{
	my ($path) = @_;
	my ($rc, $out) = zkutil('get', $path);
	return $rc == 0 ? $out : undef;
}

my $p1 = pub_path($node1);
my $p2 = pub_path($node2);

# ---------------------------------------------------------------------------
# A mixed cycle closed late by a row-lock wait: y has waited 6.6 s (its
# searches at 0.2, 0.4, 0.8, 1.6 s, then every 1.6 s) when x, y's zklock
# holder, starts waiting for y's row lock.  y's next search is at most
# eight timeouts away.
{
	my $x = zk_session_as($node1, 'late_x');
	my $y = zk_session_as($node1, 'late_y');
	hold($x, 'late/r');
	$y->query_ok('BEGIN');
	$y->query_ok('UPDATE t SET v = v + 1 WHERE id = 1');
	ask($y, 'late/r');
	sleep(6.6);
	ok(!$y->done, 'y still waits after 6.6 s (a chain, no victim)');
	my $t0 = time();
	$x->send('UPDATE t SET v = v + 1 WHERE id = 1');
	my $ry = $y->wait(30);
	my $el = time() - $t0;
	is($ry && $ry->{sqlstate}, '40P01', 'y, the zklock waiter, is the victim of the late mixed cycle');
	my $bound = 8 * $T + $slack;
	ok($el < $bound, sprintf('found within 8 x timeout + %ds = %.1fs (took %.2fs)', $slack, $bound, $el));
	$y->query_ok('ROLLBACK');
	my $rx = $x->wait(20);
	is($rx && $rx->{sqlstate}, '00000', 'x gets its row lock and proceeds');
	$x->query_ok('COMMIT');
	$_->quit for ($x, $y);
}

# ---------------------------------------------------------------------------
# Two instances: a has waited 6.6 s for b's lock when b asks for a's: b's
# own searches (at one and two timeouts) break it.
{
	my $a = zk_session_as($node1, 'new_a');
	my $b = zk_session_as($node2, 'new_b');
	hold($a, 'nw/a');
	hold($b, 'nw/b');
	ask($a, 'nw/b');
	sleep(6.6);
	my $t0 = time();
	$b->send(q{SELECT zk_lock_acquire('nw/a') IS NOT NULL});
	my $rb = $b->wait(30);
	my $el = time() - $t0;
	is($rb && $rb->{sqlstate}, '40P01', 'the new wait (the youngest) is the victim');
	my $bound = 2 * $T + 1;
	ok($el < $bound, sprintf('found by its own early searches: within 2 x timeout + 1s = %.1fs (took %.2fs)', $bound, $el));
	$b->query_ok('ROLLBACK');
	my $ra = $a->wait(20);
	is($ra && $ra->{sqlstate}, '00000', 'the old wait is granted');
	$a->query_ok('COMMIT');
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
	hold($c, 'mx/c');
	hold($b, 'mx/a');
	$a->query_ok('BEGIN');
	$a->query_ok('UPDATE t SET v = v + 1 WHERE id = 2');
	ask($a, 'mx/c');
	$b->send('UPDATE t SET v = v + 1 WHERE id = 2');
	ok(wait_until(sub { psql1($node1, 'SELECT wait_event_type FROM pg_stat_activity WHERE pid = ' . $b->pid) eq 'Lock' }),
		'b waits for a\'s row lock');
	sleep(6.6);
	ok(!$a->done, 'a still waits (a chain, no victim)');
	my $t0 = time();
	$c->send(q{SELECT zk_lock_acquire('mx/a') IS NOT NULL});
	my $ra = $a->wait(30);
	my $el = time() - $t0;
	is($ra && $ra->{sqlstate}, '40P01', 'a, the row-lock instance\'s zklock waiter, is the victim');
	my $bound = 9 * $T + $slack;
	ok($el < $bound, sprintf('found within 9 x timeout + %ds = %.1fs (took %.2fs)', $slack, $bound, $el));
	ok(!$c->done, 'c, the younger remote request, still waits (not a victim)');
	$a->query_ok('ROLLBACK');
	my $rb = $b->wait(20);
	is($rb && $rb->{sqlstate}, '00000', 'b gets the row lock');
	$b->query_ok('COMMIT');
	my $rc = $c->wait(20);
	is($rc && $rc->{sqlstate}, '00000', 'c is granted once b commits');
	$c->query_ok('COMMIT');
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
	hold($x, 'stall/r');
	$y->query_ok('BEGIN');
	$y->query_ok('UPDATE t SET v = v + 1 WHERE id = 3');
	ask($y, 'stall/r');
	sleep(3);
	my $worker = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
	kill 'STOP', $worker;
	$x->send('UPDATE t SET v = v + 1 WHERE id = 3');
	sleep(2);
	ok(!$y->done, 'y waits on while the worker is stopped');
	my $t0 = time();
	kill 'CONT', $worker;
	my $ry = $y->wait(30);
	my $el = time() - $t0;
	is($ry && $ry->{sqlstate}, '40P01', 'y is the victim once the worker runs again');
	my $bound = 8 * $T + $slack;
	ok($el < $bound, sprintf('within 8 x timeout + %ds = %.1fs of the worker\'s resumption (took %.2fs)', $slack, $bound, $el));
	my $ypid = $y->pid;
	ok(zk_log_count($node1, qr/deadlock search of process $ypid gave up/, $off) <= 1,
		'a give-up is logged once per wait at most');
	$y->query_ok('ROLLBACK');
	my $rx = $x->wait(20);
	is($rx && $rx->{sqlstate}, '00000', 'x gets its row lock and proceeds');
	$x->query_ok('ROLLBACK');    # its lease may have run out meanwhile
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
		hold($s[$i], "$tag/$i", $hmode);
	}
	# member i asks for member i+1's resource in a mode that conflicts with
	# member i+1's hold (SHARED only against EXCLUSIVE)
	for my $i (0 .. $n - 1)
	{
		ask($s[$i], "$tag/" . (($i + 1) % $n), $members->[$i][2]);
		sleep(0.5) if $i < $n - 1;
	}
	my $last = $s[$n - 1]->wait(20);
	is($last && $last->{sqlstate}, '40P01', "$tag: the youngest request (the last to ask) is the victim");
	$s[$n - 1]->query_ok('ROLLBACK');
	# the others unwind from the one before it backwards
	my $victims = 0;
	for my $i (reverse 0 .. $n - 2)
	{
		my $r = $s[$i]->wait(20);
		$victims++ if $r && $r->{sqlstate} eq '40P01';
		is($r && $r->{sqlstate}, '00000', "$tag: member $i is granted");
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
	hold($h, 'cost/q');
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
		my $a = published($p1) // '';
		my $b = published($p2) // '';
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
	ok(wait_until(sub { !defined published($p1) && !defined published($p2) }, timeout => 5),
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
	my $h1 = zk_session($node1, 'st_h1');
	my $h2 = zk_session($node1, 'st_h2');
	my $w1 = zk_session($node2, 'st_w1');
	my $w2 = zk_session($node2, 'st_w2');
	hold($h1, 'st/a');
	hold($h2, 'st/b');
	ask($w1, 'st/a');
	ask($w2, 'st/b');
	my ($pid1, $pid2) = ($w1->pid, $w2->pid);
	ok(wait_until(sub { my $d = published($p2) // ''; $d =~ /^w\t$pid1\t/m && $d =~ /^w\t$pid2\t/m }, timeout => 10),
		'node2 publishes both long waits');
	my @lag;
	for my $round (1 .. 3)
	{
		$h1->query_ok('COMMIT');
		my $r = $w1->wait(20);
		is($r && $r->{sqlstate}, '00000', "round $round: w1 granted");
		my $t0 = time();
		my $gone = wait_until(sub { (published($p2) // '') !~ /^w\t$pid1\t/m }, timeout => 5, interval => 0.01);
		push @lag, time() - $t0;
		ok($gone, "round $round: w1's line left node2's publication");
		like(published($p2) // '', qr/^w\t$pid2\t/m, "round $round: w2's line stays");
		# again: w1 waits long for h1
		hold($h1, 'st/a');
		ask($w1, 'st/a');
		ok(wait_until(sub { (published($p2) // '') =~ /^w\t$pid1\t/m }, timeout => 10),
			"round $round: w1's new long wait is published");
	}
	@lag = sort { $a <=> $b } @lag;
	ok($lag[1] < 1.5, sprintf('a granted wait\'s line is gone within 1.5 s (median %.2fs; each read is a new client)', $lag[1]));
	$h1->query_ok('COMMIT');
	$h2->query_ok('COMMIT');
	for my $w ($w1, $w2)
	{
		my $r = $w->wait(20);
		is($r && $r->{sqlstate}, '00000', $w->name . ' granted');
	}
	ok(wait_until(sub { !defined published($p2) }, timeout => 5),
		'node2\'s node is deleted once nobody waits long');
	$_->quit for ($h1, $h2, $w1, $w2);
}

is(scalar(zk_log_crashes($node1)) + scalar(zk_log_crashes($node2)), 0, 'no crash in either log');
done_testing();
