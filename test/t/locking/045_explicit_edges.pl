# Explicit locks at their edges (issue 20):
#  - finding 5: the sweep's clock cannot be squatted.  zklock's own names
#    ("zklock." and the old "zklock-clock-") are refused as resource names
#    (22023), and nodes named as the old clock nodes (made by an older
#    instance, or by anyone before this version) do not stop the sweep: a
#    2 s explicit lock is still removed;
#  - finding 6: an explicit request waiting when its worker is terminated
#    (SIGTERM) leaves no node that holds the resource: the next worker
#    removes it at once, and another instance is granted within seconds
#    (was: after twice the session timeout and a sweep); an explicit
#    request whose granting write was in flight when the worker went is
#    failed, and its node goes too (was: a lock of a year nobody knew of),
#    even when the instance crash-restarts after the next worker read the
#    orphans' file and before it deleted the node (was: the file went when
#    read, and the node stayed granted for its year);
#  - finding 7: zklock.max_explicit_locks_per_role limits the explicit locks
#    a role holds or waits for, counted on every instance (53400 past it),
#    and only a superuser sets it; its cost per acquire is measured;
#  - zklock.allowed_subtrees refuses items that are not resource names
#    ("a/../b", "./x", "a//b"), as resource names are refused.
# (Finding 2, node data cut in other encodings, is in test 028.)
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my $conf = "zklock.sweep_interval = '500ms'";
my $node1 = zk_node('node1', extra_conf => "$conf\nrestart_after_crash = on", session_timeout => '10s');
my $node2 = zk_node('node2', extra_conf => $conf, session_timeout => '10s');
foreach my $n ($node1, $node2)
{
	$n->safe_psql('postgres', q{
		CREATE ROLE squatter LOGIN;
		CREATE ROLE quota_user LOGIN;
	});
}

# the 16 hex digits of a worker's session id, as the old clock node had it
sub session_hex
{
	my ($node) = @_;
	my $sid = psql1($node, 'SELECT session_id FROM zk_lock_status');
	$sid =~ s/^0x//i;
	return ('0' x (16 - length $sid)) . lc $sid;
}

sub granted_rows
{
	my ($node, $resource) = @_;
	return psql1($node,
		"SELECT count(*) FROM zk_locks WHERE resource = '$resource' AND granted");
}

# --- finding 5: the sweep's clock ---------------------------------------------
my @sids = (session_hex($node1), session_hex($node2));
my $sq = zk_session($node1, 'squatter', user => 'squatter');
foreach my $name ("zklock-clock-$sids[0]", "zklock-clock-$sids[1]",
	'zklock.clock-0000000000000001', 'zklock.anchor', 'zklock.anchor/x')
{
	my $r = $sq->query(
		"SELECT zk_lock_acquire_explicit('$name', 'shared', ttl => '1 year')");
	is($r->{sqlstate}, '22023', "a role cannot lock zklock's own name \"$name\" (was granted)");
}
my $r = $sq->query(q{SELECT zk_lock_acquire_session('zklock.x/y')});
like($r->{err}, qr/must not begin with "zklock\."/, '... the error names the reserved prefix');

# the old clock names taken anyway (an older instance of a rolling upgrade,
# or a node made before): another client's nodes with those names
foreach my $sid (@sids)
{
	my ($rc, $out, $err) = ZkLockTest::zkutil('create-private',
		zk_path("zklock-clock-$sid"), 'other:secret', 'plain');
	is($rc, 0, "a node named as the old clock node of session $sid exists") or diag($err);
}
like($sq->query_ok(q{SELECT zk_lock_acquire_explicit('sq/short', ttl => '2 s')}),
	qr/^\d+$/, 'the squatter takes a 2 s explicit lock');
my $t0 = time();
my $gone = wait_until(sub { granted_rows($node2, 'sq/short') eq '0' },
	timeout => 20, interval => 0.2);
ok($gone, sprintf('the sweep still removes it (%.1f s after the acquire; was never)',
		time() - $t0));
