
# Issue 28, finding 3: zk_lock_revoke(..., 'terminate') and a commit past
# the commit fence.  The holder's node goes with the backend's exit, after
# its transaction has ended, so it outlives every commit that passed the
# fence:
#  - a COMMIT waiting before its commit record (for the NOTIFY queue's
#    lock): SIGTERM ends it, nothing of it lands, then W is granted;
#  - a COMMIT waiting after its commit record (for a synchronous standby):
#    it completes locally, its row is visible, then W is granted.
# And a force release of another client's node (no zklock data: nobody to
# ask) deletes it at once, as before.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my $node1 = zk_node('node1',
	session_timeout => '10s',
	extra_conf => "synchronous_standby_names = 'zklock_no_such_standby'\n"
	  . "synchronous_commit = local\n"
	  . "wal_level = replica\nmax_wal_senders = 2");
my $node2 = zk_node('node2');

$node1->safe_psql('postgres', 'CREATE TABLE guarded(v int)');

sub wait_event_of
{
	my ($pid) = @_;
	return psql1($node1,
		"SELECT coalesce(wait_event_type, '') || '/' || coalesce(wait_event, '') "
		  . "FROM pg_stat_activity WHERE pid = $pid");
}

sub backend_gone
{
	my ($pid) = @_;
	return psql1($node1, "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid") eq '0';
}

# --- before the commit record: terminated, nothing lands ---------------------
my $s = zk_session($node1, 'syncrep');
$s->query_ok('SET synchronous_commit = on');
$s->query_ok('BEGIN');
$s->query_ok('INSERT INTO guarded VALUES (0)');
$s->query_ok('NOTIFY zklock_t');
$s->send('COMMIT');
ok(wait_until(sub { wait_event_of($s->pid) eq 'IPC/SyncRep' }, timeout => 20),
	'S waits for the synchronous standby, holding the NOTIFY lock');

my $b = zk_session($node1, 'holder');
my $bpid = $b->pid;
$b->query_ok('BEGIN');
$b->query_ok(q{SELECT zk_lock_acquire('rt/a') > 0});
$b->query_ok('INSERT INTO guarded VALUES (1)');
$b->query_ok('NOTIFY zklock_t');
$b->send('COMMIT');
ok(wait_until(sub { wait_event_of($bpid) =~ m{^Lock/} }, timeout => 20),
	"B's COMMIT passed the fence and waits for the NOTIFY lock");

my $w = zk_session($node2, 'waiter');
$w->send(q{SELECT zk_lock_acquire('rt/a', timeout => '60 s') > 0});
ok(wait_for_waiting($node2, $w->pid), 'W on node2 waits');
is(psql1($node2, q{SELECT zk_lock_revoke('rt/a', 'terminate')}), '1',
	'zk_lock_revoke(terminate) on node2');
my $rw = $w->wait(30);
ok($rw && $rw->{out} eq 't', 'W is granted');
ok(backend_gone($bpid), 'when W is granted, B has exited');
is(psql1($node1, 'SELECT count(*) FROM guarded WHERE v = 1'), '0',
	'and nothing of its commit landed');
$node1->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $s->pid . ')');
ok($s->wait(30), 'S ends');
is(psql1($node1, 'SELECT count(*) FROM guarded WHERE v = 1'), '0',
	'nor does it land later');
$w->query_ok('SELECT 1');
$_->quit for ($s, $w);

# --- after the commit record: it completes, then W is granted ----------------
$b = zk_session($node1, 'holder2');
$bpid = $b->pid;
$b->query_ok('SET synchronous_commit = on');
$b->query_ok('BEGIN');
$b->query_ok(q{SELECT zk_lock_acquire('rt/b') > 0});
$b->query_ok('INSERT INTO guarded VALUES (2)');
$b->send('COMMIT');
ok(wait_until(sub { wait_event_of($bpid) eq 'IPC/SyncRep' }, timeout => 20),
	"B's COMMIT wrote its record and waits for the synchronous standby");
$w = zk_session($node2, 'waiter2');
$w->send(q{SELECT zk_lock_acquire('rt/b', timeout => '60 s') > 0});
ok(wait_for_waiting($node2, $w->pid), 'W on node2 waits');
is(psql1($node2, q{SELECT zk_lock_revoke('rt/b', 'terminate')}), '1',
	'zk_lock_revoke(terminate) on node2');
$rw = $w->wait(30);
ok($rw && $rw->{out} eq 't', 'W is granted');
is(psql1($node1, 'SELECT count(*) FROM guarded WHERE v = 2'), '1',
	"when W is granted, B's row (committed locally) is visible");
ok(wait_until(sub { backend_gone($bpid) }, timeout => 20), 'B has exited');
$w->query_ok('SELECT 1');
$_->quit for ($w);

# --- another client's node: nobody to ask, deleted at once -------------------
my ($rc, $out, $err) = zkutil('create-seq', zk_path('rt/c') . '/__lock__', 'not zklock data');
is($rc, 0, 'another client\'s lock node (Kazoo\'s name, its own data)');
my $t0 = time();
my $r = zk_session($node2, 'force_foreign')->query(q{SELECT zk_lock_force_release('rt/c')});
is($r->{out}, '1', 'zk_lock_force_release removes it');
unlike($r->{err}, qr/WARNING/, 'without a WARNING');
cmp_ok(time() - $t0, '<', 5, 'at once (node2\'s bound is 8 s)');
is(scalar(grep { /__lock__/ } zk_list_znodes(zk_path('rt/c'))), 0, 'it is gone');

zk_done_check();
done_testing();
