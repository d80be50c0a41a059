
# Waiting takers (issue 31): takers of one instance wait behind the queue's
# shared child watches (worker/recipes/queue_wait.c).
#  - no lost wake-up: with the failpoint queue-before-hold sleeping, a put
#    lands while one taker's hold is in flight and the notification waits;
#    the second taker waiting on the same instance must still get the
#    second item (before the shared watch it slept until its timeout)
#  - no herd: 8 takers wait on one instance; one put costs a few ZooKeeper
#    requests (mntr's zk_packets_received, printed), not some per taker;
#    then 7 more puts reach the 7 others, each once
#  - a taker cancelled while its hold's create is in flight (the failpoint
#    again): the hold is deleted, never left, and the item is taken by
#    the other instance
#  - when the last taker leaves, the shared watches go too (wchp)
#  - a take on a queue never put to is woken by its first put (a creation
#    watch: a listing that finds no entries node sets no child watch)
#  - ZooKeeper restarted while two takers wait (the session kept): the
#    watches are set again, and a put after it reaches a taker
#  - (review) arrival order across the group; a hold of node2 respected,
#    its rollback waking node1's waiter (the taken watch); a taker
#    terminated during its hold's create leaves no hold; a creation
#    watch's exists not sent (failpoint queue-wait-before-exists=fail):
#    the group lists again once connected; Kazoo's hold respected, and
#    its release wakes the waiter
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;
use Time::HiRes qw(time sleep);

zk_start();
# node1's session outlives the failpoint's sleeps (before the shared watch,
# one per taker)
my $node1 = zk_node('node1', session_timeout => '20s');
my $node2 = zk_node('node2');

my $p2 = zk_session($node2, 'P2');
my $watches0 = zk_mntr()->{zk_watch_count};

# the sessions of @s all wait in a take (their wait event is zklock's)
sub all_waiting
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

# ---------------------------------------------------------------------------
# The lost wake-up.
$p2->query_ok(q{SELECT zk_queue_put_now('lw', 'first')});
$p2->query_ok(q{SELECT zk_queue_try_take('lw')});	# the queue exists, empty
my @t = map { zk_session($node1, "T$_") } 1 .. 2;
$_->send(q{SELECT coalesce(convert_from(item, 'UTF8'), 'none') FROM zk_queue_take('lw', '30 s')})
  foreach @t;
ok(all_waiting(@t), 'two takers wait on one instance');
my $off = -s $node1->logfile;
ok(zk_set_failpoints($node1, 'queue-before-hold=sleep:1500'), 'failpoint set');
$p2->query_ok(q{SELECT zk_queue_put_now('lw', 'x')});
ok(zk_wait_log($node1, qr/failpoint "queue-before-hold" reached/, $off, 20),
	'a taker is about to hold x');
$p2->query_ok(q{SELECT zk_queue_put_now('lw', 'y')});
my @got;
foreach my $s (@t)
{
	my $r = $s->wait(60);
	push @got, $r ? $r->{out} : 'timed out';
	diag(sprintf('%s: %s after %.1f s', $s->name, $got[-1], $r ? $r->{elapsed} : -1));
}
is(join(',', sort @got), 'x,y', 'both takers got an item: the put during the hold was not lost');
ok(zk_set_failpoints($node1, ''), 'failpoint cleared');
is($p2->query_ok(q{SELECT zk_queue_length('lw')}), 0, 'the queue is empty');

# ---------------------------------------------------------------------------
# The herd: 8 takers on node1, each in a transaction (nothing consumed
# while counting).
$p2->query_ok(q{SELECT zk_queue_purge('lw')});	# what a lost wake-up left
my @h = map { zk_session($node1, "H$_") } 1 .. 8;
foreach my $s (@h)
{
	$s->query_ok('BEGIN');
	$s->send(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_take('lw', '60 s')});
	sleep(0.05);
}
ok(all_waiting(@h), '8 takers wait on one instance');

# ZooKeeper's received packets, once they stop moving (pings aside)
sub packets_settled
{
	my $last = zk_mntr()->{zk_packets_received};
	for (1 .. 20)
	{
		sleep(0.5);
		my $n = zk_mntr()->{zk_packets_received};
		return $n if $n - $last <= 1;
		$last = $n;
	}
	return $last;
}
my $before = packets_settled();
$p2->query_ok(q{SELECT zk_queue_put_now('lw', 'h1')});
my $winner;
ok( wait_until(
		sub { ($winner) = grep { $_->done } @h; defined $winner },
		timeout => 30),
	'one put: one taker got it');
my $after = packets_settled();
my $cost = $after - $before;
diag("ZooKeeper requests from one put to its grant, 8 takers waiting on one instance: $cost");
cmp_ok($cost, '<=', 16, 'one put costs one listing, not one per taker');
my $r = $winner->wait(5);
is($r && $r->{out}, 'h1', 'the winner got the item');
my @rest = grep { $_ != $winner } @h;
is(scalar(grep { $_->done } @rest), 0, 'the 7 others still wait');

