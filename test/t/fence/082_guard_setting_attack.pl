
# Attacks on zklock.guard_by_listing (issue 18, by a reviewer who did not
# write it).  On, a lock granted as its resource's only lock node is guarded
# by its listing's child watch and hears of a revocation through its
# session's mailbox; off, a lock is guarded by a watch on its own node, so
# that a revocation written by zklock 1.4 (no note to the mailbox) is acted
# on at once.  Whatever the setting was at the grant and whatever it is now,
# the commit fence's promise stays whole, and the setting's promise holds:
#  (a) off at the grant: a 1.4-style revocation (revoke= written by a
#      client that posts no note) cancels the holder at once; a holder's
#      node deleted by another client, or by zk_lock_force_release on the
#      other instance: LOST, COMMIT refused;
#  (b) on at the grant (guarded by its listing), turned off by a reload
#      while held: its node deleted (by another client, by
#      zk_lock_force_release): LOST, COMMIT refused;
#  (c) on at the grant, turned off by a reload while held: a 1.4-style
#      revocation cancels the holder at once (the reload moves the guard
#      of every lock guarded by its listing to its own node);
#  (d) off at the grant, turned on while held: a 1.4-style revocation
#      still cancels at once, a deleted node is still LOST;
#  (e) a waiter that waited while the setting was on, granted after it was
#      turned off: a 1.4-style revocation cancels it at once;
#  (f) setting on, other clients' nodes beside ours: children that are not
#      lock nodes (another client's non-lock sequential node, near misses
#      of lock names, a child resource) leave our lock guarded by its
#      listing, and its node's deletion is still seen (LOST, COMMIT
#      refused); SHARED lock nodes of Curator, Kazoo and ZooKeeper's recipe
#      make our SHARED grant not the only lock node: a 1.4-style
#      revocation is acted on at once;
#  (g) setting on, an operator deletes the holder's session's mailbox
#      (<root>/zklock.sessions/<session>) while a lock guarded by its
#      listing is held: a new mailbox is made, and zk_lock_revoke from the
#      other instance still cancels the holder, also when it writes while
#      the mailbox is not there yet;
#  (i) the setting flipped every 0.2 s on one instance while four
#      clients on two instances cycle contended SHARED and EXCLUSIVE
#      locks: no error, watches bounded and none left behind;
#  (h) setting on at the grant, turned off while the holder's instance is
#      cut off from ZooKeeper (a proxy that swallows bytes), a 1.4-style
#      revocation written meanwhile: once connected again (same session),
#      the holder is canceled.
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
my $node1 = zk_node('node1', session_timeout => '20s', extra_conf => $conf);
my $node2 = zk_node('node2', session_timeout => '20s', extra_conf => $conf);
$node1->safe_psql('postgres', 'CREATE TABLE guarded(v int)');

sub lost_count
{
	return psql1($node1, q{SELECT count(*) FROM zk_lock_local WHERE state = 'lost'});
}

# zklock.guard_by_listing on node1, by a reload; the worker reads it at once
# (SIGHUP sets its latch), given a second or two
sub set_guard
{
	my ($value, $node) = @_;
	$node //= $node1;
	$node->append_conf('postgresql.conf', "zklock.guard_by_listing = $value");
	$node->reload;
	ok(wait_until(sub { psql1($node, 'SHOW zklock.guard_by_listing') eq $value }, timeout => 10),
		"zklock.guard_by_listing is $value on " . $node->name . ' after a reload');
	sleep(2);
}

# zklock's own lock nodes right below $res (not another client's, not a near
# miss, not a child resource's)
sub zklock_nodes_of
{
	my ($res) = @_;
	my $base = zk_path($res);
	return grep { m{^\Q$base\E/[^/]*LOCK-(SHARED|EXCLUSIVE)-\d{10}$} } zk_lock_nodes($base);
}

# a holder in a transaction: lock, insert $v; returns the session and its node
sub holder
{
	my ($res, $mode, $v) = @_;
	my $h = zk_session($node1, "holder-$v");
	$h->query_ok('BEGIN');
	$h->query_ok(qq{SELECT zk_lock_acquire('$res', '$mode', parents => false)});
	$h->query_ok("INSERT INTO guarded VALUES ($v)");
	my @paths = zklock_nodes_of($res);
	return ($h, $paths[-1]);
}

