
# Issue 28, finding 3: zk_lock_force_release and a commit already past the
# commit fence.  B on node1 holds 'fr/r', writes, and its COMMIT passes the
# fence, then waits for the NOTIFY queue's lock (held by S, which waits for
# a synchronous standby that does not exist).  A superuser on node2
# force-releases 'fr/r'; W on node2 waits for it.
#  - Before the fix, the node was deleted at once: W was granted while B's
#    commit could still land, and B's row landed after W's grant.
#  - Now node1's worker, asked first, marks B's lock lost, keeps the node
#    until B's commit has ended, then deletes it: W is not granted before
#    B's commit has ended; zk_lock_force_release returns after that.
#  - node1's worker stopped (SIGSTOP): node2 deletes the node itself after
#    twice its session timeout, with a WARNING naming the node.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
# node1's session outlives node2's bound (2 x 4 s) while its worker is stopped
my $node1 = zk_node('node1',
	session_timeout => '20s',
	extra_conf => "synchronous_standby_names = 'zklock_no_such_standby'\n"
	  . "synchronous_commit = local\n"
	  . "wal_level = replica\nmax_wal_senders = 2");
my $node2 = zk_node('node2', session_timeout => '4s');

$node1->safe_psql('postgres', 'CREATE TABLE guarded(v int)');

sub wait_event_of
{
	my ($pid) = @_;
	return psql1($node1,
		"SELECT coalesce(wait_event_type, '') || '/' || coalesce(wait_event, '') "
		  . "FROM pg_stat_activity WHERE pid = $pid");
}

# --- a commit past the fence, held by the NOTIFY queue's lock ----------------
my $s = zk_session($node1, 'syncrep');
$s->query_ok('SET synchronous_commit = on');
$s->query_ok('BEGIN');
$s->query_ok('INSERT INTO guarded VALUES (0)');
$s->query_ok('NOTIFY zklock_fr');
$s->send('COMMIT');
ok(wait_until(sub { wait_event_of($s->pid) eq 'IPC/SyncRep' }, timeout => 20),
	'S waits for the synchronous standby, holding the NOTIFY lock');

my $b = zk_session($node1, 'holder');
$b->query_ok('BEGIN');
$b->query_ok(q{SELECT zk_lock_acquire('fr/r') > 0});
$b->query_ok('INSERT INTO guarded VALUES (1)');
$b->query_ok('NOTIFY zklock_fr');
$b->send('COMMIT');
ok(wait_until(sub { wait_event_of($b->pid) =~ m{^Lock/} }, timeout => 20),
	"B's COMMIT passed the fence and waits for the NOTIFY lock");

my $log1 = -s $node1->logfile;
my $log2 = -s $node2->logfile;
my $f = zk_session($node2, 'force_releaser');
my $t_force = time();
$f->send(q{SELECT zk_lock_force_release('fr/r')});
my $w = zk_session($node2, 'waiter');
$w->send(q{SELECT zk_lock_acquire('fr/r', timeout => '60 s') > 0});

# the old code granted W within 0.1 s
my $w_early = wait_until(sub { $w->done }, timeout => 3, interval => 0.01);
my $t_w_early = time();
ok(!$w_early, "W is not granted while B's commit, past the fence, can still land");
ok(!$f->done, 'zk_lock_force_release waits for the holder\'s instance');
is(psql1($node1, q{SELECT state FROM zk_lock_local WHERE resource = 'fr/r'}), 'lost',
	"B's lock is marked lost on node1 (no new commit passes the fence)");

# S's standby wait is cancelled: B's commit goes on and lands
$node1->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $s->pid . ')');
my $rb = $b->wait(30);
my $t_b = time();
ok($rb && $rb->{sqlstate} eq '00000', "B's COMMIT, past the fence, succeeds");
my $rf = $f->wait(30);
is($rf && $rf->{out}, '1', 'zk_lock_force_release returns 1 after B\'s commit has ended');
unlike($rf->{err} // '', qr/WARNING/, 'without a WARNING: the holder\'s instance answered');
cmp_ok(time() - $t_force, '<', 8, 'and within its bound (twice node2\'s session timeout)');
my $rw = $w->wait(30);
my $t_w = time();
ok($rw && $rw->{out} eq 't', 'then W is granted');
is(psql1($node1, 'SELECT count(*) FROM guarded WHERE v = 1'), '1', "B's row is committed");
note $w_early
  ? sprintf('W granted %.3f s BEFORE B\'s commit ended (its row landed)', $t_b - $t_w_early)
  : sprintf('W granted %.3f s after B\'s commit ended', $t_w - $t_b);
ok($node1->log_contains(qr/lock node ".*fr\/r\/.*" was force-released by an administrator/, $log1),
	'node1 logs the request');
ok($node1->log_contains(qr/keeping force-released lock node ".*fr\/r\/.*" until the commit of backend \d+/, $log1),
	'node1 logs that it keeps the node for a commit');
$s->wait(10);
$w->query_ok('SELECT 1');    # W's transaction ends: the lock goes
$_->quit for ($s, $b, $w, $f);
ok(zk_wait_no_locks(zk_path('fr'), 20), 'no lock node left under fr');

# --- the holder's instance does not answer: deleted after the bound ----------
my $h = zk_session($node1, 'stopped_holder');
$h->query_ok(q{SELECT zk_lock_acquire_session('fr/s') > 0});
my $worker1 = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
kill 'STOP', $worker1;
$log2 = -s $node2->logfile;
$t_force = time();
my $r = zk_session($node2, 'force_releaser2')->query(q{SELECT zk_lock_force_release('fr/s')});
my $took = time() - $t_force;
kill 'CONT', $worker1;
is($r->{out}, '1', 'a stopped holder\'s instance: zk_lock_force_release still removes the node');
like($r->{err}, qr/WARNING:.*lock node "[^"]+" on resource "fr\/s" was deleted without its holder's instance/,
	'with a WARNING to the caller naming the node');
