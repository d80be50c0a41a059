# ZkTls.pm -- a TLS ZooKeeper for a TAP test (issue 30): Debian's ZooKeeper
# with secureClientPort on Netty (127.0.0.1), its keystore and truststore
# made by test/tls_certs.sh, client certificates required
# (ssl.clientAuth=need) and the x509 authentication provider.  The one
# set-up of test/t/ops/113_tls.pl, 118, 119 and 124.
#
#   zk_tls_start(clients => [...], ...)  the certificates (tls_certs.sh's
#                         CLIENT arguments: "node1", "node1=/CN=zklock")
#                         and ZooKeeper, started; returns the secure port.
#                         Options:
#       certs     => DIR  the certificates' folder (default: a temporary one)
#       superuser => DN   X509AuthenticationProvider.superUser
#       tls_only  => 1    no plain port (zk_start's tls_only: zkutil.py then
#                         connects as CN=inspect)
#       zkutil_as => NAME zkutil.py (the tests' inspection) connects to the
#                         secure port with NAME's certificate (ZKUTIL_TLS)
#   zk_tls_dir()          the certificates' folder
#   zk_tls_hosts()        "127.0.0.1:<secure port>"
#   zk_tls_conf($who, %extra)   zklock's settings for TLS with $who's
#                         certificate and key; extra: ca => FILE, key =>
#                         FILE, connect_timeout => '3s' (default '2s')
#
# Nothing is skipped: certificates that cannot be made fail the test
# (BAIL_OUT), as a ZooKeeper that does not start does (zk_start).
package ZkTls;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use ZkLockTest;

our @EXPORT = qw(zk_tls_start zk_tls_dir zk_tls_hosts zk_tls_conf);

my ($certs, $secure);

sub zk_tls_dir   { return $certs; }
sub zk_tls_hosts { return "127.0.0.1:$secure"; }

sub zk_tls_start
{
	my (%p) = @_;
	$certs = $p{certs} // PostgreSQL::Test::Utils::tempdir('tls');
	my $script = $INC{'ZkTls.pm'} =~ s{ZkTls\.pm\z}{tls_certs.sh}r;
	system('bash', $script, $certs, @{ $p{clients} // [] }) == 0
	  or BAIL_OUT('could not make the test certificates (test/tls_certs.sh)');

	$secure = PostgreSQL::Test::Cluster::get_free_port();
	my $cfg = "$certs/zk_tls.cfg";
	open(my $fh, '>', $cfg) or die "$cfg: $!";
	print $fh <<"EOC";
secureClientPort=$secure
secureClientPortAddress=127.0.0.1
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
ssl.keyStore.location=$certs/server.p12
ssl.keyStore.password=zkpass
ssl.keyStore.type=PKCS12
ssl.trustStore.location=$certs/truststore.p12
ssl.trustStore.password=zkpass
ssl.trustStore.type=PKCS12
ssl.clientAuth=need
authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider
EOC
	print $fh "X509AuthenticationProvider.superUser=$p{superuser}\n"
	  if $p{superuser};
	close($fh);
	zk_start(args => [ '--extra-config', $cfg ],
		$p{tls_only} ? (tls_only => $certs) : ());
	$ENV{ZKUTIL_TLS} = join(',', zk_tls_hosts(), "$certs/ca.pem",
		"$certs/$p{zkutil_as}.pem", "$certs/$p{zkutil_as}.key")
	  if $p{zkutil_as};
	return $secure;
}

sub zk_tls_conf
{
	my ($who, %x) = @_;
	my $ca = $x{ca} // "$certs/ca.pem";
	my $key = $x{key} // "$certs/$who.key";
	my $timeout = $x{connect_timeout} // '2s';
	return <<"EOC";
zklock.ssl = on
zklock.ssl_ca_file = '$ca'
zklock.ssl_cert_file = '$certs/$who.pem'
zklock.ssl_key_file = '$key'
zklock.connect_timeout = '$timeout'
EOC
}

1;
