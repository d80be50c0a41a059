
# zk_locks listings at once from sessions of different roles (issue 9,
# finding 2): any role may list, so no number of concurrent listings may
# crash the worker (it used to die with SIGABRT when one listing freed the
# memory of the others, and PostgreSQL restarted the whole instance).
#  - 50 session locks held, others taken and released all along;
#  - five listers (a plain role, a pg_monitor member, a superuser, the
#    whole tree and a subtree) list a few hundred times at once, and a sixth
#    session's listings are cancelled by a tiny statement_timeout, so that
#    backends withdraw listings the worker is still walking;
#  - every listing that was not cancelled counts exactly the 50 held locks;
#  - afterwards the worker is the same process, the server log shows no
#    crash, and the held locks are still there.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use List::Util;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $ROUNDS = $ENV{ZKLOCK_STRESS_ROUNDS} || 250;
my $HELD = 50;

zk_start();
my $node = zk_node('node1', extra_conf => "zklock.max_locks_per_backend = 64\nrestart_after_crash = on");

$node->safe_psql('postgres', q{
	CREATE ROLE lister_plain LOGIN;
	CREATE ROLE lister_mon LOGIN IN ROLE pg_monitor;
	-- the number of listings whose count of the held locks was wrong
	CREATE FUNCTION bad_counts(rounds int, subtree text, expected int)
	RETURNS int LANGUAGE plpgsql AS $$
	DECLARE
		bad int := 0;
		n int;
	BEGIN
		FOR i IN 1..rounds LOOP
			IF subtree IS NULL THEN
				SELECT count(*) INTO n FROM zk_locks WHERE resource LIKE 'ls/held/%';
			ELSE
				SELECT count(*) INTO n FROM zk_locks(subtree);
			END IF;
			IF n <> expected THEN
				bad := bad + 1;
				RAISE NOTICE 'listing % counted % locks', i, n;
			END IF;
		END LOOP;
		RETURN bad;
	END $$;
	GRANT EXECUTE ON FUNCTION bad_counts(int, text, int) TO PUBLIC;
});

my $worker_pid = psql1($node, 'SELECT worker_pid FROM zk_lock_status');
like($worker_pid, qr/^\d+$/, 'the worker runs');
my $log_start = -s $node->logfile;

my $holder = zk_session($node, 'holder');
$holder->query_ok(qq{SELECT count(zk_lock_acquire_session('ls/held/' || i, parents => false)) FROM generate_series(1, $HELD) i});
is(zk_count_locks(zk_path('ls/held')), $HELD, "$HELD session locks held");

# locks that come and go while the listers list
my $churn = zk_session($node, 'churn');
$churn->send(q{DO $$
	BEGIN
		FOR i IN 1..3000 LOOP
			PERFORM zk_lock_acquire_session('ls/churn/' || (i % 20));
			IF i % 3 = 0 THEN
				PERFORM zk_lock_release_all();
			END IF;
		END LOOP;
		PERFORM zk_lock_release_all();
	END $$});

my @listers = (
	[ 'plain',     'lister_plain', 'NULL' ],
	[ 'monitor',   'lister_mon',   'NULL' ],
	[ 'superuser', undef,          'NULL' ],
	[ 'subtree',   'lister_plain', q{'ls/held'} ],
	[ 'plain2',    'lister_plain', 'NULL' ],
);
# every session connects before any listing starts
my @sessions;
foreach my $l (@listers)
{
	my ($name, $role, $subtree) = @$l;
	my $s = zk_session($node, "lister_$name");
	$s->query_ok("SET SESSION AUTHORIZATION $role") if defined $role;
	push @sessions, [ $name, $s, "SELECT bad_counts($ROUNDS, $subtree, $HELD)" ];
}
# withdrawn listings: a statement timeout that often fires mid-walk
my $canceller = zk_session($node, 'canceller');
$canceller->query_ok('SET SESSION AUTHORIZATION lister_plain');

$_->[1]->send($_->[2]) foreach @sessions;
my ($cancelled, $completed, $wrong, $other) = (0, 0, 0, '');
my $start = time();
for my $i (1 .. $ROUNDS)
{
	my $ms = 1 + ($i * 13) % 150;
	my $r = $canceller->query(
		"SET statement_timeout = '${ms}ms'; SELECT count(*) FROM zk_locks WHERE resource LIKE 'ls/held/%'; RESET statement_timeout",
		60);
	if ($r->{exited})
	{
		$other = "psql exited: $r->{err}";
		last;
	}
	if ($r->{err} =~ /canceling statement due to statement timeout/)
	{
		$cancelled++;
	}
	elsif ($r->{err} =~ /ERROR|FATAL/)
	{
		$other = $r->{err};
		last;
	}
	else
	{
		$completed++;
		$wrong++ if $r->{out} ne "$HELD";
	}
}
note sprintf('canceller: %d cancelled, %d completed in %.1f s',
	$cancelled, $completed, time() - $start);
is($other, '', 'the cancelled listings raise nothing but the timeout');
is($wrong, 0, 'every listing the timeout did not cancel counts the held locks');

# all listers share one deadline: with the fix they take about 20 s
my $deadline = time() + 240;
foreach my $p (@sessions)
{
	my ($name, $s) = @$p;
	my $r = $s->wait(List::Util::max(1, $deadline - time()));
	ok(defined $r, "lister $name finished");
	next unless defined $r;
	is($r->{sqlstate}, '00000', "lister $name: every listing succeeded")
	  or diag($r->{err});
	is($r->{out}, '0', "lister $name: every listing counted $HELD held locks");
}
note sprintf('listers done after %.1f s', time() - $start);
my $r = $churn->wait(List::Util::max(1, $deadline - time()));
ok(defined $r && $r->{sqlstate} eq '00000', 'the churn of locks went on without error')
  or diag($r ? $r->{err} : 'timed out');

is(psql1($node, 'SELECT worker_pid FROM zk_lock_status'), $worker_pid,
	'the worker is the same process');
my $log = slurp_file($node->logfile, $log_start);
unlike($log, qr/terminated by signal|server process .* was terminated|terminating any other active server processes/,
	'nothing crashed');
unlike($log, qr/zklock worker.* exited with exit code/, 'the worker did not exit');
ok($holder->alive, 'the holder\'s connection survived');
is($holder->query_ok(q{SELECT count(*) FROM zk_lock_local WHERE pid = pg_backend_pid() AND resource LIKE 'ls/held/%' AND state = 'granted'}),
	"$HELD", 'its locks are still granted');
is(zk_count_locks(zk_path('ls/held')), $HELD, 'and their nodes are there');

$holder->query_ok('SELECT zk_lock_release_all()');
zk_done_check();
done_testing();
