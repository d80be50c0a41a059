# The operator's view of sessions and outages (issue 11, items 3, 6, 7, 8,
# 9 and 11), on one ZooKeeper (tickTime 200 ms, so session timeouts up to
# 4 s) and two instances:
#  - item 9: with ZooKeeper unreachable, an acquire whose own timeout
#    (timeout => or lock_timeout) is shorter than zklock.connect_timeout
#    fails with 08006, the connection failure, not 55P03; a genuine
#    contention timeout (ZooKeeper up, the lock held elsewhere) is 55P03;
#  - item 3: a request pending when the worker is terminated fails with
#    55000 saying the worker stopped, with a hint about the worker, and its
#    node is gone from ZooKeeper; item 11: the worker comes back (a new PID,
#    connected);
#  - item 6: node1 holds a lock, ZooKeeper is down longer than the session
#    timeout, node1's worker gives the session up; ZooKeeper starts again
#    (restoring the session from its disk) and node2 asks for the lock:
#    granted well before a session timeout, because node1 reattaches to its
#    old session and closes it; node1's holders find their locks lost;
#    requests during the outage still fail with 08006 after connect_timeout;
#  - item 7: the log names the session given up and why, and warns once
#    that N locks were lost, with the holders' PIDs; disconnected_since
#    (and the log's "since") is the true start of the outage;
#  - item 8: one outage line between 10 s and 60 s, a line when it ends;
#    last_error says why at once after a start with ZooKeeper down, and is
#    empty once connected;
#  - item 11: a fast shutdown ends the worker with exit code 0 (no "exited
#    with exit code 1" line);
#  - item 8: zklock.hosts reloaded to a wrong port and back: last_error
#    says why, then nothing stale once connected;
#  - a copy of node1's data directory (a storage snapshot) started as
#    another instance does not close node1's session.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my $node1 = zk_node('node1');
my $node2 = zk_node('node2', extra_conf => "zklock.connect_timeout = '8s'");

# the node's server log after byte $from, and its size now
sub log_from
{
	my ($node, $from) = @_;
	return slurp_file($node->logfile, $from);
}

sub log_size
{
	my ($node) = @_;
	return -s $node->logfile;
}

# --- item 9: a genuine contention timeout is 55P03 ------------------------------
my $other = zk_session($node1, 'other');
$other->query_ok(q{SELECT zk_lock_acquire_session('ops/c')});
my $s2 = zk_session($node2, 's2');
my $r = $s2->query(q{SELECT zk_lock_acquire('ops/c', timeout => '1 s')});
is($r->{sqlstate}, '55P03', 'a contention timeout (timeout =>) is 55P03');
like($r->{err}, qr/could not obtain zklock lock on resource "ops\/c" within 1000 ms/,
	'... could not obtain the lock within 1000 ms');
$s2->query_ok(q{SET lock_timeout = '1s'});
$r = $s2->query(q{SELECT zk_lock_acquire('ops/c')});
is($r->{sqlstate}, '55P03', 'a contention timeout (lock_timeout) is 55P03');
like($r->{err}, qr/canceling statement due to lock timeout/, '... core\'s message');
$s2->query_ok(q{RESET lock_timeout});
$other->query_ok(q{SELECT zk_lock_release('ops/c')});

# --- item 3 and 11: a pending request when the worker is terminated -------------
my $h = zk_session($node2, 'holder3');
$h->query_ok(q{SELECT zk_lock_acquire_session('ops/w')});
my $w = zk_session($node1, 'waiter3');
$w->query_ok('\set VERBOSITY verbose');
$w->send(q{SELECT zk_lock_acquire('ops/w')});
ok(wait_for_waiting($node1, $w->pid), 'a waiter on node1 queues behind node2\'s holder');
ok(zk_wait_count(zk_path('ops/w'), 2, 10), 'its node is in ZooKeeper');
my $worker = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
my $t = time();
# (pg_terminate_backend refuses the worker: it has no database connection,
# so it is not in the process array; any SIGTERM not from the postmaster
# is the same to the worker)
is(kill('TERM', $worker), 1, 'SIGTERM to node1\'s worker');
$r = $w->wait(30);
my $took = time() - $t;
is($r && $r->{sqlstate}, '55000', 'the waiter fails with 55000 when the worker is terminated (item 3)');
like($r && $r->{err}, qr/the zklock worker stopped while the request was pending/,
	'... saying the worker stopped');
