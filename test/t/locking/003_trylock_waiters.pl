
# Requests that do not end in a grant leave nothing behind in ZooKeeper:
#  - a try-lock on a held resource returns NULL and removes its node
#  - a waiter ended by the timeout argument (55P03), pg_cancel_backend
#    (57014), lock_timeout (55P03), statement_timeout (57014) or
#    pg_terminate_backend has its node removed; the holder's release then
#    leaves zero nodes
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my $node1 = zk_node('node1');
my $node2 = zk_node('node2');

# ---------------------------------------------------------------------------
# try-lock
{
	my $res  = 'try/r';
	my $path = zk_path($res);
	my $h    = zk_session($node1, 'try_holder');
	$h->query_ok('BEGIN');
	my $t = $h->query_ok(qq{SELECT zk_lock_acquire('$res')});
	like($t, qr/^\d+$/, 'holder has the exclusive lock');
	my @held = zk_lock_nodes($path);
	is(scalar(@held), 1, 'one lock node');

	my @tries = (
		[ $node2, qq{SELECT zk_lock_try_acquire('$res') IS NULL}, 'exclusive, other instance' ],
		[ $node2, qq{SELECT zk_lock_try_acquire('$res', 'shared') IS NULL}, 'shared, other instance' ],
		[ $node1, qq{SELECT zk_lock_try_acquire('$res') IS NULL}, 'exclusive, same instance' ],
		[ $node2, qq{SELECT zk_lock_try_acquire_session('$res') IS NULL}, 'session scope, other instance' ],
		[ $node1, qq{SELECT zk_lock_try_acquire_session('$res', 'shared') IS NULL}, 'session scope shared, same instance' ],
	);
	foreach my $try (@tries)
	{
		my ($node, $sql, $what) = @$try;
		is(psql1($node, $sql), 't', "try-lock on a held resource returns NULL ($what)");
		ok(zk_wait_count($path, 1, 10), "only the holder's node is left ($what)");
		is_deeply([ zk_lock_nodes($path) ], \@held, "and it is the holder's ($what)");
	}

	# The same in a transaction that goes on: no node is left either.
	my $w = zk_session($node2, 'try_in_xact');
	$w->query_ok('BEGIN');
	is($w->query_ok(qq{SELECT zk_lock_try_acquire('$res') IS NULL}), 't',
		'try-lock inside an open transaction returns NULL');
	ok(zk_wait_count($path, 1, 10), 'no node left while that transaction is open');
	$w->query_ok('COMMIT');

	$h->query_ok('COMMIT');
	ok(zk_wait_no_locks($path, 10), 'holder released: no lock node left');

	# Now free: the try-lock succeeds (and commits away).
	like(psql1($node2, qq{SELECT zk_lock_try_acquire('$res')}), qr/^\d+$/,
		'try-lock on a free resource returns a token');
	ok(zk_wait_no_locks($path, 10), 'and its node is gone after commit');

	# Shared held: shared try succeeds, exclusive try fails, no stray node.
	$h->query_ok('BEGIN');
	$h->query_ok(qq{SELECT zk_lock_acquire('$res', 'shared')});
	is($w->query_ok(qq{SELECT zk_lock_try_acquire('$res', 'shared') IS NOT NULL}), 't',
		'shared try-lock succeeds while a shared lock is held');
	is($w->query_ok(qq{SELECT zk_lock_try_acquire('$res', 'exclusive') IS NULL}), 't',
		'exclusive try-lock fails while a shared lock is held');
	ok(zk_wait_count($path, 1, 10), 'only the holder\'s shared node is left');
	$h->query_ok('COMMIT');
	ok(zk_wait_no_locks($path, 10), 'no lock node left');
	$h->quit;
	$w->quit;
}