# 7 more puts: each of the 7 gets one
$p2->query_ok(qq{SELECT zk_queue_put_now('lw', 'h$_')}) foreach 2 .. 8;
my %items;
foreach my $s (@rest)
{
	my $r = $s->wait(30);
	$items{ $r ? $r->{out} : 'none' }++;
}
is(join(',', sort keys %items), 'h2,h3,h4,h5,h6,h7,h8', 'the 7 others got one item each');
$_->query_ok('COMMIT') foreach @h;
is($p2->query_ok(q{SELECT zk_queue_length('lw')}), 0, 'all consumed');

# ---------------------------------------------------------------------------
# Cancelled while its hold's create is in flight.
my $root = zk_root();
my $c1 = zk_session($node1, 'C1');
$c1->send(q{SELECT id FROM zk_queue_take('lw', '30 s')});
ok(all_waiting($c1), 'a taker waits');
$off = -s $node1->logfile;
ok(zk_set_failpoints($node1, 'queue-before-hold=sleep:1500'), 'failpoint set');
$p2->query_ok(q{SELECT zk_queue_put_now('lw', 'c')});
ok(zk_wait_log($node1, qr/failpoint "queue-before-hold" reached/, $off, 20),
	'the taker is about to hold c');
$node1->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $c1->pid . ')');
$r = $c1->wait(30);
is($r && $r->{sqlstate}, '57014', 'the taker is cancelled');
ok(zk_set_failpoints($node1, ''), 'failpoint cleared');
ok( wait_until(
		sub { !grep { m{/zklock\.queues/lw/taken/} } zk_list_znodes("$root/zklock.queues") },
		timeout => 20),
	'its hold was deleted');
is($p2->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('lw')}),
	'c', 'the item is taken on the other instance');
is($p2->query_ok(q{SELECT zk_queue_length('lw')}), 0, 'the queue is empty');

# no taker waits any more: the server's watches are back to what they
# were before any (wchp lists data watches only: mntr counts child watches)
sub watches { return zk_mntr()->{zk_watch_count} // -1; }
ok(wait_until(sub { watches() == $watches0 }, timeout => 20),
	'the last taker gone, no watch is left on the queue')
  or diag('watches: ' . watches() . ", before the takers: $watches0");

# ---------------------------------------------------------------------------
# A queue never put to.
my $f1 = zk_session($node1, 'F1');
$f1->send(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_take('fresh', '30 s')});
ok(all_waiting($f1), 'a taker waits on a queue that does not exist yet');
$p2->query_ok(q{SELECT zk_queue_put_now('fresh', 'first ever')});
$r = $f1->wait(20);
is($r && $r->{out}, 'first ever', 'its first put wakes the taker');

# ---------------------------------------------------------------------------
# ZooKeeper restarted while two takers wait.
my @z = map { zk_session($node1, "Z$_") } 1 .. 2;
$_->send(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_take('lw', '60 s')})
  foreach @z;
ok(all_waiting(@z), 'two takers wait');
ok(wait_until(sub { watches() == $watches0 + 2 }, timeout => 20),
	'two watches for them: entries and taken')
  or diag('watches: ' . watches() . ", before the takers: $watches0");
my ($rc) = zk_server('restart-one', 1);
is($rc, 0, 'ZooKeeper restarted');
ok(zk_wait_connected($_, 90), $_->name . ' reconnected') foreach ($node1, $node2);
ok(wait_until(sub { watches() == $watches0 + 2 }, timeout => 20),
	'the shared watches are set again, and only they')
  or diag('watches: ' . watches() . ", before the takers: $watches0");
$p2->query_ok(q{SELECT zk_queue_put_now('lw', 'after restart')});
ok(wait_until(sub { grep { $_->done } @z }, timeout => 20),
	'a put after the restart reaches a waiting taker');
$p2->query_ok(q{SELECT zk_queue_put_now('lw', 'second')});
my %z = map { my $r = $_->wait(20); ($r ? $r->{out} : 'none') => 1 } @z;
is(join(',', sort keys %z), 'after restart,second', 'both takers got one');

# ---------------------------------------------------------------------------
# Review (rev-q31w): arrival order across the group; a hold of another
# instance respected, and its release (the taken watch) wakes the waiter;
# a taker terminated while its hold's create is in flight leaves no hold.
$p2->query_ok(q{SELECT zk_queue_purge('ord')});
my @o;
foreach my $i (1 .. 3)
{
	my $s = zk_session($node1, "O$i");
	$s->query_ok('BEGIN');
	$s->send(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_take('ord', '60 s')});
	ok(all_waiting($s), "O$i waits");
	push @o, $s;
}
foreach my $i (1 .. 3)
{
	$p2->query_ok(qq{SELECT zk_queue_put_now('ord', 'o$i')});
	my $r = $o[ $i - 1 ]->wait(30);
	is($r && $r->{out}, "o$i", "the put number $i goes to the taker that came number $i");
}
$_->query_ok('COMMIT') foreach @o;