like($r && $r->{err}, qr/HINT:.*zklock worker starts again/, '... with a hint about the worker');
unlike($r && $r->{err}, qr/Check that ZooKeeper/, '... not about ZooKeeper');
cmp_ok($took, '<', 5, sprintf('... within a few seconds (%.1f s)', $took));
ok(zk_wait_count(zk_path('ops/w'), 1, 10), 'its node is gone from ZooKeeper (the holder\'s is left)');
my $back = wait_until(
	sub {
		my $x = psql1($node1,
			q{SELECT coalesce(worker_pid, 0) || ' ' || state FROM zk_lock_status});
		my ($pid, $state) = split / /, $x;
		return $pid != 0 && $pid != $worker && $state eq 'connected';
	},
	timeout => 10, interval => 0.1);
ok($back, 'after a SIGTERM not from the postmaster the worker comes back: a new PID, connected (item 11)');
$h->query_ok(q{SELECT zk_lock_release('ops/w')});
$h->quit;
$w->quit;

# --- items 6, 7, 8, 9: an outage longer than the session timeout ----------------
my $h1 = zk_session($node1, 'holder_x');
my $h1b = zk_session($node1, 'holder_y');
$h1->query_ok('BEGIN');
$h1->query_ok(q{SELECT zk_lock_acquire('ops/x', parents => false)});
$h1b->query_ok(q{SELECT zk_lock_acquire_session('ops/y', parents => false)});
ok(zk_wait_count(zk_path('ops/x'), 1, 10), 'node1 holds ops/x');
my $sid = psql1($node1, 'SELECT session_id FROM zk_lock_status');
my $off1 = log_size($node1);

zk_server('kill', 1);
my $t_down = time();
ok(wait_until(sub { psql1($node1, 'SELECT state FROM zk_lock_status') ne 'connected' },
		timeout => 10), 'node1 sees ZooKeeper gone');
my $since_early = psql1($node1, 'SELECT disconnected_since FROM zk_lock_status');

# item 9: ZooKeeper unreachable, the wait's own timeout shorter than
# zklock.connect_timeout (8 s on node2)
my $s9 = zk_session($node2, 'item9');
$s9->query_ok('\set VERBOSITY verbose');
ok(wait_until(sub { psql1($node2, 'SELECT state FROM zk_lock_status') ne 'connected' },
		timeout => 10), 'node2 sees ZooKeeper gone');
$r = $s9->query(q{SELECT zk_lock_acquire('a/b', timeout => '3 s')});
is($r->{sqlstate}, '08006',
	'unreachable ZooKeeper, timeout => 3 s < connect_timeout: 08006 (item 9)');
like($r->{err}, qr/could not connect to ZooKeeper at "[^"]+" within 3000 ms/,
	'... the connection failure as the message');
like($r->{err}, qr/DETAIL:  zklock was asked to acquire zklock lock on resource "a"/,
	'... the request in DETAIL');
like($r->{err}, qr/HINT:  Check that ZooKeeper is running/, '... and the hint');
$s9->query_ok(q{SET lock_timeout = '3s'});
$r = $s9->query(q{SELECT zk_lock_acquire('a/b')});
is($r->{sqlstate}, '08006', 'the same with lock_timeout = 3s: 08006');
like($r->{err}, qr/could not connect to ZooKeeper at "[^"]+" within 3000 ms/,
	'... the connection failure as the message');
$s9->query_ok(q{RESET lock_timeout});

