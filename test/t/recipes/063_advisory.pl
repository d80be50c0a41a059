
# The advisory-lock API (issue 17) across two instances and one ZooKeeper:
#  - zk_advisory_lock(42) on one instance blocks zk_try_advisory_lock(42)
#    on the other, and a waiting zk_advisory_lock(42) there is granted when
#    the first unlocks;
#  - (0, 42) does not collide with 42;
#  - transaction-level locks end with the transaction; shared on both;
#  - zklock.advisory_namespace: two databases of different names with the
#    same namespace (ALTER DATABASE ... SET) exclude each other, and by
#    default they do not;
#  - differences from PostgreSQL: PREPARE TRANSACTION refused; holding a
#    key EXCLUSIVE and asking SHARED waits while the other instance's
#    request is queued between (lock_timeout ends it), granted otherwise;
#  - the commit fence: a transaction whose advisory transaction lock was
#    lost cannot commit, nor one writing under a lost session-level one;
#  - a cancel ends a wait and leaves no node behind.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;

zk_start();
my $node1 = zk_node('node1', extra_conf => 'max_prepared_transactions = 2');
my $node2 = zk_node('node2');

my $adv = zk_path('zklock.advisory');

# --- blocks across instances; a waiter is granted at unlock -----------------
my $a = zk_session($node1, 'holder');
my $b = zk_session($node2, 'other');
$a->query_ok('SELECT zk_advisory_lock(42)');
is(zk_count_locks("$adv/postgres/42"), 1, 'the key is a lock node in ZooKeeper');
is($b->query_ok('SELECT zk_try_advisory_lock(42)'), 'f',
	'zk_advisory_lock(42) on node1 blocks zk_try_advisory_lock(42) on node2');
is($b->query_ok('SELECT zk_try_advisory_lock(0, 42)'), 't',
	'(0, 42) on node2 does not collide with 42');
is($a->query_ok('SELECT zk_try_advisory_lock(0, 42)'), 'f',
	'and node2 holds (0, 42) against node1');
$b->query_ok('SELECT zk_advisory_unlock(0, 42)');
$b->send('SELECT zk_advisory_lock(42)');
ok(wait_for_waiting($node2, $b->pid), 'a zk_advisory_lock(42) on node2 waits');
$a->query_ok('SELECT zk_advisory_lock(42)');    # a second hold
$a->query_ok('SELECT zk_advisory_unlock(42)');
ok(!defined $b->wait(1), 'one unlock of two holds: node2 still waits');
$a->query_ok('SELECT zk_advisory_unlock(42)');
my $r = $b->wait(20);
ok($r && $r->{sqlstate} eq '00000', 'the waiter on node2 is granted when node1 unlocks');
is($a->query_ok('SELECT zk_try_advisory_lock(42)'), 'f', 'node2 holds it now');
$b->query_ok('SELECT zk_advisory_unlock_all()');

# --- transaction level; shared on both -------------------------------------
$a->query_ok('BEGIN');
$a->query_ok('SELECT zk_advisory_xact_lock(7)');
is($b->query_ok('SELECT zk_try_advisory_xact_lock_shared(7)'), 'f',
	'a transaction lock on node1 blocks node2');
$a->query_ok('COMMIT');
is($b->query_ok('SELECT zk_try_advisory_xact_lock(7)'), 't',
	'it ends with the transaction');
$a->query_ok('SELECT zk_advisory_lock_shared(8)');
is($b->query_ok('SELECT zk_try_advisory_lock_shared(8)'), 't',
	'shared on both instances at once');
is(zk_count_locks("$adv/postgres/8"), 2, 'two SHARED nodes');
$b->query_ok('BEGIN');
is($b->query_ok('SELECT zk_try_advisory_xact_lock(8)'), 'f',
	'exclusive is refused while both hold it shared');
$b->query_ok('ROLLBACK');
$a->query_ok('SELECT zk_advisory_unlock_all()');
$b->query_ok('SELECT zk_advisory_unlock_all()');

# --- zklock.advisory_namespace ---------------------------------------------
$node1->safe_psql('postgres', 'CREATE DATABASE app_one');
$node2->safe_psql('postgres', 'CREATE DATABASE app_two');
$node1->safe_psql('app_one', 'CREATE EXTENSION zklock');
$node2->safe_psql('app_two', 'CREATE EXTENSION zklock');
my $one = zk_session($node1, 'app_one', dbname => 'app_one');
$one->query_ok('SELECT zk_advisory_lock(100)');
is($node2->safe_psql('app_two', 'SELECT zk_try_advisory_lock(100)'), 't',
	'by default, databases of different names do not share keys');
$one->query_ok('SELECT zk_advisory_unlock(100)');
$node1->safe_psql('postgres', q{ALTER DATABASE app_one SET zklock.advisory_namespace = 'app'});
$node2->safe_psql('postgres', q{ALTER DATABASE app_two SET zklock.advisory_namespace = 'app'});
$one->quit;
$one = zk_session($node1, 'app_one', dbname => 'app_one');
is($one->query_ok('SHOW zklock.advisory_namespace'), 'app', 'the namespace applies at login');
$one->query_ok('SELECT zk_advisory_lock(100)');
is(zk_count_locks("$adv/app/100"), 1, 'the key lives under the namespace');
is($node2->safe_psql('app_two', 'SELECT zk_try_advisory_lock(100)'), 'f',
	'two databases of different names with the same namespace exclude each other');
