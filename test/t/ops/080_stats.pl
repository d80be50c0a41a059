
# Statistics (issue 19, 1.6): zk_lock_stats counts, per resource and mode,
# what this instance's backends did, across two instances:
#  - a real wait behind another instance's holder: waited = 1, not granted
#    at once, and the wait (total_wait_time = max_wait_time) at least as
#    long as the hold imposed after the waiter began waiting; meanwhile
#    zk_lock_waits shows the waiter's resource, its own node and the
#    holder's node it waits behind (as zk_lock_local names them);
#  - pg_cancel_backend of a waiter: cancels = 1, waited = 1, no
#    acquisition;
#  - a lock force-released from the other instance: lost = 1 on the
#    holder's instance (counted by its worker, before the holder hears of
#    it), nothing on the other;
#  - with zklock.stats_max = 100 (its minimum), 150 resources taken once
#    each after one taken 30 times: the table never holds more than 100
#    entries, the busy one and the newest stay, the oldest least used go;
#  - four backends taking 600 names and one shared name while a fifth reads
#    and resets the table: no error, no crash, at most 100 entries.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my $node1 = zk_node('node1');
my $node2 = zk_node('node2', extra_conf => 'zklock.stats_max = 100');

is(psql1($node2, q{SHOW zklock.stats_max}), '100', 'node2 tracks 100 entries at most');

sub stats
{
	my ($node, $res, $cols) = @_;
	return psql1($node, "SELECT $cols FROM zk_lock_stats WHERE resource = '$res' AND mode = 'exclusive'");
}

# --- a real wait -------------------------------------------------------------
{
	my $h = zk_session($node2, 'holder');
	$h->query_ok(q{SELECT zk_lock_acquire_session('tap/w', parents => false) > 0});
	my $w = zk_session($node1, 'waiter');
	$w->send(q{SELECT zk_lock_acquire_session('tap/w', parents => false) > 0});
	ok(wait_until(sub { psql1($node1, q{SELECT count(*) FROM zk_lock_waits WHERE resource = 'tap/w'}) eq '1' }, timeout => 10),
		'zk_lock_waits shows the waiter');
	my $t0 = time();
	my $holder_node = psql1($node2, q{SELECT node FROM zk_lock_local WHERE resource = 'tap/w'});
	my $waiter_node = psql1($node1, q{SELECT node FROM zk_locks WHERE resource = 'tap/w' AND NOT granted});
	like($holder_node, qr/LOCK-EXCLUSIVE-\d+$/, "the holder's node ($holder_node)");
	like($waiter_node, qr/LOCK-EXCLUSIVE-\d+$/, "the waiter's node, as zk_locks lists it ($waiter_node)");
	is(psql1($node1, q{SELECT pid, mode, node, waits_behind, waiting_since <= now() FROM zk_lock_waits WHERE resource = 'tap/w'}),
		join('|', $w->pid, 'exclusive', $waiter_node, $holder_node, 't'),
		"zk_lock_waits: the waiter's pid, mode, own node, and the holder's node it waits behind");
	ok(is_waiting($node1, $w->pid), 'and pg_stat_activity still shows the wait event');
	is(psql1($node1, q{SELECT count(*) FROM zk_lock_stats WHERE resource = 'tap/w'}), '0',
		'nothing counted on node1 while it waits');
	# the hold imposed on the waiter: 1.5 s from here
	sleep(1.5 - (time() - $t0)) if time() - $t0 < 1.5;
	$h->query_ok(q{SELECT zk_lock_release('tap/w')});
	my $r = $w->wait(20);
	is($r && $r->{out}, 't', 'the waiter is granted once the holder releases');
	is(psql1($node1, q{SELECT count(*) FROM zk_lock_waits}), '0', 'zk_lock_waits is empty again');
	$w->query_ok(q{SELECT zk_lock_release('tap/w')});
	is(stats($node1, 'tap/w', 'acquisitions, granted_at_once, waited, timeouts, cancels'),
		'1|0|1|0|0', 'node1: one acquisition, after a wait');
	is(stats($node1, 'tap/w', 'max_wait_time >= 1500, total_wait_time = max_wait_time, max_held_time >= 0'),
		't|t|t', 'node1: the wait lasted the hold imposed (1.5 s) at least; one wait');
	is(stats($node2, 'tap/w', 'acquisitions, granted_at_once, waited, max_held_time >= 1500'),
		'1|1|0|t', 'node2: the holder was granted at once and held it 1.5 s at least');
	$h->quit;
	$w->quit;
}

