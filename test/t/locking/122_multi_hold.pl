# The hold of issue 28, finding 6 (src/worker/batch.c), attacked in review: a
# multi in flight to a server stopped (SIGSTOP) for longer than a few
# seconds.  A and B share one multi; A's create fails (its resource's node
# is missing: parents => false), so B's is rolled back and sent again when
# the server resumes.  C asks for B's resource meanwhile, on the same
# instance.  The review saw B not granted after H's release: C's create,
# sent when the hold's former 5 s cap ran out, was ahead of B's second
# create, and C held the lock (the same order as without the hold).  The
# hold now lasts until the multi is answered (the client library answers
# it, with a connection loss if need be, within 2/3 of the session
# timeout): B is granted when H releases, then C.  A create held is sent
# once the multi is answered (never stranded), and nothing is left behind.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkChaos;

use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my $node1 = zk_node('node1', session_timeout => '20s',
	extra_conf => "zklock.sweep_interval = '1h'\n");

my $h = zk_session($node1, 'h');
my $b = zk_session($node1, 'b');
my $c = zk_session($node1, 'c');
is($h->query(q{SELECT zk_lock_acquire_session('mmh/cap', parents => false) > 0})->{out},
	't', 'H holds mmh/cap');
my $a = zk_session($node1, 'a');
my $from = -s $node1->logfile;
# A and B reach the worker in one pass: their creates share one multi
my $w = ZkChaos::worker_pid($node1);
kill('STOP', $w);
$a->send(q{SELECT zk_lock_acquire_session('mmh/other', timeout => '60 s', parents => false) > 0});
$b->send(q{SELECT zk_lock_acquire_session('mmh/cap', timeout => '60 s', parents => false) > 0});
ok(wait_for_waiting($node1, $a->pid, 20) && wait_for_waiting($node1, $b->pid, 20),
	'A and B wait for the stopped worker');
# the multi goes out to a stopped server; C asks while it is in flight
ZkChaos::zk_ctl('stopsig', 1, 'STOP');
kill('CONT', $w);
sleep(0.5);
$c->send(q{SELECT zk_lock_acquire_session('mmh/cap', timeout => '60 s', parents => false) > 0});
ok(wait_for_waiting($node1, $c->pid, 20), 'C waits');
# longer than the former cap (5 s), shorter than the connection's timeout
sleep(6.5);
ZkChaos::zk_ctl('stopsig', 1, 'CONT');
is($a->wait(30)->{out}, 't', 'A granted (its parent made, its create again)');
$a->query_ok(q{SELECT zk_lock_release('mmh/other')});
ok(zk_wait_count(zk_path('mmh/cap'), 3, 30), 'H, B and C have their nodes');
diag(join(' ', 'nodes:', zk_lock_nodes(zk_path('mmh/cap'))));
is(zk_log_count($node1, qr/is not answered yet/, $from), 0,
	'the hold lasted until the multi was answered');

my $t0 = time;
$h->query_ok(q{SELECT zk_lock_release('mmh/cap')});
my $rb = $b->wait(30);
is($rb && $rb->{out}, 't', 'B granted after H released (its place kept)');
diag(sprintf('B granted %.2f s after the release', time - $t0));
if (!($rb && $rb->{out} eq 't'))
{
	# C went ahead: let it go, so that the rest still runs
	my $rc = $c->wait(5);
	note('C: ' . ($rc ? $rc->{out} : 'not granted either'));
	$c->query_ok(q{SELECT zk_lock_release('mmh/cap')}) if $rc;
	$rb = $b->wait(30);
}
$b->query_ok(q{SELECT zk_lock_release('mmh/cap')});
my $rc = $c->wait(30);
is($rc && $rc->{out}, 't', 'C granted after B released');
$c->query_ok(q{SELECT zk_lock_release('mmh/cap')});
$_->quit for ($h, $a, $b, $c);
ok(zk_wait_no_locks(zk_path('mmh'), 15), 'no lock node left');

# (b) the same, the server stopped past the connection's timeout (2/3 of a
# 9 s session): the multi, the mark behind it and the listings are answered
# with a connection loss; the held create is then sent (or failed with the
# session), never stranded: every request ends, nothing is left behind
{
	my $node2 = zk_node('node2', session_timeout => '9s',
		extra_conf => "zklock.sweep_interval = '1h'\n");
	my $from2 = -s $node2->logfile;
	my %ss = map {; $_ => zk_session($node2, "${_}2") } qw(h a b c);
	is($ss{h}->query(q{SELECT zk_lock_acquire_session('mmh2/cap', parents => false) > 0})->{out},
		't', '(b) H holds mmh2/cap');
	my $w2 = ZkChaos::worker_pid($node2);
	kill('STOP', $w2);
	$ss{a}->send(q{SELECT zk_lock_acquire_session('mmh2/other', timeout => '90 s', parents => false) > 0});
	$ss{b}->send(q{SELECT zk_lock_acquire_session('mmh2/cap', timeout => '90 s', parents => false) > 0});
	ok(wait_for_waiting($node2, $ss{a}->pid, 20)
		  && wait_for_waiting($node2, $ss{b}->pid, 20),
		'(b) A and B wait for the stopped worker');
	ZkChaos::zk_ctl('stopsig', 1, 'STOP');
	kill('CONT', $w2);
	sleep(0.5);
	$ss{c}->send(q{SELECT zk_lock_acquire_session('mmh2/cap', timeout => '90 s', parents => false) > 0});
	ok(wait_for_waiting($node2, $ss{c}->pid, 20), '(b) C waits');
	sleep(8);
	ZkChaos::zk_ctl('stopsig', 1, 'CONT');
	# granted ones release at once, so that the others can go on
	my %end;
	for my $round (1 .. 2)
	{
		for my $n (qw(a h b c))
		{
			next if $end{$n};
			if ($n eq 'h')
			{
				$end{h} = 1;
				$ss{h}->query(q{SELECT zk_lock_release('mmh2/cap')});
				next;
			}
			my $r = $ss{$n}->wait($round == 1 ? 20 : 60);
			next unless $r;
			$end{$n} = 1;
			diag("(b) $n: " . ($r->{out} eq 't' ? 'granted' : "ended: $r->{err}"));
			my $res = $n eq 'a' ? 'mmh2/other' : 'mmh2/cap';
			$ss{$n}->query(qq{SELECT zk_lock_release('$res')}) if $r->{out} eq 't';
		}
	}
	ok($end{$_}, "(b) ${_}'s request ended") for qw(a b c);
	ok(zk_log_count($node2, qr/lost the connection to ZooKeeper/, $from2) >= 1,
		'(b) the connection was lost while the create was held');
	is(zk_log_count($node2, qr/is not answered yet/, $from2), 0,
		'(b) the hold ended with the answers, not at the safety net');
	$ss{$_}->quit for keys %ss;
	ok(zk_wait_no_locks(zk_path('mmh2'), 30), '(b) no lock node left');
}

zk_done_check();
done_testing();
