
# A stopped worker's publication of long waits is no evidence of a hold
# (issue 28, finding 2, after review; doc/deadlocks.md).  node1's backend P
# holds st/a as a session lock and waits for st/b, which W (node2) holds;
# once node1 has published P's wait, with P's node of st/a, node1's worker
# is stopped (SIGSTOP), so the publication stays as it is while node1's
# session lives.  P's node of st/a is then deleted from outside (a
# ZooKeeper client: what zk_lock_force_release does, whether it deletes at
# once or after waiting for the stopped holder's instance); H (node2) takes
# st/a and W asks for st/a behind H.  P holds nothing: there is no cycle,
# and W must end by its lock_timeout (55P03), not as a deadlock's victim
# (40P01 with "held by node1:P" in DETAIL: the published node was taken as
# a holder).  The victim checks each edge another instance published
# against ZooKeeper before it acts, so the stale edge is seen gone (logged).
# A real cycle through the same stopped worker's publication is still
# broken: Q (node1) holds st/c and waits for st/d, which X (node2) holds;
# X asks for st/c: X, the youngest, gets 40P01 while node1's worker is
# stopped.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $conf = "zklock.deadlock_timeout = '1s'";
my $wait_s = 6;
my $hosts = zk_start();
my $node1 = zk_node('node1', extra_conf => $conf, session_timeout => '40s');
my $node2 = zk_node('node2', extra_conf => $conf, session_timeout => '40s');

my $sid1 = zk_session_id($node1);
my $p = zk_session_as($node1, 'P');
my $q = zk_session_as($node1, 'Q');
my $w = zk_session_as($node2, 'W');
my $h = zk_session_as($node2, 'H');
my $x = zk_session_as($node2, 'X');
my ($ppid, $qpid) = ($p->pid, $q->pid);

$p->query_ok(q{SELECT zk_lock_acquire_session('st/a') IS NOT NULL});
zk_hold($w, 'st/b');
zk_ask($p, 'st/b');
zk_hold($q, 'st/c');
zk_hold($x, 'st/d');
zk_ask($q, 'st/d');
ok(zk_wait_published($sid1, [ $ppid, $qpid ]),
	'node1 publishes the waits of P and Q');
my $pub = zk_published($sid1) // '';
like($pub, qr{^h\t$ppid\tst/a/}m, 'with P\'s node of st/a');
my @pnode = zk_lock_nodes(zk_path('st/a'));
is(scalar @pnode, 1, 'st/a has one lock node, P\'s');

my $worker = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
ok(kill('STOP', $worker), 'node1\'s worker is stopped');

# A real cycle through the stopped worker's publication is broken
my $t0 = time;
zk_ask($x, 'st/c');
my $rx = zk_result_is($x, '40P01',
	'X, on a real cycle with Q, is its victim while node1\'s worker is stopped',
	20);
note(sprintf('X: 40P01 after %.2f s', time - $t0));
like($rx ? $rx->{err} // '' : '', qr/node1:$qpid waits for EXCLUSIVE lock on resource "st\/d"/,
	'DETAIL names Q\'s wait');
$x->query_ok('ROLLBACK');

# P's node of st/a is deleted from outside: P holds nothing
my $off2 = -s $node2->logfile;
my ($rc, undef, $err) = ZkLockTest::zkutil('delete-r', $pnode[0]);
is($rc, 0, 'P\'s node of st/a deleted from outside') or diag($err);
like(zk_published($sid1) // '', qr{^h\t$ppid\tst/a/}m,
	'node1\'s stopped worker still publishes it');
zk_hold($h, 'st/a');
$w->query_ok("SET LOCAL lock_timeout = '${wait_s}s'");
$t0 = time;
zk_ask($w, 'st/a');
my $rw = zk_result_is($w, '55P03', 'W (behind H, P holds nothing) is no deadlock victim',
	$wait_s + 20);
note(sprintf('W: %s after %.2f s: %s', $rw ? $rw->{sqlstate} : 'no answer',
		time - $t0, $rw ? $rw->{err} // '' : ''));
unlike($rw ? $rw->{err} // '' : '', qr/deadlock/, 'no deadlock in W\'s error');
like(slurp_file($node2->logfile, $off2),
	qr/deadlock found by process \d+ is none: a node of resource "st\/a" on its cycle is gone/,
	'node2\'s log: the stale edge was seen gone');

ok(kill('CONT', $worker), 'node1\'s worker goes on');
$w->query_ok('ROLLBACK');
ok(defined $p->wait(20), 'P is granted st/b once W rolled back');
ok(defined $q->wait(20), 'Q is granted st/d once X rolled back');
$q->query_ok('COMMIT');
$h->query_ok('COMMIT');
$_->quit for ($p, $q, $w, $h, $x);
done_testing();
