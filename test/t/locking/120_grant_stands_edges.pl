
# The edges of "a grant is reported held only while it stands" (issue 28,
# review of 115_grant_after_exit.pl), each made deterministic with the
# failpoint backend-before-answer (wait.c), which pauses a waiting backend
# just before it looks at its answer:
#
#  (a) A grant looked at while the connection is down, the session still
#      the same (lost and regained, not ended): the lease is not withdrawn
#      by a disconnection, so the grant stands and the acquire returns the
#      lock -- no false 55P03 -- and the transaction commits under it once
#      the connection is back (same session id).
#  (b) The 55P03 inside a PL/pgSQL exception block (a subtransaction): the
#      block catches it, no local entry of the lost grant is left, the node
#      is not left behind in ZooKeeper, and the same transaction takes the
#      lock again from the next session and commits.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkChaos;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $hosts = zk_start();
my ($zk_port) = $hosts =~ /:(\d+)$/;
my $px = ZkChaos::Proxy->start(
	links => [ [ 'node1', PostgreSQL::Test::Cluster::get_free_port(), $zk_port ] ]);
# a session timeout long enough that a cut the client notices (two thirds
# of it) and heals at once stays well inside it on a loaded machine
my $node1 = zk_node('node1', hosts => '127.0.0.1:' . $px->port('node1'),
	extra_conf => "zklock.session_timeout = '12s'");
my $node2 = zk_node('node2');

# node2 holds $res; a backend of node1 waits for it and pauses before it
# looks at its answer; node2 lets go and node1's worker grants it.
sub granted_while_paused
{
	my ($res, $tag, $sql) = @_;
	my $h = zk_session($node2, "h$tag");
	$h->query_ok('BEGIN');
	$h->query_ok(qq{SELECT zk_lock_acquire('$res', parents => false)});
	ok(zk_set_failpoints($node1, 'backend-before-answer=pause'),
		"($tag) failpoint set on node1");
	my $log_offset = -s $node1->logfile;
	my $s = zk_session($node1, "s$tag");
	my $pid = $s->pid;
	$s->query_ok('BEGIN');
	$s->send($sql);
	ok(zk_wait_log($node1, qr/failpoint "backend-before-answer" reached/, $log_offset),
		"($tag) the backend paused before looking at its answer");
	ok( wait_until(
			sub {
				psql1($node1,
					"SELECT count(*) FROM zk_lock_local WHERE pid = $pid AND state = 'waiting'"
				) eq '1';
			},
			timeout => 20),
		"($tag) its request waits behind node2");
	$h->query_ok('COMMIT');
	ok( wait_until(
			sub {
				psql1($node1,
					"SELECT count(*) FROM zk_lock_local WHERE pid = $pid AND state = 'granted'"
				) eq '1';
			},
			timeout => 20),
		"($tag) the worker granted the request meanwhile");
	$h->quit;
	return $s;
}

# --- (a) looked at while the connection is down, same session --------------
{
	my $res = 'gse/a';
	my $sid = psql1($node1, 'SELECT session_id FROM zk_lock_status');
	my $s = granted_while_paused($res, 'a',
		qq{SELECT zk_lock_acquire('$res', parents => false) > 0});
	$px->cut('node1');
	ok( wait_until(
			sub { psql1($node1, 'SELECT state FROM zk_lock_status') ne 'connected' },
			timeout => 30),
		'(a) node1\'s worker noticed the silence (disconnected, same session)');
	ok(zk_set_failpoints($node1, ''), '(a) failpoint released while disconnected');
	my $r = $s->wait(30);
	is($r && $r->{sqlstate}, '00000',
		'(a) a grant looked at during the disconnection stands: no 55P03')
	  or diag explain $r;
	is($r && $r->{out}, 't', '(a) the lock is returned as held');
	$px->heal('node1');
	ok(zk_wait_connected($node1), '(a) node1 reconnects');
	is(psql1($node1, 'SELECT session_id FROM zk_lock_status'), $sid,
		'(a) to the same session');
	is(zk_count_locks(zk_path($res)), 1, '(a) its node is still there');
	$s->query_ok('COMMIT');
	ok(zk_wait_no_locks(zk_path($res)), '(a) released at commit');
	$s->quit;
}

# --- (b) the 55P03 caught in a PL/pgSQL exception block ---------------------
{
	my $res = 'gse/b';
	my $s = granted_while_paused($res, 'b', qq{
DO \$\$
BEGIN
	PERFORM zk_lock_acquire('$res', parents => false);
	RAISE NOTICE 'not caught';
EXCEPTION WHEN lock_not_available THEN
	RAISE NOTICE 'caught: %', SQLERRM;
END \$\$});
	my $pid = $s->pid;
	my $old = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
	kill 'TERM', $old;
	ok(zk_wait_count(zk_path($res), 0, 30), '(b) the session is closed: the node is gone');
	ok(zk_set_failpoints($node1, ''), '(b) failpoint released');
	my $r = $s->wait(60);
	is($r && $r->{sqlstate}, '00000', '(b) the block caught the error')
	  or diag explain $r;
	like($r && $r->{err}, qr/caught: zklock lock on resource "gse\/b" was lost as it was granted/,
		'(b) 55P03, lost as it was granted');
	ok(zk_wait_connected($node1), '(b) node1\'s worker restarted and connected');
	is(psql1($node1, "SELECT count(*) FROM zk_lock_local WHERE pid = $pid"), '0',
		'(b) no local entry of the lost grant is left');
	is($s->query_ok(qq{SELECT zk_lock_acquire('$res', parents => false, timeout => '20 s') > 0}),
		't', '(b) the same transaction takes the lock again');
	is(zk_count_locks(zk_path($res)), 1, '(b) one node: the new one');
	$s->query_ok('COMMIT');
	ok(zk_wait_no_locks(zk_path($res)), '(b) released at commit');
	is(psql1($node1, "SELECT count(*) FROM zk_lock_local WHERE pid = $pid"), '0',
		'(b) nothing left after the commit');
	$s->quit;
}

zk_done_check();
done_testing();
