
# Statistics (issue 19, 1.6), attacked by a reviewer (REVIEW.md's classes
# 3, 4, 8, 10, 11, 16): every end of a lock is counted once, whatever ends
# it, and nobody without rights can change what others see.
#  - a backend that exits inside its transaction (pg_terminate_backend, a
#    client that goes away) holding transaction-level locks, and one that
#    exits holding a session lock: each lock's hold counted once
#    (total_held_time = max_held_time after one acquisition);
#  - ROLLBACK TO SAVEPOINT, a refused PREPARE TRANSACTION, an exception
#    block, zk_lock_release_all: one acquisition, one hold each;
#  - waits ended by statement_timeout (cancels), lock_timeout and the
#    call's timeout (timeouts), pg_terminate_backend (neither): waited,
#    no acquisition, never counted twice;
#  - a lock set with a partial failure: the member taken is counted with
#    its one hold, the one that timed out as a timeout; a refused try on a
#    set: one refusal, its other member not counted; lock_timeout caught
#    by an exception block: one timeout;
#  - a resource with parents that must wait (the batch of tries refused,
#    then step by step): the refused tries are not counted as refusals,
#    the wait lasts the hold and not since 2000-01-01;
#  - a role without rights cannot reset, cannot SET zklock.track_stats,
#    cannot read zk_lock_waits; it can read zk_lock_stats;
#  - names: 255 bytes (the maximum) kept whole, two that differ in their
#    last byte kept apart; a name taken from a LATIN1 database shows as
#    itself in a UTF8 one, and one it cannot show is escaped, not an error;
#    a semaphore shows as 'semaphore', and a wait for a slot of a
#    semaphore of one is counted as any wait;
#  - lost locks counted by the worker (under the channel's lock) while
#    other sessions read zk_lock_stats, zk_lock_waits, zk_lock_local and
#    take locks: no hang, exactly the locks lost, on that instance only;
#  - zklock.stats_max = 1000000 (its maximum): the instance starts with the
#    room for it, and counts.
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

sub stats
{
	my ($node, $res, $cols, $mode) = @_;
	$mode //= 'exclusive';
	return psql1($node,
		"SELECT $cols FROM zk_lock_stats WHERE resource = '$res' AND mode = '$mode'");
}

# one acquisition, its one hold: "1|t"
my $once = 'acquisitions, total_held_time = max_held_time';

# --- exit inside a transaction ---------------------------------------------------
{
	my $s = zk_session($node1, 'xact_terminated');
	$s->query_ok('BEGIN');
	$s->query_ok(q{SELECT zk_lock_acquire('atk/exit_xact', parents => false) > 0});
	sleep(0.3);
	is(psql1($node1, 'SELECT pg_terminate_backend(' . $s->pid . ')'), 't',
		'terminate a backend idle in its transaction with a lock');
	ok(wait_until(sub { stats($node1, 'atk/exit_xact', 'max_held_time > 0') eq 't' }, timeout => 10),
		'its hold is counted');
	is(stats($node1, 'atk/exit_xact', $once), '1|t',
		'pg_terminate_backend inside a transaction: the hold counted once');
	$s->quit;

	my $c = zk_session($node1, 'xact_client_gone');
	$c->query_ok('BEGIN');
	$c->query_ok(q{SELECT zk_lock_acquire('atk/exit_client', parents => false) > 0});
	$c->query_ok(q{SELECT zk_lock_acquire('atk/exit_client2', 'shared', parents => false) > 0});
	sleep(0.3);
	$c->kill_client;
	ok(wait_until(sub { stats($node1, 'atk/exit_client', 'max_held_time > 0') eq 't' }, timeout => 10),
		'the hold of a client gone inside its transaction is counted');
	is(stats($node1, 'atk/exit_client', $once), '1|t',
		'a client gone inside a transaction: the hold counted once');
	is(stats($node1, 'atk/exit_client2', $once, 'shared'), '1|t',
		'and its second lock too');

	my $q = zk_session($node1, 'session_exit');
	$q->query_ok(q{SELECT zk_lock_acquire_session('atk/exit_session', parents => false) > 0});
	$q->query_ok('BEGIN');
	$q->query_ok(q{SELECT zk_lock_acquire('atk/exit_session', parents => false) > 0});
	sleep(0.3);
	$q->quit;
	ok(wait_until(sub { stats($node1, 'atk/exit_session', 'max_held_time > 0') eq 't' }, timeout => 10),
		'a session lock (with a transaction hold) at exit: counted');
	is(stats($node1, 'atk/exit_session', $once), '1|t', 'once');
}

