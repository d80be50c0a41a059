
# The take's segment kept per backend (issue 31, i31-fast; backend/queue.c
# take_segment), attacked by review:
#  - lengths: a large item (600 kB) then a small one, a peek and a take of
#    an empty item after it: each returns exactly its own bytes (the length
#    written with each item, never the previous item's tail)
#  - a withdrawn take's late write: the worker is paused with the hold's
#    reply in hand (failpoint queue-hold-reply) while the backend's take
#    times out and the same backend starts a second take of another queue;
#    once the worker goes on, the second take gets its own item, the first
#    item is back in its queue (not held), and no hold is left
#  - two takes in one transaction (two queues, sizes differing): both items
#    exact, both consumed by the COMMIT
#  - the worker restarted (SIGTERM) under a backend that has its segment:
#    that backend's next take still gets its item (the segment is the
#    backend's, not the worker's)
#  - the consume refused by ZooKeeper for good (another client made a child
#    under the entry: NOTEMPTY, a multi that no retry can make pass): the
#    COMMIT returns at once (not after a session timeout), the worker says
#    why in its log, the take's channel entry is freed (not left RELEASING
#    to a reconnection, whose retried multi would delete another taker's
#    hold), and the item, not consumed, can be taken again
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;
use Time::HiRes qw(time);

zk_start();
my $node1 = zk_node('node1', session_timeout => '20s');
my $root = zk_root();

sub nodes_in
{
	my ($q, $dir) = @_;
	my $p = "$root/zklock.queues/$q";
	return grep { m{^\Q$p/$dir\E/} } zk_list_znodes("$root/zklock.queues");
}

my $s = zk_session($node1, 'S');

# ---------------------------------------------------------------------------
# Lengths: large, then small, then empty, through one segment.
$s->query_ok(q{SELECT zk_queue_put_now('sq', convert_to(repeat('L', 600000), 'UTF8'))});
$s->query_ok(q{SELECT zk_queue_put_now('sq', convert_to('small', 'UTF8'))});
$s->query_ok(q{SELECT zk_queue_put_now('sq', ''::bytea)});
is($s->query_ok(q{SELECT length(item) || ':' || md5(item) FROM zk_queue_try_take('sq')}),
	'600000:' . psql1($node1, q{SELECT md5(convert_to(repeat('L', 600000), 'UTF8'))}),
	'the large item, exact');
is($s->query_ok(q{SELECT convert_from(item, 'UTF8') || ':' || length(item) FROM zk_queue_peek('sq')}),
	'small:5', 'a peek after it: the small item alone (its own length)');
is($s->query_ok(q{SELECT convert_from(item, 'UTF8') || ':' || length(item) FROM zk_queue_try_take('sq')}),
	'small:5', 'a take after it: the small item alone');
is($s->query_ok(q{SELECT length(item) FROM zk_queue_try_take('sq')}),
	'0', 'an empty item after them: empty');
is($s->query_ok(q{SELECT zk_queue_length('sq')}), '0', 'all three consumed');

# ---------------------------------------------------------------------------
# A withdrawn take's write while the same backend's next take is under way.
$s->query_ok(q{SELECT zk_queue_put_now('wa', convert_to(repeat('A', 300000), 'UTF8'))});
$s->query_ok(q{SELECT zk_queue_put_now('wb', convert_to('bee', 'UTF8'))});
my $off = -s $node1->logfile;
ok(zk_set_failpoints($node1, 'queue-hold-reply=pause'), 'failpoint set');
$s->query_ok('BEGIN');
is($s->query_ok(q{SELECT coalesce(id, 'none') FROM zk_queue_take('wa', '1 s')}),
	'none', 'the first take times out with the worker paused at its hold\'s reply');
ok(zk_wait_log($node1, qr/failpoint "queue-hold-reply" reached/, $off, 20),
	'the worker holds the hold\'s reply (the read behind it)');