# node2 holds the only item (in a transaction): node1's taker must wait,
# and get it when node2's take rolls back (its hold deleted: taken changes)
$p2->query_ok(q{SELECT zk_queue_put_now('kz', 'held')});
$p2->query_ok('BEGIN');
is($p2->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_take('kz', '5 s')}),
	'held', 'node2 holds the item');
my $k1 = zk_session($node1, 'K1');
$k1->send(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_take('kz', '60 s')});
ok(all_waiting($k1), 'node1 waits behind the hold of node2');
sleep(1);
ok(!$k1->done, 'the held item is not taken by node1');
$p2->query_ok('ROLLBACK');
$r = $k1->wait(30);
is($r && $r->{out}, 'held', 'the hold released, the waiting taker gets the item');
is($p2->query_ok(q{SELECT zk_queue_length('kz')}), 0, 'consumed');

# terminated while its hold's create is in flight
my $d1 = zk_session($node1, 'D1');
$d1->send(q{SELECT id FROM zk_queue_take('term', '30 s')});
ok(all_waiting($d1), 'a taker waits');
$off = -s $node1->logfile;
ok(zk_set_failpoints($node1, 'queue-before-hold=sleep:1500'), 'failpoint set');
$p2->query_ok(q{SELECT zk_queue_put_now('term', 'd')});
ok(zk_wait_log($node1, qr/failpoint "queue-before-hold" reached/, $off, 20),
	'the taker is about to hold d');
$node1->safe_psql('postgres', 'SELECT pg_terminate_backend(' . $d1->pid . ')');
$d1->wait(30);
ok(zk_set_failpoints($node1, ''), 'failpoint cleared');
ok( wait_until(
		sub { !grep { m{/zklock\.queues/term/taken/} } zk_list_znodes("$root/zklock.queues") },
		timeout => 20),
	'its hold was deleted');
is($p2->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('term')}),
	'd', 'the item is taken on the other instance');
ok(wait_until(sub { watches() == $watches0 }, timeout => 20),
	'no taker left: no watch left')
  or diag('watches: ' . watches() . ", before the takers: $watches0");

# the creation watch's exists could not be sent (the connection lost just
# after the listing): the group must list again once connected, not wait
# with no watch armed until the timeout
my $e1 = zk_session($node1, 'E1');
$off = -s $node1->logfile;
ok(zk_set_failpoints($node1, 'queue-wait-before-exists=fail'), 'failpoint set');
$e1->send(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_take('nowatch', '60 s')});
ok(zk_wait_log($node1, qr/failpoint "queue-wait-before-exists" reached/, $off, 20),
	'the creation watch was not set');
ok(zk_set_failpoints($node1, ''), 'failpoint cleared');
ok(all_waiting($e1), 'the taker waits');
ok(wait_until(sub { watches() == $watches0 + 2 }, timeout => 20),
	'once connected, the creation watches are set (entries and taken)')
  or diag('watches: ' . watches() . ", before the takers: $watches0");
$p2->query_ok(q{SELECT zk_queue_put_now('nowatch', 'noticed')});
$r = $e1->wait(30);
is($r && $r->{out}, 'noticed', 'the put reaches the taker');
ok(wait_until(sub { watches() == $watches0 }, timeout => 20),
	'no taker left: no watch left')
  or diag('watches: ' . watches() . ", before the takers: $watches0");

# Kazoo's LockingQueue holds an item: node1's waiter skips it, and gets it
# when Kazoo releases it (its hold deleted: the shared taken watch)
{
	require IPC::Run;
	my ($in, $out, $err) = ('', '', '');
	my $kz = IPC::Run::start(
		[
			$ENV{ZKLOCK_TEST_PYTHON} || '/usr/bin/python3',
			"$FindBin::RealBin/../../interop/kazoo_queue.py",
			zk_hosts(), "$root/zklock.queues/kzw"
		],
		'<', \$in, '>', \$out, '2>', \$err);
	my $say = sub {
		my ($cmd) = @_;
		$in .= "$cmd\n" if defined $cmd;
		my $deadline = time() + 30;
		while ($out !~ /\n/ && time() < $deadline)
		{
			$kz->pump_nb;
			sleep(0.02);
		}
		return $out =~ s/\A([^\n]*)\n// ? $1 : "(nothing; stderr: $err)";
	};
	is($say->(undef), 'READY', 'Kazoo connected');
	$p2->query_ok(q{SELECT zk_queue_put_now('kzw', 'kazoo held')});
	is($say->('get 10'), 'GOT kazoo held', 'Kazoo holds the only item');
	my $kw = zk_session($node1, 'KW');
	$kw->send(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_take('kzw', '60 s')});
	ok(all_waiting($kw), 'node1 waits behind the hold of Kazoo');
	ok(!$kw->done, 'the item Kazoo holds is not taken');
	is($say->('release'), 'RELEASED True', 'Kazoo releases it');
	$r = $kw->wait(30);
	is($r && $r->{out}, 'kazoo held', 'the waiting taker gets it');
	is($say->('len'), 'LEN 0', 'consumed, as Kazoo counts');
	$in .= "quit\n";
	eval { $kz->finish; 1 } or diag("Kazoo's process: $@ $err");
}

done_testing();
