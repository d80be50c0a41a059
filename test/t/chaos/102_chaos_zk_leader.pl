
# Chaos: the ZooKeeper leader is killed (SIGKILL) under load, twice, and
# restarted each time, while clients on two PostgreSQL instances take one
# EXCLUSIVE lock over and over (see ZkChaos.pm for the load and the
# checker).  A three-server ensemble on loopback.  A transaction holds the
# lock across the first failover and commits after it: whether it may
# (its session survived the election) or must not (the session was lost),
# the checker holds its row against every other section.  Then a follower
# is killed and restarted under load (any single server may go).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkChaos;

use Test::More;
use Time::HiRes qw(sleep time);

zk_start(servers => 3);
my @nodes = map { zk_node($_, extra_conf => ZkChaos::node_conf()) } qw(node1 node2);
my $chaos = ZkChaos->new(nodes => \@nodes);

{
	my $run = $chaos->start('zk_leader_kill', duration => 15);
	my $pin;
	foreach my $round (1, 2)
	{
		$run->sleep_until($round == 1 ? 4 : 13);
		$pin = $run->pin($nodes[0]) if $round == 1;
		my $leader = ZkChaos::zk_leader();
		$run->fault_begin("SIGKILL of leader $leader");
		ZkChaos::zk_ctl('kill', $leader);
		my $t_kill = time();
		my $new = ZkChaos::zk_leader(30);
		note sprintf("zk_leader_kill: server %d leads %.2fs after the kill of %d",
			$new, time() - $t_kill, $leader);
		isnt($new, $leader, "zk_leader_kill: round $round: a new leader is elected");
		if ($pin)
		{
			$run->pin_commit_send($pin);
			my $outcome = $run->pin_commit_wait($pin);
			like($outcome, qr/^(commit|fenced)$/,
				'zk_leader_kill: the holder across the failover commits or is fenced, nothing else');
			undef $pin;
		}
		ZkChaos::zk_ctl('restart-one', $leader);
		ok(ZkChaos::zk_wait_serving(30), "zk_leader_kill: round $round: all servers serve again");
		$run->fault_end;
	}
	$run->check;
}

# Any single server: a follower is killed and restarted under load; the
# workers connected to it move to another server with their sessions.
{
	my $run = $chaos->start('zk_follower_kill', duration => 12);
	$run->sleep_until(4);
	my $leader = ZkChaos::zk_leader();
	my ($follower) = grep { $_ != $leader } (1, 2, 3);
	$run->fault_begin("SIGKILL of follower $follower");
	ZkChaos::zk_ctl('kill', $follower);
	$run->sleep_until(7);
	is(ZkChaos::zk_leader(30), $leader, 'zk_follower_kill: the leader stays');
	ZkChaos::zk_ctl('restart-one', $follower);
	ok(ZkChaos::zk_wait_serving(30), 'zk_follower_kill: all servers serve again');
	$run->fault_end;
	$run->check;
}

zk_done_check();
done_testing();
