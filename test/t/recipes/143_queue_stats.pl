
# zk_queue_stats (1.9, issue 31): per queue, what this instance's backends
# did, across two instances:
#  - puts count where they were made, zk_queue_put's at its COMMIT only;
#    takes, consumed and given back where the taker is (a ROLLBACK, a
#    ROLLBACK TO SAVEPOINT and a terminated backend each give one back)
#  - a take that found an item waits for nothing (waits 0); one that
#    waited on the empty queue for a put of the other instance counts a
#    wait and its time; a take that timed out counts a timeout and a wait
#  - the rows are not zk_lock_stats'; zk_lock_stats_reset() empties them
#    and moves stats_reset; with zklock.track_stats off nothing is counted
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;
use Time::HiRes qw(sleep);

zk_start();
my $node1 = zk_node('node1');
my $node2 = zk_node('node2');

my $cols = 'puts, takes, consumed, given_back, waits, timeouts';

sub row
{
	my ($node, $queue) = @_;
	return psql1($node,
		"SELECT coalesce((SELECT concat_ws(' ', $cols) FROM zk_queue_stats WHERE queue = '$queue'), 'none')"
	);
}

psql1($_, 'SELECT zk_lock_stats_reset()') for ($node1, $node2);
my $reset0 = psql1($node2, 'SELECT now()');

my $a1 = zk_session($node1, 'A1');
my $b1 = zk_session($node2, 'B1');
my $b2 = zk_session($node2, 'B2');

# ---------------------------------------------------------------------------
# Puts: at once, or at the commit.
$a1->query_ok("SELECT zk_queue_put_now('qs', '$_')") for qw(a b c);
$a1->query_ok('BEGIN');
$a1->query_ok("SELECT zk_queue_put('qs', 'd')");
is(row($node1, 'qs'), '3 0 0 0 0 0', 'three puts at once are counted at once');
$a1->query_ok('COMMIT');
is(row($node1, 'qs'), '4 0 0 0 0 0', "a transactional put counts at its COMMIT");
$a1->query_ok('BEGIN');
$a1->query_ok("SELECT zk_queue_put('qs', 'never')");
$a1->query_ok('ROLLBACK');
is(row($node1, 'qs'), '4 0 0 0 0 0', 'a rolled back put is no put');
is(row($node2, 'qs'), 'none', 'the other instance counted nothing');

# ---------------------------------------------------------------------------
# Takes on node2: consumed, given back (ROLLBACK, ROLLBACK TO, exit).
$b1->query_ok('BEGIN');
$b1->query_ok("SELECT id FROM zk_queue_try_take('qs')");
$b1->query_ok('ROLLBACK');
is(row($node2, 'qs'), '0 1 0 1 0 0', 'a take rolled back: taken, given back');
$b1->query_ok('BEGIN');
$b1->query_ok("SELECT id FROM zk_queue_try_take('qs')");
$b1->query_ok('SAVEPOINT s');
$b1->query_ok("SELECT id FROM zk_queue_take('qs')");
$b1->query_ok('ROLLBACK TO s');
is(row($node2, 'qs'), '0 3 0 2 0 0', 'ROLLBACK TO gives its take back');
$b1->query_ok('COMMIT');
is(row($node2, 'qs'), '0 3 1 2 0 0', 'COMMIT consumes the other');
$b2->query_ok('BEGIN');
$b2->query_ok("SELECT id FROM zk_queue_try_take('qs')");
psql1($node2, 'SELECT pg_terminate_backend(' . $b2->pid . ')');
ok(wait_until(sub { row($node2, 'qs') eq '0 4 1 3 0 0' }, timeout => 30),
	"a terminated backend's item is counted given back")
  or diag(row($node2, 'qs'));
is(row($node1, 'qs'), '4 0 0 0 0 0', "node1's row has none of node2's takes");
is(psql1($node2, q{SELECT count(*) FROM zk_lock_stats WHERE resource LIKE 'q%'}),
	0, 'no queue row in zk_lock_stats');

# ---------------------------------------------------------------------------
# A take waits on the empty queue for node1's put; one times out.
$b1->query_ok('BEGIN');
$b1->send(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_take('qw', '60 s')});
ok(wait_for_waiting($node2, $b1->pid, 20), 'a taker waits on the empty queue');
sleep(0.3);
$a1->query_ok("SELECT zk_queue_put_now('qw', 'late')");
my $r = $b1->wait(30);
is($r && $r->{out}, 'late', 'the put wakes it');
$b1->query_ok('COMMIT');
is(row($node2, 'qw'), '0 1 1 0 1 0', 'a take that waited counts a wait');
cmp_ok(psql1($node2, q{SELECT wait_time FROM zk_queue_stats WHERE queue = 'qw'}),
	'>=', 250, 'and its time (ms)');
is($b1->query_ok(q{SELECT coalesce(id, 'none') FROM zk_queue_take('qw', '200 ms')}),
	'none', 'a take times out');
is(row($node2, 'qw'), '0 1 1 0 2 1', 'a timeout, and a wait');
is($b1->query_ok(q{SELECT coalesce(id, 'none') FROM zk_queue_try_take('qw')}),
	'none', 'a try-take finds nothing');
is(row($node2, 'qw'), '0 1 1 0 2 2', 'counted as ending with no item, no wait');
is(row($node1, 'qw'), '1 0 0 0 0 0', "node1 counted its put only");

# ---------------------------------------------------------------------------
# zklock.track_stats off: nothing; reset: nothing left, stats_reset moves.
$b1->query_ok('SET zklock.track_stats = off');
$b1->query_ok("SELECT zk_queue_put_now('qoff', 'x')");
$b1->query_ok("SELECT id FROM zk_queue_try_take('qoff')");
$b1->query_ok('RESET zklock.track_stats');
is(row($node2, 'qoff'), 'none', 'track_stats off: nothing counted');
is(psql1($node2, "SELECT bool_and(stats_reset <= '$reset0') FROM zk_queue_stats"),
	't', 'stats_reset is the last reset');
psql1($node2, 'SELECT zk_lock_stats_reset()');
is(psql1($node2, 'SELECT count(*) FROM zk_queue_stats'), 0,
	'zk_lock_stats_reset() empties zk_queue_stats');
$b1->query_ok("SELECT zk_queue_put_now('qs', 'e')");
is(psql1($node2, "SELECT stats_reset > '$reset0' FROM zk_queue_stats WHERE queue = 'qs'"),
	't', 'stats_reset moved to the reset');
is(row($node1, 'qs'), '4 0 0 0 0 0', "node1's counts stay");
psql1($_, "SELECT sum(zk_queue_purge(q)) FROM unnest('{qs,qw,qoff}'::text[]) q")
  for ($node1, $node2);

zk_done_check();
done_testing();
