
# Issue 28, finding 6: the worker's cancel of the commits it waited a
# session timeout for signals only a backend still in its commit window.
# A commit held after its fence (a synchronous standby that does not
# exist) keeps the session through a reload of zklock.hosts; the worker
# decides to cancel it and is paused there (failpoint before-commit-cancel);
# meanwhile the commit ends (the standby is no longer required) and the
# same backend runs another statement: that statement is not cancelled.
# Then the race itself: the worker, under the lock, has seen the window
# open and sleeps before its signal (failpoint commit-cancel-locked); the
# commit ends meanwhile, and the backend's next statement is not cancelled
# (the end of its window waits for the worker's locked section).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $hosts = zk_start();
my $node1 = zk_node('node1',
	extra_conf => "synchronous_standby_names = 'zklock_no_such_standby'\n"
	  . "synchronous_commit = local\nwal_level = replica\nmax_wal_senders = 2");
$node1->safe_psql('postgres', 'CREATE TABLE runs(v int)');
ok(zk_set_failpoints($node1, 'before-commit-cancel=pause'), 'failpoint set');

my $s = zk_session($node1, 'held');
$s->query_ok('SET synchronous_commit = on');
$s->query_ok('BEGIN');
$s->query_ok(q{SELECT zk_lock_acquire('race/r') > 0});
$s->query_ok('INSERT INTO runs VALUES (1)');
$s->send('COMMIT');
ok( wait_until(
		sub { psql1($node1, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $s->pid) eq 'SyncRep' },
		timeout => 20),
	'the COMMIT passed the fence and waits for the standby');

my $log_at = -s $node1->logfile;
(my $other_spelling = $hosts) =~ s/127\.0\.0\.1/localhost/g;
$node1->safe_psql('postgres',
	"ALTER SYSTEM SET zklock.hosts = '$other_spelling'; SELECT pg_reload_conf()");
ok(zk_wait_log($node1, qr/failpoint "before-commit-cancel" reached/, $log_at, 30),
	'after a session timeout the worker is about to cancel the commit');

$node1->safe_psql('postgres',
	"ALTER SYSTEM SET synchronous_standby_names = ''; SELECT pg_reload_conf()");
my $r = $s->wait(30);
ok($r && $r->{sqlstate} eq '00000', 'the commit ends (the standby is no longer required)');
$s->send('SELECT pg_sleep(4)');
sleep(0.5);
ok(zk_set_failpoints($node1, ''), 'the worker goes on');
$r = $s->wait(30);
is($r ? $r->{sqlstate} : 'none', '00000',
	'the next statement of that backend is not cancelled')
  or diag($r ? $r->{err} : 'no result');
ok(zk_wait_connected($node1, 30), 'the worker connects again');

# The race itself: the worker has seen the window open and is about to
# signal (failpoint commit-cancel-locked, a sleep under the lock).  The
# commit's end must wait for it: were the look and the signal not in one
# locked section with the backend's end of its window, the commit would
# return, the next statement start, and the late signal cancel it.
$node1->safe_psql('postgres',
	"ALTER SYSTEM SET synchronous_standby_names = 'zklock_no_such_standby'; SELECT pg_reload_conf()");
ok(zk_set_failpoints($node1, 'commit-cancel-locked=sleep:4000'), 'failpoint set (2)');
$s->query_ok('BEGIN');
$s->query_ok(q{SELECT zk_lock_acquire('race/r2') > 0});
$s->query_ok('INSERT INTO runs VALUES (2)');
$s->send('COMMIT');
ok( wait_until(
		sub { psql1($node1, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $s->pid) eq 'SyncRep' },
		timeout => 20),
	'(2) the COMMIT passed the fence and waits for the standby');
$log_at = -s $node1->logfile;
$node1->safe_psql('postgres',
	"ALTER SYSTEM SET zklock.hosts = '$hosts'; SELECT pg_reload_conf()");
ok(zk_wait_log($node1, qr/failpoint "commit-cancel-locked" reached/, $log_at, 30),
	'(2) after a session timeout the worker is about to signal the commit');
# the standby is no longer required, told to the checkpointer alone (it
# releases the waiters): a SIGHUP would end the worker's sleep early
$node1->safe_psql('postgres', "ALTER SYSTEM SET synchronous_standby_names = ''");
my $t0 = time();
kill 'HUP', psql1($node1, q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'});
$r = $s->wait(30);
my $took = time() - $t0;
ok($r, '(2) the commit ends');
note(sprintf('(2) COMMIT: %s %s, %.2f s after the standby was no longer required',
	$r ? ($r->{sqlstate}, $r->{err}) : ('none', ''), $took));
cmp_ok($took, '>', 2, '(2) ... once the worker has signalled (its end of the window waits for it)');
$s->send('SELECT pg_sleep(6)');
$r = $s->wait(30);
is($r ? $r->{sqlstate} : 'none', '00000',
	'(2) the next statement of that backend is not cancelled')
  or diag($r ? $r->{err} : 'no result');
is(psql1($node1, 'SELECT count(*) FROM runs WHERE v = 2'), '1', '(2) the commit landed');
ok(zk_set_failpoints($node1, ''), 'failpoint cleared');
ok(zk_wait_connected($node1, 30), 'the worker connects again (2)');
$s->quit;
zk_done_check();
done_testing();
