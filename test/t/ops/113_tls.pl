
# TLS to ZooKeeper (issue 30): Debian's ZooKeeper with secureClientPort on
# Netty, its keystore and truststore made here (test/tls_certs.sh: openssl,
# keytool), client certificates required (ssl.clientAuth=need) and the x509
# authentication provider; zklock built with the C client of
# scripts/build-zkclient.sh (OpenSSL), zklock.hosts naming the secure port
# alone:
#  - two instances, each with its own certificate, connect over TLS and
#    lock each other out; ZooKeeper authenticated each as x509:CN=<name>;
#  - a client certificate of another CA is refused by ZooKeeper: the
#    worker's last_error and log say so at once, in OpenSSL's words
#    ("alert certificate unknown": Java's alert for a CA it does not know),
#    and an acquire fails with 08006 within zklock.connect_timeout;
#  - a server certificate zklock's CA did not sign is refused by zklock
#    ("server certificate verify failed: ...");
#  - a key file with group or world access is refused before connecting,
#    as PostgreSQL refuses its ssl_key_file;
#  - the paths are superuser-only settings (pg_read_all_settings aside);
#  - a reload with a good certificate connects the refused instance (a new
#    session), without a restart.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use File::Copy qw(copy);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $certs = PostgreSQL::Test::Utils::tempdir('tls');
system('bash', "$FindBin::RealBin/../../tls_certs.sh", $certs, 'node1', 'node2') == 0
  or BAIL_OUT('could not make the test certificates (test/tls_certs.sh)');

my $secure = PostgreSQL::Test::Cluster::get_free_port();
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
close($fh);
zk_start(args => [ '--extra-config', $cfg ]);
my $tls_hosts = "127.0.0.1:$secure";

sub tls_conf
{
	my ($cert, $key, $ca) = @_;
	$ca //= "$certs/ca.pem";
	return <<"EOC";
zklock.ssl = on
zklock.ssl_ca_file = '$ca'
zklock.ssl_cert_file = '$cert'
zklock.ssl_key_file = '$key'
zklock.connect_timeout = '2s'
EOC
}

# --- two instances over TLS -------------------------------------------------
my $node1 = zk_node('node1', hosts => $tls_hosts,
	extra_conf => tls_conf("$certs/node1.pem", "$certs/node1.key"));
my $node2 = zk_node('node2', hosts => $tls_hosts,
	extra_conf => tls_conf("$certs/node2.pem", "$certs/node2.key"));
pass('two instances connected to the secure port alone');

my $s1 = zk_session($node1, 'holder');
my $s2 = zk_session($node2, 'asker');
zk_hold($s1, 'tls/a');
zk_ask($s2, 'tls/a');
is(zk_count_locks(zk_path('tls/a')), 2, 'the holder and the waiter have a node each');
$s1->query_ok('COMMIT');
zk_result_is($s2, '00000', "node2's acquire is granted once node1 commits");
$s2->query_ok('COMMIT');
# and the other way round, with a timeout: node2 holds, node1 times out
zk_hold($s2, 'tls/b');
my $r = $s1->query(q{SELECT zk_lock_acquire('tls/b', timeout => '300ms')});
is($r->{sqlstate}, '55P03', "node1 cannot take node2's lock (lock_not_available)");
$s2->query_ok('COMMIT');

# ZooKeeper authenticated each connection by its certificate (cons shows
# no identity: the x509 provider's log line says it)
my $zklog = PostgreSQL::Test::Utils::slurp_file(zk_dir() . '/server1.log');
like($zklog, qr/Authenticated Id 'CN=node1'/, 'ZooKeeper authenticated node1 as x509 CN=node1');
like($zklog, qr/Authenticated Id 'CN=node2'/, 'ZooKeeper authenticated node2 as x509 CN=node2');

# --- the paths are superuser-only ---------------------------------------------
$node1->safe_psql('postgres', 'CREATE ROLE watcher LOGIN; GRANT pg_read_all_settings TO watcher');
$node1->safe_psql('postgres', 'CREATE ROLE plain LOGIN');
my ($rc, $out, $err) = $node1->psql('postgres', 'SHOW zklock.ssl_key_file',
	extra_params => [ '-U', 'plain' ]);
