
# zk_queue_stats (issue 31) attacked by a reviewer (REVIEW.md's class 3,
# shared state): queue rows share zk_lock_stats' hash, their counters a
# union with a lock's, and the worker's queue_waited flag lives in a
# channel entry that is reused.
#  - a lock resource and a queue of the same name: two rows, each counted
#    as its own kind, neither read as the other;
#  - zklock.stats_max (100) filled with locks and queues mixed: never more
#    than 100 rows in both views together, a busy queue row and a busy
#    lock row survive the churn of the other kind (usage counts both);
#  - queue_waited is cleared when the entry is submitted again: a take
#    that waited and timed out, then a take from the same backend that
#    finds an item at once, counts one wait, not two;
#  - a take with a timeout of 0 is a try-take: it gets a free item
#    (before: never, its deadline passed before the worker answered) and
#    counts no wait.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;

zk_start();
my $node = zk_node('node1', extra_conf => 'zklock.stats_max = 100');

sub qrow
{
	my ($queue) = @_;
	return psql1($node,
		"SELECT coalesce((SELECT concat_ws(' ', puts, takes, consumed, given_back, waits, timeouts) FROM zk_queue_stats WHERE queue = '$queue'), 'none')"
	);
}

psql1($node, 'SELECT zk_lock_stats_reset()');
my $s = zk_session($node, 'S');

# --- a lock and a queue of one name -----------------------------------------
$s->query_ok(q{SELECT zk_lock_acquire_session('same', parents => false)});
$s->query_ok(q{SELECT zk_lock_release('same')});
$s->query_ok(q{SELECT zk_queue_put_now('same', 'x')});
$s->query_ok(q{SELECT zk_queue_put_now('same', 'y')});
is(qrow('same'), '2 0 0 0 0 0', 'the queue row has its puts only');
is(psql1($node, q{SELECT concat_ws(' ', mode, acquisitions, granted_at_once, waited, timeouts) FROM zk_lock_stats WHERE resource = 'same'}),
	'exclusive 1 1 0 0', 'the lock row has its acquisition only, not the puts');
is(psql1($node, q{SELECT count(*) FROM zk_lock_stats WHERE resource = 'same'}), '1',
	'one lock row: the queue row is not shown as a lock');

# --- queue_waited cleared at a new submission -------------------------------
is($s->query_ok(q{SELECT coalesce(id, 'none') FROM zk_queue_take('qa', '300 ms')}),
	'none', 'a take on an empty queue times out');
is(qrow('qa'), '0 0 0 0 1 1', 'one wait, one timeout');
$s->query_ok(q{SELECT zk_queue_put_now('qa', 'now')});
$s->query_ok('BEGIN');
isnt($s->query_ok(q{SELECT coalesce(id, 'none') FROM zk_queue_take('qa', '30 s')}),
	'none', 'the next take finds the item at once');
$s->query_ok('COMMIT');
is(qrow('qa'), '1 1 1 0 1 1', 'it did not wait: still one wait');
for my $i (1 .. 5)
{
	$s->query_ok(q{SELECT zk_queue_put_now('qa', 'again')});
	$s->query_ok(q{SELECT id FROM zk_queue_take('qa', '30 s')});
}
is(qrow('qa'), '6 6 6 0 1 1', 'five more takes that found an item: no wait counted');
$s->query_ok(q{SELECT zk_queue_put_now('qa', 'zero')});
is($s->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_take('qa', '0')}),
	'zero', 'a take with a timeout of 0 takes the free item (before: none, ever)');
is(qrow('qa'), '7 7 7 0 1 1', 'and counts no wait');
is($s->query_ok(q{SELECT coalesce(id, 'none') FROM zk_queue_take('qa', '0')}),
	'none', 'on the empty queue: none at once');
is(qrow('qa'), '7 7 7 0 1 2', 'a timeout (no item), no wait, as a try-take');

# --- stats_max filled with both kinds ---------------------------------------
psql1($node, 'SELECT zk_lock_stats_reset()');
psql1($node, q{DO $$BEGIN FOR i IN 1..30 LOOP
	PERFORM zk_lock_acquire_session('hotlock', parents => false);
	PERFORM zk_lock_release('hotlock');
	PERFORM zk_queue_put_now('hotq', 'h'); END LOOP; END $$});
