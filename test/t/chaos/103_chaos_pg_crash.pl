
# Chaos: PostgreSQL processes die hard under load, while clients on two
# instances take one EXCLUSIVE lock over and over (see ZkChaos.pm for the
# load and the checker).  A three-server ZooKeeper ensemble on loopback.
#
#  - pg_backend_kill9: kill -9 of a backend that holds the lock (found in
#    zk_lock_local), on node1 then on node2.  The postmaster reinitializes;
#    the new worker closes the old ZooKeeper session, so the lock passes on
#    without waiting for the session timeout.
#  - pg_worker_kill9: kill -9 of the zklock worker (zk_lock_status.worker_pid),
#    on node1 then on node2; same consequences.  Then on node1 the worker and
#    at once its successor: nothing is left behind either.
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

foreach my $what ('backend', 'worker')
{
	my $scn = "pg_${what}_kill9";
	my $run = $chaos->start($scn, duration => 15);
	my @kills;
	foreach my $i (0, 1)
	{
		my $node = $nodes[$i];
		$run->sleep_until($i == 0 ? 4 : 13);
		my $old_session = ZkChaos::session_id($node);
		# round 1: a holder we control, so that it surely holds the lock
		# when it dies; round 2: whichever client backend holds it now
		my $pin = $i == 0 ? $run->pin($node) : undef;
		my $pid;
		if ($what eq 'backend')
		{
			if ($pin)
			{
				$pid = $pin->{s}->pid;
			}
			else
			{
				(undef, $pid) = ZkChaos::find_holder($run, $node);
			}
			ok(defined $pid, "$scn: found a backend holding the lock on " . $node->name)
			  or next;
		}
		else
		{
			$pid = ZkChaos::worker_pid($node);
			like($pid // '', qr/^\d+$/, "$scn: worker pid of " . $node->name) or next;
		}
		my $log_offset = -s $node->logfile;
		$run->fault_begin("kill -9 of the $what (pid $pid) of " . $node->name);
		my $t_kill = time();
		ok(kill('KILL', $pid), "$scn: killed pid $pid");
		$run->pin_killed($pin, "kill -9 of the $what") if $pin;
		ok(ZkChaos::wait_node_ready($node, 60), "$scn: " . $node->name . ' is back and connected');
		my $t_ready = time();
		$run->fault_end;
		# the new worker closed the old session: its nodes went at once
		my $closed = ZkChaos::wait_for_log($node,
			qr/zklock: previous ZooKeeper session (?:0x[0-9a-f]+ )?(closed|had already expired)/,
			$log_offset, 10);
		is($closed, 'closed',
			"$scn: the new worker of " . $node->name . ' closed the old ZooKeeper session');
		ok(ZkChaos::wait_session_gone($old_session, 5),
			"$scn: none of the old session's lock nodes is left")
		  or diag("old session $old_session");
		push @kills, { node => $node, t_kill => $t_kill, t_ready => $t_ready,
			pinned => defined $pin };
		note sprintf("%s: %s back and connected %.2fs after the kill", $scn,
			$node->name, $t_ready - $t_kill);
	}
	if ($what eq 'worker')
	{
		# round 3: kill the worker, then its successor as soon as it shows
		# (while it closes its predecessor's session, or just after)
		my $node = $nodes[0];
		$run->sleep_until(22);
		my $old_session = ZkChaos::session_id($node);
		my $pid = ZkChaos::worker_pid($node);
		$run->fault_begin("kill -9 of the worker (pid $pid) of node1, then of its successor");
		ok(kill('KILL', $pid), "$scn: killed pid $pid");
		my $pid2;
		wait_until(
			sub {
				my $p = ZkChaos::worker_pid($node);
				$pid2 = $p if defined $p && $p =~ /^\d+$/ && $p != 0 && $p != $pid;
				return defined $pid2;
			},
			timeout => 30, interval => 0.01);
		ok(defined $pid2, "$scn: a new worker started");
		ok(kill('KILL', $pid2), "$scn: killed the new worker (pid $pid2) too") if $pid2;
		ok(ZkChaos::wait_node_ready($node, 60), "$scn: node1 is back and connected");
		$run->fault_end;
		ok(ZkChaos::wait_session_gone($old_session, 5),
			"$scn: none of the first session's lock nodes is left")
		  or diag("old session $old_session");
	}
	my $res = $run->check;

	# when the lock went on after each kill
	foreach my $k (@kills)
	{
		my ($first) = grep { $_->{start} / 1e6 > $k->{t_kill} } @{ $res->{rows} };
		my $handover = $first ? $first->{start} / 1e6 - $k->{t_kill} : 999;
		my $back = $k->{t_ready} - $k->{t_kill};
		note sprintf("%s: first section after the kill on %s: %.2fs later, on %s"
			  . " (the instance was back after %.2fs)",
			$scn, $k->{node}->name, $handover, $first ? $first->{instance} : '-', $back);
		# The dead holder's node goes when the restarted worker closes the
		# old session, not when the session times out.
		cmp_ok($handover, '<', $back + 1.5,
			sprintf("%s: the lock of the killed holder on %s passed on once the instance was back",
				$scn, $k->{node}->name))
		  if $k->{pinned};
	}
}

zk_done_check();
done_testing();
