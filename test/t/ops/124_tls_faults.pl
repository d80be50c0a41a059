
# Faults over TLS, and the server's host name (issue 30), against Debian's
# ZooKeeper with secureClientPort on Netty, client certificates required,
# and no plain port (zk_server.sh --tls-only; the tests' inspection,
# zkutil.py, over TLS), as test/t/ops/113_tls.pl otherwise, which does the
# ZooKeeper restart and the partition during the handshake (not repeated
# here):
#  - the plain port is closed: ZooKeeper listens on the secure port alone,
#    a plain Kazoo client cannot connect, Kazoo over TLS can;
#  - a partition (test/zk_proxy.py swallowing node1's bytes) in the middle
#    of a held lock, longer than the session timeout: node2 is granted the
#    lock, node1's COMMIT is refused by the commit fence (55P03) and nothing
#    it wrote is visible, as on plain TCP (test/t/fence/024_lease.pl);
#    healed, node1 connects again over TLS (a new session) and locks;
#  - a stalled worker (SIGSTOP, as test/t/chaos/105_chaos_stall.pl): a
#    commit within the lease passes; past the session timeout node2 is
#    granted and node1's commit is refused; resumed, the worker connects
#    again over TLS;
#  - the host name check (scripts/zkclient/04-tls-host-check.patch): the
#    servers' certificate names localhost and 127.0.0.1; reached at
#    127.0.0.2 (a forwarder, test/record_proxy.py), the server is refused
#    with "IP address mismatch" and a hint naming zklock.ssl_verify_host;
#    accepted once zklock.ssl_verify_host is off; reached as localhost (a
#    DNS name of the certificate) with the check on, accepted.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkTls;
use ZkChaos;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

# node1 and node2: their own keys, one subject (zklock's nodes and root
# are that x509 identity's: test/t/ops/119_tls_identity.pl); no plain port,
# CN=inspect (the tests' inspection) ZooKeeper's x509 superuser
my $secure = zk_tls_start(clients => [ 'node1=/CN=zklock', 'node2=/CN=zklock' ],
	superuser => 'CN=inspect', tls_only => 1);
my $certs = zk_tls_dir();

# --- the plain port is closed ---------------------------------------------------
my $zkcfg = PostgreSQL::Test::Utils::slurp_file(zk_dir() . '/server1.cfg');
unlike($zkcfg, qr/^\s*clientPort\s*=/m, "ZooKeeper's configuration has no plain clientPort");
my @binds = PostgreSQL::Test::Utils::slurp_file(zk_dir() . '/server1.log') =~ /binding to port (\S+)/g;
is_deeply(\@binds, ["/127.0.0.1:$secure"], 'ZooKeeper listens for clients on the secure port alone')
  or diag('binding lines: ' . join(' ', @binds));
{
	local $ENV{ZKUTIL_TLS} = '';
	local $ENV{ZKUTIL_CONNECT_TIMEOUT} = '3';
	my ($rc, $out, $err) = ZkLockTest::zkutil('ls-r', '/');
	is($rc, 2, 'a plain client (Kazoo without TLS) cannot connect to it');
	note "plain Kazoo: $err";
}
my ($rc, $out, $err) = ZkLockTest::zkutil('ls-r', '/zookeeper');
is($rc, 0, 'Kazoo over TLS with a certificate of the CA can (the tests\' inspection)')
  or diag($err);

sub tls_conf
{
	return zk_tls_conf($_[0], connect_timeout => '3s');
}

sub last_error
{
	return psql1($_[0], q{SELECT coalesce(last_error, '') FROM zk_lock_status});
}

# node1 reaches the secure port through a proxy that can cut it, node2
# directly
my $px = ZkChaos::Proxy->start(
	links => [ [ 'tls', PostgreSQL::Test::Cluster::get_free_port(), $secure ] ]);
my $node1 = zk_node('node1', hosts => '127.0.0.1:' . $px->port('tls'),
	extra_conf => tls_conf('node1'));
my $node2 = zk_node('node2', hosts => "127.0.0.1:$secure",
	extra_conf => tls_conf('node2'));
$node1->safe_psql('postgres', 'CREATE TABLE guarded(v int)');

