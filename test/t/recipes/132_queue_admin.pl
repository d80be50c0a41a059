
# The distributed queue's administration (issue 31), on two instances:
#  - zk_queue_peek shows the first item no one holds without taking it
#    (nothing held, nothing consumed; a held item is skipped; NULLs when
#    none is free)
#  - zk_queue_purge deletes the items no one holds and returns how many;
#    an item held by a transaction at that moment stays with it: its
#    COMMIT consumes it, a ROLLBACK gives it back; a role granted the
#    queue's other functions (alice) may not purge (42501), since
#    zk_queue_purge is not granted to PUBLIC
#  - doc/security.md's GRANT, run as written, lets its role put and take;
#    its SECURITY DEFINER wrappers, run as written: bob, with no grant on
#    the queue's functions, puts into and takes from one queue through them
#    (the hold his, as zk_queue_items shows), is refused the functions
#    directly (42501), and cannot make the wrapper call a zk_queue_put of
#    his own through his search_path; carol, granted nothing, is refused
#    the wrappers (42501)
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;

zk_start();
my $node1 = zk_node('node1');
my $node2 = zk_node('node2');
# alice uses queues: an administrator grants her the queue's functions as
# doc/security.md says (they are not PUBLIC's), purge excepted
$node1->safe_psql('postgres', q{
	CREATE ROLE alice LOGIN;
	GRANT EXECUTE ON FUNCTION
	  zk_queue_put(text, bytea, integer), zk_queue_put(text, text, integer),
	  zk_queue_put_now(text, bytea, integer), zk_queue_put_now(text, text, integer),
	  zk_queue_take(text, interval), zk_queue_try_take(text),
	  zk_queue_length(text), zk_queue_peek(text)
	TO alice;});

my $root = zk_root();
my $q = "$root/zklock.queues/adm";

sub entries
{
	my ($dir) = @_;
	return sort map { m{/([^/]+)$} ? $1 : () }
	  grep { m{^\Q$q/$dir\E/} } zk_list_znodes("$root/zklock.queues");
}

my $a1 = zk_session($node1, 'A1');
my $b1 = zk_session($node2, 'B1');

# ---------------------------------------------------------------------------
# Peek.
is($a1->query_ok(q{SELECT coalesce(id, 'none') FROM zk_queue_peek('adm')}),
	'none', 'peek on a queue that does not exist: NULLs');
my @ids = map { $a1->query_ok("SELECT zk_queue_put_now('adm', '$_', $_)") }
  qw(300 200 400);
is($b1->query_ok(q{SELECT id || ' ' || convert_from(item, 'UTF8') || ' ' || priority
	FROM zk_queue_peek('adm')}),
	"$ids[1] 200 200", 'peek: the first item by priority, its bytes and priority');
is_deeply([ entries('taken') ], [], 'peek holds nothing');
is($b1->query_ok("SELECT zk_queue_length('adm')"), 3, 'and consumes nothing');
is($b1->query_ok(q{SELECT id FROM zk_queue_peek('adm')}),
	$ids[1], 'a second peek sees the same item');

$b1->query_ok('BEGIN');
is($b1->query_ok(q{SELECT id FROM zk_queue_try_take('adm')}),
	$ids[1], 'the item peeked is the one a take gets');
is($a1->query_ok(q{SELECT id FROM zk_queue_peek('adm')}),
	$ids[0], 'while it is held, peek on the other instance skips it');

# ---------------------------------------------------------------------------
# The views, on the other instance: the items in the order they are taken,
# the hold with its holder; zk_queues counts.
my $b1pid = $b1->pid;
is($a1->query_ok(q{SELECT string_agg(concat_ws(' ', queue, id, priority, held,
	instance, pid, since IS NOT NULL), ',' ORDER BY id) FROM zk_queue_items}),
	"adm $ids[1] 200 t node2 $b1pid t,adm $ids[0] 300 f f,adm $ids[2] 400 f f",
	'zk_queue_items: each item, its priority, and the holder (instance, pid, since)');
