
# SASL GSSAPI (Kerberos) to ZooKeeper (issue 30): an MIT KDC (krb5-kdc) on
# loopback with a realm made here (ZKLOCK.TEST: kdb5_util, kadmin.local),
# Debian's ZooKeeper with Krb5LoginModule and its keytab
# (zookeeper/localhost), zklock with a keytab of its own principal (zklock)
# and the C client of scripts/build-zkclient.sh (Cyrus SASL's GSSAPI
# plugin, libsasl2-modules-gssapi-mit):
#  - two instances authenticate as zklock@ZKLOCK.TEST and lock each other
#    out; their nodes and root carry the ACL of that identity alone
#    (sasl:zklock@ZKLOCK.TEST): a client without it cannot delete them;
#  - a keytab others may read is refused before connecting;
#  - with the KDC gone, a new instance cannot authenticate: the session is
#    refused (auth_failed), said in last_error, and requests fail with 08006.
# The test reads ZooKeeper as its super user (a superDigest), since the
# nodes are zklock's principal's alone.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkKerberos;

use File::Copy qw(copy);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

# --- the realm, and ZooKeeper with Kerberos (test/ZkKerberos.pm) ----------------
my $dir = krb_start(principals => ['zklock']);
krb_keytab('zklock', "$dir/zklock.keytab");
my $super = krb_zk_start();

sub krb_conf
{
	return krb_zklock_conf($_[0]);
}

foreach my $n (1 .. 3)
{
	copy("$dir/zklock.keytab", "$dir/node$n.keytab") or die "copy: $!";
	chmod(0600, "$dir/node$n.keytab");
}

# --- two instances, one principal ----------------------------------------------------
my $node1 = zk_node('node1', extra_conf => krb_conf("$dir/node1.keytab"));
my $node2 = zk_node('node2', extra_conf => krb_conf("$dir/node2.keytab"));
# (1.8) zk_lock_status names the keytab's principal, as the ACLs below do
is(psql1($node1, q{SELECT transport || '|' || identity || '|' || (tls_expires IS NULL) FROM zk_lock_status}),
	'tcp|sasl:zklock@ZKLOCK.TEST|true', 'zk_lock_status: transport tcp, identity sasl:zklock@ZKLOCK.TEST');
pass('two instances connected with Kerberos');
like(slurp_file(zk_dir() . '/server1.log'),
	qr/Successfully authenticated client: authenticationID=zklock\@ZKLOCK.TEST/,
	'ZooKeeper authenticated them as zklock@ZKLOCK.TEST');

my $s1 = zk_session($node1, 'holder');
my $s2 = zk_session($node2, 'asker');
zk_hold($s1, 'krb/a');
my $r = $s2->query(q{SELECT zk_lock_acquire('krb/a', timeout => '300ms')});
is($r->{sqlstate}, '55P03', "node2 cannot take node1's lock");

my $py = <<'PY';
import sys
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
hosts, root, super_pw = sys.argv[1:4]
su = KazooClient(hosts=hosts, auth_data=[("digest", "super:" + super_pw)]); su.start(timeout=10)
def walk(p):
    for c in su.get_children(p):
        yield p + "/" + c
        yield from walk(p + "/" + c)
locks = [p for p in walk(root) if "LOCK-" in p.rsplit("/", 1)[-1]]
acl, _ = su.get_acls(locks[0])
print("lock_acl", ",".join(sorted("%s:%s" % (a.id.scheme, a.id.id) for a in acl)))
acl, _ = su.get_acls(root)
print("root_acl", ",".join(sorted("%s:%s" % (a.id.scheme, a.id.id) for a in acl)))
zk = KazooClient(hosts=hosts); zk.start(timeout=10)
try:
    zk.delete(locks[0]); print("anonymous delete allowed")
except NoAuthError:
    print("anonymous delete denied")
zk.stop(); su.stop()
PY
my ($out, $err) = ('', '');
IPC::Run::run([ '/usr/bin/python3', '-c', $py, zk_hosts(), zk_root(), $super ],
	'>', \$out, '2>', \$err, IPC::Run::timeout(60));
note "kazoo: $out $err";
like($out, qr/^lock_acl sasl:zklock\@ZKLOCK\.TEST$/m, 'the lock node is sasl:zklock@ZKLOCK.TEST\'s alone');
like($out, qr/^root_acl sasl:zklock\@ZKLOCK\.TEST$/m, 'and so is the root');
like($out, qr/^anonymous delete denied$/m, 'a client without the principal cannot delete the lock node');
$s1->query_ok('COMMIT');

# --- a keytab others may read -----------------------------------------------------------
chmod(0644, "$dir/node3.keytab");
my $node3 = zk_node('node3', start => 0, extra_conf => krb_conf("$dir/node3.keytab"));
$node3->start;
$node3->safe_psql('postgres', 'CREATE EXTENSION zklock');
my $last = '';
ok( wait_until(
		sub {
			$last = psql1($node3, q{SELECT coalesce(last_error, '') FROM zk_lock_status});
			$last =~ /zklock.sasl_keytab .* has group or world access/;
		},
		timeout => 20),
	'a keytab with group or world access is refused before connecting')
  or diag("last_error: $last");

# --- the KDC gone -------------------------------------------------------------------------
krb_stop_kdc();
chmod(0600, "$dir/node3.keytab");
$node3->reload;
(my $reached, my $state, $last) = zk_wait_state($node3, 'auth_failed', 30);
ok($reached, 'the KDC unreachable: a new session cannot authenticate (auth_failed)')
  or diag("state $state, last_error: $last");
like($last, qr/^authentication failed: .*SASL authentication/, 'last_error says SASL authentication failed');
like($last, qr/Kerberos: Cannot contact any KDC for realm 'ZKLOCK.TEST'/,
	"and Kerberos's reason: the KDC cannot be contacted");
ok(zk_wait_log($node3, qr/LOG:  zklock: ZooKeeper authentication failed\n.*DETAIL:  .*Cannot contact any KDC.*\n.*HINT:  The KDC of zklock's realm does not answer/, 0, 10),
	'the log says so, and to check the KDC');
# tried again every 5 s: wait for two more refusals (state_since moves on)
ok(zk_wait_refusals($node3, 3, 40),
	'the worker tried again, and was refused again');
my @lines = slurp_file($node3->logfile) =~ /LOG:  zklock: ZooKeeper authentication failed/g;
is(scalar(@lines), 1, 'the failure of one kind is logged once in the outage, not at each retry');
my $s3 = zk_session($node3, 'refused');
my $t0 = time();
$r = $s3->query(q{SELECT zk_lock_acquire('krb/c')});
my $took = time() - $t0;
is($r->{sqlstate}, '08006', 'an acquire on that instance fails with 08006');
cmp_ok($took, '<', 2 + 3, 'within zklock.connect_timeout (2 s) and some slack')
  or diag("took ${took}s");
# the instances that authenticated before keep their sessions
is(psql1($node1, 'SELECT state FROM zk_lock_status'), 'connected',
	'an instance authenticated before the KDC went keeps its session');

zk_done_check();
done_testing();
