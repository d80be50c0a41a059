
# Concurrency stress (issue 9, "Tests that find the next bug"): every SQL
# function and view of zklock called at once from many sessions of three
# roles (a superuser, a plain role, a pg_monitor member) on two instances,
# for a bounded time:
#  - lockers: transaction and session acquires, try-locks, lock sets (all
#    four), explicit locks and UNLOCK, releases, savepoints and ROLLBACK TO,
#    PL/pgSQL exception blocks, zk_lock_fence, zk_lock_outer_role;
#  - listers: zk_locks (view and function), zk_lock_nodes, zk_lock_local,
#    zk_lock_status, hundreds of times, while holders keep 50 session locks
#    each (the load under which finding 2 crashed the worker);
#  - an admin per instance: zk_lock_force_release (all, or one node),
#    zk_lock_revoke (cancel and terminate), pg_cancel_backend and
#    pg_terminate_backend of random sessions.
# Afterwards: no crash in either server log ("terminated by signal",
# abnormal "server process" exits, PANIC, TRAP), the zklock worker's pid
# unchanged, no lock node left, and every error any session got has an
# expected SQLSTATE (the list is %EXPECTED below; any other fails).
#
# Default run: ZKLOCK_STRESS_SECONDS=20 (about 40 s in all).  Long runs:
#   ZKLOCK_STRESS_SECONDS=600             ten minutes of load
#   ZKLOCK_STRESS_SEED=N                  replay the random choices of a run
#                                         (timing still differs)
#   ZKLOCK_STRESS_ONLY=holder,lister      only these kinds of sessions (to
#                                         narrow down what a failure needs)
#   ZKLOCK_STRESS_VALGRIND=1              instance node1 (its zklock worker
#                                         among every process) runs under
#                                         valgrind's memcheck; the test fails
#                                         on any memcheck error whose stack
#                                         passes through zklock.so.  Slow:
#                                         not in the default run.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $SECS     = $ENV{ZKLOCK_STRESS_SECONDS} // 20;
my $VALGRIND = $ENV{ZKLOCK_STRESS_VALGRIND} // 0;
my $SEED     = $ENV{ZKLOCK_STRESS_SEED} // (time() ^ $$) % 1000000;
srand($SEED);
diag("040_stress: seed $SEED (ZKLOCK_STRESS_SEED), ${SECS} s"
	  . ($VALGRIND ? ', node1 under valgrind' : ''));

# Errors a session may get under this load, with why.
my %EXPECTED = (
	'55P03' => 'lock not available: timeouts, try-lock in another mode, a lock lost to force release at COMMIT',
	'57014' => 'query canceled: pg_cancel_backend, zk_lock_revoke(cancel), statement_timeout',
	'57P01' => 'terminating connection: pg_terminate_backend, zk_lock_revoke(terminate)',
	'25P02' => 'in failed transaction: the statements after an error in BEGIN ... COMMIT',
	'42501' => 'permission denied: the plain and pg_monitor roles calling admin functions',
	'53400' => 'a backend\'s own share of lock entries (zklock.max_locks_per_backend) is used up',
);
# What each finding of issue 9 looks like to this test.
my %FINDING = (
	'XX000' => 'finding 2 or an unknown bug (internal error)',
	'57P02' => 'finding 2: the instance restarted after a crash (worker SIGABRT)',
	'55000' => 'finding 2: the zklock worker was not running or not responding (it crashed, or hung under the listings)',
	'lost connection' => 'finding 2: the instance restarted after a crash and dropped every connection',
	'08006' => 'finding 2: "the zklock worker stopped" (it crashed under the listings)',
	'53200' => 'finding 9: the shared entry table filled up',
);

zk_start();
my $conf = <<'EOC';
zklock.sweep_interval = '500ms'
zklock.max_locks_per_backend = 128
max_connections = 60
restart_after_crash = on
EOC
my $node1 = zk_node('node1', extra_conf => $conf);
my $node2 = zk_node('node2', extra_conf => $conf);
my @nodes = ($node1, $node2);

foreach my $n (@nodes)
{
	$n->safe_psql('postgres', q{
		CREATE ROLE zk_plain LOGIN;
		CREATE ROLE zk_mon LOGIN IN ROLE pg_monitor;
	});
}

