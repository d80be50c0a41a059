
# An ERROR in the worker while it holds zklock_shared->lock (issue 28,
# finding 6): the failpoint waits-rebuild-locked raises one inside the
# locked section of the rebuild of the publication of long waits (where an
# out of memory would).  A background worker's ERROR ends it (bgworker.c:
# proc_exit(1)); its exit callback (worker.c's worker_exit) takes that lock
# again.  On a PostgreSQL minor release whose shmem_exit does not release
# LWLocks before the callbacks, that waited for the worker itself for good
# while the client library kept the session alive; the releases built here
# (15.20, 17, 18) do release them, and worker_exit now does so itself too.
# Either way:
#  - the worker exits within a bound and the postmaster starts a new one,
#    which connects with a new session;
#  - what the old worker held or served ends (the holder's lock is lost,
#    the waiter's request fails): nothing hangs;
#  - locks work again, across instances too; nothing is left behind.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $conf = "zklock.deadlock_timeout = '500ms'";
my $hosts = zk_start();
my $node1 = zk_node('node1', extra_conf => $conf);
my $node2 = zk_node('node2', extra_conf => $conf);

# zk_lock_status of node1, bounded (a hung worker must not hang the test)
sub status
{
	my ($rc, $out) = $node1->psql('postgres',
		q{SELECT worker_pid || ',' || state || ',' || coalesce(session_id, '') FROM zk_lock_status},
		timeout => 10);
	return $rc == 0 ? $out : '';
}

my ($old_pid, undef, $old_sid) = split /,/, status();
ok($old_pid, "node1's worker runs (PID $old_pid)");
my $off = -s $node1->logfile;

ok(zk_set_failpoints($node1, 'waits-rebuild-locked=error'), 'failpoint set');

# a holder and a waiter on node1: the wait, past the timeout, is published
my $a = zk_session($node1, 'a');
my $b = zk_session($node1, 'b');
zk_hold($a, 'we/r');
$b->query_ok("SET lock_timeout = '30s'");
my $t0 = time();
$b->send(q{SELECT zk_lock_acquire('we/r') IS NOT NULL});
ok(zk_wait_log($node1, qr/failpoint "waits-rebuild-locked" raised an error/, $off, 20),
	'the worker raised the ERROR while rebuilding the publication');
# the next worker must not raise it again
$node1->safe_psql('postgres', 'ALTER SYSTEM RESET zklock.failpoints');
$node1->safe_psql('postgres', 'SELECT pg_reload_conf()');

my $restarted = wait_until(
	sub {
		my ($pid, $state, $sid) = split /,/, status();
		return $pid && $pid ne $old_pid && $state eq 'connected' && $sid ne $old_sid;
	},
	timeout => 30, interval => 0.2);
my $took = time() - $t0;
ok($restarted, 'a new worker runs on node1 with a new session, within 30 s')
  or diag('zk_lock_status: ' . status());
note(sprintf('new worker connected %.1f s after the wait began', $took));
ok(!kill(0, $old_pid), 'the old worker has exited');

my $rb = $b->wait(30);
ok($rb && $rb->{sqlstate} ne '00000',
	'the waiter\'s request ends, failed with its worker: ' . ($rb ? $rb->{sqlstate} : 'still waiting'));
$b->query_ok('ROLLBACK') if $rb && $rb->{sqlstate} eq '25P02';
my $ra = $a->query('COMMIT', 30);
ok($ra && $ra->{sqlstate} ne '00000', 'the holder\'s lock is lost: its COMMIT is refused');

# locks work again, across instances
my $c = zk_session($node1, 'c');
my $d = zk_session($node2, 'd');
zk_hold($c, 'we/r');
$d->query_ok('BEGIN');
$d->send(q{SELECT zk_lock_acquire('we/r') IS NOT NULL});
ok(wait_for_waiting($node2, $d->pid), 'node2 waits for node1\'s new holder');
$c->query_ok('COMMIT');
zk_result_is($d, '00000', 'and is granted once it commits');
$d->query_ok('COMMIT');

my @crashes = grep { !/background worker "zklock worker" \(PID $old_pid\) exited with exit code 1/ }
  zk_log_crashes($node1, $off);
is(scalar @crashes, 0, 'no other crash on node1') or diag(join("\n", @crashes));
is(scalar zk_log_crashes($node2), 0, 'no crash on node2');
ok(zk_wait_no_publication(15), 'no waits node left');
ok(zk_wait_no_entries($node1, 15), 'node1: no entry in use');
ok(zk_wait_no_entries($node2, 15), 'node2: no entry in use');
zk_done_check();
done_testing();
