
# Chaos: PostgreSQL-side disruptions under load, while clients on two
# instances take one EXCLUSIVE lock over and over (see ZkChaos.pm for the
# load and the checker).  A three-server ZooKeeper ensemble on loopback.
#
#  - pg_restart_fast:   pg_ctl restart -m fast of node1, then of node2.  A
#                       clean shutdown closes the ZooKeeper session, so a
#                       lock held on the instance passes on at once.
#  - pg_cancel_waiters: pg_cancel_backend and pg_terminate_backend of
#                       waiting client backends, on both instances, over and
#                       over: each withdrawn waiter's node must go, or the
#                       queue would stall behind it.
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

# ---------------------------------------------------------------------------
{
	my $scn = 'pg_restart_fast';
	my $run = $chaos->start($scn, duration => 15);
	my @restarts;
	foreach my $i (0, 1)
	{
		my $node = $nodes[$i];
		$run->sleep_until($i == 0 ? 4 : 13);
		# round 1: a holder on the instance that goes down
		my $pin = $i == 0 ? $run->pin($node) : undef;
		$run->fault_begin('pg_ctl restart -m fast of ' . $node->name);
		my $t0 = time();
		ok(ZkChaos::pg_restart_fast($node), "$scn: " . $node->name . ' restarted');
		$run->pin_killed($pin, 'fast shutdown') if $pin;
		ok(ZkChaos::wait_node_ready($node, 60), "$scn: " . $node->name . ' is back and connected');
		my $t_ready = time();
		$run->fault_end;
		push @restarts, { node => $node, t0 => $t0, t_ready => $t_ready,
			pinned => defined $pin };
	}
	my $res = $run->check;
	foreach my $k (@restarts)
	{
		my ($first) = grep { $_->{start} / 1e6 > $k->{t0} } @{ $res->{rows} };
		my $handover = $first ? $first->{start} / 1e6 - $k->{t0} : 999;
		my $back = $k->{t_ready} - $k->{t0};
		note sprintf("%s: first section after the restart of %s began: %.2fs later, on %s"
			  . " (the instance was back after %.2fs)",
			$scn, $k->{node}->name, $handover, $first ? $first->{instance} : '-', $back);
		# a clean shutdown closes the session: no waiting for its timeout
		cmp_ok($handover, '<', $back + 1.5,
			"$scn: the lock held on " . $k->{node}->name . ' passed on without waiting for the session timeout')
		  if $k->{pinned};
	}
}

# ---------------------------------------------------------------------------
{
	my $scn = 'pg_cancel_waiters';
	my $run = $chaos->start($scn, duration => 15, settle => 6);
	$run->sleep_until(3);
	my %sent = (cancel => 0, terminate => 0);
	my $k = 0;
	my $max_nodes = 0;
	my @samples;
	my @signaller = map { zk_session($_, 'signaller') } @nodes;
	while ($run->elapsed < 15)
	{
		my $node = $nodes[ $k % 2 ];
		my $how = ($k % 3 == 2) ? 'terminate' : 'cancel';
		my $pid = ZkChaos::signal_waiter($run, $signaller[ $k % 2 ], $how);
		if (defined $pid)
		{
			$run->fault_begin("pg_${how}_backend of waiter $pid on " . $node->name);
			$run->fault_end;
			$sent{$how}++;
		}
		$k++;
		if ($k % 10 == 0)
		{
			# every client has at most one node per level; a stale one would show
			my $n = zk_count_locks(zk_path($run->resource));
			push @samples, $n;
			$max_nodes = $n if $n > $max_nodes;
		}
		sleep(0.05);
	}
	$_->quit for @signaller;
	note "$scn: $sent{cancel} cancels and $sent{terminate} terminations; lock nodes seen under the resource: @samples";
	cmp_ok($sent{cancel}, '>=', 10, "$scn: waiters were cancelled");
	cmp_ok($sent{terminate}, '>=', 5, "$scn: waiters were terminated");
	cmp_ok($max_nodes, '<=', 2 * 3 + 1, "$scn: no more lock nodes than clients (one in flight)");
	my $res = $run->check(min_after => 20);
	# a withdrawn waiter's node left behind would stall the queue
	cmp_ok($res->{gap}, '<', 3, "$scn: the queue never stalled");
}

zk_done_check();
done_testing();
