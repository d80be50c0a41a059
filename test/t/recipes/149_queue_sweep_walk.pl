
# The sweep's walk skips the queues (issue 31, REVIEW.md class 13).  The
# first sweep of every worker walks the whole tree under zklock.root,
# listing every node that is not a lock node; <root>/zklock.queues holds
# a node per queue item (and per hold, per pending put), none a lock.
#  - the ZooKeeper requests (mntr zk_packets_received) of an instance's
#    restart, up to the end of its first sweep, do not grow with the
#    items of a queue: a queue of one item, then of 2,001 (before: each
#    item's entry was listed, over 2,000 requests more)
#  - the queue is intact after the restarts (nothing taken or deleted)
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;
use Time::HiRes qw(sleep);

my $N = 2000;

zk_start();
# no periodic sweep: the walk at the worker's start is the one measured
my $node1 = zk_node('node1', extra_conf => "zklock.sweep_interval = '1h'");

sub packets { return zk_mntr()->{zk_packets_received} // 0; }

# ZooKeeper's requests from a restart of node1 until they settle (no more
# than the session's pings for 3 s): the connection, the recipes' starts
# and the first sweep
sub restart_cost
{
	my $before = packets();
	$node1->restart;
	ok(zk_wait_connected($node1), 'node1 connected after its restart');
	my ($last, $stable) = (packets(), 0);
	my $deadline = time() + 90;
	while ($stable < 6 && time() < $deadline)
	{
		sleep 0.5;
		my $now = packets();
		$stable = $now - $last <= 2 ? $stable + 1 : 0;
		$last = $now;
	}
	return $last - $before;
}

is(psql1($node1, q{SELECT zk_queue_put_now('sw', 'one')} ) =~ /^entry-/ ? 1 : 0,
	1, 'a queue of one item');
my $small = restart_cost();

is(psql1($node1, qq{SELECT count(zk_queue_put_now('sw', 'x'))
	FROM generate_series(1, $N)}), $N, "$N items more");
my $big = restart_cost();
diag("requests of a restart: $small with 1 item, $big with " . ($N + 1));
cmp_ok($big - $small, '<', $N / 4,
	"the restart's requests do not grow with the queue's items");
is(psql1($node1, q{SELECT zk_queue_length('sw')}), $N + 1,
	'the items are all there');
is(psql1($node1, q{SELECT zk_queue_purge('sw')}), $N + 1, 'purged');

zk_done_check();
done_testing();
