
# (class 1) A grant looked at only after the worker was stopped (SIGSTOP)
# for longer than the session timeout: ZooKeeper expired the session, its
# node went, node2 was granted the lock.  The stopped worker never
# withdrew the lease's session, so only the lease's deadline can tell
# (review of issue 28; REVIEW.md class 1).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my $node1 = zk_node('node1');
my $node2 = zk_node('node2');
my $res = 'gss/r';
my $path = zk_path($res);

my $t0 = zk_session($node2, 't0');
$t0->query_ok('BEGIN');
$t0->query_ok(qq{SELECT zk_lock_acquire('$res', parents => false)});
ok(zk_set_failpoints($node1, 'backend-before-answer=pause'), 'failpoint set');
my $log_offset = -s $node1->logfile;
my $s1 = zk_session($node1, 's1');
my $pid = $s1->pid;
$s1->query_ok('BEGIN');
$s1->send(qq{SELECT zk_lock_acquire('$res', parents => false) > 0});
ok(zk_wait_log($node1, qr/failpoint "backend-before-answer" reached/, $log_offset), 'paused');
ok(wait_until(sub { psql1($node1,
	"SELECT count(*) FROM zk_lock_local WHERE pid = $pid AND state = 'waiting'") eq '1' },
	timeout => 20), 'waits');
$t0->query_ok('COMMIT');
ok(wait_until(sub { psql1($node1,
	"SELECT count(*) FROM zk_lock_local WHERE pid = $pid AND state = 'granted'") eq '1' },
	timeout => 20), 'granted meanwhile');
my $wpid = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
kill 'STOP', $wpid;
ok(zk_wait_count($path, 0, 30), 'the stopped worker\'s session expired: its node is gone');
my $t2 = zk_session($node2, 't2');
$t2->query_ok('BEGIN');
is($t2->query_ok(qq{SELECT zk_lock_acquire('$res', timeout => '10 s') > 0}), 't',
	'node2 is granted the lock');
ok(zk_set_failpoints($node1, ''), 'failpoint released');
my $r = $s1->wait(60);
note explain $r;
isnt($r && $r->{out}, 't', 'node1 does not return the lock as held while node2 holds it');
is($r && $r->{sqlstate}, '55P03', '55P03');
like($r && $r->{err}, qr/zklock lock on resource "gss\/r" is not proven held as it was granted/,
	'... not proven held: the lease, not the stopped worker\'s flag, decides');
kill 'CONT', $wpid;
$s1->query('ROLLBACK');
$t2->query_ok('COMMIT');
ok(zk_wait_connected($node1), 'node1 connects again');
ok(wait_until(sub { psql1($node1, "SELECT count(*) FROM zk_lock_local WHERE pid = $pid") eq '0' },
	timeout => 30), 'no entry left');
$_->quit for ($s1, $t2, $t0);
zk_done_check();
done_testing();
