
# The hold of issue 28, finding 6 (src/batch.c), attacked in review:
# the hold's cap: a multi not answered within 5 s (the server stopped)
# holds no longer, and that is logged (once); the held create is then sent
# (never stranded).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/..";
use ZkLockTest;
use ZkChaos;

use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my $node1 = zk_node('node1', session_timeout => '20s',
	extra_conf => "zklock.sweep_interval = '1h'\n");

# (b) a multi in flight to a stopped server, a create held behind it
{
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
	my $t0 = time;
	ok(zk_wait_log($node1, qr/multi sent 5000 ms ago is not answered yet/, $from, 12),
		'the end of the hold is logged');
	my $after = time - $t0;
	note(sprintf('hold end logged %.1f s after C asked', $after));
	cmp_ok($after, '>', 3, 'not before the cap');
	ZkChaos::zk_ctl('stopsig', 1, 'CONT');
	is($a->wait(30)->{out}, 't', 'A granted');
	$a->query_ok(q{SELECT zk_lock_release('mmh/other')});
	ok(zk_wait_count(zk_path('mmh/cap'), 3, 30), 'H, B and C have their nodes');
	is(zk_log_count($node1, qr/multi sent 5000 ms ago/, $from), 1,
		'logged once');
	$_->quit for ($h, $a, $b, $c);
	ok(zk_wait_no_locks(zk_path('mmh'), 15), '(b) no lock node left');
}

zk_done_check();
done_testing();