is($a1->query_ok(q{SELECT concat_ws(' ', queue, waiting, held) FROM zk_queues}),
	'adm 2 1', 'zk_queues: two waiting, one held');
my $alice = zk_session_as($node1, 'ALICE', 'alice');
is($alice->query_ok(q{SELECT concat_ws(' ', id, held, instance, coalesce(pid, 0))
	FROM zk_queue_items WHERE held}),
	"$ids[1] t node2 0", 'a role that is not the holder\'s sees the hold, not its pid');
my $r = $alice->query(q{SELECT * FROM zk_queue_item_nodes()});
is($r->{sqlstate}, '42501', 'zk_queue_item_nodes is not granted to PUBLIC');
$alice->query_ok('BEGIN');
is($alice->query_ok(q{SELECT priority FROM zk_queue_try_take('adm')}), 300,
	'alice takes an item');
is($alice->query_ok(q{SELECT string_agg(coalesce(pid, 0)::text, ',' ORDER BY id)
	FROM zk_queue_items WHERE held}),
	'0,' . $alice->pid, 'and sees the pid of her own hold only');
$alice->query_ok('ROLLBACK');

# ---------------------------------------------------------------------------
# Queues are no locks: zk_locks, zk_lock_nodes, zk_lock_queue and
# zk_lock_local show nothing of them (a lock beside them still shows).
$a1->query_ok('BEGIN');
$a1->query_ok(q{SELECT zk_lock_acquire('reallock')});
for my $v (qw(zk_locks zk_lock_nodes() zk_lock_queue()))
{
	is($a1->query_ok("SELECT string_agg(resource, ',') FROM $v"),
		'reallock', "$v: the lock only, not the queue's entries or holds");
}
is($b1->query_ok(q{SELECT count(*) FROM zk_lock_local}), 0,
	'zk_lock_local on the holder\'s instance: no queue take');
$a1->query_ok('COMMIT');

# ---------------------------------------------------------------------------
# Purge: administrators only; held items stay with their holder.
$r = $alice->query(q{SELECT zk_queue_purge('adm')});
is($r->{sqlstate}, '42501', 'a role with no grant on it may not purge (42501)');
is($a1->query_ok("SELECT zk_queue_length('adm')"), 3, 'and nothing was purged');

is($a1->query_ok(q{SELECT zk_queue_purge('adm')}), 2,
	'purge deletes the two items no one holds, and says so');
is_deeply([ entries('entries') ], [ $ids[1] ],
	'the held item is still in ZooKeeper');
is($a1->query_ok(q{SELECT coalesce(id, 'none') FROM zk_queue_peek('adm')}),
	'none', 'nothing free to peek after the purge');
$b1->query_ok('ROLLBACK');
is($a1->query_ok(q{SELECT id FROM zk_queue_peek('adm')}),
	$ids[1], 'the holder\'s ROLLBACK gives the held item back, same id');

$b1->query_ok('BEGIN');
is($b1->query_ok(q{SELECT id FROM zk_queue_try_take('adm')}), $ids[1],
	'taken again');
is($a1->query_ok(q{SELECT zk_queue_purge('adm')}), 0,
	'a purge with only a held item deletes nothing');
$b1->query_ok('COMMIT');
is_deeply([ entries('entries'), entries('taken') ], [],
	'the holder\'s COMMIT consumes it: the queue is empty in ZooKeeper');
is($a1->query_ok(q{SELECT zk_queue_purge('nosuchqueue')}), 0,
	'purging a queue that does not exist: 0');

