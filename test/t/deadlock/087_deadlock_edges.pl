
# A reviewer's attacks on the deadlock search's read (ZKR_WAITS, owned by
# src/backend/deadlock_read.c since 1.6.1: submitted beside the lock's pending request,
# withdrawn by the backend's exit callback) and on the one "is the session
# connected" (channel.c) that the search and acquire_batch.c's batch ask, along
# shared/REVIEW.md:
#  - partitions (a proxy the test owns swallows node1's bytes, sockets
#    open) while a search's read is in flight:
#    * a long cut (node1's session expires): one waiter still ends with
#      55P03 by its lock_timeout, another with 08006 when the session is
#      given up; no search reads while not connected; a batch acquire
#      ends within its own timeout; nothing of node1 stays (no entry, no
#      znode); after the heal a cross deadlock whose victim is node1's is
#      broken
#    * a short cut (the session survives) across a cycle's forming: the
#      cycle is broken once healed, with its youngest as the victim
#    * one member's instance cut: the other, the youngest, is the victim
#      from the last publication; the cut member is granted once healed
#  - waiters cancelled and terminated while their search's read is in
#    flight (the cut holds it there), twice six: nothing leaks (entries in
#    use come back), no victim without a cycle, the oldest waiter still
#    gets the lock
#  - six cross deadlocks at once with four bystanders cancelled by
#    statement_timeout while they search: one victim per cycle, the
#    youngest; the bystanders end in time; nothing left
#  - the victim catches 40P01: ROLLBACK TO SAVEPOINT (twice, the second a
#    new deadlock of the same backend) and a PL/pgSQL exception block: what
#    it held before stays held, what it waited for or took inside is gone,
#    the other member gets its lock once the victim commits
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkChaos;

use PostgreSQL::Test::Utils;
use Test::More;
use List::Util qw(max);
use Time::HiRes qw(time sleep);

my $dl_ms = 500;
my $conf = "zklock.deadlock_timeout = '${dl_ms}ms'\nzklock.connect_timeout = '3s'\n"
  . "log_min_messages = log";
my $hosts = zk_start();
my ($zk_port) = $hosts =~ /:(\d+)$/;
my $px = ZkChaos::Proxy->start(
	links => [ [ 'node1', PostgreSQL::Test::Cluster::get_free_port(), $zk_port ] ]);
my $node1 = zk_node('node1', hosts => '127.0.0.1:' . $px->port('node1'),
	extra_conf => $conf);
my $node2 = zk_node('node2', extra_conf => $conf);

# zk_node's session timeout (4 s): a silent link is noticed after two
# thirds of it
my $session_s = 4;

# monitors, not affected by a cut (no zklock call); zk_entries_in_use($mon1)
# counts a search's read while it is out (pg_stat_activity on PostgreSQL 15
# shows every wait of an extension as "Extension")
my $mon1 = zk_session($node1, 'mon1');
my $mon2 = zk_session($node2, 'mon2');

# The lock nodes under one resource, and how many there are
sub nlocks { return scalar(my @l = zk_lock_nodes(zk_path($_[0]))); }

# What a backend has in zk_lock_local, "resource:state" sorted
sub local_of
{
	my ($mon, $pid) = @_;
	return $mon->query_ok("SELECT coalesce(string_agg(resource || ':' || state, ',' ORDER BY resource), '')"
		  . " FROM zk_lock_local WHERE pid = $pid");
}

# A cross deadlock between node1 and node2, $victim_node's member asking
# last (the youngest): it gets 40P01, the other is granted.
sub cross_deadlock
{
	my ($tag, $victim_node) = @_;
	my $other_node = $victim_node == $node1 ? $node2 : $node1;
	my $o = zk_session_as($other_node, "${tag}_o");
	my $v = zk_session_as($victim_node, "${tag}_v");
	my $t0 = zk_cross($o, $v, "${tag}x", "${tag}y");
	zk_result_is($v, '40P01', "$tag: the youngest (" . $victim_node->name . "'s) is the victim",
		2 * $dl_ms / 1000 + 10);
	zk_result_is($o, '00000', "$tag: the other member is granted", 10);
	ok(time() - $t0 < 2 * $dl_ms / 1000 + 6, "$tag: broken within twice the timeout + 6 s");
	$_->query('ROLLBACK') for ($o, $v);
	$_->quit for ($o, $v);
}

