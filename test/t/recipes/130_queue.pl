
# The distributed queue (issue 31), across two instances:
#  - put on one instance, take on the other; COMMIT consumes the item (its
#    entry and hold are gone from ZooKeeper when COMMIT returns)
#  - a ROLLBACK, a ROLLBACK TO SAVEPOINT and a terminated backend give the
#    item back, in its place, with the same id; a held item is skipped by
#    the other instance's takers
#  - priority, then arrival order
#  - try_take on an empty queue answers NULLs at once; zk_queue_take waits
#    for a put on the other instance, and ends with NULLs at its timeout
#  - bad input (NULL item, priority out of range, a queue name that breaks
#    the rules, an item too large) is each a clear error, with nothing left
#    in ZooKeeper
#  - the nodes are Kazoo's LockingQueue layout under <root>/zklock.queues:
#    Kazoo's LockingQueue (test/interop/kazoo_queue.py) and SQL take each
#    other's items, in order, and each skips the item the other holds
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;
use IPC::Run;
use Time::HiRes qw(time);

zk_start();
my $node1 = zk_node('node1');
my $node2 = zk_node('node2');

my $root = zk_root();
my $q = "$root/zklock.queues/jobs";

sub entries
{
	my ($dir) = @_;
	return sort map { m{/([^/]+)$} ? $1 : () }
	  grep { m{^\Q$q/$dir\E/} } zk_list_znodes("$root/zklock.queues");
}

my $a1 = zk_session($node1, 'A1');
my $a2 = zk_session($node1, 'A2');
my $b1 = zk_session($node2, 'B1');

# ---------------------------------------------------------------------------
# Put on node1, take on node2, COMMIT consumes.
my @ids = map { $a1->query_ok("SELECT zk_queue_put_now('jobs', '$_'::bytea)") }
  qw(one two three);
like($ids[0], qr/^entry-100-\d{10}$/, "an item's id is its entry's name");
is_deeply([ entries('entries') ], [@ids],
	"three entries under <root>/zklock.queues/jobs/entries, Kazoo's names");
is($b1->query_ok("SELECT zk_queue_length('jobs')"), 3,
	'the other instance counts three items');

$b1->query_ok('BEGIN');
is($b1->query_ok(q{SELECT id || ' ' || convert_from(item, 'UTF8') || ' ' || priority
	FROM zk_queue_try_take('jobs')}),
	"$ids[0] one 100", 'node2 takes the first item, with its id and priority');
is_deeply([ entries('taken') ], [ $ids[0] ], 'its hold is taken/<entry>');

$a2->query_ok('BEGIN');
is($a2->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('jobs')}),
	'two', 'node1 skips the held item and takes the second');

$b1->query_ok('COMMIT');
is_deeply([ entries('entries') ], [ @ids[ 1, 2 ] ],
	'COMMIT consumed the first item: its entry is gone when COMMIT returns');
is_deeply([ entries('taken') ], [ $ids[1] ],
	'and its hold too; the second is still held');
is($a1->query_ok("SELECT zk_queue_length('jobs')"), 2,
	'the length counts waiting and held items');

# ---------------------------------------------------------------------------
# ROLLBACK gives the item back, in its place, with its id.
$a2->query_ok('ROLLBACK');
is_deeply([ entries('taken') ], [], 'ROLLBACK deleted the hold');
$b1->query_ok('BEGIN');
is($b1->query_ok(q{SELECT id FROM zk_queue_try_take('jobs')}),
	$ids[1], 'the item rolled back is taken again, first, with the same id');

# ROLLBACK TO SAVEPOINT gives back what was taken inside it only
$b1->query_ok('SAVEPOINT s');
is($b1->query_ok(q{SELECT id FROM zk_queue_try_take('jobs')}),
	$ids[2], 'inside a savepoint: the third item');
$b1->query_ok('ROLLBACK TO SAVEPOINT s');
is_deeply([ entries('taken') ], [ $ids[1] ],
	'ROLLBACK TO SAVEPOINT gave back what the savepoint took, not the rest');
is($a1->query_ok(q{SELECT id FROM zk_queue_try_take('jobs')}),
	$ids[2], 'another instance takes it (and, outside a transaction, consumes it)');
is($a1->query_ok(q{SELECT coalesce(id, 'none') FROM zk_queue_try_take('jobs')}),
	'none', 'try_take: nothing free while the last item is held');
$b1->query_ok('ROLLBACK');

# ---------------------------------------------------------------------------
# A terminated backend's item comes back.
$b1->query_ok('BEGIN');
is($b1->query_ok(q{SELECT id FROM zk_queue_try_take('jobs')}),
	$ids[1], 'taken again by a backend about to be terminated');