# ---------------------------------------------------------------------------
# Waiter removal.
#
# Each case: a holder on node1 holds the resource; the waiter (on the other
# instance, or the same one) asks for it and waits; the wait is ended one
# way or another; its node must go, the holder's stay; the holder's release
# then leaves nothing.
my @cases = (
	{
		name => 'timeout argument',
		sql => q{SELECT zk_lock_acquire('%s', 'exclusive', interval '3 s')},
		expect => '55P03',
		min_elapsed => 2.5,
	},
	{
		name => 'pg_cancel_backend',
		sql => q{SELECT zk_lock_acquire('%s')},
		action => 'cancel',
		expect => '57014',
	},
	{
		name => 'lock_timeout',
		setup => q{SET lock_timeout = '3s'},
		sql => q{SELECT zk_lock_acquire('%s')},
		expect => '55P03',
		min_elapsed => 2.5,
	},
	{
		name => 'statement_timeout',
		setup => q{SET statement_timeout = '3s'},
		sql => q{SELECT zk_lock_acquire('%s')},
		expect => '57014',
		min_elapsed => 2.5,
	},
	{
		name => 'pg_terminate_backend',
		sql => q{SELECT zk_lock_acquire('%s')},
		action => 'terminate',
		expect => 'exit',
	},
	{
		name => 'shared waiter, pg_cancel_backend',
		sql => q{SELECT zk_lock_acquire('%s', 'shared')},
		action => 'cancel',
		expect => '57014',
	},
);

my $caseno = 0;
foreach my $waiter_node ($node2, $node1)
{
	foreach my $case (@cases)
	{
		# same-instance: only the cancel and terminate cases
		next if $waiter_node == $node1 && !$case->{action};

		$caseno++;
		my $where = $waiter_node == $node2 ? 'other instance' : 'same instance';
		my $what = "$case->{name}, $where";
		my $res = "wait/case$caseno";
		my $path = zk_path($res);

		my $h = zk_session($node1, "holder$caseno");
		$h->query_ok('BEGIN');
		$h->query_ok(qq{SELECT zk_lock_acquire('$res')});
		my @held = zk_lock_nodes($path);
		is(scalar(@held), 1, "$what: holder's node");

		my $w = zk_session($waiter_node, "waiter$caseno");
		$w->query_ok($case->{setup}) if $case->{setup};
		$w->query_ok('BEGIN');
		$w->send(sprintf($case->{sql}, $res));
		ok(wait_for_waiting($waiter_node, $w->pid, 2), "$what: waiter waits");
		ok(zk_wait_count($path, 2, 2), "$what: waiter's node is there");

		if (($case->{action} // '') eq 'cancel')
		{
			sleep(0.2);
			is(psql1($waiter_node, 'SELECT pg_cancel_backend(' . $w->pid . ')'),
				't', "$what: cancel sent");
		}
		elsif (($case->{action} // '') eq 'terminate')
		{
			sleep(0.2);
			is(psql1($waiter_node, 'SELECT pg_terminate_backend(' . $w->pid . ')'),
				't', "$what: terminate sent");
		}

		my $r = $w->wait(20);
		ok(defined $r, "$what: the wait ended") or next;
		if ($case->{expect} eq 'exit')
		{
			ok($r->{exited}, "$what: the waiter's session is gone")
			  or diag(explain($r));
		}
		else
		{
			is($r->{sqlstate}, $case->{expect}, "$what: SQLSTATE $case->{expect}")
			  or diag(explain($r));
		}
		if ($case->{min_elapsed})
		{
			ok($r->{elapsed} >= $case->{min_elapsed} && $r->{elapsed} < 15,
				sprintf("$what: waited the timeout (%.2f s)", $r->{elapsed}));
		}

		ok(zk_wait_count($path, 1, 10), "$what: waiter's node removed");
		is_deeply([ zk_lock_nodes($path) ], \@held, "$what: holder's node remains");

		if (!$r->{exited})
		{
			$w->query_ok('ROLLBACK');
			$w->query_ok('RESET ALL');
			is( $w->query_ok(
					q{SELECT count(*) FROM zk_locks
					   WHERE pid = pg_backend_pid() AND instance = '}
					  . $waiter_node->name . q{'}),
				'0',
				"$what: zk_locks lists nothing for the waiter");
		}

		$h->query_ok('COMMIT');
		ok(zk_wait_no_locks($path, 10), "$what: holder's release leaves zero nodes");

		if (!$r->{exited})
		{
			# The waiter's backend can take the lock now: no stale state.
			like($w->query_ok(qq{SELECT zk_lock_try_acquire('$res')}),
				qr/^\d+$/, "$what: waiter can take the free lock afterwards");
			ok(zk_wait_no_locks($path, 10), "$what: and it is released");
		}
		$h->quit;
		$w->quit;
	}
}

zk_done_check();
done_testing();