like($err, qr/permission denied|must be superuser|privileges of pg_read_all_settings/,
	'a plain role cannot read zklock.ssl_key_file');
is(psql1($node1, 'SHOW zklock.ssl'), 'on', 'zklock.ssl is shown');

# --- a client certificate of another CA -------------------------------------
my $node3 = zk_node('node3', hosts => $tls_hosts, start => 0,
	extra_conf => tls_conf("$certs/other.pem", "$certs/other.key"));
$node3->start;
$node3->safe_psql('postgres', 'CREATE EXTENSION zklock');
my $last = '';
ok( wait_until(
		sub {
			$last = psql1($node3, 'SELECT coalesce(last_error, \'\') FROM zk_lock_status');
			$last =~ /^TLS handshake with 127\.0\.0\.1:$secure failed: .*alert certificate unknown/;
		},
		timeout => 20),
	'a client certificate of another CA: last_error says ZooKeeper did not accept it')
  or diag("last_error: $last");
is(psql1($node3, 'SELECT state FROM zk_lock_status'), 'connecting', 'and the worker is not connected');
my $t0 = time();
my $s3 = zk_session($node3, 'refused');
$r = $s3->query(q{SELECT zk_lock_acquire('tls/c')});
my $took = time() - $t0;
is($r->{sqlstate}, '08006', 'an acquire on the refused instance fails with 08006');
cmp_ok($took, '<', 2 + 3, 'within zklock.connect_timeout (2 s) and some slack')
  or diag("took ${took}s");
ok(zk_wait_log($node3,
		qr/LOG:  zklock: TLS handshake with .* failed: .*alert certificate unknown\n.*HINT:  ZooKeeper refused zklock's certificate \(zklock.ssl_cert_file\)/,
		0, 10),
	'the log says it at once, and what to check');

# --- a server certificate zklock's CA did not sign ---------------------------
my $log_at = -s $node3->logfile;
$node3->append_conf('postgresql.conf',
	tls_conf("$certs/node1.pem", "$certs/node1.key", "$certs/other-ca.pem"));
$node3->reload;
ok( wait_until(
		sub {
			$last = psql1($node3, 'SELECT coalesce(last_error, \'\') FROM zk_lock_status');
			$last =~ /server certificate verify failed/;
		},
		timeout => 20),
	'a server certificate of a CA zklock does not trust: last_error says the verification failed')
  or diag("last_error: $last");
like($last, qr/self-signed certificate in certificate chain|unable to get local issuer certificate/,
	'in OpenSSL\'s words');
ok(zk_wait_log($node3, qr/HINT:  zklock does not trust ZooKeeper's certificate: zklock.ssl_ca_file/, $log_at, 10),
	'the log says what to check');

# --- a key file others may read ------------------------------------------------
my $open_key = "$certs/node3-open.key";
copy("$certs/node1.key", $open_key) or die "copy: $!";
chmod(0644, $open_key) or die "chmod: $!";
$node3->append_conf('postgresql.conf', tls_conf("$certs/node1.pem", $open_key));
$node3->reload;
ok( wait_until(
		sub {
			$last = psql1($node3, 'SELECT coalesce(last_error, \'\') FROM zk_lock_status');
			$last =~ /zklock.ssl_key_file .* has group or world access/;
		},
		timeout => 20),
	'a key file with group or world access is refused before connecting')
  or diag("last_error: $last");

# --- fixed at reload: connects, and locks against the others ---------------------
$log_at = -s $node3->logfile;
$node3->append_conf('postgresql.conf', tls_conf("$certs/node1.pem", "$certs/node1.key"));
$node3->reload;
ok(zk_wait_connected($node3, 20), 'fixed at reload: node3 connects over TLS, no restart');
zk_hold($s1, 'tls/d');
$r = $s3->query(q{SELECT zk_lock_acquire('tls/d', timeout => '300ms')});
is($r->{sqlstate}, '55P03', "and node3 cannot take node1's lock");
$s1->query_ok('COMMIT');

zk_done_check();
done_testing();
