
# Issue 28, finding 3, second review: zk_lock_force_release (which now asks
# the holder's instance and waits for it) under faults (REVIEW.md classes
# 1, 2, 10, 13, 18).  node1 holds (its session outlives a stopped worker);
# node2 calls, through a proxy the test owns; node3 holds, through another.
#  (a) the caller cancelled (pg_cancel_backend) and (b) its statement_timeout,
#      while the holder's worker is stopped: 57014 at once, no entry nor
#      watch left on node2; the holder, asked already, still releases its
#      node once its worker runs again (lock lost).
#  (c) the caller cut off from ZooKeeper during the wait: 08006 within a
#      session timeout, never an endless wait; the holder still releases.
#  (d) the holder's instance cut off: its node goes with its session, which
#      ZooKeeper expires; the call returns 1 without a WARNING, before its
#      own bound (the window of an expired session, doc/safety.md).
#  (e) every kind of hold: transaction lock (its COMMIT then fails), session
#      lock, semaphore slot, advisory key, a parent's SHARED node, a lock
#      taken in a PL/pgSQL exception block; a holder on the caller's own
#      instance; the holder's ROLLBACK racing the request.
#  (f) 200 force releases with the holder taking the lock again each time:
#      no watch, entry or node left over (the worker's and the server's
#      counts), indexes reused all the while.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkChaos;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $SLACK = 5;    # a loaded 2-core machine

my $hosts = zk_start();
my ($zk_port) = $hosts =~ /:(\d+)$/;
my $px = ZkChaos::Proxy->start(
	links => [
		[ 'node2', PostgreSQL::Test::Cluster::get_free_port(), $zk_port ],
		[ 'node3', PostgreSQL::Test::Cluster::get_free_port(), $zk_port ]
	]);
my $node1 = zk_node('node1', session_timeout => '20s');
my $node2 = zk_node('node2', hosts => '127.0.0.1:' . $px->port('node2'));
my $node3 = zk_node('node3', hosts => '127.0.0.1:' . $px->port('node3'));

sub status_of
{
	my ($node, $col) = @_;
	return psql1($node, "SELECT $col FROM zk_lock_status");
}

sub lock_state
{
	my ($node, $res) = @_;
	return psql1($node,
		"SELECT coalesce(string_agg(state, ','), '') FROM zk_lock_local WHERE resource = '$res'");
}

my $entries2 = status_of($node2, 'entries_in_use');
my $watches2 = status_of($node2, 'watches');

# --- (a), (b): the caller gives up while the holder's worker is stopped ------
my $ha = zk_session($node1, 'holder_a');
$ha->query_ok(q{SELECT zk_lock_acquire_session('ff/a', parents => false) > 0});
my $hb = zk_session($node1, 'holder_b');
$hb->query_ok(q{SELECT zk_lock_acquire_session('ff/b', parents => false) > 0});
my ($anode) = zk_lock_nodes(zk_path('ff/a'));
my ($bnode) = zk_lock_nodes(zk_path('ff/b'));
my $worker1 = status_of($node1, 'worker_pid');
kill 'STOP', $worker1;

my $fa = zk_session($node2, 'cancelled');
$fa->send(q{SELECT zk_lock_force_release('ff/a')});
ok(wait_until(sub { (zkutil('get', $anode))[1] =~ /release=requested/ }, timeout => 20),
	'(a) the request is written into the stopped holder\'s node');
my $t = time();
$node2->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $fa->pid . ')');
my $r = $fa->wait(10);
is($r && $r->{sqlstate}, '57014', '(a) pg_cancel_backend: the caller gets 57014');
cmp_ok(time() - $t, '<', 2, '(a) at once');

my $fb = zk_session($node2, 'timed_out');
$fb->query_ok(q{SET statement_timeout = '1s'});
$t = time();
$r = $fb->query(q{SELECT zk_lock_force_release('ff/b')}, 20);
is($r->{sqlstate}, '57014', '(b) statement_timeout: the caller gets 57014');
cmp_ok(time() - $t, '<', 1 + 2, '(b) after its timeout, not the bound (8 s)');
like((zkutil('get', $bnode))[1], qr/release=requested/, '(b) the request was written');
# well before node2's bound (8 s from the requests), which would free them
ok(wait_until(sub { status_of($node2, 'entries_in_use') == $entries2 }, timeout => 3),
	'(a, b) no entry left on node2');
ok(wait_until(sub { status_of($node2, 'watches') == $watches2 }, timeout => 3),
	'(a, b) no watch left on node2')
  or diag('watches: ' . status_of($node2, 'watches') . " (was $watches2)");
sleep 9 - (time() - $t) if time() - $t < 9;
is(zk_count_locks(zk_path('ff/a')) + zk_count_locks(zk_path('ff/b')), 2,
	'(a, b) neither node deleted from outside, also after the bound');
kill 'CONT', $worker1;
ok(zk_wait_no_locks(zk_path('ff'), 20),
	'(a, b) the holder\'s instance, asked already, releases both nodes on its own');