# ---------------------------------------------------------------------------
# zklock.max_queue_items: a put into a full queue fails (53400), and leaves
# nothing in ZooKeeper; only a superuser sets it.
$r = $alice->query(q{SET zklock.max_queue_items = 1000});
is($r->{sqlstate}, '42501', 'a role that is not a superuser may not set it');
$a1->query_ok(q{SET zklock.max_queue_items = 2});
$a1->query_ok(q{SELECT zk_queue_put_now('adm', 'a')});
$a1->query_ok(q{SELECT zk_queue_put_now('adm', 'b')});
my @before = sort(zk_list_znodes("$root/zklock.queues"));
$r = $a1->query(q{SELECT zk_queue_put_now('adm', 'c')});
is($r->{sqlstate}, '53400', 'a third put_now into a queue of 2: 53400');
like($r->{err}, qr/zklock queue "adm" is full/, 'the error names the queue');
$a1->query_ok('BEGIN');
$r = $a1->query(q{SELECT zk_queue_put('adm', 'd')});
is($r->{sqlstate}, '53400', 'a transactional put into it: 53400 at the call');
$a1->query_ok('ROLLBACK');
is_deeply([ sort(zk_list_znodes("$root/zklock.queues")) ], [@before],
	'nothing of the refused puts in ZooKeeper (no entry, no pending node)');
$b1->query_ok('BEGIN');
$b1->query_ok(q{SELECT id FROM zk_queue_try_take('adm')});
$b1->query_ok('COMMIT');
like($a1->query_ok(q{SELECT zk_queue_put_now('adm', 'c')}), qr/^entry-100-/,
	'once an item is consumed, a put fits again');
$a1->query_ok(q{RESET zklock.max_queue_items});
is($a1->query_ok(q{SELECT zk_queue_purge('adm')}), 2, 'purged');