is($node2->safe_psql('postgres', 'SELECT zk_try_advisory_lock(100)'), 't',
	'and a database without it does not');
$one->query_ok('SELECT zk_advisory_unlock(100)');
$one->quit;

# --- PREPARE TRANSACTION is refused (PostgreSQL keeps the locks) ------------
$a->query_ok('BEGIN');
$a->query_ok('SELECT zk_advisory_xact_lock(9)');
$r = $a->query(q{PREPARE TRANSACTION 'adv'});
is($r->{sqlstate}, '0A000', 'PREPARE TRANSACTION with a zk advisory lock is refused');
is($node1->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
	'nothing was prepared');
is($b->query_ok('SELECT zk_try_advisory_lock(9)'), 't', 'and the lock is released');
$b->query_ok('SELECT zk_advisory_unlock(9)');

# --- one backend holds a key EXCLUSIVE and asks SHARED ----------------------
$a->query_ok('SELECT zk_advisory_lock(50)');
$a->query_ok('SELECT zk_advisory_lock_shared(50)');
is(zk_count_locks("$adv/postgres/50"), 2,
	'with nobody between, it holds the key both ways (two nodes)');
$a->query_ok('SELECT zk_advisory_unlock_shared(50)');
$b->send('SELECT zk_advisory_lock(50)');
ok(wait_for_waiting($node2, $b->pid), 'node2 queues for the key');
$a->query_ok(q{SET lock_timeout = '500ms'});
$r = $a->query('SELECT zk_advisory_lock_shared(50)');
is($r->{sqlstate}, '55P03',
	'asking SHARED behind the queued request waits; lock_timeout ends it (PostgreSQL would grant it)');
$a->query_ok('RESET lock_timeout');
$a->query_ok('SELECT zk_advisory_unlock(50)');
$r = $b->wait(20);
ok($r && $r->{sqlstate} eq '00000', 'node2 is granted at the unlock');
$b->query_ok('SELECT zk_advisory_unlock_all()');

# --- the commit fence --------------------------------------------------------
$node1->safe_psql('postgres', 'CREATE TABLE guarded(v int)');
$a->query_ok('BEGIN');
$a->query_ok('SELECT zk_advisory_xact_lock(60)');
$a->query_ok('INSERT INTO guarded VALUES (1)');
my ($node_path) = zk_lock_nodes("$adv/postgres/60");
ok(defined $node_path, 'the transaction holds a lock node');
my ($rc) = ZkLockTest::zkutil('delete-r', $node_path);
is($rc, 0, 'an administrator deletes it');
is($b->query_ok('SELECT zk_try_advisory_lock(60)'), 't', 'node2 is granted the key');
ok( wait_until(
		sub {
			psql1($node1,
				q{SELECT count(*) FROM zk_lock_local WHERE resource LIKE 'zklock.advisory/%/60' AND state = 'lost'}
			) eq '1';
		},
		timeout => 10),
	'node1 sees its lock lost');
$r = $a->query('COMMIT');
is($r->{sqlstate}, '55P03', 'the transaction whose advisory lock was lost cannot commit');
is(psql1($node1, 'SELECT count(*) FROM guarded'), '0', 'nothing it wrote is visible');
$b->query_ok('SELECT zk_advisory_unlock_all()');

# a session-level advisory lock lost: a writing transaction cannot commit
$a->query_ok('SELECT zk_advisory_lock(61)');
($node_path) = zk_lock_nodes("$adv/postgres/61");
($rc) = ZkLockTest::zkutil('delete-r', $node_path);
is($rc, 0, 'an administrator deletes a session-level advisory lock\'s node');
ok( wait_until(
		sub {
			psql1($node1,
				q{SELECT count(*) FROM zk_lock_local WHERE resource LIKE 'zklock.advisory/%/61' AND state = 'lost'}
			) eq '1';
		},
		timeout => 10),
	'node1 sees it lost');
$a->query_ok('BEGIN');
$a->query_ok('INSERT INTO guarded VALUES (2)');
$r = $a->query('COMMIT');
is($r->{sqlstate}, '55P03', 'a writing transaction under the lost session-level advisory lock cannot commit');
is(psql1($node1, 'SELECT count(*) FROM guarded'), '0', 'nothing it wrote is visible');
$r = $a->query('SELECT zk_advisory_unlock(61)');
is($r->{out}, 't', 'the lost lock is released by zk_advisory_unlock');
like($r->{err}, qr/WARNING:.*was lost/, 'with a WARNING that it had been lost');

# --- cancel ends a wait, and leaves nothing behind --------------------------
$a->query_ok('SELECT zk_advisory_lock(62)');
$b->send('SELECT zk_advisory_lock(62)');
ok(wait_for_waiting($node2, $b->pid), 'node2 waits for the key');
psql1($node2, 'SELECT pg_cancel_backend(' . $b->pid . ')');
$r = $b->wait(20);
is($r && $r->{sqlstate}, '57014', 'a cancel ends the wait (57014)');
ok(zk_wait_count("$adv/postgres/62", 1, 10), 'the waiter left no node behind');
$a->query_ok('SELECT zk_advisory_unlock(62)');
is($b->query_ok('SELECT zk_try_advisory_lock(62)'), 't', 'node2 can take it after');
$b->query_ok('SELECT zk_advisory_unlock_all()');

$a->quit;
$b->quit;
ok(zk_wait_no_locks($adv, 10), 'no advisory lock node is left');
zk_done_check();
done_testing();
