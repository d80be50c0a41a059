
# TLS to ZooKeeper (issue 30): Debian's ZooKeeper with secureClientPort on
# Netty, its keystore and truststore made here (test/tls_certs.sh: openssl,
# keytool), client certificates required (ssl.clientAuth=need) and the x509
# authentication provider; zklock built with the C client of
# scripts/build-zkclient.sh (OpenSSL), zklock.hosts naming the secure port
# alone:
#  - two instances, each with its own certificate and key (of one subject,
#    CN=zklock: one x509 identity, as instances share digest credentials),
#    connect over TLS and lock each other out; ZooKeeper authenticated each
#    as x509:CN=zklock, which zk_lock_status shows (1.8) with transport tls
#    and the certificate's end of validity;
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
#    session), without a restart;
#  - a ZooKeeper restart: both instances connect again over TLS;
#  - a partition during the handshake (a proxy that holds the connection
#    and swallows its bytes): the client gives the handshake up within a
#    third of the session timeout and says so, requests fail with 08006
#    within zklock.connect_timeout, and the instance connects once healed
#    (the unpatched client waited in SSL_connect forever);
#  - what a network sees (a proxy that records every byte): no resource
#    name crosses it, while the same proxy in front of the plain port does
#    see one (so the check can fail).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkChaos;
use ZkTls;

use File::Copy qw(copy);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $secure = zk_tls_start(clients => [ 'node1=/CN=zklock', 'node2=/CN=zklock' ],
	# the test's own ZooKeeper client (zkutil.py: listings, counts) over TLS
	# as the instances' identity: their nodes are x509:CN=zklock's alone
	zkutil_as => 'node1');
my $certs = zk_tls_dir();
my $tls_hosts = zk_tls_hosts();

# --- two instances over TLS -------------------------------------------------
my $node1 = zk_node('node1', hosts => $tls_hosts,
	extra_conf => zk_tls_conf('node1'));
my $node2 = zk_node('node2', hosts => $tls_hosts,
	extra_conf => zk_tls_conf('node2'));
pass('two instances connected to the secure port alone');

my $s1 = zk_session($node1, 'holder');
my $s2 = zk_session($node2, 'asker');
zk_hold($s1, 'tls/a');
zk_ask($s2, 'tls/a');
# "waits" is not "has its node": tls/a's parent tls is taken first (tries,
# then step by step), and the parent's grant waits for the lease of node2's
# session, which comes about zklock.lease_margin after it connects -- with
# the backend in an Extension wait, before tls/a's node is created
ok(zk_wait_count(zk_path('tls/a'), 2, 10), 'the holder and the waiter have a node each');
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
like($zklog, qr/Authenticated Id 'CN=zklock' for Scheme 'x509'/, 'ZooKeeper authenticated the instances as x509 CN=zklock');
foreach my $n ($node1, $node2)
{
	is(psql1($n, q{SELECT transport || '|' || identity || '|' ||
	                      (tls_expires > now() AND tls_expires < now() + interval '2 days')
	               FROM zk_lock_status}),
		'tls|x509:CN=zklock|true',
		$n->name . ': zk_lock_status shows transport tls, identity x509:CN=zklock and the certificate\'s expiry');
}

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
	extra_conf => zk_tls_conf('other'));
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
	zk_tls_conf('node1', ca => "$certs/other-ca.pem"));
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
$node3->append_conf('postgresql.conf', zk_tls_conf('node1', key => $open_key));
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
$node3->append_conf('postgresql.conf', zk_tls_conf('node1'));
$node3->reload;
ok(zk_wait_connected($node3, 20), 'fixed at reload: node3 connects over TLS, no restart');
zk_hold($s1, 'tls/d');
$r = $s3->query(q{SELECT zk_lock_acquire('tls/d', timeout => '300ms')});
is($r->{sqlstate}, '55P03', "and node3 cannot take node1's lock");
$s1->query_ok('COMMIT');

# --- a ZooKeeper restart: the sessions reconnect over TLS -----------------------
my %since = map { $_->name => psql1($_, 'SELECT state_since FROM zk_lock_status') } ($node1, $node2);
zk_server('restart-one', 1);
ok( wait_until(
		sub {
			foreach my $n ($node1, $node2)
			{
				my ($st, $at) = split /\|/, psql1($n, q{SELECT state || '|' || state_since FROM zk_lock_status});
				return 0 unless $st eq 'connected' && $at ne $since{ $n->name };
			}
			return 1;
		},
		timeout => 30),
	'after a ZooKeeper restart, node1 and node2 are connected again over TLS');
