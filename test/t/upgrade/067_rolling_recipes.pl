
# A rolling upgrade from 1.3: an instance running zklock's previous release
# (git revision 78d507c, extension 1.3) and one running this tree's library
# (1.4: semaphores, leadership, advisory locks) share one ZooKeeper root.
# The 1.3 instance must not be confused by the new recipes' nodes:
#  - a semaphore's nodes look like EXCLUSIVE lock nodes to it (their names
#    end with Hive's mark): it never grants a lock beside semaphore holders,
#    and its zk_locks lists them;
#  - its listings skip the election and advisory nodes or list them without
#    an error, and its sweep (run several times here) deletes none of them;
#  - the 1.4 instance's leadership, semaphore and advisory locks stay
#    granted throughout.
#  - (review, 1.9) queue items of the new instance, one held by an open
#    transaction and one whose bytes read as an expired explicit lock's
#    node data, are all left by the old instance's listings and sweeps;
#    the held one is consumed at its COMMIT, the others taken in order.
# The previous release is built by test/run_tests.sh (test/build_old.sh) and
# named by ZKLOCK_PREV_INSTALL; without it this test fails, never skips.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;

my $prev_install = $ENV{ZKLOCK_PREV_INSTALL} // '';
ok($prev_install ne '' && -x "$prev_install/bin/postgres"
	  && -f "$prev_install/lib/zklock.so",
	"the previous release's zklock is installed (ZKLOCK_PREV_INSTALL=$prev_install)")
  or do
{
	diag('ZKLOCK_PREV_INSTALL must name a PostgreSQL installation with zklock 78d507c (test/build_old.sh; test/run_tests.sh builds it as root from a clone)');
	done_testing();
	exit 1;
};

zk_start();
my $new = zk_node('new', node_name => 'new-inst',
	extra_conf => "zklock.elections = 'nightly'");
# the old one sweeps every 200 ms, so that it has many chances to be wrong
my $old = zk_node('old', node_name => 'old-inst', install_path => $prev_install,
	extra_conf => "zklock.sweep_interval = '200ms'");

is(psql1($old, q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
	'1.3', 'the old instance runs extension 1.3');
is(psql1($new, q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
	'1.9', 'the new instance runs extension 1.9');

# --- the new instance's recipes in use ----------------------------------------
ok(wait_until(sub { psql1($new, q{SELECT zk_is_leader('nightly')}) eq 't' }, timeout => 30),
	'the new instance leads its election group');
my @sem = map { zk_session($new, "sem$_") } 1 .. 2;
for my $s (@sem)
{
	is($s->query_ok(q{SELECT zk_semaphore_try_acquire_session('roll/sem', 2) IS NOT NULL}),
		't', 'a semaphore holder on the new instance (' . $s->name . ')');
}
my $adv = zk_session($new, 'adv');
is($adv->query_ok(q{SELECT zk_try_advisory_lock(42)}), 't',
	'an advisory lock on the new instance');

# --- review (1.9): queue items under <root>/zklock.queues, one held ----------
# one item's bytes read as an explicit lock's node data that expired long ago
ok(psql1($new, q{SELECT zk_queue_put_now('roll/q', 'plain') IS NOT NULL
                    AND zk_queue_put_now('roll/q', E'scope=explicit\nrevoke=1\nttl=1\nexpires=1\nsince=0\n') IS NOT NULL
                    AND zk_queue_put_now('roll/q', 'held') IS NOT NULL}) eq 't',
	'three queue items on the new instance');
my $taker = zk_session($new, 'taker');
$taker->query_ok('BEGIN');
is($taker->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('roll/q')}),
	'plain', 'one of them held by a transaction of the new instance');
my @queue_nodes = sort(zk_list_znodes(zk_path('zklock.queues')));
cmp_ok(scalar(grep { m{/roll/q/(entries|taken)/} } @queue_nodes), '==', 4,
	'three entries and one hold in ZooKeeper');

# --- the old instance sees EXCLUSIVE lock nodes, and is refused ---------------
is(psql1($old, q{SELECT zk_lock_try_acquire('roll/sem') IS NOT NULL}), 'f',
	'the old instance cannot take an EXCLUSIVE lock beside the semaphore holders');
is(psql1($old, q{SELECT zk_lock_try_acquire('roll/sem', 'shared') IS NOT NULL}), 'f',
	'nor a SHARED one');
is(psql1($old, q{SELECT count(*) FROM zk_locks WHERE resource = 'roll/sem'}), '2',
	"the old instance's zk_locks lists the semaphore's two nodes");
my ($rc, $out, $err) = $old->psql('postgres', q{SELECT count(*) FROM zk_locks});
is($rc, 0, "the old instance's zk_locks over the whole root runs without an error")
  or diag($err);

# --- the old instance's sweep leaves every new node alone ---------------------
my $before = join(',', sort(zk_list_znodes(zk_path('zklock.elections/nightly')),
		zk_lock_nodes(zk_path('roll/sem'))));
sleep(3);	# fifteen sweeps of the old instance
my $after = join(',', sort(zk_list_znodes(zk_path('zklock.elections/nightly')),
		zk_lock_nodes(zk_path('roll/sem'))));
is($after, $before, 'after the old instance swept 15 times, the election and semaphore nodes are all there');
is(join(',', sort(zk_list_znodes(zk_path('zklock.queues')))), join(',', @queue_nodes),
	'and every queue node (review: items whose bytes look like node data of an expired explicit lock too)');
is(psql1($new, q{SELECT zk_queue_length('roll/q')}), '3', 'the queue still has its three items');
$taker->query_ok('COMMIT');
is(psql1($new, q{SELECT string_agg(convert_from(item, 'UTF8'), ',') FROM (SELECT (zk_queue_try_take('roll/q')).item FROM generate_series(1, 3)) t}),
	"scope=explicit\nrevoke=1\nttl=1\nexpires=1\nsince=0\n,held", 'the held one was consumed at its COMMIT; the others are taken in order');
$taker->quit;
is(psql1($new, q{SELECT zk_is_leader('nightly')}), 't',
	'the new instance still leads');
is(psql1($new, q{SELECT count(*) FROM zk_lock_local WHERE resource = 'roll/sem' AND state = 'granted'}),
	'2', 'its semaphore holders have not lost their slots');

# --- once the new one releases, the old one takes the resource ----------------
$_->query_ok(q{SELECT zk_semaphore_release('roll/sem')}) for @sem;
ok(zk_wait_no_locks(zk_path('roll/sem'), 20), "the semaphore's nodes are gone");
is(psql1($old, q{SELECT zk_lock_try_acquire('roll/sem') IS NOT NULL}), 't',
	'the old instance takes the resource once the semaphore is free');
$adv->query_ok(q{SELECT zk_advisory_unlock_all()});

$_->quit for (@sem, $adv);
$new->stop;
$old->stop;
zk_done_check();
done_testing();