# ---------------------------------------------------------------------------
# valgrind variant: restart node1's postmaster under memcheck
my $vgdir;
if ($VALGRIND)
{
	$vgdir = PostgreSQL::Test::Utils::tempdir('vg');
	$node1->stop('fast');
	my $pg = $node1->installed_command('postgres');
	my $vg = IPC::Run::start(
		[
			'valgrind', '--quiet', '--trace-children=yes', '--error-limit=no',
			'--num-callers=30', "--log-file=$vgdir/vg.%p.log",
			$pg, '-D', $node1->data_dir
		],
		'<', \undef, '>>', $node1->logfile, '2>>', $node1->logfile);
	ok( wait_until(
			sub {
				my ($rc) = $node1->psql('postgres', 'SELECT 1', timeout => 30);
				return $rc == 0;
			},
			timeout => 300, interval => 1),
		'node1 is up under valgrind');
	$node1->_update_pid(1);
	ok(zk_wait_connected($node1, 300), 'node1 worker connected under valgrind');
}

my %worker_pid;
foreach my $n (@nodes)
{
	$worker_pid{ $n->name } = psql1($n, 'SELECT worker_pid FROM zk_lock_status');
}
my %log_offset = map { $_->name => 0 } @nodes;

# ---------------------------------------------------------------------------
# the sessions

my @RES = qw(st/a st/a/x st/a/y st/b st/b/z st/c st/c/q/r);
my @ROLES = ('postgres', 'zk_plain', 'zk_mon');
my $slow = $VALGRIND ? 10 : 1;

sub rname  { return $RES[ int(rand(@RES)) ]; }
sub rmode  { return rand() < 0.5 ? 'shared' : 'exclusive'; }
sub rtmo   { return ('0', '20 ms', '100 ms', '300 ms', '1 s')[ int(rand(5)) ]; }
sub rarr
{
	my $n = 1 + int(rand(3));
	my %seen;
	my @r = grep { !$seen{$_}++ } map { rname() } 1 .. $n;
	my @m = map { rmode() } @r;
	return ("ARRAY['" . join("','", @r) . "']", "ARRAY['" . join("','", @m) . "']");
}

my @locker_ops = (
	sub {
		my ($r, $m) = (rname(), rmode());
		return "BEGIN; SELECT zk_lock_acquire('$r', '$m', '" . rtmo() . "'); SELECT pg_sleep(0.01); COMMIT";
	},
	sub {
		my ($r, $m) = (rname(), rmode());
		return "SELECT zk_lock_try_acquire('$r', '$m')";
	},
	sub {
		my ($r, $m) = (rname(), rmode());
		return "BEGIN; SELECT zk_lock_try_acquire('$r', '$m', false); SELECT zk_lock_acquire('" . rname() . "', '$m', '" . rtmo() . "'); ROLLBACK";
	},
	sub {
		my ($r, $m) = (rname(), rmode());
		return "SELECT zk_lock_acquire_session('$r', '$m', '" . rtmo() . "'); SELECT zk_lock_release('$r', '$m')";
	},
	sub {
		my ($r, $m) = (rname(), rmode());
		return "SELECT zk_lock_try_acquire_session('$r', '$m'); SELECT zk_lock_acquire_session('$r', '$m', '" . rtmo() . "'); SELECT zk_lock_release_all()";
	},
	sub {
		my ($a, $m) = rarr();
		return "BEGIN; SELECT zk_lock_acquire_all($a, $m, '" . rtmo() . "'); SELECT pg_sleep(0.01); COMMIT";
	},
	sub {
		my ($a, $m) = rarr();
		return "SELECT zk_lock_try_acquire_all($a, $m)";
	},
	sub {
		my ($a, $m) = rarr();
		return "SELECT zk_lock_acquire_all_session($a, NULL, '" . rtmo() . "'); SELECT zk_lock_release_all()";
	},
	sub {
		my ($a, $m) = rarr();
		return "SELECT zk_lock_try_acquire_all_session($a, $m); SELECT zk_lock_release_all()";
	},
	sub {
		my ($r, $m) = (rname(), rmode());
		my $sql = "SELECT zk_lock_acquire_explicit('$r', '$m', ttl => '2 s', timeout => '" . rtmo() . "')";
		# sometimes left to expire (the sweep runs every 500 ms)
		$sql .= "; SELECT zk_lock_release_explicit('$r', '$m')" if rand() < 0.7;
		return $sql;
	},
	sub {
		# the savepoint comes first, so that it exists whatever fails after it
		return "BEGIN; SAVEPOINT s1; SELECT zk_lock_acquire('" . rname() . "', 'shared', '" . rtmo() . "'); "
		  . "SELECT zk_lock_acquire('" . rname() . "', 'shared', '" . rtmo() . "'); ROLLBACK TO SAVEPOINT s1; "
		  . "SELECT zk_lock_try_acquire('" . rname() . "', '" . rmode() . "'); COMMIT";
	},
	sub {
		return "DO \$\$ BEGIN PERFORM zk_lock_acquire('" . rname() . "', '" . rmode() . "', '" . rtmo()
		  . "'); PERFORM 1/0; EXCEPTION WHEN division_by_zero THEN NULL; END \$\$";
	},
	sub {
		my $r = rname();
		return "BEGIN; SELECT zk_lock_fence('$r', zk_lock_acquire('$r', 'exclusive', '" . rtmo() . "')); COMMIT";
	},
	sub { return "SELECT zk_lock_outer_role() > 0"; },
	# admin calls from every role (42501 for the plain and pg_monitor roles)
	sub { return "SELECT zk_lock_revoke('" . rname() . "', 'cancel')"; },
	sub { return "SELECT zk_lock_force_release('" . rname() . "', 'zk0.0.0-LOCK-EXCLUSIVE-0000000000')"; },
	sub { return "SELECT zk_lock_admin_node('" . rname() . "', 'zk0.0.0-LOCK-SHARED-0000000000', 'delete', NULL)"; },
	sub { return "SELECT count(*) FROM zk_locks WHERE resource LIKE 'st%'"; },
	sub { return "SELECT count(*) FROM zk_lock_local"; },
	sub { return "SELECT state FROM zk_lock_status"; },
	sub { return "SELECT zk_lock_release('" . rname() . "', '" . rmode() . "')"; },
);

