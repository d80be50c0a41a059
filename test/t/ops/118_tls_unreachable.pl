
# TLS to ZooKeeper (issue 30) with servers that do not answer as they
# should, beside a good one (113_tls's ZooKeeper: secureClientPort on
# Netty, client certificates required):
#  - a server that drops connection attempts (a "black hole": a listener
#    on loopback whose accept queue is full, so the kernel drops further
#    SYNs, as a firewall's DROP or a host that is off): the client gives
#    the attempt up after 2/3 of the session timeout and moves on to the
#    next server, as it does over plain TCP.  zklock.hosts names the black
#    hole and two ports that refuse at first (nothing listens on them), so
#    the client, whatever order it shuffled them in, is soon waiting in the
#    black hole; then one of the ports gets a proxy to the TLS server, and
#    the instance must connect within the session timeout and a margin
#    (20 s).  The client without scripts/zkclient/03-tls-connect-timeout.patch
#    waited until the kernel gave the connection attempt up (133 s).  Three
#    hosts, not two: after a failed attempt the C client (3.8.0) advances
#    its list twice (handle_error, then zoo_cycle_next_server), so with an
#    even number of hosts it tries only half of them again;
#  - three servers that accept a connection and close it at once: OpenSSL
#    says it two ways ("unexpected eof while reading", "connection closed
#    during the TLS handshake") and each failure names its server, so
#    last_error changes with the server or the words: four failures counted
#    from its changes, the log has one line per kind of failure and outage
#    (at most two), not one per retry, wording or server; a change of
#    zklock.hosts starts another outage, logged again.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkTls;
use ZkChaos;

use IPC::Run;
use IO::Socket::INET;
use Socket qw(PF_INET SOCK_STREAM SOL_SOCKET SO_REUSEADDR inet_aton pack_sockaddr_in);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

# zklock's nodes are its x509 identity's: the test looks with its certificate
my $secure = zk_tls_start(clients => ['node1'], zkutil_as => 'node1');
my $tls_conf = zk_tls_conf('node1');

# --- a server that drops connection attempts --------------------------------
# The black hole: listen(0) lets one connection into the accept queue; the
# first filler takes that place (never accepted), so the kernel drops the
# SYNs of every later one.  The sockets live as long as this process.
my $bh_port = PostgreSQL::Test::Cluster::get_free_port();
my $bh_addr = pack_sockaddr_in($bh_port, inet_aton('127.0.0.1'));
socket(my $bh, PF_INET, SOCK_STREAM, 0) or die "socket: $!";
setsockopt($bh, SOL_SOCKET, SO_REUSEADDR, 1) or die "setsockopt: $!";
bind($bh, $bh_addr) or die "bind $bh_port: $!";
listen($bh, 0) or die "listen: $!";
my @fill;
for (1 .. 3)
{
	my $c = IO::Socket::INET->new(Proto => 'tcp', Blocking => 0) or die "socket: $!";
	connect($c, $bh_addr);    # in progress: EINPROGRESS
	push @fill, $c;
}
sleep(0.5);
my $probe = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$bh_port", Timeout => 2);
ok(!defined $probe, 'the black hole drops connection attempts (a connect times out)')
  or diag('a connect to the black hole succeeded');

# nothing listens on these two (yet)
my ($late, $refusing) = map { PostgreSQL::Test::Cluster::get_free_port() } 1 .. 2;
my $node1 = zk_node('node1', hosts => "127.0.0.1:$bh_port,127.0.0.1:$late,127.0.0.1:$refusing",
	start => 0, extra_conf => $tls_conf);
$node1->start;
$node1->safe_psql('postgres', 'CREATE EXTENSION zklock');
# the client tries a refusing port at once whenever it comes first, and
# then waits in the black hole: soon it is there whatever the order
sleep(3);
is(psql1($node1, 'SELECT state FROM zk_lock_status'), 'connecting',
	'with a black hole and ports that refuse, the instance is not connected');
my $t0 = time();
my $px = ZkChaos::Proxy->start(links => [ [ 'tls', $late, $secure ] ]);
my $ok = zk_wait_connected($node1, 40);
my $took = time() - $t0;
ok($ok, 'the TLS server reachable: the instance connects');
cmp_ok($took, '<', 20,
	'within the session timeout (4 s) and a margin: the attempt at the black hole was given up after 2/3 of it (not the kernel\'s 133 s)')
  or diag("took ${took}s");
note "connected ${took}s after the TLS server became reachable";
if ($ok)
{
	my $s1 = zk_session($node1, 'holder');
	$s1->query_ok('BEGIN');
	$s1->query_ok(q{SELECT zk_lock_acquire('tls/bh')});
	is(zk_count_locks(zk_path('tls/bh')), 1, 'and takes a lock');
	$s1->query_ok('COMMIT');
	$s1->quit;
}
else
{
	fail('and takes a lock');
}
$node1->stop;

