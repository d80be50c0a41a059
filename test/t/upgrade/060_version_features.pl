
# What each PostgreSQL major gives zklock's users (doc/operations.md):
#  - from 17, pg_stat_activity.wait_event names what a zklock wait is for:
#    ZklockAcquire (a lock another holder has), ZklockWorker (the worker's
#    answer), ZklockLease (the commit fence, for ZooKeeper's proof of the
#    lease); pg_wait_events lists every zklock event; on 15 and 16 each is the plain "Extension";
#  - from 18, pg_get_loaded_modules() shows zklock's name and version (the
#    extension's default version).
# Runs on every major the suite runs on; each check is the one for this
# major.  Needs the test build (failpoints).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;

zk_start();
my $node = zk_node('node1', session_timeout => '12s', lease_margin => '4s');
my $major = psql1($node, q{SELECT current_setting('server_version_num')::int / 10000});
my $named = $major >= 17;
diag("PostgreSQL $major: " . ($named ? 'named wait events' : 'plain Extension wait events'));

my $event_of = sub {
	my ($pid) = @_;
	return psql1($node,
		"SELECT coalesce(wait_event_type, '') || '/' || coalesce(wait_event, '') FROM pg_stat_activity WHERE pid = $pid");
};
my $seen = '';
my $expect = sub { 'Extension/' . ($named ? $_[0] : 'Extension') };

# --- a backend waiting for a lock another holder has ---------------------------
my $h = zk_session($node, 'holder');
$h->query_ok(q{SELECT zk_lock_acquire_session('we/a')});
my $w = zk_session($node, 'waiter');
$w->send(q{SELECT zk_lock_acquire_session('we/a', timeout => '30 s') > 0});
ok(wait_until(sub { ($seen = $event_of->($w->pid)) eq $expect->('ZklockAcquire') },
		timeout => 10, interval => 0.05),
	"a waiter for a lock waits as " . $expect->('ZklockAcquire') . " (last seen: $seen)");
$h->query_ok(q{SELECT zk_lock_release_all()});
my $r = $w->wait(30);
ok($r && $r->{out} eq 't', 'and is granted when the holder releases');
$w->query_ok(q{SELECT zk_lock_release_all()});

# --- a backend waiting for the worker's answer (the worker paused) ------------
my $worker = psql1($node, 'SELECT worker_pid FROM zk_lock_status');
$h->query_ok(q{SELECT zk_lock_acquire_session('we/b')});
ok(zk_set_failpoints($node, 'before-delete=pause'), 'the worker will pause before a delete');
$h->send(q{SELECT zk_lock_release('we/b')});
ok(zk_wait_log($node, qr/failpoint "before-delete" reached \(pause\)/), 'the worker pauses');
my $l = zk_session($node, 'lister');
$l->send(q{SELECT count(*) >= 0 FROM zk_locks});
ok(wait_until(sub { ($seen = $event_of->($l->pid)) eq $expect->('ZklockWorker') },
		timeout => 10, interval => 0.05),
	"a backend waiting for the worker's answer waits as " . $expect->('ZklockWorker') . " (last seen: $seen)");
ok(zk_set_failpoints($node, ''), 'the failpoint is cleared');
$r = $l->wait(30);
ok($r && $r->{out} eq 't', 'and the listing answers');
$r = $h->wait(30);
ok($r && $r->{out} eq 't', 'and the release too');

# --- the commit fence waiting for ZooKeeper to prove the lease ------------------
# (the worker stopped: no answer renews the lease; the fence waits once less
# than zklock.lease_margin is left, long before ZooKeeper would end the
# session, and passes once the worker runs again)
$node->safe_psql('postgres', 'CREATE TABLE guarded(v int)');
$h->query_ok(q{BEGIN});
$h->query_ok(q{SELECT zk_lock_acquire('we/c')});
$h->query_ok(q{INSERT INTO guarded VALUES (1)});
kill 'STOP', $worker;
ok( wait_until(
		sub {
			psql1($node, 'SELECT coalesce(lease_remaining, 0) < lease_margin FROM zk_lock_status') eq 't';
		},
		timeout => 15, interval => 0.05),
	'with the worker stopped, less than the margin is left of the lease');
$h->send(q{COMMIT});
my $fenced = wait_until(sub { ($seen = $event_of->($h->pid)) eq $expect->('ZklockLease') },
	timeout => 20, interval => 0.05);
kill 'CONT', $worker;
ok($fenced, "a commit whose lease is not proven waits as " . $expect->('ZklockLease') . " (last seen: $seen)");
$r = $h->wait(30);
ok($r && $r->{sqlstate} eq '00000', 'and commits once the worker answers again');
is(psql1($node, 'SELECT count(*) FROM guarded'), '1', '... its write is visible');

# --- the catalog of wait events (17 and later) ----------------------------------
if ($named)
{
	is(psql1($node, q{SELECT string_agg(name, ',' ORDER BY name) FROM pg_wait_events
	                  WHERE type = 'Extension' AND name LIKE 'Zklock%'}),
		'ZklockAcquire,ZklockLease,ZklockWorker',
		'pg_wait_events lists every zklock wait event');
}
else
{
	is(psql1($node, q{SELECT count(*) FROM pg_proc WHERE proname = 'pg_get_wait_events'}), '0',
		"PostgreSQL $major has no catalog of wait events (named ones come with 17)");
}

# --- the module's name and version (18 and later) -------------------------------
my $default = psql1($node, q{SELECT default_version FROM pg_available_extensions WHERE name = 'zklock'});
if ($major >= 18)
{
	is(psql1($node, q{SELECT module_name || ' ' || version FROM pg_get_loaded_modules()
	                  WHERE file_name = 'zklock.so'}),
		"zklock $default", "pg_get_loaded_modules() shows zklock $default");
}
else
{
	is(psql1($node, q{SELECT count(*) FROM pg_proc WHERE proname = 'pg_get_loaded_modules'}), '0',
		"PostgreSQL $major has no pg_get_loaded_modules() (it comes with 18)");
}

$_->quit for ($h, $w, $l);
$node->stop;
zk_done_check();
done_testing();
