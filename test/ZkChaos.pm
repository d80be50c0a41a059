
# ZkChaos.pm -- the chaos suite's shared code (test/t/chaos/1xx_chaos_*.pl):
# client loops that take a zklock lock over and over while faults are
# injected, the history they leave, and the checker that judges it.
#
#   use FindBin;
#   use lib "$FindBin::RealBin/..";
#   use ZkLockTest;
#   use ZkChaos;
#   use Test::More;
#
#   zk_start(servers => 3);
#   my @nodes = map { zk_node($_, extra_conf => ZkChaos::node_conf()) } qw(node1 node2);
#   my $chaos = ZkChaos->new(nodes => \@nodes);     # creates the history table
#   my $run = $chaos->start('my_scenario', duration => 15);
#   $run->sleep_until(5);                            # 5 s into the run
#   $run->fault_begin('what is done');  ...inject...  $run->fault_end;
#   $run->check;     # stops the load (8 s after the last fault ended, and
#                    # not before `duration`), then the checker and asserts
#
# Helpers for injecting faults: zk_ctl / zk_ctl_parallel (zk_server.sh),
# zk_leader, zk_wait_serving, wait_node_ready, wait_node_disconnected,
# worker_pid, session_id, find_holder, wait_granted, signal_waiter,
# pg_restart_fast, ZkChaos::Proxy (test/zk_proxy.py: a TCP proxy that
# partitions a link and heals it), $run->fault_figures (when another
# instance was granted, when the cut one last committed, relative to a fault),
# probe_start / probe_finish (an acquire must fail with 08006 in time while
# ZooKeeper is unreachable), wait_session_gone, wait_for_log; and a holder
# under our control across a fault: $run->pin, pin_commit_send,
# pin_commit_wait, pin_killed; and a writer that holds the lock as a session
# lock and commits a write transaction every 20 ms across a fault until its
# lock is lost: $run->writer_start, writer_stop.
#
# The clients.  Each client is a separate process (perl -MZkChaos -e
# 'ZkChaos::client_main(...)'), so that the test process can block while it
# injects a fault without stalling the load.  A client keeps one psql
# connection to its instance and loops until told to stop (a stop file; a
# hard deadline too):
#
#   BEGIN;
#   SELECT chaos_section(scenario, resource, instance, client, seq, timeout);
#   COMMIT;
#
# chaos_section() takes the EXCLUSIVE transaction-level lock (with a timeout,
# so nothing waits forever), notes clock_timestamp() as the start, sleeps
# 5 ms, and inserts (token, instance, client, seq, start, end) into the table
# chaos_history *in the same transaction*: a row exists if and only if the
# transaction committed, which is exactly what the commit fence decides.
# It returns the token and the start (the grant time), which the client
# logs: a grant is on record even when its transaction does not commit.
# The instances run with track_commit_timestamp = on, and the checker takes
# a section to last from its start to its commit timestamp (taken when the
# commit record is written: after the commit fence, before the release), so
# a transaction that commits after its lock went to someone else overlaps
# that someone.  Errors (lock timeout, 08006, the lock lost at COMMIT, the
# connection killed) are tolerated: the client logs them and goes on,
# reconnecting when its connection is gone.  Every statement is bounded (a
# statement that runs longer than the bound is logged as a hang, and psql is
# killed).
#
# Each client writes one line per transaction to its own file: the outcome
# as the client saw it, and the grant time.  The checker (judge) then reads
# the rows of chaos_history of every instance (one machine, so
# clock_timestamp() and the commit timestamps are one clock) and counts as
# violations:
#   - two committed sections that overlap in time,
#   - a commit that lands after another transaction was granted the lock
#     (its grant inside the committed section), whether or not that other
#     transaction committed,
#   - a fencing token that is not strictly above the one of the section
#     before (sections ordered by start),
#   - a row the client was told did not commit (e.g. COMMIT raised 55P03),
#     a COMMIT that succeeded without its row, or a row with another token
#     than the one returned,
#   - a statement that hung, a COMMIT that waited longer than
#     zklock.session_timeout + zklock.connect_timeout, or an acquire longer
#     than its timeout or zklock.connect_timeout (plus a margin).
# It asserts no violation, a minimum of committed sections, sections on
# every instance after the last fault ended (the load really continued), and
# that no lock node and no local entry is left once the clients are gone.
# The clients' logs and the histories are kept in tmp_check/chaos_XXXX when
# a test fails (or ZKCHAOS_KEEP=1).
#
# This module loads no PostgreSQL::Test module at compile time (the client
# processes must not: PostgreSQL::Test::Utils redirects output at INIT);
# the test side calls ZkLockTest, PostgreSQL::Test and Test::More functions,
# which the test file has loaded, by their full names.

package ZkChaos;

use strict;
use warnings;

use Carp;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use File::Path ();
use File::Temp ();
use IO::Handle;
use IO::Select;
use IPC::Open3 ();
use IPC::Run ();
use POSIX ();
use Symbol qw(gensym);
use Time::HiRes qw(time sleep);

my $HERE = dirname(abs_path(__FILE__));

# Timing of the chaos instances (seconds).
our $SESSION_TIMEOUT = 4;
our $CONNECT_TIMEOUT = 3;

# The clients' acquire timeout (seconds).
our $ACQUIRE_TIMEOUT = 3;

# A statement running longer than this is a hang (a bug): every wait in the
# extension is bounded well below it.
our $STATEMENT_BOUND = 40;

# Slack allowed over the documented bounds (a loaded 2-core machine).
our $MARGIN = 4;

# postgresql.conf lines for a chaos instance (zk_node's extra_conf; zk_node
# sets zklock.session_timeout to 4s itself).
sub node_conf
{
	return "zklock.connect_timeout = '${CONNECT_TIMEOUT}s'\n"
	  . "track_commit_timestamp = on\n"
	  . "restart_after_crash = on\n"
	  . "log_min_messages = log\n";
}

# ===========================================================================
# client side (runs in its own process; plain Perl only)

sub _psql_start
{
	my ($psql, $connstr, $app) = @_;
	local $ENV{PGAPPNAME} = $app;
	local $ENV{PGCONNECT_TIMEOUT} = '5';
	my ($in, $out);
	my $err = gensym;
	my $pid = eval {
		IPC::Open3::open3($in, $out, $err, $psql, '-XAtq',
			'-v', 'ON_ERROR_STOP=0', '-d', $connstr, '-f', '-');
	};
	return undef unless $pid;
	$in->autoflush(1);
	return {
		pid   => $pid,
		in    => $in,
		out   => $out,
		err   => $err,
		obuf  => '',
		ebuf  => '',
		oeof  => 0,
		eeof  => 0,
		n     => 0,
		alive => 1,
	};
}

sub _psql_reap
{
	my ($p, $block) = @_;
	return unless $p->{alive};
	my $r = waitpid($p->{pid}, $block ? 0 : POSIX::WNOHANG());
	if ($r == $p->{pid} || $r == -1)
	{
		$p->{alive} = 0;
		close($p->{in});
		close($p->{out});
		close($p->{err});
	}
	return;
}

sub _psql_kill
{
	my ($p) = @_;
	return unless $p->{alive};
	kill('KILL', $p->{pid});
	_psql_reap($p, 1);
	return;
}

# Leave psql (bounded); kill it if it does not go.
sub _psql_quit
{
	my ($p) = @_;
	return unless $p->{alive};
	syswrite($p->{in}, "\\q\n");
	close($p->{in});
	my $deadline = time() + 10;
	while (time() < $deadline)
	{
		_psql_reap($p, 0);
		return unless $p->{alive};
		sleep(0.02);
	}
	_psql_kill($p);
	return;
}

# Queue a statement; returns its marker number, or 0 if psql is gone.
sub _psql_send
{
	my ($p, $sql) = @_;
	return 0 unless $p->{alive};
	my $n = ++$p->{n};
	my $text = "$sql;\n\\echo '__ZKC_$n' :SQLSTATE\n\\warn '__ZKC_$n'\n";
	my $w = syswrite($p->{in}, $text);
	return 0 unless defined $w && $w == length($text);
	return $n;
}

# Wait (until $deadline) for statement $n to finish.  Returns
#   { state => SQLSTATE, out => ..., err => ... }   finished
#   { exited => 1, err => ... }                     psql exited first
#   { hang => 1 }                                    deadline passed
sub _psql_collect
{
	my ($p, $n, $deadline) = @_;
	while (1)
	{
		if (   $p->{obuf} =~ /^__ZKC_$n ([^\n]*)\n/m
			&& $p->{ebuf} =~ /^__ZKC_$n\n/m)
		{
			my %r;
			$p->{obuf} =~ s/\A(.*?)^__ZKC_$n ([^\n]*)\n//ms;
			($r{out}, $r{state}) = ($1, $2);
			$p->{ebuf} =~ s/\A(.*?)^__ZKC_$n\n//ms;
			$r{err} = $1;
			$r{out} =~ s/\s+\z//;
			return \%r;
		}
		if ($p->{oeof} && $p->{eeof})
		{
			_psql_reap($p, 1);
			my $e = $p->{ebuf};
			$p->{obuf} = $p->{ebuf} = '';
			return { exited => 1, err => $e };
		}
		my $left = $deadline - time();
		return { hang => 1 } if $left <= 0;
		my $sel = IO::Select->new;
		$sel->add($p->{out}) unless $p->{oeof};
		$sel->add($p->{err}) unless $p->{eeof};
		foreach my $fh ($sel->can_read($left < 1 ? $left : 1))
		{
			my $buf;
			my $r = sysread($fh, $buf, 65536);
			my $eof = !defined $r || $r == 0;
			if ($fh == $p->{out})
			{
				if ($eof) { $p->{oeof} = 1; } else { $p->{obuf} .= $buf; }
			}
			else
			{
				if ($eof) { $p->{eeof} = 1; } else { $p->{ebuf} .= $buf; }
			}
		}
	}
}

