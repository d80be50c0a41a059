
# ZooKeeper credentials (issue 9, finding 8):
#  - with digest credentials, lock nodes are readable and removable only
#    with the same credentials, whether they come from zklock.auth_file (a
#    file only the server's OS user can read) or from zklock.auth (1.0's
#    setting, deprecated, still working); instances using either interoperate;
#  - nobody reads the password: not a pg_monitor member (pg_read_all_settings)
#    nor a plain user, by SHOW, SHOW ALL, current_setting(), pg_settings or
#    pg_file_settings (even when granted it), nor the superuser by SHOW;
#  - no value, good or bad, reaches the server log: a malformed or
#    unsupported value stops the worker with a message that does not quote
#    it, and the server keeps running;
#  - a credentials file with group or world access is refused, and the
#    worker takes it as soon as its mode is fixed, without a restart.
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
my @bad = map { "b4d-$_-" . int(rand(1e9)) } 1 .. 6;

sub write_file_mode
{
	my ($path, $content, $mode) = @_;
	chmod($mode, $path) if -e $path;	# never the new content, old mode
	open(my $fh, '>', $path) or die "could not write $path: $!";
	print $fh $content;
	close($fh);
	chmod($mode, $path) or die "could not chmod $path: $!";
	return;
}

my $dir = PostgreSQL::Test::Utils::tempdir();
my $auth_file = "$dir/zk_credentials";
write_file_mode($auth_file, "digest:zklock:$secret\n", 0600);

# node1 reads the file; node2 is configured as zklock 1.0 was
my $node1 = zk_node('node1', extra_conf => "zklock.auth_file = '$auth_file'");
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

# another instance with the same credentials (from zklock.auth) sees and
# respects it
is(psql1($node2, q{SELECT zk_lock_try_acquire('acl/r') IS NULL}), 't',
	'an instance with the same credentials in zklock.auth is refused the lock');
is(psql1($node2, q{SELECT count(*) FROM zk_locks WHERE resource = 'acl/r' AND instance = 'node1'}),
	'1', 'and lists the holder');

# a client without the credentials can neither list, read nor delete
my $out = zk_auth('probe');
like($out, qr/^acl digest$/m, 'the node carries a digest ACL only');
like($out, qr/^list denied$/m, 'a client without credentials cannot list the tree');
like($out, qr/^read denied$/m, 'nor read a lock node');
like($out, qr/^delete denied$/m, 'nor delete it');
like(zk_auth('count'), qr/^locks 2$/m, 'the nodes are still there');

# and the other way round: node2's nodes carry the ACL too
$h->query_ok('SELECT zk_lock_release_all()');
ok(wait_until(sub { zk_auth('count') =~ /^locks 0$/m }, timeout => 15),
	'released: no lock node left');
my $h2 = zk_session($node2, 'holder2');
$h2->query_ok(q{SELECT zk_lock_acquire_session('acl/r')});
$out = zk_auth('probe');
like($out, qr/^acl digest$/m, 'a node of the zklock.auth instance carries a digest ACL only');
like($out, qr/^delete denied$/m, 'and cannot be deleted without the credentials');
is(($node1->psql('postgres', q{SELECT zk_lock_try_acquire('acl/r') IS NULL}))[1], 't',
	'the zklock.auth_file instance is refused that lock');
$h2->query_ok('SELECT zk_lock_release_all()');