# the session is given up after the session timeout (4 s)
ok(zk_wait_log($node1, qr/LOG:  zklock: gave up ZooKeeper session \Q$sid\E after \d+ s without a connection/,
		$off1, 20),
	'the log says node1 gave its session up, naming it (item 7)');
my $since_before = psql1($node1, 'SELECT disconnected_since FROM zk_lock_status');
my $log = log_from($node1, $off1);
my ($pid_x, $pid_y) = ($h1->pid, $h1b->pid);
like($log,
	qr/WARNING:  zklock: 2 zklock locks lost with ZooKeeper session \Q$sid\E\n[^\n]*DETAIL:  [^\n]*longer than the session timeout[^\n]*Backends that held them \(PID\): (\Q$pid_x\E, \Q$pid_y\E|\Q$pid_y\E, \Q$pid_x\E)\./,
	'... and warns that 2 locks were lost, why, and the backends\' PIDs');
is(zk_log_count($node1, qr/locks lost with ZooKeeper session/, $off1), 1, '... once');

# requests still fail with 08006 after connect_timeout (5 s on node1)
my $s1 = zk_session($node1, 'during');
$t = time();
$r = $s1->query(q{SELECT zk_lock_try_acquire('ops/z')}, 30);
$took = time() - $t;
is($r->{sqlstate}, '08006', 'during the outage a request on node1 fails with 08006');
cmp_ok($took, '<', 5 + 3, sprintf('... after connect_timeout (%.1f s)', $took));

# an outage line between 10 s and 60 s: exactly one
my $wait_more = 14 - (time() - $t_down);
sleep($wait_more) if $wait_more > 0;
is($since_before, $since_early,
	'disconnected_since does not move when the session is given up (item 7)');
$log = log_from($node1, $off1);
my @outage = $log =~ /LOG:  zklock: not connected to ZooKeeper at "[^"]+" since ([^\n]+)/g;
is(scalar(@outage), 1,
	sprintf('one outage line after %.0f s of the outage (item 8)', time() - $t_down));
like($outage[0] // '', qr/^\Q$since_early\E/,
	'... naming the true start of the outage');
like($log, qr/not connected to ZooKeeper at "[^"]+" since [^\n]+\n[^\n]*DETAIL:  The ZooKeeper client says: /,
	'... with what the client says');

# ZooKeeper back (it restores node1's old session from its disk)
zk_server('restart-one', 1);
my $t_up = time();
ok(zk_wait_connected($node2, 20), 'node2 is connected again');
my $b = zk_session($node2, 'next');
$r = $b->query(q{SELECT zk_lock_acquire('ops/x', timeout => '30 s') > 0}, 40);
my $granted = time() - $t_up;
is($r->{out}, 't', 'node2 gets the lock node1 held');
diag(sprintf('node2 granted ops/x %.2f s after ZooKeeper answered again (session timeout 4 s)',
		$granted));
cmp_ok($granted, '<', 2.5,
	'... well before the restored session would time out: node1 closed it (item 6)');
like(log_from($node1, $off1), qr/LOG:  zklock: previous ZooKeeper session \Q$sid\E closed/,
	'node1\'s log says it closed the old session');

# node1's holders: the transaction cannot commit, the session lock is reported
$r = $h1->query('COMMIT');
is($r->{sqlstate}, '55P03', 'node1\'s transaction under the lost lock cannot commit');
like($r->{err}, qr/zklock lock on resource "ops\/x" was lost/, '... the lock was lost');
$r = $h1b->query(q{SELECT zk_lock_acquire_session('ops/q')});
is($r->{sqlstate}, '55P03', 'node1\'s next zklock call with a lost session lock errors');
like($r->{err}, qr/ops\/y/, '... naming it');
$h1b->query(q{SELECT zk_lock_release_all()});

ok(zk_wait_connected($node1, 20), 'node1 is connected again');
ok(zk_wait_log($node1, qr/LOG:  zklock: connected to ZooKeeper again after an outage of \d+ s/,
		$off1, 10),
	'node1\'s log says the outage ended (item 8)');
