
# A worker whose connections keep failing right after the handshake gives
# its session up within its bound (issue 20, finding 4's wedge).  A server
# that accepts the handshake and then drops the connection (as ZooKeeper
# does when the watches the client sends again exceed jute.maxbuffer) keeps
# the session alive on the server with every handshake, while nothing is
# answered on it.  Before the fix every handshake reset the outage, so the
# worker never gave the session up and its nodes blocked every other
# instance until the worker was restarted by hand.  Now the worker gives the
# session up once no answer has proven it alive for a session timeout, and
# the other instance is granted the lock once ZooKeeper expires it.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkChaos;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $SESSION_TIMEOUT = 4;    # s, zk_node's default

my $hosts = zk_start();
my ($zk_port) = $hosts =~ /:(\d+)$/;
my $px = ZkChaos::Proxy->start(
	links => [ [ 'node1', PostgreSQL::Test::Cluster::get_free_port(), $zk_port ] ]);
my $node1 = zk_node('node1', hosts => '127.0.0.1:' . $px->port('node1'));
my $node2 = zk_node('node2');

my $h = zk_session($node1, 'holder');
$h->query_ok(q{SELECT zk_lock_acquire_session('flap/r') > 0});
my $w = zk_session($node2, 'waiter');
$w->send(q{SELECT zk_lock_acquire('flap/r', timeout => '90 s') > 0});
ok(wait_for_waiting($node2, $w->pid), 'the other instance waits behind node1');

my $log_offset = -s $node1->logfile;
$px->flap('node1');
my $t0 = time();
ok( $node1->wait_for_log(
		qr/gave up ZooKeeper session 0x[0-9a-f]+ after \d+ s without an answer that proved it alive/,
		$log_offset),
	'node1 gives its session up although every handshake succeeds');
my $gave_up = time() - $t0;
note sprintf('given up %.1f s after the flapping began', $gave_up);
cmp_ok($gave_up, '<', 3 * $SESSION_TIMEOUT + 10,
	'within a few session timeouts (bound: no answer for one session timeout)');
ok($node1->log_contains(qr/reconnected to ZooKeeper/, $log_offset),
	'the handshakes did succeed meanwhile (the worker saw connections)');

my $r = $w->wait(60);
ok($r && $r->{out} eq 't', 'the other instance is granted the lock');
note sprintf('granted %.1f s after the flapping began', time() - $t0);

$r = $h->query(q{SELECT zk_lock_acquire_session('flap/other')});
is($r->{sqlstate}, '55P03', 'node1\'s holder is told its lock was lost');

$px->heal('node1');
ok(zk_wait_connected($node1, 60), 'node1 connects again once the proxy forwards');
$h->query_ok('SELECT zk_lock_release_all()');
$h->query_ok(q{SELECT zk_lock_acquire_session('flap/r') > 0});
$h->query_ok('SELECT zk_lock_release_all()');
$w->query_ok('SELECT 1');
zk_done_check();
done_testing();