# --- nobody reads the password ---------------------------------------------
my @queries = (
	'SHOW zklock.auth',
	'SHOW zklock.auth_file',
	q{SELECT current_setting('zklock.auth')},
	q{SELECT current_setting('zklock.auth', true)},
	'SHOW ALL',
	'SELECT * FROM pg_settings',
	'SELECT * FROM pg_file_settings',
);
foreach my $node ($node1, $node2)
{
	my $name = $node->name;
	$node->safe_psql('postgres', q{
		CREATE ROLE mon LOGIN IN ROLE pg_monitor;
		CREATE ROLE plain LOGIN;
	});
	foreach my $role ('mon', 'plain', undef)
	{
		my $who = $role // 'the superuser';
		foreach my $q (@queries)
		{
			my ($rc, $o, $e) = $node->psql('postgres', $q,
				extra_params => [ defined $role ? ('-U', $role) : () ]);
			unlike("$o\n$e", qr/\Q$secret\E/, "$name: $who does not read the password by $q")
			  unless !defined $role && $q =~ /pg_file_settings/ && $name eq 'node2';
		}
	}
	my ($rc, $o, $e) = $node->psql('postgres', 'SHOW zklock.auth',
		extra_params => [ '-U', 'mon' ]);
	is($o, $name eq 'node1' ? '' : '********',
		"$name: a pg_monitor member's SHOW zklock.auth shows a mask, or nothing");
	($rc, $o, $e) = $node->psql('postgres', 'SHOW zklock.auth',
		extra_params => [ '-U', 'plain' ]);
	isnt($rc, 0, "$name: a plain user cannot SHOW zklock.auth");
	is($node->safe_psql('postgres',
			q{SELECT count(*) FROM pg_settings WHERE name = 'zklock.auth'},
			extra_params => [ '-U', 'mon' ]),
		'0', "$name: zklock.auth is not in pg_settings");
}
is(psql1($node2, 'SHOW zklock.auth'), '********', 'the superuser\'s SHOW shows the mask too');
is(($node1->psql('postgres', 'SHOW zklock.auth_file', extra_params => [ '-U', 'mon' ]))[1],
	$auth_file, 'a pg_monitor member sees the file\'s name');
# a site that lets its monitoring read pg_file_settings: the file's name only
$node1->safe_psql('postgres', q{
	GRANT SELECT ON pg_file_settings TO mon;
	GRANT EXECUTE ON FUNCTION pg_show_all_file_settings() TO mon;
});
$out = ($node1->psql('postgres',
	q{SELECT name || '=' || setting FROM pg_file_settings WHERE name LIKE 'zklock.auth%'},
	extra_params => [ '-U', 'mon' ]))[1];
is($out, "zklock.auth_file=$auth_file", 'pg_file_settings, if granted, shows the file\'s name only');
my ($rc, $err);
($rc, $out, $err) = $node2->psql('postgres', 'SELECT * FROM pg_file_settings',
	extra_params => [ '-U', 'mon' ]);
isnt($rc, 0, 'pg_file_settings is not readable by pg_monitor unless granted');

# values given at run time are accepted (a rejected one would be logged in
# full by PostgreSQL's "invalid value for parameter") and never echoed.
# (The statements themselves are the administrator's to keep out of the
# log: the test cluster logs every statement, so these sessions do not.)
my $quiet = $node1->connstr('postgres')
  . q{ options='-c log_statement=none -c log_min_error_statement=panic'};
my ($rc2, $o2, $e2) = $node1->psql('postgres',
	qq{ALTER SYSTEM SET zklock.auth = 'sasl:zk:$bad[0]'}, connstr => $quiet);
is($rc2, 0, 'ALTER SYSTEM accepts any value of zklock.auth')
  or diag($e2);
$node1->safe_psql('postgres', 'ALTER SYSTEM RESET zklock.auth');
($rc2, $o2, $e2) = $node1->psql('postgres', qq{SET zklock.auth = 'digest:$bad[1]'},
	connstr => $quiet);
isnt($rc2, 0, 'SET zklock.auth is refused (it needs a restart)');
unlike($e2, qr/\Q$bad[1]\E/, 'and the refusal does not quote the value');
($rc2, $o2, $e2) = $node1->psql('postgres',
	qq{SELECT set_config('zklock.auth', 'digest:x:$bad[1]', false)}, connstr => $quiet);
isnt($rc2, 0, 'set_config() is refused too');
unlike($e2, qr/\Q$bad[1]\E/, 'without quoting the value');
unlike(slurp_file($node1->logfile), qr/\Q$bad[0]\E|\Q$bad[1]\E/, 'no such value is in the server log');


