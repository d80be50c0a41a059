# ACLs follow the x509 identity (issue 30): Debian's ZooKeeper with
# secureClientPort on Netty, client certificates required and the x509
# provider, as in test/t/ops/113_tls.pl; zklock over TLS with no digest
# credentials and no SASL, so that its client certificate is its only
# identity:
#  - zk_lock_status shows transport tls, identity x509:<subject> -- the
#    subject in the RFC 2253 form ZooKeeper's X509AuthenticationProvider
#    gives it, most specific part first (its log line "Authenticated Id
#    '...' for Scheme 'x509'" says the same, for a subject of three
#    parts) -- and tls_expires, the certificate's end of validity;
#  - two instances with their own certificates and keys, of one subject
#    (one identity, as instances share digest credentials), lock each
#    other out;
#  - a lock node and the root carry the ACL x509:<subject> alone (ALL);
#  - a client without the identity cannot list the root nor delete the lock
#    node nor create a node under the root: Kazoo over the plain port
#    (anonymous), and Kazoo over TLS with another certificate of the same
#    CA (x509:CN=intruder);
#  - the holder's commit lets the other instance take the lock.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkTls;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $subject = 'CN=pg,OU=db,O=zklock';
zk_tls_start(
	clients => [
		'node1=/O=zklock/OU=db/CN=pg', 'node2=/O=zklock/OU=db/CN=pg',
		'intruder', 'stranger=/O=zklock/OU=db/CN=stranger'
	],
	zkutil_as => 'node1');
my $certs = zk_tls_dir();
my $tls_hosts = zk_tls_hosts();

my $node1 = zk_node('node1', hosts => $tls_hosts, extra_conf => zk_tls_conf('node1'));
my $node2 = zk_node('node2', hosts => $tls_hosts, extra_conf => zk_tls_conf('node2'));

# --- what zk_lock_status says, and what ZooKeeper says --------------------------
my $zklog = PostgreSQL::Test::Utils::slurp_file(zk_dir() . '/server1.log');
my ($logged) = $zklog =~ /Authenticated Id '([^']*)' for Scheme 'x509'/;
is($logged, $subject, 'ZooKeeper authenticated the instances as the RFC 2253 form of the subject');
foreach my $n ($node1, $node2)
{
	is(psql1($n, q{SELECT transport || '|' || identity || '|' ||
	                      (tls_expires > now() AND tls_expires < now() + interval '2 days')
	               FROM zk_lock_status}),
		"tls|x509:$subject|true",
		$n->name . ': zk_lock_status shows transport tls, identity x509:<subject as ZooKeeper logs it> and the expiry');
}

# --- two instances lock each other out --------------------------------------------
my $s1 = zk_session($node1, 'holder');
my $s2 = zk_session($node2, 'asker');
zk_hold($s1, 'ident/a');
my $r = $s2->query(q{SELECT zk_lock_acquire('ident/a', timeout => '300ms')});
is($r->{sqlstate}, '55P03', "node2 cannot take node1's lock (lock_not_available)");

# --- the ACLs, and clients without the identity ------------------------------------
my $py = <<'PY';
import sys
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
plain, secure, root, certs = sys.argv[1:5]
def client(cert=None):
    tls = {}
    if cert:
        tls = {"use_ssl": True, "ca": certs + "/ca.pem", "verify_certs": True,
               "certfile": "%s/%s.pem" % (certs, cert),
               "keyfile": "%s/%s.key" % (certs, cert)}
    zk = KazooClient(hosts=secure if cert else plain, **tls)
    zk.start(timeout=10)
    return zk
me = client("node1")
def walk(p):
    for c in me.get_children(p):
        yield p + "/" + c
        yield from walk(p + "/" + c)
locks = sorted((p for p in walk(root) if "LOCK-" in p.rsplit("/", 1)[-1]), key=len, reverse=True)
print("locks", len(locks))
def acl(p):
    a, _ = me.get_acls(p)
    return ",".join(sorted("%d %s:%s" % (x.perms, x.id.scheme, x.id.id) for x in a))
print("lock_acl", acl(locks[0]))
print("root_acl", acl(root))
for who, zk in (("anonymous", client()), ("intruder", client("intruder"))):
    for what, f in (("list", lambda: zk.get_children(root)),
                    ("delete", lambda: zk.delete(locks[0])),
                    ("create", lambda: zk.create(root + "/intruder-was-here"))):
        try:
            f(); print(who, what, "allowed")
        except NoAuthError:
            print(who, what, "denied")
    zk.stop()
me.stop()
PY
my ($out, $err) = ('', '');
IPC::Run::run([ '/usr/bin/python3', '-c', $py, zk_hosts(), $tls_hosts, zk_root(), $certs ],
	'>', \$out, '2>', \$err, IPC::Run::timeout(60));
note "kazoo: $out $err";
like($out, qr/^locks [1-9]\d*$/m, "Kazoo with the instances' certificate sees the lock node");
like($out, qr/^lock_acl 31 x509:\Q$subject\E$/m, 'the lock node is x509:<subject>\'s alone (ALL)');
like($out, qr/^root_acl 31 x509:\Q$subject\E$/m, 'and so is the root');
foreach my $who (qw(anonymous intruder))
{
	like($out, qr/^$who list denied$/m, "$who cannot list the root");
	like($out, qr/^$who delete denied$/m, "$who cannot delete the lock node");
	like($out, qr/^$who create denied$/m, "$who cannot create a node under the root");
}
is(zk_count_locks(zk_path('ident/a')), 1, 'the lock node is still there');