# ---------------------------------------------------------------------------
# doc/security.md's way to confine a role to named queues, its SQL block run
# as written (review of the change: the prose alone left out the REVOKE from
# PUBLIC, without which every role uses the wrapper, and the search_path,
# without which the caller's own zk_queue_put runs with the owner's rights).
my $doc = PostgreSQL::Test::Utils::slurp_file("$FindBin::RealBin/../../../doc/security.md");
my ($section) = $doc =~ /^## Queues: who may use them \(1\.9\)\n(.*?)^## /ms;
my @blocks = ($section // '') =~ /^  ```sql\n(.*?)^  ```\n/msg;
# (the second, zklock.allowed_queues', is run by test/t/ops/147)
is(scalar(@blocks), 3, 'doc/security.md\'s queue section has its three SQL blocks');
like($blocks[0], qr/^\s*GRANT EXECUTE ON FUNCTION.*\bTO app;\s*$/s, 'the first is the GRANT');
like($blocks[2], qr/^\s*BEGIN;.*SECURITY DEFINER.*\bTO bob;\s*COMMIT;\s*$/s, 'the third, the wrappers, granted to bob');
# the doc's GRANT as written (to app; alice above got the same by hand)
$node1->safe_psql('postgres', 'CREATE ROLE app LOGIN; CREATE ROLE bob LOGIN; CREATE ROLE carol LOGIN');
$node1->safe_psql('postgres', $blocks[0]);
is($node1->safe_psql('postgres', q{SELECT zk_queue_put_now('jobs', 'from app') IS NOT NULL;
		SELECT convert_from(item, 'UTF8') FROM zk_queue_take('jobs', '10 s')},
		extra_params => [ '-U', 'app' ]),
	"t\nfrom app", 'the documented GRANT, run as written, lets app put and take');
$node1->safe_psql('postgres', $blocks[2]);
my $bob = zk_session_as($node1, 'BOB', 'bob');
my $carol = zk_session_as($node1, 'CAROL', 'carol');
like($bob->query_ok(q{SELECT put_jobs('from bob')}), qr/^\d+-\d+-\d+-100$/,
	'bob puts into jobs through the documented SECURITY DEFINER function');
for my $sql (q{SELECT zk_queue_put_now('other', 'x')},
	q{SELECT id FROM zk_queue_peek('jobs')}, q{SELECT zk_queue_length('jobs')})
{
	$r = $bob->query($sql);
	is($r->{sqlstate}, '42501', "but, with no grant, not directly: $sql");
}
for my $sql (q{SELECT put_jobs('from carol')}, q{SELECT take_jobs('1 s')})
{
	$r = $carol->query($sql);
	is($r->{sqlstate}, '42501', "a role granted nothing may not use the wrappers: $sql");
}
# nor reach the queue's nodes as locks (names under zklock. are zklock's)
# or free a hold by force (superusers only)
for my $c ([ q{SELECT zk_lock_try_acquire('zklock.queues/jobs/entries')}, '22023' ],
	[ q{SELECT zk_lock_try_acquire_session('zklock.queues/jobs/taken/x', 'shared')}, '22023' ],
	[ q{SELECT zk_lock_force_release('zklock.queues/jobs', 'exclusive')}, '42501' ])
{
	$r = $carol->query($c->[0]);
	is($r->{sqlstate}, $c->[1], "carol is refused $c->[0] ($c->[1])");
}
is($a1->query_ok(q{SELECT zk_queue_length('jobs')}), 1, 'only bob\'s item is in jobs');

# bob takes through the wrapper: held in his transaction, shown as his
$bob->query_ok('BEGIN');
is($bob->query_ok(q{SELECT take_jobs('10 s')}), 'from bob', 'bob takes through the wrapper');
is($bob->query_ok(q{SELECT held, pid = pg_backend_pid() FROM zk_queue_items WHERE queue = 'jobs'}),
	't|t', 'held, and zk_queue_items shows bob his own pid (he is the holder, not the owner)');
is($carol->query_ok(q{SELECT held, pid IS NULL FROM zk_queue_items WHERE queue = 'jobs'}),
	't|t', 'and hides it from carol');
$bob->query_ok('COMMIT');
is($a1->query_ok(q{SELECT zk_queue_length('jobs')}), 0, 'his COMMIT consumed it');

# the search_path of the caller does not reach inside the wrapper: bob's
# own zk_queue_put, first in his search_path, is not the one called
$node1->safe_psql('postgres', 'CREATE SCHEMA bobs AUTHORIZATION bob');
$bob->query_ok(q{CREATE FUNCTION bobs.zk_queue_put(queue text, item text, priority integer DEFAULT 100)
	RETURNS text LANGUAGE sql AS $$ SELECT 'hijacked as ' || current_user $$});
$bob->query_ok('SET search_path = bobs, public');
like($bob->query_ok(q{SELECT put_jobs('after the hijack')}), qr/^\d+-\d+-\d+-100$/,
	'a function of bob\'s first in his search_path is not called by the wrapper');
is($a1->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_peek('jobs')}),
	'after the hijack', 'the item is in jobs');
is($a1->query_ok(q{SELECT zk_queue_purge('jobs')}), 1, 'purged');
$bob->quit;
$carol->quit;

# zklock.allowed_subtrees names what a role may lock, not queues (said in
# doc/security.md and doc/settings.md): app, confined to etl, still puts
# into and takes from jobs with the documented grants
$node1->safe_psql('postgres', q{ALTER ROLE app SET zklock.allowed_subtrees = 'etl'});
my ($arc, $aout, $aerr) = $node1->psql('postgres', q{\set VERBOSITY verbose
	SELECT zk_queue_put_now('jobs', 'from confined app') IS NOT NULL;
	SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('jobs');
	SELECT zk_lock_try_acquire('jobs')}, extra_params => [ '-U', 'app' ]);
is($aout, "t\nfrom confined app", 'a role confined by zklock.allowed_subtrees puts into and takes from any queue');
like($aerr, qr/42501: not allowed to lock zklock resource "jobs"/, 'while it may not lock that name');
$node1->safe_psql('postgres', q{ALTER ROLE app RESET zklock.allowed_subtrees});

$alice->quit;
$a1->quit;
$b1->quit;
done_testing();
