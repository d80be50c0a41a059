
# Kerberos completed (issue 30): zklock.sasl_principal, and a reload that
# names another keytab or principal used by the next session.  The realm
# and ZooKeeper as in 117_kerberos.pl (an MIT KDC on loopback), with two
# client principals, zklock and zklock2, in keytabs a (zklock), b (zklock2)
# and both (zklock first):
#  - keytab a: ZooKeeper authenticates zklock;
#  - reload to keytab b: the next session is zklock2's (before, the
#    worker's credential cache kept zklock's tickets, and the session was
#    zklock's again);
#  - keytab both with zklock.sasl_principal = 'zklock', then 'zklock2':
#    the session is that principal's; 'nobody': refused before
#    connecting, said in last_error and the log in words, and lock
#    requests fail with 08006 within zklock.connect_timeout.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Digest::SHA qw(sha1_base64);
use File::Copy qw(copy);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $dir = PostgreSQL::Test::Utils::tempdir('krb');
my $kdc_port = PostgreSQL::Test::Cluster::get_free_port();

sub write_file
{
	my ($path, $content, $mode) = @_;
	open(my $fh, '>', $path) or die "could not write $path: $!";
	print $fh $content;
	close($fh);
	chmod($mode // 0644, $path) or die "chmod $path: $!";
	return;
}

# --- the realm ---------------------------------------------------------------
write_file("$dir/krb5.conf", <<"EOC");
[libdefaults]
 default_realm = ZKLOCK.TEST
 dns_lookup_realm = false
 dns_lookup_kdc = false
 rdns = false
 udp_preference_limit = 1
[realms]
 ZKLOCK.TEST = {
  kdc = 127.0.0.1:$kdc_port
 }
[domain_realm]
 localhost = ZKLOCK.TEST
EOC
write_file("$dir/kdc.conf", <<"EOC");
[kdcdefaults]
 kdc_ports = $kdc_port
 kdc_tcp_ports = $kdc_port
[realms]
 ZKLOCK.TEST = {
  database_name = $dir/principal
  key_stash_file = $dir/stash
  acl_file = $dir/kadm5.acl
 }
[logging]
 kdc = FILE:$dir/kdc.log
EOC
# the servers (the nodes below) and every tool read this realm's krb5.conf
$ENV{KRB5_CONFIG} = "$dir/krb5.conf";
$ENV{KRB5_KDC_PROFILE} = "$dir/kdc.conf";
sub run_ok
{
	my (@cmd) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(60))
	  or BAIL_OUT("@cmd failed: $err");
	return;
}
run_ok('/usr/sbin/kdb5_util', 'create', '-s', '-r', 'ZKLOCK.TEST', '-P', 'master-' . int(rand(1e9)));
foreach my $p ('zookeeper/localhost', 'zklock', 'zklock2', 'zklocx')
{
	run_ok('/usr/sbin/kadmin.local', '-q', "addprinc -randkey $p");
}
run_ok('/usr/sbin/kadmin.local', '-q', "ktadd -norandkey -k $dir/zk.keytab zookeeper/localhost");
run_ok('/usr/sbin/kadmin.local', '-q', "ktadd -norandkey -k $dir/a.keytab zklock");
run_ok('/usr/sbin/kadmin.local', '-q', "ktadd -norandkey -k $dir/b.keytab zklock2");
run_ok('/usr/sbin/kadmin.local', '-q', "ktadd -norandkey -k $dir/both.keytab zklock zklock2");
# -norandkey: the keys stay (a plain ktadd makes new ones, and the
# keytabs written before would hold stale keys)
run_ok('/usr/sbin/kadmin.local', '-q', "ktadd -norandkey -k $dir/x.keytab zklocx");
chmod(0600, "$dir/$_.keytab") foreach qw(a b both x);
my $kdc = IPC::Run::start([ '/usr/sbin/krb5kdc', '-n', '-P', "$dir/kdc.pid" ],
	'<', \undef, '>', "$dir/kdc.out", '2>&1');
