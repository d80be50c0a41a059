
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
use lib "$FindBin::RealBin/..";
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
	if ($writer)
	{
		my $r = $run->writer_stop($writer, wait => $ZkChaos::SESSION_TIMEOUT + $ZkChaos::CONNECT_TIMEOUT + 10);
		ok($r->{by_itself}, "$scn: round $round ($how): the writer stops by itself (its lock lost)");
		is($r->{last} ? $r->{last}{outcome} : '', 'fenced',
			"$scn: round $round ($how): ... its last COMMIT fails with 55P03");
	}
	else
	{
		my $outcome = $run->pin_commit_wait($pin);
		is($outcome, 'fenced',
			"$scn: round $round ($how): node1's holder cannot commit after node2 was granted (55P03)");
	}
	ok(ZkChaos::wait_node_ready($nodes[0], 30), "$scn: round $round: node1's worker connected again");
	$run->fault_end;
	$at = $run->elapsed + 3;
}
my $res = $run->check;
foreach my $i (0 .. 2)
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
