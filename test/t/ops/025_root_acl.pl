
# zklock.auth and nodes made by others (issue 9, finding 10).  ZooKeeper
# checks the right to delete a node on its parent, so a resource node that
# someone else made first, open to everyone, let anyone delete zklock's lock
# nodes under it although zklock.auth was set.  Now:
#  - a root made by someone else, open to everyone, is restricted to the
#    credentials, and so is every node under it (the log says so);
#  - a client without the credentials can then neither delete zklock's lock
#    nodes (even under a resource node it made itself beforehand), nor create
#    nodes under the root, nor delete the root;
#  - a root that zklock cannot restrict makes every lock request fail with
#    42501, and the log says why.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;

zk_start();
my $secret = 's3cr3t-' . int(rand(1e9));
my $root = zk_root();
my $root2 = "${root}_other";

# kazoo, with (cred) or without ("-") credentials, runs one command
my $py = <<'PY';
import sys
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError, NotEmptyError
from kazoo.security import make_digest_acl
hosts, cred, cmd = sys.argv[1:4]
args = sys.argv[4:]
zk = KazooClient(hosts=hosts, auth_data=[("digest", cred)] if cred != "-" else None)
zk.start(timeout=10)
def attempt(what, f):
    try:
        f(); print(what, "allowed")
    except NoAuthError:
        print(what, "denied")
    except NotEmptyError:
        print(what, "not-empty")
    except NoNodeError:
        print(what, "no-node")
if cmd == "mkopen":          # make paths open to everyone
    for p in args:
        zk.ensure_path(p)
elif cmd == "mkprivate":     # make a path only (user, password) may change
    user, pw = cred.split(":")
    zk.create(args[0], b"", acl=[make_digest_acl(user, pw, all=True)], makepath=True)
elif cmd == "locks":         # lock nodes below a path
    def walk(p):
        for c in zk.get_children(p):
            yield p + "/" + c
            yield from walk(p + "/" + c)
    for p in walk(args[0]):
        if "LOCK-" in p.rsplit("/", 1)[-1]:
            print(p)
elif cmd == "attack":        # what a client without credentials may do
    lock, root = args
    attempt("delete-lock", lambda: zk.delete(lock))
    attempt("create-under-root", lambda: zk.create(root + "/evil", b""))
    attempt("delete-root", lambda: zk.delete(root))
zk.stop()
PY
sub kz
{
	my ($cred, $cmd, @args) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ '/usr/bin/python3', '-c', $py, zk_hosts(), $cred, $cmd, @args ],
		'>', \$out, '2>', \$err, IPC::Run::timeout(60));
	diag($err) if $err ne '';
	return $out;
}

# before zklock ever runs, someone makes the root and a resource node, open
kz('-', 'mkopen', "$root/pre/made");
# and someone else makes another root that only they may change
kz('intruder:pw', 'mkprivate', $root2);

my $auth = "zklock.auth = 'digest:zklock:$secret'";
my $node1 = zk_node('node1', extra_conf => $auth);
like(slurp_file($node1->logfile),
	qr/zklock.root "\Q$root\E" was open to clients without zklock's ZooKeeper credentials/,
	'the worker restricts the root it found open, and says so');

my $h = zk_session($node1, 'holder');
$h->query_ok(q{SELECT zk_lock_acquire_session('pre/made')});
my @locks = grep { m{/pre/made/} } split /\n/, kz("zklock:$secret", 'locks', $root);
is(scalar @locks, 1, 'the lock node is under the resource node made beforehand');

my $out = kz('-', 'attack', $locks[0], $root);
like($out, qr/^delete-lock denied$/m,
	'a client without the credentials cannot delete the lock node (finding 10)');
like($out, qr/^create-under-root denied$/m, '... nor create a node under the root');
like($out, qr/^delete-root (denied|not-empty)$/m, '... nor delete the root');
is(scalar(grep { m{/pre/made/} } split /\n/, kz("zklock:$secret", 'locks', $root)), 1,
	'the lock node is still there');
$h->query_ok(q{SELECT zk_lock_release_all()});

# a root zklock cannot restrict: every lock request fails with 42501
my $node2 = zk_node('node2', extra_conf => $auth, root => $root2);
my $r = zk_session($node2, 'refused')->query(q{SELECT zk_lock_try_acquire('x')});
is($r->{sqlstate}, '42501', 'a root that others control makes lock requests fail with 42501');
like($r->{err}, qr/open to clients without zklock's ZooKeeper credentials/, '... saying why');
like(slurp_file($node2->logfile), qr/refusing to take locks under zklock.root "\Q$root2\E"/,
	'and the log says so');

# a walk cut short (connection lost, worker restarted) leaves the root
# restricted and nodes under it open: the next check must walk again
# (reviewer's case: before, a restricted root was taken as safe as it was)
my $root3 = "${root}_walk";
kz("zklock:$secret", 'mkprivate', $root3);
kz("zklock:$secret", 'mkopen', "$root3/pre/made");
my $node3 = zk_node('node3', extra_conf => $auth, root => $root3);
my $h3 = zk_session($node3, 'holder3');
$h3->query_ok(q{SELECT zk_lock_acquire_session('pre/made')});
my @locks3 = grep { m{/pre/made/} } split /\n/, kz("zklock:$secret", 'locks', $root3);
is(scalar @locks3, 1, 'a lock node under a node left open by a walk cut short');
like(kz('-', 'attack', $locks3[0], $root3), qr/^delete-lock denied$/m,
	'a client without the credentials cannot delete it: the walk was done again');
$h3->query_ok(q{SELECT zk_lock_release_all()});
$h3->quit;

$h->quit;
# the tree is readable with the credentials only
ok(wait_until(sub { kz("zklock:$secret", 'locks', $root) eq '' }, timeout => 15),
	'no lock node left under the root');
done_testing();