# Half a cycle, then the cut: node1's <tag>_a holds $x and waits for $y,
# which node2's <tag>_b holds; once node1 publishes a's wait, node1's link
# is cut.  Two tests, named after $what.  Returns (node1's session id, a,
# b, the time of the cut).
sub cut_while_waiting
{
	my ($what, $tag, $x, $y) = @_;
	my $sid1 = zk_session_id($node1);
	my $a = zk_session_as($node1, "${tag}_a");
	my $b = zk_session_as($node2, "${tag}_b");
	zk_hold($a, $x);
	zk_hold($b, $y);
	zk_ask($a, $y);
	ok(zk_wait_published($sid1, [ $a->pid ]), "$what: node1 publishes a's wait");
	$px->cut('node1');
	return ($sid1, $a, $b, time());
}

# ---------------------------------------------------------------------------
# A long cut while searches' reads are in flight.  node2's h holds pr;
# node1's w1 (lock_timeout 3 s) and then w2 (no timeout) wait for it and
# search every 500 ms; the link is cut once both waits are published (their
# reads are then in flight: entries_in_use counts each read), and stays cut
# until node1's worker has given its session up.  w1 must end by its
# lock_timeout (55P03) although its search waits for a read; w2 by the
# session's end (08006, doc/safety.md's bounded waits); while node1 is not
# connected no search reads (entries_in_use never counts a read then); a
# batch acquire (a resource and its parent) ends within its own timeout.
# Healed: nothing of node1 is left (no entry, no node), and a cross
# deadlock whose victim is node1's member is broken through the new
# session.  Bugs caught: a read that keeps the wait past lock_timeout (a
# read loop that ignores the LOCK_TIMEOUT indicator or has no deadline), a
# search that reads while not connected (its read waits for the
# connection), a withdrawn read or lock entry never freed, a waiter's node
# left behind, a detector dead after a new session.
{
	my $off1 = -s $node1->logfile;
	my $sid1 = zk_session_id($node1);
	my $h = zk_session_as($node2, 'cut_h');
	zk_hold($h, 'pr');
	my $w1 = zk_session_as($node1, 'cut_w1');
	my $w2 = zk_session_as($node1, 'cut_w2');
	my ($w1pid, $w2pid) = ($w1->pid, $w2->pid);
	$w1->query_ok(q{SET lock_timeout = '3s'});
	$_->query_ok('BEGIN') for ($w1, $w2);
	my $t1 = time();
	zk_ask($w1, 'pr');
	my $t2 = time();
	zk_ask($w2, 'pr');
	ok(zk_wait_published($sid1, [ $w1pid, $w2pid ]), 'long cut: node1 publishes both waits');
	$px->cut('node1');
	my $tcut = time();
	ok(wait_until(sub { zk_entries_in_use($mon1) eq '4' }, timeout => 2.5, interval => 0.01),
		'long cut: precondition: both searches read (two locks, two reads in use) while the link is cut');
	my $rw1 = $w1->wait(20);
	my $took1 = time() - $t1;
	is($rw1 && $rw1->{sqlstate}, '55P03', 'long cut: w1 ends by its lock_timeout (55P03)');
	ok($took1 < 3 + 3, 'long cut: ... within lock_timeout + 3 s (took ' . sprintf('%.1f', $took1) . ' s)');
	ok(zk_log_count($node1, qr/deadlock search of process $w1pid gave up/, $off1) >= 1,
		'long cut: precondition: w1\'s search gave up on its read');
	$w1->query_ok('ROLLBACK');
	ok(ZkChaos::wait_node_disconnected($node1, $session_s + 5),
		'long cut: node1\'s worker notices the silence');
	# w2 waits on, not connected: its search must not read (w1's entry
	# is left to the reconnection: at most two entries, w1's and w2's locks)
	my $tdis = time();
	my @samples;
	wait_until(sub {
			return 1 if $w2->done;
			push @samples, zk_entries_in_use($mon1) if time() > $tdis + 0.3;
			return 0;
		}, timeout => $session_s + 10, interval => 0.01);
	my $rw2 = $w2->wait(1);
	my $took2 = time() - $tcut;
	ok(@samples >= 10, 'long cut: precondition: entries sampled while disconnected (' . scalar(@samples) . ' times)');
	cmp_ok(max(@samples, 0), '<=', 2, 'long cut: no search reads while node1 is not connected')
	  or diag("entries_in_use seen: @samples");
	is($rw2 && $rw2->{sqlstate}, '08006', 'long cut: w2 ends with 08006 when node1\'s session is given up');
	like($rw2 ? $rw2->{err} : '', qr/ZooKeeper session lost/, 'long cut: ... saying the session was lost');
	ok($took2 < $session_s + 4, 'long cut: ... within the session timeout + 4 s of the cut (took '
		  . sprintf('%.1f', $took2) . ' s)');
	$w2->query_ok('ROLLBACK');
	my $b = zk_session_as($node1, 'cut_batch');
	$b->query_ok('BEGIN');
	my $tb = time();
	my $rb = $b->query(q{SELECT zk_lock_acquire('pb/x', timeout => '1500ms') IS NOT NULL}, 30);
	my $took_b = time() - $tb;
	is($rb->{sqlstate}, '08006', 'long cut: a batch acquire while disconnected: 08006');
	ok($took_b < 1.5 + 2.5, 'long cut: ... within its timeout + 2.5 s (took '
		  . sprintf('%.1f', $took_b) . ' s)');
	$b->query_ok('ROLLBACK');
	$px->heal('node1');
	ok(ZkChaos::wait_node_ready($node1, 30), 'long cut: node1 connected again');
	isnt(zk_session_id($node1), $sid1, 'long cut: precondition: node1 has a new session');
	ok(zk_wait_no_entries($mon1, 15), 'long cut: no entry of node1 in use (locks, reads, batch)')
	  or diag('entries_in_use: ' . zk_entries_in_use($mon1));
	is(nlocks('pr'), 1, 'long cut: only h\'s node is left under pr');
	is(nlocks('pb'), 0, 'long cut: no node of the batch under pb');
	$h->query_ok('COMMIT');
	$_->quit for ($h, $w1, $w2, $b);
	# node1's member the victim: its search reads through the new session
	cross_deadlock('healed1', $node1);
}

