
# ZkLockTest.pm -- helpers for zklock's TAP tests.
#
# A test file does
#
#   use FindBin;
#   use lib "$FindBin::RealBin/..";
#   use ZkLockTest;
#   use Test::More;
#
#   my $hosts = zk_start();                 # or zk_start(servers => 3)
#   my $node1 = zk_node('node1');           # PostgreSQL with zklock, started,
#   my $node2 = zk_node('node2');           # CREATE EXTENSION done, connected
#   my $s = zk_session($node1, 'holder');   # a psql session we drive
#   $s->query_ok('BEGIN');
#   $s->query_ok(q{SELECT zk_lock_acquire('a/b')});
#   is(zk_count_locks(zk_path('a/b')), 1, 'one lock node');
#   ...
#   zk_done_check();                        # no lock node left under the root
#   done_testing();
#
# ZooKeeper runs from test/zk_server.sh in a temporary directory under the
# TAP tmp_check directory (kept when a test fails), on ports reserved with
# PostgreSQL::Test::Cluster::get_free_port, and is stopped in an END block
# (after the PostgreSQL nodes made by zk_node).  zk_server.sh also gets
# --owner-pid, so the servers go away even if the test is killed hard.
#
# Every helper that waits is bounded; none polls forever.
#
# Running the suite (PostgreSQL refuses to run as root, so as an
# unprivileged user, e.g. postgres, from a tree that user can write to, with
# the extension installed):
#
#   cd <tree>/test
#   runuser -u postgres -- env \
#       PATH=/usr/lib/postgresql/15/bin:/usr/bin:/bin \
#       PERL5LIB=/usr/lib/postgresql/15/lib/pgxs/src/test/perl \
#       (or another major's bin and lib/pgxs, e.g. /var/cache/zklock/pg18)
#       prove t/*/*.pl
#
# (`prove t/` finds nothing: the files end in .pl.)  Output and logs go to
# ./tmp_check (regress_log_*, the nodes' server logs in tmp_check/log, and
# ZooKeeper's files and logs in tmp_check/zk_XXXX, kept when a test fails).
# PG_REGRESS is found through pg_config when not set.  Python with kazoo is
# /usr/bin/python3 unless ZKLOCK_TEST_PYTHON says otherwise.

package ZkLockTest;

use strict;
use warnings;

use Carp;
use Cwd qw(abs_path);
use Exporter 'import';
use File::Basename qw(basename dirname);
use File::Path ();
use IPC::Run;
use Time::HiRes qw(time sleep);

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(
  zk_start zk_stop zk_hosts zk_dir zk_root zk_path zk_server zk_test_name
  zk_node zk_session
  zkutil zk_count_locks zk_lock_nodes zk_lock_info zk_list_znodes
  zk_wait_count zk_wait_no_locks zk_done_check zk_wait_connected
  zk_revoke_across zk_mntr
  wait_until wait_for_waiting wait_for_queued is_waiting psql1
  is_worker_watches
);

my $HERE      = dirname(abs_path(__FILE__));
my $ZK_SERVER = "$HERE/zk_server.sh";
my $ZKUTIL    = "$HERE/zkutil.py";
my $PYTHON    = $ENV{ZKLOCK_TEST_PYTHON} || '/usr/bin/python3';

# PostgreSQL::Test::Cluster->init runs "$PG_REGRESS --config-auth"; PGXS's
# prove_installcheck sets PG_REGRESS, a plain prove does not.
if (!$ENV{PG_REGRESS})
{
	my $pg_config = $ENV{PG_CONFIG} || 'pg_config';
	my $pgxs = `$pg_config --pgxs 2>/dev/null`;
	chomp $pgxs;
	# Debian's layout, when no pg_config is in PATH: the newest major
	my ($debian) = reverse sort { ($a =~ m{/(\d+)/bin})[0] <=> ($b =~ m{/(\d+)/bin})[0] }
	  glob('/usr/lib/postgresql/*/bin/pg_config');
	if ($pgxs eq '' && defined $debian)
	{
		$pgxs = `$debian --pgxs`;
		chomp $pgxs;
	}
	# .../lib/pgxs/src/makefiles/pgxs.mk -> .../lib/pgxs/src/test/regress/pg_regress
	my $pg_regress = dirname(dirname($pgxs)) . '/test/regress/pg_regress';
	$ENV{PG_REGRESS} = $pg_regress if -x $pg_regress;
}

# Seconds the extension may take to connect its worker to ZooKeeper.
our $CONNECT_TIMEOUT = 30;

my $test_name = basename($0);
$test_name =~ s/\.[^.]+$//;
$test_name =~ s/[^A-Za-z0-9_]/_/g;

my ($zk_dir, $zk_hosts, $zk_servers);
my $zk_root = "/zklock_$test_name";
my @nodes;       # PostgreSQL::Test::Cluster objects made by zk_node
my @sessions;    # ZkLockTest::Session objects, to clean up at the end

sub zk_test_name { return $test_name; }

# The zklock.root used by zk_node (unless told otherwise).
sub zk_root { return $zk_root; }

# The znode of a resource: zk_path('mx/one') = '/zklock_<test>/mx/one'.
sub zk_path
{
	my ($resource) = @_;
	return $zk_root unless defined $resource && $resource ne '';
	return "$zk_root/$resource";
}