$node2->safe_psql('postgres',
	'SELECT pg_terminate_backend(' . $b1->pid . ')');
ok( wait_until(sub { !entries('taken') }, timeout => 10),
	'the terminated backend\'s hold is gone');
$b1 = zk_session($node2, 'B1b');
$b1->query_ok('BEGIN');
is($b1->query_ok(q{SELECT id FROM zk_queue_try_take('jobs')}),
	$ids[1], 'and its item is taken again, with the same id');
$b1->query_ok('COMMIT');
is($a1->query_ok("SELECT zk_queue_length('jobs')"), 0, 'the queue is empty');

# ---------------------------------------------------------------------------
# Empty queue, waits, timeouts.
my $t0 = time();
is($a1->query_ok(q{SELECT coalesce(id, 'none') FROM zk_queue_try_take('jobs')}),
	'none', 'try_take on an empty queue: NULLs');
cmp_ok(time() - $t0, '<', 5, 'at once');
$t0 = time();
is($a1->query_ok(q{SELECT coalesce(id, 'none') FROM zk_queue_take('jobs', '500 ms')}),
	'none', 'take with a timeout on an empty queue: NULLs');
cmp_ok(time() - $t0, '>=', 0.45, 'after its timeout');
$a1->query_ok('BEGIN');
$a1->send(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_take('jobs', '60 s')});
ok( wait_until(
		sub {
			$node1->safe_psql('postgres',
				'SELECT count(*) FROM pg_stat_activity WHERE pid = ' . $a1->pid
				  . q{ AND (wait_event LIKE 'Zklock%' OR wait_event_type = 'Extension')}
			) == 1;
		},
		timeout => 10),
	'a taker waits on the empty queue');
my $late = $b1->query_ok(q{SELECT zk_queue_put_now('jobs', 'late')});
my $r = $a1->wait(30);
is($r && $r->{out}, 'late', 'a put on the other instance wakes the waiting taker');
$a1->query_ok('COMMIT');

# priority, then arrival
$a1->query_ok(q{SELECT zk_queue_put_now('jobs', 'p500a', 500)});
$a1->query_ok(q{SELECT zk_queue_put_now('jobs', 'p5', 5)});
$a1->query_ok(q{SELECT zk_queue_put_now('jobs', 'p500b', 500)});
is( join(',',
		map { $b1->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('jobs')}) }
		  1 .. 3),
	'p5,p500a,p500b', 'priority first, then arrival');

# ---------------------------------------------------------------------------
# Bad input: each its SQLSTATE, nothing left in ZooKeeper.
my @before = zk_list_znodes("$root/zklock.queues");
foreach my $case (
	[ q{SELECT zk_queue_put_now('jobs', NULL::bytea)}, '22004', 'a NULL item' ],
	[ q{SELECT zk_queue_put_now(NULL, 'x'::bytea)}, '22004', 'a NULL queue' ],
	[ q{SELECT zk_queue_put_now('jobs', 'x'::bytea, 1000)}, '22023', 'priority 1000' ],
	[ q{SELECT zk_queue_put_now('jobs', 'x'::bytea, -1)}, '22023', 'priority -1' ],
	[ q{SELECT zk_queue_put_now('/jobs', 'x'::bytea)}, '22023', 'a queue name with a leading slash' ],
	[ q{SELECT zk_queue_put_now('zklock.x', 'x'::bytea)}, '22023', 'a reserved queue name' ],
	[ q{SELECT zk_queue_try_take('a//b')}, '22023', 'an empty segment, to take' ],
	[ q{SELECT zk_queue_length('')}, '22023', 'an empty queue name' ],
	[ q{SELECT zk_queue_put_now('jobs', repeat('x', 1000001)::bytea)}, '54000', 'an item of 1,000,001 bytes' ],
	[ q{SELECT zk_queue_take('jobs', '-1 s')}, '22023', 'a negative timeout' ])
{
	my ($sql, $state, $what) = @$case;
	my $res = $a1->query($sql);
	is($res->{sqlstate}, $state, "$what: $state");
}
is_deeply([ zk_list_znodes("$root/zklock.queues") ], \@before,
	'the refused requests left nothing in ZooKeeper');
is($a1->query_ok(q{SELECT length(zk_queue_put_now('jobs', repeat('x', 1000000)::bytea))}),
	20, 'an item of 1,000,000 bytes is put');
is($b1->query_ok(q{SELECT length(item) FROM zk_queue_try_take('jobs')}),
	1000000, 'and taken whole');

