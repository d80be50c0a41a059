
# A reviewer's attacks on the deadlock detector (issue 19, doc/deadlocks.md,
# shared/REVIEW.md):
#  - two requests of one instance sent in one worker pass go to ZooKeeper
#    as one multi and so share a czxid: a cycle between them must still
#    have exactly one victim (the victim rule needs a tie-break every
#    instance applies alike)
#  - a role without rights fills its instance's publication (cut at
#    512 kB) with its own nodes: another role's deadlock is broken still
#  - an unprivileged victim that asks for LOG messages on its connection
#    (client_min_messages = log) sees no other role's pid
#  - an unprivileged role cannot name the internal node zklock.waits
#  - timeouts that differ between instances: one victim, the cycle broken
#  - zklock.deadlock_timeout by SET: refused to a role without rights; a
#    superuser's SET is what that session's wait uses
#  - the extension in two databases of one instance: one victim
#  - the victim cancelled or terminated while it verifies: the other goes
#    on, nothing left
#  - statement_timeout while a search waits for its stopped worker: bounded,
#    nothing left
#  - a search is bounded by the wait's own timeout (the worker stopped)
#  - zk_lock_force_release (superuser) cannot remove zklock.waits
#  - a wait searched many times, then cancelled, leaves no entry
#  - a failed delete of the publication is tried again: no stale node,
#    no false victim from it
#  - an explicit request's wait on a cycle: the victim, its node gone
#  - nothing left behind: no waits node, no entry in use
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $hosts = zk_start();
my $node1 = zk_node('node1', extra_conf => "zklock.deadlock_timeout = '1s'");
my $node2 = zk_node('node2', extra_conf => "zklock.deadlock_timeout = '3s'");

for my $n ($node1, $node2)
{
	$n->safe_psql('postgres', q{
		CREATE ROLE alice LOGIN;
		CREATE ROLE bob LOGIN;
	});
}

# ---------------------------------------------------------------------------
# A role without rights hides another role's deadlock by the size of the
# publication: node3's only publication is cut at 512 kB; alice holds
# 1900 locks with long names and has one long wait, so her nodes fill the
# cut before those of bob's backend that come after hers in the table
# (node3 is fresh: entries are taken in order).  bob's cross deadlock
# between node3 and node1 must still be broken (node1's member, the
# youngest, needs node3's publication of the lock bob holds there).  The
# per-backend allowance is raised here only to need few sessions: with the
# default 32, some sixty of alice's backends do the same.
{
	my $node3 = zk_node('node3', extra_conf => "zklock.deadlock_timeout = '1s'\n"
		  . "zklock.max_locks_per_backend = 2000\nzklock.max_locks = 5000");
	$node3->safe_psql('postgres', 'CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN;');
	my $hog = zk_session_as($node3, 'hog', 'alice');
	$hog->query_ok(q{SELECT count(*) FROM unnest(zk_lock_acquire_all_session(
		ARRAY(SELECT 'hog' || i || repeat('x', 240) FROM generate_series(1, 1900) i)))}, 120);
	my $blocker = zk_session_as($node3, 'blocker', 'alice');
	$blocker->query_ok(q{SELECT zk_lock_acquire_session('hogwait') IS NOT NULL});
	my $a = zk_session_as($node3, 'hide_a', 'bob');
	my $b = zk_session_as($node1, 'hide_b', 'bob');
	zk_hold($a, 'hide/orders');
	zk_hold($b, 'hide/customers');
	zk_ask($hog, 'hogwait');
	zk_ask($a, 'hide/customers');
	zk_ask($b, 'hide/orders');
	my $rb = $b->wait(15);
	my $ra = defined $rb ? $a->wait(15) : undef;
	is($rb && $rb->{sqlstate}, '40P01',
		'a full publication hides no other role\'s deadlock: the youngest is the victim');
	unless (defined $rb)
	{
		psql1($node1, 'SELECT pg_cancel_backend(' . $b->pid . ')');
		$b->wait(20);
		$ra = $a->wait(20);
	}
	is($ra && $ra->{sqlstate}, '00000', 'the other member is granted');
	$_->query_ok('ROLLBACK') for ($a, $b);
	$blocker->query_ok('SELECT zk_lock_release_all()');
	$hog->wait(20);
	$hog->query_ok('SELECT zk_lock_release_all()', 60);
	$_->quit for ($a, $b, $hog, $blocker);
	ok(zk_wait_no_entries($node3, 30), 'node3: no entry in use');
	$node3->stop;
}

