
# zklock.auth: with digest credentials, lock nodes are readable and
# removable only with the same credentials; the setting is hidden from
# non-superusers and absent from the server log; SASL/TLS are refused.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/..";
use ZkLockTest;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;

zk_start();
my $secret = 's3cr3t-' . int(rand(1e9));
my $node1 = zk_node('node1', extra_conf => "zklock.auth = 'digest:zklock:$secret'");
my $node2 = zk_node('node2', extra_conf => "zklock.auth = 'digest:zklock:$secret'");

my $h = zk_session($node1, 'holder');
$h->query_ok(q{SELECT zk_lock_acquire_session('acl/r')});
# the tree is readable with the credentials only: list it with them
my $py = <<'PY';
import sys
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
hosts, root, cred, cmd = sys.argv[1:5]
auth = KazooClient(hosts=hosts, auth_data=[("digest", cred)]); auth.start(timeout=10)
def walk(p):
    for c in auth.get_children(p):
        yield p + "/" + c
        yield from walk(p + "/" + c)
locks = [p for p in walk(root) if "LOCK-" in p.rsplit("/", 1)[-1]]
print("locks", len(locks))
if cmd == "probe":
    zk = KazooClient(hosts=hosts); zk.start(timeout=10)
    acl, _ = auth.get_acls(locks[0])
    print("acl", ",".join(sorted(set(a.id.scheme for a in acl))))
    for what, f in (("list", lambda: zk.get_children(root)),
                    ("read", lambda: zk.get(locks[0])),
                    ("delete", lambda: zk.delete(locks[0]))):
        try:
            f(); print(what, "allowed")
        except NoAuthError:
            print(what, "denied")
    zk.stop()
auth.stop()
PY
sub zk_auth
{
	my ($cmd) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ '/usr/bin/python3', '-c', $py, zk_hosts(), zk_root(), "zklock:$secret", $cmd ],
		'>', \$out, '2>', \$err, IPC::Run::timeout(60));
	diag($err) if $err ne '';
	return $out;
}
like(zk_auth('count'), qr/^locks 2$/m, 'the lock node and its parent\'s exist');

# another instance with the same credentials sees and respects it
is(psql1($node2, q{SELECT zk_lock_try_acquire('acl/r') IS NULL}), 't',
	'an instance with the same credentials is refused the lock');
is(psql1($node2, q{SELECT count(*) FROM zk_locks WHERE resource = 'acl/r' AND instance = 'node1'}),
	'1', 'and lists the holder');

# a client without the credentials can neither list, read nor delete
my $out = zk_auth('probe');
like($out, qr/^acl digest$/m, 'the node carries a digest ACL only');
like($out, qr/^list denied$/m, 'a client without credentials cannot list the tree');
like($out, qr/^read denied$/m, 'nor read a lock node');
like($out, qr/^delete denied$/m, 'nor delete it');
like(zk_auth('count'), qr/^locks 2$/m, 'the nodes are still there');

# the setting is for superusers only, and never logged
$node1->safe_psql('postgres', 'CREATE ROLE plain LOGIN');
my ($rc, $o, $e) = $node1->psql('postgres', 'SHOW zklock.auth',
	extra_params => [ '-U', 'plain' ]);
isnt($rc, 0, 'a plain user cannot SHOW zklock.auth');
is($node1->safe_psql('postgres',
		q{SELECT count(*) FROM pg_settings WHERE name = 'zklock.auth'},
		extra_params => [ '-U', 'plain' ]),
	'0', 'nor see it in pg_settings');
unlike(slurp_file($node1->logfile), qr/\Q$secret\E/, 'the secret is not in the server log');

# SASL and TLS are refused loudly
($rc, $o, $e) = $node1->psql('postgres', q{ALTER SYSTEM SET zklock.auth = 'sasl:zk:x'});
like($e, qr/supports neither SASL nor TLS/, 'asking for SASL is an error that says why');

$h->query_ok('SELECT zk_lock_release_all()');
$h->quit;
ok(wait_until(sub { zk_auth('count') =~ /^locks 0$/m }, timeout => 15),
	'no lock node left');
done_testing();
