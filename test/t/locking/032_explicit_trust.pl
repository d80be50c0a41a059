
# Explicit locks are granted once, only while their node exists, and expire
# by ZooKeeper's time (issue 9, finding 4):
#  - UNLOCK removes the granted lock, not a waiting request's node; the
#    waiter is then granted with its node, and the other instance is kept
#    out;
#  - a waiting request whose node is deleted fails at once with a clear
#    error instead of being granted a token with no node behind it;
#  - an UNLOCK while a request's grant is still being written leaves it
#    alone (no error), and it is granted;
#  - a request cancelled just as it is granted leaves no lock behind;
#  - the sweep does not compare its own wall clock with a time another
#    machine wrote: a 1.0 node whose writer's clock was two hours behind the
#    sweeper's (the same as a sweeper two hours ahead) is not removed early;
#    its duration counts from the node's mtime; a waiting 1.0 node is never
#    removed;
#  - a waiting explicit request whose backend is killed (so the instance
#    restarts) leaves no node that later becomes a lock without an owner.
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
# node1 restarts after a backend's crash (Cluster turns that off)
my $node1 = zk_node('node1', extra_conf => "$conf\nrestart_after_crash = on");
my $node2 = zk_node('node2', extra_conf => $conf);

sub explicit_count
{
	my ($node, $resource, $where) = @_;
	$where //= 'true';
	return psql1($node,
		"SELECT count(*) FROM zk_locks WHERE resource = '$resource' AND ($where)");
}

# --- UNLOCK and a waiter -----------------------------------------------------
my $s1 = zk_session($node1, 's1');
my $s2 = zk_session($node1, 's2');
like($s1->query_ok(q{SELECT zk_lock_acquire_explicit('ex/a', ttl => '1 hour')}),
	qr/^\d+$/, 'S1 holds an explicit lock');
$s2->send(q{SELECT zk_lock_acquire_explicit('ex/a', ttl => '1 hour', timeout => '20 s')});
ok(wait_for_waiting($node1, $s2->pid), 'S2 waits for it');
is($s1->query_ok(q{SELECT zk_lock_release_explicit('ex/a')}), '1',
	'UNLOCK removes one node: the granted one');
my $r = $s2->wait(20);
ok($r && $r->{out} =~ /^\d+$/ && $r->{sqlstate} eq '00000', 'S2 is granted');
is(explicit_count($node2, 'ex/a', 'granted'), '1',
	'and its node is there, granted');
is(psql1($node2, q{SELECT zk_lock_try_acquire('ex/a') IS NULL}), 't',
	'the other instance is kept out');
is(psql1($node2, q{SELECT zk_lock_release_explicit('ex/a')}), '1', 'UNLOCK');

# --- a waiting request's node deleted ----------------------------------------
$s1->query_ok(q{SELECT zk_lock_acquire_explicit('ex/d', ttl => '1 hour')});
$s2->send(q{SELECT zk_lock_acquire_explicit('ex/d', ttl => '1 hour', timeout => '15 s')});
ok(wait_for_waiting($node1, $s2->pid), 'S2 waits behind S1 again');
my ($waiting) = grep { !/LOCK-EXCLUSIVE-0000000000$/ } zk_lock_nodes(zk_path('ex/d'));
ok(defined $waiting, 'the waiting node is found');
my $t0 = time();
my ($rc) = zkutil('delete-r', $waiting);
is($rc, 0, 'someone deletes the waiting node');
$r = $s2->wait(20);
ok($r && $r->{sqlstate} ne '00000' && $r->{err} =~ /deleted/,
	'S2 fails with an error that says its node was deleted')
  or diag(explain($r));
ok($r && time() - $t0 < 5, 'at once, not at its timeout');
is(explicit_count($node2, 'ex/d'), '1', 'S1\'s lock alone is left');
is(psql1($node2, q{SELECT zk_lock_release_explicit('ex/d')}), '1', 'UNLOCK');

# --- UNLOCK while a request's grant is being written --------------------------
# Its blocker gone, Hive's rule grants the waiting node in any listing, but
# until its worker has rewritten it and deleted its waiter child it is a
# waiting request: an UNLOCK then leaves it alone (it failed with 38000,
# "not empty", which 041 hit under load).  The requester's worker is
# stopped (a stall) to hold that moment open.
my $hx = zk_session($node2, 'hx');
$hx->query_ok(q{SELECT zk_lock_acquire_session('ex/g')});
$s2->send(q{SELECT zk_lock_acquire_explicit('ex/g', ttl => '1 hour', timeout => '20 s')});
ok(wait_for_waiting($node1, $s2->pid), 'an explicit request waits behind a session lock');
ok(wait_until(sub { grep { m{/waiter$} } zk_list_znodes(zk_path('ex/g')) }),
	'its node has its waiter child');
