
# A client lost while its backend waits for a zklock lock: the backend ends
# (FATAL "connection to client lost", as core's client_connection_check_interval
# would have it) and its waiting node is removed within seconds, whatever
# client_connection_check_interval says -- not only when the holder
# releases.  doc/sql.md, Semantics, "Backend exit": a lost client
# releases everything the backend held or waited for.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my $node = zk_node('node1');

# How long the lost waiter's node may stay (the wait checks its client
# about once a second).
my $PROMPT = 5;

is(psql1($node, 'SHOW client_connection_check_interval'), '0',
	'client_connection_check_interval is off (the default)');

my $holder = zk_session($node, 'holder');

my @cases = (
	{ name => 'transaction-level waiter', res => 'lost/xact', set => undef,
	  sql => q{SELECT zk_lock_acquire('lost/xact')} },
	{ name => 'session-level waiter, client_connection_check_interval = 1h',
	  res => 'lost/session', set => q{SET client_connection_check_interval = '1h'},
	  sql => q{SELECT zk_lock_acquire_session('lost/session')} },
	{ name => 'explicit-lock waiter', res => 'lost/explicit', set => undef,
	  sql => q{SELECT zk_lock_acquire_explicit('lost/explicit', ttl => '1 hour')} },
	{ name => 'waiter on a lock set', res => 'lost/set/b', set => undef,
	  sql => q{SELECT zk_lock_acquire_all(ARRAY['lost/set/a', 'lost/set/b'])} },
);

foreach my $case (@cases)
{
	my $what = $case->{name};
	my $path = zk_path($case->{res});
	my $offset = -s $node->logfile;

	$holder->query_ok(qq{SELECT zk_lock_acquire_session('$case->{res}')});
	ok(zk_wait_count($path, 1, 10), "$what: the holder's node");

	my $w = zk_session($node, 'waiter');
	$w->query_ok($case->{set}) if defined $case->{set};
	$w->query_ok('BEGIN');
	$w->send($case->{sql});
	ok(wait_for_waiting($node, $w->pid, 10), "$what: the waiter waits");
	ok(zk_wait_count($path, 2, 10), "$what: the waiter's node is queued");

	my $t0 = time();
	$w->kill_client('KILL');
	my $gone = wait_until(sub { zk_count_locks($path) == 1 },
		timeout => 15, interval => 0.05);
	my $elapsed = time() - $t0;
	ok($gone && $elapsed < $PROMPT,
		sprintf("$what: the waiter's node is gone %.2f s after its client was killed (< $PROMPT s)",
			$elapsed));
	diag(sprintf("$what: waiter's node gone %.2f s after the client's SIGKILL", $elapsed));

	ok( wait_until(
			sub {
				psql1($node,
					'SELECT count(*) FROM pg_stat_activity WHERE pid = ' . $w->pid) eq '0';
			},
			timeout => 10),
		"$what: the waiting backend has ended");
	ok(slurp_file($node->logfile, $offset) =~ /FATAL:  connection to client lost/,
		"$what: the log says the connection to the client was lost");

	# the holder was not disturbed, and nothing was granted to the dead
	is(zk_count_locks($path), 1, "$what: only the holder's node is left");
	is( psql1($node,
			"SELECT state FROM zk_lock_local WHERE resource = '$case->{res}'"),
		'granted', "$what: the holder still holds");
	$holder->query_ok(qq{SELECT zk_lock_release('$case->{res}')});
	ok(zk_wait_no_locks($path, 10), "$what: released");
}

zk_done_check();
done_testing();
