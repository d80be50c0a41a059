
# Bounded waits when the connection to ZooKeeper goes silent with requests
# in flight (doc/safety.md, "Bounded waits"; REVIEW.md classes 2 and 5).
# node1 reaches ZooKeeper through a proxy the test owns (test/zk_proxy.py),
# which swallows every byte both ways while both sockets stay open: a
# partition, not a reset.
#
#  (a) A waiter whose node is already queued in ZooKeeper (no timeout of its
#      own) is not failed after zklock.connect_timeout (its node may still
#      be granted once the connection returns) but when the worker gives the
#      session up: 08006, a session timeout after the client noticed the
#      silence (two thirds of it); never an endless wait.  Its node goes
#      with the session.
#  (b) A release during the silence does not hold the backend up: ROLLBACK
#      returns at once; the node keeps the other instance out until
#      ZooKeeper ends node1's session, then the waiter there is granted.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkChaos;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $SESSION_TIMEOUT = 4;    # zk_node's default zklock.session_timeout
my $SLACK = 5;              # a loaded 2-core machine

my $hosts = zk_start();
my ($zk_port) = $hosts =~ /:(\d+)$/;
my $px = ZkChaos::Proxy->start(
	links => [ [ 'node1', PostgreSQL::Test::Cluster::get_free_port(), $zk_port ] ]);
my $node1 = zk_node('node1', hosts => '127.0.0.1:' . $px->port('node1'),
	extra_conf => "zklock.connect_timeout = '2s'");
my $node2 = zk_node('node2');

# --- (a) a queued waiter across the silence ---------------------------------
my $h = zk_session($node2, 'holder');
my $w = zk_session($node1, 'waiter');
$h->query_ok('BEGIN');
$h->query_ok(q{SELECT zk_lock_acquire('bw/a', parents => false)});
$w->query_ok('BEGIN');
$w->send(q{SELECT zk_lock_acquire('bw/a', parents => false) > 0});
ok(wait_for_waiting($node1, $w->pid), '(a) node1 waits behind node2\'s holder');
is(zk_count_locks(zk_path('bw/a')), 2, '(a) the waiter\'s node is queued in ZooKeeper');

$px->cut('node1');
my $t_cut = time();
my $r = $w->wait($SESSION_TIMEOUT * 5 / 3 + $SLACK + 5);
ok($r, '(a) the wait ends although the waiter set no timeout');
my $took = time() - $t_cut;
note sprintf('(a) the waiter ended %.2f s after the cut', $took);
is($r && $r->{sqlstate}, '08006', '(a) with 08006');
like($r && $r->{err}, qr/ZooKeeper session lost while acquiring the lock/,
	'(a) saying the session was lost');
cmp_ok($took, '>', 2 + 0.5,
	'(a) not at zklock.connect_timeout (2 s): the node may still be granted');
cmp_ok($took, '<', $SESSION_TIMEOUT * 5 / 3 + $SLACK,
	'(a) but within a session timeout of the client noticing the silence');
$w->query_ok('ROLLBACK');
ok(zk_wait_count(zk_path('bw/a'), 1, 20),
	'(a) the waiter\'s node goes with its session: only the holder\'s is left');
$px->heal('node1');
ok(zk_wait_connected($node1), '(a) node1 connects again once the proxy heals');
$h->query_ok('COMMIT');
ok(zk_wait_no_locks(zk_path('bw/a')), '(a) no node left');

# --- (b) a release during the silence ----------------------------------------
my $h1 = zk_session($node1, 'holder1');
my $w2 = zk_session($node2, 'waiter2');
$h1->query_ok('BEGIN');
$h1->query_ok(q{SELECT zk_lock_acquire('bw/b', parents => false)});
$w2->query_ok('BEGIN');
$w2->send(q{SELECT zk_lock_acquire('bw/b', parents => false, timeout => '60 s') > 0});
ok(wait_for_waiting($node2, $w2->pid), '(b) node2 waits behind node1\'s holder');

$px->cut('node1');
$t_cut = time();
$h1->send('ROLLBACK');
$r = $h1->wait(10);
ok($r && $r->{sqlstate} eq '00000', '(b) ROLLBACK succeeds during the silence');
cmp_ok($r ? $r->{elapsed} : 99, '<', 2, '(b) at once: the release does not wait for ZooKeeper');
ok(!$w2->done, '(b) the node still keeps node2\'s waiter out');
$r = $w2->wait($SESSION_TIMEOUT + $SLACK + 10);
ok($r && $r->{out} eq 't', '(b) node2 is granted once ZooKeeper ends node1\'s session');
note sprintf('(b) granted %.2f s after the cut', time() - $t_cut);
$w2->query_ok('COMMIT');
$px->heal('node1');
ok(zk_wait_connected($node1), '(b) node1 connects again');
ok(zk_wait_no_locks(zk_path('bw/b')), '(b) no node left');

zk_done_check();
done_testing();