sub zk_hosts { return $zk_hosts; }
sub zk_server_count { return $zk_servers; }
sub zk_dir   { return $zk_dir; }

# Run zk_server.sh with the given arguments (the data directory is added
# after the command: zk_server('kill', 2) runs "zk_server.sh kill <dir> 2").
# Returns (exit status, stdout, stderr) in list context, stdout in scalar
# context.
sub zk_server
{
	my ($cmd, @args) = @_;
	croak "ZooKeeper not started" unless defined $zk_dir;
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run([ $ZK_SERVER, $cmd, $zk_dir, @args ],
			'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(90));
		1;
	};
	my $rc = $ok ? $? >> 8 : -1;
	$err .= "\n(timed out: $@)" unless $ok;
	note "zk_server.sh $cmd @args: rc=$rc\n$out$err";
	chomp $out;
	return wantarray ? ($rc, $out, $err) : $out;
}

# Start ZooKeeper: zk_start(servers => 1|3).  Returns the connect string.
# BAIL_OUTs when the servers do not come up.  Options for the chaos tests:
#   ports     => [...]  the ports (as zk_server.sh --ports; default: free ones)
#   args      => [...]  more zk_server.sh start options (e.g. --quorum-via)
#   tick_time => ms     ZooKeeper's tickTime (default zk_server.sh's, 200)
#   tls_only  => DIR    no plain port: zk_server.sh --tls-only DIR (with
#                       args' --extra-config naming secureClientPort), the
#                       connect string is the secure port's, and zkutil.py
#                       (the inspection helpers) connects over TLS with
#                       test/tls_certs.sh's DIR (ZKUTIL_TLS)
sub zk_start
{
	my (%p) = @_;
	my $servers = $p{servers} || 1;
	croak "ZooKeeper already started" if defined $zk_dir;
	BAIL_OUT("run the TAP tests as an unprivileged user (PostgreSQL refuses root)")
	  if $> == 0;
	croak "servers must be 1 or 3" unless $servers == 1 || $servers == 3;

	my $dir = PostgreSQL::Test::Utils::tempdir('zk');
	my $nports = $servers == 1 ? 1 : 9;
	my @ports = $p{ports} ? @{ $p{ports} }
	  : map { PostgreSQL::Test::Cluster::get_free_port() } 1 .. $nports;

	$zk_dir     = $dir;
	$zk_servers = $servers;
	# (empty: zk_server.sh's default)
	local $ENV{ZK_TICK_TIME} = $p{tick_time} // $ENV{ZK_TICK_TIME};
	my ($rc, $out, $err) = zk_server(
		'start', '--servers', $servers,
		'--ports', join(',', @ports),
		'--owner-pid', $$, @{ $p{args} // [] },
		$p{tls_only} ? ('--tls-only', $p{tls_only}) : ());
	$ENV{ZKUTIL_TLS} = $p{tls_only} if $p{tls_only};
	if ($rc != 0 || $out !~ /^127\.0\.0\.1:\d+/)
	{
		diag("zk_server.sh start failed (rc $rc):\n$err");
		BAIL_OUT("could not start ZooKeeper");
	}
	($zk_hosts) = $out =~ /^(\S+)\s*\z/m;
	note "ZooKeeper ($servers server(s)) at $zk_hosts, files in $zk_dir";
	return $zk_hosts;
}

sub zk_stop
{
	return unless defined $zk_dir;
	zk_server('stop');
	return;
}

END
{
	my $exit_code = $?;

	foreach my $s (@sessions)
	{
		eval { $s->_kill; };
	}
	# Stop PostgreSQL first so that its workers do not spend the teardown
	# reconnecting to a vanished ZooKeeper; Cluster's own END block then has
	# nothing left to stop.
	# (fail_ok: a node that crashed must not BAIL_OUT here, which would
	# skip stopping the other nodes and ZooKeeper)
	foreach my $node (@nodes)
	{
		eval { $node->stop('immediate', fail_ok => 1); };
	}
	if (defined $zk_dir)
	{
		system($ZK_SERVER, 'stop', $zk_dir);
	}

	$? = $exit_code;
}

# ---------------------------------------------------------------------------
# PostgreSQL nodes

# zk_node($name, %opts): a PostgreSQL::Test::Cluster with zklock preloaded
# and pointed at our ZooKeeper, started, with CREATE EXTENSION zklock done,
# and its worker connected (bounded wait).
#
# Options:
#   root        => zklock.root (default zk_root()); undef to leave it unset
#   node_name   => zklock.node_name (default $name)
#   session_timeout => (default '4s')
#   lease_margin => zklock.lease_margin (default '500ms': the test
#                   ZooKeeper's tickTime is 200 ms; see doc/safety.md)
#   hosts       => zklock.hosts (default zk_hosts())
#   extra_conf  => more postgresql.conf lines
#   start       => 0 to only init and configure
#   install_path => another PostgreSQL installation (with its own zklock)
sub zk_node
{
	my ($name, %opts) = @_;
	croak "start ZooKeeper first (zk_start)" unless defined $zk_hosts;

	my $root = exists $opts{root} ? $opts{root} : $zk_root;
	my $node_name = $opts{node_name} // $name;
	my $timeout = $opts{session_timeout} // '4s';
	my $margin = $opts{lease_margin} // '500ms';
	my $hosts = $opts{hosts} // $zk_hosts;

	# A previous run of this test file may have left its node's directory
	# behind (kept on failure); Cluster->new refuses to reuse it.
	my $raw_test_name = basename($0);
	$raw_test_name =~ s/\.[^.]+$//;
	my $stale = "$PostgreSQL::Test::Utils::tmp_check/t_${raw_test_name}_${name}_data";
	File::Path::rmtree($stale) if -d $stale;

	my $node = PostgreSQL::Test::Cluster->new($name,
		defined $opts{install_path} ? (install_path => $opts{install_path}) : ());
	$node->init;
	my $conf = <<"EOC";
shared_preload_libraries = 'zklock'
zklock.hosts = '$hosts'
zklock.session_timeout = '$timeout'
zklock.lease_margin = '$margin'
zklock.node_name = '$node_name'
max_connections = 50
log_line_prefix = '%m [%p] %q%a '
log_min_messages = info
EOC
	$conf .= "zklock.root = '$root'\n" if defined $root;
	$conf .= $opts{extra_conf} . "\n" if defined $opts{extra_conf};
	$node->append_conf('postgresql.conf', $conf);
	push @nodes, $node;

	return $node if defined $opts{start} && !$opts{start};

	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION zklock');
	zk_wait_connected($node) or BAIL_OUT("zklock worker of $name did not connect");
	return $node;
}

# Wait (bounded) until the node's zklock worker says 'connected'.
sub zk_wait_connected
{
	my ($node, $timeout) = @_;
	$timeout //= $CONNECT_TIMEOUT;
	my $last = '';
	my $ok = wait_until(
		sub {
			my ($rc, $out, $err) = $node->psql('postgres',
				'SELECT state FROM zk_lock_status', timeout => 20);
			$last = "$out $err";
			return $rc == 0 && $out eq 'connected';
		},
		timeout => $timeout,
		interval => 0.1);
	diag($node->name . ": zk_lock_status.state is not 'connected' after ${timeout}s: $last")
	  unless $ok;
	return $ok;
}

# One value from a one-row query (dies on error).
sub psql1
{
	my ($node, $sql) = @_;
	return $node->safe_psql('postgres', $sql, timeout => 60);
}

# ---------------------------------------------------------------------------
# waiting

# wait_until(sub { ... }, timeout => SECS, interval => SECS): calls the sub
# until it returns true (returns 1) or the time is up (returns 0).
sub wait_until
{
	my ($cond, %p) = @_;
	my $timeout  = $p{timeout}  // 10;
	my $interval = $p{interval} // 0.05;
	my $deadline = time() + $timeout;
	while (1)
	{
		return 1 if $cond->();
		return 0 if time() >= $deadline;
		sleep($interval);
	}
}

# Is backend $pid of $node waiting on the extension (pg_stat_activity
# wait_event_type 'Extension' while running a query)?
sub is_waiting
{
	my ($node, $pid) = @_;
	my ($rc, $out) = $node->psql('postgres',
		"SELECT wait_event_type, state FROM pg_stat_activity WHERE pid = $pid",
		timeout => 20);
	return $rc == 0 && $out eq 'Extension|active';
}

# is_worker_watches($node, $want, $name): zk_lock_status.watches of $node
# is $want within 10 s (a test).  The worker counts a watch removed once
# ZooKeeper's answer to the removal is handled, which can come after the
# server's own count (wchs, mntr) already dropped it: a single read right
# after the server's count raced it (069 failed so, got 2 for 1).
sub is_worker_watches
{
	my ($node, $want, $name) = @_;
	my $got;
	wait_until(sub { ($got = psql1($node, 'SELECT watches FROM zk_lock_status')) eq $want },
		timeout => 10);
	return Test::More::is($got, $want, $name);
}

# Wait (bounded, default 10 s) until backend $pid waits on the extension.
sub wait_for_waiting
{
	my ($node, $pid, $timeout) = @_;
	return wait_until(sub { is_waiting($node, $pid) },
		timeout => $timeout // 10, interval => 0.05);
}

# Wait (bounded, default 10 s) until backend $pid waits on the extension
# and its request is queued behind another node in ZooKeeper: a row of
# zk_lock_waits, which the worker fills only once the request's node
# exists and it found the node it waits behind.  A backend can look
# waiting before its node is created (a request with parents tries
# first); a test that builds a queue in a given order needs this.
sub wait_for_queued
{
	my ($node, $pid, $timeout) = @_;
	return wait_until(
		sub {
			return 0 unless is_waiting($node, $pid);
			my ($rc, $out) = $node->psql('postgres',
				"SELECT count(*) > 0 FROM zk_lock_waits WHERE pid = $pid",
				timeout => 20);
			return $rc == 0 && $out eq 't';
		},
		timeout => $timeout // 10,
		interval => 0.05);
}

# ---------------------------------------------------------------------------
# ZooKeeper inspection (through zkutil.py, i.e. independent of the extension)

# zkutil(@args) -> (exit status, stdout, stderr)
sub zkutil
{
	my (@args) = @_;
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run([ $PYTHON, $ZKUTIL, $zk_hosts, @args ],
			'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
		1;
	};
	return ($ok ? $? >> 8 : -1, $out, $ok ? $err : "$err$@");
}

sub _zkutil_ok
{
	my (@args) = @_;
	my ($rc, $out, $err) = zkutil(@args);
	croak "zkutil.py @args failed (rc $rc): $err" if $rc != 0;
	return $out;
}

# Number of lock nodes (name contains LOCK-) below $path (default: the root).
sub zk_count_locks
{
	my ($path) = @_;
	my $out = _zkutil_ok('count-locks', $path // $zk_root);
	chomp $out;
	return $out + 0;
}

# Lock node paths below $path, sorted by name.
sub zk_lock_nodes
{
	my ($path) = @_;
	return grep { /LOCK-[^\/]*$/ } zk_list_znodes($path);
}

# [path, czxid, ephemeralOwner] of each lock node below $path.
sub zk_lock_info
{
	my ($path) = @_;
	return map { [ split /\t/ ] }
	  split /\n/, _zkutil_ok('locks', $path // $zk_root);
}

# Every znode below $path (recursive).
sub zk_list_znodes
{
	my ($path) = @_;
	return split /\n/, _zkutil_ok('ls-r', $path // $zk_root);
}

# Wait (bounded) until exactly $n lock nodes are below $path.  Returns 1/0.
sub zk_wait_count
{
	my ($path, $n, $secs) = @_;
	$secs //= 10;
	my ($rc, $out, $err) = zkutil('wait-count', $path, $n, $secs);
	diag("waiting for $n lock node(s) under $path: $err$out") if $rc != 0;
	return $rc == 0;
}

# Wait (bounded) until no lock node is left below $path.  Returns 1/0.
sub zk_wait_no_locks
{
	my ($path, $secs) = @_;
	return zk_wait_count($path // $zk_root, 0, $secs // 10);
}

# The end-of-file check: no lock node left anywhere under the root.
sub zk_done_check
{
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	foreach my $s (@sessions)
	{
		$s->quit if $s->alive;
	}
	ok(zk_wait_no_locks($zk_root, 15), "no lock node left under $zk_root");
	return;
}

# zk_revoke_across($revoker, $label, $rnode, $hnode, $resource): a holder on
# $hnode sleeps in a transaction with the lock on $resource; zk_lock_revoke
# on $rnode (another instance) finds it, the holder is canceled (57014) and
# its lock goes.  Five checks, named after $revoker ("the $revoker
# instance") and $label (what the other instance is).
sub zk_revoke_across
{
	my ($revoker, $label, $rnode, $hnode, $resource) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $h = zk_session($hnode, "revoked_by_$revoker");
	$h->send("BEGIN; SELECT zk_lock_acquire('$resource'); SELECT pg_sleep(60);");
	ok( wait_until(
			sub {
				psql1($hnode, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $h->pid) eq 'PgSleep';
			},
			timeout => 20),
		"revocation by the $revoker instance: the holder sleeps with the lock");
	is(psql1($rnode, "SELECT zk_lock_revoke('$resource', 'cancel')"), '1',
		"zk_lock_revoke on the $revoker instance finds the other's holder");
	my $r = $h->wait(20);
	is($r && $r->{sqlstate}, '57014',
		"the holder on the $label is canceled ($revoker revoking)");
	$h->query('ROLLBACK');
	ok(zk_wait_no_locks(zk_path($resource), 20), 'and its lock is released');
	$h->quit;
	return;
}

# ---------------------------------------------------------------------------
# sessions

# zk_session($node, $name, user => ROLE, dbname => DB): a psql session we
# drive step by step.
sub zk_session
{
	my ($node, $name, %p) = @_;
	my $s = ZkLockTest::Session->new($node, $name, %p);
	push @sessions, $s;
	return $s;
}

# ZooKeeper's "mntr" of server 1 as a hash reference (name => value): its
# counters (zk_packets_received, zk_packets_sent, zk_watch_count, the
# per-namespace reads and writes, ...)
sub zk_mntr
{
	my $out = zk_server('4lw', 1, 'mntr');
	my %m = map { split /\t/, $_, 2 } grep { /\t/ } split /\n/, $out;
	return \%m;
}


package ZkLockTest::Session;

# A psql process reading our commands from a pipe.  Each command is followed
# by \echo / \warn markers carrying psql's SQLSTATE variable, so we know
# when it finished and how; a command may also be sent without waiting
# (send) and collected later (wait / done), to drive lock waiters.

use strict;
use warnings;
use Carp;
use IPC::Run;
use Test::More;
use Time::HiRes qw(time sleep);

sub new
{
	my ($class, $node, $name, %p) = @_;
	my $self = bless {
		node    => $node,
		name    => $name // 'session',
		in      => '',
		out     => '',
		err     => '',
		n       => 0,
		pending => undef,
		exited  => 0,
	}, $class;
	my @cmd = (
		$node->installed_command('psql'), '-XAtq',
		'-v', 'ON_ERROR_STOP=0',
		'-d', $node->connstr($p{dbname} // 'postgres')
		  . (defined $p{user} ? " user=$p{user}" : ''),
		'-f', '-');
	local $ENV{PGAPPNAME} = $self->{name};
	$self->{h} = IPC::Run::start(\@cmd, '<', \$self->{in}, '>',
		\$self->{out}, '2>', \$self->{err});
	$self->{pid} = $self->query_ok('SELECT pg_backend_pid()');
	return $self;
}

sub name { return $_[0]->{name}; }
sub node { return $_[0]->{node}; }
sub pid  { return $_[0]->{pid}; }

# Send a command without waiting for it; returns immediately.
sub send
{
	my ($self, $sql) = @_;
	croak "$self->{name}: previous command still pending"
	  if defined $self->{pending};
	croak "$self->{name}: psql has exited" if $self->{exited};
	my $n = ++$self->{n};
	$sql =~ s/\s+\z//;
	$sql .= ';' unless $sql =~ /;\z/ || $sql =~ /^\\/;
	note "$self->{name}: $sql";
	$self->{pending} = { n => $n, sql => $sql, sent => time() };
	$self->{in} .= "$sql\n\\echo '__ZKT_$n' :SQLSTATE\n\\warn '__ZKT_$n'\n";
	$self->_pump;
	return $n;
}

sub _pump
{
	my ($self) = @_;
	return if $self->{exited};
	my $ok = eval {
		if ($self->{h}->pumpable) { $self->{h}->pump_nb; }
		1;
	};
	if (!$ok || !$self->{h}->pumpable)
	{
		eval { $self->{h}->finish; };
		$self->{exited} = 1;
		$self->{exit_status} = $self->{h}->result(0) if $ok;
	}
	return;
}

# Has the pending command finished (or psql exited)?  Never blocks.
sub done
{
	my ($self) = @_;
	my $p = $self->{pending};
	return 1 unless defined $p;
	$self->_pump;
	my $n = $p->{n};
	return 1
	  if $self->{out} =~ /^__ZKT_$n [^\n]*\n/m
	  && $self->{err} =~ /^__ZKT_$n\n/m;
	return 1 if $self->{exited};
	return 0;
}

# Wait (bounded, default 60 s) for the pending command.  Returns a hash ref:
#   out      => stdout of the command (trailing newline removed)
#   err      => stderr of the command
#   sqlstate => psql's SQLSTATE after it ('00000' on success)
#   exited   => 1 if psql exited (e.g. backend terminated)
#   elapsed  => seconds since send
# or undef on timeout (the command stays pending).
sub wait
{
	my ($self, $timeout) = @_;
	my $p = $self->{pending};
	croak "$self->{name}: nothing pending" unless defined $p;
	my $deadline = time() + ($timeout // 60);
	while (!$self->done)
	{
		return undef if time() >= $deadline;
		sleep(0.01);
	}
	my $n = $p->{n};
	my %r = (elapsed => time() - $p->{sent}, exited => 0, sqlstate => '');
	if ($self->{out} =~ s/\A(.*?)^__ZKT_$n ([^\n]*)\n//ms)
	{
		$r{out} = $1;
		$r{sqlstate} = $2;
		$r{err} = '';
		$r{err} = $1 if $self->{err} =~ s/\A(.*?)^__ZKT_$n\n//ms;
	}
	else
	{
		$r{out} = $self->{out};
		$r{err} = $self->{err};
		$self->{out} = $self->{err} = '';
		$r{exited} = 1;
	}
	$r{out} =~ s/\n\z//;
	$self->{pending} = undef;
	note "$self->{name}: result after "
	  . sprintf('%.3f', $r{elapsed}) . "s: "
	  . join("", explain(\%r));
	return \%r;
}

# send + wait; dies on timeout.
sub query
{
	my ($self, $sql, $timeout) = @_;
	$self->send($sql);
	my $r = $self->wait($timeout // 60);
	croak "$self->{name}: timed out running: $sql" unless defined $r;
	return $r;
}

# query that must succeed; returns its output.  Dies otherwise.
sub query_ok
{
	my ($self, $sql, $timeout) = @_;
	my $r = $self->query($sql, $timeout);
	croak "$self->{name}: query failed: $sql\n"
	  . "sqlstate=$r->{sqlstate} exited=$r->{exited} err=$r->{err}"
	  if $r->{exited} || $r->{sqlstate} ne '00000' || $r->{err} =~ /ERROR|FATAL/;
	return $r->{out};
}

sub alive
{
	my ($self) = @_;
	$self->_pump;
	return !$self->{exited};
}

# Leave psql cleanly (\q); bounded.
sub quit
{
	my ($self) = @_;
	return if $self->{exited};
	$self->{in} .= "\\q\n";
	my $deadline = time() + 20;
	while ($self->alive)
	{
		if (time() >= $deadline)
		{
			$self->_kill;
			last;
		}
		sleep(0.01);
	}
	return;
}

# Kill the psql client process (default SIGKILL): the connection drops
# without a goodbye.  Waits (bounded) for psql to be gone.
sub kill_client
{
	my ($self, $sig) = @_;
	return if $self->{exited};
	$self->{h}->signal($sig // 'KILL');
	my $deadline = time() + 20;
	while ($self->alive && time() < $deadline) { sleep(0.01); }
	$self->_kill if $self->alive;
	return;
}

sub _kill
{
	my ($self) = @_;
	return if $self->{exited};
	eval { $self->{h}->kill_kill(grace => 1); };
	$self->{exited} = 1;
	return;
}


# ---------------------------------------------------------------------------
# helpers of the hunting tools (040_stress, 041_model, 042_fuzz)

package ZkLockTest;

push @EXPORT, qw(zk_session_as zk_log_crashes zk_errors_of zk_quiet_sessions
  zk_wait_log zk_log_count zk_set_failpoints);

# zk_session_as($node, $name, $role, %p): a zk_session connected as $role
# (through PGUSER), with psql's VERBOSITY verbose so that every error line
# carries its SQLSTATE (see zk_errors_of).
sub zk_session_as
{
	my ($node, $name, $role, %p) = @_;
	local $ENV{PGUSER} = $role if defined $role;
	my $s = zk_session($node, $name, %p);
	$s->query_ok('\set VERBOSITY verbose');
	return $s;
}

# The (LEVEL, SQLSTATE, message) of every ERROR/FATAL/PANIC line in psql's
# stderr of one command (VERBOSITY verbose), in order.
sub zk_errors_of
{
	my ($err) = @_;
	my @e;
	while ($err =~ /\b(ERROR|FATAL|PANIC|WARNING):\s+([0-9A-Z]{5}):\s*([^\n]*)/g)
	{
		# warnings only when they end the connection (crash of another process)
		next if $1 eq 'WARNING' && $2 ne '57P02';
		push @e, [ $1, $2, $3 ];
	}
	return @e;
}

# Lines of a node's server log (from byte $offset) that show a crash: a
# process ended by a signal, a server process that exited abnormally, a
# PANIC or a failed assertion; a background worker (zklock's) that exited
# with an error.
sub zk_log_crashes
{
	my ($node, $offset) = @_;
	my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile, $offset // 0);
	return grep {
		/terminated by signal|(server process|background worker) .*exited with exit code [1-9]|server process .*was terminated|\bPANIC\b|\bTRAP\b/
	} split /\n/, $log;
}

# zk_wait_log($node, $re, $from, $timeout): waits (at most $timeout s, 15 by
# default) until the node's server log has a line matching $re after byte
# $from; says which pattern was missing when it gives up.
sub zk_wait_log
{
	my ($node, $re, $from, $timeout) = @_;
	my $seen = wait_until(
		sub { PostgreSQL::Test::Utils::slurp_file($node->logfile, $from // 0) =~ $re },
		timeout => $timeout // 15,
		interval => 0.1);
	diag('not in the log: ' . $re) unless $seen;
	return $seen;
}

# How many times $re matches the node's server log after byte $from.
sub zk_log_count
{
	my ($node, $re, $from) = @_;
	my @m = PostgreSQL::Test::Utils::slurp_file($node->logfile, $from // 0) =~ /$re/g;
	return scalar @m;
}

# zk_wait_state($node, $want, $timeout): waits (at most $timeout s, 20 by
# default) until the node's zk_lock_status says state $want (e.g.
# auth_failed); returns whether it did, and the state and last_error seen
# last (for the test's diag and its checks of the words).
push @EXPORT, qw(zk_wait_state);
sub zk_wait_state
{
	my ($node, $want, $timeout) = @_;
	my ($state, $last) = ('', '');
	my $ok = wait_until(
		sub {
			($state, $last) = split /\|/,
			  psql1($node, q{SELECT state || '|' || coalesce(last_error, '') FROM zk_lock_status});
			$state eq $want;
		},
		timeout => $timeout // 20);
	return ($ok, $state, $last // '');
}

# zk_wait_refusals($node, $n, $timeout): waits (at most $timeout s, 40 by
# default) until the node was seen in auth_failed since $n different times
# (state_since moves on at each refused retry); true if it was.
push @EXPORT, qw(zk_wait_refusals);
sub zk_wait_refusals
{
	my ($node, $n, $timeout) = @_;
	my %since;
	return wait_until(
		sub {
			$since{ psql1($node, q{SELECT state_since FROM zk_lock_status WHERE state = 'auth_failed'}) } = 1;
			(grep { $_ ne q{} } keys %since) >= $n;
		},
		timeout => $timeout // 40);
}

# zk_set_failpoints($node, $value): sets zklock.failpoints (test builds) by
# ALTER SYSTEM and a reload; true once a new session sees the value.
sub zk_set_failpoints
{
	my ($node, $value) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET zklock.failpoints = '$value'");
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	return wait_until(sub { psql1($node, 'SHOW zklock.failpoints') eq $value },
		timeout => 10);
}

# Silence the per-command notes of every session (a stress run sends tens
# of thousands of commands); returns a guard that restores them.
sub zk_quiet_sessions
{
	no warnings 'redefine';
	my $orig = \&ZkLockTest::Session::note;
	*ZkLockTest::Session::note = sub { };
	return bless { orig => $orig }, 'ZkLockTest::QuietGuard';
}

# zk_dump_start(): starts "zkutil.py dump <root>" without waiting; returns
# a handle for zk_dump_done.  zk_dump_done($h) returns undef while it runs,
# then a ref to the list of lock nodes under the root, read straight from
# ZooKeeper, each a hash: path, resource, node, mode ('exclusive'/'shared'
# for Hive/zklock names, else undef), seq, czxid, data (key => value of
# zklock's node data), granted (by Hive's rule, among the nodes listed).
push @EXPORT, qw(zk_dump_start zk_dump_done);

sub zk_dump_start
{
	my $h = { out => '', err => '', started => time() };
	$h->{run} = IPC::Run::start([ $PYTHON, $ZKUTIL, $zk_hosts, 'dump', $zk_root ],
		'<', \undef, '>', \$h->{out}, '2>', \$h->{err}, IPC::Run::timeout(120));
	return $h;
}

sub zk_dump_done
{
	my ($h) = @_;
	my $r = $h->{run};
	eval { $r->pump_nb if $r->pumpable; 1; };
	return undef if $r->pumpable;
	eval { $r->finish; };
	my $rc = $r->result(0) // -1;
	croak "zkutil.py dump failed (rc $rc): $h->{err}" if $rc != 0;
	my (@rows, %by_res);
	foreach my $line (split /\n/, $h->{out})
	{
		my ($path, $czxid, $data) = split /\t/, $line, 3;
		my ($parent, $node) = $path =~ m{^(.*)/([^/]+)$} or next;
		my $res = substr($parent, length($zk_root) + 1);
		my %d;
		foreach my $kv (split /\\n/, $data // '')
		{
			my ($k, $v) = split /=/, $kv, 2;
			$d{$k} = $v if defined $v;
		}
		my $mode = $node =~ /LOCK-EXCLUSIVE-/ ? 'exclusive' : $node =~ /LOCK-SHARED-/ ? 'shared' : undef;
		my ($seq) = $node =~ /(\d{10})$/;
		my $row = { path => $path, resource => $res, node => $node, mode => $mode,
			seq => $seq + 0, czxid => $czxid, data => \%d };
		push @rows, $row;
		push @{ $by_res{$res} }, $row;
	}
	foreach my $list (values %by_res)
	{
		my $lower_any = 0;
		my $lower_x = 0;
		foreach my $row (sort { $a->{seq} <=> $b->{seq} } @$list)
		{
			my $m = $row->{mode} // 'exclusive';
			$row->{granted} = $m eq 'exclusive' ? !$lower_any : !$lower_x;
			$lower_any = 1;
			$lower_x = 1 if $m eq 'exclusive';
		}
	}
	return \@rows;
}

# ---------------------------------------------------------------------------
# helpers of the deadlock tests (081, 086, 087, 088): cycles of sessions
# that hold a lock and wait for another's, the instances' publications of
# their long waits (zklock.waits/<session>), what must be left at the end

push @EXPORT, qw(zk_hold zk_ask zk_cross zk_result_is zk_unwind
  zk_hold_row zk_ask_row zk_session_id zk_published zk_wait_published
  zk_entries_in_use zk_wait_no_entries zk_wait_no_publication
  zk_deadlock_done_check);

# The acquire statement of zk_hold and zk_ask: zk_lock_acquire of $res, in
# $mode when given (else the function's default, EXCLUSIVE).
sub _acquire_sql
{
	my ($res, $mode) = @_;
	return "SELECT zk_lock_acquire('$res'"
	  . (defined $mode ? ", '$mode'" : '') . ') IS NOT NULL';
}

# zk_hold($s, $res, $mode): session $s begins a transaction and takes the
# lock on $res (in $mode when given); dies unless it is granted.
sub zk_hold
{
	my ($s, $res, $mode) = @_;
	$s->query_ok('BEGIN');
	$s->query_ok(_acquire_sql($res, $mode));
	return;
}

# zk_ask($s, $res, $mode): session $s sends the acquire of $res (in $mode
# when given) without waiting for it.  One test, "<session> waits for
# $res" (" ($mode)" added when given): its backend then waits on the
# extension with its request queued in ZooKeeper (wait_for_queued, 10 s),
# so that a request asked after it queues behind it.  Returns the test's
# result.
sub zk_ask
{
	my ($s, $res, $mode) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$s->send(_acquire_sql($res, $mode));
	return ok(wait_for_queued($s->node, $s->pid),
		$s->name . " waits for $res" . (defined $mode ? " ($mode)" : ''));
}

# zk_cross($s1, $s2, $r1, $r2): the two-member cycle.  $s1 holds $r1 and
# $s2 holds $r2 (zk_hold); $s1 asks for $r2, then $s2, last (the youngest
# request), for $r1 (zk_ask: two tests).  Returns the time just before
# $s2 asked.
sub zk_cross
{
	my ($s1, $s2, $r1, $r2) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	zk_hold($s1, $r1);
	zk_hold($s2, $r2);
	zk_ask($s1, $r2);
	my $t0 = time();
	zk_ask($s2, $r1);
	return $t0;
}

# zk_result_is($s, $sqlstate, $name, $timeout): waits (bounded, $timeout s,
# 20 by default) for the command session $s has pending; one test, $name,
# that it ended with $sqlstate ('00000': it succeeded; a timeout fails it).
# Returns the result (as ZkLockTest::Session::wait: undef on a timeout).
sub zk_result_is
{
	my ($s, $sqlstate, $name, $timeout) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $r = $s->wait($timeout // 20);
	is($r && $r->{sqlstate}, $sqlstate, $name);
	return $r;
}

# zk_unwind($victim, [$s, $name, $end], ...): the end of a broken cycle.
# $victim (the one that got 40P01) rolls back; then, in order, each $s's
# pending request must be granted (zk_result_is: one test, $name, 20 s)
# and $s ends its transaction with $end (default COMMIT).
sub zk_unwind
{
	my ($victim, @then) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$victim->query_ok('ROLLBACK');
	for my $t (@then)
	{
		my ($s, $name, $end) = @$t;
		zk_result_is($s, '00000', $name);
		$s->query_ok($end // 'COMMIT');
	}
	return;
}

# zk_hold_row($s, $id): session $s begins a transaction and locks row $id
# of the test's table t (id int PRIMARY KEY, v int) by adding 1 to its v.
sub zk_hold_row
{
	my ($s, $id) = @_;
	$s->query_ok('BEGIN');
	$s->query_ok("UPDATE t SET v = v + 1 WHERE id = $id");
	return;
}

# zk_ask_row($s, $sql, $name): session $s sends $sql (an UPDATE of a row
# that another transaction holds) without waiting for it.  One test,
# $name: its backend then waits for a PostgreSQL lock (pg_stat_activity's
# wait_event_type 'Lock'; bounded, 10 s).
sub zk_ask_row
{
	my ($s, $sql, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$s->send($sql);
	return ok(
		wait_until(sub {
				psql1($s->node, 'SELECT wait_event_type FROM pg_stat_activity WHERE pid = '
					  . $s->pid) eq 'Lock';
			}),
		$name);
}

# zk_session_id($node): the node's ZooKeeper session id as the name of its
# publication of long waits has it: 16 hex digits (zk_lock_status's
# session_id without its 0x, zero-padded).
sub zk_session_id
{
	my ($node) = @_;
	return psql1($node,
		q{SELECT lpad(substr(session_id, 3), 16, '0') FROM zk_lock_status});
}

# zk_published($sid): the data of the publication of long waits of the
# instance whose session is $sid (zk_session_id), read from ZooKeeper; undef
# when there is none.  A long wait is a line "w<TAB>pid<TAB>czxid<TAB>...".
# Croaks when ZooKeeper could not be read (so that "none" is never a failed
# read).
sub zk_published
{
	my ($sid) = @_;
	my ($rc, $out, $err) = zkutil('get', zk_path("zklock.waits/$sid"));
	return $out if $rc == 0;
	return undef if $rc == 1 && $err =~ /does not exist/;
	croak "zk_published: could not read the publication of $sid (rc $rc): $err";
}

# zk_wait_published($sid, \@pids, %p): waits (bounded: timeout => s, 10 by
# default; interval => s, as wait_until's) until $sid's publication lists
# a long wait of every backend in @pids; with gone => 1, until it lists
# none of them (no publication lists none).  Returns 1/0.
sub zk_wait_published
{
	my ($sid, $pids, %p) = @_;
	my $gone = delete $p{gone};
	croak "zk_wait_published: no pids given"
	  unless @$pids && !grep { !defined } @$pids;
	return wait_until(
		sub {
			my $data = zk_published($sid) // '';
			my $listed = grep { $data =~ /^w\t$_\t/m } @$pids;
			return $gone ? $listed == 0 : $listed == @$pids;
		},
		timeout => 10,
		%p);
}

# zk_entries_in_use($on): zk_lock_status.entries_in_use of a node, read
# through a new connection; or, $on being a session, through that session
# (a monitor making no zklock call: a cut link does not stop it), its notes
# silenced.
sub zk_entries_in_use
{
	my ($on) = @_;
	my $sql = 'SELECT entries_in_use FROM zk_lock_status';
	return psql1($on, $sql) unless $on->isa('ZkLockTest::Session');
	my $quiet = zk_quiet_sessions();
	return $on->query_ok($sql);
}

# zk_wait_no_entries($on, $timeout): waits (bounded, $timeout s, 15 by
# default) until zk_entries_in_use($on) is 0.  Returns 1/0.
sub zk_wait_no_entries
{
	my ($on, $timeout) = @_;
	return wait_until(sub { zk_entries_in_use($on) eq '0' },
		timeout => $timeout // 15);
}

# zk_wait_no_publication($timeout): waits (bounded, $timeout s, 15 by
# default) until ZooKeeper, read, shows no publication of long waits under
# the root's zklock.waits.  Returns 1/0.
sub zk_wait_no_publication
{
	my ($timeout) = @_;
	return wait_until(
		sub {
			my ($rc, $out) = zkutil('ls-r', zk_path('zklock.waits'));
			return $rc == 0 && $out !~ /[0-9a-f]{16}/;
		},
		timeout => $timeout // 15);
}

# zk_deadlock_done_check(@on): the end of a deadlock test.  No publication
# of long waits is left (zk_wait_no_publication, 15 s: "no waits node
# left"); and for each of @on (a node, or a session on it, as
# zk_entries_in_use takes) no lock entry in use (15 s) and no crash in the
# node's log.  1 + 2 x @on tests.
sub zk_deadlock_done_check
{
	my (@on) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	ok(zk_wait_no_publication(15), 'no waits node left');
	for my $on (@on)
	{
		my $node = $on->isa('ZkLockTest::Session') ? $on->node : $on;
		ok(zk_wait_no_entries($on, 15), $node->name . ': no entry in use');
		is(scalar zk_log_crashes($node), 0, $node->name . ': no crash');
	}
	return;
}

package ZkLockTest::QuietGuard;

sub DESTROY
{
	no warnings 'redefine';
	*ZkLockTest::Session::note = $_[0]->{orig};
	return;
}

1;