is(lock_state($node1, 'ff/a') . '|' . lock_state($node1, 'ff/b'), 'lost|lost',
	'(a, b) and both locks are lost there');
$r = $ha->query(q{SELECT zk_lock_release('ff/a')});
like($r->{err}, qr/was lost/, '(a) the holder\'s release says so');
$hb->query(q{SELECT zk_lock_release('ff/b')});

# --- (c): the caller cut off during the wait ----------------------------------
$ha->query_ok(q{SELECT zk_lock_acquire_session('ff/c', parents => false) > 0});
my ($cnode) = zk_lock_nodes(zk_path('ff/c'));
kill 'STOP', $worker1;
my $fc = zk_session($node2, 'cut_caller');
$fc->send(q{SELECT zk_lock_force_release('ff/c')});
ok(wait_until(sub { (zkutil('get', $cnode))[1] =~ /release=requested/ }, timeout => 20),
	'(c) the request is written');
$px->cut('node2');
$t = time();
$r = $fc->wait(4 * 5 / 3 + $SLACK + 5);
ok($r, '(c) the caller\'s wait ends while it is cut off');
is($r && $r->{sqlstate}, '08006', '(c) with 08006');
note sprintf('(c) the cut caller returned after %.2f s', time() - $t);
cmp_ok(time() - $t, '<', 4 * 5 / 3 + $SLACK, '(c) within a session timeout of the silence');
is(zk_count_locks(zk_path('ff/c')), 1, '(c) the node was not deleted from outside');
kill 'CONT', $worker1;
ok(zk_wait_no_locks(zk_path('ff/c'), 20), '(c) the holder releases it on its own');
$ha->query(q{SELECT zk_lock_release('ff/c')});
$px->heal('node2');
ok(zk_wait_connected($node2), '(c) node2 connects again');
ok(wait_until(sub { status_of($node2, 'entries_in_use') == $entries2 }, timeout => 10),
	'(c) no entry left on node2');

