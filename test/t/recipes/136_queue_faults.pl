
# The distributed queue's redelivery after faults (issue 31): an item held
# by a taker on node1 goes to a consumer on node2 that is already waiting
# for it (zk_queue_take, in a transaction), with the same id, when node1's
# taker
#  - is cancelled (pg_cancel_backend, in the middle of its work),
#  - is terminated (pg_terminate_backend),
#  - is cut from ZooKeeper past its session (node1 reaches ZooKeeper through
#    test/zk_proxy.py; the link is cut): its COMMIT then does not succeed,
#  - has its backend killed (SIGKILL: the postmaster restarts the instance),
#  - has its instance killed (SIGKILL of the postmaster and of all its
#    processes at once: the session is not closed, it expires).
# Each redelivery time (from the fault to node2's grant) is printed; the
# bound asserted is generous (60 s; the session timeout is 4 s).  Each time
# node2 commits, and the queue is empty at the end.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkChaos;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $hosts = zk_start();
my ($zk_port) = $hosts =~ /:(\d+)$/;
my $px = ZkChaos::Proxy->start(
	links => [ [ 'node1', PostgreSQL::Test::Cluster::get_free_port(), $zk_port ] ]);
my $node1 = zk_node('node1', hosts => '127.0.0.1:' . $px->port('node1'),
	extra_conf => "restart_after_crash = on\n");
my $node2 = zk_node('node2');

my $putter = zk_session($node2, 'putter');
my %times;

# One round: node1's taker holds the queue's only item, node2's consumer
# waits for it; $fault->($taker) strikes; node2 must get the same id.
sub round
{
	my ($what, $fault) = @_;
	my $id = $putter->query_ok(qq{SELECT zk_queue_put_now('fq', '$what')});
	my $taker = zk_session($node1, "taker-$what");
	$taker->query_ok('BEGIN');
	is($taker->query_ok(q{SELECT id FROM zk_queue_try_take('fq')}), $id,
		"$what: node1 holds the item");
	my $waiter = zk_session($node2, "waiter-$what");
	$waiter->query_ok('BEGIN');
	$waiter->send(q{SELECT id || ' ' || convert_from(item, 'UTF8') FROM zk_queue_take('fq', '90 s')});
	ok( wait_until(
			sub {
				$node2->safe_psql('postgres',
					'SELECT count(*) FROM pg_stat_activity WHERE pid = ' . $waiter->pid
					  . q{ AND (wait_event LIKE 'Zklock%' OR wait_event_type = 'Extension')}
				) == 1;
			},
			timeout => 20),
		"$what: node2's consumer waits");
	my $t0 = time();
	$fault->($taker);
	my $r = $waiter->wait(60);
	my $dt = time() - $t0;
	is($r && $r->{out}, "$id $what",
		"$what: node2's waiting consumer takes the item, with the same id");
	$times{$what} = $dt;
	diag(sprintf('%s: redelivered %.2f s after the fault', $what, $dt));
	$waiter->query_ok('COMMIT');
	$waiter->quit;
	return $taker;
}

# cancelled in the middle of its work
round('cancel', sub {
	my ($t) = @_;
	$t->send('SELECT pg_sleep(60)');
	wait_until(sub {
		$node1->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE pid = $t->{pid} AND wait_event = 'PgSleep'") == 1
	}, timeout => 20);
	$node1->safe_psql('postgres', "SELECT pg_cancel_backend($t->{pid})");
	my $r = $t->wait(30);
	is($r && $r->{sqlstate}, '57014', 'cancel: the taker\'s statement is cancelled');
})->quit;

# terminated
round('terminate', sub {
	my ($t) = @_;
	$node1->safe_psql('postgres', "SELECT pg_terminate_backend($t->{pid})");
});

# cut from ZooKeeper past the session: its COMMIT cannot succeed
{
	my $taker = round('cut', sub { $px->cut('node1'); });
	my $r = $taker->query('COMMIT', 60);
	isnt($r->{sqlstate}, '00000', "cut: the cut taker's COMMIT fails ($r->{sqlstate})");
	$px->heal('node1');
	ok(zk_wait_connected($node1, 60), 'cut: node1 connects again once healed');
	$taker->quit;
}

# the backend killed (the postmaster restarts the instance)
round('backend-kill', sub {
	my ($t) = @_;
	kill 'KILL', $t->pid;
});
ok(zk_wait_connected($node1, 90), 'backend-kill: node1 is back and connected');

# the instance killed: SIGKILL of the postmaster and every process of it
# at once (the worker too, so nothing closes its ZooKeeper session: it
# expires), as when the host dies
round('instance-kill', sub {
	my $pm = $node1->{_pid};
	my @pids = ($pm, split ' ', `pgrep -P $pm`);
	note("SIGKILL to @pids");
	kill 'KILL', @pids;
	$node1->{_pid} = undef;
});

is($putter->query_ok(q{SELECT zk_queue_length('fq')}), 0,
	'every item was consumed by node2, once');
diag(join(', ', map { sprintf('%s %.2f s', $_, $times{$_}) }
	  qw(cancel terminate cut backend-kill instance-kill)));
$putter->quit;
$px->stop;
done_testing();