# --- three servers that accept and close at once ----------------------------
my @closer_ports = map { PostgreSQL::Test::Cluster::get_free_port() } 1 .. 3;
my ($cl_out, $cl_err) = ('', '');
my $closers = IPC::Run::start(
	[
		'/usr/bin/python3', '-c', <<'EOP', $$, @closer_ports ],
import os, select, socket, sys
owner = int(sys.argv[1])
ls = []
for p in sys.argv[2:]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('127.0.0.1', int(p)))
    s.listen(16)
    ls.append(s)
print('ready', flush=True)
while True:
    try:
        os.kill(owner, 0)
    except OSError:
        sys.exit(0)
    r, _, _ = select.select(ls, [], [], 1)
    for s in r:
        c, _ = s.accept()
        c.close()
EOP
	'<', \undef, '>', \$cl_out, '2>', \$cl_err);
wait_until(sub { $closers->pump_nb; $cl_out =~ /ready/ }, timeout => 10)
  or BAIL_OUT("the closing listeners did not start: $cl_err");

my $closing_hosts = join(',', map { "127.0.0.1:$_" } @closer_ports);
my $node2 = zk_node('node2', hosts => $closing_hosts, start => 0, extra_conf => $tls_conf);
$node2->start;
$node2->safe_psql('postgres', 'CREATE EXTENSION zklock');
# The failures, counted from last_error's changes: each failure names its
# server, so a change of last_error is another failure (at another server,
# or in other words), whatever OpenSSL's wording; the client retries every
# second or more, last_error is polled every 0.1 s, and it may fail at one
# server several times in a row (not counted: a lower bound).  Four
# failures seen at two servers or more: a log line per retry would be four
# lines or more, and one per server and wording (the rule of 605bbae's
# bug) as many as the distinct pairs seen, which is three or more in
# most runs (the client does not always reach the third server: its
# order after a failure is its own; the third is waited for 20 s).
my (%seen, %servers);
my ($prev, $changes) = ('', 0);
my $t_start = time();
my $until = $t_start + 60;
while (time() < $until
	&& ($changes < 4 || keys(%servers) < 2
		|| (keys(%servers) < 3 && time() < $t_start + 20)))
{
	my $e = psql1($node2, q{SELECT coalesce(last_error, '') FROM zk_lock_status});
	if ($e =~ /^TLS handshake with (\S+) failed: / && $e ne $prev)
	{
		$changes++;
		$servers{$1} = 1;
		$prev = $e;
	}
	$seen{$e}++ if $e ne '';
	sleep(0.1);
}
cmp_ok($changes, '>=', 4, 'last_error followed the TLS failures (4 seen, each naming its server)')
  or diag('last_error seen: ' . join(' | ', sort keys %seen));
cmp_ok(scalar(keys %servers), '>=', 2, '... at two servers or more (' . scalar(keys %servers) . ' of 3)')
  or diag('last_error seen: ' . join(' | ', sort keys %seen));
note 'last_error seen: ' . join(' | ', sort keys %seen);
my $tls_lines = zk_log_count($node2, qr/LOG:  zklock: TLS handshake with/);
my $zk_lines = zk_log_count($node2, qr/LOG:  zklock: /);
cmp_ok($tls_lines, '>=', 1, 'the failure is logged');
my $pairs = scalar(grep { /^TLS handshake with / } keys %seen);
note "$pairs distinct (server, wording) pairs in last_error";
cmp_ok($tls_lines, '<=', 2, "once per kind of failure over $changes failures ($pairs distinct server and wording pairs), not once per retry, wording or server")
  or diag(PostgreSQL::Test::Utils::slurp_file($node2->logfile) =~ s/^(?!.*zklock).*\n//mgr);
cmp_ok($zk_lines, '<=', 5, "at most a few of zklock's lines in the log ($zk_lines)");
ok(zk_wait_log($node2,
		qr/HINT:  Does zklock.hosts name the servers' secureClientPort, and do they serve TLS there\?/,
		0, 1),
	'with what to check');

# another outage (zklock.hosts changed): said again
my $log_at = -s $node2->logfile;
$node2->append_conf('postgresql.conf',
	"zklock.hosts = '" . join(',', map { "127.0.0.1:$_" } reverse @closer_ports) . "'\n");
$node2->reload;
ok(zk_wait_log($node2, qr/LOG:  zklock: TLS handshake with/, $log_at, 15),
	'zklock.hosts changed: the failure is logged again');
$node2->stop;
$closers->kill_kill;
$px->stop;

zk_done_check();
done_testing();