# --- the other ends of a transaction ---------------------------------------------
{
	my $s = zk_session($node1, 'ends');
	$s->query_ok('BEGIN');
	$s->query_ok('SAVEPOINT a');
	$s->query_ok(q{SELECT zk_lock_acquire('atk/savepoint', parents => false) > 0});
	$s->query_ok('ROLLBACK TO SAVEPOINT a');
	$s->query_ok('COMMIT');
	is(stats($node1, 'atk/savepoint', $once), '1|t', 'ROLLBACK TO SAVEPOINT: one hold');

	$s->query_ok('BEGIN');
	$s->query_ok(q{SELECT zk_lock_acquire('atk/prepare', parents => false) > 0});
	my $r = $s->query(q{PREPARE TRANSACTION 'atk'});
	like($r->{err}, qr/ERROR/, 'PREPARE TRANSACTION with a lock is refused');
	$s->query('ROLLBACK');
	is(stats($node1, 'atk/prepare', $once), '1|t', 'the refused PREPARE: one hold');

	$s->query_ok(q{DO $$BEGIN
		BEGIN
			PERFORM zk_lock_acquire('atk/exception', parents => false);
			RAISE EXCEPTION 'boom';
		EXCEPTION WHEN raise_exception THEN NULL;
		END; END $$});
	is(stats($node1, 'atk/exception', $once), '1|t', 'an exception block: one hold');

	$s->query_ok(q{SELECT zk_lock_acquire_session('atk/all1', parents => false) > 0});
	$s->query_ok(q{SELECT zk_lock_acquire_session('atk/all1', parents => false) > 0});
	$s->query_ok(q{SELECT zk_lock_release_all()});
	is(stats($node1, 'atk/all1', $once), '1|t', 'zk_lock_release_all: one acquisition (taken twice), one hold');
	$s->quit;
}

