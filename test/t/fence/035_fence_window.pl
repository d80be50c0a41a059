
# The commit window (issue 20, finding 1): zklock never ends its own
# ZooKeeper session while a commit that passed the commit fence under it can
# still land.  The mechanism of the finding: B's COMMIT passes the fence and
# then waits for the NOTIFY queue's lock, held by a session that waits for a
# synchronous standby that does not exist.  Meanwhile zklock ends B's
# session:
#  - SIGTERM to B's worker (a restart; the same exit path as an ERROR in the
#    worker and a shutdown);
#  - a reload with another zklock.hosts (the session is closed on purpose).
# Before the fix, the other instance's waiter W was granted within 0.02 s
# and B's commit landed after W's grant.  Now W waits until B's commit has
# ended, the worker says in the log why it keeps the session, and then W is
# granted.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $hosts = zk_start();
# node1's session timeout (10 s) bounds how long the worker keeps a session
# for a commit before it cancels the backend (the last case)
my $node1 = zk_node('node1',
	session_timeout => '10s',
	extra_conf => "synchronous_standby_names = 'zklock_no_such_standby'\n"
	  . "synchronous_commit = local\n"
	  . "wal_level = replica\nmax_wal_senders = 2");
my $node2 = zk_node('node2');

$node1->safe_psql('postgres', 'CREATE TABLE guarded(v int)');

sub worker_pid
{
	my ($node) = @_;
	return psql1($node, 'SELECT worker_pid FROM zk_lock_status');
}

# wait_event of a backend of node1
sub wait_event_of
{
	my ($pid) = @_;
	return psql1($node1,
		"SELECT coalesce(wait_event_type, '') || '/' || coalesce(wait_event, '') "
		  . "FROM pg_stat_activity WHERE pid = $pid");
}

# B holds 'window/r' and its COMMIT is past the fence, waiting for the
# NOTIFY lock that S (waiting for a synchronous standby) holds; W on node2
# waits for the lock.  Returns (S, B, W).
sub commit_stuck_past_fence
{
	my ($resource, $value) = @_;
	my $s = zk_session($node1, 'syncrep');
	$s->query_ok('SET synchronous_commit = on');
	$s->query_ok('BEGIN');
	$s->query_ok('INSERT INTO guarded VALUES (0)');    # a commit that waits
	$s->query_ok('NOTIFY zklock_window');
	$s->send('COMMIT');
	ok( wait_until(sub { wait_event_of($s->pid) eq 'IPC/SyncRep' }, timeout => 20),
		'a session waits for the synchronous standby, holding the NOTIFY lock');

	my $b = zk_session($node1, 'holder');
	$b->query_ok('BEGIN');
	$b->query_ok(qq{SELECT zk_lock_acquire('$resource') > 0});
	$b->query_ok("INSERT INTO guarded VALUES ($value)");
	$b->query_ok('NOTIFY zklock_window');
	$b->send('COMMIT');
	ok( wait_until(sub { wait_event_of($b->pid) =~ m{^Lock/} }, timeout => 20),
		"B's COMMIT passed the fence and waits for the NOTIFY lock");

	my $w = zk_session($node2, 'waiter');
	$w->send(qq{SELECT zk_lock_acquire('$resource', timeout => '60 s') > 0});
	ok(wait_for_waiting($node2, $w->pid), 'W on the other instance waits');
	return ($s, $b, $w);
}

# After zklock began to end B's session: W is not granted while B's commit
# can still land; once it has landed, W is.
sub w_waits_for_b
{
	my ($what, $s, $b, $w, $value, $log_offset) = @_;

	sleep(3);    # the old code granted W within 0.02 s
	ok(!$w->done, "$what: W is not granted while B's commit, past the fence, can still land");
	is(zk_count_locks(zk_path('window')), 4,
		"$what: B's nodes are still there (and W's: each with its parent's)");
	ok( $node1->wait_for_log(
			qr/keeping ZooKeeper session 0x[0-9a-f]+ open until 1 commit that passed the commit fence has ended/,
			$log_offset),
		"$what: the worker logs that it keeps the session for a commit");

	# the standby wait is cancelled: S's commit (already local) ends, B's goes on
	$node1->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $s->pid . ')');
	my $rb = $b->wait(30);
	ok($rb && $rb->{sqlstate} eq '00000', "$what: B's COMMIT, past the fence, succeeds");
	my $rw = $w->wait(30);
	ok($rw && $rw->{out} eq 't', "$what: then W is granted");
	is(psql1($node1, "SELECT count(*) FROM guarded WHERE v = $value"), '1',
		"$what: B's row is committed");
	ok( $node1->wait_for_log(
			qr/the commits that passed the commit fence under ZooKeeper session 0x[0-9a-f]+ have ended after \d+ ms; closing it/,
			$log_offset),
		"$what: the worker logs when it closes the session");
	$w->query_ok('SELECT 1');
	$_->quit for ($s, $b, $w);
}