$s->send(q{SELECT convert_from(item, 'UTF8') || ':' || length(item) FROM zk_queue_take('wb', '60 s')});
ok(zk_set_failpoints($node1, ''), 'failpoint cleared');
my $r = $s->wait(60);
is($r ? $r->{out} : 'timed out', 'bee:3',
	'the second take gets its own item, not the withdrawn take\'s');
is($s->query_ok('COMMIT'), '', 'committed');
ok(wait_until(sub { scalar(nodes_in('wa', 'taken')) == 0 }, timeout => 20),
	'the withdrawn take left no hold');
is($s->query_ok(q{SELECT zk_queue_length('wa') || ' ' || zk_queue_length('wb')}),
	'1 0', 'the first item is back in its queue, the second consumed');
is($s->query_ok(q{SELECT length(item) FROM zk_queue_try_take('wa')}),
	'300000', 'and the first item can be taken again, whole');

# ---------------------------------------------------------------------------
# Two takes in one transaction.
$s->query_ok(q{SELECT zk_queue_put_now('t1', convert_to(repeat('x', 70000), 'UTF8'))});
$s->query_ok(q{SELECT zk_queue_put_now('t2', convert_to('yy', 'UTF8'))});
$s->query_ok('BEGIN');
is($s->query_ok(q{SELECT length(item) FROM zk_queue_try_take('t1')}), '70000',
	'first take of the transaction');
is($s->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('t2')}), 'yy',
	'second take of the transaction: its own bytes');
is($s->query_ok('COMMIT'), '', 'committed');
is($s->query_ok(q{SELECT zk_queue_length('t1') + zk_queue_length('t2')}), '0',
	'both consumed');

# ---------------------------------------------------------------------------
# The worker restarted under a backend that keeps its segment.
my $worker = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
is(kill('TERM', $worker), 1, 'SIGTERM to the worker');
ok( wait_until(
		sub {
			my $x = psql1($node1,
				q{SELECT coalesce(worker_pid, 0) || ' ' || state FROM zk_lock_status});
			my ($pid, $state) = split / /, $x;
			return $pid != 0 && $pid != $worker && $state eq 'connected';
		},
		timeout => 30, interval => 0.1),
	'a new worker, connected');
$s->query_ok(q{SELECT zk_queue_put_now('rq', convert_to('after', 'UTF8'))});
is($s->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('rq')}),
	'after', 'the same backend takes through its kept segment');

# ---------------------------------------------------------------------------
# The consume refused for good.
$s->query_ok(q{SELECT zk_queue_put_now('nq', convert_to('stuck', 'UTF8'))});
$s->query_ok('BEGIN');
is($s->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('nq')}),
	'stuck', 'taken');
my ($nentry) = nodes_in('nq', 'entries');
my ($rc, undef, $err) = ZkLockTest::zkutil('create-seq', "$nentry/child-", '');
is($rc, 0, "another client's child under the entry $err");
$off = -s $node1->logfile;
my $t0 = time();
$r = $s->query('COMMIT');
my $took = time() - $t0;
ok($r && $r->{sqlstate} eq '00000', 'the COMMIT returns without an error')
  or diag(explain($r));
cmp_ok($took, '<', 15, "... without waiting out the session timeout ($took s)");
unlike($r ? $r->{err} // '' : '', qr/was not consumed within/,
	'... and without the timeout\'s WARNING');
ok(zk_wait_log($node1, qr/could not consume item .* of a zklock queue/, $off, 20),
	'the worker logs why the item was not consumed');
ok(wait_until(sub { zk_entries_in_use($node1) == 0 }, timeout => 20),
	'the take\'s channel entry is freed');
is(scalar(nodes_in('nq', 'taken')), 0, 'its hold is deleted');
is($s->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('nq')}),
	'stuck', 'the item, not consumed, is taken again');

$s->quit;
is(scalar(nodes_in('wa', 'taken')) + scalar(nodes_in('rq', 'taken'))
	  + scalar(nodes_in('sq', 'taken')), 0, 'no hold left');
done_testing();
