
# Queue names and a queue's own nodes (issue 31), across two instances:
#  - a name with a component entries, taken or pending (x/entries, ...)
#    is refused (22023) by every queue function, and nothing of it reaches
#    ZooKeeper: queue x's entries/ holds only x's items, which Kazoo's
#    LockingQueue of x counts and takes as before
#  - nested queues x and x/y (x/y's node is a child of x's, beside
#    entries/taken/pending) stay apart: each counts, peeks and takes its
#    own items, on either instance and in Kazoo's LockingQueue of x; the
#    views show each under its own name; purging x leaves x/y's items
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
my $qroot = "$root/zklock.queues";

my $a1 = zk_session($node1, 'A1');
my $b1 = zk_session($node2, 'B1');

# the names of the nodes directly under $path
sub children
{
	my ($path) = @_;
	return sort map { m{^\Q$path\E/([^/]+)$} ? $1 : () }
	  zk_list_znodes($qroot);
}

# ---------------------------------------------------------------------------
# Nested queues: x and x/y.
my @x = map { $a1->query_ok("SELECT zk_queue_put_now('x', 'x-$_')") } 1 .. 2;
my @y = map { $b1->query_ok("SELECT zk_queue_put_now('x/y', 'y-$_', 5)") } 1 .. 3;
is_deeply([ children("$qroot/x") ], [qw(entries pending taken y)],
	"x/y's node is beside x's entries, taken and pending");
is_deeply([ children("$qroot/x/entries") ], [@x], "x's entries are x's items only");
is($b1->query_ok("SELECT zk_queue_length('x')"), 2, 'x counts its 2 items');
is($a1->query_ok("SELECT zk_queue_length('x/y')"), 3, 'x/y counts its 3 items');
is($a1->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_peek('x')}),
	'x-1', "a peek of x sees x's first item (x/y's, of priority 5, would come first)");
is( $a1->query_ok(q{SELECT string_agg(queue || ':' || waiting || ':' || held, ' ')
	FROM zk_queues WHERE queue IN ('x', 'x/y')}),
	'x:2:0 x/y:3:0', 'zk_queues shows each queue with its own count');
is( $a1->query_ok(q{SELECT string_agg(queue || ' ' || id, ',' ORDER BY queue, id)
	FROM zk_queue_items WHERE queue LIKE 'x%'}),
	join(',', (map { "x $_" } @x), (map { "x/y $_" } @y)),
	'zk_queue_items lists each item under its own queue');

# takes: node2 takes from x, node1 from x/y; each gets its own
$b1->query_ok('BEGIN');
is($b1->query_ok(q{SELECT id || ' ' || convert_from(item, 'UTF8') FROM zk_queue_try_take('x')}),
	"$x[0] x-1", "a take of x takes x's first item");
$a1->query_ok('BEGIN');
is($a1->query_ok(q{SELECT id || ' ' || convert_from(item, 'UTF8') FROM zk_queue_try_take('x/y')}),
	"$y[0] y-1", "a take of x/y takes x/y's first item");
is( $b1->query_ok(q{SELECT string_agg(queue || ':' || waiting || ':' || held, ' ')
	FROM zk_queues WHERE queue IN ('x', 'x/y')}),
	'x:1:1 x/y:2:1', 'zk_queues: one held in each');
$a1->query_ok('COMMIT');
$b1->query_ok('COMMIT');

# Kazoo's LockingQueue of x (Debian's python3-kazoo; missing is a failure)
{
	my ($in, $out, $err) = ('', '', '');
	my $kz = IPC::Run::start(
		[
			$ENV{ZKLOCK_TEST_PYTHON} || '/usr/bin/python3',
			"$FindBin::RealBin/../../interop/kazoo_queue.py",
			zk_hosts(), "$qroot/x"
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
	is($say->('len'), 'LEN 1', "Kazoo's LockingQueue of x counts x's item only");

	# refused names: nothing reaches ZooKeeper (else Kazoo counts more)
	for my $sql (
		q{SELECT zk_queue_put_now('x/entries', 'bad')},
		q{SELECT zk_queue_put('x/taken', 'bad'::bytea)},
		q{SELECT zk_queue_length('x/pending')},
		q{SELECT * FROM zk_queue_try_take('x/entries/z')},
		q{SELECT * FROM zk_queue_take('x/taken', '1 s')},
		q{SELECT * FROM zk_queue_peek('x/entries')},
		q{SELECT zk_queue_purge('x/entries')})
	{
		my $r = $a1->query($sql);
		is($r->{sqlstate}, '22023', "refused: $sql");
	}
	like($a1->query(q{SELECT zk_queue_put_now('x/entries', 'bad')})->{err},
		qr/invalid zklock queue name "x\/entries".*component "entries" is reserved/s,
		'the error names the queue and the reserved component');
	is_deeply([ children("$qroot/x/entries") ], [ $x[1] ],
		"x's entries still hold x's item only");
	is_deeply([ children("$qroot/x/taken") ], [], "and x's taken/ nothing");
	is($say->('len'), 'LEN 1', 'Kazoo still counts 1');
	is($say->('get 5'), 'GOT x-2', "Kazoo's get of x takes x's item");
	is($say->('consume'), 'CONSUMED True', '... and consumes it');
	is($say->('get 0.2'), 'NONE', "Kazoo's x is empty: x/y's items are not its");
	$in .= "quit\n";
	eval { $kz->finish; 1 } or diag("Kazoo's process: $@ $err");
}

# purge: x's items go, x/y's stay
$a1->query_ok(q{SELECT zk_queue_put_now('x', 'x-3')});
is($node1->safe_psql('postgres', q{SELECT zk_queue_purge('x')}), 1,
	'a purge of x deletes its 1 item');
is($b1->query_ok("SELECT zk_queue_length('x/y')"), 2, "x/y's 2 items stay");
is_deeply([ children("$qroot/x/y/entries") ], [ @y[ 1, 2 ] ],
	"x/y's entries are in ZooKeeper");
is( $a1->query_ok(q{SELECT string_agg(queue || ':' || waiting, ' ')
	FROM zk_queues WHERE queue LIKE 'x%'}),
	'x/y:2', 'zk_queues: only x/y has items');
is($node2->safe_psql('postgres', q{SELECT zk_queue_purge('x/y')}), 2,
	'a purge of x/y deletes its 2');

zk_done_check();
done_testing();