my $max = 0;
for my $batch (0 .. 5)
{
	my ($from, $to) = ($batch * 25, $batch * 25 + 24);
	psql1($node, qq{DO \$\$BEGIN FOR i IN $from..$to LOOP
		IF i % 2 = 0 THEN
			PERFORM zk_queue_put_now(format('evq%s', lpad(i::text, 3, '0')), 'e');
		ELSE
			PERFORM zk_lock_acquire_session(format('evl%s', lpad(i::text, 3, '0')), parents => false);
			PERFORM zk_lock_release(format('evl%s', lpad(i::text, 3, '0')));
		END IF; END LOOP; END \$\$});
	my $n = psql1($node,
		q{SELECT (SELECT count(*) FROM zk_lock_stats) + (SELECT count(*) FROM zk_queue_stats)});
	$max = $n if $n > $max;
}
cmp_ok($max, '<=', 100, "locks and queues together never more than zklock.stats_max rows (at most $max)");
cmp_ok($max, '>=', 90, 'and the table filled up');
is(qrow('hotq'), '30 0 0 0 0 0', 'the busy queue row stays, with its counts');
is(psql1($node, q{SELECT acquisitions FROM zk_lock_stats WHERE resource = 'hotlock'}), '30',
	'the busy lock row stays, with its counts');
is(psql1($node, q{SELECT count(*) FROM zk_queue_stats WHERE queue LIKE 'evl%'}), '0',
	'no lock shown as a queue');
is(psql1($node, q{SELECT count(*) FROM zk_lock_stats WHERE resource LIKE 'evq%' OR resource = 'hotq'}), '0',
	'no queue shown as a lock');
is(psql1($node, q{SELECT count(*) FILTER (WHERE puts <> 1 OR takes <> 0 OR waits <> 0) FROM zk_queue_stats WHERE queue LIKE 'evq%'}),
	'0', 'each surviving queue row counts its one put, nothing of a lock');

# --- counted from many sessions at once, read and reset meanwhile ---------
psql1($node, 'SELECT zk_lock_stats_reset()');
my @takers = map { zk_session($node, "T$_") } 1 .. 3;
my $putter = zk_session($node, 'P');
$_->send(q{DO $$BEGIN FOR i IN 1..40 LOOP
	PERFORM zk_queue_take('qc', '120 s'); COMMIT; END LOOP; END $$}) for @takers;
$putter->send(q{DO $$BEGIN FOR i IN 1..120 LOOP
	PERFORM zk_queue_put_now('qc', i::text);
	PERFORM zk_lock_acquire_session('qc', parents => false);
	PERFORM zk_lock_release('qc'); END LOOP; END $$});
my $reads = 0;
while (grep { !$_->done } @takers, $putter)
{
	$s->query_ok(q{SELECT count(*) FROM zk_queue_stats, zk_lock_stats});
	$reads++;
	last if $reads > 20000;
}
for my $c (@takers, $putter)
{
	my $r = $c->wait(120);
	is($r && $r->{sqlstate}, '00000', $c->name . ' ran its loop')
	  or diag(explain($r));
}
note "$reads reads while counting";
like(qrow('qc'), qr/^120 120 120 0 \d+ 0$/,
	'120 puts, 120 takes consumed, none given back, no timeout');
cmp_ok(psql1($node, q{SELECT waits FROM zk_queue_stats WHERE queue = 'qc'}), '<=', 120,
	'at most one wait per take');
is(psql1($node, q{SELECT acquisitions FROM zk_lock_stats WHERE resource = 'qc'}), '120',
	"the lock of the queue's name counted apart");
$_->quit for @takers, $putter;

$s->quit;
psql1($node, q{SELECT sum(zk_queue_purge(q)) FROM (SELECT 'same' q UNION ALL SELECT 'qa' UNION ALL SELECT 'qc' UNION ALL SELECT 'hotq'
	UNION ALL SELECT format('evq%s', lpad(i::text, 3, '0')) FROM generate_series(0, 149, 2) i) s});
zk_done_check();
done_testing();