my @lister_ops = (
	sub { return join('; ', ('SELECT count(*) FROM zk_locks') x 5); },
	sub { return "DO \$\$ BEGIN FOR i IN 1..20 LOOP PERFORM count(*) FROM zk_locks; END LOOP; END \$\$"; },
	sub { return "SELECT count(*) FROM zk_locks('st'); SELECT count(*) FROM zk_locks('hold')"; },
	sub { return "SELECT count(*) FROM zk_lock_nodes()"; },
	sub { return "SELECT count(*) FROM zk_lock_local; SELECT * FROM zk_lock_status"; },
	sub { return "SELECT count(*) FROM zk_locks() l JOIN zk_lock_local x USING (resource)"; },
);

my @sessions;    # { kind, node, role, name, s, next_at, n }
my %stats = (ops => 0, errors => 0, exits => 0, respawns => 0);
my (%sqlstates, %unexpected, @hung);

sub spawn
{
	my ($x) = @_;
	my $s = eval {
		my $s = zk_session_as($x->{node}, $x->{name}, $x->{role});
		$s->query_ok("SET statement_timeout = '" . (20 * $slow) . "s'");
		$s;
	};
	$x->{s} = $s;
	$x->{next_at} = time() + ($s ? 0 : 1);
	$x->{setup} = 1;
	return $s;
}

my $k = 0;
foreach my $n (@nodes)
{
	my $nn = $n->name;
	my @kinds = (['holder', 'postgres']);
	my $nl = $VALGRIND ? 2 : ($nn eq 'node1' ? 4 : 2);
	push @kinds, map { ['lister', $ROLES[ $_ % 3 ]] } 0 .. $nl - 1;
	my $nk = $VALGRIND ? 2 : 3;
	push @kinds, map { ['locker', $ROLES[ $_ % 3 ]] } 0 .. $nk - 1;
	push @kinds, ['admin', 'postgres'];
	if ($ENV{ZKLOCK_STRESS_ONLY})
	{
		my %only = map { $_ => 1 } split /,/, $ENV{ZKLOCK_STRESS_ONLY};
		@kinds = grep { $only{ $_->[0] } } @kinds;
	}
	foreach my $kd (@kinds)
	{
		my $x = {
			kind => $kd->[0], role => $kd->[1], node => $n,
			name => "$nn-$kd->[0]-" . $k++, n => 0
		};
		spawn($x) or BAIL_OUT("cannot start session $x->{name}");
		push @sessions, $x;
	}
}

# the holders take 50 session locks each (finding 2's load)
foreach my $x (grep { $_->{kind} eq 'holder' } @sessions)
{
	my $nn = $x->{node}->name;
	is( $x->{s}->query_ok(
			"SELECT count(zk_lock_acquire_session('hold/$nn/' || i, 'exclusive', '30 s')) FROM generate_series(1, 50) i",
			120),
		'50',
		"holder on $nn takes 50 session locks");
	$x->{setup} = 0;
}

