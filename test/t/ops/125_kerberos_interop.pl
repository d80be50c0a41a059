
# Kazoo over Kerberos interoperates with zklock over Kerberos (issue 30).
# The realm and ZooKeeper of test/ZkKerberos.pm (an MIT KDC on loopback,
# ZooKeeper with Krb5LoginModule), zklock with a keytab of zklock@ZKLOCK.TEST,
# so its root and nodes carry the creator-only ACL sasl:zklock@ZKLOCK.TEST.
#
# Kazoo (python3-kazoo, with python3-pure-sasl and python3-kerberos for
# GSSAPI) authenticates with a keytab of its own, kinit -kt into a file
# credential cache of the test, as ANOTHER principal, zklock/interop@ZKLOCK.TEST,
# which ZooKeeper maps to the identity zklock@ZKLOCK.TEST because the
# ensemble sets kerberos.removeHostFromPrincipal (as kerberized Hadoop
# ensembles map hive/<host> to hive): the only way another principal gets
# rights on nodes with zklock's creator-only ACL.  Proven:
#  - ZooKeeper authenticated Kazoo as zklock/interop and authorized it as
#    zklock@ZKLOCK.TEST;
#  - Kazoo's WriteLock (test/interop/kazoo_lock.py, as in 030_interop.pl)
#    and zklock EXCLUSIVE exclude each other, both ways, under
#    zklock.node_naming 'kz=kazoo';
#  - an unauthenticated Kazoo client, and one authenticated as a principal
#    with no mapping to zklock's (kazoo@ZKLOCK.TEST), cannot delete zklock's
#    lock node nor its root (NoAuth), and the lock stays held.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkKerberos;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $INTEROP = "$FindBin::RealBin/../../interop";
my $PYTHON = $ENV{ZKLOCK_TEST_PYTHON} || '/usr/bin/python3';

my $dir = krb_start(principals => [ 'zklock', 'zklock/interop', 'kazoo' ]);
krb_keytab('zklock', "$dir/node1.keytab");
krb_keytab('zklock/interop', "$dir/interop.keytab");
krb_keytab('kazoo', "$dir/other.keytab");
my $super = krb_zk_start(extra_config => "kerberos.removeHostFromPrincipal=true\n");
my ($port) = zk_hosts() =~ /:(\d+)$/;
# Kazoo names the server's principal after the host it connects to
my $khosts = "localhost:$port";

my $node1 = zk_node('node1',
	extra_conf => krb_zklock_conf("$dir/node1.keytab") . "zklock.node_naming = 'kz=kazoo'\n");
ok(slurp_file(zk_dir() . '/server1.log') =~
	  qr/Successfully authenticated client: authenticationID=zklock\@ZKLOCK.TEST/,
	'zklock authenticated as zklock@ZKLOCK.TEST');

# --- Kazoo as zklock/interop ----------------------------------------------------
my $interop_cc = krb_kinit("$dir/interop.keytab", 'zklock/interop', "$dir/interop.ccache");
my $kazoo = Foreign->start('kazoo', [ $PYTHON, "$INTEROP/kazoo_lock.py", $khosts ],
	KRB5CCNAME => $interop_cc, KAZOO_LOCK_SASL_MECHANISM => 'GSSAPI');
END { $kazoo->kill if $kazoo; }
ok(defined $kazoo->event('READY', '', 60), 'Kazoo connected with GSSAPI')
  or BAIL_OUT('the Kazoo client did not start: ' . $kazoo->output);
# (ok, not like: a failure would print the whole log)
my $zklog = '';
ok( wait_until(
		sub {
			$zklog = slurp_file(zk_dir() . '/server1.log');
			$zklog =~ qr{Successfully authenticated client: authenticationID=zklock/interop\@ZKLOCK\.TEST};
		},
		timeout => 10),
	'ZooKeeper authenticated Kazoo as zklock/interop@ZKLOCK.TEST');
