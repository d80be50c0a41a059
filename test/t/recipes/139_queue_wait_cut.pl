
# Waiting takers (issue 31) across a partition (review of i31-wait): node1
# reaches ZooKeeper through test/zk_proxy.py; the link is cut (bytes
# swallowed, both sockets open) while node1's takers wait and one more
# joins (its group's listing goes into the void); node2 puts meanwhile
# (the shared watch's notification is swallowed too).  Healed within the
# session timeout: the watches are set again by the client and fire for
# the puts made meanwhile, the lost listing is asked again, and every
# taker gets one item; no watch and no hold is left after.  Then the
# same with one taker and no listing in flight (the watch alone).  Then
# cut past the session: the takers fail with 08006; healed, a new
# session's takers wait behind new watches, none left after.
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
	session_timeout => '6s');
my $node2 = zk_node('node2');

my $p2 = zk_session($node2, 'P2');
sub watches { return zk_mntr()->{zk_watch_count} // -1; }
my $watches0 = watches();
sub since { return $node1->safe_psql('postgres', 'SELECT state_since FROM zk_lock_status'); }

sub waiting
{
	my (@s) = @_;
	my $pids = join(',', map { $_->pid } @s);
	return wait_until(
		sub {
			$node1->safe_psql('postgres',
				"SELECT count(*) FROM pg_stat_activity WHERE pid IN ($pids)"
				  . q{ AND (wait_event LIKE 'Zklock%' OR wait_event_type = 'Extension')}
			) == scalar(@s);
		},
		timeout => 20);
}

$p2->query_ok(q{SELECT zk_queue_put_now('cq', 'first')});
$p2->query_ok(q{SELECT zk_queue_try_take('cq')});	# the queue exists, empty
my @t = map { zk_session($node1, "T$_") } 1 .. 3;
$_->send(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_take('cq', '120 s')})
  foreach @t[ 0, 1 ];
ok(waiting(@t[ 0, 1 ]), 'two takers wait on node1');
ok(wait_until(sub { watches() == $watches0 + 2 }, timeout => 20),
	'the shared watches are set');

my $since = since();
$px->cut('node1');
# a third taker joins during the cut: the group's listing is lost
$t[2]->send(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_take('cq', '120 s')});
ok(waiting($t[2]), 'a third taker waits (its listing swallowed)');
$p2->query_ok(q{SELECT zk_queue_put_now('cq', 'during1')});
$p2->query_ok(q{SELECT zk_queue_put_now('cq', 'during2')});
sleep(1);
$px->heal('node1');
ok(zk_wait_connected($node1, 60), 'node1 connected again');
isnt(since(), $since, 'node1 did reconnect (the cut connection closed at the heal)');

my @done;
ok(wait_until(sub { @done = grep { $_->done } @t; @done == 2 }, timeout => 30),
	'the two puts made during the cut reach two takers')
  or diag('done: ' . scalar(@done));
$p2->query_ok(q{SELECT zk_queue_put_now('cq', 'after')});
my %got;
foreach my $s (@t)
{
	my $r = $s->wait(30);
	$got{ $r ? $r->{out} : 'none' }++;
}
is(join(',', sort keys %got), 'after,during1,during2', 'each taker got one item');
is($p2->query_ok(q{SELECT zk_queue_length('cq')}), 0, 'the queue is empty');
ok(wait_until(sub { watches() == $watches0 }, timeout => 20),
	'no taker left: no watch left')
  or diag('watches: ' . watches() . ", before the takers: $watches0");
ok( wait_until(
		sub { !grep { m{/zklock\.queues/cq/taken/} } zk_list_znodes(zk_root() . "/zklock.queues") },
		timeout => 20),
	'no hold left');

# Again with no listing in flight: only the watch set again by the client
# on reconnection (SetWatches, which fires for what changed meanwhile)
# can wake this taker.
my $w1 = zk_session($node1, 'W1');
$w1->send(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_take('cq', '120 s')});
ok(waiting($w1), 'a taker waits');
ok(wait_until(sub { watches() == $watches0 + 2 }, timeout => 20),
	'the shared watches are set');
my $since = since();
$px->cut('node1');
$p2->query_ok(q{SELECT zk_queue_put_now('cq', 'in the cut')});
sleep(1);
$px->heal('node1');
ok(zk_wait_connected($node1, 60), 'node1 connected again');
isnt(since(), $since, 'node1 did reconnect (the cut connection closed at the heal)');
my $r = $w1->wait(30);
is($r && $r->{out}, 'in the cut', 'the put made during the cut reaches the taker');
ok(wait_until(sub { watches() == $watches0 }, timeout => 20),
	'no taker left: no watch left')
  or diag('watches: ' . watches() . ", before the takers: $watches0");

# Cut past the session: the waiting takers fail (08006, the session lost,
# which frees their group); healed, a new session: a new taker waits
# behind new watches and gets a put; the old session's are gone.
my @x = map { zk_session($node1, "X$_") } 1 .. 2;
$_->send(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_take('cq', '120 s')})
  foreach @x;
ok(waiting(@x), 'two takers wait');
ok(wait_until(sub { watches() == $watches0 + 2 }, timeout => 20),
	'the shared watches are set');
$px->cut('node1');
foreach my $s (@x)
{
	my $r = $s->wait(60);
	is($r && $r->{sqlstate}, '08006', $s->name . ': the session lost, the take fails');
}
$p2->query_ok(q{SELECT zk_queue_put_now('cq', 'lost session')});
$px->heal('node1');
ok(zk_wait_connected($node1, 60), 'node1 connected again (a new session)');
my $n1 = zk_session($node1, 'N1');
$n1->send(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_take('cq', '60 s')});
$r = $n1->wait(30);
is($r && $r->{out}, 'lost session', 'a new taker gets the put made meanwhile');
ok(wait_until(sub { watches() == $watches0 }, timeout => 30),
	'no taker left: no watch left (the old session\'s included)')
  or diag('watches: ' . watches() . ", before the takers: $watches0");
my $n2 = zk_session($node1, 'N2');
$n2->send(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_take('cq', '60 s')});
ok(waiting($n2), 'a taker waits in the new session');
ok(wait_until(sub { watches() == $watches0 + 2 }, timeout => 20),
	'behind the two shared watches');
$p2->query_ok(q{SELECT zk_queue_put_now('cq', 'new session')});
$r = $n2->wait(30);
is($r && $r->{out}, 'new session', 'a put reaches it');
ok(wait_until(sub { watches() == $watches0 }, timeout => 20), 'no watch left');

$px->stop;
done_testing();
