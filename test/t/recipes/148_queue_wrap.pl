
# Queue ids past 2^31 (issue 31, REVIEW.md class 11).  ZooKeeper names a
# sequential node with "%010d" of its parent's cversion, a signed int that
# grows with every child created under `entries` (a delete does not count:
# PrepRequestProcessor); past 2^31 puts the names carry a negative number
# (entry-100--2147483648).  Getting a real cversion there takes 2^31
# creates, so the entries are made by hand with those names (as ZooKeeper
# would name them), in a queue made by a put:
#  - ZooKeeper counts creates only: put, consume, put gives consecutive ids
#  - zk_queue_length counts the wrapped entries (before: they were not
#    entries, length 1 instead of 3)
#  - peek and try_take give them in arrival order across the wrap:
#    2147483647, then -2147483648, then -2147483647 (serial-number order;
#    before: nothing, the names rejected)
#  - a waiting zk_queue_take is handed an entry named -000000001 (before:
#    it waited to its timeout)
#  - zk_queue_purge deletes them (before: 0)
#  - zk_queue_items lists them
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;

zk_start();
my $node1 = zk_node('node1');
my $root = zk_root();
my $q = "$root/zklock.queues/wrap";

sub make_entry
{
	my ($name) = @_;
	my ($rc, undef, $err) =
	  ZkLockTest::zkutil('create-acl', "$q/entries/$name", 'rwcda', 'x:y');
	is($rc, 0, "entry $name made by hand") or diag($err);
}

my $s = zk_session($node1, 'S');
my $w = zk_session($node1, 'W');

# creates only: the consume's delete does not move the cversion
my $first = $s->query_ok(q{SELECT zk_queue_put_now('wrap', 'a')});
$s->query_ok('BEGIN');
$s->query_ok(q{SELECT id FROM zk_queue_try_take('wrap')});
$s->query_ok('COMMIT');
my $second = $s->query_ok(q{SELECT zk_queue_put_now('wrap', 'b')});
my ($n1) = $first =~ /-(\d+)$/;
my ($n2) = $second =~ /-(\d+)$/;
is($n2 + 0, $n1 + 1, "ZooKeeper counts creates only: $first, then $second");
$s->query_ok('BEGIN');
$s->query_ok(q{SELECT id FROM zk_queue_try_take('wrap')});
$s->query_ok('COMMIT');

make_entry($_) for qw(entry-100--2147483648 entry-100-2147483647
  entry-100--2147483647);
is($s->query_ok(q{SELECT zk_queue_length('wrap')}), 3,
	'zk_queue_length counts the entries past 2^31');
is($s->query_ok(q{SELECT id FROM zk_queue_peek('wrap')}),
	'entry-100-2147483647', 'peek: the last before the wrap comes first');
is($s->query_ok(q{SELECT string_agg(id, ' ' ORDER BY id) FROM zk_queue_items
	WHERE queue = 'wrap'}),
	'entry-100--2147483647 entry-100--2147483648 entry-100-2147483647',
	'zk_queue_items lists them');

$s->query_ok('BEGIN');
my @got = map { $s->query_ok(q{SELECT id FROM zk_queue_try_take('wrap')}) }
  1 .. 4;
is_deeply(\@got,
	[ 'entry-100-2147483647', 'entry-100--2147483648',
		'entry-100--2147483647', '' ],
	'try_take: arrival order across 2^31, then nothing');
$s->query_ok('COMMIT');
is($s->query_ok(q{SELECT zk_queue_length('wrap')}), 0,
	'the COMMIT consumed the three');

# a waiter is handed a wrapped entry
$w->send(q{SELECT id FROM zk_queue_take('wrap', interval '60s')});
ok(wait_for_waiting($node1, $w->pid, 30), 'a zk_queue_take waits');
make_entry('entry-100--000000001');
my $r = $w->wait(40);
is($r && $r->{out}, 'entry-100--000000001', 'the waiter is handed entry -1')
  or diag(explain($r));

# purge
make_entry($_) for qw(entry-100--000000002 entry-100-0000000000);
my $purged = $s->query_ok(q{SELECT zk_queue_purge('wrap')});
is($purged, 2, 'zk_queue_purge deletes the free entries, wrapped or not');

$w->quit;
$s->quit;
zk_done_check();
done_testing();