my $wpid = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
kill 'STOP', $wpid;
$hx->query_ok(q{SELECT zk_lock_release('ex/g')});
ok(wait_until(sub { scalar(zk_lock_nodes(zk_path('ex/g'))) == 1 }),
	'the holder is gone: the waiting node is first, its grant not written');
my ($urc, $uout, $uerr) = $node2->psql('postgres',
	q{SELECT zk_lock_release_explicit('ex/g')}, timeout => 20);
is($urc, 0, 'UNLOCK meanwhile is no error') or diag($uerr);
is($uout, '0', '... and removes nothing');
like($uerr, qr/you don't own an explicit zklock lock/, '... with its WARNING');
is(scalar(grep { m{/waiter$} } zk_list_znodes(zk_path('ex/g'))), 1,
	'the request\'s node and its waiter child are still there');
kill 'CONT', $wpid;
$r = $s2->wait(20);
ok($r && $r->{out} =~ /^\d+$/ && $r->{sqlstate} eq '00000',
	'the request is granted when its worker goes on') or diag(explain($r));
is(explicit_count($node2, 'ex/g', 'granted'), '1', 'with its node');
is(psql1($node2, q{SELECT zk_lock_release_explicit('ex/g')}), '1',
	'and UNLOCK removes it now');
$hx->quit;

# --- a cancel that lands with the grant -------------------------------------
# The worker grants an explicit request while its backend is stopped; the
# backend then meets a cancel before it looks at the grant.  Its caller
# gets 57014 and holds nothing, so the node granted meanwhile must go: it
# stayed for its whole time to live, held by nobody who knew.
my $hy = zk_session($node2, 'hy');
$hy->query_ok(q{SELECT zk_lock_acquire_session('ex/h')});
my $sy = zk_session($node1, 'sy');
$sy->send(q{SELECT zk_lock_acquire_explicit('ex/h', ttl => '1 hour', timeout => '60 s')});
ok(wait_for_waiting($node1, $sy->pid), 'cancel: an explicit request waits');
kill 'STOP', $sy->pid;
$hy->query_ok(q{SELECT zk_lock_release('ex/h')});
ok( wait_until(
		sub {
			psql1($node1, q{SELECT state FROM zk_lock_local WHERE pid = } . $sy->pid) eq 'granted';
		}),
	'cancel: the worker grants it while its backend is stopped');
psql1($node1, 'SELECT pg_cancel_backend(' . $sy->pid . ')');
kill 'CONT', $sy->pid;
$r = $sy->wait(20);
is($r && $r->{sqlstate}, '57014', 'cancel: the request ends with the cancel')
  or diag(explain($r));
ok(wait_until(sub { scalar(zk_lock_nodes(zk_path('ex/h'))) == 0 }, timeout => 20),
	'cancel: the node granted meanwhile is removed');
is(psql1($node2, q{SELECT zk_lock_try_acquire('ex/h') > 0}), 't',
	'cancel: nobody holds the resource');
$hy->quit;
$sy->quit;

# --- the sweep and clocks ----------------------------------------------------
# A node as zklock 1.0 wrote it, by a machine whose clock was two hours
# behind (or: swept by one two hours ahead): its expiry has passed by the
# sweeper's wall clock, but only a few seconds of its hour have passed.
my $now = time();
my $data = sprintf('instance=old\npid=1\ndatabase=postgres\nuser=postgres\n'
	  . 'application=\nvxid=3/1\nscope=explicit\nimplicit=false\n'
	  . 'since=%d.000000\nexpires=%d\nquery=LOCK',
	$now - 7200, $now - 3600 + 1);
my ($crc, $made) = zkutil('create-seq', zk_path('ex/skew') . '/zx00000000.0.0-LOCK-EXCLUSIVE-', $data);
is($crc, 0, 'a 1.0 explicit node written by a lagging clock');
$data = sprintf('instance=old\npid=1\ndatabase=postgres\nuser=postgres\n'
	  . 'application=\nvxid=3/1\nscope=explicit\nimplicit=false\n'
	  . 'since=%d.000000\nexpires=%d\nquery=LOCK',
	$now - 7200, $now - 7200 + 2);
($crc) = zkutil('create-seq', zk_path('ex/short10') . '/zx00000000.0.0-LOCK-EXCLUSIVE-', $data);
is($crc, 0, 'and one with a time to live of two seconds');
# a waiting 1.0 node whose expiry passed long ago stays while it waits
$s1->query_ok(q{SELECT zk_lock_acquire_explicit('ex/w10', ttl => '1 hour')});
($crc) = zkutil('create-seq', zk_path('ex/w10') . '/zx00000000.0.0-LOCK-EXCLUSIVE-', $data);
is($crc, 0, 'and a waiting one whose expiry passed');
# Since 1.5 a sweep finds explicit nodes through their index, which these
# nodes, made by hand as zklock 1.0 made them, are not in: an instance
# upgraded from 1.0 starts a new worker, whose first sweep walks the tree
# and records them (test 072).  So does node2's here.
$wpid = psql1($node2, 'SELECT worker_pid FROM zk_lock_status');
kill 'TERM', $wpid;
ok(wait_until(sub {
			my $p = eval { psql1($node2, 'SELECT worker_pid FROM zk_lock_status') } // '';
			$p ne '' && $p ne $wpid }, timeout => 30)
	  && ZkLockTest::zk_wait_connected($node2),
	"node2's worker starts again (its first sweep walks the tree)");
ok(wait_until(sub { explicit_count($node2, 'ex/short10') eq '0' }, timeout => 10),
	'the two-second 1.0 lock expires (its duration counted from its mtime)');
sleep(2);
is(explicit_count($node2, 'ex/skew'), '1',
	'the 1.0 lock of an hour is not removed by a sweeper whose clock is ahead');
is(explicit_count($node2, 'ex/w10'), '2', 'nor a waiting 1.0 request');
is(psql1($node2, q{SELECT zk_lock_release_explicit('ex/skew')}), '1', 'UNLOCK');
is(psql1($node1, q{SELECT zk_lock_release_explicit('ex/w10')}), '1',
	'UNLOCK of the holder');
ok(wait_until(sub { explicit_count($node2, 'ex/w10') eq '0' }, timeout => 10),
	'the 1.0 request, granted now and long past its time, is removed');

# --- a waiting request whose backend is killed -------------------------------
$s1->quit;
$s2->quit;
my $h = zk_session($node2, 'holder');
$h->query_ok(q{SELECT zk_lock_acquire_session('ex/k')});
my $k = zk_session($node1, 'killed');
$k->send(q{SELECT zk_lock_acquire_explicit('ex/k', ttl => '1 hour', timeout => '60 s')});
ok(wait_for_waiting($node1, $k->pid), 'an explicit request on node1 waits');
is(scalar(zk_lock_nodes(zk_path('ex/k'))), 2, 'two nodes: holder and waiter');
kill 'KILL', $k->pid;
$t0 = time();
ok( wait_until(
		sub {
			my $ok = eval { $node1->psql('postgres', 'SELECT 1', timeout => 5) == 0 };
			return $ok;
		},
		timeout => 60,
		interval => 0.5),
	'node1 restarted after the crash of a backend');
ok(ZkLockTest::zk_wait_connected($node1, 30), 'and its worker is connected');
ok(wait_until(sub { scalar(zk_lock_nodes(zk_path('ex/k'))) == 1 }, timeout => 30),
	'the killed request\'s node is removed');
note(sprintf('removed %.1f s after the kill', time() - $t0));
$h->query_ok(q{SELECT zk_lock_release('ex/k')});
is(psql1($node2, q{SELECT zk_lock_try_acquire('ex/k') > 0}), 't',
	'the resource is free once its holder lets go: no lock without an owner');
like(slurp_file($node1->logfile) . slurp_file($node2->logfile),
	qr/removing the node of an explicit lock request whose waiter is gone/,
	'the removal is logged');

# --- a rolling upgrade: 1.0's SQL objects on the 1.1 library ---------------
psql1($node2, q{DROP EXTENSION zklock; CREATE EXTENSION zklock VERSION '1.0'});
psql1($node1, q{SELECT zk_lock_acquire_explicit('ex/up', ttl => '1 hour')});
is(psql1($node2, q{SELECT count(*) FROM zk_locks WHERE resource = 'ex/up' AND granted AND expires > now()}),
	'1', '1.0\'s zk_locks shows a 1.1 explicit lock and its expiry');
is(psql1($node2, q{SELECT zk_lock_release_explicit('ex/up')}), '1',
	'and 1.0\'s UNLOCK removes it');
psql1($node2, q{ALTER EXTENSION zklock UPDATE TO '1.1'});
is(psql1($node2, q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
	'1.1', 'updated to 1.1');
psql1($node2, q{ALTER EXTENSION zklock UPDATE TO '1.2'});
is(psql1($node2, q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
	'1.2', 'then to 1.2');

zk_done_check();
done_testing();
