
# Counting semaphores across two instances (1.4):
#  - a semaphore of 3 with 8 clients (4 per instance, each taking and
#    giving back a slot a few times) never has more than 3 holders at any
#    moment (intervals recorded on this machine's clock), and has 3 at
#    some moment
#  - grants go first come first served, whichever holder releases first
#    (the newest holder, then the oldest), and a waiter ahead that
#    withdraws (timeout, cancel, pg_terminate_backend) delays nobody: each
#    next waiter is granted within a bound far below any timeout
#  - a limit that differs from the holders' is 22023 naming both, on the
#    other instance too; a lock and a semaphore on one resource: 55000,
#    both orders; a slot lost before COMMIT fails the commit (55P03)
#  - a lost create reply (adopted) and watches set late (a holder gone
#    before them) still end in a grant
#  - a release notifies at most max_holders waiters
#    (zk_lock_status.notifications, summed over the instances)
#  - no lock node is left behind
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

# The bound a grant must come within once its waiter is eligible: a few
# round trips, far below the waiters' timeouts (60 s) and the session
# timeout (4 s)
my $bound = 2;

# ---------------------------------------------------------------------------
# 8 clients, a semaphore of 3: never more than 3 holders at once.
{
	my $loop = q{
CREATE FUNCTION sem_loop(res text, n int, hold float8) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
  t0 timestamptz;
  t1 timestamptz;
BEGIN
  FOR i IN 1..n LOOP
    PERFORM zk_semaphore_acquire_session(res, 3, '60 s');
    t0 := clock_timestamp();
    PERFORM pg_sleep(hold);
    t1 := clock_timestamp();
    PERFORM zk_semaphore_release(res);
    RETURN NEXT extract(epoch FROM t0)::text || ' ' || extract(epoch FROM t1)::text;
  END LOOP;
END $$};
	$node1->safe_psql('postgres', $loop);
	$node2->safe_psql('postgres', $loop);

	my @clients;
	for my $i (1 .. 8)
	{
		my $s = zk_session($i % 2 ? $node1 : $node2, "C$i");
		push @clients, $s;
	}
	$_->send(q{SELECT * FROM sem_loop('sem/pool', 4, 0.05 + random() * 0.1)})
	  for @clients;
	my @iv;
	my $all_ok = 1;
	foreach my $s (@clients)
	{
		my $r = $s->wait(60);
		if (!defined $r || $r->{sqlstate} ne '00000')
		{
			$all_ok = 0;
			diag(explain($r // 'timed out'));
			next;
		}
		push @iv, [ split / /, $_ ] for split /\n/, $r->{out};
	}
	ok($all_ok, '8 clients took and gave back their slots 4 times each');
	is(scalar @iv, 32, '32 holding intervals recorded');

	# a sweep over the interval ends: the most holders at once
	my @ev = sort { $a->[0] <=> $b->[0] || $a->[1] <=> $b->[1] }
	  (map { ([ $_->[0], 1 ], [ $_->[1], -1 ]) } @iv);
	my ($n, $max) = (0, 0);
	foreach my $e (@ev)
	{
		$n += $e->[1];
		$max = $n if $n > $max;
	}
	ok($max <= 3, "never more than 3 holders at once (at most $max)");
	is($max, 3, 'and 3 at some moment: the semaphore lets 3 in');
	ok(zk_wait_no_locks(zk_path('sem/pool'), 10), 'no node left under sem/pool');
	$_->quit for @clients;
}

# A session that takes a slot at once, and one that queues for one (its
# node is the $nodes-th under the resource).
sub hold
{
	my ($s, $res, $limit) = @_;
	my $t = $s->query_ok("SELECT zk_semaphore_acquire_session('$res', $limit, '10 s')", 30);
	like($t, qr/^\d+$/, $s->name . " holds a slot of $res");
	return $t;
}

sub enqueue
{
	my ($s, $res, $limit, $timeout) = @_;
	$timeout //= '60 s';
	$s->send("SELECT zk_semaphore_acquire_session('$res', $limit, '$timeout')");
	ok(wait_for_waiting($s->node, $s->pid, 10), $s->name . " waits for $res");
	# its node is there (whatever else comes and goes meanwhile)
	ok( wait_until(
			sub {
				psql1($s->node,
					"SELECT count(*) FROM zk_locks WHERE resource = '$res' AND pid = "
					  . $s->pid . ' AND NOT granted') eq '1';
			},
			timeout => 10),
		$s->name . " is queued under $res");
	return;
}

sub granted_within
{
	my ($s, $secs, $what) = @_;
	my $r = $s->wait($secs);
	my $ok = defined $r && !$r->{exited} && $r->{sqlstate} eq '00000'
	  && $r->{out} =~ /^\d+$/;
	ok($ok, $s->name . " is granted within $secs s ($what)")
	  or diag(explain($r // 'timed out'));
	return $ok;
}

sub still_waiting
{
	my ($what, @s) = @_;
	sleep(0.5);
	ok(!$_->done && is_waiting($_->node, $_->pid), $_->name . " still waits ($what)")
	  for @s;
	return;
}

# ---------------------------------------------------------------------------
# First come first served; holders release in any order; waiters ahead
# withdraw by timeout, cancel and termination without delaying the next.
{
	my $res = 'sem/fifo';
	my @h = map { zk_session($_ % 2 ? $node1 : $node2, "H$_") } 1 .. 3;
	my @w = map { zk_session($_ % 2 ? $node2 : $node1, "W$_") } 1 .. 6;
	hold($_, $res, 3) for @h;
	# W2 gives up by its timeout (3 s) while the others queue
	enqueue($w[0], $res, 3);
	enqueue($w[1], $res, 3, '3 s');
	enqueue($w[$_], $res, 3) for 2 .. 5;

	my $r = $w[1]->wait(10);
	is($r && $r->{sqlstate}, '55P03', 'W2 gave up at its timeout');
	ok(zk_wait_count(zk_path($res), 8, 10), 'W2\'s node is gone');
	still_waiting('3 hold the semaphore', @w[ 0, 2 .. 5 ]);

	# the newest holder releases first: the first waiter gets its slot
	$h[2]->query_ok("SELECT zk_semaphore_release('$res')");
	granted_within($w[0], $bound, 'H3, the newest holder, released');
	still_waiting('3 hold it again', @w[ 2 .. 5 ]);

	# W4 is canceled and W5 terminated, both ahead of W6
	$node1->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $w[3]->pid . ')');
	$r = $w[3]->wait(10);
	is($r && $r->{sqlstate}, '57014', 'W4 was canceled');
	$node2->safe_psql('postgres', 'SELECT pg_terminate_backend(' . $w[4]->pid . ')');
	$r = $w[4]->wait(10);
	ok($r && $r->{exited}, 'W5 was terminated');
	ok(zk_wait_count(zk_path($res), 5, 10), 'their nodes are gone');
	still_waiting('withdrawals ahead grant nobody: 3 hold it', @w[ 2, 5 ]);

	# the oldest holder: the next in line (W3), not W6
	$h[0]->query_ok("SELECT zk_semaphore_release('$res')");
	granted_within($w[2], $bound, 'H1, the oldest holder, released');
	still_waiting('3 hold it again', $w[5]);

	# the last of the first holders: W6, whose waiters ahead withdrew
	$h[1]->query_ok("SELECT zk_semaphore_release('$res')");
	granted_within($w[5], $bound, 'H2 released; W4 and W5 ahead of it withdrew');
	is( psql1(
			$node1,
			"SELECT count(*) FILTER (WHERE granted) || '/' || count(*) FROM zk_locks WHERE resource = '$res'"
		),
		'3/3',
		'W1, W3 and W6 hold the semaphore, nobody waits');

	$_->query_ok("SELECT zk_semaphore_release('$res')") for @w[ 0, 2, 5 ];
	ok(zk_wait_no_locks(zk_path($res), 10), "no node left under $res");
	$_->quit for (@h, @w[ 0 .. 3, 5 ]);
}

# ---------------------------------------------------------------------------
# Lost replies and late watches: a waiter whose create reply is lost finds
# its node again by its prefix (adopted), and a holder that releases while
# the waiter's worker has not yet set its watches (it sleeps before them)
# is seen by the watches' exists (no node): the waiter is granted.
{
	my $res = 'sem/lost';
	my @h = map { zk_session($node1, "LH$_") } 1 .. 2;
	my $w = zk_session($node2, 'LW');
	hold($_, $res, 2) for @h;
	my $log_at = -s $node2->logfile;
	ok(zk_set_failpoints($node2, 'after-create-reply=fail,before-wait=sleep:2'),
		'node2: create replies dropped, waits set 2 s late');
	$w->send("SELECT zk_semaphore_acquire_session('$res', 2, '60 s')");
	ok(zk_wait_log($node2, qr/failpoint "before-wait" reached \(sleep:2\)/, $log_at),
		'the waiter\'s worker is about to watch, late');
	$h[0]->query_ok("SELECT zk_semaphore_release('$res')");
	granted_within($w, 2 + $bound, 'a holder released before its watches were set');
	ok(zk_wait_log($node2, qr/adopted lock node "[^"]*sem\/lost\/[^"]*SEMAPHORE-2-/, $log_at),
		'its node was found again by its prefix and adopted');
	ok(zk_set_failpoints($node2, ''), 'node2: failpoints cleared');
	is(zk_count_locks(zk_path($res)), 2, 'one node each for LH2 and LW');
	$_->quit for (@h, $w);
	ok(zk_wait_no_locks(zk_path($res), 10), "no node left under $res");
}

# ---------------------------------------------------------------------------
# Everyone must agree on the limit; a resource is a lock or a semaphore.
{
	my $a = zk_session($node1, 'A');
	my $b = zk_session($node2, 'B');

	hold($a, 'sem/limit', 3);
	my $r = $b->query(q{SELECT zk_semaphore_try_acquire('sem/limit', 4)});
	is($r->{sqlstate}, '22023', 'another limit on the other instance: 22023');
	like($r->{err}, qr/max_holders 3, not 4/, 'naming both limits');
	$r = $b->query(q{SELECT zk_semaphore_acquire('sem/limit', 2, '5 s')});
	is($r->{sqlstate}, '22023', 'a waiting acquire too');
	like($r->{err}, qr/max_holders 3, not 2/, 'naming both limits');
	$r = $b->query(q{SELECT zk_lock_acquire('sem/limit', 'exclusive', '5 s')});
	is($r->{sqlstate}, '55000', 'a lock where a semaphore is held: 55000');
	like($r->{err}, qr/"sem\/limit" is used as a semaphore/, 'saying what it is used as');
	$a->query_ok(q{SELECT zk_semaphore_release('sem/limit')});

	$a->query_ok(q{SELECT zk_lock_acquire_session('sem/mixed', 'shared')});
	$r = $b->query(q{SELECT zk_semaphore_acquire('sem/mixed', 2, '5 s')});
	is($r->{sqlstate}, '55000', 'a semaphore where a lock is held: 55000');
	like($r->{err}, qr/"sem\/mixed" is used as a lock/, 'saying what it is used as');
	$a->query_ok(q{SELECT zk_lock_release('sem/mixed', 'shared')});

	# a slot lost before COMMIT: the commit fence refuses, as for a lock
	$a->query_ok('BEGIN');
	$a->query_ok(q{SELECT zk_semaphore_acquire('sem/fence', 2)});
	is(psql1($node2, q{SELECT zk_lock_force_release('sem/fence')}), '1',
		'the slot\'s node is removed from the other instance');
	ok(wait_until(sub { psql1($node1, q{SELECT count(*) FROM zk_lock_local WHERE state = 'lost'}) eq '1' },
		timeout => 10), 'its instance sees the slot lost');
	$r = $a->query('COMMIT');
	is($r->{sqlstate}, '55P03', 'COMMIT of a transaction whose slot was lost: 55P03');
	like($r->{err}, qr/was lost/, 'saying it was lost');
	ok(zk_wait_no_locks(zk_path('sem'), 10), 'no node left behind by the errors');
	$_->quit for ($a, $b);
}

# ---------------------------------------------------------------------------
# No herd: a release notifies at most max_holders waiters.  The holders
# are on node1, the 8 waiters on node2; node1's own notification is the
# releasing holder's guard seeing its node go.  (A resource without a
# parent: a parent's SHARED lock would add its own guard's.)  Since issue
# 18 each session's first listing of the resource (the one behind a create)
# also sets a child watch, which fires once at the next change of the
# children: one notification per session, however many of its requests
# wait, which no waiter acts on; it is counted apart.
{
	my $res = 'semherd';
	my @h = map { zk_session($node1, "HH$_") } 1 .. 3;
	my @w = map { zk_session($node2, "WW$_") } 1 .. 8;
	hold($_, $res, 3) for @h;
	enqueue($_, $res, 3) for @w;
	sleep(0.5);					# every waiter's watches set

	my $count = sub {
		return map { psql1($_, 'SELECT notifications FROM zk_lock_status') }
		  ($node1, $node2);
	};
	my $next = 0;
	foreach my $i (2, 0, 1)		# the newest holder first: the most watched
	{
		my ($a1, $a2) = $count->();
		$h[$i]->query_ok("SELECT zk_semaphore_release('$res')");
		granted_within($w[$next], $bound, 'a holder released');
		$next++;
		sleep(1);				# the others list again and watch again
		my ($b1, $b2) = $count->();
		my ($d1, $d2) = ($b1 - $a1, $b2 - $a2);
		ok($d2 <= 3 + 1, "release of HH" . ($i + 1) . ": $d2 notifications to the waiters' instance (at most 3 waiters, and its listing's watch)");
		ok($d1 <= 1, "and $d1 to the releasing instance (its holder's guard)");
		ok($d1 + $d2 <= 4 + 1, "in all " . ($d1 + $d2) . ', at most max_holders + 1, and one listing\'s watch');
	}
	still_waiting('3 hold it', @w[ 3 .. 7 ]);
	# watches do not pile up across the waits and listings: 3 per waiter
	# (the nearest before it) and a guard per slot held
	my $watches;
	ok( wait_until(
			sub {
				$watches = psql1($node2, 'SELECT watches FROM zk_lock_status');
				return $watches <= 5 * 3 + 3 + 1;
			},
			timeout => 5),
		"node2 has at most 19 watches for 5 waiters, 3 holders and its revocation mailbox ($watches)");
	# the waiters left are ended; the holders go with their sessions
	$node2->safe_psql('postgres',
		'SELECT pg_terminate_backend(pid) FROM unnest(ARRAY['
		  . join(',', map { $_->pid } @w[ 3 .. 7 ]) . ']) AS pid');
	$_->wait(10) for @w[ 3 .. 7 ];
	$_->quit for (@w, @h);
	ok(zk_wait_no_locks(zk_path($res), 10), "no node left under $res");
}

zk_done_check();
done_testing();
