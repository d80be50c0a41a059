
# Chaos: one instance is cut from ZooKeeper by a proxy the test owns
# (test/zk_proxy.py): node1's zklock.hosts names the proxy, which swallows
# every byte both ways while keeping both sockets open -- a partition, not
# a reset -- for longer than the session timeout, while clients on two
# PostgreSQL instances take one EXCLUSIVE lock over and over (see ZkChaos.pm
# for the load and the checker).  One ZooKeeper server (tickTime 200 ms).
#
#  - zk_partition: node1 holds the lock in an open transaction (a pinned
#    holder that has written its row).  The proxy cuts node1 off; ZooKeeper
#    expires node1's session and node2 is granted the lock.
#    Round 1: the holder sends COMMIT after node2 was granted (the cut still
#    on, healed a second later): it must fail with 55P03.
#    Round 2: the holder sends COMMIT as soon as node1's worker says it is
#    disconnected (before the session can have expired): it may commit or
#    be fenced, but its commit must not land after node2's grant.
#    No commit of node1 may land after node2's grant (the checker).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/..";
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
my $run = $chaos->start($scn, duration => 15);
my $at = 3;
foreach my $round (1, 2)
{
	my $how = $round == 1 ? 'COMMIT after node2 was granted'
	  : 'COMMIT once node1 noticed the silence';
	$run->sleep_until($at);
	my $pin = $run->pin($nodes[0]);
	$run->fault_begin("node1 cut from ZooKeeper by the proxy (bytes swallowed both ways, "
		  . "sockets open) until node2 is granted; $how");
	$px->cut('node1');
	my $t_cut = time();

	if ($round == 2)
	{
		my $noticed = ZkChaos::wait_node_disconnected($nodes[0], $ZkChaos::SESSION_TIMEOUT + 5);
		note sprintf("%s: round 2: node1's worker %s the silence %.2fs after the cut",
			$scn, $noticed ? 'noticed' : 'did not notice', time() - $t_cut);
		$run->pin_commit_send($pin);
	}
	my $seen = ZkChaos::wait_granted($run, $nodes[1], $ZkChaos::SESSION_TIMEOUT + 15);
	ok(defined $seen, "$scn: round $round: node2 is granted the lock while node1 is cut off");
	note sprintf("%s: round %d: node2 seen holding the lock %.2fs after the cut",
		$scn, $round, ($seen // time()) - $t_cut);
	if ($round == 1)
	{
		$run->pin_commit_send($pin);
		sleep(1);
	}
	note "zk_proxy status:\n" . $px->status;
	$px->heal('node1');
	my $outcome = $run->pin_commit_wait($pin);
	if ($round == 1)
	{
		is($outcome, 'fenced',
			"$scn: round 1 ($how): node1's holder cannot commit after node2 was granted (55P03)");
	}
	else
	{
		like($outcome, qr/^(commit|fenced)$/,
			"$scn: round 2 ($how): node1's holder commits or is fenced, nothing else");
	}
	ok(ZkChaos::wait_node_ready($nodes[0], 30), "$scn: round $round: node1's worker connected again");
	$run->fault_end;
	$at = $run->elapsed + 3;
}
my $res = $run->check;
foreach my $i (0, 1)
{
	my $f = $run->{faults}[$i];
	my $next = $run->{faults}[ $i + 1 ];
	my $fig = $run->fault_figures($res, fault => $f, cut => $nodes[0], other => $nodes[1],
		until => $next ? $next->{begin} : undef);
	ok( !defined $fig->{last_commit} || !defined $fig->{other_grant}
		  || $fig->{last_commit} < $fig->{other_grant},
		"$scn: round " . ($i + 1) . ": no commit of node1 landed after node2 was granted");
}
zk_done_check();
done_testing();