# (the next line of the same thread; zklock's own session says the same)
ok($zklog =~ qr{authenticationID=zklock/interop\@ZKLOCK\.TEST;[^\n]*\n(?:[^\n]*\n){0,4}?[^\n]*Setting authorizedID: zklock\@ZKLOCK\.TEST\n},
	'and authorized it as zklock@ZKLOCK.TEST (kerberos.removeHostFromPrincipal)');

my $zs = zk_session($node1, 'zklock_side');
my $res = 'kz/w';
my $path = zk_path($res);
sub children
{
	return map { m{^\Q$path\E/([^/]+)$} ? $1 : () } zk_list_znodes($path);
}

# --- zklock holds, Kazoo's WriteLock waits --------------------------------------
$zs->query_ok('BEGIN');
like($zs->query_ok("SELECT zk_lock_acquire('$res', 'exclusive', '10s')"),
	qr/^\d+$/, 'zklock holds kz/w EXCLUSIVE');
$kazoo->send("acquire K1 $path write 30000");
ok(wait_until(sub { scalar(children()) == 2 }, timeout => 15, interval => 0.1),
	"Kazoo's WriteLock queued its node behind zklock's")
  or diag('children: ' . join(' ', children()) . "\n" . $kazoo->output);
ok(!defined $kazoo->event('ACQUIRED', 'K1', 1.0),
	"Kazoo's WriteLock is not granted while zklock holds the lock");

# --- (b) clients without zklock's identity cannot delete its nodes ----------------
my $py = <<'PY';
import sys
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
hosts, root, super_pw, who = sys.argv[1:5]
su = KazooClient(hosts=hosts, auth_data=[("digest", "super:" + super_pw)]); su.start(timeout=10)
def walk(p):
    for c in su.get_children(p):
        yield p + "/" + c
        yield from walk(p + "/" + c)
lock = [p for p in walk(root)
        if p.rsplit("/", 1)[-1].startswith("zk") and "__lock__" in p][0]
acl, _ = su.get_acls(lock)
print("lock_acl", ",".join(sorted("%s:%s" % (a.id.scheme, a.id.id) for a in acl)))
opts = {"mechanism": "GSSAPI", "service": "zookeeper"} if who == "kerberos" else None
zk = KazooClient(hosts=hosts, sasl_options=opts); zk.start(timeout=20)
for what, f in (("lock", lambda: zk.delete(lock)),
                ("root", lambda: zk.delete(root, recursive=True))):
    try:
        f(); print(what, "delete allowed")
    except NoAuthError:
        print(what, "delete denied")