zk_hold($s2, 'tls/f');
$r = $s1->query(q{SELECT zk_lock_acquire('tls/f', timeout => '300ms')});
is($r->{sqlstate}, '55P03', 'and still lock each other out');
$s2->query_ok('COMMIT');

# --- a partition during the handshake ---------------------------------------
my $px = ZkChaos::Proxy->start(
	links => [ [ 'tls', PostgreSQL::Test::Cluster::get_free_port(), $secure ] ]);
$px->cut('tls');
my $node4 = zk_node('node4', hosts => '127.0.0.1:' . $px->port('tls'), start => 0,
	extra_conf => zk_tls_conf('node2'));
$node4->start;
$node4->safe_psql('postgres', 'CREATE EXTENSION zklock');
ok( wait_until(
		sub {
			$last = psql1($node4, 'SELECT coalesce(last_error, \'\') FROM zk_lock_status');
			$last =~ /failed: no TLS handshake within \d+ ms/;
		},
		timeout => 20),
	'a handshake into a partition is given up, and said')
  or diag("last_error: $last");
ok(zk_wait_log($node4, qr/HINT:  Does zklock.hosts name the servers' secureClientPort/, 0, 10),
	'the log says what to check');
my $s4 = zk_session($node4, 'partitioned');
$t0 = time();
$r = $s4->query(q{SELECT zk_lock_acquire('tls/e')});
$took = time() - $t0;
is($r->{sqlstate}, '08006', 'an acquire meanwhile fails with 08006');
cmp_ok($took, '<', 2 + 3, 'within zklock.connect_timeout (2 s) and some slack')
  or diag("took ${took}s");
$px->heal('tls');
ok(zk_wait_connected($node4, 20), 'healed: the instance connects over TLS (the client was not wedged)');

# --- what the network sees -------------------------------------------------------
my $name = 'wire-secret-' . int(rand(1e9));
my %rec;
foreach my $which ([ 'tls', $secure ], [ 'plain', (zk_hosts() =~ /:(\d+)$/)[0] ])
{
	my ($tag, $target) = @$which;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $file = "$certs/wire-$tag.bin";
	my $out = '';
	my $h = IPC::Run::start(
		[ '/usr/bin/python3', "$FindBin::RealBin/../../record_proxy.py", $port, $target, $file, $$ ],
		'<', \undef, '>', \$out, '2>', \my $err);
	wait_until(sub { $h->pump_nb; $out =~ /ready/ }, timeout => 10)
	  or BAIL_OUT("record_proxy.py did not start: $err");
	$rec{$tag} = { port => $port, file => $file, h => $h };
}
my $node5 = zk_node('node5', hosts => "127.0.0.1:$rec{tls}{port}",
	extra_conf => zk_tls_conf('node2'));
my $s5 = zk_session($node5, 'recorded');
$s5->query_ok('BEGIN');
$s5->query_ok("SELECT zk_lock_acquire('tls/$name')");
is(zk_count_locks(zk_path("tls/$name")), 1, 'a lock taken through the recording proxy, over TLS');
$s5->query_ok(q{SELECT count(*) FROM zk_locks()});
$s5->query_ok('COMMIT');
# the same name read in the clear, through the recorder of the plain port
my ($kout, $kerr) = ('', '');
IPC::Run::run([ '/usr/bin/python3', '-c',
		'import sys; from kazoo.client import KazooClient; z = KazooClient(hosts=sys.argv[1]); z.start(timeout=10); print(z.exists(sys.argv[2]) is not None); z.stop()',
		"127.0.0.1:$rec{plain}{port}", zk_path("tls/$name") ],
	'>', \$kout, '2>', \$kerr, IPC::Run::timeout(30));
note "kazoo: $kout $kerr";
my $wire_tls = PostgreSQL::Test::Utils::slurp_file($rec{tls}{file});
my $wire_plain = PostgreSQL::Test::Utils::slurp_file($rec{plain}{file});
cmp_ok(length($wire_tls), '>', 4000, 'the recorder saw zklock\'s TLS traffic (' . length($wire_tls) . ' bytes)');
unlike($wire_tls, qr/\Q$name\E/, 'no resource name crosses the network over TLS');
unlike($wire_tls, qr/zklock_113_tls|LOCK-EXCLUSIVE/, 'nor the root, nor a node\'s name');
like($wire_plain, qr/\Q$name\E/, 'while the plain port\'s recorder does see one (the check can fail)');
$_->{h}->kill_kill foreach values %rec;

zk_done_check();
done_testing();
