
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
#  - follower_cut: node1 runs no clients of its own, so that no write of its
#    session is stuck in the cut follower (which would hold back its pings
#    too, as ZooKeeper orders a session's requests): only what the test
#    pins there.  The follower is cut from the leader.  It answers node1's
#    pings for syncLimit x tickTime (20 s), but no longer reports node1's
#    session to the leader, which expires it after the session timeout
#    (rounded to a tick) and grants node2.  node1's worker stays connected,
#    to a server that has lost the leader: only a lease renewed through the
#    leader (a sync) can refuse node1's commits.  Then the link heals (the
#    broken connection is closed, the follower rejoins).
#    Round 1: a writer on node1 (a session lock, a write transaction
#    committed every 20 ms) across the cut: its commits must stop (55P03)
#    before node2's grant.  Round 2: a holder in an open transaction (it has
#    written its row) sends COMMIT after node2 was granted: 55P03.
#    Finally a new holder on node1 commits (node1 works again).
#    The checker counts any commit of node1 that lands after node2's grant.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
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
# A learner connects to its leader's quorum port as soon as it has voted,
# maybe before the new leader listens there: the proxy holds such a
# connection until the leader listens, rather than hang up on it, which
# sends the learner back to the election and can keep a quorum from forming
# (seen: no quorum in 30 s).  (ZooKeeper 3.8's learner retries a refused
# connection 5 times 100 ms apart; 8 s is more patient, for a loaded
# machine, and below initLimit x tickTime, 40 s, the learner's own read
# timeout.  The cut below is unaffected: a connection made during a cut is
# held and never forwarded, with or without it.)
my $px = ZkChaos::Proxy->start(links => \@links, await_target => 8);
zk_start(servers => 3, ports => \@ports, tick_time => $TICK,
	args => [ '--quorum-via', join(',', @via) ]);

my $leader = ZkChaos::zk_leader(60);
my ($follower) = grep { $_ != $leader } 1 .. 3;
my ($other) = grep { $_ != $leader && $_ != $follower } 1 .. 3;
note "leader $leader; node1 on follower $follower; node2 on $leader and $other";

# With a 2 s tick, zklock.lease_margin must cover half a tick (1 s: how late
# the follower tells the leader about node1's session) plus a pause; and the
# session timeout three times the margin (doc/settings.md, zklock.lease_margin).
$ZkChaos::SESSION_TIMEOUT = 8;
my %lease = (session_timeout => "${ZkChaos::SESSION_TIMEOUT}s", lease_margin => '1500ms');
my @nodes = (
	zk_node('node1', hosts => "127.0.0.1:$cport{$follower}",
		extra_conf => ZkChaos::node_conf(), %lease),
	zk_node('node2', hosts => "127.0.0.1:$cport{$leader},127.0.0.1:$cport{$other}",
		extra_conf => ZkChaos::node_conf(), %lease));
my $chaos = ZkChaos->new(nodes => \@nodes, clients_per_node => { node1 => 0, node2 => 3 });

my $scn = 'follower_cut';
my @how = ('a writer commits every 20 ms across the cut',
	'COMMIT after node2 was granted');
my $run = $chaos->start($scn, duration => 15);
my $link = "$follower>$leader";
my $at = 4;
foreach my $round (1, 2)
{
	my $how = $how[ $round - 1 ];
	$run->sleep_until($at);
	my ($pin, $writer);
	if ($round == 1) { $writer = $run->writer_start($nodes[0]); }
	else { $pin = $run->pin($nodes[0]); }
	is(ZkChaos::zk_leader(30), $leader, "$scn: round $round: server $leader still leads");
	$run->fault_begin("follower $follower (node1's server) cut from leader $leader "
		  . "(its quorum link $link swallows bytes both ways, sockets open) until node2 is granted; $how");
	$px->cut($link);
	my $t_cut = time();

	my $seen = ZkChaos::wait_granted($run, $nodes[1],
		$ZkChaos::SESSION_TIMEOUT + 2 * $TICK / 1000 + 15);
	ok(defined $seen,
		"$scn: round $round: node2 is granted the lock while node1's follower is cut from the leader");
	my $state = ZkChaos::try_psql($nodes[0], 'SELECT state FROM zk_lock_status', 5) // '?';
	note sprintf("%s: round %d: node2 seen holding the lock %.2fs after the cut; node1's worker says '%s'",
		$scn, $round, ($seen // time()) - $t_cut, $state);
	$run->pin_commit_send($pin) if $pin;
	sleep(1);
	note "zk_proxy status:\n" . $px->status;
	$px->heal($link);
	$run->round_verdict($round, $how, writer => $writer, pin => $pin);
	ok(ZkChaos::zk_wait_serving(60), "$scn: round $round: the follower serves again");
	ok(ZkChaos::wait_node_ready($nodes[0], 60), "$scn: round $round: node1's worker connected again");
	$run->fault_end;
	$at = $run->elapsed + 3;
}

# node1 works again: a new holder there commits
$run->sleep_until($at - 1);
my $pin = $run->pin($nodes[0]);
$run->pin_commit_send($pin);
is($run->pin_commit_wait($pin), 'commit', "$scn: after the heal, a holder on node1 commits");

my $res = $run->check;
$run->no_commit_after_grant($res, $nodes[0], $nodes[1], 2);

# (the proxy carries every quorum link: it stays until the end)
zk_done_check();
done_testing();
