
# Review of issue 20 (the commit window): a COMMIT whose fence passed and
# that then fails (a serialization failure raised at commit, after
# XACT_EVENT_PRE_COMMIT, in PreCommit_CheckForSerializationFailure) closes
# its window: a restart of the worker right after it is not held up, and
# the lock goes to another instance at once.  (Held: a check that the
# window's mark cannot be left behind by an abort after the fence.)
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my $node1 = zk_node('node1');
my $node2 = zk_node('node2');
$node1->safe_psql('postgres',
	'CREATE TABLE acct(id int PRIMARY KEY, v int); INSERT INTO acct VALUES (1, 10), (2, 10)');

my $t1 = zk_session($node1, 't1');
my $t2 = zk_session($node1, 't2');
$_->query_ok('BEGIN ISOLATION LEVEL SERIALIZABLE') for ($t1, $t2);
$t2->query_ok(q{SELECT zk_lock_acquire('abort/r') > 0});
$t1->query_ok('SELECT sum(v) FROM acct');
$t2->query_ok('SELECT sum(v) FROM acct');
$t1->query_ok('UPDATE acct SET v = v - 15 WHERE id = 1');
$t2->query_ok('UPDATE acct SET v = v - 15 WHERE id = 2');
$t1->query_ok('COMMIT');
my $r = $t2->query('COMMIT');
is($r->{sqlstate}, '40001', 'the second COMMIT fails after its fence (serialization failure)');
like($r->{err}, qr/during commit attempt/, '... raised at commit, after the pre-commit callbacks');

my $log_offset = -s $node1->logfile;
my $old = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
kill 'TERM', $old;
ok( wait_until(sub { my $p = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
		$p ne '' && $p ne $old }, timeout => 20),
	'the worker restarts');
ok(zk_wait_connected($node1), '... and connects');
ok(!$node1->log_contains(qr/keeping ZooKeeper session/, $log_offset),
	'no window was left open by the aborted commit');
is(psql1($node2, q{SELECT zk_lock_acquire('abort/r', timeout => '10 s') > 0}), 't',
	'another instance takes the lock');
$_->quit for ($t1, $t2);
zk_done_check();
done_testing();