# --- a partition in the middle of a held lock ---------------------------------
my $h = zk_session($node1, 'holder');
my $w = zk_session($node2, 'waiter');
$h->query_ok('BEGIN');
$h->query_ok(q{SELECT zk_lock_acquire('faults/p')});
$h->query_ok('INSERT INTO guarded VALUES (1)');
$w->send(q{SELECT zk_lock_acquire('faults/p', timeout => '30 s') > 0});
ok(wait_for_waiting($node2, $w->pid), 'node2 waits for the lock node1 holds over TLS');
my $since = psql1($node1, 'SELECT state_since FROM zk_lock_status');
$px->cut('tls');
my $t_cut = time();
my $r = $w->wait(30);
ok($r && $r->{out} eq 't', 'partitioned past the session timeout: node2 is granted the lock');
note sprintf('node2 granted %.1f s after the cut', time() - $t_cut);
$r = $h->query('COMMIT', 30);
is($r->{sqlstate}, '55P03', "node1's COMMIT is refused by the commit fence (55P03)");
like($r->{err} // '', qr/not proven held|was lost/, '... saying the lock is not proven held');
is(psql1($node1, 'SELECT count(*) FROM guarded'), '0',
	'nothing the fenced transaction wrote is visible');
$px->heal('tls');
my $last = '';
ok( wait_until(
		sub {
			$last = psql1($node1, q{SELECT state || '|' || state_since FROM zk_lock_status});
			my ($st, $at) = split /\|/, $last;
			return $st eq 'connected' && $at ne $since;
		},
		timeout => 30),
	'healed: node1 connects again over TLS, a new session')
  or diag("state: $last; last_error: " . last_error($node1));
zk_hold($h, 'faults/p2');
$r = $w->query(q{SELECT zk_lock_acquire('faults/p2', timeout => '300ms')});
is($r->{sqlstate}, '55P03', "and node2 cannot take node1's new lock");
$h->query_ok('COMMIT');

# --- a stalled worker ------------------------------------------------------------
my $worker = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
# a short stop, well within the lease: the commit passes
$h->query_ok('BEGIN');
$h->query_ok(q{SELECT zk_lock_acquire('faults/s')});
$h->query_ok('INSERT INTO guarded VALUES (2)');
kill 'STOP', $worker;
$r = $h->query('COMMIT');
kill 'CONT', $worker;
is($r->{err} // '', '', 'a commit while the worker is stopped but the lease runs passes');
is(psql1($node1, 'SELECT count(*) FROM guarded'), '1', '... and its write is visible');
# past the session timeout
$h->query_ok('BEGIN');
$h->query_ok(q{SELECT zk_lock_acquire('faults/s')});
$h->query_ok('INSERT INTO guarded VALUES (3)');
$w->send(q{SELECT zk_lock_acquire('faults/s', timeout => '30 s') > 0});
ok(wait_for_waiting($node2, $w->pid), 'node2 waits');
$since = psql1($node1, 'SELECT state_since FROM zk_lock_status');
kill 'STOP', $worker;
$r = $w->wait(30);
ok($r && $r->{out} eq 't', "node1's worker stopped past the session timeout: node2 is granted");
$r = $h->query('COMMIT', 30);
kill 'CONT', $worker;
is($r->{sqlstate}, '55P03', "node1's COMMIT is refused (55P03)");
is(psql1($node1, 'SELECT count(*) FROM guarded'), '1',
	'nothing the fenced transaction wrote is visible');
ok( wait_until(
		sub {
			$last = psql1($node1, q{SELECT state || '|' || state_since FROM zk_lock_status});
			my ($st, $at) = split /\|/, $last;
			return $st eq 'connected' && $at ne $since;
		},
		timeout => 30),
	'resumed: the worker connects again over TLS')
  or diag("state: $last; last_error: " . last_error($node1));
zk_hold($h, 'faults/s2');
$r = $w->query(q{SELECT zk_lock_acquire('faults/s2', timeout => '300ms')});
is($r->{sqlstate}, '55P03', "and node2 cannot take node1's new lock");
$h->query_ok('COMMIT');

# --- the host name check ------------------------------------------------------------
# the servers' certificate names DNS:localhost and IP:127.0.0.1; a forwarder
# on 127.0.0.2 is the same server at an address the certificate lacks
my $fport = PostgreSQL::Test::Cluster::get_free_port();
my $fout = '';
my $fwd = IPC::Run::start(
	[ '/usr/bin/python3', "$FindBin::RealBin/../../record_proxy.py",
		$fport, $secure, '/dev/null', $$, '127.0.0.2' ],
	'<', \undef, '>', \$fout, '2>', \my $ferr);
wait_until(sub { $fwd->pump_nb; $fout =~ /ready/ }, timeout => 10)
  or BAIL_OUT("record_proxy.py did not start on 127.0.0.2: $ferr");
my $node3 = zk_node('node3', hosts => "127.0.0.2:$fport", start => 0,
	extra_conf => tls_conf('node2'));
$node3->start;
$node3->safe_psql('postgres', 'CREATE EXTENSION zklock');
ok( wait_until(
		sub {
			$last = last_error($node3);
			$last =~ /^TLS handshake with 127\.0\.0\.2:$fport failed: server certificate verify failed: IP address mismatch/;
		},
		timeout => 20),
	'a server at an address its certificate does not name is refused: "IP address mismatch"')
  or diag("last_error: $last");
is(psql1($node3, 'SELECT state FROM zk_lock_status'), 'connecting', 'and the worker is not connected');
ok(zk_wait_log($node3, qr/HINT:  ZooKeeper's certificate does not name the server as zklock.hosts does: .*zklock.ssl_verify_host = off/, 0, 10),
	'the log says what to check');
$node3->append_conf('postgresql.conf', "zklock.ssl_verify_host = off\n");
$node3->reload;
ok(zk_wait_connected($node3, 20), 'with zklock.ssl_verify_host off, the same server is accepted');
$since = psql1($node3, 'SELECT state_since FROM zk_lock_status');
$node3->append_conf('postgresql.conf',
	"zklock.ssl_verify_host = on\nzklock.hosts = 'localhost:$secure'\n");
$node3->reload;
ok( wait_until(
		sub {
			$last = psql1($node3, q{SELECT state || '|' || state_since FROM zk_lock_status});
			my ($st, $at) = split /\|/, $last;
			return $st eq 'connected' && $at ne $since;
		},
		timeout => 20),
	'with the check on, the server named as its certificate does (localhost) is accepted')
  or diag("state: $last; last_error: " . last_error($node3));
$fwd->kill_kill;

# A DNS name the certificate lacks (review): another name of 127.0.0.1 in
# /etc/hosts (e.g. the machine's), the server itself.  Written first in a
# list that also names the server by its address, it is the entry checked
# (security.md: the first written), so the server is refused with
# "hostname mismatch", whichever entry the client connected by; the
# address first, it is accepted.  Without the check on the name
# (SSL_set1_host), the first list would connect.
my $alias;
if (open(my $hf, '<', '/etc/hosts'))
{
	while (my $l = <$hf>)
	{
		next unless $l =~ /^\s*127\.0\.0\.1\s+(.*)$/;
		($alias) = grep { !/^localhost/i && /^[A-Za-z][A-Za-z0-9-]*$/ } split /\s+/, $1;
		last if $alias;
	}
	close($hf);
}
SKIP:
{
	skip 'no other name of 127.0.0.1 in /etc/hosts', 3 unless $alias;
	note "a name of 127.0.0.1 the certificate lacks: $alias";
	$node3->append_conf('postgresql.conf',
		"zklock.hosts = '$alias:$secure,127.0.0.1:$secure'\n");
	$node3->reload;
	ok( wait_until(
			sub {
				$last = last_error($node3);
				$last =~ /^TLS handshake with 127\.0\.0\.1:$secure failed: server certificate verify failed: hostname mismatch/;
			},
			timeout => 20),
		"a name the certificate lacks, written first for the server, is refused: \"hostname mismatch\"")
	  or diag("last_error: $last");
	is(psql1($node3, 'SELECT state FROM zk_lock_status'), 'connecting',
		'and the worker is not connected (the address written after it is not checked instead)');
	$node3->append_conf('postgresql.conf',
		"zklock.hosts = '127.0.0.1:$secure,$alias:$secure'\n");
	$node3->reload;
	ok(zk_wait_connected($node3, 20),
		'the address written first, the same server is accepted');
}

zk_done_check();
done_testing();