# --- waits ended by errors -------------------------------------------------------
{
	my $h = zk_session($node2, 'holder');
	$h->query_ok(q{SELECT zk_lock_acquire_session('atk/held', parents => false) > 0});
	my $w = zk_session($node1, 'waiter');

	$w->query_ok(q{SET statement_timeout = '300ms'});
	my $r = $w->query(q{SELECT zk_lock_acquire_session('atk/held', parents => false)});
	is($r->{sqlstate}, '57014', 'statement_timeout ends the wait (57014)');
	$w->query_ok(q{RESET statement_timeout});
	is(stats($node1, 'atk/held', 'acquisitions, waited, cancels, timeouts'), '0|1|1|0',
		'statement_timeout: a cancel, one wait');

	$w->query_ok(q{SET lock_timeout = '300ms'});
	$r = $w->query(q{SELECT zk_lock_acquire_session('atk/held', parents => false)});
	is($r->{sqlstate}, '55P03', 'lock_timeout ends the wait (55P03)');
	$w->query_ok(q{RESET lock_timeout});
	$r = $w->query(q{SELECT zk_lock_acquire_session('atk/held', timeout => '300ms', parents => false)});
	is($r->{sqlstate}, '55P03', "the call's timeout ends the wait (55P03)");
	is(stats($node1, 'atk/held', 'acquisitions, waited, cancels, timeouts, total_wait_time >= 600'),
		'0|3|1|2|t', 'lock_timeout and the timeout: two timeouts, three waits in all');

	my $t = zk_session($node1, 'terminated_waiter');
	$t->send(q{SELECT zk_lock_acquire_session('atk/held', parents => false)});
	ok(wait_for_waiting($node1, $t->pid), 'a waiter waits');
	is(psql1($node1, 'SELECT pg_terminate_backend(' . $t->pid . ')'), 't', 'and is terminated');
	$t->wait(20);
	ok(wait_until(sub { psql1($node1, q{SELECT count(*) FROM zk_lock_waits}) eq '0' }, timeout => 10),
		'its wait is gone');
	is(stats($node1, 'atk/held', 'acquisitions, cancels, timeouts, waited <= 4'), '0|1|2|t',
		'pg_terminate_backend of a waiter: no acquisition, no cancel or timeout more');

	# a lock set (taken in sorted order): atk/a_set taken, then atk/held
	# held on node2 times out, and atk/a_set is given back
	$r = $w->query(q{SELECT zk_lock_acquire_all(ARRAY['atk/a_set', 'atk/held'], timeout => '300ms')});
	is($r->{sqlstate}, '55P03', 'a lock set with a member held elsewhere times out');
	is(stats($node1, 'atk/a_set', $once), '1|t', 'the member it took: one acquisition, one hold');
	is(stats($node1, 'atk/held', 'acquisitions, timeouts'), '0|3', 'the member held elsewhere: a timeout');
	# a try on a set, one member held elsewhere: one refusal, nothing taken
	$w->query_ok(q{SELECT zk_lock_try_acquire_all(ARRAY['atk/b_try', 'atk/held']) IS NULL});
	is(stats($node1, 'atk/held', 'acquisitions, not_granted'), '0|1', 'a refused try on a set: one refusal');
	is(psql1($node1, q{SELECT coalesce(sum(acquisitions + not_granted), 0) FROM zk_lock_stats WHERE resource = 'atk/b_try'}),
		'0', 'its other member: nothing counted (its node was given back untaken)');
	# an exception block catching lock_timeout: one timeout more
	$w->query_ok(q{SET lock_timeout = '200ms'});
	$w->query_ok(q{DO $$BEGIN
		PERFORM zk_lock_acquire('atk/held', parents => false);
		EXCEPTION WHEN lock_not_available THEN NULL; END $$});
	$w->query_ok(q{RESET lock_timeout});
	is(stats($node1, 'atk/held', 'acquisitions, timeouts, cancels'), '0|4|1',
		'lock_timeout caught by an exception block: one timeout more, counted once');
	$h->query_ok(q{SELECT zk_lock_release('atk/held')});

	# a semaphore of one slot held elsewhere: its wait counts as any other
	$h->query_ok(q{SELECT zk_semaphore_acquire_session('atk/sem1', 1) > 0});
	$r = $w->query(q{SELECT zk_semaphore_acquire_session('atk/sem1', 1, timeout => '300ms')});
	is($r->{sqlstate}, '55P03', 'a wait for a semaphore slot times out');
	is(stats($node1, 'atk/sem1', 'acquisitions, waited, timeouts, total_wait_time >= 250', 'semaphore'),
		'0|1|1|t', "the semaphore's wait and timeout, under 'semaphore'");
	$h->query_ok(q{SELECT zk_semaphore_release('atk/sem1')});

	# parents: the batch of tries is refused, then the steps wait one by one
	$h->query_ok(q{SELECT zk_lock_acquire_session('atk/p/q', parents => false) > 0});
	$w->send(q{SELECT zk_lock_acquire_session('atk/p/q/r') > 0});
	ok(wait_until(sub { psql1($node1, q{SELECT count(*) FROM zk_lock_waits WHERE resource = 'atk/p/q' AND mode = 'shared'}) eq '1' }, timeout => 10),
		'a lock with parents waits for a parent held elsewhere');
	sleep(1);
	$h->query_ok(q{SELECT zk_lock_release('atk/p/q')});
	$r = $w->wait(20);
	is($r && $r->{out}, 't', 'and is granted');
	$w->query_ok(q{SELECT zk_lock_release('atk/p/q/r')});
	is(stats($node1, 'atk/p/q', 'acquisitions, waited, not_granted, max_wait_time >= 1000, max_wait_time < 60000', 'shared'),
		'1|1|0|t|t', 'the parent: one wait, as long as the hold (not since 2000), no refusal counted');
	is(stats($node1, 'atk/p/q/r', 'acquisitions, not_granted'), '1|0', 'the lock itself: one acquisition');
	$h->quit;
	$w->quit;
}