print("lock", "still there" if su.exists(lock) else "gone")
zk.stop(); su.stop()
PY
foreach my $case ([ 'unauthenticated', {} ],
	[ 'kerberos', { KRB5CCNAME => krb_kinit("$dir/other.keytab", 'kazoo', "$dir/other.ccache") } ])
{
	my ($who, $env) = @$case;
	my $W = $who eq 'kerberos' ? 'a Kazoo client authenticated as kazoo@ZKLOCK.TEST'
	  : 'an unauthenticated Kazoo client';
	my ($out, $err) = ('', '');
	{
		local %ENV = (%ENV, %$env);
		IPC::Run::run([ $PYTHON, '-c', $py, $khosts, zk_root(), $super, $who ],
			'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(60));
	}
	note "kazoo ($who): $out $err";
	like($out, qr/^lock_acl sasl:zklock\@ZKLOCK\.TEST$/m,
		"zklock's lock node is sasl:zklock\@ZKLOCK.TEST's alone") if $who eq 'unauthenticated';
	like($out, qr/^lock delete denied$/m, "$W cannot delete zklock's lock node (NoAuth)");
	like($out, qr/^root delete denied$/m, "$W cannot delete zklock's root (NoAuth)");
	like($out, qr/^lock still there$/m, 'the lock node is still there');
}
ok(slurp_file(zk_dir() . '/server1.log') =~ /authenticationID=kazoo\@ZKLOCK\.TEST/,
	'ZooKeeper authenticated the other Kazoo client as kazoo@ZKLOCK.TEST');
is(psql1($node1, "SELECT count(*) FROM zk_lock_local WHERE resource = '$res' AND state = 'granted'"),
	'1', 'zklock still holds kz/w');

# --- zklock releases: Kazoo is granted; then zklock waits for Kazoo ----------------
$zs->query_ok('COMMIT');
ok(defined $kazoo->event('ACQUIRED', 'K1', 15), "Kazoo's WriteLock is granted after zklock's COMMIT");
$zs->query_ok('BEGIN');
is($zs->query_ok("SELECT zk_lock_try_acquire('$res') IS NULL"),
	't', "while Kazoo holds it, zklock's try-acquire returns NULL");
$zs->send("SELECT zk_lock_acquire('$res', 'exclusive', '30s') IS NOT NULL");
ok(wait_for_waiting($node1, $zs->pid, 10), 'a zklock acquire waits');
sleep(0.5);
ok(!$zs->done, 'and still waits while Kazoo holds the lock');
$kazoo->send('release K1');
ok(defined $kazoo->event('GONE', 'K1', 10), 'Kazoo released');
my $r = $zs->wait(15);
is(($r && $r->{out}) // '', 't', "zklock is granted the lock after Kazoo's release");
$zs->query_ok('COMMIT');
ok(wait_until(sub { scalar(children()) == 0 }, timeout => 10, interval => 0.1),
	'no lock node left');
is($kazoo->errors, '', 'Kazoo reported no error');
ok($kazoo->quit, 'Kazoo exits');
$kazoo = undef;

zk_done_check();
done_testing();

# ---------------------------------------------------------------------------
# A foreign lock client (kazoo_lock.py's long-lived mode), as in
# 030_interop.pl: commands on its stdin, "WORD ID <epoch ms>" lines out.
package Foreign;

use strict;
use warnings;
use IPC::Run;
use Test::More;
use Time::HiRes qw(time sleep);

sub start
{
	my ($class, $name, $cmd, %env) = @_;
	my $self = bless { name => $name, in => '', out => '', err => '' }, $class;
	local %ENV = (%ENV, KAZOO_LOCK_MAX_SECONDS => 120, %env);
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

sub output { my ($self) = @_; $self->_pump; return "$self->{out}$self->{err}"; }

sub send
{
	my ($self, $line) = @_;
	note "$self->{name} <- $line";
	$self->{in} .= "$line\n";
	$self->_pump;
	return;
}

# the time of "$word $id <ms>" (or "$word <ms>"), or undef after $timeout
# seconds, on an ERROR or TIMEOUT line about $id, or when the client exited
sub event
{
	my ($self, $word, $id, $timeout) = @_;
	my $re = $id eq '' ? qr/^\Q$word\E (\d+)$/m : qr/^\Q$word $id\E (\d+)$/m;
	my $about = $id eq '' ? '-' : "(?:\Q$id\E|-)";
	my $deadline = time() + $timeout;
	while (1)
	{
		$self->_pump;
		return $1 if $self->{out} =~ $re;
		if ($self->{out} =~ /^((?:ERROR|TIMEOUT) $about .*)$/m)
		{
			diag("$self->{name}: $1");
			return undef;
		}
		return undef if !$self->{h}->pumpable || time() >= $deadline;
		sleep(0.01);
	}
}

sub errors
{
	my ($self) = @_;
	$self->_pump;
	return join("\n", $self->{out} =~ /^((?:ERROR|TIMEOUT) .*)$/mg);
}

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
	return $ok;
}

sub kill
{
	my ($self) = @_;
	eval { $self->{h}->kill_kill(grace => 1); };
	return;
}

1;