# ---------------------------------------------------------------------------
# A short cut (the session survives) while a cycle forms.  node1's a holds
# sx and waits for sy (node2's b's); the link is cut while a's search reads,
# and healed after a second; then b asks for sx: the youngest, b, is the
# victim, read through node1's publication of the same session after a
# reconnection.  Bugs caught: a publication not written again after a
# connection loss, a read that failed with the connection making the next
# ones fail, a detector that stays off after a give-up.
{
	my ($sid1, $a, $b, $tc) = cut_while_waiting('short cut', 'short', 'sx', 'sy');
	ok(wait_until(sub { zk_entries_in_use($mon1) eq '3' }, timeout => 2.5, interval => 0.01),
		'short cut: precondition: a\'s search reads (a lock, a wait, a read in use) while the link is cut');
	sleep(max(0, 1.2 - (time() - $tc)));
	$px->heal('node1');
	ok(ZkChaos::wait_node_ready($node1, 30), 'short cut: node1 connected');
	is(zk_session_id($node1), $sid1, 'short cut: precondition: the same session');
	my $t0 = time();
	zk_ask($b, 'sx');
	zk_result_is($b, '40P01', 'short cut: the youngest (b) is the victim', 2 * $dl_ms / 1000 + 10);
	zk_result_is($a, '00000', 'short cut: a is granted', 10);
	ok(time() - $t0 < 2 * $dl_ms / 1000 + 6, 'short cut: broken within twice the timeout + 6 s');
	$_->query('ROLLBACK') for ($a, $b);
	$_->quit for ($a, $b);
}

