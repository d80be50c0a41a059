
# Chaos: on a three-server ensemble with ZooKeeper's default tickTime of
# 2000 ms (so that tick-sized effects are not hidden), the follower that
# node1 talks to is cut from the leader while it goes on answering node1.
# Every server reaches the others' quorum ports through a proxy the test
# owns (test/zk_proxy.py; zk_server.sh --quorum-via), and a learner talks
# to its leader over the leader's quorum port: cutting the link "follower
# -> leader" swallows the follower's quorum traffic both ways, sockets open.
# Election traffic stays direct.  node1's zklock.hosts names that follower
# only; node2's names the two other servers.  See ZkChaos.pm for the load
# and the checker.
#
#  - follower_cut: node1 holds the lock in an open transaction (a pinned
#    holder that has written its row; node1 runs no other clients, so that
#    no write of its session is stuck in the follower, which would hold
#    back its pings too).  The follower is cut from the leader.  The
#    follower answers node1's pings for syncLimit x tickTime (20 s), but it
#    no longer reports node1's session to the leader, which expires it
#    after the session timeout and grants node2.  node1's holder then sends
#    COMMIT: it must fail with 55P03 -- the worker is connected, to a
#    server that has lost the leader, so only a lease renewed through the
#    leader (a sync) can refuse it -- and no commit of node1 may land after
#    node2's grant.  Then the link heals (the broken connection is closed,
#    the follower rejoins) and a new holder on node1 commits.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/..";
use ZkLockTest;
use ZkChaos;

use PostgreSQL::Test::Cluster;
use Test::More;
use Time::HiRes qw(sleep time);

my $TICK = 2000;

# client, quorum and election port of each server; a proxy link "i>j" for
# server i to reach server j's quorum port
my @ports = map { PostgreSQL::Test::Cluster::get_free_port() } 1 .. 9;
my %cport = map { ($_ => $ports[ 3 * ($_ - 1) ]) } 1 .. 3;
my %qport = map { ($_ => $ports[ 3 * ($_ - 1) + 1 ]) } 1 .. 3;
my (@links, @via);
foreach my $i (1 .. 3)
{
	foreach my $j (grep { $_ != $i } 1 .. 3)
	{
		my $p = PostgreSQL::Test::Cluster::get_free_port();
		push @links, [ "$i>$j", $p, $qport{$j} ];
		push @via, "$i:$j:$p";
	}
}
my $px = ZkChaos::Proxy->start(links => \@links);
zk_start(servers => 3, ports => \@ports, tick_time => $TICK,
	args => [ '--quorum-via', join(',', @via) ]);

my $leader = ZkChaos::zk_leader(60);
my ($follower) = grep { $_ != $leader } 1 .. 3;
my ($other) = grep { $_ != $leader && $_ != $follower } 1 .. 3;
note "leader $leader; node1 on follower $follower; node2 on $leader and $other";

my @nodes = (
	zk_node('node1', hosts => "127.0.0.1:$cport{$follower}",
		extra_conf => ZkChaos::node_conf()),
	zk_node('node2', hosts => "127.0.0.1:$cport{$leader},127.0.0.1:$cport{$other}",
		extra_conf => ZkChaos::node_conf()));
my $chaos = ZkChaos->new(nodes => \@nodes, clients_per_node => { node1 => 0, node2 => 3 });

my $scn = 'follower_cut';
my $run = $chaos->start($scn, duration => 15);
$run->sleep_until(4);
my $pin = $run->pin($nodes[0]);
is(ZkChaos::zk_leader(30), $leader, "$scn: server $leader still leads");
my $link = "$follower>$leader";
$run->fault_begin("follower $follower (node1's server) cut from leader $leader "
	  . "(its quorum link $link swallows bytes both ways, sockets open) until node2 is granted");
$px->cut($link);
my $t_cut = time();

my $seen = ZkChaos::wait_granted($run, $nodes[1], $ZkChaos::SESSION_TIMEOUT + 2 * $TICK / 1000 + 15);
ok(defined $seen, "$scn: node2 is granted the lock while node1's follower is cut from the leader");
my $state = ZkChaos::try_psql($nodes[0], 'SELECT state FROM zk_lock_status', 5) // '?';
note sprintf("%s: node2 seen holding the lock %.2fs after the cut; node1's worker says '%s'",
	$scn, ($seen // time()) - $t_cut, $state);
$run->pin_commit_send($pin);
sleep(1);
note "zk_proxy status:\n" . $px->status;
$px->heal($link);
my $outcome = $run->pin_commit_wait($pin);
is($outcome, 'fenced',
	"$scn: node1's holder cannot commit after the leader expired its session and granted node2 (55P03)");
ok(ZkChaos::zk_wait_serving(60), "$scn: the follower serves again");
ok(ZkChaos::wait_node_ready($nodes[0], 60), "$scn: node1's worker connected again");
$run->fault_end;

# node1 works again: a new holder there commits
$run->sleep_until($run->elapsed + 2);
my $pin2 = $run->pin($nodes[0]);
$run->pin_commit_send($pin2);
is($run->pin_commit_wait($pin2), 'commit', "$scn: after the heal, a holder on node1 commits");

my $res = $run->check;
my $fig = $run->fault_figures($res, cut => $nodes[0], other => $nodes[1]);
ok( !defined $fig->{last_commit} || !defined $fig->{other_grant}
	  || $fig->{last_commit} < $fig->{other_grant},
	"$scn: no commit of node1 landed after node2 was granted");
# (the proxy carries every quorum link: it stays until the end)
zk_done_check();
done_testing();
