
# Attacks on the cheaper guard (issue 18, by a reviewer who did not write
# it): a lock granted alone is guarded by its listing's child watch, a
# revocation reaches it through its session's mailbox.  The commit fence's
# promise stays whole, and nothing a third client writes does harm:
#  (a) the worker stopped right after an alone grant (before-guard=pause),
#      the node deleted meanwhile: LOST, COMMIT refused;
#  (b) two backends of one instance SHARED on one resource (the first
#      alone at its listing): each node deleted in turn, each lock LOST;
#  (c) a SHARED holder alone, another instance's SHARED holder arrives and
#      leaves, then the first node is deleted: LOST;
#  (n) zk_lock_force_release from another instance of an alone SHARED
#      holder, and another client deleting a nested name's subtree: LOST;
#  (d) the child watch fired (a try-lock came and went) and the guard's
#      getData held back (before-guard=pause), the node deleted meanwhile;
#  (e) an instance cut off (a proxy that swallows bytes) while a try-lock
#      comes and goes, its holder's node is deleted and another holder's
#      lock is revoked: once back, LOST (COMMIT refused), the revocation
#      acted on, and no watch left behind;
#  (f) another client writes bogus notes into a session's mailbox (another
#      instance's node, a bogus path, binary bytes, three writes at once)
#      and deletes it: no crash, no revocation, the mailbox is made again,
#      the holder still guarded; zk_lock_revoke and zk_lock_force_release
#      refuse "zklock.sessions";
#  (g) <root>/zklock.sessions squatted (read-only) before the worker makes
#      it: no mailbox, every grant guarded by its own node, revocation works;
#  (h) a revocation racing a try-lock (child watch and mailbox at once):
#      acted on exactly once;
#  (i) 300 failed try-locks against an alone holder: no watch left behind;
#  (j) no herd: what an arrival and release of a SHARED lock costs
#      ZooKeeper in packets sent does not grow with 8 SHARED holders;
#  (k) a revocation whose note to the mailbox is lost (failpoint
#      before-revoke-post=fail): zk_lock_revoke does not report success
#      while the holder cannot have heard of it;
#  (l) requests whose create is refused (another client's read-only
#      resource node) leave no listing's watch behind.
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

sub lost_on
{
	my ($node) = @_;
	return psql1($node, q{SELECT count(*) FROM zk_lock_local WHERE state = 'lost'});
}

sub mailbox_of
{
	my ($node) = @_;
	my $sid = psql1($node, 'SELECT session_id FROM zk_lock_status');
	$sid =~ s/^0x//;
	return zk_path(sprintf('zklock.sessions/%016s', $sid) =~ tr/ /0/r);
}

sub worker_pid
{
	return psql1($_[0], 'SELECT worker_pid FROM zk_lock_status');
}

# A transaction holding $res ($mode) on $node with a write; its node's path
sub hold
{
	my ($node, $name, $res, $mode) = @_;
	my $h = zk_session($node, $name);
	$h->query_ok('BEGIN');
	$h->query_ok(qq{SELECT zk_lock_acquire('$res', '$mode', parents => false)});
	$h->query_ok('INSERT INTO guarded VALUES (1)') if $node == $node1;
	return $h;
}

sub refused
{
	my ($h, $label) = @_;
	my $r = $h->query('COMMIT');
	is($r->{sqlstate}, '55P03', "$label: COMMIT refused");
	$h->quit;
}

