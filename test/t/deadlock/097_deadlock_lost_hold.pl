
# A lost hold is no holder for the deadlock search (issue 28, finding 2;
# doc/deadlocks.md): a backend whose lock node another instance's superuser
# removed (zk_lock_force_release) holds nothing, so a wait "behind" that
# gone node is no edge to it, in the local search (this instance's table)
# and in the publication of long waits (the other instances' view).
#  - local: L (node1) held dl/r as a session lock; it is force-released
#    from node2, where H takes it and holds it; W (node1) holds a row and
#    waits for dl/r behind H; L waits for W's row.  No cycle: W is no
#    victim, its lock_timeout ends its wait (55P03, not 40P01).
#  - published: L2 (node1) holds dl/p as a session lock and waits for dl/q,
#    which W2 (node2) holds: node1 publishes the wait and L2's node of
#    dl/p.  dl/p is force-released from node2 (L2 waits on: a lost lock
#    is reported at its next acquire or release), H2 (node2) takes it:
#    node1's publication then lists no node of the lost hold; W2 waits for
#    dl/p behind H2: no cycle, W2 ends by its lock_timeout (55P03).
#  - a semaphore's cycle names the semaphore in DETAIL ("waits for
#    semaphore "x" (limit 1)"), not an EXCLUSIVE lock.
# Either way force release works (it deletes the node itself, or it waits
# for the holder's instance to delete it), the hold is lost on node1.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $timeout_s = 1;
my $conf = "zklock.deadlock_timeout = '${timeout_s}s'";
my $hosts = zk_start();
my $node1 = zk_node('node1', extra_conf => $conf);
my $node2 = zk_node('node2', extra_conf => $conf);

for my $n ($node1, $node2)
{
	$n->safe_psql('postgres', q{
		CREATE TABLE t (id int PRIMARY KEY, v int);
		INSERT INTO t VALUES (1, 0);
	});
}

# W's wait: long enough for several searches (at 1, 2 and 4 timeouts)
my $wait_s = 6;

# The state of a backend's entry for $res in zk_lock_local
sub local_state
{
	my ($node, $pid, $res) = @_;
	return psql1($node, "SELECT coalesce(string_agg(state, ','), '') FROM zk_lock_local"
		  . " WHERE pid = $pid AND resource = '$res'");
}

# A superuser on node2 removes the node of $s (on node1, holding $res as a
# session lock); $s's hold is then lost on node1.
sub lose_hold
{
	my ($s, $res) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $admin = zk_session($node2, "admin_$res");
	my $r = $admin->query("SELECT zk_lock_force_release('$res')", 30);
	is($r->{sqlstate}, '00000', "a superuser on node2 force-releases $res");
	$admin->quit;
	ok(wait_until(sub { local_state($node1, $s->pid, $res) eq 'lost' },
		timeout => 20), $s->name . "'s hold of $res is lost on node1")
	  or diag('zk_lock_local: ' . local_state($node1, $s->pid, $res));
	return;
}

# ---------------------------------------------------------------------------
# The local search: the issue's scenario
{
	my $off1 = -s $node1->logfile;
	my $l = zk_session_as($node1, 'L');
	my $h = zk_session_as($node2, 'H');
	my $w = zk_session_as($node1, 'W');
	$l->query_ok(q{SELECT zk_lock_acquire_session('dl/r') IS NOT NULL});
	lose_hold($l, 'dl/r');
	zk_hold($h, 'dl/r');
	zk_hold_row($w, 1);
	$w->query_ok("SET LOCAL lock_timeout = '${wait_s}s'");
	zk_ask($w, 'dl/r');
	zk_ask_row($l, 'UPDATE t SET v = v + 10 WHERE id = 1', 'L waits for W\'s row');
	my $r = zk_result_is($w, '55P03',
		'W, behind H and L\'s lost node, is no deadlock victim: its lock_timeout ends the wait',
		$wait_s + 20);
	unlike($r ? $r->{err} : '', qr/deadlock/, 'no deadlock in W\'s error');
	my $wpid = $w->pid;
	is(zk_log_count($node1, qr/deadlock found by process $wpid\b/, $off1), 0,
		'node1\'s log has no cycle through W');
	$w->query_ok('ROLLBACK');
	ok(defined $l->wait(20), 'L\'s update ends once W rolled back');
	$h->query_ok('COMMIT');
	$_->quit for ($l, $h, $w);
}

