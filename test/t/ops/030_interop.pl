
# Interoperation with the real lock clients of Debian 12, on one ZooKeeper:
# Apache Curator 5.4 (libcurator-recipes-java: InterProcessMutex and
# InterProcessReadWriteLock) and Kazoo 2.8 (python3-kazoo: Lock, ReadLock,
# WriteLock), driven by test/interop/CuratorLock.java (compiled here, into
# the TAP tmp dir) and test/interop/kazoo_lock.py.
#
# zklock names its nodes like the other client under the subtrees
# zklock.node_naming maps (mx -> curator-mutex, cur -> curator, kz -> kazoo)
# and honours foreign nodes everywhere, also under its default (Hive) naming
# (hv).  Proven, each both ways (zklock first, then the foreign client first):
#  - mutual exclusion: zklock EXCLUSIVE vs Curator's mutex, Curator's write
#    lock, Kazoo's Lock and Kazoo's WriteLock; while one holds, the other
#    waits (zklock's try-acquire gives NULL, the foreign client prints no
#    ACQUIRED), the second is granted after the first's release (timestamps)
#    and promptly;
#  - readers overlap: zklock SHARED with Curator's read lock and with Kazoo's
#    ReadLock hold at the same time;
#  - a zklock SHARED holder blocks Curator's and Kazoo's writers, and their
#    writers block zklock SHARED;
#  - under Hive naming a Kazoo Lock holder blocks zklock;
#  - Kazoo's plain Lock does not see zklock's SHARED nodes (on the resource,
#    or on the parents of a resource zklock holds EXCLUSIVE) while its
#    WriteLock does: the caveat of doc/other-clients.md, held to;
#  - at the end no node is left under any resource used.
#
# Nothing is skipped: a missing JDK compiler, jar or kazoo is a failure.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $INTEROP = "$FindBin::RealBin/../../interop";
my $PYTHON  = $ENV{ZKLOCK_TEST_PYTHON} || '/usr/bin/python3';
my $JAVA_DIR = '/usr/share/java';
# Curator's runtime: Debian's guava.jar carries failureaccess's class, and
# ZooKeeper's client uses its NIO socket, so netty is not needed.
my @JARS = qw(curator-recipes curator-framework curator-client zookeeper
  zookeeper-jute guava slf4j-api slf4j-nop);

# How long (ms) a foreign client asks to wait for a lock at most.
my $FOREIGN_WAIT_MS = 30000;
# A grant after a release must come within this many ms.
my $PROMPT_MS = 5000;

sub now_ms { return int(time() * 1000); }

my @foreign;    # started foreign clients, killed in END if still alive

END
{
	foreach my $c (@foreign) { eval { $c->kill; }; }
}

# ---------------------------------------------------------------------------
# Compile CuratorLock.java -- in the background, while ZooKeeper and
# PostgreSQL start.  javac when installed (default-jdk-headless), else the
# same compiler through the JRE: Debian's JRE image carries the jdk.compiler
# module.
my $classes = PostgreSQL::Test::Utils::tempdir('curator_classes');
my @missing = grep { !-f "$JAVA_DIR/$_.jar" } @JARS;
is(join(' ', @missing), '',
	"Curator's jars are installed in $JAVA_DIR (libcurator-recipes-java, libslf4j-java)");
