
# A held take's guard that could not be sent at the grant (issue 31,
# REVIEW.md class 5).  The guard (an exists with a watch on the hold) is
# what tells the fence that the hold was deleted by someone else.  The
# failpoint queue-before-guard=fail makes it unsent, as a disconnection
# right at the grant would; node1 reaches ZooKeeper through a proxy.
#  - the link is cut while the take is held, the failpoint cleared, and
#    the hold deleted from outside; healed, the worker reconnects (same
#    session) and sends the guard again (queue_release.c, q_retry): it
#    finds the hold gone, and COMMIT fails with 55P03, the item not
#    consumed and taken again with the same id (before: the guard was
#    never sent, the COMMIT passed and consumed the item)
#  - the guard sent again is a watch that lives: a second take with the
#    failpoint set, cleared while connected, is guarded within a few
#    seconds (the server counts its watch), and its hold deleted from
#    outside fails its COMMIT too
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkChaos;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $hosts = zk_start();
my ($zk_port) = $hosts =~ /:(\d+)$/;
my $px = ZkChaos::Proxy->start(
	links => [ [ 'node1', PostgreSQL::Test::Cluster::get_free_port(), $zk_port ] ]);
my $node1 = zk_node('node1', hosts => '127.0.0.1:' . $px->port('node1'),
	session_timeout => '10s');
my $root = zk_root();
my $q = "$root/zklock.queues/gq";

sub since { return psql1($node1, 'SELECT state_since FROM zk_lock_status'); }
sub session { return psql1($node1, 'SELECT session_id FROM zk_lock_status'); }
sub watches { return zk_mntr()->{zk_watch_count} // -1; }

my $s = zk_session($node1, 'S');
my $o = zk_session($node1, 'O');
my @put = map { $o->query_ok(qq{SELECT zk_queue_put_now('gq', '$_')}) } qw(one two);

# --- unsent at the grant, sent again at the reconnection
ok(zk_set_failpoints($node1, 'queue-before-guard=fail'), 'failpoint set');
my $from = -s $node1->logfile;
$s->query_ok('BEGIN');
my $id = $s->query_ok(q{SELECT id FROM zk_queue_try_take('gq')});
like($id, qr/^entry-100-\d{10}$/, 'S holds an item');
ok(zk_wait_log($node1, qr/could not watch the hold ".*\Q$id\E" yet/, $from),
	'its guard was not sent');

my ($since, $sid) = (since(), session());
$px->cut('node1');
ok(zk_set_failpoints($node1, ''), 'failpoint cleared, the link cut');
my ($rc, undef, $err) = ZkLockTest::zkutil('delete-r', "$q/taken/$id");
is($rc, 0, 'the hold deleted from outside meanwhile') or diag($err);
sleep(2);
$px->heal('node1');
ok(zk_wait_connected($node1, 60), 'node1 connected again');
isnt(since(), $since, 'node1 did reconnect');
is(session(), $sid, 'in the same session');
ok(zk_wait_log($node1, qr/the hold ".*\Q$id\E" of a queue item was deleted while held/,
		$from, 30),
	'the guard sent again found the hold gone');
my $r = $s->query('COMMIT');
is($r->{sqlstate}, '55P03', 'COMMIT fails with 55P03')
  or diag(explain($r));
is($o->query_ok(q{SELECT zk_queue_length('gq')}), 2, 'nothing consumed');

# --- unsent at the grant, sent again while connected: a live watch
my $w0 = watches();
ok(zk_set_failpoints($node1, 'queue-before-guard=fail'), 'failpoint set again');
$from = -s $node1->logfile;
$s->query_ok('BEGIN');
my $id2 = $s->query_ok(q{SELECT id FROM zk_queue_try_take('gq')});
ok(zk_wait_log($node1, qr/could not watch the hold ".*\Q$id2\E" yet/, $from),
	'the second take\'s guard was not sent');
is(watches(), $w0, 'no watch on its hold');
ok(zk_set_failpoints($node1, ''), 'failpoint cleared');
ok(wait_until(sub { watches() == $w0 + 1 }, timeout => 30),
	'the guard is sent again: one watch more');
($rc, undef, $err) = ZkLockTest::zkutil('delete-r', "$q/taken/$id2");
is($rc, 0, 'its hold deleted from outside') or diag($err);
ok(zk_wait_log($node1, qr/the hold ".*\Q$id2\E" of a queue item was deleted while held/,
		$from, 30),
	'the worker noticed');
$r = $s->query('COMMIT');
is($r->{sqlstate}, '55P03', 'COMMIT fails with 55P03');

$s->query_ok('BEGIN');
my @again = map { $s->query_ok(q{SELECT id FROM zk_queue_try_take('gq')}) } 1 .. 2;
is_deeply([ sort @again ], [ sort @put ],
	'both items are taken again, with their ids');
$s->query_ok('COMMIT');
is($o->query_ok(q{SELECT zk_queue_length('gq')}), 0, 'then consumed');

$s->quit;
$o->quit;
$px->stop;
zk_done_check();
done_testing();