isnt(psql1($node2, q{SELECT coalesce(zk_lock_try_acquire('sq/short')::text, 'none')}),
	'none', 'and another instance gets the resource');
foreach my $sid (@sids)
{
	ZkLockTest::zkutil('delete-private', zk_path("zklock-clock-$sid"), 'other:secret');
}
$sq->quit;

# --- finding 6: a waiting explicit request when its worker goes ---------------
# no sweep that could remove the orphan within the bounds below
foreach my $n ($node1, $node2)
{
	$n->safe_psql('postgres', q{ALTER SYSTEM SET zklock.sweep_interval = '10min'});
	$n->safe_psql('postgres', q{SELECT pg_reload_conf()});
}
my $h = zk_session($node2, 'holder');
my $w = zk_session($node1, 'waiter');
my $x = zk_session($node2, 'next');
like($h->query_ok(q{SELECT zk_lock_acquire_explicit('orph/a', ttl => '1 hour')}),
	qr/^\d+$/, 'node2 holds an explicit lock');
$w->send(q{SELECT zk_lock_acquire_explicit('orph/a', ttl => '1 hour', timeout => '60 s')});
ok(wait_for_waiting($node1, $w->pid), 'an explicit request of node1 waits for it');
ok(zk_wait_count(zk_path('orph/a'), 2, 10), 'its node is in ZooKeeper');
$x->send(q{SELECT zk_lock_acquire_session('orph/a', timeout => '60 s')});
ok(wait_for_waiting($node2, $x->pid), 'a session lock of node2 waits behind both');

my $worker = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
my $t_term = time();
is(kill('TERM', $worker), 1, "SIGTERM to node1's worker");
$r = $w->wait(30);
is($r && $r->{sqlstate}, '55000', 'the waiting explicit request fails (55000)');
is($h->query_ok(q{SELECT zk_lock_release_explicit('orph/a')}), '1',
	'the holder releases its explicit lock');
$r = $x->wait(40);
my $took = time() - $t_term;
is($r && $r->{sqlstate}, '00000', 'the next request is granted');
cmp_ok($took, '<', 8,
	sprintf('... %.1f s after the SIGTERM: the next worker removed the orphaned node at once (was twice the session timeout and a sweep)',
		$took));
diag(sprintf('finding 6: SIGTERM of the worker to the grant of the blocked resource: %.2f s', $took));
is(psql1($node2, q{SELECT count(*) FROM zk_locks WHERE resource = 'orph/a' AND scope = 'explicit'}),
	'0', 'no explicit node of the failed request is left');
ok(zk_wait_connected($node1), "node1's new worker is connected");
$x->query_ok(q{SELECT zk_lock_release('orph/a')});

# the grant's write in flight when the worker goes
ok(zk_set_failpoints($node1, 'explicit-grant-sent=exit'), 'failpoint set');
my $g = zk_session($node1, 'granted');
my $off = -s $node1->logfile;
$r = $g->query(q{SELECT zk_lock_acquire_explicit('orph/b', ttl => '1 year')});
is($r->{sqlstate}, '55000',
	'an explicit request whose worker went while writing its grant fails (55000)');
ok(zk_set_failpoints($node1, ''), 'failpoint cleared');
ok(zk_wait_connected($node1), "node1's next worker is connected");
my $free = wait_until(
	sub {
		psql1($node2, q{SELECT coalesce(zk_lock_try_acquire('orph/b')::text, 'none')}) ne
		  'none';
	},
	timeout => 10, interval => 0.2);
ok($free, 'another instance gets the resource: no lock stayed granted after "failed" (was a year)');
is(psql1($node2, q{SELECT count(*) FROM zk_locks WHERE resource = 'orph/b'}), '0',
	'... and no node of the failed request is left');
ok(zk_wait_log($node1, qr/removing the node of an explicit lock request lost with the session/, $off),
	'the log says the orphan was removed');
$g->quit;

