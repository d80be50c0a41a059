
# Chaos: ZooKeeper stops answering while clients on two PostgreSQL instances
# take one EXCLUSIVE lock over and over (see ZkChaos.pm for the load and the
# checker).  A three-server ensemble on loopback.
#
#  - zk_freeze_all:    SIGSTOP of all three servers for longer than the
#                      session timeout, then SIGCONT.  While they are frozen,
#                      an acquire fails with 08006 within connect_timeout.
#  - zk_freeze_quorum: SIGSTOP of the leader and one follower (the quorum)
#                      for longer than the session timeout, then SIGCONT.
#  - zk_freeze_short:  SIGSTOP of all three servers for 2.5 s, 5 s and 6 s:
#                      around the session timeout, where the workers'
#                      verdict (session alive or lost) races the servers'
#                      expiry.  A holder sends COMMIT during each freeze;
#                      whether it commits or not, the checker holds its
#                      section (until its commit timestamp) against all.
#  - zk_quorum_loss:   SIGKILL of the leader and one follower; an acquire and
#                      a try-acquire on each instance fail with 08006 within
#                      connect_timeout (no hang); then both are restarted.
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

# How long the servers stay frozen: past the session timeout, and past the
# point where the workers declare their sessions lost (they notice the
# silence after 2/3 of the session timeout, then wait the session timeout).
my $FREEZE = 9;

# The transaction that held the lock when ZooKeeper went away sends its
# COMMIT while the worker is cut off.  The commit fence is a lease: while
# the leader's last answers still prove the session alive for
# zklock.lease_margin more, no leader can have expired it and the COMMIT may
# pass; after that it must fail with 55P03.  Either way it ends within the
# bound, and the checker (no commit after another instance's grant, no
# overlap) judges what landed.
sub fenced_ok
{
	my ($run, $pin) = @_;
	return unless $pin;
	# the session timeout after the outage began, no lease can be left
	my $late = $pin->{commit_sent} - $run->{faults}[-1]{begin} >= $ZkChaos::SESSION_TIMEOUT;
	if ($late)
	{
		is($pin->{outcome}, 'fenced',
			$run->scenario . ': the holder whose COMMIT came a session timeout into the outage cannot commit (55P03)');
	}
	else
	{
		like($pin->{outcome}, qr/^(fenced|commit)$/,
			$run->scenario . ': the holder across the outage commits within its lease or fails with 55P03 (' . $pin->{outcome} . ')');
	}
	cmp_ok($pin->{commit_secs}, '<=',
		$ZkChaos::SESSION_TIMEOUT + $ZkChaos::CONNECT_TIMEOUT + $ZkChaos::MARGIN,
		$run->scenario . ': ... and its COMMIT waited no longer than session_timeout + connect_timeout');
}

# ---------------------------------------------------------------------------
{
	my $run = $chaos->start('zk_freeze_all', duration => 15);
	$run->sleep_until(4);
	my $pin = $run->pin($nodes[0]);
	$run->fault_begin("SIGSTOP of servers 1, 2, 3 for ${FREEZE}s");
	my $t_stop = time();
	ZkChaos::zk_ctl('stopsig', $_, 'STOP') for 1 .. 3;

	foreach my $node (@nodes)
	{
		ok(ZkChaos::wait_node_disconnected($node, $FREEZE - 1),
			'zk_freeze_all: ' . $node->name . ' noticed that ZooKeeper is silent');
	}
	$run->pin_commit_send($pin);
	# with every server frozen, an acquire fails with a clear error in time
	my @probes = map { ZkChaos::probe_start($_, 'chaos/probe') } @nodes;
	ZkChaos::probe_finish($_, 'zk_freeze_all') for @probes;
	$run->pin_commit_wait($pin);
	fenced_ok($run, $pin);

	my $left = $t_stop + $FREEZE - time();
	sleep($left) if $left > 0;
	ZkChaos::zk_ctl('stopsig', $_, 'CONT') for 1 .. 3;
	ok(ZkChaos::zk_wait_serving(30), 'zk_freeze_all: the ensemble serves again');
	$run->fault_end;
	$run->check;
}

