
# Chaos: one instance's zklock worker stalls (SIGSTOP: what CPU starvation,
# a swapped-out process or a debugger do) for longer than the session
# timeout while clients on two PostgreSQL instances take one EXCLUSIVE lock
# over and over (see ZkChaos.pm for the load and the checker).  One
# ZooKeeper server (tickTime 200 ms: the session expires within a tick of
# the timeout).
#
#  - worker_stall: node1 holds the lock in an open transaction (a pinned
#    holder that has written its row); its worker is stopped; ZooKeeper
#    expires node1's session and node2 is granted the lock.  Round 1: the
#    holder sends COMMIT while the worker is still stopped, SIGCONT a
#    second later.  Round 2: SIGCONT, and COMMIT at once (before the worker
#    has had a chance to say anything).  Each time the COMMIT must fail
#    with 55P03, and no commit of node1 may land after node2's grant: the
#    shared state that only the stalled worker can change says "connected",
#    so only a lease the backend checks by its own clock can refuse it
#    (issue 9, finding 1).
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
my $run = $chaos->start($scn, duration => 15);
my $at = 3;
my @pins;
foreach my $round (1, 2)
{
	my $how = $round == 1 ? 'COMMIT during the stall' : 'COMMIT right after SIGCONT';
	$run->sleep_until($at);
	my $pin = $run->pin($nodes[0]);
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

	if ($round == 1)
	{
		$run->pin_commit_send($pin);
		sleep(1);
		kill('CONT', $wpid);
	}
	else
	{
		kill('CONT', $wpid);
		$run->pin_commit_send($pin);
	}
	my $outcome = $run->pin_commit_wait($pin);
	is($outcome, 'fenced',
		"$scn: round $round ($how): node1's holder cannot commit after node2 was granted (55P03)");
	ok(ZkChaos::wait_node_ready($nodes[0], 30), "$scn: round $round: node1's worker connected again");
	$run->fault_end;
	push @pins, $pin;
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
