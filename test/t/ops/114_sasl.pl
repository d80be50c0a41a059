
# SASL DIGEST-MD5 to ZooKeeper (issue 30): Debian's ZooKeeper with a JAAS
# file (DigestLoginModule) and the SASL authentication provider; zklock
# built with the C client of scripts/build-zkclient.sh (Cyrus SASL), its
# password in a file only the server's OS user may read:
#  - two instances authenticate as sasl:zklock and lock each other out;
#  - the nodes zklock creates carry the ACL of that identity alone
#    (sasl:zklock), and the root is restricted to it: a client without the
#    credentials (Kazoo) can neither delete a lock node nor list the root;
#    a Kazoo client that authenticates as the same user sees them;
#  - a wrong password: the session is refused (auth_failed), last_error
#    and the log say so (the client said nothing and waited forever:
#    scripts/zkclient/02-sasl-failure.patch), it is tried again, and an
#    acquire fails with 08006 within zklock.connect_timeout;
#  - a password file with group or world access is refused before
#    connecting; GSSAPI without a keytab is refused;
#  - the password is in no setting and not in the log.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $dir = PostgreSQL::Test::Utils::tempdir('sasl');
my $secret = 'pw-' . int(rand(1e9));
my $other = 'other-' . int(rand(1e9));

sub write_file_mode
{
	my ($path, $content, $mode) = @_;
	open(my $fh, '>', $path) or die "could not write $path: $!";
	print $fh $content;
	close($fh);
	chmod($mode, $path) or die "could not chmod $path: $!";
	return;
}

write_file_mode("$dir/jaas.conf", <<"EOJ", 0644);
Server {
  org.apache.zookeeper.server.auth.DigestLoginModule required
  user_zklock="$secret"
  user_other="$other";
};
EOJ
write_file_mode("$dir/zk_sasl.cfg",
	"authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n", 0644);
{
	local $ENV{ZK_JVM_OPTS} = "-Djava.security.auth.login.config=$dir/jaas.conf";
	zk_start(args => [ '--extra-config', "$dir/zk_sasl.cfg" ]);
}
# the test's own ZooKeeper client (zkutil.py) reads as zklock's identity
$ENV{ZKUTIL_SASL} = "zklock:$secret";

write_file_mode("$dir/zklock.pw", "$secret\n", 0600);
write_file_mode("$dir/wrong.pw", "not-$secret\n", 0600);
write_file_mode("$dir/open.pw", "$secret\n", 0644);

sub sasl_conf
{
	my ($file, $mech) = @_;
	$mech //= 'DIGEST-MD5';
	return <<"EOC";
zklock.sasl_mechanism = '$mech'
zklock.sasl_user = 'zklock'
zklock.sasl_password_file = '$file'
zklock.connect_timeout = '2s'
EOC
}

# --- two instances, one identity ---------------------------------------------
my $node1 = zk_node('node1', extra_conf => sasl_conf("$dir/zklock.pw"));
my $node2 = zk_node('node2', extra_conf => sasl_conf("$dir/zklock.pw"));
# (1.8) zk_lock_status names the SASL user, as the ACLs below do
is(psql1($node1, q{SELECT transport || '|' || identity || '|' || (tls_expires IS NULL) FROM zk_lock_status}),
	'tcp|sasl:zklock|true', 'zk_lock_status: transport tcp, identity sasl:zklock');
pass('two instances connected with SASL DIGEST-MD5');

my $s1 = zk_session($node1, 'holder');
my $s2 = zk_session($node2, 'asker');
zk_hold($s1, 'sasl/a');
my $r = $s2->query(q{SELECT zk_lock_acquire('sasl/a', timeout => '300ms')});
is($r->{sqlstate}, '55P03', "node2 cannot take node1's lock");

# --- ACLs: the identity's alone ---------------------------------------------------
my $py = <<'PY';
import sys
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
hosts, root, password, other = sys.argv[1:5]
def client(user=None, pw=None):
    opts = {"mechanism": "DIGEST-MD5", "username": user, "password": pw} if user else None
    zk = KazooClient(hosts=hosts, sasl_options=opts)
    zk.start(timeout=10)
    return zk
me = client("zklock", password)
def walk(p):
    for c in me.get_children(p):
        yield p + "/" + c
        yield from walk(p + "/" + c)
locks = [p for p in walk(root) if "LOCK-" in p.rsplit("/", 1)[-1]]
print("locks", len(locks))
acl, _ = me.get_acls(locks[0])
print("lock_acl", ",".join(sorted("%s:%s" % (a.id.scheme, a.id.id) for a in acl)))
acl, _ = me.get_acls(root)
print("root_acl", ",".join(sorted("%s:%s" % (a.id.scheme, a.id.id) for a in acl)))
for who, zk in (("anonymous", client()), ("other", client("other", other))):
    for what, f in (("list", lambda: zk.get_children(root)),
                    ("delete", lambda: zk.delete(locks[0]))):
        try:
            f(); print(who, what, "allowed")
        except NoAuthError:
            print(who, what, "denied")
    zk.stop()