# --- a cancel ----------------------------------------------------------------
{
	my $h = zk_session($node2, 'holder_c');
	$h->query_ok(q{SELECT zk_lock_acquire_session('tap/c', parents => false) > 0});
	my $w = zk_session($node1, 'waiter_c');
	$w->send(q{SELECT zk_lock_acquire_session('tap/c', parents => false) > 0});
	ok(wait_for_waiting($node1, $w->pid), 'a waiter waits');
	is(psql1($node1, 'SELECT pg_cancel_backend(' . $w->pid . ')'), 't', 'pg_cancel_backend');
	my $r = $w->wait(20);
	is($r && $r->{sqlstate}, '57014', 'the waiter is canceled (57014)');
	is(stats($node1, 'tap/c', 'acquisitions, waited, cancels, timeouts, total_wait_time > 0'),
		'0|1|1|0|t', 'node1: cancels = 1, one wait, no acquisition');
	$h->query_ok(q{SELECT zk_lock_release('tap/c')});
	$h->quit;
	$w->quit;
}

# --- a lost lock -------------------------------------------------------------
{
	my $h = zk_session($node1, 'holder_l');
	$h->query_ok(q{SELECT zk_lock_acquire_session('tap/l', parents => false) > 0});
	is(psql1($node2, q{SELECT zk_lock_force_release('tap/l')}), '1',
		'node2 force-releases the lock node1 holds');
	ok(wait_until(sub { stats($node1, 'tap/l', 'lost') eq '1' }, timeout => 10),
		'node1: lost = 1, counted by its worker before the holder hears of it');
	is(psql1($node2, q{SELECT count(*) FROM zk_lock_stats WHERE resource = 'tap/l' AND lost > 0}), '0',
		'node2: nothing lost');
	my $r = $h->query(q{SELECT zk_lock_release('tap/l')});
	like($r->{err}, qr/was lost/, 'the holder hears of it at its release');
	is(stats($node1, 'tap/l', 'lost, acquisitions'), '1|1', 'node1: counted once');
	$h->quit;
}

# --- eviction ----------------------------------------------------------------
{
	psql1($node2, q{SELECT zk_lock_stats_reset()});
	psql1($node2, q{DO $$BEGIN FOR i IN 1..30 LOOP
		PERFORM zk_lock_acquire_session('ev/hot', parents => false);
		PERFORM zk_lock_release('ev/hot'); END LOOP; END $$});
	my $max = 0;
	for my $batch (0 .. 5)
	{
		my ($from, $to) = ($batch * 25, $batch * 25 + 24);
		psql1($node2, qq{DO \$\$BEGIN FOR i IN $from..$to LOOP
			PERFORM zk_lock_acquire_session(format('ev/r%s', lpad(i::text, 3, '0')), parents => false);
			PERFORM zk_lock_release(format('ev/r%s', lpad(i::text, 3, '0'))); END LOOP; END \$\$});
		my $n = psql1($node2, q{SELECT count(*) FROM zk_lock_stats});
		$max = $n if $n > $max;
	}
	cmp_ok($max, '<=', 100, "the table never held more than zklock.stats_max entries (at most $max)");
	cmp_ok($max, '>=', 90, 'and it filled up');
	is(stats($node2, 'ev/hot', 'acquisitions'), '30', 'the busy entry stays, with its counts');
	is(psql1($node2, q{SELECT count(*) FROM zk_lock_stats WHERE resource BETWEEN 'ev/r140' AND 'ev/r149'}),
		'10', 'the newest entries stay');
	cmp_ok(psql1($node2, q{SELECT count(*) FROM zk_lock_stats WHERE resource BETWEEN 'ev/r000' AND 'ev/r049'}),
		'<=', 40, 'the oldest least used entries gave way');
	is(psql1($node1, q{SELECT count(*) FROM zk_lock_stats WHERE resource LIKE 'ev/%'}), '0',
		'node1 counted none of them (the statistics are per instance)');
}

