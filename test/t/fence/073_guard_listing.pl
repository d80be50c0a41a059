
# A cheaper guard (issue 18): a lock granted by a listing that showed its
# node alone is guarded by that listing's child watch, and a revocation of
# it reaches its instance through the session's mailbox
# (<root>/zklock.sessions/<session>), so an uncontended cycle costs
# ZooKeeper 3 requests (create, getChildren with a watch, delete), where
# the guard's getData made it 4.  The commit fence's promise stays whole:
#  (a) an uncontended EXCLUSIVE holder whose node another ZooKeeper client
#      deletes before COMMIT cannot commit, nothing it wrote is visible;
#  (b) the same for a SHARED holder alone;
#  (c) a holder alone when granted, then a waiter on the other instance
#      arrives (the child watch fires: the holder guards its own node), then
#      its node is deleted: COMMIT refused, the waiter granted;
#  (d) zk_lock_revoke ('cancel' and 'terminate') from the other instance of
#      an uncontended holder, with no waiter and with one: acted on;
#  (e) ZooKeeper's counters (mntr zk_packets_received and zk_packets_sent on
#      this test's own ZooKeeper, the idle rate measured here subtracted):
#      an uncontended flat cycle costs at most 3 requests and 4 packets sent;
#  (f) watches (mntr zk_watch_count: data and child watches, which wchs does
#      not count) do not grow over 1,000 contended SHARED and EXCLUSIVE
#      cycles on two instances, nor after a reconnection;
#  (g) an uncontended holder on an instance cut off from ZooKeeper (a proxy
#      that swallows bytes) whose node is deleted meanwhile: once its
#      connection is back (same session), the child watch the client sends
#      again fires, the lock is lost, COMMIT refused;
#  (h) a revocation written by a writer that posts no note to the mailbox
#      (a revoker of zklock 1.4, a shell) is not seen by a holder guarded
#      by its listing alone until its next contention, then acted on.
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
my $conf = "zklock.sweep_interval = '1h'";
# a session outlives a restart of ZooKeeper in (f)
my $node1 = zk_node('node1', session_timeout => '20s', extra_conf => $conf);
my $node2 = zk_node('node2', session_timeout => '20s', extra_conf => $conf);
$node1->safe_psql('postgres', 'CREATE TABLE guarded(v int)');

sub lost_count
{
	return psql1($node1, q{SELECT count(*) FROM zk_lock_local WHERE state = 'lost'});
}

