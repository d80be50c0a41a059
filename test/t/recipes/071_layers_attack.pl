
# The worker's recipes side by side (issue 17: recipe.c below the lock,
# the listing, admin, the sweep, the orphans, the root's check and the
# election): each change of the session reaches every recipe, and each
# request that waits for something is ended by someone.
#  (a) node1's session is lost (its worker stopped past the session
#      timeout; zklock.connect_timeout long enough that backends wait for
#      the worker's verdict) while on node1 a transaction holds a lock and has written,
#      a request waits behind node2's holder, an explicit request waits
#      behind node2's explicit lock, a request arrives during the stall,
#      and node1 leads an election group.  Afterwards: the commit fails
#      (55P03) and its write is not visible; both waiting requests fail
#      (08006); the explicit request's persistent node is removed once
#      connected again (orphans); the late request ends either way; node2
#      leads; node1 is a candidate again; no entry stays in use; a lock
#      and its guard, zk_locks, zk_leader and a force-release work in the
#      new session.
#  (b) node1 is cut from ZooKeeper (a proxy swallowing every byte): a
#      request of each recipe (a lock, zk_locks, zk_leader, an
#      administrator's delete), made while disconnected, ends within
#      zklock.connect_timeout (plus slack) with 08006, none is left in use,
#      and once the cut heals every recipe works again.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkChaos;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $SESSION_TIMEOUT = 4;    # zk_node's default zklock.session_timeout
my $CONNECT_TIMEOUT = 2;    # zklock.connect_timeout in (b)
my $SLACK = 10;             # a loaded test machine
my $BOUND = $SESSION_TIMEOUT + $CONNECT_TIMEOUT + $SLACK;

my $hosts = zk_start();
my ($zk_port) = $hosts =~ /:(\d+)$/;
my $px = ZkChaos::Proxy->start(
	links => [ [ 'node1', PostgreSQL::Test::Cluster::get_free_port(), $zk_port ] ]);
# (a): long enough that backends wait for the stopped worker's verdict
# rather than give up on it themselves (55000)
my $conf = "zklock.elections = 'grp'\nzklock.connect_timeout = '60s'";
my $node1 = zk_node('node1', hosts => '127.0.0.1:' . $px->port('node1'),
	extra_conf => $conf);
ok(wait_until(sub { psql1($node1, q{SELECT zk_is_leader('grp')}) eq 't' }, timeout => 20),
	'node1, first, leads grp');
my $node2 = zk_node('node2', extra_conf => $conf);
$node1->safe_psql('postgres', 'CREATE TABLE t(v int)');

sub in_use
{
	my ($node) = @_;
	return psql1($node, 'SELECT entries_in_use FROM zk_lock_status');
}

# Every recipe answers on $node: a lock (with its guard: a force-release
# of it turns it LOST), zk_locks, zk_leader, an administrator's delete
sub recipes_work
{
	my ($node, $label) = @_;
	my $s = zk_session($node, "check-$label");
	my $a = zk_session($node, "admin-$label");
	$s->query_ok('BEGIN');
	like($s->query_ok(q{SELECT zk_lock_acquire('ly/check', timeout => '20 s')}),
		qr/^\d+$/, "$label: a lock is granted");
	is($a->query_ok(q{SELECT count(*) FROM zk_locks('ly/check')}), '1',
		"$label: zk_locks lists it");
	like($a->query_ok(q{SELECT zk_leader('grp')}), qr/\S/,
		"$label: zk_leader answers");
	is($a->query_ok(q{SELECT zk_lock_force_release('ly/check')}), '1',
		"$label: a force-release removes it");
	ok(wait_until(
			sub {
				$a->query_ok(q{SELECT count(*) FROM zk_lock_local() WHERE state = 'lost'}) eq '1';
			},
			timeout => $SLACK),
		"$label: the holder's guard turns it LOST");
	is($s->query('COMMIT')->{sqlstate}, '55P03', "$label: its commit fails");
	$s->quit;
	$a->quit;
	return;
}

# --- (a) the session is lost under every recipe ------------------------------
my $h1 = zk_session($node1, 'holder');
$h1->query_ok('BEGIN');
$h1->query_ok(q{SELECT zk_lock_acquire('ly/held')});
$h1->query_ok('INSERT INTO t VALUES (1)');

my $h2 = zk_session($node2, 'holder2');
$h2->query_ok('BEGIN');
$h2->query_ok(q{SELECT zk_lock_acquire('ly/wait')});
my $w1 = zk_session($node1, 'waiter');
$w1->query_ok('BEGIN');
$w1->send(q{SELECT zk_lock_acquire('ly/wait', timeout => '120 s')});
ok(wait_for_waiting($node1, $w1->pid), '(a) a request waits behind node2');

my $e2 = zk_session($node2, 'explicit2');
$e2->query_ok(q{SELECT zk_lock_acquire_explicit('ly/x', ttl => '10 minutes')});
my $x1 = zk_session($node1, 'explicit1');
$x1->send(q{SELECT zk_lock_acquire_explicit('ly/x', ttl => '10 minutes', timeout => '120 s')});
ok(wait_for_waiting($node1, $x1->pid), '(a) an explicit request waits behind node2\'s');
ok(zk_wait_count(zk_path('ly/x'), 2), '(a) the explicit request has its node');

