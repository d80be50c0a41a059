
# Attacks on counting semaphores (review of 1.4):
#  (a) a lost watch: a waiter listing again behind a withdrawal keeps the
#      watches of its set still wanted; a holder's node of that set whose
#      data changes while the listing is in flight (its holder's scope
#      moving from transaction to session) fires that watch then.  The
#      waiter must still hear of that holder's release: it is granted
#      within a bound once only one of the two slots is held.
#  (b) a later request with another limit does not fail the requests
#      that came before it: a waiter that lists again while a wrong
#      request's node is there (that node being deleted) keeps waiting,
#      and is granted when a slot frees; the wrong request gets 22023.
#  (c) a waiter that withdraws while it lists again (its watches of the
#      nodes still there kept for the listing) leaves no watch behind:
#      its instance's zk_lock_status.watches comes back to where it was,
#      though the holders it watched hold on.
#  (d) what grows with use: 6 clients on two more instances (session
#      timeout 60 s) cycle a semaphore of 2 hundreds of times, contended,
#      some waits ending at a short timeout: no watch is left on the
#      server (wchs) once nothing is held; then, with waiters queued,
#      ZooKeeper is restarted: the workers keep their sessions, each
#      worker's count of watches is the server's for its session, and the
#      waiters are granted in order as the holders release.
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

# a grant once eligible: a few round trips (session timeout 4 s)
my $bound = 3;

sub hold
{
	my ($s, $sql) = @_;
	like($s->query_ok($sql, 30), qr/^\d+$/, $s->name . " holds a slot ($sql)");
	return;
}

sub enqueue
{
	my ($s, $res, $limit) = @_;
	$s->send("SELECT zk_semaphore_acquire_session('$res', $limit, '60 s')");
	ok(wait_for_waiting($s->node, $s->pid, 10), $s->name . " waits for $res");
	ok( wait_until(
			sub {
				psql1($s->node,
					"SELECT count(*) FROM zk_locks WHERE resource = '$res' AND pid = "
					  . $s->pid . ' AND NOT granted') eq '1';
			},
			timeout => 10),
		$s->name . " is queued under $res");
	sleep(0.3);					# its watches set
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

# ---------------------------------------------------------------------------
# (a) H1, H2 hold a semaphore of 2; X and W wait (W watches H2 and X).
# node1's worker is held (failpoint before-delete, pausing the release of
# an unrelated lock) while X is cancelled and H2's slot moves to the
# session's scope, so that X's delete and H2's rewrite leave in one batch:
# W hears X go, lists again, and H2's data change reaches it meanwhile.
{
	my $res = 'atk/changed';
	my $h1 = zk_session($node1, 'H1');
	my $h2 = zk_session($node1, 'H2');
	my $x = zk_session($node1, 'X');
	my $w = zk_session($node1, 'W');
	my $z = zk_session($node1, 'Z');
	hold($h1, "SELECT zk_semaphore_acquire_session('$res', 2)");
	$h2->query_ok('BEGIN');
	hold($h2, "SELECT zk_semaphore_acquire('$res', 2)");
	enqueue($x, $res, 2);
	enqueue($w, $res, 2);
	$z->query_ok(q{SELECT zk_lock_acquire_session('atk/other', 'exclusive')});

	my $log_at = -s $node1->logfile;
	ok(zk_set_failpoints($node1, 'before-delete=pause'), 'node1: deletes pause');
	$z->send(q{SELECT zk_lock_release('atk/other', 'exclusive')});
	ok(zk_wait_log($node1, qr/failpoint "before-delete" reached \(pause\)/, $log_at),
		'node1\'s worker is paused before a delete');
	$node1->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $x->pid . ')');
	my $r = $x->wait(10);
	is($r && $r->{sqlstate}, '57014', 'X, ahead of W, was cancelled');
	$h2->send("SELECT zk_semaphore_acquire_session('$res', 2)");
	sleep(0.3);					# H2's rewrite queued behind X's withdrawal
	ok(zk_set_failpoints($node1, ''), 'node1: failpoints cleared');
	like($h2->wait(30)->{out}, qr/^\d+$/, 'H2 also holds its slot for the session');
	$z->wait(30);
	ok(zk_wait_count(zk_path($res), 3, 10), 'X\'s node is gone');
	sleep(1);					# W listed again and watches again
	ok(!$w->done, 'W still waits: H1 and H2 hold the semaphore');

	# H2 gives its slot back: W is eligible (one holder before it)
	$h2->query_ok('COMMIT');
	$h2->query_ok("SELECT zk_semaphore_release('$res')");
	granted_within($w, $bound, 'H2, whose data changed while W listed, released');
	$w->wait(60) unless $w->done || !defined $w->{pending};
	$_->quit for ($h1, $h2, $x, $w, $z);
	ok(zk_wait_no_locks(zk_path('atk'), 10), 'no node left under atk');
}

