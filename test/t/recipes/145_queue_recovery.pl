
# The transactional put's move (issue 31) is all or nothing, and its
# recovery reaches every queue:
#  - a move whose entry cannot be made (the queue's entries deleted from
#    outside while the move is paused at queue-before-move) leaves the
#    pending node: the item of the committed transaction is not lost; the
#    failed move owes a walk (backing off from 1 s), and once entries
#    exists again the worker, still connected, moves it
#  - the instance killed between the commit record and the move of puts
#    to nested queues (tx/sub, tx/sub/deep): the restarted worker's walk
#    finds their pending nodes at any depth and moves them
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;

zk_start();
my $node1 = zk_node('node1');

my $root = zk_root();
my $qroot = "$root/zklock.queues";

# The names of $queue's $dir children (entries or pending)
sub children
{
	my ($queue, $dir) = @_;
	my $d = "$qroot/$queue/$dir";
	my @names = sort map { m{^\Q$d\E/([^/]+)$} ? $1 : () }
	  zk_list_znodes($qroot);
	return @names;
}

my $a1 = zk_session($node1, 'A1');

# ---------------------------------------------------------------------------
# A move whose create fails leaves the pending node.
$a1->query_ok(q{SELECT zk_queue_put_now('rq', 'made the queue'::text)});
is($a1->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('rq')}),
	'made the queue', 'queue rq exists and is empty again');
ok(zk_set_failpoints($node1, 'queue-before-move=pause'),
	'failpoint queue-before-move=pause');
my $from = -s $node1->logfile;
$a1->query_ok('BEGIN');
$a1->query_ok(q{SELECT zk_queue_put('rq', 'committed'::text)});
$a1->send('COMMIT');
ok(zk_wait_log($node1, qr/failpoint "queue-before-move" reached/, $from),
	'COMMIT wrote its record; the move is paused');
is(scalar(children('rq', 'pending')), 1, 'the item is a pending node');
my ($rc, undef, $err) = ZkLockTest::zkutil('delete-r', "$qroot/rq/entries");
is($rc, 0, "rq's entries deleted from outside") or diag($err);
ok(zk_set_failpoints($node1, ''), 'failpoint cleared: the move goes on');
my $r = $a1->wait(120);
ok($r && $r->{sqlstate} eq '00000', 'COMMIT returned');
like($r ? $r->{err} : '', qr/still pending after the commit/,
	'with the WARNING that the item is still pending');
is(scalar(children('rq', 'pending')), 1,
	'the failed move left the pending node (the item is not lost)');
($rc, undef, $err) =
  ZkLockTest::zkutil('create-acl', "$qroot/rq/entries", 'rwcda', 'x:y');
is($rc, 0, "rq's entries made again") or diag($err);
ok( wait_until(
		sub { children('rq', 'entries') == 1 && !children('rq', 'pending') },
		timeout => 90),
	'the worker, still connected, moved the committed item into the queue');
ok(zk_log_count($node1, qr/moving the queue item .*rq.* of a committed transaction/,
		$from) >= 1,
	'its walk said so in the log');
is($a1->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('rq')}),
	'committed', 'and it is taken');

# ---------------------------------------------------------------------------
# A crash between the commit record and the moves of puts to nested
# queues: the walk finds their pending nodes.
$a1->query_ok(q{SELECT zk_queue_put_now('tx/sub/deep', 'made'::text)});
is($a1->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('tx/sub/deep')}),
	'made', 'queue tx/sub/deep exists and is empty again');
ok(zk_set_failpoints($node1, 'queue-before-move=pause'),
	'failpoint queue-before-move=pause');
$from = -s $node1->logfile;
$a1->query_ok('BEGIN');
$a1->query_ok(q{SELECT zk_queue_put('tx/sub', 'sub survives'::text)});
$a1->query_ok(q{SELECT zk_queue_put('tx/sub/deep', 'deep survives'::text)});
$a1->send('COMMIT');
ok(zk_wait_log($node1, qr/failpoint "queue-before-move" reached/, $from),
	'COMMIT wrote its record; the move is paused');
is(scalar(children('tx/sub', 'pending')) + scalar(children('tx/sub/deep', 'pending')),
	2, 'both items are pending nodes');
$node1->stop('immediate');
$node1->start;
ok(zk_set_failpoints($node1, ''), 'failpoint cleared');
ok( wait_until(
		sub {
			children('tx/sub', 'entries') == 1
			  && children('tx/sub/deep', 'entries') == 1
			  && !children('tx/sub', 'pending')
			  && !children('tx/sub/deep', 'pending');
		},
		timeout => 60),
	'after the crash the worker moved both items of the nested queues');
my $c1 = zk_session($node1, 'C1');
is( $c1->query_ok(
		q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('tx/sub')}),
	'sub survives',
	'tx/sub gives its item');
is( $c1->query_ok(
		q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('tx/sub/deep')}),
	'deep survives',
	'tx/sub/deep gives its item');

$c1->quit;
zk_done_check();
done_testing();