# both workers' mailboxes are set up (each a data watch) before anything
ok( wait_until(sub { (zk_mntr()->{zk_watch_count} // -1) == 2 }, timeout => 20),
	'each worker watches its revocation mailbox (2 watches)');

# --- (a), (b): an uncontended holder's node deleted by another client -------
for my $mode ('exclusive', 'shared')
{
	my $res = "gl/alone_$mode";
	my $h = zk_session($node1, "holder-$mode");
	$h->query_ok('BEGIN');
	$h->query_ok(qq{SELECT zk_lock_acquire('$res', '$mode', parents => false)});
	$h->query_ok("INSERT INTO guarded VALUES (1)");
	my ($path) = zk_lock_nodes(zk_path($res));
	ok($path, "($mode) the holder's node is there, alone");
	my ($rc) = ZkLockTest::zkutil('delete-r', $path);
	is($rc, 0, "($mode) another ZooKeeper client deletes it");
	ok(wait_until(sub { lost_count() eq '1' }, timeout => 10),
		"($mode) the holder's instance sees it lost (the listing's watch)");
	my $r = $h->query('COMMIT');
	is($r->{sqlstate}, '55P03', "($mode) its COMMIT is refused");
	is(psql1($node1, 'SELECT count(*) FROM guarded'), '0', "($mode) nothing it wrote is visible");
	$h->quit;
}

# --- (c) alone when granted, then another instance arrives -------------------
{
	my $h = zk_session($node1, 'holder-c');
	$h->query_ok('BEGIN');
	$h->query_ok(q{SELECT zk_lock_acquire('gl/arrive', parents => false)});
	$h->query_ok("INSERT INTO guarded VALUES (2)");
	my ($path) = zk_lock_nodes(zk_path('gl/arrive'));
	my $w = zk_session($node2, 'waiter-c');
	$w->send(q{SELECT zk_lock_acquire_session('gl/arrive', parents => false) > 0});
	ok(wait_for_waiting($node2, $w->pid), '(c) a waiter on node2 waits');
	sleep(0.5);    # the holder's guard moves to its own node
	my ($rc) = ZkLockTest::zkutil('delete-r', $path);
	is($rc, 0, '(c) the holder\'s node is deleted by another client');
	ok(wait_until(sub { lost_count() eq '1' }, timeout => 10),
		'(c) the holder\'s instance sees it lost');
	my $r = $h->query('COMMIT');
	is($r->{sqlstate}, '55P03', '(c) its COMMIT is refused');
	is(psql1($node1, 'SELECT count(*) FROM guarded'), '0', '(c) nothing it wrote is visible');
	$r = $w->wait(20);
	is($r && $r->{out}, 't', '(c) the waiter is granted');
	$w->query_ok(q{SELECT zk_lock_release('gl/arrive')});
	$w->quit;
	$h->quit;
}

# --- (d) revocation of an uncontended holder --------------------------------
for my $action ('cancel', 'terminate')
{
	for my $with_waiter (0, 1)
	{
		my $label = "$action, " . ($with_waiter ? 'a waiter' : 'no waiter');
		my $res = "gl/rev_${action}_$with_waiter";
		my $h = zk_session($node1, "revoked-$action-$with_waiter");
		my $log_at = -s $node1->logfile;
		$h->send("BEGIN; SELECT zk_lock_acquire('$res', parents => false); SELECT pg_sleep(60);");
		ok( wait_until(
				sub {
					psql1($node1, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $h->pid) eq 'PgSleep';
				},
				timeout => 20),
			"($label) the holder sleeps with the lock, granted alone");
		my $w;
		if ($with_waiter)
		{
			$w = zk_session($node2, "waiter-$action");
			$w->send(qq{SELECT zk_lock_acquire_session('$res', parents => false) > 0});
			ok(wait_for_waiting($node2, $w->pid), "($label) a waiter on node2 waits");
		}
		is(psql1($node2, "SELECT zk_lock_revoke('$res', '$action')"), '1',
			"($label) node2 revokes it");
		ok(zk_wait_log($node1, qr/\Q$res\E\/[^"]*" was revoked/, $log_at),
			"($label) the holder's worker acts on it: \"was revoked\" logged");
		if ($action eq 'cancel')
		{
			my $r = $h->wait(20);
			is($r && $r->{sqlstate}, '57014', "($label) the holder's statement is canceled");
			$h->query('ROLLBACK');
			$h->quit;
		}
		else
		{
			my $pid = $h->pid;
			ok( wait_until(
					sub { psql1($node1, "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid") eq '0' },
					timeout => 20),
				"($label) the holder's session is terminated");
		}
		if ($w)
		{
			my $r = $w->wait(20);
			is($r && $r->{out}, 't', "($label) the waiter is granted");
			$w->query_ok(qq{SELECT zk_lock_release('$res')});
			$w->quit;
		}
		ok(zk_wait_no_locks(zk_path($res), 20), "($label) no node left");
	}
}

# --- (e) what an uncontended flat cycle costs ZooKeeper ----------------------
$node1->safe_psql('postgres', <<'EOS');
CREATE FUNCTION cycles(n int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1 .. n LOOP
		PERFORM zk_lock_acquire_session('gl/flat', parents => false);
		PERFORM zk_lock_release('gl/flat');
	END LOOP;
	RETURN n;
END $$;
EOS
{
	my $n = 500;
	# warm up: the resource node exists, the first grant's guard is settled
	$node1->safe_psql('postgres', 'SELECT cycles(5)');
	sleep(1);
	my $m0 = zk_mntr();
	my $t0 = time();
	sleep(4);
	my $m1 = zk_mntr();
	my $t1 = time();
	my $idle_recv = ($m1->{zk_packets_received} - $m0->{zk_packets_received}) / ($t1 - $t0);
	my $idle_sent = ($m1->{zk_packets_sent} - $m0->{zk_packets_sent}) / ($t1 - $t0);
	$node1->safe_psql('postgres', "SELECT cycles($n)");
	ok(zk_wait_no_locks(zk_path('gl/flat'), 10), '(e) the cycles left no node');
	sleep(0.5);    # the last release's delete is answered
	my $m2 = zk_mntr();
	my $t2 = time();
	my $recv = ($m2->{zk_packets_received} - $m1->{zk_packets_received}
		  - $idle_recv * ($t2 - $t1)) / $n;
	my $sent = ($m2->{zk_packets_sent} - $m1->{zk_packets_sent}
		  - $idle_sent * ($t2 - $t1)) / $n;
	note sprintf('(e) per uncontended flat cycle: %.2f requests received, %.2f packets sent '
		  . '(idle: %.1f/s received, %.1f/s sent, subtracted)', $recv, $sent, $idle_recv, $idle_sent);
	cmp_ok($recv, '<=', 3.1, '(e) an uncontended flat cycle costs ZooKeeper at most 3 requests');
	cmp_ok($sent, '<=', 4.1, '(e) and at most 4 packets sent');
	# a release is not waited for, so the group commit may send it with the
	# next cycle's create as one multi: at least a listing and one write
	cmp_ok($recv, '>=', 1.9, '(e) (the count is plausible: a listing and a write at least)');
}

# --- (f) watches over contended cycles, and after a reconnection -------------
for my $node ($node1, $node2)
{
	$node->safe_psql('postgres', <<'EOS');
CREATE FUNCTION mixed(n int, secs float8) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	i int := 0;
	stop timestamptz := clock_timestamp() + secs * interval '1 s';
	m text;
BEGIN
	WHILE i < n AND clock_timestamp() < stop LOOP
		m := CASE WHEN random() < 0.5 THEN 'shared' ELSE 'exclusive' END;
		PERFORM zk_lock_acquire_session('gl/mixed', m, parents => false);
		PERFORM pg_sleep(random() * 0.002);
		PERFORM zk_lock_release('gl/mixed', m);
		i := i + 1;
	END LOOP;
	RETURN i;
END $$;
EOS
}
{
	my $clients = 6;
	my @c = map { zk_session($_ % 2 ? $node1 : $node2, "mixed$_") } 1 .. $clients;
	my $per = int(1000 / $clients) + 1;
	$_->send("SELECT mixed($per, 40)") for @c;
	my $max = 0;
	while (grep { !$_->done } @c)
	{
		my $n = zk_mntr()->{zk_watch_count} // 0;
		$max = $n if $n > $max;
		sleep(0.3);
	}
	my $total = 0;
	for my $s (@c)
	{
		my $r = $s->wait(5);
		ok($r && $r->{sqlstate} eq '00000', $s->name . ' cycled without error');
		$total += $r->{out} if $r && $r->{out} =~ /^\d+$/;
	}
	note "(f) $total cycles, at most $max watches (mntr zk_watch_count)";
	cmp_ok($total, '>=', 1000, '(f) 1,000 contended cycles ran');
	# each request at most one data watch and one listing's child watch per
	# session, and the two mailboxes
	cmp_ok($max, '<=', 2 * $clients + 2 + 2, '(f) watches stayed bounded during the cycles');
	my $left;
	ok(wait_until(sub { ($left = zk_mntr()->{zk_watch_count} // -1) == 2 }, timeout => 10),
		'(f) only the two mailboxes\' watches are left once nothing is held')
	  or diag("zk_watch_count: $left");
	is_worker_watches($_, '1',
		'(f) ' . $_->name . '\'s worker counts one watch (its mailbox)') for ($node1, $node2);
	$_->quit for @c;
}
{
	# a holder alone (guarded by its listing) and a waiter, across a restart
	my $h = zk_session($node1, 'holder-f');
	$h->query_ok(q{SELECT zk_lock_acquire_session('gl/restart', parents => false)});
	my $w = zk_session($node2, 'waiter-f');
	$w->send(q{SELECT zk_lock_acquire_session('gl/restart', parents => false) > 0});
	ok(wait_for_waiting($node2, $w->pid), '(f) a waiter on node2 waits');
	sleep(0.5);
	my $before = zk_mntr()->{zk_watch_count};
	my ($rc) = zk_server('restart-one', 1);
	is($rc, 0, '(f) ZooKeeper restarted');
	ok(zk_wait_connected($_, 90), '(f) ' . $_->name . ' reconnected') for ($node1, $node2);
	my $after;
	ok(wait_until(sub { ($after = zk_mntr()->{zk_watch_count} // -1) == $before }, timeout => 15),
		"(f) the same watches after the reconnection ($before)")
	  or diag("zk_watch_count: $after, was $before");
	$h->query_ok(q{SELECT zk_lock_release('gl/restart')});
	my $r = $w->wait(30);
	is($r && $r->{out}, 't', '(f) the waiter is granted at the release');
	$w->query_ok(q{SELECT zk_lock_release('gl/restart')});
	ok(wait_until(sub { (zk_mntr()->{zk_watch_count} // -1) == 2 }, timeout => 10),
		'(f) and only the mailboxes\' watches are left');
	$h->quit;
	$w->quit;
}

# --- (h) a revocation by a writer that posts no note (zklock 1.4, a shell) --
{
	my $h = zk_session($node1, 'holder-h');
	my $pid = $h->pid;
	my $log_at = -s $node1->logfile;
	$h->query_ok('BEGIN');
	$h->query_ok(q{SELECT zk_lock_acquire('gl/old_revoker', parents => false)});
	my ($path) = zk_lock_nodes(zk_path('gl/old_revoker'));
	my ($rc) = ZkLockTest::zkutil('set', $path, 'revoke=terminate\nrevoked_by=shell');
	is($rc, 0, '(h) revoke=terminate written by a client that posts no note');
	sleep(1);
	is(psql1($node1, "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid"), '1',
		'(h) a holder guarded by its listing alone has not seen it yet');
	is(psql1($node2, q{SELECT zk_lock_try_acquire('gl/old_revoker', parents => false) IS NULL}), 't',
		'(h) a try-lock from node2 comes and goes');
	ok(zk_wait_log($node1, qr{gl/old_revoker/[^"]*" was revoked; terminating backend $pid}, $log_at),
		'(h) at that contention the holder reads the revocation');
	ok( wait_until(
			sub { psql1($node1, "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid") eq '0' },
			timeout => 20),
		'(h) and its session is terminated');
	ok(zk_wait_no_locks(zk_path('gl/old_revoker'), 20), '(h) no node left');
}

# --- (g) the node deleted while the holder's instance is cut off ----------
{
	my $px = ZkChaos::Proxy->start(
		links => [ [ 'node3', PostgreSQL::Test::Cluster::get_free_port(), $zk_port ] ]);
	my $node3 = zk_node('node3', hosts => '127.0.0.1:' . $px->port('node3'),
		session_timeout => '15s', extra_conf => $conf);
	$node3->safe_psql('postgres', 'CREATE TABLE guarded(v int)');
	my $sid = psql1($node3, 'SELECT session_id FROM zk_lock_status');
	my $h = zk_session($node3, 'holder-g');
	$h->query_ok('BEGIN');
	$h->query_ok(q{SELECT zk_lock_acquire('gl/cut', parents => false)});
	$h->query_ok('INSERT INTO guarded VALUES (7)');
	my ($path) = zk_lock_nodes(zk_path('gl/cut'));
	$px->cut('node3');
	sleep(4);    # a lease sync and a ping are swallowed: the stream is broken
	my ($rc) = ZkLockTest::zkutil('delete-r', $path);
	is($rc, 0, '(g) the holder\'s node is deleted while its instance is cut off');
	$px->heal('node3');
	ok(zk_wait_connected($node3, 30), '(g) node3 reconnects');
	is(psql1($node3, 'SELECT session_id FROM zk_lock_status'), $sid, '(g) to the same session');
	ok( wait_until(
			sub { psql1($node3, q{SELECT count(*) FROM zk_lock_local WHERE state = 'lost'}) eq '1' },
			timeout => 15),
		'(g) the child watch sent again fires: the lock is lost');
	my $r = $h->query('COMMIT');
	is($r->{sqlstate}, '55P03', '(g) its COMMIT is refused');
	is(psql1($node3, 'SELECT count(*) FROM guarded'), '0', '(g) nothing it wrote is visible');
	$h->quit;
	$px->stop;
}

zk_done_check();
done_testing();
