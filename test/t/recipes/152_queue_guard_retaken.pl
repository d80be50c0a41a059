
# A guard sent late must see the hold that is ours, not one of the same
# name (issue 31, REVIEW.md classes 5 and 18; review of test 150's fix).
# A hold is taken/<entry>, named after the entry: once it is deleted from
# outside, another taker can hold the same entry with a node of the same
# name.  S on node1 (through a proxy) holds the only item with its guard
# owed (queue-before-guard=fail); the link is cut, the hold deleted from
# outside and the item taken by T on node2; healed, node1's worker sends
# the owed guard, which finds T's hold:
#  - S's take is LOST (the exists' czxid is not its hold's) and its
#    COMMIT fails with 55P03 (before: "there", the COMMIT passed, and the
#    item was consumed by both S and T, T's hold deleted by S's consume)
#  - T's hold is untouched by S's end; T's COMMIT consumes the item once
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
my $node2 = zk_node('node2');
my $root = zk_root();
my $q = "$root/zklock.queues/rq";

sub since { return psql1($node1, 'SELECT state_since FROM zk_lock_status'); }

my $s = zk_session($node1, 'S');
my $t = zk_session($node2, 'T');
my $put = $t->query_ok(q{SELECT zk_queue_put_now('rq', 'only')});

ok(zk_set_failpoints($node1, 'queue-before-guard=fail'), 'failpoint set');
my $from = -s $node1->logfile;
$s->query_ok('BEGIN');
is($s->query_ok(q{SELECT id FROM zk_queue_try_take('rq')}), $put, 'S holds the item');
ok(zk_wait_log($node1, qr/could not watch the hold ".*\Q$put\E" yet/, $from),
	'its guard was not sent');

my $since = since();
$px->cut('node1');
ok(zk_set_failpoints($node1, ''), 'failpoint cleared, the link cut');
my ($rc, undef, $err) = ZkLockTest::zkutil('delete-r', "$q/taken/$put");
is($rc, 0, 'S\'s hold deleted from outside') or diag($err);
$t->query_ok('BEGIN');
is($t->query_ok(q{SELECT id FROM zk_queue_try_take('rq')}), $put,
	'T on node2 holds the same item, a hold of the same name');
ok(wait_until(sub { psql1($node1, 'SELECT state FROM zk_lock_status') ne 'connected' },
		timeout => 30), 'node1 notices the cut');
$px->heal('node1');
ok(zk_wait_connected($node1, 60), 'node1 connected again');
ok(wait_until(sub { since() ne $since }, timeout => 30), 'node1 did reconnect');
ok(zk_wait_log($node1, qr/the hold ".*\Q$put\E" of a queue item was deleted while held/,
		$from, 30),
	'the guard sent late finds that the hold is not S\'s');
my $r = $s->query('COMMIT');
is($r->{sqlstate}, '55P03', 'S\'s COMMIT fails with 55P03') or diag(explain($r));
is($t->query_ok(q{SELECT count(*) FROM zk_queue_items WHERE queue = 'rq' AND held}), 1,
	'T\'s hold is still there');
$t->query_ok('COMMIT');
is($t->query_ok(q{SELECT zk_queue_length('rq')}), 0, 'T\'s COMMIT consumed the item');

$s->quit;
$t->quit;
$px->stop;
zk_done_check();
done_testing();