# --- a role without rights ---------------------------------------------------------
{
	psql1($node1, q{CREATE ROLE nobody LOGIN});
	my $u = zk_session($node1, 'nobody', user => 'nobody');
	my $r = $u->query(q{SELECT zk_lock_stats_reset()});
	like($r->{err}, qr/permission denied/, 'a role without rights cannot reset');
	$r = $u->query(q{SET zklock.track_stats = off});
	like($r->{err}, qr/permission denied/, 'nor turn the counting off');
	$r = $u->query(q{SELECT * FROM zk_lock_waits});
	like($r->{err}, qr/permission denied/, 'nor read zk_lock_waits');
	$r = $u->query(q{SELECT * FROM zk_lock_waits()});
	like($r->{err}, qr/permission denied/, 'nor call zk_lock_waits()');
	cmp_ok($u->query_ok(q{SELECT count(*) FROM zk_lock_stats}), '>', 0, 'it reads zk_lock_stats');
	$u->quit;
}

# --- names -----------------------------------------------------------------------
{
	my $long_a = 'atk/' . ('x' x 250) . 'a';
	my $long_b = 'atk/' . ('x' x 250) . 'b';
	is(length($long_a), 255, 'a name of 255 bytes');
	psql1($node1, qq{SELECT zk_lock_try_acquire_session('$long_a', parents => false),
	                        zk_lock_release('$long_a'),
	                        zk_lock_try_acquire_session('$long_b', parents => false),
	                        zk_lock_release('$long_b')});
	is(psql1($node1, qq{SELECT string_agg(length(resource)::text || right(resource, 1), ',' ORDER BY resource)
	                    FROM zk_lock_stats WHERE resource LIKE 'atk/xxx%'}),
		'255a,255b', 'two names of 255 bytes, differing in the last: two rows, whole');

	psql1($node1, q{SELECT zk_semaphore_try_acquire_session('atk/sem', 3) > 0, zk_semaphore_release('atk/sem')});
	is(stats($node1, 'atk/sem', 'acquisitions', 'semaphore'), '1', "a semaphore's mode is 'semaphore'");

	psql1($node1, q{CREATE DATABASE u8 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0});
	psql1($node1, q{CREATE DATABASE lat ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0});
	$node1->safe_psql($_, 'CREATE EXTENSION zklock') for qw(u8 lat);
	my $lat_name = q{convert_from('\x61746b2f6c6174e9'::bytea, 'LATIN1')};
	$node1->safe_psql('lat', qq{SELECT zk_lock_try_acquire_session($lat_name, parents => false) > 0,
	                              zk_lock_release($lat_name)});
	is($node1->safe_psql('u8', q{SELECT acquisitions FROM zk_lock_stats WHERE resource = U&'atk/lat\00E9'}), '1',
		'a name taken in a LATIN1 database shows as itself in a UTF8 one');
	$node1->safe_psql('u8', q{SELECT zk_lock_try_acquire_session(U&'atk/\65E5\672C', parents => false) > 0,
	                       zk_lock_release(U&'atk/\65E5\672C')});
	my ($rc, $out, $err) = $node1->psql('lat',
		q{SELECT resource FROM zk_lock_stats WHERE resource LIKE 'atk/\\\\u%'});
	is($rc, 0, 'a LATIN1 database reads a name it cannot show without an error') or diag($err);
	is($out, 'atk/\u65e5\u672c', 'escaped');
	is($node1->safe_psql('lat', qq{SELECT acquisitions FROM zk_lock_stats WHERE resource = $lat_name}),
		'1', 'and its own name as itself');
}