# ---------------------------------------------------------------------------
# One member's instance cut while the other breaks the cycle.  node1's a
# holds ox and waits for oy (node2's b's); node1 is cut; b asks for ox: b,
# the youngest, reads node1's last publication (still in ZooKeeper: the
# session lives) and is the victim; a, whose searches cannot read, is no
# victim; healed, a is granted (its watch on b's node, lost with the
# connection, is set again).  Bugs caught: a search that needs the
# victim's every partner to answer, a false second victim on the cut side,
# a lost watch that leaves a waiting after the heal.
{
	my ($sid1, $a, $b, $tc) = cut_while_waiting('one side cut', 'side', 'ox', 'oy');
	zk_ask($b, 'ox');
	zk_result_is($b, '40P01', 'one side cut: b, the youngest, is the victim while node1 is silent',
		2 * $dl_ms / 1000 + 6);
	$b->query('ROLLBACK');
	ok(!$a->done, 'one side cut: a still waits (no answer can reach it)');
	sleep(max(0, 2 - (time() - $tc)));
	$px->heal('node1');
	zk_result_is($a, '00000', 'one side cut: healed, a is granted', 15);
	is(zk_session_id($node1), $sid1, 'one side cut: precondition: the same session');
	$a->query('ROLLBACK');
	$_->quit for ($a, $b);
}

# ---------------------------------------------------------------------------
# Cancel and terminate while the search's read is in flight (held there by
# the cut), twice six waiters: node2's h holds cr; node1's s waits first
# (the oldest), then six waiters; the link is cut, and once every
# waiter's search has a read out (entries_in_use counts them) three of the
# six are cancelled and three terminated; then healed.  Bugs
# caught: a read left pending by the cancel's or the exit's path (the
# exit callback not withdrawing it: entries_in_use grows by the reads, a
# backend slot keeps its count), a withdrawn read that the worker never
# frees, a false victim without a cycle, a waiter's node left behind, s
# losing its place.
{
	my $off1 = -s $node1->logfile;
	my $off2 = -s $node2->logfile;
	my $h = zk_session_as($node2, 'sig_h');
	zk_hold($h, 'cr');
	my $s = zk_session_as($node1, 'sig_s');
	$s->query_ok('BEGIN');
	zk_ask($s, 'cr');
	my $signalled = 0;
	for my $round (1, 2)
	{
		my @ws = map { zk_session_as($node1, "sig${round}_$_") } 1 .. 6;
		for my $w (@ws)
		{
			$w->query_ok('BEGIN');
			zk_ask($w, 'cr');
		}
		$px->cut('node1');
		ok(wait_until(sub { zk_entries_in_use($mon1) eq '14' }, timeout => 2.5, interval => 0.01),
			"signals $round: precondition: the seven waiters' searches read (seven reads in use) while the link is cut");
		my %how;
		my $i = 0;
		$how{ $_->pid } = ($i++ % 2 ? 'terminate' : 'cancel') for @ws;
		my $n = 0;
		for my $how ('cancel', 'terminate')
		{
			my $pids = join(',', grep { $how{$_} eq $how } keys %how);
			$n += $mon1->query_ok("SELECT count(*) FROM (SELECT pid FROM pg_stat_activity"
				  . " WHERE pid IN ($pids) OFFSET 0) w WHERE pg_${how}_backend(pid)");
		}
		$px->heal('node1');
		is($n, 6, "signals $round: six waiters signalled");
		for my $w (@ws)
		{
			my $r = $w->wait(10);
			if ($how{ $w->pid } eq 'cancel')
			{
				is($r && $r->{sqlstate}, '57014', "signals $round: " . $w->name . ' cancelled');
				$w->query('ROLLBACK');
			}
			else
			{
				ok($r && $r->{exited}, "signals $round: " . $w->name . ' terminated');
			}
			$signalled++ if $r;
		}
		ok(ZkChaos::wait_node_ready($node1, 30), "signals $round: node1 connected again");
		ok(wait_until(sub { zk_entries_in_use($mon1) eq '1' }, timeout => 15),
			"signals $round: node1 has only s's entry in use")
		  or diag('entries_in_use: ' . zk_entries_in_use($mon1));
		ok(wait_until(sub { nlocks('cr') == 2 }, timeout => 15),
			"signals $round: only h's and s's nodes under cr");
		$_->quit for grep { $_->alive } @ws;
	}
	is($signalled, 12, 'twelve waiters signalled with their reads in flight');
	is(local_of($mon1, $s->pid), 'cr:waiting', 's still waits');
	$h->query_ok('COMMIT');
	my $rs = $s->wait(15);
	is($rs && $rs->{sqlstate}, '00000', 's, the oldest waiter, gets the lock');
	$s->query_ok('COMMIT');
	is(zk_log_count($node1, qr/deadlock broken/, $off1) + zk_log_count($node2, qr/deadlock broken/, $off2),
		0, 'no victim without a cycle');
	ok(zk_wait_no_entries($mon1, 15), 'signals: no entry of node1 in use');
	$_->quit for ($h, $s);
}