# another client deletes the holder's node: LOST, COMMIT refused, nothing seen
sub deleted_is_lost
{
	my ($label, $h, $path, $v, $force_res) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	ok($path, "$label the holder's node is there");
	if ($force_res)
	{
		is(psql1($node2, "SELECT zk_lock_force_release('$force_res')"), '1',
			"$label zk_lock_force_release on node2 removes it");
	}
	else
	{
		my ($rc) = ZkLockTest::zkutil('delete-r', $path);
		is($rc, 0, "$label another client deletes it");
	}
	ok(wait_until(sub { lost_count() eq '1' }, timeout => 10), "$label the lock is lost");
	my $r = $h->query('COMMIT');
	is($r->{sqlstate}, '55P03', "$label its COMMIT is refused");
	is(psql1($node1, "SELECT count(*) FROM guarded WHERE v = $v"), '0',
		"$label nothing it wrote is visible");
	$h->quit;
}

# a holder sleeping in a transaction with the lock on $res
sub sleeper
{
	my ($res, $mode, $label) = @_;
	my $h = zk_session($node1, "sleeper-$res");
	$h->send("BEGIN; SELECT zk_lock_acquire('$res', '$mode', parents => false); SELECT pg_sleep(60);");
	ok( wait_until(
			sub { psql1($node1, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $h->pid) eq 'PgSleep' },
			timeout => 20),
		"$label the holder sleeps with the lock");
	return $h;
}

# revoke= written into $res's zklock node by a client that posts no note to
# the mailbox (zklock 1.4, a shell): the sleeping holder is canceled at once
sub old_revoke_cancels
{
	my ($label, $h, $res) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my @paths = zklock_nodes_of($res);
	is(scalar(@paths), 1, "$label one zklock node on the resource");
	my ($rc) = ZkLockTest::zkutil('set', $paths[0], 'revoke=cancel\nrevoked_by=zklock-1.4');
	is($rc, 0, "$label revoke=cancel written by a client that posts no note");
	my $r = $h->wait(10);
	is($r && $r->{sqlstate}, '57014', "$label the holder is canceled at once (within 10 s)");
	if (!$r)
	{
		$node1->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $h->pid . ')');
		$h->wait(10);
	}
	$h->query('ROLLBACK');
	$h->quit;
	ok(wait_until(sub { (ZkLockTest::zkutil('exists', $paths[0]))[0] == 1 }, timeout => 10),
		"$label its node goes");
}

# --- (a) off at the grant --------------------------------------------------
set_guard('off');
{
	my $h = sleeper('gs/a_rev', 'exclusive', '(a)');
	old_revoke_cancels('(a)', $h, 'gs/a_rev');
	my ($h2, $path) = holder('gs/a_del', 'exclusive', 1);
	deleted_is_lost('(a)', $h2, $path, 1);
	my ($h3, $path3) = holder('gs/a_force', 'shared', 11);
	deleted_is_lost('(a) force release:', $h3, $path3, 11, 'gs/a_force');
}

# --- (b), (c) on at the grant, off while held -------------------------------
set_guard('on');
{
	my ($h, $path) = holder('gs/b_del', 'exclusive', 2);
	my ($hf, $pathf) = holder('gs/b_force', 'shared', 12);
	my $hc = sleeper('gs/c_rev', 'shared', '(c)');
	set_guard('off');
	deleted_is_lost('(b)', $h, $path, 2);
	deleted_is_lost('(b) force release:', $hf, $pathf, 12, 'gs/b_force');
	old_revoke_cancels('(c)', $hc, 'gs/c_rev');
}

# --- (d) off at the grant, on while held --------------------------------------
{
	my ($h, $path) = holder('gs/d_del', 'shared', 3);
	my $hd = sleeper('gs/d_rev', 'exclusive', '(d)');
	set_guard('on');
	old_revoke_cancels('(d)', $hd, 'gs/d_rev');
	deleted_is_lost('(d)', $h, $path, 3);
}