# --- a restart of the worker (SIGTERM) --------------------------------------
my ($s, $b, $w) = commit_stuck_past_fence('window/r', 1);
my $log_offset = -s $node1->logfile;
my $old_worker = worker_pid($node1);
kill 'TERM', $old_worker;
w_waits_for_b('SIGTERM of the worker', $s, $b, $w, 1, $log_offset);
ok(zk_wait_connected($node1), 'the restarted worker connects');
isnt(worker_pid($node1), $old_worker, 'it is a new worker');

# --- a reload with another zklock.hosts -------------------------------------
($s, $b, $w) = commit_stuck_past_fence('window/r', 2);
$log_offset = -s $node1->logfile;
(my $other_spelling = $hosts) =~ s/127\.0\.0\.1/localhost/g;
$node1->safe_psql('postgres', "ALTER SYSTEM SET zklock.hosts = '$other_spelling'");
$node1->safe_psql('postgres', 'SELECT pg_reload_conf()');
w_waits_for_b('zklock.hosts reloaded', $s, $b, $w, 2, $log_offset);
ok(zk_wait_connected($node1), 'the worker connects to the new hosts');
is(psql1($node1, 'SELECT last_error IS NULL OR last_error = \'\' FROM zk_lock_status'),
	't', 'a change of zklock.hosts is not an error in zk_lock_status.last_error');

# --- a commit held without end: cancelled after a session timeout -----------
($s, $b, $w) = commit_stuck_past_fence('window/r', 4);
$log_offset = -s $node1->logfile;
$old_worker = worker_pid($node1);
my $t_term = time();
kill 'TERM', $old_worker;
my $rb = $b->wait(60);
ok($rb && $rb->{sqlstate} eq '57014',
	'a commit still held after a session timeout is cancelled by the worker (57014)');
note sprintf('B cancelled %.1f s after the SIGTERM (session timeout 10 s)', time() - $t_term);
cmp_ok(time() - $t_term, '>=', 9, 'not before the session timeout');
my $rw = $w->wait(30);
ok($rw && $rw->{out} eq 't', 'then W is granted');
is(psql1($node1, 'SELECT count(*) FROM guarded WHERE v = 4'), '0',
	'nothing of the cancelled commit landed');
ok($node1->log_contains(qr/They have waited for a session timeout and are cancelled now/, $log_offset),
	'the log says why the backend was cancelled');
$node1->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $s->pid . ')');
ok($s->wait(30), 'the session waiting for the standby ends');
$w->query_ok('SELECT 1');
$_->quit for ($s, $b, $w);
ok(zk_wait_connected($node1), 'the restarted worker connects');

# --- a commit that is not held up does not hold the worker up ----------------
$log_offset = -s $node1->logfile;
$node1->safe_psql('postgres',
	q{BEGIN; SELECT zk_lock_acquire('window/quick'); INSERT INTO guarded VALUES (3); COMMIT;});
my $h = zk_session($node1, 'quick_holder');
$h->query_ok(q{SELECT zk_lock_acquire_session('window/quick') > 0});
$w = zk_session($node2, 'quick_waiter');
$w->send(q{SELECT zk_lock_acquire('window/quick', timeout => '60 s') > 0});
ok(wait_for_waiting($node2, $w->pid), 'W waits behind a session lock of node1');
$old_worker = worker_pid($node1);
my $t0 = time();
kill 'TERM', $old_worker;
my $r = $w->wait(30);
ok($r && $r->{out} eq 't', 'with no commit in its window, W is granted at once after a SIGTERM of the worker');
note sprintf('W granted %.3f s after the SIGTERM of node1\'s worker', time() - $t0);
ok(wait_until(sub { my $p = worker_pid($node1); $p ne '' && $p ne $old_worker }, timeout => 20),
	'the worker restarts');
ok(zk_wait_connected($node1), 'and connects');
ok(!$node1->log_contains(qr/keeping ZooKeeper session/, $log_offset),
	'without keeping its session for a commit');
$r = $h->query(q{SELECT zk_lock_release('window/quick')});
like($r->{err}, qr/was lost/, 'the holder hears that its session lock was lost');
$w->query_ok('SELECT 1');
$_->quit for ($h, $w);

zk_done_check();
done_testing();