# ---------------------------------------------------------------------------
# (b) H1, H2 (node1) hold a semaphore of 2; X and W wait on node2.  A
# try_acquire with limit 5 on node1 fails, and node1's worker is paused
# before it deletes its node; X is cancelled: W lists again and sees that
# node.  W was there first: it keeps waiting.
{
	my $res = 'atk/limit';
	my $h1 = zk_session($node1, 'LH1');
	my $h2 = zk_session($node1, 'LH2');
	my $b = zk_session($node1, 'B');
	my $x = zk_session($node2, 'LX');
	my $w = zk_session($node2, 'LW');
	hold($h1, "SELECT zk_semaphore_acquire_session('$res', 2)");
	hold($h2, "SELECT zk_semaphore_acquire_session('$res', 2)");
	enqueue($x, $res, 2);
	enqueue($w, $res, 2);

	my $log_at = -s $node1->logfile;
	ok(zk_set_failpoints($node1, 'before-delete=pause'), 'node1: deletes pause');
	$b->send("SELECT zk_semaphore_try_acquire('$res', 5)");
	ok(zk_wait_log($node1, qr/failpoint "before-delete" reached \(pause\)/, $log_at),
		'the wrong request failed, its node not deleted yet');
	is(zk_count_locks(zk_path($res)), 5, 'its node is there with the four others');
	$node2->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $x->pid . ')');
	my $r = $x->wait(10);
	is($r && $r->{sqlstate}, '57014', 'LX, ahead of LW, was cancelled');
	sleep(1);					# LW listed again
	ok(!$w->done, 'LW, first to come, still waits')
	  or diag(explain($w->wait(1)));
	ok(zk_set_failpoints($node1, ''), 'node1: failpoints cleared');
	$r = $b->wait(30);
	is($r && $r->{sqlstate}, '22023', 'the request with another limit: 22023');
	like($r && $r->{err}, qr/max_holders 2, not 5/, 'naming both limits');
	if (!$w->done)
	{
		$h1->query_ok("SELECT zk_semaphore_release('$res')");
		granted_within($w, $bound, 'a slot freed');
	}
	$_->quit for ($h1, $h2, $b, $x, $w);
	ok(zk_wait_no_locks(zk_path('atk'), 10), 'no node left under atk');
}

# ---------------------------------------------------------------------------
# (c) H1, H2, X hold or wait on node1; W waits on node2 (it watches H2 and
# X).  node2's worker is paused (before the delete of an unrelated lock)
# while X is cancelled on node1 and W is cancelled: once it goes on, W
# hears X go and lists again, keeping H2's watch, and its withdrawal comes
# while that listing is in flight.
{
	my $res = 'atk/withdraw';
	my $h1 = zk_session($node1, 'WH1');
	my $h2 = zk_session($node1, 'WH2');
	my $x = zk_session($node1, 'WX');
	my $w = zk_session($node2, 'WW');
	my $z = zk_session($node2, 'WZ');
	my $base = psql1($node2, 'SELECT watches FROM zk_lock_status');
	hold($h1, "SELECT zk_semaphore_acquire_session('$res', 2)");
	hold($h2, "SELECT zk_semaphore_acquire_session('$res', 2)");
	enqueue($x, $res, 2);
	enqueue($w, $res, 2);
	$z->query_ok(q{SELECT zk_lock_acquire_session('atk/other2', 'exclusive')});

	my $log_at = -s $node2->logfile;
	ok(zk_set_failpoints($node2, 'before-delete=pause'), 'node2: deletes pause');
	$z->send(q{SELECT zk_lock_release('atk/other2', 'exclusive')});
	ok(zk_wait_log($node2, qr/failpoint "before-delete" reached \(pause\)/, $log_at),
		'node2\'s worker is paused before a delete');
	$node1->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $x->pid . ')');
	my $r = $x->wait(10);
	is($r && $r->{sqlstate}, '57014', 'WX, ahead of WW, was cancelled');
	ok(zk_wait_count(zk_path($res), 3, 10), 'WX\'s node is gone');
	$node2->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $w->pid . ')');
	$r = $w->wait(10);
	is($r && $r->{sqlstate}, '57014', 'WW was cancelled');
	ok(zk_set_failpoints($node2, ''), 'node2: failpoints cleared');
	$z->wait(30);
	ok(zk_wait_count(zk_path($res), 2, 10), 'WW\'s node is gone');
	my $now;
	ok( wait_until(
			sub {
				$now = psql1($node2, 'SELECT watches FROM zk_lock_status');
				return $now <= $base;
			},
			timeout => 5),
		"node2 keeps no watch of WW's wait ($now, $base before it)");
	$_->quit for ($h1, $h2, $x, $w, $z);
	ok(zk_wait_no_locks(zk_path('atk'), 10), 'no node left under atk');
}