my $r1 = zk_session($node1, 'late');
$r1->query_ok('BEGIN');

my $worker = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
kill 'STOP', $worker;
$r1->send(q{SELECT zk_lock_acquire('ly/late', timeout => '60 s')});
ok(zk_wait_count(zk_path('ly/held'), 0, $SESSION_TIMEOUT + $SLACK),
	'(a) ZooKeeper expired node1\'s session: its held node is gone');
ok(wait_until(sub { psql1($node2, q{SELECT zk_is_leader('grp')}) eq 't' },
		timeout => $BOUND),
	'(a) node2 leads grp');
kill 'CONT', $worker;

my $r = $w1->wait($BOUND);
ok(defined $r, '(a) the waiting request ended');
is($r && $r->{sqlstate}, '08006', '(a) it failed with 08006')
  or diag(explain($r));
$w1->query('ROLLBACK');

$r = $x1->wait($BOUND);
ok(defined $r, '(a) the waiting explicit request ended');
is($r && $r->{sqlstate}, '08006', '(a) it failed with 08006')
  or diag(explain($r));
ok(zk_wait_count(zk_path('ly/x'), 1, $BOUND),
	'(a) its persistent node is removed once connected again (orphans)');

$r = $r1->wait($BOUND);
ok(defined $r, '(a) the request made during the stall ended')
  or diag('still pending');
note('late request: ' . ($r ? $r->{sqlstate} : 'pending'));
$r1->query('ROLLBACK');

$r = $h1->query('COMMIT');
is($r->{sqlstate}, '55P03', '(a) the commit under the lost lock fails (55P03)')
  or diag(explain($r));
is(psql1($node1, 'SELECT count(*) FROM t'), '0', '(a) its write is not visible');

$h2->query_ok('ROLLBACK');
is($e2->query_ok(q{SELECT zk_lock_release_explicit('ly/x')}), '1',
	'(a) node2 releases its explicit lock');
ok(zk_wait_connected($node1), '(a) node1 is connected again');
ok(wait_until(sub { in_use($node1) eq '0' }, timeout => $BOUND),
	'(a) no entry stays in use on node1')
  or diag('entries_in_use: ' . in_use($node1));
ok(wait_until(
		sub {
			psql1($node1,
				q{SELECT coalesce(array_length(candidates, 1), 0) FROM zk_elections WHERE "group" = 'grp'})
			  eq '2';
		},
		timeout => $BOUND),
	'(a) node1 is a candidate of grp again');
recipes_work($node1, '(a) after the loss');
ok(zk_wait_no_locks(zk_path('ly')), '(a) no lock node left');

# --- (b) cut: requests of every recipe wait for the connection, bounded ------
$node1->safe_psql('postgres',
	"ALTER SYSTEM SET zklock.connect_timeout = '${CONNECT_TIMEOUT}s'");
$node1->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok(wait_until(sub { psql1($node1, 'SHOW zklock.connect_timeout') eq "${CONNECT_TIMEOUT}s" },
		timeout => 10),
	"(b) zklock.connect_timeout is ${CONNECT_TIMEOUT}s");
$px->cut('node1');
ok(wait_until(sub { psql1($node1, 'SELECT state FROM zk_lock_status') ne 'connected' },
		timeout => $SESSION_TIMEOUT + $SLACK),
	'(b) node1 notices the cut');
my %req = (
	lock    => q{SELECT zk_lock_acquire('ly/cut', timeout => '120 s')},
	listing => q{SELECT count(*) FROM zk_locks()},
	leader  => q{SELECT zk_leader('grp')},
	admin   => q{SELECT zk_lock_admin_node('ly/cut', 'LOCK-EXCLUSIVE-0000000001', 'delete', NULL)});
my %s;
foreach my $k (sort keys %req)
{
	$s{$k} = zk_session($node1, "cut-$k");
	$s{$k}->query_ok('BEGIN') if $k eq 'lock';
	$s{$k}->send($req{$k});
}
foreach my $k (sort keys %req)
{
	my $res = $s{$k}->wait($CONNECT_TIMEOUT + $SLACK);
	ok(defined $res, "(b) $k: ended while cut");
	is($res && $res->{sqlstate}, '08006', "(b) $k: failed with 08006")
	  or diag(explain($res));
	$s{$k}->query('ROLLBACK') if $k eq 'lock';
	$s{$k}->quit;
}
ok(wait_until(sub { in_use($node1) eq '0' }, timeout => $SLACK),
	'(b) no entry stays in use');
$px->heal('node1');
ok(zk_wait_connected($node1), '(b) connected again once healed');
recipes_work($node1, '(b) after the cut');

foreach my $s ($h1, $h2, $w1, $x1, $r1, $e2) { $s->quit; }
zk_done_check();
done_testing();