# --- everything at once --------------------------------------------------------
# four backends each take and release 150 names of their own and one SHARED
# name they all share, while a fifth reads and resets the table: no error,
# no crash, never more than zklock.stats_max entries, the worker connected.
{
	my $offset = -s $node2->logfile;
	my @s;
	for my $k (1 .. 4)
	{
		my $c = zk_session($node2, "busy$k");
		$c->send(qq{DO \$\$BEGIN FOR i IN 1..150 LOOP
			PERFORM zk_lock_acquire_session(format('cc_${k}_%s', i), parents => false);
			PERFORM zk_lock_acquire_session('cc_shared', 'shared', parents => false);
			PERFORM zk_lock_release(format('cc_${k}_%s', i));
			PERFORM zk_lock_release('cc_shared', 'shared'); END LOOP; END \$\$});
		push @s, $c;
	}
	my $reader = zk_session($node2, 'reader');
	$reader->send(q{DO $$DECLARE n bigint; m bigint := 0; BEGIN FOR i IN 1..60 LOOP
		SELECT count(*) INTO n FROM zk_lock_stats; m := greatest(m, n);
		IF i % 10 = 0 THEN PERFORM zk_lock_stats_reset(); END IF;
		PERFORM pg_sleep(0.02); END LOOP;
		IF m > 100 THEN RAISE EXCEPTION 'zk_lock_stats held % entries', m; END IF; END $$});
	for my $c (@s, $reader)
	{
		my $r = $c->wait(120);
		ok($r && $r->{sqlstate} eq '00000' && $r->{err} !~ /ERROR/,
			$c->name . ': done without an error') or diag($r ? $r->{err} : 'timed out');
		$c->quit;
	}
	cmp_ok(psql1($node2, q{SELECT count(*) FROM zk_lock_stats}), '<=', 100,
		'still at most zklock.stats_max entries');
	is(psql1($node2, q{SELECT state FROM zk_lock_status}), 'connected', 'the worker is connected');
	is(join("\n", zk_log_crashes($node2, $offset)), '', 'no crash in the log');
	ok(wait_until(sub { psql1($node2, q{SELECT count(*) FROM zk_lock_local}) eq '0' }, timeout => 20),
		'nothing left held');
}

# ---------------------------------------------------------------------------
# Counting sends no ZooKeeper request: 300 session cycles with
# zklock.track_stats on cost ZooKeeper what 300 with it off do (the idle
# rate subtracted; a cycle is three requests either way).
{
	$node1->safe_psql('postgres', q{
CREATE PROCEDURE st_cycles(n int) LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1 .. n LOOP
		PERFORM zk_lock_acquire_session('st/zk', parents => false);
		PERFORM zk_lock_release('st/zk');
	END LOOP;
END $$});
	my $per_cycle = sub {
		my ($setting, $n) = @_;
		my $m0 = zk_mntr();
		my $t0 = time();
		sleep(2);
		my $m1 = zk_mntr();
		my $t1 = time();
		my $idle = ($m1->{zk_packets_received} - $m0->{zk_packets_received}) / ($t1 - $t0);
		$node1->safe_psql('postgres', "SET zklock.track_stats = $setting; CALL st_cycles($n)");
		sleep(0.5);    # the last release's delete is answered
		my $m2 = zk_mntr();
		my $t2 = time();
		return ($m2->{zk_packets_received} - $m1->{zk_packets_received}
			  - $idle * ($t2 - $t1)) / $n;
	};
	$node1->safe_psql('postgres', 'CALL st_cycles(5)');    # the resource node exists
	my $off = $per_cycle->('off', 300);
	my $on = $per_cycle->('on', 300);
	note sprintf('ZooKeeper requests per cycle: %.2f with statistics on, %.2f off', $on, $off);
	# a request per count would add at least one per cycle; the group commit
	# makes either figure move by a few tenths (a release and the next
	# create may share a multi)
	cmp_ok($on - $off, '<', 0.5, 'counting costs ZooKeeper no request');
	cmp_ok(psql1($node1, q{SELECT acquisitions FROM zk_lock_stats WHERE resource = 'st/zk'}), '>=', 300,
		'(and the cycles with it on were counted)');
}

$node1->stop;
$node2->stop;
zk_done_check();
done_testing();