# --- (e) a waiter through the flip ---------------------------------------------
{
	my $o = zk_session($node2, 'other-e');
	$o->query_ok(q{SELECT zk_lock_acquire_session('gs/e', parents => false)});
	my $h = zk_session($node1, 'waiter-e');
	$h->send(q{BEGIN; SELECT zk_lock_acquire('gs/e', parents => false); SELECT pg_sleep(60);});
	ok(wait_for_waiting($node1, $h->pid), '(e) a waiter on node1 waits (setting on)');
	set_guard('off');
	$o->query_ok(q{SELECT zk_lock_release('gs/e')});
	ok( wait_until(
			sub { psql1($node1, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $h->pid) eq 'PgSleep' },
			timeout => 20),
		'(e) the waiter is granted after the setting turned off');
	old_revoke_cancels('(e)', $h, 'gs/e');
	$o->quit;
	set_guard('on');
}

# --- (f) other clients' nodes beside ours -------------------------------------
{
	my $res = 'gs/f_foreign';
	my $base = zk_path($res);
	# not lock nodes: another client's sequential node, near misses of lock
	# names (nine digits and a letter, no mark), and a child resource
	my ($rc) = ZkLockTest::zkutil('create-seq', "$base/leases-", 'x');
	is($rc, 0, '(f) a non-lock sequential node of another client');
	for my $near ('LOCK-EXCLUSIVE-00000001x', 'lock-123', 'LOCK-EXCLUSIVE-', '0000000001')
	{
		($rc) = ZkLockTest::zkutil('create-acl', "$base/$near", 'rwcda', 'other:pw');
		is($rc, 0, "(f) a near miss \"$near\" beside it");
	}
	my $c = zk_session($node1, 'child-f');
	$c->query_ok(qq{SELECT zk_lock_acquire_session('$res/child', parents => false)});
	my ($h, $path) = holder($res, 'exclusive', 4);
	deleted_is_lost('(f) alone among non-lock children:', $h, $path, 4);
	$c->query_ok(qq{SELECT zk_lock_release('$res/child')});
	$c->quit;

	# SHARED lock nodes of other clients, lower than ours
	for my $mark ('_c_0f1e2d3c-__READ__', '__rlock__', 'read-')
	{
		my $r = 'gs/f_' . ($mark =~ s/\W//gr);
		($rc) = ZkLockTest::zkutil('create-seq', zk_path($r) . "/$mark", '');
		is($rc, 0, "(f) another client's SHARED node $mark");
		my $hs = sleeper($r, 'shared', "(f) beside $mark:");
		old_revoke_cancels("(f) beside $mark:", $hs, $r);
		ZkLockTest::zkutil('delete-r', zk_path($r));
	}
	ZkLockTest::zkutil('delete-r', $base);
}

# --- (g) the mailbox deleted by an operator -----------------------------------
for my $wait_remade (1, 0)
{
	my $label = $wait_remade ? '(g) remade, then revoked:' : '(g) revoked at once:';
	my $res = "gs/g_$wait_remade";
	my $sid = psql1($node1, 'SELECT session_id FROM zk_lock_status') =~ s/^0x//r;
	my $mb = zk_path(sprintf('zklock.sessions/%016s', $sid) =~ tr/ /0/r);
	my $h = sleeper($res, 'exclusive', $label);
	is((ZkLockTest::zkutil('exists', $mb))[0], 0, "$label node1's mailbox is $mb");
	my $log_at = -s $node1->logfile;
	my ($rc, $out, $err) = ZkLockTest::zkutil('delete-r', $mb);
	is($rc, 0, "$label an operator deletes node1's mailbox") or diag($err);
	if ($wait_remade)
	{
		ok(wait_until(sub { (ZkLockTest::zkutil('exists', $mb))[0] == 0 }, timeout => 10),
			"$label node1 makes its mailbox again")
		  or diag(join(' ', zk_list_znodes(zk_path('zklock.sessions'))));
	}
	is(psql1($node2, qq{SELECT zk_lock_revoke('$res', 'cancel')}), '1', "$label node2 revokes the lock");
	my $r = $h->wait(10);
	is($r && $r->{sqlstate}, '57014', "$label the holder is canceled");
	ok(zk_wait_log($node1, qr{\Q$res\E/[^"]*" was revoked}, $log_at), "$label \"was revoked\" logged");
	$h->query('ROLLBACK');
	$h->quit;
}

# --- (i) the setting flipped again and again under contended cycles ------------
{
	ok(wait_until(sub { (zk_mntr()->{zk_watch_count} // -1) == 2 }, timeout => 10),
		'(i) before: only the two mailboxes\' watches');
	for my $node ($node1, $node2)
	{
		$node->safe_psql('postgres', <<'EOS');
CREATE FUNCTION flipcycles(secs float8) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	i int := 0;
	stop timestamptz := clock_timestamp() + secs * interval '1 s';
	m text;
BEGIN
	WHILE clock_timestamp() < stop LOOP
		m := CASE WHEN random() < 0.5 THEN 'shared' ELSE 'exclusive' END;
		PERFORM zk_lock_acquire_session('gs/i' || (i % 2), m, parents => false);
		PERFORM pg_sleep(random() * 0.003);
		PERFORM zk_lock_release('gs/i' || (i % 2), m);
		i := i + 1;
	END LOOP;
	RETURN i;
END $$;
EOS
	}
	my @c = map { zk_session($_ % 2 ? $node1 : $node2, "flip$_") } 1 .. 4;
	$_->send('SELECT flipcycles(8)') for @c;
	my $max = 0;
	my $value = 'off';
	while (grep { !$_->done } @c)
	{
		$node1->append_conf('postgresql.conf', "zklock.guard_by_listing = $value");
		$node1->reload;
		$value = $value eq 'off' ? 'on' : 'off';
		my $n = zk_mntr()->{zk_watch_count} // 0;
		$max = $n if $n > $max;
		sleep(0.2);
	}
	my $total = 0;
	for my $s (@c)
	{
		my $r = $s->wait(5);
		ok($r && $r->{sqlstate} eq '00000', '(i) ' . $s->name . ' cycled without error while the setting flipped')
		  or diag(explain($r));
		$total += $r->{out} if $r && $r->{out} =~ /^\d+$/;
		$s->quit;
	}
	note "(i) $total cycles, at most $max watches";
	cmp_ok($total, '>=', 100, '(i) at least 100 contended cycles ran');
	cmp_ok($max, '<=', 4 * 3 + 2, '(i) watches stayed bounded (a guard, a listing\'s and a wait\'s per request)');
	ok(wait_until(sub { (zk_mntr()->{zk_watch_count} // -1) == 2 }, timeout => 10),
		'(i) after: only the mailboxes\' watches are left');
	is(psql1($node1, q{SELECT count(*) FROM zk_lock_local}), '0', '(i) node1 holds nothing');
	set_guard('on');
}

# --- (h) turned off while cut off from ZooKeeper ------------------------------
{
	my $px = ZkChaos::Proxy->start(
		links => [ [ 'node3', PostgreSQL::Test::Cluster::get_free_port(), $zk_port ] ]);
	my $node3 = zk_node('node3', hosts => '127.0.0.1:' . $px->port('node3'),
		session_timeout => '15s', extra_conf => $conf);
	my $sid = psql1($node3, 'SELECT session_id FROM zk_lock_status');
	my $h = zk_session($node3, 'holder-h');
	$h->send(q{BEGIN; SELECT zk_lock_acquire('gs/h', parents => false); SELECT pg_sleep(60);});
	ok( wait_until(
			sub { psql1($node3, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $h->pid) eq 'PgSleep' },
			timeout => 20),
		'(h) a holder on node3 sleeps with the lock, granted alone (setting on)');
	my ($path) = zklock_nodes_of('gs/h');
	$px->cut('node3');
	set_guard('off', $node3);    # the worker's guard request goes nowhere
	my ($rc) = ZkLockTest::zkutil('set', $path, 'revoke=cancel\nrevoked_by=zklock-1.4');
	is($rc, 0, '(h) meanwhile revoke=cancel is written by a client that posts no note');
	sleep(2);
	$px->heal('node3');
	ok(zk_wait_connected($node3, 30), '(h) node3 reconnects');
	is(psql1($node3, 'SELECT session_id FROM zk_lock_status'), $sid, '(h) to the same session');
	my $r = $h->wait(20);
	is($r && $r->{sqlstate}, '57014', '(h) the guard set again once connected reads it: the holder is canceled');
	$h->query('ROLLBACK');
	$h->quit;
	$px->stop;
}

zk_done_check();
done_testing();