# --- the holder's commit lets the other instance in -----------------------------------
$s1->query_ok('COMMIT');
is(psql1($node2, q{SELECT zk_lock_acquire_session('ident/a', timeout => '10s') > 0}), 't',
	'node2 takes the lock once node1 commits');

# --- another subject: refused, clearly; and back (review of issue 30) -------------
# A certificate change at reload to another subject (a new session): the
# root and every node are the old subject's, so the instance cannot create
# its probe node; every lock request fails with 42501, the log says why,
# and nothing of the others' is touched.  Back to the shared subject, it
# works again.
my $from = -s $node2->logfile;
$node2->append_conf('postgresql.conf',
	"zklock.ssl_cert_file = '$certs/stranger.pem'\nzklock.ssl_key_file = '$certs/stranger.key'\n");
$node2->reload;
ok(wait_until(sub { psql1($node2, 'SELECT identity FROM zk_lock_status') eq 'x509:CN=stranger,OU=db,O=zklock' },
		timeout => 60, interval => 0.2),
	'after a reload to a certificate of another subject, zk_lock_status names it');
ok(zk_wait_log($node2, qr/refusing to take locks under zklock\.root "[^"]*": cannot create nodes under it/, $from, 60),
	'the log says the root refuses the new identity');
$r = zk_session($node2, 'stranger')->query(q{SELECT zk_lock_acquire_session('ident/b', timeout => '5s')});
is($r->{sqlstate}, '42501', 'a lock request of the other subject fails with 42501');
is(psql1($node1, q{SELECT zk_lock_acquire_session('ident/c', timeout => '10s') > 0}), 't',
	'node1 (the root\'s subject) still locks');
$node2->append_conf('postgresql.conf',
	"zklock.ssl_cert_file = '$certs/node2.pem'\nzklock.ssl_key_file = '$certs/node2.key'\n");
$node2->reload;
ok(wait_until(sub { psql1($node2, 'SELECT identity FROM zk_lock_status') eq "x509:$subject"
		&& psql1($node2, 'SELECT state FROM zk_lock_status') eq 'connected' },
		timeout => 60, interval => 0.2),
	'back to the shared subject, node2 connects again');
ok(wait_until(sub {
		my ($rc, $out) = $node2->psql('postgres',
			q{SELECT zk_lock_acquire('ident/d', timeout => '5s') > 0});
		return $rc == 0 && $out eq 't';
	}, timeout => 60, interval => 0.5),
	'and locks again');

# --- TLS and digest credentials: two subjects, one digest user ----------------------
# Each node carries both identities of its creator; instances of other
# subjects sharing the digest user still work together.
my $auth_file = "$certs/zk_credentials";
open(my $af, '>', $auth_file) or die "$auth_file: $!";
print $af "digest:zklock:s3cret\n";
close($af);
chmod(0600, $auth_file) or die;
my $dual_root = zk_root() . '-dual';
my $node3 = zk_node('node3', hosts => $tls_hosts, root => $dual_root,
	extra_conf => zk_tls_conf('node1') . "zklock.auth_file = '$auth_file'\n");
my $node4 = zk_node('node4', hosts => $tls_hosts, root => $dual_root,
	extra_conf => zk_tls_conf('stranger') . "zklock.auth_file = '$auth_file'\n");
is(psql1($node3, q{SELECT transport || '|' || identity FROM zk_lock_status}),
	'tls|digest:zklock', 'TLS and digest: zk_lock_status names the digest identity');
my $d3 = zk_session($node3, 'dual holder');
zk_hold($d3, 'dual/a');
$r = zk_session($node4, 'dual asker')->query(q{SELECT zk_lock_acquire('dual/a', timeout => '300ms')});
is($r->{sqlstate}, '55P03', 'the other subject with the same digest user is locked out by the holder');
$d3->query_ok('COMMIT');
is(psql1($node4, q{SELECT zk_lock_acquire_session('dual/a', timeout => '10s') > 0}), 't',
	'and takes the lock once node3 commits');
is(psql1($node3, q{SELECT zk_lock_acquire_session('dual/b', timeout => '10s') > 0}), 't',
	'node3 still locks after node4\'s root check');
($out, $err) = ('', '');
IPC::Run::run([ '/usr/bin/python3', '-c', <<'PY', $tls_hosts, $dual_root, $certs ],
import sys
from kazoo.client import KazooClient
secure, root, certs = sys.argv[1:4]
zk = KazooClient(hosts=secure, use_ssl=True, ca=certs + "/ca.pem", verify_certs=True,
                 certfile=certs + "/node1.pem", keyfile=certs + "/node1.key",
                 auth_data=[("digest", "zklock:s3cret")])
zk.start(timeout=10)
a, _ = zk.get_acls(root)
print("root_acl", ",".join(sorted("%d %s" % (x.perms, x.id.scheme) for x in a)))
zk.stop()
PY
	'>', \$out, '2>', \$err, IPC::Run::timeout(60));
note "kazoo: $out $err";
like($out, qr/^root_acl 31 digest,31 x509$/m, 'the root carries both identities');

zk_done_check();
done_testing();