# ---------------------------------------------------------------------------
# One pass, one multi, one czxid: node1's worker is stopped while both
# members of a cross deadlock on node1 send their second request, so both
# creates leave in the same multi (two resources at the top: no parent in
# common) and get the same czxid.  Each member's search finds the cycle
# (the failpoint holds a verifying victim for a second before it
# withdraws, so that the other's search runs meanwhile): exactly one
# 40P01 all the same.
{
	ok(zk_set_failpoints($node1, 'deadlock-before-withdraw=sleep:1500'),
		'failpoint set on node1');
	my $off = -s $node1->logfile;
	my $sid = zk_session_id($node1);
	my $a = zk_session_as($node1, 'tie_a');
	my $b = zk_session_as($node1, 'tie_b');
	zk_hold($a, 'tie1');
	zk_hold($b, 'tie2');
	my $worker = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
	kill 'STOP', $worker;
	$a->send(q{SELECT zk_lock_acquire('tie2') IS NOT NULL});
	$b->send(q{SELECT zk_lock_acquire('tie1') IS NOT NULL});
	sleep(0.3);
	kill 'CONT', $worker;
	my ($apid, $bpid) = ($a->pid, $b->pid);
	my %cz;
	wait_until(sub {
			%cz = ((zk_published($sid) // '') =~ /^w\t(\d+)\t(\d+)\t/mg);
			defined $cz{$apid} && defined $cz{$bpid};
		}, timeout => 5, interval => 0.05);
	ok(defined $cz{$apid} && defined $cz{$bpid} && $cz{$apid} == $cz{$bpid},
		'precondition: both waits published with one czxid (one multi)')
	  or diag(explain(\%cz));
	my $ra = $a->wait(30);
	my $rb = $b->wait(30);
	ok(defined $ra && defined $rb, 'both requests were answered');
	my @states = sort map { $_ ? $_->{sqlstate} : 'none' } ($ra, $rb);
	is_deeply(\@states, [ '00000', '40P01' ],
		'a tie of czxids: exactly one victim, the other granted');
	is(zk_log_count($node1, qr/deadlock broken/, $off), 1, 'one break logged');
	$_->query_ok('ROLLBACK') for ($a, $b);
	$_->quit for ($a, $b);
	ok(zk_set_failpoints($node1, ''), 'failpoint cleared');
}

# ---------------------------------------------------------------------------
# An unprivileged victim with client_min_messages = log: what reaches its
# client names no pid of another role's backend (the LOG lines' details
# stay in the server log).
{
	my $a = zk_session_as($node1, 'mask_a', 'bob');
	my $b = zk_session_as($node2, 'mask_b', 'alice');
	$b->query_ok('SET client_min_messages = log');
	zk_cross($a, $b, 'mask/orders', 'mask/customers');
	my $rb = zk_result_is($b, '40P01', 'the youngest (alice on node2) is the victim', 30);
	zk_result_is($a, '00000', 'bob is granted', 30);
	my $apid = $a->pid;
	my $seen = ($rb ? $rb->{err} . $rb->{out} : '');
	unlike($seen, qr/\b$apid\b/, 'alice\'s client never sees bob\'s pid');
	like($seen, qr/node1:\? waits for/, 'her DETAIL masks it');
	$b->query_ok('ROLLBACK');
	$a->query_ok('COMMIT');
	$_->quit for ($a, $b);
}

# ---------------------------------------------------------------------------
# The internal node cannot be named by a role
{
	my ($rc, $out, $err) = $node1->psql('postgres',
		q{SELECT zk_lock_acquire('zklock.waits/0000000000000001')},
		extra_params => [ '-U', 'alice' ]);
	isnt($rc, 0, 'zklock.waits is not a resource name');
	like($err, qr/zklock\./, 'the error names the reserved prefix');
	# a resource name with a line break would forge a line of the
	# publication (a wait, a hold) that makes another's backend a victim
	($rc, $out, $err) = $node1->psql('postgres',
		qq{SELECT zk_lock_acquire(E'inj\\nw\\t1\\t99\\tE\\tbob\\tinj/x')},
		extra_params => [ '-U', 'alice' ]);
	isnt($rc, 0, 'a resource name with a line break or a tab is refused');
}

# ---------------------------------------------------------------------------
# Timeouts differ (node1 1 s, node2 3 s): the cycle is broken once node2's
# member has waited its own timeout, with one victim.
{
	my $a = zk_session_as($node1, 'diff_a');
	my $b = zk_session_as($node2, 'diff_b');
	zk_hold($a, 'diff/orders');
	zk_hold($b, 'diff/customers');
	zk_ask($b, 'diff/orders');
	my $t0 = time();
	zk_ask($a, 'diff/customers');
	my $ra = $a->wait(30);
	my $rb = $b->wait(30);
	my @states = sort map { $_ ? $_->{sqlstate} : 'none' } ($ra, $rb);
	is_deeply(\@states, [ '00000', '40P01' ], 'differing timeouts: one victim');
	is($ra && $ra->{sqlstate}, '40P01', 'the youngest (node1\'s) is the victim');
	ok(time() - $t0 < 2 * 3 + 6, 'broken within twice the longer timeout + 6 s');
	$_->query_ok('ROLLBACK') for ($a, $b);
	$_->quit for ($a, $b);
}

# ---------------------------------------------------------------------------
# zklock.deadlock_timeout by SET: refused to a role without rights (as
# core's deadlock_timeout); a superuser's SET in one session is what that
# session's wait uses (node2's 3 s configured, 500 ms set: broken before
# node2's own timeout could have published the wait).
{
	my ($rc, $out, $err) = $node2->psql('postgres',
		q{SET zklock.deadlock_timeout = 0},
		extra_params => [ '-U', 'alice' ]);
	like($err, qr/permission denied/, 'an unprivileged SET of zklock.deadlock_timeout is refused');
	my $a = zk_session_as($node1, 'set_a');
	my $b = zk_session_as($node2, 'set_b');
	$b->query_ok(q{SET zklock.deadlock_timeout = '500ms'});
	my $t0 = zk_cross($a, $b, 'set/orders', 'set/customers');
	my $rb = $b->wait(30);
	my $ra = $a->wait(30);
	my $took = time() - $t0;
	is($rb && $rb->{sqlstate}, '40P01', 'SET: the youngest (node2\'s) is the victim');
	is($ra && $ra->{sqlstate}, '00000', 'SET: the other is granted');
	ok($took < 3, 'SET: broken before node2\'s configured 3 s (took ' . sprintf('%.1f', $took) . ' s)');
	$_->query_ok('ROLLBACK') for ($a, $b);
	$_->quit for ($a, $b);
}

# ---------------------------------------------------------------------------
# The extension in two databases of one instance: a cycle between them has
# one victim.
{
	$node1->safe_psql('postgres', 'CREATE DATABASE db2');
	$node1->safe_psql('db2', 'CREATE EXTENSION zklock');
	my $a = zk_session_as($node1, 'db_a');
	my $b = zk_session_as($node1, 'db_b', undef, dbname => 'db2');
	zk_cross($a, $b, 'dbs/orders', 'dbs/customers');
	zk_result_is($b, '40P01', 'two databases: the youngest is the victim', 30);
	zk_result_is($a, '00000', 'two databases: the other is granted', 30);
	$_->query_ok('ROLLBACK') for ($a, $b);
	$_->quit for ($a, $b);
}

# ---------------------------------------------------------------------------
# The victim is cancelled, then another terminated, while it verifies
# (failpoint): the other member goes on, nothing is left.
{
	ok(zk_set_failpoints($node2, 'deadlock-before-withdraw=sleep:2000'),
		'failpoint set on node2');
	for my $how ('pg_cancel_backend', 'pg_terminate_backend')
	{
		my $off2 = -s $node2->logfile;
		my $a = zk_session_as($node1, "v_$how" . '_a');
		my $b = zk_session_as($node2, "v_$how" . '_b');
		zk_cross($a, $b, "v/$how/orders", "v/$how/customers");
		ok(zk_wait_log($node2, qr/failpoint "deadlock-before-withdraw" reached/, $off2, 15),
			"$how: the victim verifies");
		psql1($node2, "SELECT $how(" . $b->pid . ')');
		my $rb = $b->wait(20);
		my $ra = $a->wait(20);
		ok($rb && ($rb->{exited} || $rb->{sqlstate} =~ /^(57014|40P01|57P01)$/),
			"$how: the victim ends with an error");
		is($ra && $ra->{sqlstate}, '00000', "$how: the other is granted");
		$a->query_ok('ROLLBACK');
		$_->quit for ($a, $b);
		ok(zk_wait_no_entries($node2, 15), "$how: no entry of node2 in use");
	}
	ok(zk_set_failpoints($node2, ''), 'failpoint cleared');
}

# ---------------------------------------------------------------------------
# statement_timeout while a search waits for its read (node1's worker
# stopped): the statement ends within its timeout plus a bound, and once
# the worker runs again nothing of the wait or of the search is left.
{
	my $h = zk_session_as($node1, 'st_h');
	my $w = zk_session_as($node1, 'st_w');
	zk_hold($h, 'st/r');
	$w->query_ok(q{SET statement_timeout = '3s'});
	$w->query_ok('BEGIN');
	my $t0 = time();
	zk_ask($w, 'st/r');
	sleep(1.6);			# the first search (at 1 s) is done; the next is at 2 s
	my $worker = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
	kill 'STOP', $worker;
	my $rw = $w->wait(20);
	my $took = time() - $t0;
	kill 'CONT', $worker;
	is($rw && $rw->{sqlstate}, '57014', 'statement_timeout ends the wait and its search');
	ok($took < 3 + 3, 'within the statement timeout + 3 s (took ' . sprintf('%.1f', $took) . ' s)');
	$w->query_ok('ROLLBACK');
	$h->query_ok('COMMIT');
	$_->quit for ($h, $w);
}

# ---------------------------------------------------------------------------
# A search is bounded by the wait's own timeout too: a superuser's 5 s
# zklock.deadlock_timeout, a 6 s timeout of the call, node1's worker
# stopped just before the search: the call ends near its 6 s, not at the
# search's own bound (5 s + 5 s).
{
	my $h = zk_session_as($node1, 'own_h');
	my $w = zk_session_as($node1, 'own_w');
	zk_hold($h, 'own/r');
	$w->query_ok(q{SET zklock.deadlock_timeout = '5s'});
	$w->query_ok('BEGIN');
	my $t0 = time();
	zk_ask($w, q{own/r', timeout => '6s});
	sleep(4.3 - (time() - $t0));
	my $worker = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
	kill 'STOP', $worker;
	my $rw = $w->wait(30);
	my $took = time() - $t0;
	kill 'CONT', $worker;
	ok($rw && $rw->{sqlstate} ne '00000', 'the call fails (its timeout, or the stopped worker)');
	ok($took < 6 + 2.5, 'within the call\'s timeout + 2.5 s (took ' . sprintf('%.1f', $took) . ' s)');
	$w->query_ok('ROLLBACK');
	$h->query_ok('ROLLBACK');	# its lease may have run out meanwhile
	zk_wait_connected($node1);
	$_->quit for ($h, $w);
}

# ---------------------------------------------------------------------------
# The internal node is not a resource for the administrative functions
# either: a superuser's force release of zklock.waits removes nothing.
{
	my $a = zk_session_as($node1, 'fr_a');
	my $b = zk_session_as($node1, 'fr_b');
	zk_hold($a, 'fr/r');
	zk_ask($b, 'fr/r');
	my $sid = zk_session_id($node1);
	ok(wait_until(sub { defined zk_published($sid) }, timeout => 10),
		'node1 publishes its long wait');
	my ($rc, $out, $err) = $node1->psql('postgres',
		qq{SELECT zk_lock_force_release('zklock.waits', '$sid')});
	isnt($rc, 0, 'zk_lock_force_release refuses zklock.waits');
	ok(defined zk_published($sid), 'the publication is still there');
	$a->query_ok('COMMIT');
	is($b->wait(20)->{sqlstate}, '00000', 'the waiter is granted');
	$b->query_ok('COMMIT');
	$_->quit for ($a, $b);
}

# ---------------------------------------------------------------------------
# What grows with use: a wait searched some twenty times (a superuser's
# 100 ms timeout), then cancelled, leaves no entry in use (the worker's
# loop does not answer pg_log_backend_memory_contexts, so its read
# contexts are not counted here).
{
	my $h = zk_session_as($node1, 'grow_h');
	my $w = zk_session_as($node1, 'grow_w');
	zk_hold($h, 'grow/r');
	$w->query_ok(q{SET zklock.deadlock_timeout = '100ms'});
	zk_ask($w, 'grow/r');
	sleep(2.5);
	psql1($node1, 'SELECT pg_cancel_backend(' . $w->pid . ')');
	is($w->wait(20)->{sqlstate}, '57014', 'the searching wait is cancelled');
	$h->query_ok('COMMIT');
	ok(zk_wait_no_entries($node1, 15), 'no entry in use after the searches');
	$_->quit for ($h, $w);
}

# ---------------------------------------------------------------------------
# A delete of the publication that fails is tried again: else the node
# stays, stale, and its old wait makes a false cycle.  node2's backend P
# held st/r2 and waited past the timeout for st/r, held by node1's Q; P
# is cancelled while the waits parent refuses deletes (its ACL, set by
# the test: as a delete lost with the connection would leave it).  Once
# deletes are allowed again, node2's node must go; and when Q later waits
# for st/r2 behind a merely slow holder Z, Q is no victim.
sub waits_parent_acl
{
	my ($perms) = @_;
	my $code = q{
import sys
from kazoo.client import KazooClient
from kazoo.security import make_acl
zk = KazooClient(hosts=sys.argv[1]); zk.start(timeout=10)
p = sys.argv[3]
zk.set_acls(sys.argv[2], [make_acl("world", "anyone", read="r" in p, write="w" in p,
	create="c" in p, delete="d" in p, admin="a" in p)])
zk.stop()
};
	my ($out, $err);
	IPC::Run::run([ $ENV{ZKLOCK_TEST_PYTHON} // '/usr/bin/python3', '-c', $code,
			zk_hosts(), zk_path('zklock.waits'), $perms ],
		'>', \$out, '2>', \$err);
	return $? == 0 ? 1 : (diag($err), 0);
}
{
	my $sid2 = zk_session_id($node2);
	my $q = zk_session_as($node1, 'stale_q');
	my $pp = zk_session_as($node2, 'stale_p');
	$pp->query_ok(q{SET zklock.deadlock_timeout = '1s'});
	zk_hold($q, 'stale/r');
	zk_hold($pp, 'stale/r2');
	zk_ask($pp, 'stale/r');
	my $ppid = $pp->pid;
	ok(zk_wait_published($sid2, [ $ppid ]), 'node2 publishes P\'s wait');
	ok(waits_parent_acl('rwca'), 'the waits parent refuses deletes');
	my $off2 = -s $node2->logfile;
	psql1($node2, "SELECT pg_cancel_backend($ppid)");
	is($pp->wait(20)->{sqlstate}, '57014', 'P is cancelled');
	$pp->query_ok('ROLLBACK');
	ok(zk_wait_log($node2, qr/could not publish this instance's long waits/, $off2),
		'node2\'s delete of its publication failed');
	ok(waits_parent_acl('rwcda'), 'deletes are allowed again');
	ok(wait_until(sub { !defined zk_published($sid2) }, timeout => 10),
		'node2\'s publication goes once its delete can succeed');
	my $z = zk_session_as($node1, 'stale_z');
	zk_hold($z, 'stale/r2');
	zk_ask($q, 'stale/r2');
	sleep(3.5);
	$z->query_ok('COMMIT');
	my $rq = $q->wait(20);
	is($rq && $rq->{sqlstate}, '00000', 'Q, behind a slow holder, is no victim');
	$q->query_ok('ROLLBACK');
	$_->quit for ($q, $pp, $z);
}

# ---------------------------------------------------------------------------
# An explicit (persistent) request's wait on a cycle: as the youngest it is
# the victim, and its persistent node goes with its withdrawal.
{
	my $a = zk_session_as($node1, 'ex_a');
	my $b = zk_session_as($node2, 'ex_b');
	zk_hold($a, 'exd/a');
	zk_hold($b, 'exd/b');
	zk_ask($b, 'exd/a');
	$a->send(q{SELECT zk_lock_acquire_explicit('exd/b', ttl => '1 hour') IS NOT NULL});
	ok(wait_for_waiting($node1, $a->pid), 'a waits for exd/b, explicitly');
	zk_result_is($a, '40P01', 'the explicit request, the youngest, is the victim', 30);
	zk_result_is($b, '00000', 'the other is granted', 30);
	$a->query_ok('ROLLBACK');
	$b->query_ok('COMMIT');
	ok(zk_wait_no_locks(zk_path('exd/b'), 10), 'no persistent node of the victim is left');
	$_->quit for ($a, $b);
}

# ---------------------------------------------------------------------------
# Nothing left behind
zk_deadlock_done_check($node1, $node2);

zk_done_check();
done_testing();