# a queue and a lock of the same name do not collide
$a1->query_ok('BEGIN');
$a1->query_ok(q{SELECT zk_lock_acquire('jobs')});
is($b1->query_ok(q{SELECT zk_queue_length('jobs')}), 0,
	'a lock on "jobs" is no item of the queue "jobs"');
$a1->query_ok('COMMIT');

# ---------------------------------------------------------------------------
# The commit fence: node2's worker stopped past its session timeout, its
# hold goes with the session; node1's waiting taker gets the item, with
# the same id, and node2's COMMIT fails (55P03) instead of consuming.
{
	my $fid = $a1->query_ok(q{SELECT zk_queue_put_now('fq', 'fenced')});
	my $b2 = zk_session($node2, 'B2');
	$b2->query_ok('BEGIN');
	is($b2->query_ok(q{SELECT id FROM zk_queue_try_take('fq')}), $fid,
		'node2 holds the item');
	$a2->query_ok('BEGIN');
	$a2->send(q{SELECT id FROM zk_queue_take('fq', '60 s')});
	my $worker = $node2->safe_psql('postgres',
		'SELECT worker_pid FROM zk_lock_status');
	kill 'STOP', $worker;
	my $t_stop = time();
	my $got = $a2->wait(60);
	my $redelivered = time() - $t_stop;
	is($got && $got->{out}, $fid,
		"node1's waiting taker gets the item once node2's session is gone, same id");
	diag sprintf('redelivered %.1f s after the worker stopped (session timeout 4 s)',
		$redelivered);
	my $r = $b2->query('COMMIT', 60);
	kill 'CONT', $worker;
	is($r->{sqlstate}, '55P03', "node2's COMMIT fails: the hold is not proven held");
	like($r->{err}, qr/no longer held; the transaction cannot commit/,
		'... saying so');
	$a2->query_ok('COMMIT');
	is($a1->query_ok(q{SELECT zk_queue_length('fq')}), 0,
		'node1 consumed it; node2 did not');
	ok(zk_wait_connected($node2, 30), "node2's worker has a new session");
}

# ---------------------------------------------------------------------------
# Kazoo's LockingQueue on the same queue, both ways, holds respected both
# ways (Debian's python3-kazoo; a missing Kazoo is a failure, not a skip).
{
	my ($in, $out, $err) = ('', '', '');
	my $kz = IPC::Run::start(
		[
			$ENV{ZKLOCK_TEST_PYTHON} || '/usr/bin/python3',
			"$FindBin::RealBin/../../interop/kazoo_queue.py",
			zk_hosts(), "$root/zklock.queues/kz"
		],
		'<', \$in, '>', \$out, '2>', \$err);
	my $say = sub {
		my ($cmd) = @_;
		$in .= "$cmd\n" if defined $cmd;
		my $deadline = time() + 30;
		while ($out !~ /\n/ && time() < $deadline)
		{
			$kz->pump_nb;
			Time::HiRes::sleep(0.02);
		}
		return $out =~ s/\A([^\n]*)\n// ? $1 : "(nothing; stderr: $err)";
	};
	is($say->(undef), 'READY', 'Kazoo connected');

	$a1->query_ok(q{SELECT zk_queue_put_now('kz', 'from-sql-1')});
	$a1->query_ok(q{SELECT zk_queue_put_now('kz', 'from-sql-2')});
	is($say->('get 10'), 'GOT from-sql-1',
		"Kazoo's get takes SQL's first item");
	$b1->query_ok('BEGIN');
	is($b1->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('kz')}),
		'from-sql-2', "SQL skips the item Kazoo holds");
	is($say->('consume'), 'CONSUMED True', "Kazoo consumes its item");
	is($say->('get 1'), 'NONE', "Kazoo skips the item SQL holds");
	$b1->query_ok('COMMIT');
	is($say->('len'), 'LEN 0', "SQL's COMMIT consumed its item, as Kazoo counts");

	is($say->('put 100 from-kazoo'), 'PUT', 'Kazoo puts an item');
	is($say->('put 7 kazoo-urgent'), 'PUT', 'and one of priority 7');
	like(
		$a1->query_ok(q{SELECT id || ' ' || priority || ' ' || convert_from(item, 'UTF8') FROM zk_queue_try_take('kz')}),
		qr/^entry-007-\d{10} 7 kazoo-urgent$/,
		"SQL takes Kazoo's items in Kazoo's order, with their priority");
	is($a1->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('kz')}),
		'from-kazoo', 'then the next');
	is($say->('len'), 'LEN 0', 'both consumed, as Kazoo counts');
	$in .= "quit\n";
	eval { $kz->finish; 1 } or diag("Kazoo's process: $@ $err");
}

zk_done_check();
done_testing();