sub _first_error
{
	my ($err) = @_;
	return '' unless defined $err;
	my ($line) = $err =~ /((?:ERROR|FATAL|PANIC|psql: error)[^\n]*)/;
	$line //= (split /\n/, $err)[0] // '';
	$line =~ s/\t/ /g;
	return $line;
}

sub _q
{
	my ($s) = @_;
	$s =~ s/'/''/g;
	return "'$s'";
}

# Run one transaction, BEGIN; $sql; COMMIT, sent at once; collect the
# outcome.  $sql's output must match $want.  Returns { outcome, out (of
# $sql), t_sec, t_com, msg }, outcome:
# commit, fenced (COMMIT raised 55P03), commit_error:<state>,
# acquire_error:<state> ($sql failed), begin_error:<state>, hang:<stage>,
# conn_lost:<stage>, connect_failed.
sub _run_txn
{
	my ($p, $sql, $want, $bound) = @_;
	my @n = map { _psql_send($p, $_) } ('BEGIN', $sql, 'COMMIT');
	my %t = (outcome => '', out => '', t_sec => '', t_com => '', msg => '');
	my @stage = qw(begin section commit);
	my $t_prev = time();
	for my $i (0 .. 2)
	{
		my $r =
		  $n[$i]
		  ? _psql_collect($p, $n[$i], time() + $bound)
		  : { exited => 1, err => 'could not send' };
		my $now = time();
		$t{t_sec} = sprintf('%.3f', $now - $t_prev) if $i == 1;
		$t{t_com} = sprintf('%.3f', $now - $t_prev) if $i == 2;
		$t_prev = $now;
		if ($r->{hang})
		{
			$t{outcome} = "hang:$stage[$i]";
			$t{msg} = "no answer after ${bound}s";
			_psql_kill($p);
			last;
		}
		if ($r->{exited})
		{
			# psql exits when its connection is gone (non-interactive)
			$t{outcome} =
			  $i == 0 && $p->{n} <= 3
			  ? 'connect_failed'
			  : "conn_lost:$stage[$i]";
			$t{msg} = _first_error($r->{err});
			last;
		}
		if ($i == 1)
		{
			if ($r->{state} eq '00000' && $r->{out} =~ $want)
			{
				$t{out} = $r->{out};
			}
			else
			{
				$t{outcome} = "acquire_error:$r->{state}";
				$t{msg} = _first_error($r->{err});
			}
		}
		elsif ($i == 2 && $t{outcome} eq '')
		{
			if ($r->{state} eq '00000')
			{
				$t{outcome} = 'commit';
			}
			elsif ($r->{state} eq '55P03')
			{
				$t{outcome} = 'fenced';
				$t{msg} = _first_error($r->{err});
			}
			else
			{
				$t{outcome} = "commit_error:$r->{state}";
				$t{msg} = _first_error($r->{err});
			}
		}
		elsif ($i == 0 && $r->{state} ne '00000')
		{
			$t{outcome} = "begin_error:$r->{state}";
			$t{msg} = _first_error($r->{err});
			# the rest runs outside a transaction block: skip it
			for my $j (1, 2) { _psql_collect($p, $n[$j], time() + $bound); }
			last;
		}
	}
	return \%t;
}

