
# A multi whose one member fails (issue 28, finding 6).  Backend A asks for
# a resource whose node refuses our creates (another client's ACL) and
# backend B, on the same instance, for r, held by H: the worker takes both
# in one pass, so their creates share one multi, which fails as a whole (A
# by its ACL, B's create only rolled back).  While that multi is in flight
# (the ZooKeeper server is stopped: the multi waits in its socket), backend
# C of the same instance asks for r too.  B asked first; when H releases,
# B must be granted before C: a waiter does not lose its place among its
# instance's requests for someone else's failure (before the fix, C's
# create, sent while the multi was in flight, was committed before B's
# second create, and C was granted first).
#
# Every request is for the one node alone (parents => false): with its
# parents' SHARED locks a contended request first asks for all its nodes
# as tries, gives them back and only then queues step by step (acquire.c),
# so its place is taken after the tries' answers, and two such requests
# made a moment apart race there, failure or not.
#
# Across instances no such promise can hold: a create rolled back never had
# a sequence number, and another instance's create committed meanwhile is
# ahead (doc/design.md, "Group commit": bounded to the multi's round trip,
# like a lost reply).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkChaos;

use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
# a longer session: the server is stopped for about a second, with the
# replies of a multi unread; no connection loss may end that multi
my $node1 = zk_node('node1', session_timeout => '12s',
	extra_conf => "zklock.sweep_interval = '1h'\n");

my ($rc) = zkutil('create-acl', zk_path('mmf_bad/r'), 'r', 'other:secret');
is($rc, 0, 'another client made a resource node that refuses our creates');

my $h = zk_session($node1, 'h');
my $a = zk_session($node1, 'a');
my $b = zk_session($node1, 'b');
my $c = zk_session($node1, 'c');
is($h->query(q{SELECT zk_lock_acquire_session('mmf/r', parents => false) > 0})->{out}, 't',
	'H holds mmf/r');

for my $round (1 .. 10)
{
	my $w = ZkChaos::worker_pid($node1);
	ok($w, "round $round: the worker's pid ($w)");

	# A and B reach the worker in one pass: their creates share one multi
	kill('STOP', $w);
	$a->send(q{SELECT zk_lock_acquire_session('mmf_bad/r', timeout => '20 s', parents => false)});
	$b->send(q{SELECT zk_lock_acquire_session('mmf/r', timeout => '60 s', parents => false) > 0});
	my $both = wait_for_waiting($node1, $a->pid, 20)
	  && wait_for_waiting($node1, $b->pid, 20);
	ok($both, "round $round: A and B wait for the stopped worker");

	# the multi goes out to a stopped server; C asks while it is in flight
	ZkChaos::zk_ctl('stopsig', 1, 'STOP');
	kill('CONT', $w);
	sleep(0.4);
	$c->send(q{SELECT zk_lock_acquire_session('mmf/r', timeout => '60 s', parents => false) > 0});
	ok(wait_for_waiting($node1, $c->pid, 20), "round $round: C waits");
	sleep(0.4);    # C's create leaves behind the multi
	ZkChaos::zk_ctl('stopsig', 1, 'CONT');

	my $ra = $a->wait(60);
	is($ra && $ra->{sqlstate}, '38000',
		"round $round: A's request is refused (ACL)");
	like($ra && $ra->{err}, qr/not authenticated|no permission|auth/i,
		"round $round: for its ACL");
	ok(zk_wait_count(zk_path('mmf/r'), 3, 20),
		"round $round: H, B and C have their nodes");
	note(join(' ', "round $round: nodes:",
		map { (split m{/})[-1] } zk_lock_nodes(zk_path('mmf/r'))));

	# H releases: B, who asked first, is granted; C still waits
	my $t0 = time;
	$h->query_ok(q{SELECT zk_lock_release('mmf/r')});
	my $first;
	wait_until(
		sub {
			$first = 'B' if $b->done;
			$first = 'C' if !defined $first && $c->done;
			return defined $first;
		},
		timeout => 30, interval => 0.02);
	is($first // 'none', 'B', "round $round: B is granted before C");
	note(sprintf("round %d: %s granted %.2fs after H's release", $round,
		$first // 'none', time - $t0));
	if (($first // '') eq 'B')
	{
		is($b->wait(10)->{out}, 't', "round $round: B granted");
		ok(is_waiting($node1, $c->pid), "round $round: C still waits");
		$b->query_ok(q{SELECT zk_lock_release('mmf/r')});
		is($c->wait(30)->{out}, 't', "round $round: then C is granted");
		# C becomes the next round's H
		($h, $c) = ($c, $h);
	}
	else
	{
		# C was granted first: let everyone go for the next round
		my $rc2 = $c->wait(10);
		$c->query_ok(q{SELECT zk_lock_release('mmf/r')});
		$b->wait(30);
		($h, $b) = ($b, $h);
	}
	ok(zk_wait_count(zk_path('mmf/r'), 1, 20),
		"round $round: one node left (the holder's)");
}

$h->query_ok(q{SELECT zk_lock_release('mmf/r')});
$_->quit for ($h, $a, $b, $c);
ok(zk_wait_no_locks(zk_path('mmf'), 15), 'no lock node left');
zk_done_check();
done_testing();