sub admin_op
{
	my ($x) = @_;
	my $p = rand();
	my $r = rname();
	return "SELECT zk_lock_force_release('$r')" if $p < 0.15;
	return "SELECT zk_lock_force_release(resource, node) FROM zk_locks WHERE resource LIKE 'st%' AND granted ORDER BY random() LIMIT 1"
	  if $p < 0.25;
	return "SELECT zk_lock_revoke('$r', 'cancel')" if $p < 0.4;
	return "SELECT zk_lock_revoke('$r', 'terminate')" if $p < 0.5;
	# cancel or terminate a random locker or lister of this instance
	my @t = grep {
		$_->{node} == $x->{node} && $_->{s} && $_->{s}->alive
		  && ($_->{kind} eq 'locker' || $_->{kind} eq 'lister')
	} @sessions;
	return "SELECT count(*) FROM zk_locks" unless @t;
	my $t = $t[ int(rand(@t)) ];
	return "SELECT pg_cancel_backend(" . $t->{s}->pid . ")" if $p < 0.85;
	return "SELECT pg_terminate_backend(" . $t->{s}->pid . ")";
}

sub next_sql
{
	my ($x) = @_;
	return $locker_ops[ int(rand(@locker_ops)) ]->() if $x->{kind} eq 'locker';
	return $lister_ops[ int(rand(@lister_ops)) ]->() if $x->{kind} eq 'lister';
	return admin_op($x) if $x->{kind} eq 'admin';
	return 'SELECT count(*) FROM zk_lock_local WHERE resource LIKE \'hold/%\'';    # holder
}