me.stop()
PY
my ($out, $err) = ('', '');
IPC::Run::run([ '/usr/bin/python3', '-c', $py, zk_hosts(), zk_root(), $secret, $other ],
	'>', \$out, '2>', \$err, IPC::Run::timeout(60));
note "kazoo: $out $err";
like($out, qr/^locks [1-9]\d*$/m, 'Kazoo authenticated as zklock sees the lock nodes');
like($out, qr/^lock_acl sasl:zklock$/m, 'the lock node is sasl:zklock\'s alone');
like($out, qr/^root_acl sasl:zklock$/m, 'and so is the root');
like($out, qr/^anonymous list denied$/m, 'a client without credentials cannot list the root');
like($out, qr/^anonymous delete denied$/m, 'nor delete the lock node');
like($out, qr/^other delete denied$/m, 'nor can another SASL user');
$s1->query_ok('COMMIT');

# --- a wrong password -----------------------------------------------------------
my $node3 = zk_node('node3', start => 0, extra_conf => sasl_conf("$dir/wrong.pw"));
$node3->start;
$node3->safe_psql('postgres', 'CREATE EXTENSION zklock');
my ($reached, $state, $last) = zk_wait_state($node3, 'auth_failed', 20);
ok($reached, 'a wrong password: the session is refused (auth_failed)')
  or diag("state $state, last_error: $last");
like($last, qr/^authentication failed: .*SASL authentication failed/, 'last_error says SASL authentication failed');
ok(zk_wait_log($node3, qr/LOG:  zklock: ZooKeeper authentication failed\n.*DETAIL:  The ZooKeeper client says: .*SASL authentication failed.*\n.*HINT:  Check the credentials: zklock.sasl_user/, 0, 10),
	'the log says so, and what to check');
# and it tries again (a new handle after a delay), each time refused
# tried again every 5 s (state_since moves on), logged once in the outage
ok(zk_wait_refusals($node3, 3, 40),
	'it tries again, and is refused again: no silent wait');
is(zk_log_count($node3, qr/zklock: ZooKeeper authentication failed/), 1,
	'the failure is logged once in the outage, not at each retry');
my $s3 = zk_session($node3, 'refused');
my $t0 = time();
$r = $s3->query(q{SELECT zk_lock_acquire('sasl/c')});
my $took = time() - $t0;
is($r->{sqlstate}, '08006', 'an acquire on the refused instance fails with 08006');
cmp_ok($took, '<', 2 + 3, 'within zklock.connect_timeout (2 s) and some slack')
  or diag("took ${took}s");

# --- a password file others may read; GSSAPI --------------------------------------
$node3->append_conf('postgresql.conf', sasl_conf("$dir/open.pw"));
$node3->reload;
ok( wait_until(
		sub {
			$last = psql1($node3, q{SELECT coalesce(last_error, '') FROM zk_lock_status});
			$last =~ /zklock.sasl_password_file .* has group or world access/;
		},
		timeout => 20),
	'a password file with group or world access is refused before connecting')
  or diag("last_error: $last");
$node3->append_conf('postgresql.conf', sasl_conf("$dir/zklock.pw", 'GSSAPI'));
$node3->reload;
ok( wait_until(
		sub {
			$last = psql1($node3, q{SELECT coalesce(last_error, '') FROM zk_lock_status});
			$last =~ /zklock.sasl_mechanism is GSSAPI, but zklock.sasl_keytab is empty/;
		},
		timeout => 20),
	'GSSAPI without a keytab is refused before connecting')
  or diag("last_error: $last");

# --- fixed at reload ------------------------------------------------------------------
$node3->append_conf('postgresql.conf', sasl_conf("$dir/zklock.pw"));
$node3->reload;
ok(zk_wait_connected($node3, 20), 'fixed at reload: node3 connects, no restart');
zk_hold($s2, 'sasl/d');
$r = $s3->query(q{SELECT zk_lock_acquire('sasl/d', timeout => '300ms')});
is($r->{sqlstate}, '55P03', "and node3 cannot take node2's lock");
$s2->query_ok('COMMIT');

# --- the password is nowhere -------------------------------------------------------------
foreach my $n ($node1, $node2, $node3)
{
	unlike(slurp_file($n->logfile), qr/\Q$secret\E/, $n->name . "'s log never holds the password");
}
unlike(psql1($node1, q{SELECT string_agg(setting, ' ') FROM pg_settings WHERE name LIKE 'zklock.%'}),
	qr/\Q$secret\E/, 'no setting holds it');

zk_done_check();
done_testing();