cmp_ok($took, '>=', 7, 'after twice the session timeout (8 s)');
cmp_ok($took, '<', 40, 'and not much later');
note sprintf('force release of a stopped holder returned after %.1f s', $took);
ok($node2->log_contains(qr/WARNING:.*the holder's instance did not release lock node ".*fr\/s\/.*" within \d+ ms; deleting it/, $log2),
	'node2 logs a WARNING naming the node');
is(zk_count_locks(zk_path('fr/s')), 0, 'the node is gone');
ok(zk_wait_connected($node1), 'node1\'s worker goes on');
ok(wait_until(sub { psql1($node1, q{SELECT state FROM zk_lock_local WHERE resource = 'fr/s'}) eq 'lost' }, timeout => 20),
	'the holder hears that its lock was lost');
$r = $h->query(q{SELECT zk_lock_release('fr/s')});
like($r->{err}, qr/was lost/, 'the holder\'s release says so');
$h->quit;

# --- review: the request written over by zk_lock_revoke before the holder read it
# (zk_lock_revoke writes the whole data, unversioned): node2 writes it again
$h = zk_session($node1, 'overwritten_holder');
$h->query_ok(q{SELECT zk_lock_acquire_session('fr/v') > 0});
$worker1 = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
my ($vnode) = zk_lock_nodes(zk_path('fr/v'));
$log1 = -s $node1->logfile;
kill 'STOP', $worker1;
$f = zk_session($node2, 'force_releaser3');
$t_force = time();
$f->send(q{SELECT zk_lock_force_release('fr/v')});
ok(wait_until(sub { (zkutil('get', $vnode))[1] =~ /release=requested/ }, timeout => 20),
	'the request is written into the stopped holder\'s node');
is(psql1($node2, q{SELECT zk_lock_revoke('fr/v', 'cancel')}), '1',
	'zk_lock_revoke writes over it meanwhile');
ok(wait_until(sub { (zkutil('get', $vnode))[1] =~ /release=requested/ }, timeout => 20),
	'node2 writes the request again');
kill 'CONT', $worker1;
$r = $f->wait(30);
is($r && $r->{out}, '1', 'the force release returns 1');
unlike($r->{err} // '', qr/WARNING/, 'without a WARNING: the holder\'s instance was asked and answered');
cmp_ok(time() - $t_force, '<', 7, 'before the bound');
ok($node1->log_contains(qr/lock node ".*fr\/v\/.*" was force-released by an administrator/, $log1),
	'node1 read the request');
$h->quit;
$f->quit;

# --- review: the read's reply lost (failpoint force-read-reply=fail): read
# again, never deleted early from outside
$h = zk_session($node1, 'reread_holder');
$h->query_ok(q{SELECT zk_lock_acquire_session('fr/l') > 0});
$log1 = -s $node1->logfile;
$log2 = -s $node2->logfile;
ok(zk_set_failpoints($node2, 'force-read-reply=fail'), 'failpoint force-read-reply=fail on node2');
$f = zk_session($node2, 'force_releaser4');
$f->send(q{SELECT zk_lock_force_release('fr/l')});
ok(zk_wait_log($node2, qr/failpoint "force-read-reply" reached \(fail\)/, $log2),
	'the read\'s reply is dropped');
sleep 0.5;
is(zk_count_locks(zk_path('fr/l')), 1, 'the node is not deleted from outside meanwhile');
ok(zk_set_failpoints($node2, ''), 'failpoint cleared');
$r = $f->wait(30);
is($r && $r->{out}, '1', 'the force release returns 1');
unlike($r->{err} // '', qr/WARNING/, 'without a WARNING');
ok($node1->log_contains(qr/lock node ".*fr\/l\/.*" was force-released by an administrator/, $log1),
	'node1 was asked (the read was made again)');
$h->quit;
$f->quit;
ok(zk_wait_no_locks(zk_path('fr'), 20), 'no lock node left under fr');

zk_done_check();
done_testing();