sub collect
{
	my ($x, $r) = @_;
	$stats{ops}++;
	foreach my $e (zk_errors_of($r->{err}))
	{
		my ($lvl, $code, $msg) = @$e;
		$stats{errors}++;
		$sqlstates{$code}++;
		next if $EXPECTED{$code};
		push @{ $unexpected{$code} }, "$x->{name} ($x->{role}): $lvl $code $msg [$x->{last_sql}]"
		  if @{ $unexpected{$code} // [] } < 5;
	}
	if ($r->{exited})
	{
		$stats{exits}++;
		# lost without an error line: the instance went away under it --
		# unless the server log says the session was terminated (a session
		# terminated while idle may see only the closed connection)
		my $pid = $x->{s} ? $x->{s}->pid : 0;
		if ($r->{err} !~ /57P01|terminating connection due to administrator command/
			&& !($pid && slurp_file($x->{node}->logfile) =~
				/\[$pid\] .*FATAL:  terminating connection due to administrator command/))
		{
			push @{ $unexpected{'lost connection'} },
			  "$x->{name}: psql exited: " . substr($r->{err}, -300)
			  if @{ $unexpected{'lost connection'} // [] } < 5;
		}
	}
	return;
}

my $quiet = zk_quiet_sessions();
my $start = time();
diag('040_stress: load starts at ' . scalar(gmtime($start)) . ' UTC');
my $end = $start + $SECS;
while (time() < $end)
{
	my $busy = 0;
	foreach my $x (@sessions)
	{
		my $s = $x->{s};
		if (!$s)
		{
			next if time() < $x->{next_at};
			$stats{respawns}++;
			spawn($x) or next;
			$s = $x->{s};
			if ($x->{kind} eq 'holder')
			{
				my $nn = $x->{node}->name;
				$s->send("SELECT count(zk_lock_acquire_session('hold/$nn/' || i, 'exclusive', '30 s')) FROM generate_series(1, 50) i");
				$x->{last_sql} = 'holder re-takes 50 locks';
				$x->{sent} = time();
				next;
			}
		}
		if (defined $s->{pending})
		{
			if (!$s->done)
			{
				if (time() - $x->{sent} > 60 * $slow && !$x->{hung}++)
				{
					push @hung, "$x->{name}: $x->{last_sql}";
				}
				next;
			}
			my $r = $s->wait(1);
			collect($x, $r);
			$busy++;
			if ($r->{exited} || !$s->alive)
			{
				$x->{s} = undef;
				$x->{next_at} = time() + 0.2;
				next;
			}
		}
		next if time() < ($x->{next_at} // 0);
		my $sql = next_sql($x);
		$x->{last_sql} = $sql;
		$x->{sent} = time();
		$s->send($sql);
		$x->{n}++;
		$x->{next_at} = time() + ($x->{kind} eq 'admin' ? (0.1 + rand(0.3)) * $slow
			: $x->{kind} eq 'holder' ? 1 : 0);
	}
	sleep(0.002) unless $busy;
}

# drain: every pending command must end (bounded)
foreach my $x (@sessions)
{
	next unless $x->{s} && defined $x->{s}{pending};
	my $r = $x->{s}->wait(60 * $slow);
	if (!defined $r)
	{
		push @hung, "$x->{name}: $x->{last_sql} (still running at the end)";
		next;
	}
	collect($x, $r);
}
undef $quiet;

my $elapsed = time() - $start;
diag(sprintf("040_stress: %d commands in %.0f s from %d sessions; %d errors (%s); %d sessions ended, %d respawned",
		$stats{ops}, $elapsed, scalar(@sessions), $stats{errors},
		join(', ', map { "$_ x$sqlstates{$_}" } sort keys %sqlstates),
		$stats{exits}, $stats{respawns}));

# ---------------------------------------------------------------------------
# the verdicts

foreach my $n (@nodes)
{
	my @crash = zk_log_crashes($n, $log_offset{ $n->name });
	ok(!@crash, $n->name . ': no crash in the server log (finding 2 crashed the worker with SIGABRT)')
	  or diag(join("\n", @crash[ 0 .. ($#crash < 9 ? $#crash : 9) ]));
}

foreach my $n (@nodes)
{
	my $pid = eval {
		wait_until(sub { my ($rc) = $n->psql('postgres', 'SELECT 1'); $rc == 0 }, timeout => 60);
		psql1($n, 'SELECT worker_pid FROM zk_lock_status');
	} // 'unreachable';
	is($pid, $worker_pid{ $n->name },
		$n->name . ': the zklock worker pid is unchanged (finding 2: a crash restarts it)');
}

# the worker still answers: a lock is granted and released at once
foreach my $n (@nodes)
{
	my ($rc, $out, $err) = $n->psql('postgres',
		q{SELECT zk_lock_acquire_session('st/alive', 'exclusive', '10 s') > 0 AND zk_lock_release('st/alive')},
		timeout => 30);
	is("$rc $out", '0 t', $n->name . ': the worker still grants and releases a lock after the load (finding 2: it hung under the listings)')
	  or diag($err);
}

foreach my $code (sort keys %unexpected)
{
	fail("unexpected error $code: " . ($FINDING{$code} // 'not in the expected list'));
	diag(join("\n", @{ $unexpected{$code} }));
}
ok(!%unexpected, 'every error had an expected SQLSTATE ('
	  . join(', ', sort keys %EXPECTED) . ')');

ok(!@hung, 'no command ran past its bound (60 s)') or diag(join("\n", @hung));

# the sessions are gone (zk_done_check quits them); explicit locks left to
# expire go within ttl + sweep_interval
zk_done_check();

# every shared entry the load used is given back (a leaked entry would
# count against its backend slot and the table for good)
foreach my $n ($node1, $node2)
{
	ok( wait_until(
			sub { psql1($n, 'SELECT entries_in_use FROM zk_lock_status') eq '0' },
			timeout => 60),
		$n->name . ': every shared entry is free again after the load');
}

if ($VALGRIND)
{
	$node1->stop('fast');
	my ($total, $ours) = (0, 0);
	# every source file of zklock, as an alternation: protocol|channel|...
	my $srcfiles = join('|',
		map { m{([^/]+)\.c$} }
		  map { glob("$FindBin::RealBin/../../../src/$_") } qw(*.c */*.c */*/*.c));
	foreach my $f (glob("$vgdir/vg.*.log"))
	{
		my $text = slurp_file($f);
		my @blocks = split /^==\d+== \n/m, $text;
		foreach my $b (@blocks)
		{
			next unless $b =~ /^==\d+== [A-Z]/m;
			$total++;
			# a frame in zklock: "(in .../zklock.so)" without debug
			# information, its source files or zklock_* functions with it
			if ($b =~ /zklock\.so|\bzklock_\w+ \(|\((?:$srcfiles)\.c:\d+\)/)
			{
				$ours++;
				diag("memcheck error through zklock.so in $f:\n$b") if $ours <= 5;
			}
		}
	}
	is($ours, 0, "valgrind: no memcheck error through zklock's code (all errors: $total; finding 2 is a use after free in list_event after list_finish's reset)");
}

done_testing();
