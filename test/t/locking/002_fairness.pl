
# Fairness across instances (first come, first served):
#  - a writer is not starved by readers arriving after it
#  - waiters are granted in the order they queued, whichever instance they
#    are on
#  - a mixed queue (exclusive, shared, shared, exclusive) is served in order,
#    with consecutive shared requests granted together
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my $node1 = zk_node('node1');
my $node2 = zk_node('node2');

# Take a lock that must be granted at once; returns its token.
sub hold
{
	my ($s, $res, $mode) = @_;
	$mode //= 'exclusive';
	$s->query_ok('BEGIN');
	my $t = $s->query_ok("SELECT zk_lock_acquire('$res', '$mode')", 30);
	like($t, qr/^\d+$/, $s->name . " holds $res ($mode)");
	return $t;
}

# Queue a request that must wait: checks that the backend waits on the
# extension and that its lock node is there ($nodes lock nodes in all).
sub enqueue
{
	my ($s, $res, $mode, $nodes) = @_;
	$s->query_ok('BEGIN');
	$s->send("SELECT zk_lock_acquire('$res', '$mode')");
	ok(wait_for_waiting($s->node, $s->pid, 10),
		$s->name . " waits for $res ($mode)");
	ok(zk_wait_count(zk_path($res), $nodes, 10),
		$s->name . " is queued ($nodes lock nodes under $res)");
	return;
}

# Wait (bounded) until at least one of @s has its pending acquire done;
# returns the names of those done at that moment.
sub first_done
{
	my ($timeout, @s) = @_;
	my @done;
	wait_until(sub { @done = grep { $_->done } @s; return scalar @done; },
		timeout => $timeout, interval => 0.01);
	return map { $_->name } @done;
}

# The pending acquire of $s finished with a token (bounded).
sub granted
{
	my ($s, $timeout) = @_;
	my $r = $s->wait($timeout // 15);
	my $ok = defined $r && !$r->{exited} && $r->{sqlstate} eq '00000'
	  && $r->{out} =~ /^\d+$/;
	ok($ok, $s->name . ' was granted the lock')
	  or diag(explain($r // 'timed out'));
	return $ok ? $r->{out} : undef;
}

# Each of @s still waits (after a grace period that would let a wrong grant
# show up).
sub still_waiting
{
	my ($what, @s) = @_;
	sleep(0.5);
	foreach my $s (@s)
	{
		ok(!$s->done && is_waiting($s->node, $s->pid),
			$s->name . " still waits ($what)");
	}
	return;
}

# ---------------------------------------------------------------------------
# A writer is not starved by later readers.
{
	my $res = 'fair/writer';
	my $r1 = zk_session($node1, 'R1');
	my $w  = zk_session($node2, 'W');
	my $r2 = zk_session($node1, 'R2');
	my $r3 = zk_session($node2, 'R3');

	my $t_r1 = hold($r1, $res, 'shared');
	enqueue($w, $res, 'exclusive', 2);
	enqueue($r2, $res, 'shared', 3);
	enqueue($r3, $res, 'shared', 4);
	still_waiting('a shared lock is held, but W queued first', $r2, $r3);

	$r1->query_ok('COMMIT');
	my $t_w = granted($w);
	ok(defined $t_w && $t_w > $t_r1, 'W\'s token is above R1\'s');
	still_waiting('W holds the lock', $r2, $r3);
	ok(zk_wait_count(zk_path($res), 3, 10), 'R1\'s node is gone');

	$w->query_ok('COMMIT');
	my $t_r2 = granted($r2);
	my $t_r3 = granted($r3);
	# both readers hold together
	is( psql1(
			$node1,
			qq{SELECT count(*) FROM zk_locks WHERE resource = '$res' AND granted}),
		'2',
		'R2 and R3 hold the shared lock together');

	$r2->query_ok('COMMIT');
	$r3->query_ok('COMMIT');
	ok(zk_wait_no_locks(zk_path($res), 10), "no lock node left under $res");
	$_->quit for ($r1, $w, $r2, $r3);
}

# ---------------------------------------------------------------------------
# FIFO grant order across instances, two interleavings.
foreach my $order ([ $node1, $node2, $node1 ], [ $node2, $node1, $node2 ])
{
	my $res = 'fair/fifo_' . $order->[0]->name;
	my $h = zk_session($node1, 'H');
	my $sa = zk_session($order->[0], 'A_' . $order->[0]->name);
	my $sb = zk_session($order->[1], 'B_' . $order->[1]->name);
	my $sc = zk_session($order->[2], 'C_' . $order->[2]->name);

	hold($h, $res);
	enqueue($sa, $res, 'exclusive', 2);
	enqueue($sb, $res, 'exclusive', 3);
	enqueue($sc, $res, 'exclusive', 4);

	$h->query_ok('COMMIT');
	is(join(',', first_done(15, $sa, $sb, $sc)), $sa->name,
		'after H: ' . $sa->name . ' is granted first');
	my $ta = granted($sa);
	still_waiting('A holds', $sb, $sc);

	$sa->query_ok('COMMIT');
	is(join(',', first_done(15, $sb, $sc)), $sb->name,
		'after A: ' . $sb->name . ' is granted next');
	my $tb = granted($sb);
	still_waiting('B holds', $sc);

	$sb->query_ok('COMMIT');
	my $tc = granted($sc);
	ok(defined $ta && defined $tb && defined $tc && $ta < $tb && $tb < $tc,
		'tokens grow in grant order');
	$sc->query_ok('COMMIT');
	ok(zk_wait_no_locks(zk_path($res), 10), "no lock node left under $res");
	$_->quit for ($h, $sa, $sb, $sc);
}

# ---------------------------------------------------------------------------
# A mixed queue: H(X) then A(X, node2), B(S, node1), C(S, node2), D(X, node1).
# H -> A -> {B, C together} -> D.
{
	my $res = 'fair/mixed';
	my $h  = zk_session($node1, 'MH');
	my $sa = zk_session($node2, 'MA');
	my $sb = zk_session($node1, 'MB');
	my $sc = zk_session($node2, 'MC');
	my $sd = zk_session($node1, 'MD');

	hold($h, $res);
	enqueue($sa, $res, 'exclusive', 2);
	enqueue($sb, $res, 'shared', 3);
	enqueue($sc, $res, 'shared', 4);
	enqueue($sd, $res, 'exclusive', 5);

	$h->query_ok('COMMIT');
	is(join(',', first_done(15, $sa, $sb, $sc, $sd)), 'MA', 'after H: A first');
	granted($sa);
	still_waiting('A holds', $sb, $sc, $sd);

	$sa->query_ok('COMMIT');
	granted($sb);
	granted($sc);
	still_waiting('B and C hold shared', $sd);

	$sb->query_ok('COMMIT');
	still_waiting('C still holds shared', $sd);

	$sc->query_ok('COMMIT');
	granted($sd);
	$sd->query_ok('COMMIT');
	ok(zk_wait_no_locks(zk_path($res), 10), "no lock node left under $res");
	$_->quit for ($h, $sa, $sb, $sc, $sd);
}

zk_done_check();
done_testing();