is(psql1($node1, 'SELECT last_error FROM zk_lock_status'), '',
	'last_error is empty once connected');
is(psql1($node1, 'SELECT disconnected_since IS NULL FROM zk_lock_status'), 't',
	'and so is disconnected_since');

# --- item 11: a fast shutdown; item 8: a start with ZooKeeper down --------------
$_->quit foreach ($h1, $h1b, $s1, $s2, $s9, $b, $other);
zk_server('kill', 1);
my $off_stop = log_size($node1);
$node1->stop('fast');
unlike(log_from($node1, $off_stop), qr/zklock worker.*exited with exit code/,
	'a fast shutdown: the worker exits with code 0 (item 11)');
$node1->start;
my $t_start = time();
my $why = '';
wait_until(
	sub {
		my ($rc, $out) = $node1->psql('postgres', 'SELECT last_error FROM zk_lock_status');
		$why = $out if $rc == 0;
		return $why ne '';
	},
	timeout => 10, interval => 0.1);
my $why_after = time() - $t_start;
isnt($why, '', "after a start with ZooKeeper down, last_error says why: $why");
cmp_ok($why_after, '<', 3, sprintf('... within a loop or two (%.1f s)', $why_after));
zk_server('restart-one', 1);
ok(zk_wait_connected($node1, 20), 'node1 connects once ZooKeeper is up');
is(psql1($node1, 'SELECT last_error FROM zk_lock_status'), '',
	'last_error is empty once connected');

# --- item 8: last_error and zklock.hosts ----------------------------------------
ok(zk_wait_connected($node2, 20), 'node2 is connected');
$node2->safe_psql('postgres', "ALTER SYSTEM SET zklock.hosts = '127.0.0.1:1'");
$node2->reload;
ok(wait_until(sub { psql1($node2, 'SELECT last_error FROM zk_lock_status') =~ /127\.0\.0\.1:1\D/ },
		timeout => 10),
	'zklock.hosts reloaded to a port nobody listens on: last_error says why');
$node2->safe_psql('postgres', 'ALTER SYSTEM RESET zklock.hosts');
$node2->reload;
ok(zk_wait_connected($node2, 20), 'back to the right servers: connected');
is(psql1($node2, 'SELECT last_error FROM zk_lock_status'), '',
	'last_error is empty, nothing left about the other host');

# --- a copy of the data directory leaves the original's session alone ---------
# The session file names who wrote it (this boot, data directory and
# port): a storage snapshot of node1 started elsewhere, with node1's
# configuration as it is, must not reattach to node1's session and close it
# (review of issue 11).
my $h1 = zk_session($node1, 'orig_holder');
$h1->query_ok(q{SELECT zk_lock_acquire_session('ops/clone')});
$node1->stop('immediate');    # what a snapshot of a running instance holds
$node1->backup_fs_cold('snap');
my $clone = PostgreSQL::Test::Cluster->new('clone');
$clone->init_from_backup($node1, 'snap');
$clone->start;
ok(zk_wait_log($clone, qr/not closing ZooKeeper session 0x[0-9a-f]+ named in "[^"]*": it was written by "boot [^"]*\Q${\ $node1->data_dir}\E, port ${\ $node1->port}", and this is "boot [^"]*\Q${\ $clone->data_dir}\E, port ${\ $clone->port}"/, 0, 30),
	'a copy of node1\'s data directory does not close node1\'s session, and says why');
ok(zk_wait_connected($clone), 'it starts a session of its own');
unlike(slurp_file($clone->logfile), qr/previous ZooKeeper session 0x[0-9a-f]+ closed/,
	'no session was closed by the copy');
$clone->stop;
my $off1 = -s $node1->logfile;
$node1->start;
ok(zk_wait_log($node1, qr/previous ZooKeeper session 0x[0-9a-f]+ (closed|had already expired)/, $off1, 30),
	'node1 itself still closes (or finds expired) its own earlier session');
ok(zk_wait_connected($node1), 'node1 is connected again');

zk_done_check();
done_testing();