# --- (d): the holder's instance cut off: the node goes with its session ------
my $h3 = zk_session($node3, 'cut_holder');
$h3->query_ok(q{SELECT zk_lock_acquire_session('ff/d', parents => false) > 0});
$px->cut('node3');
my $log2 = -s $node2->logfile;
$t = time();
$r = zk_session($node2, 'caller_d')->query(q{SELECT zk_lock_force_release('ff/d')}, 60);
my $took = time() - $t;
note sprintf('(d) force release of a cut-off holder returned after %.2f s', $took);
is($r->{out}, '1', '(d) it returns 1: the node went with the holder\'s expired session');
unlike($r->{err} // '', qr/WARNING/, '(d) without a WARNING: not deleted from outside');
ok(!$node2->log_contains(qr/did not release lock node/, $log2), '(d) nor one in the log');
cmp_ok($took, '<', 8 + $SLACK, '(d) within the bound');
$px->heal('node3');
ok(zk_wait_connected($node3), '(d) node3 connects again (a new session)');
$h3->query(q{SELECT zk_lock_release('ff/d')});
$h3->quit;

# --- (e): every kind of hold -------------------------------------------------
sub force1
{
	my ($res, $what, $node) = @_;
	$node //= $node2;
	my $t0 = time();
	my ($rc, $out, $err) = $node->psql('postgres',
		"SELECT zk_lock_force_release('$res')", timeout => 60);
	is($out, '1', "(e) $what: released");
	unlike($err, qr/WARNING/, "(e) $what: by its holder's instance (no WARNING)");
	cmp_ok(time() - $t0, '<', 6, "(e) $what: before the bound");
}

my $e = zk_session($node1, 'kinds');
# a transaction lock: the transaction can no longer commit
$e->query_ok('BEGIN');
$e->query_ok(q{SELECT zk_lock_acquire('ff/e/x') > 0});
force1('ff/e/x', 'transaction lock');
is(lock_state($node1, 'ff/e/x'), 'lost', '(e) transaction lock: lost');
$r = $e->query('COMMIT');
is($r->{sqlstate}, '55P03', '(e) transaction lock: its COMMIT fails');
# its parent's SHARED node, taken with it
$e->query_ok('BEGIN');
$e->query_ok(q{SELECT zk_lock_acquire('ff/e/y') > 0});
force1('ff/e', 'a parent\'s SHARED node');
is(lock_state($node1, 'ff/e'), 'lost', '(e) the parent\'s lock: lost');
$r = $e->query('COMMIT');
is($r->{sqlstate}, '55P03', '(e) the parent\'s lock: the COMMIT fails');
ok(zk_wait_no_locks(zk_path('ff/e'), 20), '(e) nothing left under ff/e');
# a semaphore slot
$e->query_ok(q{SELECT zk_semaphore_acquire_session('ff/sem', 3) > 0});
force1('ff/sem', 'semaphore slot');
is(lock_state($node1, 'ff/sem'), 'lost', '(e) semaphore slot: lost');
$e->query(q{SELECT zk_semaphore_release('ff/sem')});
# an advisory key
$e->query_ok(q{SELECT zk_advisory_lock(112)});
my $adv = psql1($node1, q{SELECT resource FROM zk_lock_local WHERE resource LIKE 'zklock.advisory/%/112'});
force1($adv, 'advisory key');
is(lock_state($node1, $adv), 'lost', '(e) advisory key: lost');
$e->query('SELECT zk_advisory_unlock(112)');
# a lock taken in a PL/pgSQL exception block, held past it
$e->query_ok('BEGIN');
$e->query_ok(q{DO $$ BEGIN PERFORM zk_lock_acquire('ff/blk', parents => false);
  PERFORM 1/0; EXCEPTION WHEN division_by_zero THEN NULL; END $$});
is(lock_state($node1, 'ff/blk'), '', '(e) exception block: its lock went with the subtransaction');
$e->query_ok(q{DO $$ BEGIN PERFORM zk_lock_acquire('ff/blk', parents => false);
  EXCEPTION WHEN others THEN NULL; END $$});
$e->query_ok(q{CREATE TEMP TABLE blk AS SELECT 1 AS v});
force1('ff/blk', 'lock taken in an exception block');
$r = $e->query('COMMIT');
is($r->{sqlstate}, '55P03', '(e) exception block: the COMMIT fails');
# a holder on the caller's own instance (one session, one mailbox)
my $same = zk_session($node2, 'same_instance');
$same->query_ok(q{SELECT zk_lock_acquire_session('ff/same', parents => false) > 0});
force1('ff/same', 'a holder on the caller\'s instance');
is(lock_state($node2, 'ff/same'), 'lost', '(e) same instance: lost');
$same->query(q{SELECT zk_lock_release('ff/same')});
$same->quit;
# the holder's ROLLBACK racing the request
my $racer = zk_session($node2, 'racer');
for my $i (1 .. 5)
{
	$e->query_ok('BEGIN');
	$e->query_ok(q{SELECT zk_lock_acquire('ff/race', parents => false) > 0});
	$t = time();
	$racer->send(q{SELECT zk_lock_force_release('ff/race')});
	sleep(0.002 * $i);
	$e->query_ok('ROLLBACK');
	$r = $racer->wait(30);
	ok($r && $r->{out} =~ /^[01]$/ && ($r->{err} // '') !~ /WARNING/,
		"(e) ROLLBACK racing the request ($i): 0 or 1, no WARNING")
	  or diag explain $r;
	cmp_ok(time() - $t, '<', 6, "(e) ROLLBACK racing the request ($i): before the bound");
}
$racer->quit;
ok(zk_wait_no_locks(zk_path('ff'), 20), '(e) no lock node left under ff');
ok(wait_until(sub { status_of($node1, 'entries_in_use') == 0 }, timeout => 10),
	'(e) no entry left on node1');

# --- (f): 200 force releases, the holder taking the lock again each time ----
my $N = 200;
my $watches1 = status_of($node1, 'watches');
$watches2 = status_of($node2, 'watches');
my $server = zk_mntr()->{zk_watch_count};
my $caller = zk_session($node2, 'loop_caller');
my $bad = 0;
$t = time();
for my $i (1 .. $N)
{
	my $tx = $i % 2;
	$e->query_ok($tx ? 'BEGIN' : 'SELECT 1');
	$e->query_ok($tx ? q{SELECT zk_lock_acquire('ff/loop', parents => false) > 0}
		: q{SELECT zk_lock_acquire_session('ff/loop', parents => false) > 0});
	$r = $caller->query(q{SELECT zk_lock_force_release('ff/loop')}, 30);
	$bad++, diag("loop $i: " . explain($r))
	  unless $r->{out} eq '1' && ($r->{err} // '') !~ /WARNING/;
	$e->query($tx ? 'ROLLBACK' : q{SELECT zk_lock_release('ff/loop')});
	last if $bad > 3;
}
note sprintf('(f) %d force releases in %.1f s', $N, time() - $t);
is($bad, 0, "(f) $N force releases, each by the holder's instance");
ok(zk_wait_no_locks(zk_path('ff'), 20), '(f) no lock node left');
ok(wait_until(sub { status_of($node1, 'watches') <= $watches1 }, timeout => 20),
	'(f) no watch left on the holder\'s worker')
  or diag('node1 watches ' . status_of($node1, 'watches') . " (was $watches1)");
ok(wait_until(sub { status_of($node2, 'watches') <= $watches2 }, timeout => 20),
	'(f) no watch left on the caller\'s worker')
  or diag('node2 watches ' . status_of($node2, 'watches') . " (was $watches2)");
ok(wait_until(sub { zk_mntr()->{zk_watch_count} <= $server }, timeout => 20),
	'(f) no watch left on the server (mntr zk_watch_count)')
  or diag('server watches ' . zk_mntr()->{zk_watch_count} . " (was $server)");
ok(wait_until(sub { status_of($node1, 'entries_in_use') == 0
			&& status_of($node2, 'entries_in_use') == $entries2 }, timeout => 10),
	'(f) no entry left on either');

$_->quit for ($ha, $hb, $fa, $fb, $fc, $e, $caller);
zk_done_check();
done_testing();