# --- lost locks counted while everything else reads -------------------------------
# node1's worker counts each lost lock while it holds the channel's lock
# (the statistics' lock is taken last of all): node2 force-releases 25
# locks a node1 backend holds while two node1 sessions read zk_lock_stats,
# zk_lock_waits and zk_lock_local (the channel's lock) in a loop, and a
# third takes and releases locks of its own.  No hang, no error, and
# exactly 25 lost, on node1 only (a backend holds 32 nodes at most).
{
	my $offset = -s $node1->logfile;
	my $h = zk_session($node1, 'lost_holder');
	$h->query_ok(q{DO $$BEGIN FOR i IN 1..25 LOOP
		PERFORM zk_lock_acquire_session('lo/' || i, parents => false); END LOOP; END $$});
	my @r;
	for my $k (1 .. 2)
	{
		my $r = zk_session($node1, "lost_reader$k");
		$r->send(q{DO $$DECLARE n bigint; BEGIN FOR i IN 1..150 LOOP
			SELECT count(*) INTO n FROM zk_lock_stats;
			SELECT count(*) INTO n FROM zk_lock_waits;
			SELECT count(*) INTO n FROM zk_lock_local;
			PERFORM pg_sleep(0.01); END LOOP; END $$});
		push @r, $r;
	}
	my $t = zk_session($node1, 'lost_taker');
	$t->send(q{DO $$BEGIN FOR i IN 1..150 LOOP
		PERFORM zk_lock_acquire_session('lo_t/' || (i % 7), parents => false);
		PERFORM zk_lock_release('lo_t/' || (i % 7)); END LOOP; END $$});
	is(psql1($node2, q{SELECT sum(zk_lock_force_release('lo/' || i)) FROM generate_series(1, 25) i}),
		'25', 'node2 force-releases the 25 locks node1 holds');
	ok(wait_until(sub { psql1($node1, q{SELECT coalesce(sum(lost), 0) FROM zk_lock_stats WHERE resource LIKE 'lo/%'}) eq '25' },
			timeout => 20),
		'node1: 25 lost');
	for my $c (@r, $t)
	{
		my $res = $c->wait(60);
		ok($res && $res->{sqlstate} eq '00000' && $res->{err} !~ /ERROR/,
			$c->name . ': done, no error') or diag($res ? $res->{err} : 'timed out');
		$c->quit;
	}
	is(psql1($node1, q{SELECT coalesce(sum(lost), 0) FROM zk_lock_stats WHERE resource LIKE 'lo%'}), '25',
		'node1: exactly 25 lost');
	is(psql1($node2, q{SELECT coalesce(sum(lost), 0) FROM zk_lock_stats WHERE resource LIKE 'lo%'}), '0',
		'node2: none');
	is(psql1($node1, q{SELECT acquisitions FROM zk_lock_stats WHERE resource = 'lo_t/3'}), '22',
		'the taker meanwhile: every acquisition counted');
	$h->query(q{SELECT zk_lock_release_all()});
	$h->quit;
	is(psql1($node1, q{SELECT state FROM zk_lock_status}), 'connected', 'the worker is connected');
	is(join("\n", zk_log_crashes($node1, $offset)), '', 'no crash in the log');
}

# --- zklock.stats_max at its maximum ----------------------------------------------
{
	my $big = zk_node('big', extra_conf => 'zklock.stats_max = 1000000');
	is(psql1($big, q{SHOW zklock.stats_max}), '1000000', 'an instance starts with zklock.stats_max = 1000000');
	my $q = q{SELECT setting FROM pg_settings WHERE name = 'shared_memory_size'};
	cmp_ok(psql1($big, $q) - psql1($node1, $q), '>=', int(999000 * 256 / 1048576),
		'and sets aside room for a million names of up to 255 bytes (shared_memory_size, MB)');
	is(psql1($big, q{SELECT zk_lock_try_acquire_session('big/a', parents => false) > 0,
	                        zk_lock_release('big/a'),
	                        (SELECT acquisitions FROM zk_lock_stats WHERE resource = 'big/a')}),
		't|t|1', 'and counts');
	$big->stop;
}

$node1->stop;
$node2->stop;
zk_done_check();
done_testing();
