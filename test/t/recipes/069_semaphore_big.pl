
# A big semaphore (review of 1.4): a semaphore of 64 (the largest limit),
# its 64 first nodes another client's (persistent, as kazoo makes them),
# and 100 waiters on one instance, each watching the 64 nodes before it
# (6,400 watch registrations sent at once).  A user relies on the rest of the
# instance being unharmed:
#  - the worker keeps its ZooKeeper session (its lease proved in time),
#    so a lock held meanwhile by another session is not lost and its
#    transaction commits;
#  - every waiter still waits, then withdraws, and its watches go within
#    a bound.
# (Failed on 1.4 as reviewed, whose limit went up to 1000: 100,000 exists
# requests at once held up the lease's proof of life past the session
# timeout; the worker gave up its session and every lock of the instance
# was lost.  The limit is now 64.)
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;
use Time::HiRes qw(sleep time);
use IPC::Run;

my $NW = 100;
zk_start();
my $node1 = zk_node('node1', extra_conf => 'max_connections = 130');
my ($root, $hosts) = (zk_root(), zk_hosts());

my ($out, $err) = ('', '');
my $py = <<"PY";
from kazoo.client import KazooClient
zk = KazooClient(hosts="$hosts"); zk.start()
zk.ensure_path("$root/big")
for i in range(64):
    zk.create("$root/big/other-SEMAPHORE-64-LOCK-EXCLUSIVE-", b"x", sequence=True)
zk.stop()
PY
ok(IPC::Run::run([ '/usr/bin/python3', '-c', $py ], '>', \$out, '2>', \$err),
	'another client made 64 semaphore nodes of limit 64') or diag($err);
is(zk_count_locks(zk_path('big')), 64, 'they are there');

my $sid = psql1($node1, 'SELECT session_id FROM zk_lock_status');
my $keeper = zk_session($node1, 'keeper');
$keeper->query_ok('BEGIN');
$keeper->query_ok(q{SELECT zk_lock_acquire('kept') > 0});
$keeper->query_ok('CREATE TEMP TABLE t(x int)');
my $log_at = -s $node1->logfile;

my @w = map { zk_session($node1, "BW$_") } 1 .. $NW;
$_->send("SELECT zk_semaphore_acquire_session('big', 64, '120 s')") for @w;
my $watches;
ok( wait_until(
		sub {
			$watches = psql1($node1, 'SELECT watches FROM zk_lock_status');
			return $watches >= 64 * $NW;
		},
		timeout => 60),
	"$NW waiters watch 64 nodes each ($watches)");
is(psql1($node1, 'SELECT session_id FROM zk_lock_status'), $sid,
	'the worker kept its ZooKeeper session');
unlike(PostgreSQL::Test::Utils::slurp_file($node1->logfile, $log_at),
	qr/gave up ZooKeeper session/, 'it never gave it up');
is(scalar(grep { $_->done } @w), 0, 'every waiter still waits');
my $r = $keeper->query('COMMIT');
is($r->{sqlstate}, '00000', 'a transaction holding a lock meanwhile commits');

my $t0 = time();
$node1->safe_psql('postgres',
	q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name ~ '^BW'});
$_->wait(60) for @w;
ok( wait_until(
		sub {
			$watches = psql1($node1, 'SELECT watches FROM zk_lock_status');
			return $watches == 1;	# the revocation mailbox's (issue 18)
		},
		timeout => 10),
	sprintf('the waiters withdrew; their watches are gone (%s left after %.1f s)',
		$watches, time() - $t0));
is(psql1($node1, 'SELECT session_id FROM zk_lock_status'), $sid,
	'the worker still has its session');
$_->quit for (@w, $keeper);
zkutil('delete-r', zk_path('big'));
zk_done_check();
done_testing();
