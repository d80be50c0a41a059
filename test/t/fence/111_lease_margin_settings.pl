
# Settings the manual promises (issue 28, finding 7):
#  - a reload that makes zklock.lease_margin too large for the negotiated
#    session timeout (under a third of it) logs a WARNING naming
#    zklock.lease_margin and the session timeout (before: nothing);
#  - then, taking again a lock whose parent this session holds fails with
#    55P03 naming the resource asked for (nest/b), not only its parent
#    (nest), and a DETAIL naming zklock.lease_margin and the session
#    timeout (before: 'lock on resource "nest" is not proven held; it is
#    not taken again', blaming the leader's answers);
#  - zklock.node_name left unset: SHOW gives the name the node data carry
#    (host name and port; before: an empty string), and zk_locks shows the
#    same name; a reload keeps it.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;

zk_start();
my $node = zk_node('node1', session_timeout => '4s', lease_margin => '500ms');
my $timeout = psql1($node, 'SELECT session_timeout FROM zk_lock_status');
cmp_ok($timeout, '>=', 2000, "the negotiated session timeout ($timeout ms)");

# a session holding nest/a with its parent nest
my $s = zk_session_as($node, 'holder', undef);
$s->query_ok(q{SELECT zk_lock_acquire_session('nest/a') > 0});

# the margin raised past half of the session timeout, by a reload
my $margin = $timeout;    # ms: at least half, more than a third
my $log_at = -s $node->logfile;
$node->safe_psql('postgres', "ALTER SYSTEM SET zklock.lease_margin = '${margin}ms'");
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok( zk_wait_log($node,
		qr/WARNING:  zklock: the negotiated session timeout \($timeout ms\) is less than three times zklock.lease_margin \($margin ms\)/,
		$log_at, 30),
	'the reload logs a WARNING naming zklock.lease_margin and the session timeout');
ok( wait_until(
		sub { psql1($node, q{SELECT setting FROM pg_settings WHERE name = 'zklock.lease_margin'}) eq $margin },
		timeout => 30),
	'the new margin is in force');

# nest/b: its parent nest is held, and cannot be proven held
my $r = $s->query(q{SELECT zk_lock_acquire_session('nest/b')}, 60);
is($r->{sqlstate}, '55P03', 'taking nest/b fails with 55P03');
like($r->{err}, qr/zklock lock on resource "nest\/b" \(its parent "nest", held by this session\) is not proven held/,
	'the error names nest/b, the resource asked for');
like($r->{err}, qr/DETAIL:  zklock.lease_margin \($margin ms\) is at least half of the negotiated session timeout \($timeout ms\)/,
	'its DETAIL names zklock.lease_margin and the session timeout');
$s->query('SELECT zk_lock_release_all()');

# back to a margin that fits: no WARNING at this reload, locks work again
$log_at = -s $node->logfile;
$node->safe_psql('postgres', 'ALTER SYSTEM RESET zklock.lease_margin');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok( wait_until(
		sub { psql1($node, q{SELECT setting FROM pg_settings WHERE name = 'zklock.lease_margin'}) eq '500' },
		timeout => 30),
	'the margin is back to 500ms');
is($s->query_ok(q{SELECT zk_lock_acquire_session('nest/a') > 0, zk_lock_acquire_session('nest/b') > 0}),
	't|t', 'nest/a and nest/b are taken');
$s->query_ok('SELECT zk_lock_release_all()');
unlike(slurp_file($node->logfile, $log_at), qr/less than three times zklock.lease_margin/,
	'a reload to a margin that fits logs no WARNING');

# zklock.node_name unset: SHOW gives host name and port
my $bare = zk_node('bare', start => 0);
my $conf = slurp_file($bare->data_dir . '/postgresql.conf');
$conf =~ s/^zklock\.node_name = .*\n//m;
open(my $fh, '>', $bare->data_dir . '/postgresql.conf') or die $!;
print $fh $conf;
close($fh);
$bare->start;
$bare->safe_psql('postgres', 'CREATE EXTENSION zklock');
zk_wait_connected($bare) or BAIL_OUT('bare did not connect');
my $port = $bare->port;
my $shown = psql1($bare, 'SHOW zklock.node_name');
like($shown, qr/^.+:$port$/, "SHOW zklock.node_name is host name and port ($shown)");
is(psql1($bare, q{SELECT source FROM pg_settings WHERE name = 'zklock.node_name'}),
	'default', 'pg_settings says it is the default');
my $b = zk_session($bare, 'bare_holder');
$b->query_ok(q{SELECT zk_lock_acquire_session('named') > 0});
is(psql1($node, q{SELECT instance FROM zk_locks WHERE resource = 'named'}), $shown,
	'zk_locks on another instance shows that name');
$b->query_ok('SELECT zk_lock_release_all()');
$bare->safe_psql('postgres', 'SELECT pg_reload_conf()');
sleep(1);
is(psql1($bare, 'SHOW zklock.node_name'), $shown, 'a reload keeps it');

zk_done_check();
done_testing();
