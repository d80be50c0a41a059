
# The transactional put of the distributed queue (issue 31), across two
# instances:
#  - an item put inside a transaction is not in the queue (nothing under
#    entries or pending) before COMMIT: the other instance cannot take it;
#    after COMMIT it is an entry, taken by the other instance, and no
#    pending node is left
#  - ROLLBACK, and ROLLBACK TO a savepoint, leave nothing in ZooKeeper;
#    what was put outside the savepoint is still put at COMMIT
#  - items put by transactions keep the order of their commits
#  - PREPARE TRANSACTION with a put is refused
#  - a hold deleted from outside ZooKeeper: the taker's COMMIT fails with
#    55P03 and consumes nothing; the item is taken again, same id
#  - the instance killed between the commit record and the move (failpoint
#    queue-before-move): its restarted worker moves the item
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;

zk_start();
my $node1 = zk_node('node1');
my $node2 = zk_node('node2');

my $root = zk_root();
my $q = "$root/zklock.queues/tx";

sub children
{
	my ($dir) = @_;
	my @names = sort map { m{/([^/]+)$} ? $1 : () }
	  grep { m{^\Q$q/$dir\E/} } zk_list_znodes("$root/zklock.queues");
	return @names;
}

my $a1 = zk_session($node1, 'A1');
my $b1 = zk_session($node2, 'B1');

sub take_b
{
	return $b1->query_ok(
		q{SELECT coalesce(convert_from(item, 'UTF8'), 'none') FROM zk_queue_try_take('tx')});
}

# ---------------------------------------------------------------------------
# Not in the queue before COMMIT; in it after.
$a1->query_ok('BEGIN');
my $key = $a1->query_ok(q{SELECT zk_queue_put('tx', 'first'::text)});
like($key, qr/^\d+-\d+-\d+-100$/,
	'zk_queue_put returns its key: <system id>-<xid>-<n>-<priority>');
is(take_b(), 'none', 'before COMMIT, the other instance takes nothing');
is_deeply([ children('entries') ], [], 'before COMMIT, no entry in ZooKeeper');
is_deeply([ children('pending') ], [], 'nor a pending node (made at COMMIT)');
$a1->query_ok('COMMIT');
my @e = children('entries');
is(scalar(@e), 1, 'after COMMIT, the item is an entry');
like($e[0] // '', qr/^entry-100-\d{10}$/, "with Kazoo's name");
is_deeply([ children('pending') ], [], 'and its pending node is gone');
is(take_b(), 'first', 'the other instance takes it after COMMIT');

# ---------------------------------------------------------------------------
# ROLLBACK leaves nothing; ROLLBACK TO forgets the savepoint's items only.
$a1->query_ok('BEGIN');
$a1->query_ok(q{SELECT zk_queue_put('tx', 'rolled back'::text)});
$a1->query_ok('ROLLBACK');
is_deeply([ children('entries'), children('pending') ], [],
	'ROLLBACK leaves nothing in ZooKeeper');
is(take_b(), 'none', 'and nothing to take');

$a1->query_ok('BEGIN');
$a1->query_ok(q{SELECT zk_queue_put('tx', 'kept'::text, 5)});
$a1->query_ok('SAVEPOINT s');
$a1->query_ok(q{SELECT zk_queue_put('tx', 'in the savepoint'::text)});
$a1->query_ok('ROLLBACK TO SAVEPOINT s');
$a1->query_ok('COMMIT');
is_deeply([ map { s/-\d+$//r } children('entries') ], ['entry-005'],
	'ROLLBACK TO SAVEPOINT: only the item put outside it is in the queue');
is(take_b(), 'kept', 'and it is taken');
is(take_b(), 'none', 'nothing else');

# an error at the put (bad input) aborts nothing in ZooKeeper either
$a1->query_ok('BEGIN');
$a1->query_ok(q{SELECT zk_queue_put('tx', 'lost with the error'::text)});
my $r = $a1->query(q{SELECT zk_queue_put('tx', NULL::bytea)});
is($r->{sqlstate}, '22004', 'a NULL item: an error (22004)');
$a1->query('COMMIT');
is_deeply([ children('entries'), children('pending') ], [],
	'the failed transaction put nothing');

# ---------------------------------------------------------------------------
# Order: the commit's, not the put's.
$a1->query_ok('BEGIN');
$a1->query_ok(q{SELECT zk_queue_put('tx', 'committed second'::text)});
$node1->safe_psql('postgres', q{SELECT zk_queue_put('tx', 'committed first'::text)});
$a1->query_ok('COMMIT');
is(take_b(), 'committed first', 'items are in the order of their commits');
is(take_b(), 'committed second', 'then the next');

# PREPARE TRANSACTION with a put is refused
$a1->query_ok('BEGIN');
$a1->query_ok(q{SELECT zk_queue_put('tx', 'prepared'::text)});
$r = $a1->query(q{PREPARE TRANSACTION 'p'});
like($r->{err}, qr/cannot PREPARE a transaction that puts zklock queue items/,
	'PREPARE TRANSACTION with a put is refused');
$a1->query('ROLLBACK');
is_deeply([ children('entries'), children('pending') ], [],
	'and puts nothing');

# ---------------------------------------------------------------------------
# A hold deleted from outside: the commit fails (55P03), nothing consumed.
$node1->safe_psql('postgres', q{SELECT zk_queue_put_now('tx', 'guarded'::text)});
$b1->query_ok('BEGIN');
my $id = $b1->query_ok(q{SELECT id FROM zk_queue_try_take('tx')});
like($id, qr/^entry-100-\d{10}$/, 'node2 holds an item');
my ($rc, undef, $zerr) = ZkLockTest::zkutil('delete-r', "$q/taken/$id");
is($rc, 0, 'its hold deleted from outside') or diag($zerr);
ok(zk_wait_log($node2, qr/hold .* of a queue item was deleted while held/),
	'the worker noticed');
$r = $b1->query('COMMIT');
is($r->{sqlstate}, '55P03', 'COMMIT fails with 55P03, as for a lost lock');
is_deeply([ children('entries') ], [$id], 'the item was not consumed');
is($a1->query_ok(q{SELECT id FROM zk_queue_try_take('tx')}), $id,
	'and is taken again, with the same id');

# ---------------------------------------------------------------------------
# The instance crashes between the commit record and the move: the item
# is pending; the restarted worker asks the commit log and moves it.
ok(zk_set_failpoints($node1, 'queue-before-move=pause'),
	'failpoint queue-before-move=pause');
my $from = -s $node1->logfile;
$a1->query_ok('BEGIN');
$a1->query_ok(q{SELECT zk_queue_put('tx', 'survives the crash'::text)});
$a1->send('COMMIT');
ok(zk_wait_log($node1, qr/failpoint "queue-before-move" reached/, $from),
	'COMMIT wrote its record; the move is paused');
is(scalar(children('pending')), 1, 'the item is a pending node');
is_deeply([ children('entries') ], [], 'not an entry yet');
$node1->stop('immediate');
$node1->start;
ok(zk_set_failpoints($node1, ''), 'failpoint cleared');
ok( wait_until(sub { children('entries') == 1 && !children('pending') },
		timeout => 60),
	'after the crash the worker moved the committed item into the queue');
is(take_b(), 'survives the crash', 'and the other instance takes it');
ok(zk_log_count($node1, qr/moving the queue item .* of a committed transaction/,
		$from) >= 1,
	'the worker said so in its log');

$b1->quit;
zk_done_check();
done_testing();