ok(wait_until(sub { (zk_mntr()->{zk_watch_count} // -1) == 2 }, timeout => 20),
	'both mailboxes are watched');

# --- (a) the node deleted while the worker stops right after an alone grant ---
{
	my $log_at = -s $node1->logfile;
	ok(zk_set_failpoints($node1, 'before-guard=pause'), '(a) before-guard=pause');
	my $h = zk_session($node1, 'holder-a');
	$h->query_ok('BEGIN');
	$h->send(q{SELECT zk_lock_acquire('ga/a', parents => false)});
	ok(zk_wait_log($node1, qr/failpoint "before-guard" reached \(pause\)/, $log_at),
		'(a) granted alone, the worker stops before it settles the guard');
	my ($path) = zk_lock_nodes(zk_path('ga/a'));
	is((ZkLockTest::zkutil('delete-r', $path))[0], 0, '(a) its node is deleted meanwhile');
	ok(zk_set_failpoints($node1, ''), '(a) failpoint cleared');
	my $r = $h->wait(10);
	ok($r && $r->{sqlstate} eq '00000', '(a) the acquire returned');
	ok(wait_until(sub { lost_on($node1) eq '1' }, timeout => 10), '(a) the lock is LOST');
	refused($h, '(a)');
}

# --- (b) two backends of one instance, SHARED, one resource -------------------
{
	my $h1 = hold($node1, 'b1', 'ga/b', 'shared');
	my $h2 = hold($node1, 'b2', 'ga/b', 'shared');
	my @paths = sort(zk_lock_nodes(zk_path('ga/b')));
	is(scalar @paths, 2, '(b) two SHARED nodes of node1');
	is((ZkLockTest::zkutil('delete-r', $paths[0]))[0], 0, '(b) the first (alone at its listing) deleted');
	ok(wait_until(sub { lost_on($node1) eq '1' }, timeout => 10), '(b) its lock is LOST');
	is((ZkLockTest::zkutil('delete-r', $paths[1]))[0], 0, '(b) the second deleted');
	ok(wait_until(sub { lost_on($node1) eq '2' }, timeout => 10), '(b) its lock is LOST too');
	refused($h1, '(b) first');
	refused($h2, '(b) second');
}

# --- (c) SHARED alone; another instance's SHARED holder arrives and leaves ---
{
	my $h = hold($node1, 'c1', 'ga/c', 'shared');
	my ($path) = zk_lock_nodes(zk_path('ga/c'));
	$node2->safe_psql('postgres',
		q{SELECT zk_lock_acquire_session('ga/c', 'shared', parents => false); SELECT zk_lock_release('ga/c', 'shared')});
	is((ZkLockTest::zkutil('delete-r', $path))[0], 0, '(c) then the first holder\'s node is deleted');
	ok(wait_until(sub { lost_on($node1) eq '1' }, timeout => 10), '(c) its lock is LOST');
	refused($h, '(c)');
}

# --- (d) the child watch fired, the getData guard held back -----------------
{
	my $h = hold($node1, 'd1', 'ga/d', 'exclusive');
	my ($path) = zk_lock_nodes(zk_path('ga/d'));
	my $log_at = -s $node1->logfile;
	ok(zk_set_failpoints($node1, 'before-guard=pause'), '(d) before-guard=pause');
	is(psql1($node2, q{SELECT zk_lock_try_acquire('ga/d', parents => false) IS NULL}), 't',
		'(d) a try-lock of node2 comes and goes');
	ok(zk_wait_log($node1, qr/failpoint "before-guard" reached \(pause\)/, $log_at),
		'(d) the child watch fired; the holder stops before its getData');
	is((ZkLockTest::zkutil('delete-r', $path))[0], 0, '(d) its node is deleted meanwhile');
	ok(zk_set_failpoints($node1, ''), '(d) failpoint cleared');
	ok(wait_until(sub { lost_on($node1) eq '1' }, timeout => 10), '(d) the lock is LOST');
	refused($h, '(d)');
}

# --- (n) force release from another instance; a nested name's subtree -------
{
	my $h = hold($node1, 'n1', 'ga/n', 'shared');
	is(psql1($node2, q{SELECT zk_lock_force_release('ga/n')}), '1',
		'(n) node2 force-releases an alone SHARED holder of node1');
	ok(wait_until(sub { lost_on($node1) eq '1' }, timeout => 10), '(n) its lock is LOST');
	refused($h, '(n) force release');
	$h = zk_session($node1, 'n2');
	$h->query_ok('BEGIN');
	$h->query_ok(q{SELECT zk_lock_acquire('gn/m/r')});    # with its SHARED parent
	$h->query_ok('INSERT INTO guarded VALUES (1)');
	is((ZkLockTest::zkutil('delete-r', zk_path('gn/m/r')))[0], 0,
		'(n) another client deletes a nested name\'s resource node and its lock node');
	ok(wait_until(sub { lost_on($node1) ne '0' }, timeout => 10), '(n) the nested lock is LOST');
	refused($h, '(n) nested');
	ok(zk_wait_no_locks(zk_path('gn'), 10), '(n) no node left');
}

# --- (h) a revocation racing a try-lock ---------------------------------------
{
	my $h = zk_session($node1, 'holder-h');
	my $log_at = -s $node1->logfile;
	$h->send(q{BEGIN; SELECT zk_lock_acquire('ga/h', parents => false); SELECT pg_sleep(60);});
	ok(wait_until(sub { psql1($node1, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $h->pid) eq 'PgSleep' },
			timeout => 20), '(h) the holder sleeps, granted alone');
	my $t = zk_session($node2, 'try-h');
	$t->send(q{SELECT zk_lock_try_acquire('ga/h', parents => false) IS NULL});
	is(psql1($node2, q{SELECT zk_lock_revoke('ga/h', 'cancel')}), '1', '(h) node2 revokes it at the same time');
	my $r = $h->wait(20);
	is($r && $r->{sqlstate}, '57014', '(h) the holder\'s statement is canceled');
	sleep(1);
	is(zk_log_count($node1, qr{ga/h/[^"]*" was revoked}, $log_at), 1, '(h) acted on once');
	$r = $t->wait(10);
	is($r && $r->{out}, 't', '(h) the try-lock came and went');
	$h->query('ROLLBACK');
	$h->quit;
	$t->quit;
	ok(zk_wait_no_locks(zk_path('ga/h'), 10), '(h) no node left');
}

# --- (i) failed try-locks against an alone holder: no watch left ----------
{
	my $h = zk_session($node1, 'holder-i');
	$h->query_ok(q{SELECT zk_lock_acquire_session('ga/i', parents => false)});
	my $n = psql1($node2, q{SELECT count(*) FROM generate_series(1, 300) WHERE zk_lock_try_acquire('ga/i', parents => false) IS NULL});
	is($n, '300', '(i) 300 try-locks of node2 failed');
	my $left;
	# the two mailboxes and the holder's own guard
	ok(wait_until(sub { ($left = zk_mntr()->{zk_watch_count} // -1) == 3 }, timeout => 10),
		'(i) three watches left: the mailboxes and the holder\'s guard')
	  or diag("zk_watch_count $left");
	is_worker_watches($node2, '1', '(i) node2 counts its mailbox only');
	$h->query_ok(q{SELECT zk_lock_release('ga/i')});
	$h->quit;
	ok(wait_until(sub { ($left = zk_mntr()->{zk_watch_count} // -1) == 2 }, timeout => 10),
		'(i) two once released') or diag("zk_watch_count $left");
}

# --- (l) a create refused (its listing's watch is set all the same) ---------
{
	is((ZkLockTest::zkutil('create-acl', zk_path('ga/ro'), 'r', 'owner:pw'))[0], 0,
		'(l) another client makes a resource node others may only read');
	for my $i (1 .. 20)
	{
		my ($rc) = $node1->psql('postgres', q{SELECT zk_lock_try_acquire('ga/ro', parents => false)});
		last if $rc == 0;
	}
	my ($rc, $out, $err) = $node1->psql('postgres', q{SELECT zk_lock_acquire_session('ga/ro', parents => false)});
	isnt($rc, 0, '(l) a lock of it fails (its create is refused)');
	my $left;
	ok(wait_until(sub { ($left = zk_mntr()->{zk_watch_count} // -1) == 2 }, timeout => 10),
		'(l) 21 refused requests left no watch behind') or diag("zk_watch_count $left");
	my $counted;
	ok(wait_until(sub { ($counted = psql1($node1, 'SELECT watches FROM zk_lock_status')) eq '1' }, timeout => 10),
		'(l) node1 counts its mailbox only') or diag("node1 counts $counted watches");
	ZkLockTest::zkutil('delete-private', zk_path('ga/ro'), 'owner:pw');
}

# --- (f) bogus notes in a mailbox; the mailbox deleted ----------------------
{
	my $wpid1 = worker_pid($node1);
	my $wpid2 = worker_pid($node2);
	my $log1 = -s $node1->logfile;
	my $log2 = -s $node2->logfile;
	my $h = hold($node1, 'f1', 'ga/f', 'exclusive');
	my $o = zk_session($node2, 'f2');
	$o->send(q{BEGIN; SELECT zk_lock_acquire('ga/f2', parents => false); SELECT pg_sleep(30);});
	ok(wait_until(sub { psql1($node2, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $o->pid) eq 'PgSleep' },
			timeout => 20), '(f) node2 holds another resource');
	my ($path) = zk_lock_nodes(zk_path('ga/f'));
	my ($path2) = zk_lock_nodes(zk_path('ga/f2'));
	my $mb = mailbox_of($node1);
	is((ZkLockTest::zkutil('exists', $mb))[0], 0, "(f) node1's mailbox $mb exists");
	for my $note ($path2, '/no/such/node', 'x' x 5000, '', $path2 =~ s{.*/}{}r)
	{
		is((ZkLockTest::zkutil('set', $mb, $note))[0], 0, '(f) another client writes a note of ' . length($note) . ' bytes');
	}
	# three quick writes of a bogus note, then binary bytes by a python client
	system($ENV{ZKLOCK_TEST_PYTHON} || '/usr/bin/python3', '-c', <<"EOP") == 0 or diag('python failed');
from kazoo.client import KazooClient
zk = KazooClient(hosts='$hosts'); zk.start()
for i in range(3): zk.set('$mb', b'\\xff\\x00\\xfe/' + bytes([i]))
zk.stop()
EOP
	sleep(1);
	is(worker_pid($node1), $wpid1, '(f) node1\'s worker did not restart');
	is(worker_pid($node2), $wpid2, '(f) node2\'s worker did not restart');
	is(zk_log_count($node2, qr/was revoked/, $log2), 0, '(f) node2\'s holder is not revoked');
	is(zk_log_count($node1, qr/was revoked/, $log1), 0, '(f) nor node1\'s');
	# an administrator cannot reach the mailboxes through the SQL functions
	for my $q (q{SELECT zk_lock_revoke('zklock.sessions', 'terminate')},
		q{SELECT zk_lock_force_release('zklock.sessions')},
		qq{SELECT zk_lock_force_release('zklock.sessions', '} . ($mb =~ s{.*/}{}r) . q{')})
	{
		my ($rc) = $node2->psql('postgres', $q);
		isnt($rc, 0, "(f) refused: $q");
	}
	is((ZkLockTest::zkutil('exists', $mb))[0], 0, '(f) the mailbox is still there');
	is((ZkLockTest::zkutil('delete-r', $mb))[0], 0, '(f) another client deletes the mailbox');
	ok(wait_until(sub { (ZkLockTest::zkutil('exists', $mb))[0] == 0 }, timeout => 10),
		'(f) node1 makes its mailbox again');
	is((ZkLockTest::zkutil('delete-r', $path))[0], 0, '(f) then node1\'s holder\'s node is deleted');
	ok(wait_until(sub { lost_on($node1) eq '1' }, timeout => 10), '(f) its lock is LOST');
	refused($h, '(f)');
	is(psql1($node1, q{SELECT zk_lock_try_acquire('ga/f9', parents => false) IS NOT NULL}), 't',
		'(f) node1 still locks');
	$o->quit;
	ok(zk_wait_no_locks(zk_path('ga'), 20), '(f) no node left under ga');
	is(scalar(zk_log_crashes($node1, $log1)), 0, '(f) no crash in node1\'s log');
}

# --- (k) the revocation's note to the mailbox lost -----------------------------
{
	my $h = zk_session($node1, 'holder-k');
	my $log_at = -s $node1->logfile;
	$h->send(q{BEGIN; SELECT zk_lock_acquire('ga/k', parents => false); SELECT pg_sleep(60);});
	ok(wait_until(sub { psql1($node1, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $h->pid) eq 'PgSleep' },
			timeout => 20), '(k) the holder sleeps, granted alone');
	ok(zk_set_failpoints($node2, 'before-revoke-post=fail'), '(k) before-revoke-post=fail on node2');
	my ($rc, $out, $err) = $node2->psql('postgres', q{SELECT zk_lock_revoke('ga/k', 'cancel')});
	my $heard = zk_wait_log($node1, qr{ga/k/[^"]*" was revoked}, $log_at, 3);
	ok($heard || $rc != 0,
		'(k) zk_lock_revoke does not report success while the holder never hears of it')
	  or diag("rc $rc out $out err $err");
	like($err, qr/revocation written, but its holder's instance could not be notified/,
		'(k) it fails saying so');
	my (undef, undef, $verr) = $node2->psql('postgres', q{\set VERBOSITY verbose
SELECT zk_lock_revoke('ga/k', 'cancel')});
	like($verr, qr/ERROR:\s+38000/, '(k) with SQLSTATE 38000 (a write that failed), not 08006 (worker gone)');
	ok(zk_set_failpoints($node2, ''), '(k) failpoint cleared');
	is(psql1($node2, q{SELECT zk_lock_revoke('ga/k', 'cancel')}), '1', '(k) revoked again');
	my $r = $h->wait(20);
	is($r && $r->{sqlstate}, '57014', '(k) then the holder\'s statement is canceled');
	$h->query('ROLLBACK');
	$h->quit;
	ok(zk_wait_no_locks(zk_path('ga/k'), 10), '(k) no node left');
}

# --- (j) no herd: 8 SHARED holders -----------------------------------------
{
	$node2->safe_psql('postgres', <<'EOS');
CREATE FUNCTION cycles(n int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1 .. n LOOP
		PERFORM zk_lock_acquire_session('ga/herd', 'shared', parents => false);
		PERFORM zk_lock_release('ga/herd', 'shared');
	END LOOP;
	RETURN n;
END $$;
EOS
	my $cost = sub {
		my $n = 200;
		$node2->safe_psql('postgres', 'SELECT cycles(5)');
		sleep(0.5);
		my $m0 = zk_mntr(); my $t0 = time();
		sleep(2);
		my $m1 = zk_mntr(); my $t1 = time();
		my $idle = ($m1->{zk_packets_sent} - $m0->{zk_packets_sent}) / ($t1 - $t0);
		$node2->safe_psql('postgres', "SELECT cycles($n)");
		sleep(0.5);
		my $m2 = zk_mntr(); my $t2 = time();
		return ($m2->{zk_packets_sent} - $m1->{zk_packets_sent} - $idle * ($t2 - $t1)) / $n;
	};
	my @hs;
	push @hs, hold($node1, 'herd0', 'ga/herd', 'shared');
	my $one = $cost->();
	for my $i (1 .. 7)
	{
		push @hs, hold($i % 2 ? $node2 : $node1, "herd$i", 'ga/herd', 'shared');
	}
	is(zk_count_locks(zk_path('ga/herd')), 8, '(j) 8 SHARED holders on the two instances');
	my $eight = $cost->();
	note sprintf('(j) packets sent per SHARED arrival+release: %.2f with 1 holder, %.2f with 8', $one, $eight);
	cmp_ok($eight, '<=', $one + 2.5, '(j) 8 holders do not make it cost one notification per holder');
	$_->query_ok('ROLLBACK') for @hs;
	$_->quit for @hs;
	ok(zk_wait_no_locks(zk_path('ga/herd'), 10), '(j) no node left');
}

# --- (e) cut off: a try-lock comes and goes, the node deleted ----------------
{
	my $px = ZkChaos::Proxy->start(
		links => [ [ 'node3', PostgreSQL::Test::Cluster::get_free_port(), $zk_port ] ]);
	my $node3 = zk_node('node3', hosts => '127.0.0.1:' . $px->port('node3'),
		session_timeout => '15s', extra_conf => $conf);
	my $sid = psql1($node3, 'SELECT session_id FROM zk_lock_status');
	my $h = zk_session($node3, 'holder-e');
	$h->query_ok('BEGIN');
	$h->query_ok(q{SELECT zk_lock_acquire('ga/e', parents => false)});
	my $k = zk_session($node3, 'keeper-e');
	$k->query_ok(q{SELECT zk_lock_acquire_session('ga/e2', parents => false)});
	sleep(0.5);
	my $before = zk_mntr()->{zk_watch_count};
	my ($path) = zk_lock_nodes(zk_path('ga/e'));
	$px->cut('node3');
	sleep(4);
	is(psql1($node2, q{SELECT zk_lock_try_acquire('ga/e', parents => false) IS NULL}), 't',
		'(e) while node3 is cut off, a try-lock of node2 comes and goes');
	is((ZkLockTest::zkutil('delete-r', $path))[0], 0, '(e) and the holder\'s node is deleted');
	is(psql1($node2, q{SELECT zk_lock_revoke('ga/e2', 'terminate')}), '1',
		'(e) and node2 revokes the keeper\'s lock (its note waits in the mailbox)');
	my $kpid = $k->pid;
	$px->heal('node3');
	ok(zk_wait_connected($node3, 30), '(e) node3 reconnects');
	is(psql1($node3, 'SELECT session_id FROM zk_lock_status'), $sid, '(e) to the same session');
	ok(wait_until(sub { lost_on($node3) eq '1' }, timeout => 15), '(e) the lock is LOST');
	my $r = $h->query('COMMIT');
	is($r->{sqlstate}, '55P03', '(e) COMMIT refused');
	$h->quit;
	ok( wait_until(
			sub { psql1($node3, "SELECT count(*) FROM pg_stat_activity WHERE pid = $kpid") eq '0' },
			timeout => 20),
		'(e) the mailbox\'s watch sent again fires: the keeper is terminated');
	ok(zk_wait_no_locks(zk_path('ga/e2'), 10), '(e) its node is gone');
	# the lost lock's and the keeper's child watches fired; the mailboxes' stay
	my $after;
	ok(wait_until(sub { ($after = zk_mntr()->{zk_watch_count} // -1) == $before - 2 }, timeout => 10),
		"(e) the watches after the reconnection: those before ($before) but the two locks'")
	  or diag("zk_watch_count $after");
	is_worker_watches($node3, '1',
		'(e) node3 counts one: its mailbox');
	$k->quit;
	$px->stop;
}

# --- (g) <root>/zklock.sessions squatted before the worker makes it ----------
{
	my $root = zk_path('squat');
	is((ZkLockTest::zkutil('create-acl', "$root/zklock.sessions", 'r', 'squatter:pw'))[0], 0,
		'(g) another client makes <root>/zklock.sessions, read-only to others');
	my $node4 = zk_node('node4', root => $root, session_timeout => '20s', extra_conf => $conf);
	$node4->safe_psql('postgres', 'CREATE TABLE guarded(v int)');
	my $wpid = worker_pid($node4);
	my $h = zk_session($node4, 'holder-g');
	$h->query_ok('BEGIN');
	$h->query_ok(q{SELECT zk_lock_acquire('g', parents => false)});
	my ($path) = zk_lock_nodes("$root/g");
	ok($path, '(g) node4 holds a lock');
	is((ZkLockTest::zkutil('delete-r', $path))[0], 0, '(g) its node is deleted');
	ok(wait_until(sub { lost_on($node4) eq '1' }, timeout => 10), '(g) the lock is LOST');
	my $r = $h->query('COMMIT');
	is($r->{sqlstate}, '55P03', '(g) COMMIT refused');
	$h->quit;
	my $s = zk_session($node4, 'holder-g2');
	my $log_at = -s $node4->logfile;
	$s->send(q{BEGIN; SELECT zk_lock_acquire('g2', parents => false); SELECT pg_sleep(60);});
	ok(wait_until(sub { psql1($node4, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $s->pid) eq 'PgSleep' },
			timeout => 20), '(g) another holder sleeps');
	is(psql1($node4, q{SELECT zk_lock_revoke('g2', 'cancel')}), '1', '(g) revoked');
	$r = $s->wait(20);
	is($r && $r->{sqlstate}, '57014', '(g) the revocation is acted on without a mailbox');
	$s->query('ROLLBACK');
	$s->quit;
	is(worker_pid($node4), $wpid, '(g) node4\'s worker did not restart');
	$node4->stop;
	ZkLockTest::zkutil('delete-private', $root, 'squatter:pw');
}

zk_done_check();
done_testing();
