
# Chaos: one instance is cut from ZooKeeper by a proxy the test owns
# (test/zk_proxy.py): node1's zklock.hosts names the proxy, which swallows
# every byte both ways while keeping both sockets open -- a partition, not
# a reset -- for longer than the session timeout, while clients on two
# PostgreSQL instances take one EXCLUSIVE lock over and over (see ZkChaos.pm
# for the load and the checker).  One ZooKeeper server (tickTime 200 ms).
#
#  - zk_partition: the proxy cuts node1 off until ZooKeeper has expired
#    node1's session and node2 has been granted the lock, then heals.
#    Round 1: a writer on node1 (a session lock, a write transaction
#    committed every 20 ms) across the cut: its commits must stop (55P03)
#    before node2's grant.  Round 2: a holder in an open transaction (it has
#    written its row) sends COMMIT after node2 was granted, the cut still
#    on (healed a second later): 55P03.
#    The checker counts any commit of node1 that lands after node2's grant.
#
# (Today's code passes this one: with no process stalled, the ZooKeeper
# client leaves "connected" after 2/3 of the session timeout without a
# reply, before the server can expire the session.  It stays as a guard of
# the lease: a lease that outlives the session fails it.)
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkChaos;

use Test::More;
use Time::HiRes qw(sleep time);

my $hosts = zk_start();
my ($zk_port) = $hosts =~ /:(\d+)$/;
my $px = ZkChaos::Proxy->start(
	links => [ [ 'node1', PostgreSQL::Test::Cluster::get_free_port(), $zk_port ] ]);
my @nodes = (
	zk_node('node1', hosts => '127.0.0.1:' . $px->port('node1'),
		extra_conf => ZkChaos::node_conf()),
	zk_node('node2', extra_conf => ZkChaos::node_conf()));
my $chaos = ZkChaos->new(nodes => \@nodes);

my $scn = 'zk_partition';
my @how = ('a writer commits every 20 ms across the cut',
	'COMMIT after node2 was granted');
my $run = $chaos->start($scn, duration => 15);
my $at = 3;
foreach my $round (1, 2)
{
	my $how = $how[ $round - 1 ];
	$run->sleep_until($at);
	my ($pin, $writer);
	if ($round == 1) { $writer = $run->writer_start($nodes[0]); }
	else { $pin = $run->pin($nodes[0]); }
	$run->fault_begin("node1 cut from ZooKeeper by the proxy (bytes swallowed both ways, "
		  . "sockets open) until node2 is granted; $how");
	$px->cut('node1');
	my $t_cut = time();
	my $noticed = ZkChaos::wait_node_disconnected($nodes[0], $ZkChaos::SESSION_TIMEOUT + 5);
	note sprintf("%s: round %d: node1's worker %s the silence %.2fs after the cut",
		$scn, $round, $noticed ? 'noticed' : 'did not notice', time() - $t_cut);
	my $seen = ZkChaos::wait_granted($run, $nodes[1], $ZkChaos::SESSION_TIMEOUT + 15);
	ok(defined $seen, "$scn: round $round: node2 is granted the lock while node1 is cut off");
	note sprintf("%s: round %d: node2 seen holding the lock %.2fs after the cut",
		$scn, $round, ($seen // time()) - $t_cut);
	$run->pin_commit_send($pin) if $pin;
	sleep(1);
	note "zk_proxy status:\n" . $px->status;
	$px->heal('node1');
	$run->round_verdict($round, $how, writer => $writer, pin => $pin);
	ok(ZkChaos::wait_node_ready($nodes[0], 30), "$scn: round $round: node1's worker connected again");
	$run->fault_end;
	$at = $run->elapsed + 3;
}
my $res = $run->check;
$run->no_commit_after_grant($res, $nodes[0], $nodes[1], 2);

zk_done_check();
done_testing();