# ---------------------------------------------------------------------------
# (d) contended cycles, then a restart of ZooKeeper with waiters queued
{
	my @n = map { zk_node("node$_", session_timeout => '60s') } 3 .. 4;
	my $res = 'atkcycles';	# no parent: its SHARED locks would add guards
	my $loop = q{
CREATE FUNCTION sem_cycles(res text, n int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
  got int := 0;
BEGIN
  FOR i IN 1..n LOOP
    BEGIN
      PERFORM zk_semaphore_acquire_session(res, 2, (random() * 20 + 1)::int * interval '1 ms');
      got := got + 1;
      PERFORM zk_semaphore_release(res);
    EXCEPTION WHEN lock_not_available THEN
      NULL;
    END;
  END LOOP;
  RETURN got;
END $$};
	$_->safe_psql('postgres', $loop) for @n;
	my @c = map { zk_session($n[ $_ % 2 ], "CY$_") } 1 .. 6;
	$_->send("SELECT sem_cycles('$res', 300)") for @c;
	my ($got, $all) = (0, 1);
	for my $s (@c)
	{
		my $r = $s->wait(120);
		if ($r && $r->{sqlstate} eq '00000') { $got += $r->{out}; }
		else { $all = 0; diag(explain($r // 'timed out')); }
	}
	ok($all, "6 clients cycled 300 times each ($got slots taken)");
	ok($got > 0 && $got < 1800, 'some waits ended at their timeout, some were granted');
	# each instance's revocation mailbox keeps a watch (issue 18)
	my $mailboxes = 4;
	my $wchs;
	ok( wait_until(
			sub {
				my $out = zk_server('4lw', 1, 'wchs');
				$wchs = $out =~ /Total watches:\s*(\d+)/ ? $1 : -1;
				return $wchs == $mailboxes;
			},
			timeout => 10),
		"no watch left on the server after the cycles but the $mailboxes mailboxes' ($wchs)");
	is_worker_watches($_, '1',
		$_->name . ': no watch in the worker but its mailbox\'s') for @n;

	# two holders on node3, three waiters on node4
	my @h = map { zk_session($n[0], "RH$_") } 1 .. 2;
	my @w = map { zk_session($n[1], "RW$_") } 1 .. 3;
	hold($_, "SELECT zk_semaphore_acquire_session('$res', 2)") for @h;
	enqueue($_, $res, 2) for @w;
	my %sid = map { ($_->name => psql1($_, 'SELECT session_id FROM zk_lock_status')) } @n;
	my ($mine, $server);
	my $counts = sub {
		$mine = psql1($n[1], 'SELECT watches FROM zk_lock_status');
		my $out = zk_server('4lw', 1, 'wchc');
		my $cur = '';
		$server = 0;
		for my $line (split /\n/, $out)
		{
			if ($line =~ /^(0x[0-9a-f]+)/) { $cur = $1; }
			elsif ($line =~ m{^\s+/} && $cur eq $sid{ $n[1]->name }) { $server++; }
		}
		# 2 per waiter in the worker, on the 4 nodes before the last one;
		# and the mailbox's, and the child watch of the last waiter's first
		# listing (issue 18: wchc does not show child watches)
		return $mine == 6 + 2 && $server == 4 + 1;
	};
	ok(wait_until($counts, timeout => 10),
		"node4's watches: $mine in the worker (2 per waiter, its mailbox's, a listing's), the server's $server (one per node, the mailbox's)");
	my ($rc) = zk_server('restart-one', 1);
	is($rc, 0, 'ZooKeeper restarted');
	for my $node (@n)
	{
		ok(zk_wait_connected($node, 90), $node->name . ' reconnected');
		is(psql1($node, 'SELECT session_id FROM zk_lock_status'), $sid{ $node->name },
			$node->name . ' kept its session');
	}
	ok(wait_until($counts, timeout => 10),
		"the same after the reconnection: $mine in the worker, the server's $server")
	  or diag(zk_server('4lw', 1, 'wchc'));
	$h[0]->query_ok("SELECT zk_semaphore_release('$res')");
	granted_within($w[0], $bound, 'the first waiter, after the restart');
	$h[1]->query_ok("SELECT zk_semaphore_release('$res')");
	granted_within($w[1], $bound, 'the second waiter, after the restart');
	ok(!$w[2]->done, 'the third still waits: two hold');
	$w[0]->query_ok("SELECT zk_semaphore_release('$res')");
	granted_within($w[2], $bound, 'the third waiter');
	$_->query_ok("SELECT zk_semaphore_release('$res')") for @w[ 1, 2 ];
	ok(zk_wait_no_locks(zk_path($res), 10), "no node left under $res");
	ok( wait_until(
			sub {
				my $out = zk_server('4lw', 1, 'wchs');
				$wchs = $out =~ /Total watches:\s*(\d+)/ ? $1 : -1;
				return $wchs == $mailboxes;
			},
			timeout => 10),
		"no watch left on the server at the end but the mailboxes' ($wchs)");
	$_->quit for (@c, @h, @w);
}

zk_done_check();
done_testing();