# ---------------------------------------------------------------------------
# Six cross deadlocks at once (twelve searchers), and four bystanders
# queued behind the cycles' locks, cancelled by statement_timeout while
# they search.  Each pair: node1's a_i holds cc<i>x and waits for cc<i>y,
# node2's b_i holds cc<i>y and then asks for cc<i>x (the youngest).  Bugs
# caught: state shared between concurrent searches (a wrong or second
# victim, a cycle not broken), a bystander's cancel that is not served
# while it searches, entries or the publication left once all is over.
{
	my $off1 = -s $node1->logfile;
	my $off2 = -s $node2->logfile;
	my $n = 6;
	my (@a, @b);
	for my $i (0 .. $n - 1)
	{
		push @a, zk_session_as($node1, "many_a$i");
		push @b, zk_session_as($node2, "many_b$i");
		zk_hold($a[$i], "cc${i}x");
		zk_hold($b[$i], "cc${i}y");
	}
	zk_ask($a[$_], "cc${_}y") for 0 .. $n - 1;
	my $t0 = time();
	zk_ask($b[$_], "cc${_}x") for 0 .. $n - 1;
	my @by;
	for my $k (0 .. 3)
	{
		my $node = $k % 2 ? $node2 : $node1;
		my $res = $k % 2 ? "cc${k}y" : "cc${k}x";
		my $s = zk_session_as($node, "many_by$k");
		$s->query_ok(q{SET statement_timeout = '1500ms'});
		$s->query_ok('BEGIN');
		push @by, [ $s, $res ];
	}
	for my $p (@by)
	{
		$p->[0]->send(qq{SELECT zk_lock_acquire('$p->[1]') IS NOT NULL});
		$p->[2] = time();
	}
	for my $p (@by)
	{
		my $r = $p->[0]->wait(20);
		is($r && $r->{sqlstate}, '57014', 'many: bystander ' . $p->[0]->name . ' ends by statement_timeout');
		ok(time() - $p->[2] < 1.5 + 3, 'many: ... within it + 3 s');
		$p->[0]->query_ok('ROLLBACK');
	}
	for my $i (0 .. $n - 1)
	{
		my $rb = $b[$i]->wait(2 * $dl_ms / 1000 + 15);
		my $ra = $a[$i]->wait(10);
		is($rb && $rb->{sqlstate}, '40P01', "many: pair $i: the youngest (b) is the victim");
		is($ra && $ra->{sqlstate}, '00000', "many: pair $i: a is granted");
	}
	ok(time() - $t0 < 2 * $dl_ms / 1000 + 10, 'many: all broken within twice the timeout + 10 s');
	is(zk_log_count($node1, qr/deadlock broken/, $off1), 0, 'many: no victim on node1');
	is(zk_log_count($node2, qr/deadlock broken/, $off2), $n, "many: $n victims on node2");
	$_->query('ROLLBACK') for (@a, @b);
	$_->quit for (@a, @b, map { $_->[0] } @by);
	for my $mon ($mon1, $mon2)
	{
		ok(zk_wait_no_entries($mon, 15), 'many: no entry of ' . $mon->node->name . ' in use');
	}
}

# What node1's victim v must be left with once it caught 40P01 (four
# tests, named by @names): it holds exactly $held (zk_lock_local's
# "resource:state" list), only node2's o has a node under $waited (v's
# withdrawn request is gone), no node is under $inner (what v took since
# the savepoint or inside the block), and o still waits.
sub after_catch
{
	my ($v, $o, $held, $waited, $inner, @names) = @_;
	ok(wait_until(sub { local_of($mon1, $v->pid) eq $held }, timeout => 10), $names[0])
	  or diag('zk_lock_local: ' . local_of($mon1, $v->pid));
	ok(zk_wait_count(zk_path($waited), 1, 10), $names[1]);
	ok(zk_wait_count(zk_path($inner), 0, 10), $names[2]);
	ok(is_waiting($node2, $o->pid), $names[3]);
}

