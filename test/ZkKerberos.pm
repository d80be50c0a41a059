
# ZkKerberos.pm -- a Kerberos realm made by a TAP test, on loopback, and a
# ZooKeeper that authenticates its clients in it (issue 30).
#
# The one set-up of test/t/ops/117_kerberos.pl, 123 and 125:
# an MIT KDC (krb5-kdc: kdb5_util, kadmin.local, krb5kdc) serving the realm
# ZKLOCK.TEST on a free port of 127.0.0.1, Debian's ZooKeeper with
# Krb5LoginModule and its keytab (zookeeper/localhost), and a super user
# (superDigest) through which the test reads every node (ZKUTIL_AUTH).
#
#   krb_start(principals => [...])   the realm with these principals (and
#                                    zookeeper/localhost); sets KRB5_CONFIG
#                                    for the servers and tools started after
#   krb_keytab($principal, $path)    a keytab of that principal, or of
#                                    several ('a b': a's first) (mode 0600;
#                                    -norandkey: every keytab of a principal
#                                    holds the same key)
#   krb_kinit($keytab, $principal, $ccache)   kinit -kt into a file cache
#   krb_zk_start(extra_config => "...")       ZooKeeper with Kerberos;
#                                    returns its super user's password
#   krb_zklock_conf($keytab)         zklock's settings for GSSAPI
#   krb_stop_kdc()                   the KDC gone
#   krb_dir()                        the folder of all the files
#
# Nothing is skipped: a missing tool fails the test (BAIL_OUT).
package ZkKerberos;

use strict;
use warnings;

use Exporter 'import';
use Digest::SHA qw(sha1_base64);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use ZkLockTest;

our @EXPORT = qw(krb_start krb_keytab krb_kinit krb_zk_start krb_zklock_conf
  krb_stop_kdc krb_dir krb_write_file);

our $REALM = 'ZKLOCK.TEST';

my ($dir, $kdc);

END { $kdc->kill_kill if $kdc; }

sub krb_dir { return $dir; }

sub krb_write_file
{
	my ($path, $content, $mode) = @_;
	open(my $fh, '>', $path) or die "could not write $path: $!";
	print $fh $content;
	close($fh);
	chmod($mode // 0644, $path) or die "chmod $path: $!";
	return;
}

sub _run_ok
{
	my (@cmd) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(60))
	  or BAIL_OUT("@cmd failed: $err");
	return $out;
}

sub krb_start
{
	my (%p) = @_;
	$dir = PostgreSQL::Test::Utils::tempdir('krb');
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	krb_write_file("$dir/krb5.conf", <<"EOC");
[libdefaults]
 default_realm = $REALM
 dns_lookup_realm = false
 dns_lookup_kdc = false
 rdns = false
 udp_preference_limit = 1
[realms]
 $REALM = {
  kdc = 127.0.0.1:$port
 }
[domain_realm]
 localhost = $REALM
EOC
	krb_write_file("$dir/kdc.conf", <<"EOC");
[kdcdefaults]
 kdc_ports = $port
 kdc_tcp_ports = $port
[realms]
 $REALM = {
  database_name = $dir/principal
  key_stash_file = $dir/stash
  acl_file = $dir/kadm5.acl
 }
[logging]
 kdc = FILE:$dir/kdc.log
EOC
	# the servers started after this and every tool read this realm's files
	$ENV{KRB5_CONFIG} = "$dir/krb5.conf";
	$ENV{KRB5_KDC_PROFILE} = "$dir/kdc.conf";
	_run_ok('/usr/sbin/kdb5_util', 'create', '-s', '-r', $REALM, '-P',
		'master-' . int(rand(1e9)));
	foreach my $pr ('zookeeper/localhost', @{ $p{principals} // [] })
	{
		_run_ok('/usr/sbin/kadmin.local', '-q', "addprinc -randkey $pr");
	}
	$kdc = IPC::Run::start([ '/usr/sbin/krb5kdc', '-n', '-P', "$dir/kdc.pid" ],
		'<', \undef, '>', "$dir/kdc.out", '2>&1');
	ok( wait_until(
			sub { -s "$dir/kdc.log" && slurp_file("$dir/kdc.log") =~ /commencing operation/ },
			timeout => 10),
		"the KDC serves the realm $REALM on loopback");
	return $dir;
}

sub krb_keytab
{
	my ($principal, $path) = @_;
	_run_ok('/usr/sbin/kadmin.local', '-q', "ktadd -norandkey -k $path $principal");
	chmod(0600, $path) or die "chmod $path: $!";
	return $path;
}

sub krb_kinit
{
	my ($keytab, $principal, $ccache) = @_;
	local $ENV{KRB5CCNAME} = "FILE:$ccache";
	_run_ok('/usr/bin/kinit', '-kt', $keytab, $principal);
	return "FILE:$ccache";
}

sub krb_zk_start
{
	my (%p) = @_;
	krb_keytab('zookeeper/localhost', "$dir/zk.keytab");
	# (ZooKeeper runs as the test's user: 0600 is fine)
	krb_write_file("$dir/jaas.conf", <<"EOJ");
Server {
  com.sun.security.auth.module.Krb5LoginModule required
  useKeyTab=true
  keyTab="$dir/zk.keytab"
  storeKey=true
  useTicketCache=false
  principal="zookeeper/localhost\@$REALM";
};
EOJ
	my $super = 'super-' . int(rand(1e9));
	my $digest = sha1_base64("super:$super");
	$digest .= '=' while length($digest) % 4;
	krb_write_file("$dir/zk_krb.cfg",
		"authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n"
		  . "DigestAuthenticationProvider.superDigest=super:$digest\n"
		  . ($p{extra_config} // ''));
	{
		local $ENV{ZK_JVM_OPTS} =
		  "-Djava.security.auth.login.config=$dir/jaas.conf -Djava.security.krb5.conf=$dir/krb5.conf";
		zk_start(args => [ '--extra-config', "$dir/zk_krb.cfg" ]);
	}
	$ENV{ZKUTIL_AUTH} = "super:$super";
	ok(slurp_file(zk_dir() . '/server1.log') =~ /Server successfully logged in/,
		'ZooKeeper logged in to the KDC with its keytab');
	return $super;
}

sub krb_zklock_conf
{
	my ($keytab) = @_;
	return <<"EOC";
zklock.sasl_mechanism = 'GSSAPI'
zklock.sasl_keytab = '$keytab'
zklock.sasl_host = 'localhost'
zklock.connect_timeout = '2s'
EOC
}

sub krb_stop_kdc
{
	$kdc->kill_kill if $kdc;
	$kdc = undef;
	return;
}

1;