# ---------------------------------------------------------------------------
{
	my $run = $chaos->start('zk_freeze_quorum', duration => 15);
	$run->sleep_until(4);
	my $pin = $run->pin($nodes[1]);
	my $leader = ZkChaos::zk_leader();
	my ($follower) = grep { $_ != $leader } 1 .. 3;
	$run->fault_begin("SIGSTOP of leader $leader and follower $follower for ${FREEZE}s");
	my $t_stop = time();
	ZkChaos::zk_ctl('stopsig', $_, 'STOP') for ($leader, $follower);
	ok(ZkChaos::wait_node_disconnected($nodes[1], $FREEZE - 1),
		'zk_freeze_quorum: node2 noticed that the quorum is silent');
	$run->pin_commit_send($pin);
	$run->pin_commit_wait($pin);
	fenced_ok($run, $pin);
	my $left = $t_stop + $FREEZE - time();
	sleep($left) if $left > 0;
	ZkChaos::zk_ctl('stopsig', $_, 'CONT') for ($leader, $follower);
	ok(ZkChaos::zk_wait_serving(30), 'zk_freeze_quorum: the ensemble serves again');
	$run->fault_end;
	$run->check;
}

# ---------------------------------------------------------------------------
{
	my $scn = 'zk_freeze_short';
	my $run = $chaos->start($scn, duration => 15);
	my $at = 3;
	my $i = 0;
	foreach my $len (2.5, 5, 6)
	{
		$run->sleep_until($at);
		my $node = $nodes[ $i++ % 2 ];
		my $pin = $run->pin($node);
		$run->fault_begin("SIGSTOP of servers 1, 2, 3 for ${len}s");
		my $t_stop = time();
		ZkChaos::zk_ctl('stopsig', $_, 'STOP') for 1 .. 3;
		my $noticed = ZkChaos::wait_node_disconnected($node, $len - 0.5);
		$run->pin_commit_send($pin);
		my $left = $t_stop + $len - time();
		sleep($left) if $left > 0;
		ZkChaos::zk_ctl('stopsig', $_, 'CONT') for 1 .. 3;
		my $outcome = $run->pin_commit_wait($pin);
		like($outcome, qr/^(commit|fenced)$/,
			"$scn: ${len}s freeze: the holder commits or is fenced, nothing else");
		note sprintf("%s: %ss freeze: %s %s the disconnection; its holder's COMMIT: %s",
			$scn, $len, $node->name, $noticed ? 'noticed' : 'did not notice', $outcome);
		ok(ZkChaos::zk_wait_serving(30), "$scn: ${len}s freeze: the ensemble serves again");
		$run->fault_end;
		$at = $run->elapsed + 3;
	}
	$run->check;
}

# ---------------------------------------------------------------------------
{
	my $run = $chaos->start('zk_quorum_loss', duration => 15);
	$run->sleep_until(4);
	my $pin = $run->pin($nodes[0]);
	my $leader = ZkChaos::zk_leader();
	my ($follower) = grep { $_ != $leader } 1 .. 3;
	$run->fault_begin("SIGKILL of leader $leader and follower $follower");
	ZkChaos::zk_ctl_parallel(map { [ 'kill', $_ ] } $leader, $follower);

	foreach my $node (@nodes)
	{
		ok(ZkChaos::wait_node_disconnected($node, 15),
			'zk_quorum_loss: ' . $node->name . ' noticed the quorum is gone');
	}
	$run->pin_commit_send($pin);
	my @probes = map { ZkChaos::probe_start($_, 'chaos/probe') } @nodes;
	ZkChaos::probe_finish($_, 'zk_quorum_loss') for @probes;
	@probes = map { ZkChaos::probe_start($_, 'chaos/probe', try => 1) } @nodes;
	ZkChaos::probe_finish($_, 'zk_quorum_loss') for @probes;
	$run->pin_commit_wait($pin);
	fenced_ok($run, $pin);

	ZkChaos::zk_ctl_parallel(map { [ 'restart-one', $_ ] } $leader, $follower);
	ok(ZkChaos::zk_wait_serving(30), 'zk_quorum_loss: the ensemble serves again');
	$run->fault_end;
	$run->check;
}

zk_done_check();
done_testing();
