
# Chaos: one instance's zklock worker stalls (SIGSTOP: what CPU starvation,
# a swapped-out process or a debugger do) for longer than the session
# timeout while clients on two PostgreSQL instances take one EXCLUSIVE lock
# over and over (see ZkChaos.pm for the load and the checker).  One
# ZooKeeper server (tickTime 200 ms: the session expires within a tick of
# the timeout).  node1's worker is stopped until ZooKeeper has expired
# node1's session and node2 has been granted the lock, then resumed.  The
# shared state that only the stalled worker can change says "connected"
# throughout: only a lease the backend checks by its own clock can refuse
# node1's commits (issue 9, finding 1).  Three rounds in one run:
#
#  1. a writer on node1 (a session lock, a write transaction committed every
#     20 ms) across the stall: its commits must stop (55P03) before node2's
#     grant;
#  2. a holder in an open transaction sends COMMIT during the stall, after
#     node2 was granted; SIGCONT a second later: 55P03;
#  3. the same, but SIGCONT and COMMIT at once (before the worker has had a
#     chance to say anything): 55P03.
#
# The checker counts any commit of node1 that lands after node2's grant.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkChaos;

use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my @nodes = map { zk_node($_, extra_conf => ZkChaos::node_conf()) } qw(node1 node2);
my $chaos = ZkChaos->new(nodes => \@nodes);

my $scn = 'worker_stall';
my @how = (
	'a writer commits every 20 ms across the stall',
	'COMMIT during the stall, after node2 was granted',
	'COMMIT right after SIGCONT');
my $run = $chaos->start($scn, duration => 15);
my $at = 3;
foreach my $round (1 .. 3)
{
	my $how = $how[ $round - 1 ];
	$run->sleep_until($at);
	my ($pin, $writer);
	if ($round == 1) { $writer = $run->writer_start($nodes[0]); }
	else { $pin = $run->pin($nodes[0]); }
	my $wpid = ZkChaos::worker_pid($nodes[0]);
	BAIL_OUT("no worker pid on node1") unless defined $wpid && $wpid =~ /^\d+$/;
	$run->fault_begin("SIGSTOP of node1's zklock worker (pid $wpid) until node2 is granted; $how");
	kill('STOP', $wpid);
	my $t_stop = time();

	# node2 is granted once ZooKeeper has expired node1's session
	my $seen = ZkChaos::wait_granted($run, $nodes[1], $ZkChaos::SESSION_TIMEOUT + 15);
	ok(defined $seen, "$scn: round $round: node2 is granted the lock while node1's worker is stopped");
	note sprintf("%s: round %d: node2 seen holding the lock %.2fs after the SIGSTOP",
		$scn, $round, ($seen // time()) - $t_stop);

	if ($round == 3)
	{
		kill('CONT', $wpid);
		$run->pin_commit_send($pin);
	}
	else
	{
		$run->pin_commit_send($pin) if $pin;
		sleep(1);
		kill('CONT', $wpid);
	}
	$run->round_verdict($round, $how, writer => $writer, pin => $pin);
	ok(ZkChaos::wait_node_ready($nodes[0], 30), "$scn: round $round: node1's worker connected again");
	$run->fault_end;
	$at = $run->elapsed + 3;
}
my $res = $run->check;
$run->no_commit_after_grant($res, $nodes[0], $nodes[1], 3);

zk_done_check();
done_testing();