END { $kdc->kill_kill if $kdc; }
ok(wait_until(sub { -s "$dir/kdc.log" && slurp_file("$dir/kdc.log") =~ /commencing operation/ }, timeout => 10),
	'the KDC serves the realm ZKLOCK.TEST on loopback');

# --- ZooKeeper with Kerberos ------------------------------------------------------
write_file("$dir/jaas.conf", <<"EOJ");
Server {
  com.sun.security.auth.module.Krb5LoginModule required
  useKeyTab=true
  keyTab="$dir/zk.keytab"
  storeKey=true
  useTicketCache=false
  principal="zookeeper/localhost\@ZKLOCK.TEST";
};
EOJ
chmod(0644, "$dir/zk.keytab");
my $super = 'super-' . int(rand(1e9));
my $digest = sha1_base64("super:$super");
$digest .= '=' while length($digest) % 4;
write_file("$dir/zk_krb.cfg",
	"authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n"
	  . "DigestAuthenticationProvider.superDigest=super:$digest\n");
{
	local $ENV{ZK_JVM_OPTS} = "-Djava.security.auth.login.config=$dir/jaas.conf -Djava.security.krb5.conf=$dir/krb5.conf";
	zk_start(args => [ '--extra-config', "$dir/zk_krb.cfg" ]);
}
$ENV{ZKUTIL_AUTH} = "super:$super";
like(slurp_file(zk_dir() . '/server1.log'), qr/Server successfully logged in/,
	'ZooKeeper logged in to the KDC with its keytab');


my $zklog = zk_dir() . '/server1.log';
sub authenticated
{
	my ($who) = @_;
	my @n = slurp_file($zklog) =~ /Successfully authenticated client: authenticationID=\Q$who\E\@ZKLOCK\.TEST;/g;
	return scalar(@n);
}
sub set_krb
{
	my ($node, $keytab, $principal) = @_;
	$node->append_conf('postgresql.conf',
		"zklock.sasl_keytab = '$dir/$keytab.keytab'\nzklock.sasl_principal = '$principal'\n");
	$node->reload;
	return;
}

my $node = zk_node('node1', extra_conf => <<"EOC");
zklock.sasl_mechanism = 'GSSAPI'
zklock.sasl_keytab = '$dir/a.keytab'
zklock.sasl_host = 'localhost'
zklock.connect_timeout = '2s'
zklock.session_timeout = '4s'
EOC
cmp_ok(authenticated('zklock'), '>=', 1, 'keytab a: ZooKeeper authenticated zklock');
is(authenticated('zklock2'), 0, 'and not zklock2');

# --- another keytab at reload --------------------------------------------------------
set_krb($node, 'b', '');
ok(wait_until(sub { authenticated('zklock2') >= 1 }, timeout => 30),
	'reload to keytab b: the next session authenticates as zklock2, its principal')
  or diag('zklock sessions: ' . authenticated('zklock') . ', zklock2: ' . authenticated('zklock2'));

# --- the principal named --------------------------------------------------------------
my $before = authenticated('zklock');
set_krb($node, 'both', 'zklock');
ok(wait_until(sub { authenticated('zklock') > $before }, timeout => 30),
	"keytab both, zklock.sasl_principal = 'zklock': the session is zklock's")
  or diag('zklock sessions: ' . authenticated('zklock') . ', zklock2: ' . authenticated('zklock2'));
$before = authenticated('zklock2');
set_krb($node, 'both', 'zklock2@ZKLOCK.TEST');
ok(wait_until(sub { authenticated('zklock2') > $before }, timeout => 30),
	"zklock.sasl_principal = 'zklock2\@ZKLOCK.TEST': the session is zklock2's");

# --- a principal the keytab does not hold ---------------------------------------------------
set_krb($node, 'both', 'nobody');
my $last = '';
ok( wait_until(
		sub {
			$last = psql1($node, q{SELECT coalesce(last_error, '') FROM zk_lock_status});
			$last =~ /zklock.sasl_principal "nobody" is not in zklock.sasl_keytab/;
		},
		timeout => 30),
	'a principal not in the keytab: last_error says so')
  or diag("last_error: $last");