# ---------------------------------------------------------------------------
# The victim catches 40P01 with ROLLBACK TO SAVEPOINT.  node2's o holds
# spb; node1's v holds spa, then in savepoint s takes spc; o waits for spa;
# v asks spb: 40P01.  After ROLLBACK TO s: v still holds spa, has no node
# under spb nor spc, o still waits; v asks spb again: a second 40P01 (a new
# wait of the same backend is searched); after COMMIT o is granted.  Bugs
# caught: the victim's withdrawn request still there (a node under spb
# that o's later requests would wait behind), the savepoint's rollback
# giving up spa (o granted while v's transaction goes on), a search state
# left from the first wait that stops the second from being searched.
{
	my $o = zk_session_as($node2, 'sp_o');
	my $v = zk_session_as($node1, 'sp_v');
	zk_hold($o, 'spb');
	zk_hold($v, 'spa');
	$v->query_ok('SAVEPOINT s');
	$v->query_ok(q{SELECT zk_lock_acquire('spc') IS NOT NULL});
	zk_ask($o, 'spa');
	# o's request must be older than v's: its node is made (a backend
	# waiting on its worker already looks waiting), or v's could be first
	ok(zk_wait_count(zk_path('spa'), 2, 10), "savepoint: o's node under spa is made");
	for my $try (1, 2)
	{
		my $rv = $v->query(q{SELECT zk_lock_acquire('spb') IS NOT NULL}, 2 * $dl_ms / 1000 + 10);
		is($rv->{sqlstate}, '40P01', "savepoint: v is the victim ($try)");
		$v->query_ok('ROLLBACK TO SAVEPOINT s');
		after_catch($v, $o, 'spa:granted', 'spb', 'spc',
			"savepoint: v holds spa only, nothing of spb or spc ($try)",
			"savepoint: only o's node under spb ($try)",
			"savepoint: no node under spc ($try)",
			"savepoint: o still waits for spa ($try)");
	}
	$v->query_ok(q{SELECT zk_lock_acquire('spd') IS NOT NULL});
	$v->query_ok('COMMIT');
	zk_result_is($o, '00000', 'savepoint: o is granted spa once v commits', 15);
	$o->query_ok('COMMIT');
	$_->quit for ($o, $v);
}

# ---------------------------------------------------------------------------
# The victim catches 40P01 in a PL/pgSQL exception block: a session lock
# and a transaction lock taken before stay held, a lock taken inside the
# block is released with it, nothing of the wait is left; the other is
# granted once the victim commits.
{
	my $o = zk_session_as($node2, 'pl_o');
	my $v = zk_session_as($node1, 'pl_v');
	zk_hold($o, 'plb');
	$v->query_ok(q{SELECT zk_lock_acquire_session('pls') IS NOT NULL});
	zk_hold($v, 'pla');
	zk_ask($o, 'pla');
	my $rv = $v->query(q{DO $$
BEGIN
	PERFORM zk_lock_acquire('plin');
	PERFORM zk_lock_acquire('plb');
	RAISE NOTICE 'not reached';
EXCEPTION WHEN deadlock_detected THEN
	RAISE NOTICE 'caught %', SQLSTATE;
END $$}, 2 * $dl_ms / 1000 + 10);
	is($rv->{sqlstate}, '00000', 'plpgsql: the block ends normally');
	like($rv->{err}, qr/caught 40P01/, 'plpgsql: it caught 40P01');
	after_catch($v, $o, 'pla:granted,pls:granted', 'plb', 'plin',
		'plpgsql: v holds its session and transaction locks, nothing of the block',
		'plpgsql: only o\'s node under plb',
		'plpgsql: the block\'s lock is released',
		'plpgsql: o still waits for pla');
	$v->query_ok('COMMIT');
	zk_result_is($o, '00000', 'plpgsql: o is granted pla once v commits', 15);
	$o->query_ok('COMMIT');
	ok(wait_until(sub { local_of($mon1, $v->pid) eq 'pls:granted' }, timeout => 10),
		'plpgsql: the session lock is still held after COMMIT')
	  or diag('zk_lock_local: ' . local_of($mon1, $v->pid));
	$v->query_ok(q{SELECT zk_lock_release('pls')});
	$_->quit for ($o, $v);
}

# ---------------------------------------------------------------------------
# Nothing left behind
zk_deadlock_done_check($mon1, $mon2);

zk_done_check();
done_testing();