my $node3 = zk_node('node3', start => 0,
	extra_conf => "zklock.auth = 'sasl:zk:$bad[2]'\nzklock.connect_timeout = '2s'");
$node3->start;
$node3->safe_psql('postgres', 'CREATE EXTENSION zklock');
ok(zk_wait_log($node3, qr/zklock\.auth asks for an authentication scheme zklock does not support/, 0, 30),
	'an unsupported scheme: the worker says so');
like(slurp_file($node3->logfile), qr/digest credentials only: TLS \(and its x509 identity\) is zklock\.ssl, SASL is zklock\.sasl_mechanism/, 'and why');
($rc, $out, $err) = $node3->psql('postgres', q{SELECT zk_lock_try_acquire('acl/x')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
isnt($rc, 0, 'no lock is taken without the credentials asked for');
# the worker ends at once each time it starts: the request finds none
# running (or one that stops under it): 55000, as the errors table of
# doc/sql.md says
like($err, qr/ERROR:  55000: (zklock worker is not running|could not .*: the zklock worker (stopped|restarted))/,
	'55000: the worker is not running');
like($err, qr/HINT:  .*(server log|worker)/, 'with a hint about the worker');
is($node3->safe_psql('postgres', 'SELECT 1'), '1', 'the server runs on');

# a malformed file, then one with group access, then the right mode
my $file3 = "$dir/zk_credentials3";
write_file_mode($file3, "digest:$bad[3]\n", 0600);
$node3->append_conf('postgresql.conf', "zklock.auth = ''\nzklock.auth_file = '$file3'");
$node3->restart;
my $off = 0;
ok(zk_wait_log($node3, qr/the file named by zklock\.auth_file does not hold "digest:user:password"/, $off, 30),
	'a malformed credentials file: the worker says so');
$off = -s $node3->logfile;
write_file_mode($file3, "digest:zklock:$secret\n", 0640);
ok(zk_wait_log($node3, qr/zklock\.auth_file "\Q$file3\E" has group or world access/, $off, 30),
	'a credentials file with group access is refused');
($rc, $out, $err) = $node3->psql('postgres', q{SELECT zk_lock_try_acquire('acl/x')});
isnt($rc, 0, 'and no lock is taken meanwhile');
chmod(0600, $file3);
ok(zk_wait_connected($node3), 'once its mode is right the worker connects, without a restart');
my $h3 = zk_session($node3, 'holder3');
is($h3->query_ok(q{SELECT zk_lock_acquire_session('acl/n3') > 0}), 't',
	'locks are taken with those credentials');
$out = zk_auth('probe');
like($out, qr/^acl digest$/m, 'and their nodes carry a digest ACL only');
like($out, qr/^delete denied$/m, 'which stops a client without credentials from deleting them');
is(psql1($node1, q{SELECT zk_lock_try_acquire('acl/n3') IS NULL}), 't',
	'another instance with the credentials sees the lock');
$h3->quit;
$node3->stop;

# both settings at once: ambiguous, refused
$node3->append_conf('postgresql.conf', "zklock.auth = 'digest:zklock:$bad[4]'");
$node3->start;
ok(zk_wait_log($node3, qr/zklock\.auth and zklock\.auth_file are both set/, 0, 30),
	'zklock.auth and zklock.auth_file together are refused');
$node3->stop;

# the deprecated setting says so
like(slurp_file($node2->logfile), qr/zklock\.auth is deprecated/, 'zklock.auth is reported deprecated');

foreach my $node ($node1, $node2, $node3)
{
	my $log = slurp_file($node->logfile);
	unlike($log, qr/\Q$secret\E/, $node->name . ': the password is not in the server log');
	foreach my $b (@bad)
	{
		unlike($log, qr/\Q$b\E/, $node->name . ": the rejected value $b is not in the server log");
	}
}

$h->quit;
$h2->quit;
ok(wait_until(sub { zk_auth('count') =~ /^locks 0$/m }, timeout => 15),
	'no lock node left');
done_testing();