sub _log_txn
{
	my ($log, $seq, $t0, $t, $token, $grant) = @_;
	print $log join("\t", $seq, sprintf('%.6f', $t0), $t->{outcome}, $token // '',
		$t->{t_sec}, $t->{t_com}, $grant // '', $t->{msg}), "\n";
	return;
}

# perl -MZkChaos -e 'ZkChaos::client_main(@ARGV)' -- key=value ...
sub client_main
{
	my %a = map { /^([^=]+)=(.*)\z/s ? ($1, $2) : () } @_;
	foreach my $k (qw(psql connstr scenario resource instance client until
		acquire_timeout out))
	{
		die "client_main: missing $k\n" unless defined $a{$k};
	}
	return writer_main(%a) if ($a{mode} // '') eq 'writer';
	$SIG{PIPE} = 'IGNORE';
	my $bound = $a{statement_bound} // $STATEMENT_BOUND;
	open(my $log, '>>', $a{out}) or die "$a{out}: $!";
	$log->autoflush(1);
	my $app = "chaos_$a{client}";

	my $p;
	my $seq = 0;
	my %count;
	my $stopfile = $a{stopfile};
	my $parent = $a{parent};
	while (time() < $a{until} && !(defined $stopfile && -e $stopfile))
	{
		# the test is gone (killed, died): stop too
		last if defined $parent && !kill(0, $parent);
		$p = _psql_start($a{psql}, $a{connstr}, $app)
		  if !$p || !$p->{alive};
		if (!$p)
		{
			print $log join("\t", 0, sprintf('%.6f', time()), 'spawn_failed',
				'', '', '', '', $!), "\n";
			sleep(0.5);
			next;
		}
		$seq++;
		my $t0 = time();
		my $section = sprintf('SELECT chaos_section(%s, %s, %s, %s, %d, %s)',
			_q($a{scenario}), _q($a{resource}), _q($a{instance}),
			_q($a{client}), $seq, _q("$a{acquire_timeout} s"));
		my $t = _run_txn($p, $section, qr/^\d+ \d+$/, $bound);
		my ($token, $grant) = $t->{out} =~ /^(\d+) (\d+)$/ ? ($1, $2) : ('', '');
		$count{ $t->{outcome} }++;
		_log_txn($log, $seq, $t0, $t, $token, $grant);
		# no hot loop while the instance is down
		sleep(0.2) if $t->{outcome} eq 'connect_failed' || $t->{outcome} =~ /^conn_lost/;
	}
	_psql_quit($p) if $p;
	print $log "END\t"
	  . join(',', map { "$_=$count{$_}" } sort keys %count) . "\n";
	close($log);
	return 0;
}

# The writer (client_main with mode=writer): one connection that takes the
# scenario's lock as a SESSION lock (chaos_hold, waiting up to
# acquire_timeout), then commits one small write transaction after another
# (chaos_write, every `interval` seconds), each guarded by that lock (a
# session lock guards a transaction that writes), recording a row in
# chaos_history whose start is the grant of the hold: the checker takes the
# hold from its grant to its last commit as one section.  The first
# transaction that does not commit (the lock lost: 55P03) ends the writer:
# it releases what it holds and exits; so do the stop files (the run's and
# its own, stopfile2).  Logged like a client; the hold itself as seq 0,
# outcome "hold" (or hold_error:<state>).
sub writer_main
{
	my %a = @_;
	$SIG{PIPE} = 'IGNORE';
	my $bound = $a{statement_bound} // $STATEMENT_BOUND;
	my $interval = $a{interval} // 0.02;
	open(my $log, '>>', $a{out}) or die "$a{out}: $!";
	$log->autoflush(1);
	my %count;
	my $stop = sub {
		return 1 if time() >= $a{until};
		return 1 if defined $a{stopfile} && -e $a{stopfile};
		return 1 if defined $a{stopfile2} && -e $a{stopfile2};
		return 1 if defined $a{parent} && !kill(0, $a{parent});
		return 0;
	};
	my $p = _psql_start($a{psql}, $a{connstr}, "chaos_$a{client}");
	my ($token, $grant);
	if ($p)
	{
		my $t0 = time();
		my $n = _psql_send($p, sprintf('SELECT chaos_hold(%s, %s)',
				_q($a{resource}), _q("$a{acquire_timeout} s")));
		my $r = $n ? _psql_collect($p, $n, time() + $bound) : { exited => 1, err => '' };
		my %t = (t_sec => sprintf('%.3f', time() - $t0), t_com => '', msg => '');
		if (!$r->{hang} && !$r->{exited} && $r->{state} eq '00000'
			&& $r->{out} =~ /^(\d+) (\d+)$/)
		{
			($token, $grant) = ($1, $2);
			$t{outcome} = 'hold';
		}
		else
		{
			$t{outcome} = 'hold_error:' . ($r->{hang} ? 'hang' : $r->{exited} ? 'exited' : $r->{state});
			$t{msg} = _first_error($r->{err});
		}
		$t{t_sec} = '';    # (waited for the lock with its own timeout)
		$count{ $t{outcome} }++;
		_log_txn($log, 0, $t0, \%t, $token, $grant);
	}
	my $seq = 0;
	while (defined $token && $p->{alive} && !$stop->())
	{
		$seq++;
		my $t0 = time();
		my $t = _run_txn($p,
			sprintf('SELECT chaos_write(%s, %s, %s, %s, %d, %s)',
				_q($a{scenario}), $token, _q($a{instance}), _q($a{client}),
				$seq, $grant),
			qr/^\d+$/, $bound);
		$count{ $t->{outcome} }++;
		_log_txn($log, $seq, $t0, $t, $token, $grant);
		last if $t->{outcome} ne 'commit';
		sleep($interval);
	}
	if ($p && $p->{alive})
	{
		my $n = _psql_send($p, 'SELECT zk_lock_release_all()');
		_psql_collect($p, $n, time() + $bound) if $n;
	}
	_psql_quit($p) if $p;
	print $log "END\t"
	  . join(',', map { "$_=$count{$_}" } sort keys %count) . "\n";
	close($log);
	return 0;
}

# ===========================================================================
# test side

my $SETUP_SQL = <<'EOS';
CREATE TABLE IF NOT EXISTS chaos_history (
    scenario text NOT NULL,
    token    bigint NOT NULL,
    instance text NOT NULL,
    client   text NOT NULL,
    seq      integer NOT NULL,
    t_start  timestamptz NOT NULL,
    t_end    timestamptz NOT NULL
);
CREATE OR REPLACE FUNCTION chaos_section(scn text, res text, inst text,
                                         cl text, sq integer, tmo interval)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  tok bigint;
  ts  timestamptz;
BEGIN
  tok := zk_lock_acquire(res, 'exclusive', tmo);
  ts := clock_timestamp();
  PERFORM pg_sleep(0.005);
  INSERT INTO chaos_history VALUES (scn, tok, inst, cl, sq, ts, clock_timestamp());
  -- the token, and the grant time (the row's t_start) for the client's log:
  -- a grant is recorded even when its transaction does not commit
  RETURN tok || ' ' || (extract(epoch FROM ts) * 1000000)::bigint;
END $$;
-- the writer's (writer_main): a session lock, then write transactions
CREATE OR REPLACE FUNCTION chaos_hold(res text, tmo interval)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  tok bigint;
BEGIN
  tok := zk_lock_acquire_session(res, 'exclusive', tmo);
  RETURN tok || ' ' || (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
END $$;
CREATE OR REPLACE FUNCTION chaos_write(scn text, tok bigint, inst text, cl text,
                                       sq integer, granted_us bigint)
RETURNS bigint LANGUAGE sql AS $$
  INSERT INTO chaos_history
  VALUES (scn, tok, inst, cl, sq,
          timestamptz 'epoch' + granted_us * interval '1 microsecond', clock_timestamp())
  RETURNING tok;
$$;
EOS

# The folder for the clients' logs and the histories: tmp_check/chaos_XXXX,
# removed at exit if every test passed (and ZKCHAOS_KEEP is not set).
my @chaos_dirs;

sub _chaos_dir
{
	no warnings 'once';
	my $dir = File::Temp::tempdir('chaos_XXXX',
		DIR => $PostgreSQL::Test::Utils::tmp_check, CLEANUP => 0);
	push @chaos_dirs, $dir;
	return $dir;
}

my @client_pids;
our @proxy_pids;

END
{
	my $exit_code = $?;
	# clients still running (the test died mid-scenario): kill them before
	# the instances go
	foreach my $pid (@client_pids)
	{
		next if waitpid($pid, POSIX::WNOHANG()) != 0;
		kill('KILL', $pid);
		waitpid($pid, 0);
	}
	# proxies (they would exit on their own within a second of us)
	foreach my $pid (@proxy_pids)
	{
		next if waitpid($pid, POSIX::WNOHANG()) != 0;
		kill('TERM', $pid);
		my $deadline = time() + 5;
		sleep(0.05) while waitpid($pid, POSIX::WNOHANG()) == 0 && time() < $deadline;
		if (waitpid($pid, POSIX::WNOHANG()) == 0)
		{
			kill('KILL', $pid);
			waitpid($pid, 0);
		}
	}
	my $passing = eval { Test::More->builder->is_passing } // 0;
	if ($passing && $exit_code == 0 && !$ENV{ZKCHAOS_KEEP})
	{
		File::Path::rmtree($_) for @chaos_dirs;
	}
	elsif (@chaos_dirs)
	{
		print STDERR "# chaos logs and histories kept in @chaos_dirs\n";
	}
	$? = $exit_code;
}

# ZkChaos->new(nodes => [...], clients_per_node => 3)
#   clients_per_node: a number, or { node name => number } (default 3 for a
#   node not named; a node with none only has what the test pins there)
sub new
{
	my ($class, %p) = @_;
	croak "nodes needed" unless $p{nodes} && @{ $p{nodes} };
	my $self = bless {
		nodes            => $p{nodes},
		clients_per_node => $p{clients_per_node} // 3,
		acquire_timeout  => $p{acquire_timeout} // $ACQUIRE_TIMEOUT,
		dir              => _chaos_dir(),
	}, $class;
	$_->safe_psql('postgres', $SETUP_SQL) for @{ $self->{nodes} };
	return $self;
}

sub nodes { return @{ $_[0]->{nodes} }; }

# fork + exec @$cmd with stdin from /dev/null and stdout+stderr appended to
# $outfile (raw descriptors: the test's STDOUT is a tied handle).
sub _spawn
{
	my ($cmd, $outfile) = @_;
	open(my $null, '<', '/dev/null') or die "/dev/null: $!";
	open(my $out, '>>', $outfile) or die "$outfile: $!";
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		POSIX::dup2(fileno($null), 0);
		POSIX::dup2(fileno($out), 1);
		POSIX::dup2(fileno($out), 2);
		{ no warnings 'exec'; exec { $cmd->[0] } @$cmd; }
		POSIX::_exit(127);
	}
	close($null);
	close($out);
	return $pid;
}

# Start the clients of a scenario; returns a ZkChaos::Run.
#   duration => seconds the clients loop at least (default 20)
#   settle   => seconds they go on after the last fault ended (default 8)
#   resource => the lock (default chaos/<scenario>)
sub start
{
	my ($self, $scenario, %p) = @_;
	my $duration = $p{duration} // 20;
	my $resource = $p{resource} // "chaos/$scenario";
	my $t0 = time();
	my $run = bless {
		chaos    => $self,
		scenario => $scenario,
		resource => $resource,
		t0       => $t0,
		duration => $duration,
		settle   => $p{settle} // 8,
		# the clients stop when told (the stop file), at the latest then
		until    => $t0 + $duration + ($p{max_extra} // 60),
		stopfile => "$self->{dir}/$scenario.stop",
		faults   => [],
		clients  => [],
	}, 'ZkChaos::Run';

	foreach my $node ($self->nodes)
	{
		my $cpn = $self->{clients_per_node};
		my $nc = ref $cpn ? $cpn->{ $node->name } // 3 : $cpn;
		for my $k (1 .. $nc)
		{
			my $name = $node->name . "_c$k";
			my $file = "$self->{dir}/$scenario.$name.log";
			unlink $file;
			unlink $run->{stopfile};
			my @cmd = (
				$^X, "-I$HERE", '-MZkChaos', '-e',
				'exit ZkChaos::client_main(@ARGV)', '--',
				'psql=' . $node->installed_command('psql'),
				'connstr=' . $node->connstr('postgres'),
				"scenario=$scenario",
				"resource=$resource",
				'instance=' . $node->name,
				"client=$name",
				"until=$run->{until}",
				"stopfile=$run->{stopfile}",
				"parent=$$",
				"acquire_timeout=$self->{acquire_timeout}",
				"out=$file");
			my $pid = _spawn(\@cmd, "$self->{dir}/$scenario.$name.stdout");
			push @client_pids, $pid;
			push @{ $run->{clients} },
			  { name => $name, node => $node, file => $file, pid => $pid };
		}
	}
	Test::More::note("scenario $scenario: "
		  . scalar(@{ $run->{clients} })
		  . " clients on $resource for ${duration}s");
	return $run;
}

# ---------------------------------------------------------------------------
# fault helpers (test side)

# Run zk_server.sh through ZkLockTest, dying if it fails.
sub zk_ctl
{
	my (@args) = @_;
	my ($rc, $out, $err) = ZkLockTest::zk_server(@args);
	croak "zk_server.sh @args failed (rc $rc): $err" if $rc != 0;
	return $out;
}

# The number (1..3) of the current leader; bounded wait for one.
sub zk_leader
{
	my ($timeout) = @_;
	my $leader;
	ZkLockTest::wait_until(
		sub {
			my ($rc, $out) = ZkLockTest::zk_server('leader');
			$leader = $out if $rc == 0 && $out =~ /^\d+$/;
			return defined $leader;
		},
		timeout => $timeout // 30,
		interval => 0.2);
	croak "no ZooKeeper leader" unless defined $leader;
	return $leader;
}

# Wait (bounded) until every server serves again, and a client can open a
# session.  Seen once in many runs: after a SIGSTOP of the whole ensemble,
# the servers answered `srvr` but no client (zklock's workers, Kazoo) could
# open a session for over a minute.  That is ZooKeeper not recovering from
# the fault we injected, not zklock's doing: then restart the servers one by
# one, say so, and let the instances recover on their own.
sub zk_wait_serving
{
	my ($timeout) = @_;
	my $last = '';
	my $serving = sub {
		return ZkLockTest::wait_until(
			sub {
				my ($rc, $out) = ZkLockTest::zk_server('status');
				$last = $out;
				return $rc == 0;
			},
			timeout => $timeout // 30,
			interval => 0.2);
	};
	my $sessions = sub {
		local $ENV{ZKUTIL_CONNECT_TIMEOUT} = 20;
		my ($rc, $out, $err) = ZkLockTest::zkutil('exists', '/');
		$last = $err;
		return $rc == 0;
	};
	my $ok = $serving->() && $sessions->();
	if (!$ok)
	{
		Test::More::diag("ZooKeeper does not serve clients after the fault ($last); "
			  . "restarting its servers one by one");
		ZkLockTest::zk_server('restart-one', $_) for 1 .. ZkLockTest::zk_server_count();
		$ok = $serving->() && $sessions->();
	}
	Test::More::diag("ZooKeeper not serving: $last") unless $ok;
	return $ok;
}

# One value from a query, or undef on failure (the instance may be down).
sub try_psql
{
	my ($node, $sql, $timeout) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', $sql, timeout => $timeout // 10);
	return $rc == 0 ? $out : undef;
}

# Wait (bounded) until the instance accepts connections and its zklock
# worker is connected.  Returns 1/0.
sub wait_node_ready
{
	my ($node, $timeout) = @_;
	$timeout //= 60;
	my $last = '';
	my $ok = ZkLockTest::wait_until(
		sub {
			my $s = try_psql($node, 'SELECT state FROM zk_lock_status', 5);
			$last = $s // '(no connection)';
			return defined $s && $s eq 'connected';
		},
		timeout => $timeout,
		interval => 0.1);
	unless ($ok)
	{
		# say whether ZooKeeper itself serves, and why the worker waits
		my ($rc, $status) = ZkLockTest::zk_server('status');
		Test::More::diag($node->name . " not ready after ${timeout}s: $last; "
			  . "ZooKeeper status (rc $rc):\n$status\n"
			  . "worker's view: "
			  . (try_psql($node, 'SELECT last_error FROM zk_lock_status', 5) // '?'));
	}
	return $ok;
}

sub worker_pid
{
	my ($node) = @_;
	return try_psql($node, 'SELECT worker_pid FROM zk_lock_status');
}

sub session_id
{
	my ($node) = @_;
	return try_psql($node, 'SELECT session_id FROM zk_lock_status');
}

# Wait (bounded, default 10 s) until the server log of $node, from byte
# $offset on, matches $re.  Returns the match ($1 if the regex captures),
# or undef.
sub wait_for_log
{
	my ($node, $re, $offset, $timeout) = @_;
	my $found;
	ZkLockTest::wait_until(
		sub {
			my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile, $offset);
			if ($log =~ $re)
			{
				$found = defined $1 ? $1 : $&;
				return 1;
			}
			return 0;
		},
		timeout => $timeout // 10,
		interval => 0.1);
	return $found;
}

# Wait (bounded) until no lock node under the root belongs to ZooKeeper
# session $sid (zk_lock_status.session_id).  Returns 1/0.
sub wait_session_gone
{
	my ($sid, $timeout) = @_;
	return 1 unless defined $sid && $sid ne '';
	my $want = lc($sid);
	$want =~ s/^0x//;
	$want =~ s/^0+//;
	my $left = -1;
	my $ok = ZkLockTest::wait_until(
		sub {
			$left = 0;
			foreach my $i (ZkLockTest::zk_lock_info(ZkLockTest::zk_root()))
			{
				my $o = lc($i->[2] // '');
				$o =~ s/^0+//;
				$left++ if $o eq $want;
			}
			return $left == 0;
		},
		timeout => $timeout // 5,
		interval => 0.2);
	Test::More::diag("$left lock node(s) of session $sid still there") unless $ok;
	return $ok;
}

# Find a chaos client backend that holds the scenario's lock (granted in
# zk_lock_local) on one of @nodes; bounded number of tries.  Returns
# ($node, $pid) or ().
sub find_holder
{
	my ($run, @nodes) = @_;
	my $res = $run->{resource};
	for my $try (1 .. 200)
	{
		foreach my $node (@nodes)
		{
			my $pid = try_psql($node,
				    "SELECT l.pid FROM zk_lock_local l JOIN pg_stat_activity a USING (pid)"
				  . " WHERE l.resource = '$res' AND l.state = 'granted'"
				  . " AND a.application_name LIKE 'chaos\\_%' LIMIT 1", 5);
			return ($node, $pid) if defined $pid && $pid =~ /^\d+$/;
		}
		sleep(0.02);
	}
	return ();
}

# Wait (bounded) until a backend of $node holds the scenario's lock
# (granted in zk_lock_local).  Returns the time() it was seen, or undef.
sub wait_granted
{
	my ($run, $node, $timeout) = @_;
	my $res = $run->{resource};
	my $seen;
	ZkLockTest::wait_until(
		sub {
			my $n = try_psql($node,
				    "SELECT count(*) FROM zk_lock_local WHERE resource = '$res'"
				  . " AND state = 'granted'", 5);
			$seen = time() if defined $n && $n =~ /^[1-9]/;
			return defined $seen;
		},
		timeout => $timeout // 20,
		interval => 0.05);
	return $seen;
}

# Signal one chaos client backend that waits for the scenario's lock,
# picked at random, in one statement (so that it still waits when
# signalled): $how is 'cancel' or 'terminate'.  $s is a ZkLockTest session
# on the instance (faster than a new psql each time).  Returns the pid
# signalled, or undef if none was waiting.
sub signal_waiter
{
	my ($run, $s, $how) = @_;
	my $res = $run->{resource};
	my $r = $s->query(
		    "SELECT pid FROM (SELECT l.pid FROM zk_lock_local l"
		  . " JOIN pg_stat_activity a USING (pid)"
		  . " WHERE l.resource = '$res' AND l.state = 'waiting'"
		  . " AND a.wait_event_type = 'Extension'"
		  . " AND a.application_name LIKE 'chaos\\_%'"
		  . " ORDER BY random() LIMIT 1) w WHERE pg_${how}_backend(pid)", 20);
	return ($r->{sqlstate} eq '00000' && $r->{out} =~ /^(\d+)$/) ? $1 : undef;
}

# Wait (bounded) until the instance's worker is not 'connected' (it has
# noticed that ZooKeeper is gone).  Returns 1/0.
sub wait_node_disconnected
{
	my ($node, $timeout) = @_;
	return ZkLockTest::wait_until(
		sub {
			my $s = try_psql($node, 'SELECT state FROM zk_lock_status', 5);
			return defined $s && $s ne 'connected';
		},
		timeout => $timeout // 20,
		interval => 0.1);
}

# Probes: while ZooKeeper is unreachable, a lock request on $node (with a
# long timeout of its own) must fail with 08006 within
# zklock.connect_timeout plus a margin.  probe_start sends it (try => 1: a
# try-lock) on a fresh session; probe_finish waits (bounded) and asserts.
# Start the probes of several instances, then finish them: they run at the
# same time.
sub probe_start
{
	my ($node, $resource, %p) = @_;
	my $fn = $p{try} ? "zk_lock_try_acquire('$resource')"
	  : "zk_lock_acquire('$resource', 'exclusive', '60 s')";
	my $s = ZkLockTest::zk_session($node, 'chaos_probe');
	$s->query_ok('BEGIN');
	$s->send("SELECT $fn");
	return { s => $s, fn => $fn, node => $node, t0 => time() };
}

sub probe_finish
{
	my ($p, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $bound = $CONNECT_TIMEOUT + $MARGIN;
	my $r = $p->{s}->wait($bound + 30);
	my $secs = time() - $p->{t0};
	my $on = "$p->{fn} on " . $p->{node}->name;
	my $state = defined $r ? ($r->{exited} ? 'exited' : $r->{sqlstate}) : 'no answer';
	my ($line) = defined $r ? $r->{err} =~ /(ERROR:[^\n]*)/ : ();
	Test::More::note(sprintf("%s: %s: %s after %.2fs: %s", $what, $on, $state, $secs,
			$line // ''));
	Test::More::is($state, '08006', "$what: $on fails with 08006");
	# (the worker may declare its session lost while the request waits)
	Test::More::like($line // '', qr/could not connect to ZooKeeper|ZooKeeper session lost/,
		"$what: ... saying it could not connect to ZooKeeper");
	Test::More::cmp_ok($secs, '<=', $bound,
		sprintf("$what: ... within connect_timeout + margin (%.2fs <= %ds)", $secs, $bound));
	if (defined $r && !$r->{exited})
	{
		$p->{s}->query('ROLLBACK', 30);
		$p->{s}->quit;
	}
	else
	{
		$p->{s}->kill_client('KILL');
	}
	return $secs;
}

# Run several zk_server.sh commands at the same time, e.g.
# zk_ctl_parallel(['kill', 1], ['kill', 2]); dies if one fails.
sub zk_ctl_parallel
{
	my (@cmds) = @_;
	my $dir = ZkLockTest::zk_dir();
	my @runs;
	foreach my $c (@cmds)
	{
		my %r = (cmd => join(' ', @$c), out => '', err => '');
		my ($cmd, @args) = @$c;
		$r{h} = IPC::Run::start([ "$HERE/zk_server.sh", $cmd, $dir, @args ],
			'<', \undef, '>', \$r{out}, '2>', \$r{err}, IPC::Run::timeout(90));
		push @runs, \%r;
	}
	my @failed;
	foreach my $r (@runs)
	{
		my $ok = eval { $r->{h}->finish; 1; };
		my $rc = $ok ? $r->{h}->result(0) : -1;
		Test::More::note("zk_server.sh $r->{cmd}: rc=$rc\n$r->{out}$r->{err}");
		push @failed, "$r->{cmd} (rc $rc): $r->{err}" if $rc != 0;
	}
	croak "zk_server.sh failed: @failed" if @failed;
	return;
}

# pg_ctl restart -m fast, then wait for the worker to be connected.
sub pg_restart_fast
{
	my ($node) = @_;
	local %ENV = $node->_get_env(PGAPPNAME => undef);
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run(
			[
				'pg_ctl', '-w', '-D', $node->data_dir, '-l', $node->logfile,
				'-m', 'fast', 'restart'
			],
			'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(90));
		1;
	};
	my $rc = $ok ? $? >> 8 : -1;
	Test::More::note("pg_ctl restart -m fast " . $node->name . ": rc=$rc $out$err");
	$node->_update_pid(1) if $rc == 0;
	return $rc == 0;
}

# ---------------------------------------------------------------------------
# reading what the clients and instances recorded

sub _read_client_log
{
	my ($c) = @_;
	my @txns;
	my $end;
	if (open(my $fh, '<', $c->{file}))
	{
		while (my $line = <$fh>)
		{
			chomp $line;
			if ($line =~ /^END\t(.*)$/) { $end = $1; next; }
			my ($seq, $t0, $outcome, $token, $t_sec, $t_com, $grant, $msg) =
			  split /\t/, $line, 8;
			next unless defined $outcome;
			push @txns,
			  {
				client  => $c->{name},
				seq     => $seq,
				t0      => $t0,
				outcome => $outcome,
				token   => $token,
				t_sec   => $t_sec,
				t_com   => $t_com,
				grant   => $grant // '',
				msg     => $msg // ''
			  };
		}
		close($fh);
	}
	return (\@txns, $end);
}

# The checker's judgement, a pure function (t/chaos/100_chaos_checker.pl feeds it
# made-up histories).
#   rows   => committed sections: { token, instance, client, seq, start, end }
#             (start/end in microseconds; end = commit timestamp)
#   txns   => what the clients saw: { client, seq, outcome, token, t_sec,
#             t_com, msg }
#   killed => { client name => 1 } for clients whose log may be cut short
#   acquire_timeout => the clients' (seconds)
# Returns (\@violations, $hangs, $longest_acquire, $longest_commit).
sub judge
{
	my (%p) = @_;
	my @rows = sort { $a->{start} <=> $b->{start} || $a->{end} <=> $b->{end} }
	  @{ $p{rows} };
	my @txns = @{ $p{txns} };
	my $killed = $p{killed} // {};

	# A section is one hold of the lock, from its grant to its last commit:
	# a row, or the rows of one writer with one token (a writer's session
	# lock spans several transactions, each a row whose start is the grant).
	my (%sec, @sections);
	foreach my $r (@rows)
	{
		my $k = $r->{client} =~ /^writer_/ ? "$r->{client}/$r->{token}" : "$r->{client}/$r->{seq}";
		if (my $x = $sec{$k})
		{
			$x->{end} = $r->{end} if $r->{end} > $x->{end};
			$x->{start} = $r->{start} if $r->{start} < $x->{start};
			$x->{n}++;
			next;
		}
		push @sections, $sec{$k} = { %$r, n => 1 };
	}
	@sections = sort { $a->{start} <=> $b->{start} || $a->{end} <=> $b->{end} } @sections;

	my @v;    # violations, as text
	# 1. no two committed sections overlap
	my ($maxend, $maxrow);
	foreach my $r (@sections)
	{
		if (defined $maxend && $r->{start} < $maxend)
		{
			push @v,
			  sprintf(
				"overlap: %s/%s seq %d token %s [%d..%d] overlaps %s/%s seq %d token %s [%d..%d] by %d us",
				$maxrow->{instance}, $maxrow->{client}, $maxrow->{seq},
				$maxrow->{token},    $maxrow->{start},  $maxrow->{end},
				$r->{instance},      $r->{client},      $r->{seq},
				$r->{token},         $r->{start},       $r->{end},
				$maxend - $r->{start});
		}
		if (!defined $maxend || $r->{end} > $maxend)
		{
			$maxend = $r->{end};
			$maxrow = $r;
		}
	}
	# 2. tokens strictly increase in the order of the sections
	for my $i (1 .. $#sections)
	{
		my ($x, $y) = @sections[ $i - 1, $i ];
		push @v,
		  "token went backwards: $x->{client} seq $x->{seq} token $x->{token}"
		  . " then $y->{client} seq $y->{seq} token $y->{token}"
		  if $y->{token} <= $x->{token};
	}
	# 3. the history agrees with what the clients were told
	my %row = map { ("$_->{client}/$_->{seq}" => $_) } @rows;
	my %txn = map { ("$_->{client}/$_->{seq}" => $_) } @txns;
	foreach my $t (@txns)
	{
		my $r = $row{"$t->{client}/$t->{seq}"};
		if ($t->{outcome} eq 'commit')
		{
			if (!$r)
			{
				push @v, "$t->{client} seq $t->{seq}: COMMIT succeeded but no row";
			}
			elsif ($r->{token} ne $t->{token})
			{
				push @v,
				  "$t->{client} seq $t->{seq}: token $t->{token} returned, $r->{token} recorded";
			}
		}
		elsif ($r && $t->{outcome} !~ /^(conn_lost|hang):commit$/)
		{
			push @v,
			  "$t->{client} seq $t->{seq}: committed although the client saw $t->{outcome}: $t->{msg}";
		}
	}
	foreach my $r (@rows)
	{
		push @v, "row $r->{client} seq $r->{seq} token $r->{token}: no such transaction in the client log"
		  unless $txn{"$r->{client}/$r->{seq}"} || $killed->{ $r->{client} };
	}
	# 3b. no commit lands after another holder was granted the lock: a
	# grant (when zk_lock_acquire returned, on the same clock as the commit
	# timestamps) inside a committed section [grant .. commit timestamp] of
	# another transaction.  A grant whose transaction committed is a row and
	# was held against the others in 1; this catches the grants whose
	# transaction did not commit (fenced, failed, connection lost): the lock
	# was granted to two all the same, and the one that committed did so
	# after the other was granted.
	my @grants = sort { $a->{grant} <=> $b->{grant} }
	  grep { ($_->{grant} // '') =~ /^\d+$/ && !$row{"$_->{client}/$_->{seq}"} } @txns;
	foreach my $r (@sections)
	{
		foreach my $g (@grants)
		{
			last if $g->{grant} >= $r->{end};
			next if $g->{grant} <= $r->{start};
			# (the same hold: a writer's failed transaction)
			next if $g->{client} eq $r->{client} && $g->{token} eq $r->{token};
			push @v,
			  sprintf(
				"commit after another grant: %s/%s seq %d token %s [%d..%d] committed %d us after %s seq %d (%s) was granted token %s at %d",
				$r->{instance}, $r->{client}, $r->{seq}, $r->{token},
				$r->{start}, $r->{end}, $r->{end} - $g->{grant},
				$g->{client}, $g->{seq}, $g->{outcome}, $g->{token}, $g->{grant});
		}
	}
	# 4. bounded waits
	my $commit_bound = $ZkChaos::SESSION_TIMEOUT + $ZkChaos::CONNECT_TIMEOUT + $ZkChaos::MARGIN;
	# an acquire ends by its timeout, or by 08006 after connect_timeout
	my $acquire_timeout = $p{acquire_timeout} // $ZkChaos::ACQUIRE_TIMEOUT;
	my $acquire_bound = ($acquire_timeout > $ZkChaos::CONNECT_TIMEOUT
		? $acquire_timeout : $ZkChaos::CONNECT_TIMEOUT) + $ZkChaos::MARGIN;
	my ($hangs, $max_sec, $max_com) = (0, 0, 0);
	foreach my $t (@txns)
	{
		$max_sec = $t->{t_sec} if ($t->{t_sec} || 0) > $max_sec;
		$max_com = $t->{t_com} if ($t->{t_com} || 0) > $max_com;
		if ($t->{outcome} =~ /^hang/)
		{
			$hangs++;
			push @v, "$t->{client} seq $t->{seq}: $t->{outcome} ($t->{msg})";
		}
		elsif (($t->{t_com} || 0) > $commit_bound)
		{
			push @v, "$t->{client} seq $t->{seq}: COMMIT took $t->{t_com}s (> ${commit_bound}s)";
		}
		elsif (($t->{t_sec} || 0) > $acquire_bound)
		{
			push @v, "$t->{client} seq $t->{seq}: the acquire took $t->{t_sec}s (> ${acquire_bound}s)";
		}
	}

	return (\@v, $hangs, $max_sec, $max_com);
}

package ZkChaos::Run;

use strict;
use warnings;
use Carp;
use POSIX ();
use Time::HiRes qw(time sleep);

sub scenario { return $_[0]->{scenario}; }
sub resource { return $_[0]->{resource}; }
sub nodes    { return $_[0]->{chaos}->nodes; }

# Seconds since the run started.
sub elapsed { return time() - $_[0]->{t0}; }


# Sleep until $secs into the run (no-op if already past).
sub sleep_until
{
	my ($self, $secs) = @_;
	my $d = $self->{t0} + $secs - time();
	sleep($d) if $d > 0;
	return;
}

# Mark the start of a fault (time-stamped, counted).
sub fault_begin
{
	my ($self, $desc) = @_;
	my $f = { desc => $desc, begin => time() };
	push @{ $self->{faults} }, $f;
	Test::More::note(sprintf("scenario %s: fault at +%.2fs: %s",
			$self->{scenario}, $self->elapsed, $desc));
	return $f;
}

# Mark the end of the last fault (the system is whole again: servers back,
# instance accepting connections).
sub fault_end
{
	my ($self) = @_;
	my $f = $self->{faults}[-1] or croak "no fault begun";
	$f->{end} = time();
	Test::More::note(sprintf("scenario %s: fault over at +%.2fs (%.2fs): %s",
			$self->{scenario}, $self->elapsed, $f->{end} - $f->{begin},
			$f->{desc}));
	return;
}

sub fault_count { return scalar @{ $_[0]->{faults} }; }

# A holder across a fault: pin($node) opens a session on $node that takes
# the lock through chaos_section (as client pinned_<node>, so its row is in
# the history like any other) and keeps its transaction open.  Then
# pin_commit_send sends its COMMIT and pin_commit_wait collects the outcome
# (bounded), which the checker then holds against the history.  Returns the
# pin, or undef (and fails a test) if the lock could not be taken.
sub pin
{
	my ($self, $node) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $name = 'pinned_' . $node->name;
	my $seq = ++$self->{pin_seq};
	my $s = ZkLockTest::zk_session($node, "chaos_$name");
	$s->query_ok('BEGIN');
	my $t0 = time();
	my $r = $s->query(
		sprintf("SELECT chaos_section('%s', '%s', '%s', '%s', %d, '30 s')",
			$self->{scenario}, $self->{resource}, $node->name, $name, $seq),
		45);
	my $ok = !$r->{exited} && $r->{sqlstate} eq '00000' && $r->{out} =~ /^(\d+) (\d+)$/;
	my ($token, $grant) = $ok ? ($1, $2) : ('', '');
	Test::More::ok($ok, "$self->{scenario}: $name holds the lock")
	  or Test::More::diag(Test::More::explain($r));
	if (!$ok)
	{
		$s->kill_client('KILL');
		push @{ $self->{extra_txns} },
		  { client => $name, seq => $seq, t0 => $t0, outcome => 'acquire_error',
			token => '', t_sec => '', t_com => '', msg => $r->{err} };
		return undef;
	}
	Test::More::note(sprintf("scenario %s: %s holds the lock (token %s) at +%.2fs",
			$self->{scenario}, $name, $token, $grant / 1e6 - $self->{t0}));
	return { s => $s, client => $name, seq => $seq, t0 => $t0, token => $token,
		grant => $grant };
}

sub pin_commit_send
{
	my ($self, $pin) = @_;
	return unless $pin;
	$pin->{commit_sent} = time();
	$pin->{s}->send('COMMIT');
	Test::More::note(sprintf("scenario %s: %s sends COMMIT at +%.2fs",
			$self->{scenario}, $pin->{client}, $self->elapsed));
	return;
}

# The pinned holder's backend was killed (kill -9, pg_terminate_backend,
# shutdown): it never sent COMMIT, so it must have no row.
sub pin_killed
{
	my ($self, $pin, $how) = @_;
	return unless $pin;
	push @{ $self->{extra_txns} },
	  {
		client  => $pin->{client},
		seq     => $pin->{seq},
		t0      => $pin->{t0},
		outcome => 'killed',
		token   => $pin->{token},
		grant   => $pin->{grant},
		t_sec   => '',
		t_com   => '',
		msg     => $how // ''
	  };
	$pin->{s}->kill_client('KILL');
	$pin->{outcome} = 'killed';
	return;
}

# Returns the outcome: commit, fenced (55P03), commit_error:<state>,
# conn_lost:commit, hang:commit.
sub pin_commit_wait
{
	my ($self, $pin) = @_;
	return '' unless $pin;
	my $bound = $ZkChaos::SESSION_TIMEOUT + $ZkChaos::CONNECT_TIMEOUT + $ZkChaos::MARGIN;
	my $r = $pin->{s}->wait($bound + 20);
	my $secs = time() - $pin->{commit_sent};
	my $outcome;
	if (!defined $r) { $outcome = 'hang:commit'; }
	elsif ($r->{exited}) { $outcome = 'conn_lost:commit'; }
	elsif ($r->{sqlstate} eq '00000') { $outcome = 'commit'; }
	elsif ($r->{sqlstate} eq '55P03') { $outcome = 'fenced'; }
	else { $outcome = "commit_error:$r->{sqlstate}"; }
	my ($msg) = defined $r ? $r->{err} =~ /(ERROR:[^\n]*)/ : ();
	$msg //= '';
	push @{ $self->{extra_txns} },
	  {
		client  => $pin->{client},
		seq     => $pin->{seq},
		t0      => $pin->{t0},
		outcome => $outcome,
		token   => $pin->{token},
		grant   => $pin->{grant},
		t_sec   => '',
		t_com   => sprintf('%.3f', $secs),
		msg     => $msg
	  };
	Test::More::note(sprintf("scenario %s: %s: COMMIT -> %s after %.2fs %s",
			$self->{scenario}, $pin->{client}, $outcome, $secs, $msg));
	if (defined $r) { $pin->{s}->quit; } else { $pin->{s}->kill_client('KILL'); }
	$pin->{outcome} = $outcome;
	$pin->{commit_secs} = $secs;
	return $outcome;
}

# The figures of a stall or partition of one instance, from the checker's
# result ($res = $run->check): when another instance ($p{other}) was first
# granted the lock after the fault began, and when the last commit of the
# cut instance ($p{cut}) of a section granted before that grant landed;
# both relative to the start of the fault ($p{fault}, from fault_begin;
# default the first), on the one clock of the history.  Prints them;
# returns { other_grant => s, last_commit => s or undef } (seconds after the
# fault began).
sub fault_figures
{
	my ($self, $res, %p) = @_;
	my $f = $p{fault} // $self->{faults}[0];
	my ($cut, $other) = ($p{cut}->name, $p{other}->name);
	my $f0 = $f->{begin} * 1e6;
	my $inst = sub {
		my ($c) = @_;
		return $c =~ /^pinned_(.*)$/ ? $1 : ($c =~ s/_c\d+$//r);
	};
	# every grant: committed sections (rows) and the clients' logs
	my $first;
	foreach my $g ((map { [ $_->{instance}, $_->{start} ] } @{ $res->{rows} }),
		(map { [ $inst->($_->{client}), $_->{grant} ] }
			grep { ($_->{grant} // '') =~ /^\d+$/ } @{ $res->{txns} }))
	{
		next unless $g->[0] eq $other && $g->[1] > $f0;
		next if defined $p{until} && $g->[1] > $p{until} * 1e6;
		$first = $g->[1] if !defined $first || $g->[1] < $first;
	}
	my $last;
	foreach my $r (@{ $res->{rows} })
	{
		next unless $r->{instance} eq $cut && $r->{end} > $f0;
		next if defined $first && $r->{start} >= $first;
		$last = $r->{end} if !defined $last || $r->{end} > $last;
	}
	my $scn = $self->{scenario};
	my $msg = sprintf("scenario %s: fault at +%.2fs (%s): %s first granted %s; ",
		$scn, $f->{begin} - $self->{t0}, $f->{desc}, $other,
		defined $first ? sprintf('%.2fs after the fault began', ($first - $f0) / 1e6)
		: 'never (during the run)');
	if (!defined $last)
	{
		$msg .= "no commit of $cut landed after the fault began";
	}
	else
	{
		$msg .= sprintf("the last commit of %s (of a section granted before that) landed %.2fs after the fault began",
			$cut, ($last - $f0) / 1e6);
		$msg .= sprintf(', %.3fs AFTER %s was granted', ($last - $first) / 1e6, $other)
		  if defined $first && $last > $first;
	}
	Test::More::diag($msg);
	return {
		other_grant => defined $first ? ($first - $f0) / 1e6 : undef,
		last_commit => defined $last ? ($last - $f0) / 1e6 : undef,
	};
}

# A writer on $node (see writer_main): takes the scenario's lock as a
# session lock, then commits a write transaction every `interval` seconds
# (default 0.02) until one does not commit (it then releases and exits), or
# writer_stop.  Its transactions are in the history like a client's.
# Returns the writer once it holds the lock (bounded wait), or undef (and
# fails a test) if it could not take it.
sub writer_start
{
	my ($self, $node, %p) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $k = ++$self->{writer_seq};
	my $name = 'writer_' . $node->name . "_$k";
	my $dir = $self->{chaos}{dir};
	my $file = "$dir/$self->{scenario}.$name.log";
	my $stop2 = "$dir/$self->{scenario}.$name.stop";
	unlink $file, $stop2;
	my @cmd = (
		$^X, "-I$HERE", '-MZkChaos', '-e',
		'exit ZkChaos::client_main(@ARGV)', '--',
		'mode=writer',
		'psql=' . $node->installed_command('psql'),
		'connstr=' . $node->connstr('postgres'),
		"scenario=$self->{scenario}",
		"resource=$self->{resource}",
		'instance=' . $node->name,
		"client=$name",
		"until=$self->{until}",
		"stopfile=$self->{stopfile}",
		"stopfile2=$stop2",
		"parent=$$",
		'acquire_timeout=' . ($p{acquire_timeout} // 30),
		'interval=' . ($p{interval} // 0.02),
		"out=$file");
	my $pid = ZkChaos::_spawn(\@cmd, "$dir/$self->{scenario}.$name.stdout");
	push @client_pids, $pid;
	my $w = { name => $name, node => $node, file => $file, pid => $pid,
		stop => $stop2, writer => 1 };
	push @{ $self->{clients} }, $w;
	# wait (bounded) for the hold and a first commit
	my ($hold, $first);
	ZkLockTest::wait_until(
		sub {
			my ($t) = ZkChaos::_read_client_log($w);
			($hold) = grep { $_->{seq} == 0 } @$t;
			$first = grep { $_->{seq} > 0 } @$t;
			return ($hold && $hold->{outcome} ne 'hold') || $first
			  || waitpid($pid, POSIX::WNOHANG()) != 0;
		},
		timeout => ($p{acquire_timeout} // 30) + 15, interval => 0.05);
	my $ok = $hold && $hold->{outcome} eq 'hold' && $first;
	Test::More::ok($ok, "$self->{scenario}: $name holds the lock and writes")
	  or Test::More::diag(Test::More::explain($hold));
	return undef unless $ok;
	$w->{token} = $hold->{token};
	$w->{grant} = $hold->{grant};
	Test::More::note(sprintf("scenario %s: %s holds the lock (token %s) since +%.2fs and writes",
			$self->{scenario}, $name, $w->{token}, $w->{grant} / 1e6 - $self->{t0}));
	return $w;
}

# Stop a writer and wait (bounded) until it has exited; with wait => secs,
# first give it that long to end by itself (its lock lost).  Returns
# { commits, last (its last transaction), by_itself, end => its END line }.
sub writer_stop
{
	my ($self, $w, %p) = @_;
	return undef unless $w;
	my $by_itself = 0;
	if ($p{wait})
	{
		$by_itself = ZkLockTest::wait_until(
			sub { return waitpid($w->{pid}, POSIX::WNOHANG()) != 0; },
			timeout => $p{wait}, interval => 0.05);
		$w->{status} = $? if $by_itself;
	}
	if (open(my $fh, '>', $w->{stop})) { close($fh); }
	my $deadline = time() + $ZkChaos::STATEMENT_BOUND * 3 + 30;
	while (!$by_itself && waitpid($w->{pid}, POSIX::WNOHANG()) == 0)
	{
		if (time() >= $deadline)
		{
			Test::More::diag("writer $w->{name} still running; killing it");
			kill('KILL', $w->{pid});
			waitpid($w->{pid}, 0);
			$w->{killed} = 1;
			last;
		}
		sleep(0.05);
	}
	$w->{status} = $? unless $by_itself;
	$w->{done} = 1;
	my ($t, $end) = ZkChaos::_read_client_log($w);
	my @x = grep { $_->{seq} > 0 } @$t;
	my $r = { commits => scalar(grep { $_->{outcome} eq 'commit' } @x),
		last => $x[-1], end => $end, by_itself => $by_itself };
	Test::More::note(sprintf("scenario %s: %s %s: %d commits; its last transaction: %s %s",
			$self->{scenario}, $w->{name},
			$by_itself ? 'ended by itself' : 'was stopped', $r->{commits},
			$r->{last} ? $r->{last}{outcome} : '-', $r->{last} ? $r->{last}{msg} : ''));
	return $r;
}

# Stop the load: once the scenario's duration is over and the last fault
# has been over for `settle` seconds (so that the load surely went on after
# it), tell the clients to stop; then wait (bounded) for every client
# process to end, killing those that overrun.
sub finish
{
	my ($self) = @_;
	return if $self->{finished};
	my $stop_at = $self->{t0} + $self->{duration};
	foreach my $f (@{ $self->{faults} })
	{
		my $e = ($f->{end} // $f->{begin}) + $self->{settle};
		$stop_at = $e if $e > $stop_at;
	}
	$stop_at = $self->{until} if $stop_at > $self->{until};
	my $d = $stop_at - time();
	sleep($d) if $d > 0;
	if (open(my $fh, '>', $self->{stopfile})) { close($fh); }
	$self->{stopped} = time();
	Test::More::note(sprintf("scenario %s: clients told to stop at +%.2fs",
			$self->{scenario}, $self->elapsed));
	my $deadline = time() + $ZkChaos::STATEMENT_BOUND * 3 + 30;
	foreach my $c (@{ $self->{clients} })
	{
		if ($c->{writer})
		{
			$self->writer_stop($c) unless $c->{done};
			next;
		}
		while (1)
		{
			my $r = waitpid($c->{pid}, POSIX::WNOHANG());
			if ($r == $c->{pid} || $r == -1)
			{
				$c->{status} = $?;
				last;
			}
			if (time() >= $deadline)
			{
				Test::More::diag("client $c->{name} still running; killing it");
				kill('KILL', $c->{pid});
				waitpid($c->{pid}, 0);
				$c->{killed} = 1;
				last;
			}
			sleep(0.1);
		}
	}
	$self->{finished} = time();
	return;
}

# Read the history of the scenario from every instance: rows sorted by start.
sub history
{
	my ($self) = @_;
	my @rows;
	my $scn = $self->{scenario};
	foreach my $node ($self->nodes)
	{
		my $out = $node->safe_psql('postgres',
			    "SELECT token, instance, client, seq,"
			  . " (extract(epoch FROM t_start) * 1000000)::bigint,"
			  . " (extract(epoch FROM t_end) * 1000000)::bigint,"
			  . " (extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000000)::bigint"
			  . " FROM chaos_history WHERE scenario = '$scn'",
			timeout => 60);
		foreach my $line (split /\n/, $out)
		{
			my ($token, $inst, $client, $seq, $s, $e, $c) = split /\|/, $line;
			# The section is held from the grant (start) until the commit
			# record is written (the commit timestamp, taken after the
			# commit fence and before the release): that whole span must
			# be exclusive.
			push @rows,
			  {
				token    => $token,
				instance => $inst,
				client   => $client,
				seq      => $seq,
				start    => $s,
				t_end    => $e,
				end      => (defined $c && $c ne '') ? $c : $e,
			  };
		}
	}
	return sort { $a->{start} <=> $b->{start} || $a->{end} <=> $b->{end} } @rows;
}

# The checker.  Returns a hash of figures; makes the TAP assertions:
#   min_sections  => committed sections needed in all (default 40)
#   min_after     => committed sections needed on each instance after the
#                    last fault ended (default 5)
sub check
{
	my ($self, %p) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $scn = $self->{scenario};
	my $min_sections = $p{min_sections} // 40;
	my $min_after = $p{min_after} // 5;
	my @nodes = $self->nodes;

	$self->finish;

	# every instance up and connected before we read
	foreach my $node (@nodes)
	{
		Test::More::ok(ZkChaos::wait_node_ready($node, 60),
			"$scn: " . $node->name . ' is up and connected at the end');
	}

	my @rows = $self->history;
	my (@txns, %ends);
	foreach my $c (@{ $self->{clients} })
	{
		my ($t, $end) = ZkChaos::_read_client_log($c);
		push @txns, @$t;
		$ends{ $c->{name} } = $end;
		Test::More::diag("$scn: client $c->{name} did not finish its loop")
		  unless defined $end;
	}
	push @txns, @{ $self->{extra_txns} // [] };

	my %killed = map { ($_->{name} => 1) } grep { $_->{killed} } @{ $self->{clients} };
	my ($vref, $hangs, $max_sec, $max_com) =
	  ZkChaos::judge(rows => \@rows, txns => \@txns, killed => \%killed,
		acquire_timeout => $self->{chaos}{acquire_timeout});
	my @v = @$vref;

	# figures
	my %outcomes;
	$outcomes{ $_->{outcome} =~ s/:.*//r }++ for @txns;
	my %detail;
	$detail{ $_->{outcome} }++ for @txns;
	my $errors = grep { $_->{outcome} ne 'commit' && $_->{outcome} ne 'hold' } @txns;
	my $sections = scalar @rows;
	my $last_end = 0;
	foreach my $f (@{ $self->{faults} })
	{
		my $e = $f->{end} // $f->{begin};
		$last_end = $e if $e > $last_end;
	}
	my %after;
	$after{ $_->{instance} }++
	  for grep { $_->{start} / 1e6 > $last_end } @rows;
	my $n_after = 0;
	$n_after += $_ for values %after;
	my %per_inst;
	$per_inst{ $_->{instance} }++ for @rows;

	# the longest gap without a committed section (the outage as the load saw it)
	my ($gap, $gap_at, $gap_i) = (0, 0, 0);
	for my $i (1 .. $#rows)
	{
		my $g = ($rows[$i]{start} - $rows[ $i - 1 ]{end}) / 1e6;
		($gap, $gap_at, $gap_i) = ($g, $rows[ $i - 1 ]{end} / 1e6 - $self->{t0}, $i)
		  if $g > $gap;
	}
	my $gap_who = $gap_i
	  ? "$rows[$gap_i - 1]{client}#$rows[$gap_i - 1]{seq} .. $rows[$gap_i]{client}#$rows[$gap_i]{seq}"
	  : '';

	# keep the history for a post-mortem
	if (open(my $fh, '>', "$self->{chaos}{dir}/$scn.history"))
	{
		print $fh join("\t", qw(start_us commit_us end_us token instance client seq)), "\n";
		print $fh join("\t", @$_{qw(start end t_end token instance client seq)}), "\n"
		  for @rows;
		close($fh);
	}

	my $violations = scalar @v;
	Test::More::diag(sprintf(
			"scenario %s: sections=%d errors=%d faults=%d violations=%d",
			$scn, $sections, $errors, $self->fault_count, $violations));
	Test::More::note(sprintf(
			"scenario %s: per instance %s; after the last fault %s; outcomes %s;"
			  . " longest gap %.2fs at +%.2fs (%s); longest acquire %.2fs, commit %.2fs",
			$scn,
			join(',', map { "$_=$per_inst{$_}" } sort keys %per_inst),
			join(',', map { "$_=$after{$_}" } sort keys %after),
			join(',', map { "$_=$detail{$_}" } sort keys %detail),
			$gap, $gap_at, $gap_who, $max_sec, $max_com));
	foreach my $f (@{ $self->{faults} })
	{
		Test::More::note(sprintf("scenario %s: fault +%.2fs..+%.2fs %s",
				$scn, $f->{begin} - $self->{t0},
				($f->{end} // $f->{begin}) - $self->{t0}, $f->{desc}));
	}
	my $shown = 0;
	foreach my $m (@v)
	{
		Test::More::diag("scenario $scn: VIOLATION $m");
		last if ++$shown >= 20;
	}

	Test::More::is($violations, 0, "$scn: no violation (overlap, token order, lost commit, hang)");
	Test::More::is($hangs, 0, "$scn: no statement hung");
	Test::More::cmp_ok($sections, '>=', $min_sections,
		"$scn: at least $min_sections sections committed");
	Test::More::ok($self->fault_count > 0, "$scn: faults were injected");
	foreach my $node (@nodes)
	{
		my $n = $after{ $node->name } // 0;
		# (a node without clients has only the test's pinned holders)
		next unless grep { $_->{node} == $node && !$_->{writer} } @{ $self->{clients} };
		Test::More::cmp_ok($n, '>=', $min_after,
			"$scn: " . $node->name . " committed at least $min_after sections after the last fault");
	}

	# nothing left behind
	# (a lock on a/b also takes a SHARED node on a: look under the root)
	Test::More::ok(ZkLockTest::zk_wait_no_locks(ZkLockTest::zk_root(), 20),
		"$scn: no lock node left under the root");
	foreach my $node (@nodes)
	{
		my $last = '';
		my $ok = ZkLockTest::wait_until(
			sub {
				my $out = ZkChaos::try_psql($node,
					'SELECT count(*) FROM zk_lock_local');
				$last = $out // '?';
				return defined $out && $out eq '0';
			},
			timeout => 20, interval => 0.2);
		Test::More::ok($ok, "$scn: no local entry left on " . $node->name)
		  or Test::More::diag(ZkChaos::try_psql($node, 'SELECT * FROM zk_lock_local') // '');
	}

	return {
		sections   => $sections,
		errors     => $errors,
		faults     => $self->fault_count,
		violations => $violations,
		after      => \%after,
		outcomes   => \%detail,
		rows       => \@rows,
		txns       => \@txns,
		gap        => $gap,
	};
}

# ===========================================================================

# The verdict of one stall or partition round on the cut instance: a writer
# ($writer) must stop by itself with its last COMMIT fenced (55P03); a pinned
# holder ($pin) must be fenced.
sub round_verdict
{
	my ($self, $round, $how, %p) = @_;
	my $scn = $self->scenario;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	if ($p{writer})
	{
		my $r = $self->writer_stop($p{writer},
			wait => $ZkChaos::SESSION_TIMEOUT + $ZkChaos::CONNECT_TIMEOUT + 20);
		Test::More::ok($r->{by_itself},
			"$scn: round $round ($how): the writer stops by itself (its lock lost)");
		Test::More::is($r->{last} ? $r->{last}{outcome} : '', 'fenced',
			"$scn: round $round ($how): ... its last COMMIT fails with 55P03");
	}
	else
	{
		Test::More::is($self->pin_commit_wait($p{pin}), 'fenced',
			"$scn: round $round ($how): node1's holder cannot commit after node2 was granted (55P03)");
	}
	return;
}

# After check(): for each of the first $n faults, no commit of $cut landed
# after $other was first granted during that fault.
sub no_commit_after_grant
{
	my ($self, $res, $cut, $other, $n) = @_;
	my $scn = $self->scenario;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	foreach my $i (0 .. $n - 1)
	{
		my $f = $self->{faults}[$i];
		my $next = $self->{faults}[ $i + 1 ];
		my $fig = $self->fault_figures($res, fault => $f, cut => $cut, other => $other,
			until => $next ? $next->{begin} : undef);
		Test::More::ok(!defined $fig->{last_commit} || !defined $fig->{other_grant}
			  || $fig->{last_commit} < $fig->{other_grant},
			"$scn: round " . ($i + 1) . ": no commit of node1 landed after node2 was granted");
	}
	return;
}

package ZkChaos::Proxy;

# A TCP proxy the test owns (test/zk_proxy.py, one process), with named
# links LISTEN -> TARGET on 127.0.0.1, each of which can be cut (bytes
# swallowed both ways, sockets left open: a partition, not a reset) and
# healed (connections that lost bytes are closed then; new ones forward):
#
#   my $px = ZkChaos::Proxy->start(links => [ [ 'zk', $listen, $target ] ]);
#   $px->cut('zk');  ...  $px->heal('zk');   $px->status;   $px->stop;
#
# It exits when the test process is gone, after max_seconds (default 900),
# or when stopped; its log is tmp_check/log/<test>_zk_proxy.log.
# await_target => S: a connection whose target refuses is held and the
# target tried again for S seconds, instead of being closed at once (see
# zk_proxy.py; for quorum links, where a learner may connect before its
# leader listens).  heal leaves such a connection held; cut turns it into
# one made during the cut.

use strict;
use warnings;
use Carp;
use IO::Select;
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(time sleep);

sub start
{
	my ($class, %p) = @_;
	no warnings 'once';
	my $ctl = $p{control} // PostgreSQL::Test::Cluster::get_free_port();
	my $log = $p{log}
	  // "$PostgreSQL::Test::Utils::log_path/" . ZkLockTest::zk_test_name() . '_zk_proxy.log';
	my $python = $ENV{ZKLOCK_TEST_PYTHON} || '/usr/bin/python3';
	my @cmd = (
		$python, "$HERE/zk_proxy.py",
		'--control', $ctl, '--owner-pid', $$,
		'--max-seconds', $p{max_seconds} // 900,
		($p{await_target} ? ('--await-target', $p{await_target}) : ()),
		'--log', $log,
		map { ('--link', "$_->[0]=$_->[1]:$_->[2]") } @{ $p{links} });
	my $pid = ZkChaos::_spawn(\@cmd, $log);
	push @ZkChaos::proxy_pids, $pid;
	my $self = bless { pid => $pid, control => $ctl, log => $log,
		links => { map { ($_->[0] => $_) } @{ $p{links} } } }, $class;
	my $ok = ZkLockTest::wait_until(
		sub {
			croak "zk_proxy.py exited at start; see $log"
			  if waitpid($pid, POSIX::WNOHANG()) == $pid;
			return defined eval { $self->command('status', 2) };
		},
		timeout => 10, interval => 0.1);
	croak "zk_proxy.py does not answer on port $ctl; see $log" unless $ok;
	Test::More::note("zk_proxy.py (pid $pid) control port $ctl: "
		  . join(', ', map { "$_->[0] $_->[1]->$_->[2]" } @{ $p{links} }));
	return $self;
}

# The port a link listens on.
sub port { return $_[0]->{links}{ $_[1] }[1] // croak "no link $_[1]"; }

# Send one control line; returns the answer's lines before "ok", dies on
# "error: ..." or no answer within $timeout seconds (default 5).
sub command
{
	my ($self, $line, $timeout) = @_;
	$timeout //= 5;
	my $deadline = time() + $timeout;
	my $sock = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $self->{control},
		Proto    => 'tcp',
		Timeout  => $timeout) or croak "zk_proxy control: $!";
	syswrite($sock, "$line\n");
	my $sel = IO::Select->new($sock);
	my $buf = '';
	while (1)
	{
		my $left = $deadline - time();
		croak "zk_proxy control: no answer to '$line'" if $left <= 0;
		next unless $sel->can_read($left);
		my $r = sysread($sock, $buf, 65536, length $buf);
		last if !defined $r || $r == 0;
	}
	close($sock);
	my @lines = split /\n/, $buf;
	my $last = pop @lines // '';
	croak "zk_proxy control: '$line': " . ($last || 'no answer') if $last ne 'ok';
	return join("\n", grep { $_ ne '' } @lines);
}

sub cut
{
	my ($self, $link) = @_;
	$self->command("cut $link");
	Test::More::note("zk_proxy: $link cut");
	return;
}

sub heal
{
	my ($self, $link, $keep) = @_;
	$self->command("heal $link" . ($keep ? ' keep' : ''));
	Test::More::note("zk_proxy: $link healed");
	return;
}

# Handshakes only (zk_proxy.py's "flap"): each connection is closed just
# after ZooKeeper answered its handshake; heal() ends it.
sub flap
{
	my ($self, $link) = @_;
	$self->command("flap $link");
	Test::More::note("zk_proxy: $link flapping");
	return;
}

sub status { return $_[0]->command('status'); }

sub stop
{
	my ($self) = @_;
	eval { $self->command('quit', 2); };
	my $deadline = time() + 5;
	sleep(0.05) while waitpid($self->{pid}, POSIX::WNOHANG()) == 0 && time() < $deadline;
	if (waitpid($self->{pid}, POSIX::WNOHANG()) == 0)
	{
		kill('KILL', $self->{pid});
		waitpid($self->{pid}, 0);
	}
	return;
}

1;