# the same, and the instance crash-restarts after the next worker read the
# orphans' file but before it deleted the node: the file must outlive that
# (it went as soon as read: the node then stayed granted for its year)
ok(zk_set_failpoints($node1, 'explicit-grant-sent=exit,orphans-loaded=pause'),
	'failpoints set');
my $c = zk_session($node1, 'crashgrant');
$off = -s $node1->logfile;
$r = $c->query(q{SELECT zk_lock_acquire_explicit('orph/c', ttl => '1 year')});
is($r->{sqlstate}, '55000', 'another request fails with its worker while its grant is written');
ok(zk_wait_log($node1, qr/failpoint "orphans-loaded" reached/, $off, 60),
	'the next worker read the orphans and pauses before deleting any');
is(zk_count_locks(zk_path('orph/c')), 1, "... the failed request's node is still there");
# cleared in the file; the postmaster reads it at the reload after the restart
$node1->safe_psql('postgres', q{ALTER SYSTEM SET zklock.failpoints = ''});
my $victim = zk_session($node1, 'victim');
$off = -s $node1->logfile;
is(kill('KILL', $victim->pid), 1, 'a backend of node1 is killed (SIGKILL)');
ok(zk_wait_log($node1, qr/all server processes terminated; reinitializing/, $off, 30),
	'the instance crash-restarts');
ok(zk_wait_log($node1, qr/failpoint "orphans-loaded" reached/, $off, 60),
	'the worker after the restart pauses there too');
ok(wait_until(sub { ($node1->psql('postgres', 'SELECT pg_reload_conf()'))[0] == 0 },
		timeout => 30),
	'the failpoint is cleared');
ok(zk_wait_count(zk_path('orph/c'), 0, 15),
	"the failed request's node is removed after the restart (was granted for a year)");
ok(zk_wait_connected($node1), "node1's worker is connected");

# an orphan whose parent zklock may not list (NOAUTH: another client's ACL)
# does not hold up the orphans after it (it did, until the next connection)
my ($prc, $pout, $perr) = ZkLockTest::zkutil('create-private',
	zk_path('orph/private'), 'other:secret', 'plain');
is($prc, 0, "a node zklock may not list, another client's") or diag($perr);
$h->query_ok(q{SELECT zk_lock_acquire_explicit('orph/d', ttl => '1 hour')});
my $dnode = psql1($node2, q{SELECT node FROM zk_locks WHERE resource = 'orph/d'});
my ($dprefix) = $dnode =~ /^((?:_c_)?zx[^-]*-)/;
ok(defined $dprefix, "an explicit lock's node, $dnode, stands for an orphan");
$dprefix =~ s/^_c_//;
$node1->stop;
PostgreSQL::Test::Utils::append_to_file($node1->data_dir . '/pg_stat_tmp/zklock.orphans',
	zk_path('orph/private') . "\tzx00000000.0.1-\n" . zk_path('orph/d') . "\t$dprefix\n");
$node1->start;
ok(zk_wait_count(zk_path('orph/d'), 0, 15),
	'the orphan after one whose parent cannot be listed is removed at once');
ok(zk_wait_connected($node1), "node1's worker is connected");
($prc, $pout, $perr) = ZkLockTest::zkutil('delete-private', zk_path('orph/private'),
	'other:secret');
is($prc, 0, "the other client's node is gone") or diag($perr);
foreach my $n ($node1, $node2)
{
	$n->safe_psql('postgres', q{ALTER SYSTEM SET zklock.sweep_interval = '500ms'});
	$n->safe_psql('postgres', q{SELECT pg_reload_conf()});
}