my $classpath = join(':', map { "$JAVA_DIR/$_.jar" } @JARS);
my $java = '/usr/bin/java';
ok(-x $java, "java is installed ($java)");
my $javac = (grep { -x "$_/javac" } split(/:/, $ENV{PATH} // ''), '/usr/bin')[0];
my @compile = defined $javac
  ? ("$javac/javac")
  : ($java, '-m', 'jdk.compiler/com.sun.tools.javac.Main');
push @compile, '-nowarn', '-cp', $classpath, '-d', $classes,
  "$INTEROP/CuratorLock.java";
note "compiling: @compile";
my ($javac_out, $javac_err) = ('', '');
my $t_compile = time();
my $javac_h = IPC::Run::start(\@compile, '<', \undef, '>', \$javac_out,
	'2>', \$javac_err, IPC::Run::timeout(120));

my $hosts = zk_start();
my $node = zk_node('node1',
	extra_conf => "zklock.node_naming = 'mx=curator-mutex, cur=curator, kz=kazoo'");

my $compiled = eval { $javac_h->finish; };
ok($compiled, 'CuratorLock.java compiles against Curator 5.4')
  or diag("@compile\nfailed: $@ $javac_out$javac_err");
note sprintf('compiled in %.1f s', time() - $t_compile);
# Nothing here may be skipped: without a client, stop with the failures above
# (failing this file only, not the whole run as BAIL_OUT would).
sub give_up
{
	diag("giving up: $_[0]");
	done_testing();
	exit 1;
}
give_up('Curator cannot be used') if !$compiled || @missing;

is(psql1($node, 'SHOW zklock.node_naming'),
	'mx=curator-mutex, cur=curator, kz=kazoo', 'zklock.node_naming is set');

# Both foreign clients start at once (each takes a second or two).
my $curator = Foreign->start('curator',
	[ $java, '-cp', "$classes:$classpath", 'CuratorLock', $hosts ]);
my $kazoo = Foreign->start('kazoo',
	[ $PYTHON, "$INTEROP/kazoo_lock.py", $hosts ]);
push @foreign, $curator, $kazoo;
ok(defined $curator->event('READY', '', 60), 'Curator client connected')
  or give_up('the Curator client did not start');
ok(defined $kazoo->event('READY', '', 60), 'Kazoo client connected')
  or give_up('the Kazoo client did not start');

my $zs = zk_session($node, 'zklock_side');
my %used;    # resource paths used, checked empty at the end

# The children (names) of a znode, from outside (zkutil.py).
sub children
{
	my ($path) = @_;
	return map { m{^\Q$path\E/([^/]+)$} ? $1 : () } zk_list_znodes($path);
}

# zklock's node name under a subtree of the given style and mode.
my $PFX = qr/zk[0-9a-f]{8}\.[0-9a-f]+\.[0-9a-f]+-/;
my %NAME_RE = (
	'curator-mutex/exclusive' => qr/^_c_${PFX}lock-\d{10}$/,
	'curator/exclusive'       => qr/^_c_${PFX}__WRIT__\d{10}$/,
	'curator/shared'          => qr/^_c_${PFX}__READ__\d{10}$/,
	'kazoo/exclusive'         => qr/^${PFX}__lock__\d{10}$/,
	'kazoo/shared'            => qr/^${PFX}__rlock__\d{10}$/,
	'hive/exclusive'          => qr/^${PFX}LOCK-EXCLUSIVE-\d{10}$/,);

my $next_id = 0;

# zklock holds $res in $zkmode, the foreign client $c asks for it in $fmode
# and must wait until zklock releases; then, the foreign client holding it,
# zklock must wait until the foreign client releases.
sub exclusion_both_ways
{
	my (%a) = @_;
	my ($c, $res, $fmode, $zkmode, $style) = @a{qw(client res fmode zkmode style)};
	my $path = zk_path($res);
	my $who = "$a{fname}";
	my $L = "$res: zklock $zkmode vs $who";
	$used{$path} = 1;

	# --- zklock first
	$zs->query_ok('BEGIN');
	like($zs->query_ok("SELECT zk_lock_acquire('$res', '$zkmode', '10s')"),
		qr/^\d+$/, "$L: zklock first: $zkmode granted");
	my @ch = children($path);
	ok(@ch == 1 && $ch[0] =~ $NAME_RE{"$style/$zkmode"},
		"$L: zklock's node is named in $style style")
	  or diag("children of $path: @ch");

	my $id = 'L' . ++$next_id;
	$c->send("acquire $id $path $fmode $FOREIGN_WAIT_MS");
	ok(wait_until(sub { scalar(children($path)) == 2 }, timeout => 15, interval => 0.1),
		"$L: $who queued its node behind zklock's");
	ok(!defined $c->event('ACQUIRED', $id, 1.0),
		"$L: $who gets no lock while zklock holds it");
	is(psql1($node, "SELECT count(*) FROM zk_lock_local WHERE resource = '$res' AND state = 'granted'"),
		'1', "$L: zklock still holds it");

	my $t_release = now_ms();
	$zs->query_ok('COMMIT');
	my $acquired = $c->event('ACQUIRED', $id, 15);
	ok(defined $acquired, "$L: $who gets the lock after zklock's COMMIT");
	$acquired //= 0;
	cmp_ok($acquired, '>=', $t_release,
		"$L: $who was granted after zklock released");
	cmp_ok($acquired - $t_release, '<', $PROMPT_MS,
		"$L: $who was granted promptly (" . ($acquired - $t_release) . ' ms)');

	# --- the foreign client first (it holds the lock now)
	$zs->query_ok('BEGIN');
	is($zs->query_ok("SELECT zk_lock_try_acquire('$res', '$zkmode') IS NULL"),
		't', "$L: $who first: zklock try-acquire $zkmode returns NULL");
	is(scalar(children($path)), 1, "$L: the try-acquire left no node");

	$zs->send(
		"SELECT g, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
		   FROM (SELECT zk_lock_acquire('$res', '$zkmode', '30s') IS NOT NULL AS g OFFSET 0) s");
	ok(wait_for_waiting($node, $zs->pid, 10), "$L: zklock acquire waits");
	sleep(0.5);
	ok(!$zs->done, "$L: zklock still waits while $who holds the lock");

	$c->send("release $id");
	my $released = $c->event('RELEASED', $id, 10);
	ok(defined $released, "$L: $who releases");
	$released //= 0;
	my $r = $zs->wait(15);
	ok(defined $r && $r->{sqlstate} eq '00000', "$L: zklock acquire returns")
	  or diag(explain($r));
	my ($g, $granted_ms) = split(/\|/, ($r && $r->{out}) // '|0');
	is($g, 't', "$L: zklock got the lock");
	$granted_ms ||= 0;
	# (RELEASED is printed before the release; same clock, milliseconds)
	cmp_ok($granted_ms, '>=', $released, "$L: zklock was granted after $who released");
	cmp_ok($granted_ms - $released, '<', $PROMPT_MS,
		"$L: zklock was granted promptly (" . ($granted_ms - $released) . ' ms)');
	ok(defined $c->event('GONE', $id, 10), "$L: ${who}'s release is done");
	is(scalar(children($path)), 1, "$L: only zklock's node is left");
	$zs->query_ok('COMMIT');
	ok(wait_until(sub { scalar(children($path)) == 0 }, timeout => 10, interval => 0.1),
		"$L: no node left");
	return;
}

# zklock SHARED and a foreign reader hold $res at the same time, both ways.
sub readers_overlap
{
	my (%a) = @_;
	my ($c, $res, $fmode, $style) = @a{qw(client res fmode style)};
	my $path = zk_path($res);
	my $who = $a{fname};
	my $L = "$res: zklock shared with $who";
	$used{$path} = 1;

	# --- zklock first
	$zs->query_ok('BEGIN');
	like($zs->query_ok("SELECT zk_lock_acquire('$res', 'shared', '10s')"),
		qr/^\d+$/, "$L: zklock first: shared granted");
	my @ch = children($path);
	ok(@ch == 1 && $ch[0] =~ $NAME_RE{"$style/shared"},
		"$L: zklock's node is named in $style style")
	  or diag("children of $path: @ch");
	my $id = 'L' . ++$next_id;
	$c->send("acquire $id $path $fmode $FOREIGN_WAIT_MS");
	ok(defined $c->event('ACQUIRED', $id, 10), "$L: $who gets its read lock too");
	is(psql1($node, "SELECT count(*) FROM zk_lock_local WHERE resource = '$res' AND state = 'granted'"),
		'1', "$L: while zklock holds its own");
	is(psql1($node,
			"SELECT string_agg(lower(mode) || ':' || granted::text || ':' || (instance IS NULL)::text, ',' ORDER BY token)
			   FROM zk_locks WHERE resource = '$res'"),
		'shared:true:false,shared:true:true',
		"$L: zk_locks shows both readers granted, the foreign one without an instance");
	$c->send("release $id");
	ok(defined $c->event('GONE', $id, 10), "$L: $who released");
	$zs->query_ok('COMMIT');

	# --- the foreign reader first
	$id = 'L' . ++$next_id;
	$c->send("acquire $id $path $fmode $FOREIGN_WAIT_MS");
	ok(defined $c->event('ACQUIRED', $id, 10), "$L: $who first: gets its read lock");
	$zs->query_ok('BEGIN');
	is($zs->query_ok("SELECT zk_lock_try_acquire('$res', 'shared') IS NOT NULL"),
		't', "$L: zklock try-acquire shared succeeds while $who holds");
	is(scalar(children($path)), 2, "$L: both hold at the same time (two nodes)");
	ok(!defined $c->event('RELEASED', $id, 0), "$L: $who has not released");
	$zs->query_ok('COMMIT');
	$c->send("release $id");
	ok(defined $c->event('GONE', $id, 10), "$L: $who released");
	ok(wait_until(sub { scalar(children($path)) == 0 }, timeout => 10, interval => 0.1),
		"$L: no node left");
	return;
}

my $t0 = time();

# ---------------------------------------------------------------------------
# Curator
exclusion_both_ways(client => $curator, fname => "Curator's InterProcessMutex",
	res => 'mx/a', fmode => 'mutex', zkmode => 'exclusive', style => 'curator-mutex');
exclusion_both_ways(client => $curator, fname => "Curator's write lock",
	res => 'cur/w', fmode => 'write', zkmode => 'exclusive', style => 'curator');
readers_overlap(client => $curator, fname => "Curator's read lock",
	res => 'cur/r', fmode => 'read', style => 'curator');
exclusion_both_ways(client => $curator, fname => "Curator's write lock",
	res => 'cur/r', fmode => 'write', zkmode => 'shared', style => 'curator');

# ---------------------------------------------------------------------------
# Kazoo
exclusion_both_ways(client => $kazoo, fname => "Kazoo's Lock",
	res => 'kz/l', fmode => 'lock', zkmode => 'exclusive', style => 'kazoo');
exclusion_both_ways(client => $kazoo, fname => "Kazoo's WriteLock",
	res => 'kz/w', fmode => 'write', zkmode => 'exclusive', style => 'kazoo');
readers_overlap(client => $kazoo, fname => "Kazoo's ReadLock",
	res => 'kz/r', fmode => 'read', style => 'kazoo');
exclusion_both_ways(client => $kazoo, fname => "Kazoo's WriteLock",
	res => 'kz/r', fmode => 'write', zkmode => 'shared', style => 'kazoo');

# What doc/other-clients.md says of Kazoo's plain Lock: it counts only
# "__lock__" nodes, so it does not see zklock's SHARED nodes ("__rlock__"),
# neither a SHARED lock taken by name nor the SHARED locks on the parents of
# a resource zklock holds.  WriteLock counts both and waits.  Use WriteLock
# and ReadLock with zklock; Lock only where zklock takes nothing SHARED.
{
	my $res = 'kz/ls';
	my $path = zk_path($res);
	my $L = "$res: zklock shared vs Kazoo's Lock";
	$used{$path} = 1;
	$zs->query_ok('BEGIN');
	like($zs->query_ok("SELECT zk_lock_acquire('$res', 'shared', '10s')"),
		qr/^\d+$/, "$L: zklock holds it SHARED");
	my $id = 'L' . ++$next_id;
	$kazoo->send("acquire $id $path lock $FOREIGN_WAIT_MS");
	ok(defined $kazoo->event('ACQUIRED', $id, 10),
		"$L: Kazoo's Lock is granted all the same (it counts only __lock__ nodes; doc/other-clients.md)");
	$kazoo->send("release $id");
	ok(defined $kazoo->event('GONE', $id, 10), "$L: Kazoo's Lock released");
	$zs->query_ok('COMMIT');

	# the parent of a resource zklock holds EXCLUSIVE
	my $parent = zk_path('kz/hp');
	$L = "kz/hp: zklock holds kz/hp/c exclusive";
	$zs->query_ok('BEGIN');
	like($zs->query_ok("SELECT zk_lock_acquire('kz/hp/c', 'exclusive', '10s')"),
		qr/^\d+$/, "$L: granted, with kz/hp SHARED");
	$id = 'L' . ++$next_id;
	$kazoo->send("acquire $id $parent lock $FOREIGN_WAIT_MS");
	ok(defined $kazoo->event('ACQUIRED', $id, 10),
		"$L: Kazoo's Lock on the parent is granted all the same (doc/other-clients.md)");
	$kazoo->send("release $id");
	ok(defined $kazoo->event('GONE', $id, 10), "$L: Kazoo's Lock released");
	# (a waiting WriteLock's node is a __lock__ node, which Lock counts:
	# hence Lock first)
	my $wid = 'L' . ++$next_id;
	$kazoo->send("acquire $wid $parent write $FOREIGN_WAIT_MS");
	ok(!defined $kazoo->event('ACQUIRED', $wid, 1.0),
		"$L: Kazoo's WriteLock on the parent waits");
	$zs->query_ok('COMMIT');
	ok(defined $kazoo->event('ACQUIRED', $wid, 10),
		"$L: Kazoo's WriteLock is granted after zklock's COMMIT");
	$kazoo->send("release $wid");
	ok(defined $kazoo->event('GONE', $wid, 10), "$L: Kazoo's WriteLock released");
	ok(zk_wait_no_locks($parent, 10), "$L: no lock node left under kz/hp");
}

# ---------------------------------------------------------------------------
# zklock's default (Hive) naming still honours a foreign holder.
{
	my $res = 'hv/k';
	my $path = zk_path($res);
	my $L = "$res: Hive naming, Kazoo's Lock holds";
	$used{$path} = 1;
	my $id = 'L' . ++$next_id;
	$kazoo->send("acquire $id $path lock $FOREIGN_WAIT_MS");
	ok(defined $kazoo->event('ACQUIRED', $id, 10), "$L: Kazoo's Lock granted");
	is(psql1($node, "SELECT zk_lock_try_acquire('$res') IS NULL"), 't',
		"$L: zklock try-acquire exclusive returns NULL");
	is(psql1($node, "SELECT zk_lock_try_acquire('$res', 'shared') IS NULL"), 't',
		"$L: zklock try-acquire shared returns NULL");
	$zs->query_ok('BEGIN');
	$zs->send(
		"SELECT g, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
		   FROM (SELECT zk_lock_acquire('$res', 'exclusive', '30s') IS NOT NULL AS g OFFSET 0) s");
	ok(wait_for_waiting($node, $zs->pid, 10), "$L: zklock acquire waits");
	my @ch = children($path);
	ok((grep { $_ =~ $NAME_RE{'hive/exclusive'} } @ch) == 1 && @ch == 2,
		"$L: zklock's waiting node has Hive's name")
	  or diag("children of $path: @ch");
	sleep(0.5);
	ok(!$zs->done, "$L: zklock still waits");
	$kazoo->send("release $id");
	my $released = $kazoo->event('RELEASED', $id, 10);
	ok(defined $released, "$L: Kazoo's Lock releases");
	$released //= 0;
	my $r = $zs->wait(15);
	ok(defined $r && $r->{sqlstate} eq '00000', "$L: zklock acquire returns")
	  or diag(explain($r));
	my ($g, $granted_ms) = split(/\|/, ($r && $r->{out}) // '|0');
	is($g, 't', "$L: zklock got the lock after Kazoo released");
	$granted_ms ||= 0;
	cmp_ok($granted_ms, '>=', $released, "$L: zklock was granted after Kazoo released");
	cmp_ok($granted_ms - $released, '<', $PROMPT_MS,
		"$L: zklock was granted promptly (" . ($granted_ms - $released) . ' ms)');
	$zs->query_ok('COMMIT');
	ok(defined $kazoo->event('GONE', $id, 10), "$L: Kazoo's release is done");
}

note sprintf('interoperation cases took %.1f s', time() - $t0);

# ---------------------------------------------------------------------------
# No node left -- checked while the foreign clients' sessions still live,
# so that only the releases can have removed their nodes.
foreach my $path (sort keys %used)
{
	my @left = zk_list_znodes($path);
	is(join(' ', @left), '', "nothing left under $path");
}
foreach my $c ($curator, $kazoo)
{
	my $errors = $c->errors;
	is($errors, '', "$c->{name} client reported no error");
	ok($c->quit, "$c->{name} client exits");
}
zk_done_check();
done_testing();

# ---------------------------------------------------------------------------
# A foreign lock client (CuratorLock or kazoo_lock.py in their long-lived
# mode): we write commands to its stdin and read its output lines
# ("WORD ID <epoch ms>").
package Foreign;

use strict;
use warnings;
use IPC::Run;
use Test::More;
use Time::HiRes qw(time sleep);

sub start
{
	my ($class, $name, $cmd) = @_;
	my $self = bless { name => $name, in => '', out => '', err => '' }, $class;
	note "starting $name: @$cmd";
	local $ENV{CURATOR_LOCK_MAX_SECONDS} = 240;
	local $ENV{KAZOO_LOCK_MAX_SECONDS}   = 240;
	$self->{h} = IPC::Run::start($cmd, '<', \$self->{in}, '>', \$self->{out},
		'2>', \$self->{err});
	return $self;
}

sub _pump
{
	my ($self) = @_;
	eval { $self->{h}->pump_nb if $self->{h}->pumpable; 1; };
	return;
}

sub send
{
	my ($self, $line) = @_;
	note "$self->{name} <- $line";
	$self->{in} .= "$line\n";
	$self->_pump;
	return;
}

# Wait (bounded, $timeout seconds) for the line "$word $id <ms>" ("$word <ms>"
# when $id is empty); returns <ms>, or undef on timeout, on an ERROR line
# about $id, or when the client has exited.
sub event
{
	my ($self, $word, $id, $timeout) = @_;
	my $re = $id eq '' ? qr/^\Q$word\E (\d+)$/m : qr/^\Q$word $id\E (\d+)$/m;
	my $deadline = time() + $timeout;
	while (1)
	{
		$self->_pump;
		if ($self->{out} =~ $re)
		{
			note "$self->{name} -> " . join(' ', grep { $_ ne '' } $word, $id, $1);
			return $1;
		}
		if ($id ne '' && $self->{out} =~ /^((?:ERROR|TIMEOUT) \Q$id\E\b.*)$/m)
		{
			diag("$self->{name}: $1");
			return undef;
		}
		if (!$self->{h}->pumpable)
		{
			diag("$self->{name} exited: $self->{out}$self->{err}");
			return undef;
		}
		return undef if time() >= $deadline;
		sleep(0.01);
	}
}

sub errors
{
	my ($self) = @_;
	$self->_pump;
	return join("\n", $self->{out} =~ /^((?:ERROR|TIMEOUT) .*)$/mg);
}

# quit, and wait (bounded) for the process to end
sub quit
{
	my ($self) = @_;
	$self->send('quit');
	my $deadline = time() + 20;
	while ($self->{h}->pumpable && time() < $deadline)
	{
		$self->_pump;
		sleep(0.02);
	}
	my $ok = !$self->{h}->pumpable;
	eval { $self->{h}->finish; };
	$self->kill unless $ok;
	note "$self->{name} output:\n$self->{out}$self->{err}";
	return $ok;
}

sub kill
{
	my ($self) = @_;
	eval { $self->{h}->kill_kill(grace => 1); };
	return;
}

1;