ok(zk_wait_log($node, qr/zklock.sasl_principal "nobody" is not in zklock.sasl_keytab ".*both.keytab": add its key/, 0, 10),
	'and the log');
my $s = zk_session($node, 'refused');
my $t0 = time();
my $r = $s->query(q{SELECT zk_lock_acquire('krb/r')});
my $took = time() - $t0;
is($r->{sqlstate}, '08006', 'an acquire fails with 08006');
cmp_ok($took, '<', 2 + 3, 'within zklock.connect_timeout (2 s) and some slack')
  or diag("took ${took}s");


# --- review: a keytab that is no keytab -------------------------------------------------
# (its error is not "the principal is not in it")
write_file("$dir/bad.keytab", "-----BEGIN PRIVATE KEY-----\nMIIE\n", 0600);
set_krb($node, 'bad', 'zklock');
ok( wait_until(
		sub {
			$last = psql1($node, q{SELECT coalesce(last_error, '') FROM zk_lock_status});
			$last =~ /could not read zklock.sasl_keytab ".*bad.keytab": /;
		},
		timeout => 30),
	'a keytab that cannot be read: last_error says so, in Kerberos\'s words')
  or diag("last_error: $last");
unlike($last, qr/is not in zklock.sasl_keytab/, 'and not that the principal is missing');

# --- review: a keytab rewritten in place, same inode, size and mtime -------------------
# (cp -p, a restore, a coarse-mtime file system): the next session takes the
# principal of what the file now holds, zklocx, not the cache of zklock
copy("$dir/a.keytab", "$dir/cur.keytab") or die "copy: $!";
chmod(0600, "$dir/cur.keytab");
$before = authenticated('zklock');
set_krb($node, 'cur', '');
ok(wait_until(sub { authenticated('zklock') > $before }, timeout => 30),
	'keytab cur (a copy of a): the session is zklock\'s');
ok(wait_until(sub { psql1($node, 'SELECT state FROM zk_lock_status') eq 'connected' }, timeout => 30),
	'connected');
my @st0 = stat("$dir/cur.keytab");
is(-s "$dir/x.keytab", $st0[7], 'keytab x (zklocx) has the size of keytab a (zklock)');
system('touch', '-r', "$dir/cur.keytab", "$dir/ref") == 0 or die 'touch';
{
	open(my $in, '<:raw', "$dir/x.keytab") or die $!;
	local $/;
	my $bytes = <$in>;
	close($in);
	open(my $out, '+<:raw', "$dir/cur.keytab") or die $!;
	print $out $bytes;
	close($out);
}
system('touch', '-r', "$dir/ref", "$dir/cur.keytab") == 0 or die 'touch';
my @st1 = stat("$dir/cur.keytab");
is(join(',', @st1[1, 7, 9]), join(',', @st0[1, 7, 9]), 'rewritten: same inode, size and mtime');
# the next session: the worker stopped past the session timeout
my $worker = psql1($node, 'SELECT worker_pid FROM zk_lock_status');
my $sid = psql1($node, 'SELECT session_id FROM zk_lock_status');
kill 'STOP', $worker;
sleep(7);
kill 'CONT', $worker;
ok(wait_until(sub { authenticated('zklocx') >= 1 }, timeout => 40),
	'a keytab rewritten in place with the same inode, size and mtime: the next session is zklocx\'s')
  or diag('last_error: ' . psql1($node, q{SELECT coalesce(last_error, '') FROM zk_lock_status}));
ok(wait_until(sub { psql1($node, 'SELECT state FROM zk_lock_status') eq 'connected' }, timeout => 30),
	'and connected')
  or diag('last_error: ' . psql1($node, q{SELECT coalesce(last_error, '') FROM zk_lock_status}));
isnt(psql1($node, 'SELECT session_id FROM zk_lock_status'), $sid, 'a new session');

zk_done_check();
done_testing();