# ---------------------------------------------------------------------------
# The published view: node1's publication, read by node2's search
{
	my $off2 = -s $node2->logfile;
	my $sid1 = zk_session_id($node1);
	my $l2 = zk_session_as($node1, 'L2');
	my $h2 = zk_session_as($node2, 'H2');
	my $w2 = zk_session_as($node2, 'W2');
	my $l2pid = $l2->pid;
	$l2->query_ok(q{SELECT zk_lock_acquire_session('dl/p') IS NOT NULL});
	zk_hold($w2, 'dl/q');
	zk_ask($l2, 'dl/q');
	ok(zk_wait_published($sid1, [$l2pid]), 'node1 publishes L2\'s long wait');
	like(zk_published($sid1) // '', qr{^h\t$l2pid\tdl/p/}m,
		'with L2\'s node of dl/p');
	lose_hold($l2, 'dl/p');
	zk_hold($h2, 'dl/p');
	my $pub;
	ok(wait_until(sub {
				$pub = zk_published($sid1) // '';
				$pub =~ /^w\t$l2pid\t/m && $pub !~ m{^h\t$l2pid\tdl/p/}m;
			},
			timeout => 10),
		'node1\'s publication lists L2\'s wait, and no node of its lost hold of dl/p')
	  or diag("published:\n$pub");
	$w2->query_ok("SET LOCAL lock_timeout = '${wait_s}s'");
	zk_ask($w2, 'dl/p');
	my $r = zk_result_is($w2, '55P03',
		'W2, behind H2 and L2\'s lost node, is no deadlock victim',
		$wait_s + 20);
	unlike($r ? $r->{err} : '', qr/deadlock/, 'no deadlock in W2\'s error');
	my $w2pid = $w2->pid;
	is(zk_log_count($node2, qr/deadlock found by process $w2pid\b/, $off2), 0,
		'node2\'s log has no cycle through W2');
	$w2->query_ok('ROLLBACK');
	ok(defined $l2->wait(20), 'L2\'s wait ends once W2 rolled back');
	$h2->query_ok('COMMIT');
	$_->quit for ($l2, $h2, $w2);
}

# ---------------------------------------------------------------------------
# A semaphore's cycle: DETAIL names the semaphores
{
	my $a = zk_session_as($node1, 'sem_a');
	my $b = zk_session_as($node2, 'sem_b');
	$a->query_ok('BEGIN');
	$a->query_ok(q{SELECT zk_semaphore_acquire('ds/one', 1) IS NOT NULL});
	$b->query_ok('BEGIN');
	$b->query_ok(q{SELECT zk_semaphore_acquire('ds/two', 1) IS NOT NULL});
	$a->send(q{SELECT zk_semaphore_acquire('ds/two', 1) IS NOT NULL});
	ok(wait_for_waiting($node1, $a->pid), 'a waits for ds/two');
	$b->send(q{SELECT zk_semaphore_acquire('ds/one', 1) IS NOT NULL});
	ok(wait_for_waiting($node2, $b->pid), 'b waits for ds/one');
	my $r = zk_result_is($b, '40P01', 'the youngest gets 40P01', 2 * $timeout_s + 16);
	my $err = $r ? $r->{err} : '';
	like($err, qr/node2:\d+ waits for semaphore "ds\/one" \(limit 1\) held by node1:\d+\./,
		'DETAIL: b waits for semaphore "ds/one" (limit 1)');
	like($err, qr/node1:\d+ waits for semaphore "ds\/two" \(limit 1\) held by node2:\d+\./,
		'DETAIL: a waits for semaphore "ds/two" (limit 1)');
	unlike($err, qr/EXCLUSIVE lock/, 'no semaphore is called an EXCLUSIVE lock')
	  or diag($err);
	zk_unwind($b, [ $a, 'a is granted' ]);
	$_->quit for ($a, $b);
}

zk_deadlock_done_check($node1, $node2);
zk_done_check();
done_testing();