# --- finding 7: explicit locks per role ----------------------------------------
foreach my $n ($node1, $node2)
{
	$n->safe_psql('postgres',
		q{ALTER ROLE quota_user SET zklock.max_explicit_locks_per_role = 3});
}
my $q1 = zk_session($node1, 'quota1', user => 'quota_user');
my $q2 = zk_session($node2, 'quota2', user => 'quota_user');
$q1->query_ok(q{SELECT zk_lock_acquire_explicit('q/1', ttl => '1 hour')});
$q1->query_ok(q{SELECT zk_lock_acquire_explicit('q/2', 'shared', ttl => '1 hour')});
$q2->query_ok(q{SELECT zk_lock_acquire_explicit('q/3', ttl => '1 hour')});
$r = $q1->query(q{SELECT zk_lock_acquire_explicit('q/4', ttl => '1 hour')});
is($r->{sqlstate}, '53400',
	'the fourth explicit lock of the role is refused: those on the other instance count (was granted)');
like($r->{err}, qr/holds or waits for 3 explicit locks.*max_explicit_locks_per_role is 3/s,
	'... saying how many and the limit');
is(zk_count_locks(zk_path('q')), 3, '... and makes no node');
$r = $q1->query(q{SET zklock.max_explicit_locks_per_role = 1000});
is($r->{sqlstate}, '42501', 'the role cannot raise its own limit');
is($q2->query_ok(q{SELECT zk_lock_release_explicit('q/3')}), '1', 'one is released');
$q1->query_ok(q{SELECT zk_lock_acquire_explicit('q/4', ttl => '1 hour')});
pass('then the next is granted');
is(psql1($node1, q{SET zklock.max_explicit_locks_per_role = 0;
	SELECT zk_lock_acquire_explicit('q/su', ttl => '1 hour') > 0}), 't',
	'a superuser is not limited');

# what the count costs: 200 other explicit locks in the tree, 20 acquires
psql1($node1, q{SELECT count(zk_lock_acquire_explicit('bench/' || g, ttl => '1 hour'))
	FROM generate_series(1, 200) g});
my %per;
foreach my $limit (-1, 1000)
{
	$node1->safe_psql('postgres',
		"ALTER ROLE quota_user SET zklock.max_explicit_locks_per_role = $limit");
	my $b = zk_session($node1, "bench$limit", user => 'quota_user');
	my $t = time();
	for my $i (1 .. 20)
	{
		$b->query_ok("SELECT zk_lock_acquire_explicit('qb/$i', ttl => '1 hour')");
		$b->query_ok("SELECT zk_lock_release_explicit('qb/$i')");
	}
	$per{$limit} = (time() - $t) / 20;
	$b->quit;
}
diag(sprintf('finding 7: acquire + release of an explicit lock with 204 explicit nodes in the tree: %.1f ms without the limit, %.1f ms with it (+%.1f ms per acquire)',
		1000 * $per{-1}, 1000 * $per{1000}, 1000 * ($per{1000} - $per{-1})));
ok($per{1000} > 0, 'measured the cost of the count');
psql1($node1, q{SELECT sum(zk_lock_release_explicit(r)) FROM
	(SELECT 'bench/' || g AS r FROM generate_series(1, 200) g
	 UNION ALL VALUES ('q/1'), ('q/4'), ('q/su')) s});
is($q1->query_ok(q{SELECT zk_lock_release_explicit('q/2', 'shared')}), '1', 'released');
$q1->quit;
$q2->quit;

# --- zklock.allowed_subtrees items are resource names -------------------------
foreach my $bad ('a/../b', './x', 'a//b', 'etl, x/.', 'zklock.anchor')
{
	my ($rc, $out, $err) = $node1->psql('postgres',
		"ALTER ROLE squatter SET zklock.allowed_subtrees = '$bad'");
	isnt($rc, 0, "zklock.allowed_subtrees = '$bad' is refused (was accepted)");
	like($err, qr/invalid value for parameter "zklock.allowed_subtrees"/,
		'... as an invalid value');
}
my ($rc, $out, $err) = $node1->psql('postgres',
	q{ALTER ROLE squatter SET zklock.allowed_subtrees = 'etl, reports/daily'});
is($rc, 0, 'good items are still accepted');
$node1->safe_psql('postgres', q{ALTER ROLE squatter RESET zklock.allowed_subtrees});

zk_done_check();
done_testing();
