
# The guards of queue takes leave no watch behind (issue 31, REVIEW.md
# classes 5 and 13; review of test 150's fix): a guard owed
# (queue-before-guard=fail: not sent at the grant) for a take that is then
# released or consumed is never sent for it; guards owed across a
# reconnection are sent once each; and after many cycles, and after
# reconnections, the server's watch count (mntr zk_watch_count) and the
# worker's (zk_lock_status.watches) are back where they began.
#  - 40 takes with the guard owed, each committed (consumed) or rolled
#    back (given back) while owed: no watch left, the items right
#  - 40 takes with the guard sent: no watch left
#  - 4 takes held with their guards owed, the link cut, a fifth rolled
#    back while cut: healed, the worker reconnects and sends the 4 owed
#    guards (4 watches more on the server, not 5), then their releases
#    take them all away again; a second reconnection adds none
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkChaos;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $hosts = zk_start();
my ($zk_port) = $hosts =~ /:(\d+)$/;
my $px = ZkChaos::Proxy->start(
	links => [ [ 'node1', PostgreSQL::Test::Cluster::get_free_port(), $zk_port ] ]);
my $node1 = zk_node('node1', hosts => '127.0.0.1:' . $px->port('node1'),
	session_timeout => '10s', extra_conf => "zklock.sweep_interval = '1h'");

sub srv_watches { return zk_mntr()->{zk_watch_count} // -1; }
sub wrk_watches { return psql1($node1, 'SELECT watches FROM zk_lock_status'); }
sub since { return psql1($node1, 'SELECT state_since FROM zk_lock_status'); }

my $o = zk_session($node1, 'O');
$o->query_ok(q{SELECT count(zk_queue_put_now('gw', 'x' || i))
	FROM generate_series(1, 100) i});
ok(wait_until(sub { my $w = srv_watches(); sleep 1; $w == srv_watches() },
		timeout => 30), 'the watch count settles');
my ($srv0, $wrk0) = (srv_watches(), wrk_watches());
note("watches at the start: server $srv0, worker $wrk0");

sub back_to_start
{
	my ($what) = @_;
	ok(wait_until(sub { srv_watches() == $srv0 }, timeout => 30),
		"$what: the server's watch count is back to $srv0")
	  or diag('got ' . srv_watches());
	is_worker_watches($node1, $wrk0, "$what: the worker's too");
}

my $s = zk_session($node1, 'S');

# --- owed guards, released or consumed while owed
ok(zk_set_failpoints($node1, 'queue-before-guard=fail'), 'failpoint set');
my $consumed = 0;
for my $i (1 .. 40)
{
	$s->query_ok('BEGIN');
	my $id = $s->query_ok(q{SELECT id FROM zk_queue_try_take('gw')});
	like($id, qr/^entry-/, "take $i") if $i == 1;
	if ($i % 2) { $s->query_ok('COMMIT'); $consumed++; }
	else        { $s->query_ok('ROLLBACK'); }
}
ok(zk_set_failpoints($node1, ''), 'failpoint cleared');
back_to_start('40 owed guards released or consumed');
is($o->query_ok(q{SELECT zk_queue_length('gw')}), 100 - $consumed,
	'the commits consumed their items, the rollbacks gave theirs back');

# --- guards sent
for my $i (1 .. 40)
{
	$s->query_ok('BEGIN');
	$s->query_ok(q{SELECT id FROM zk_queue_try_take('gw')});
	if ($i % 2) { $s->query_ok('COMMIT'); $consumed++; }
	else        { $s->query_ok('ROLLBACK'); }
}
back_to_start('40 guarded takes');

# --- owed across a reconnection
my @h = map { zk_session($node1, "H$_") } 1 .. 5;
ok(zk_set_failpoints($node1, 'queue-before-guard=fail'), 'failpoint set again');
for my $h (@h)
{
	$h->query_ok('BEGIN');
	like($h->query_ok(q{SELECT id FROM zk_queue_try_take('gw')}), qr/^entry-/,
		$h->name . ' holds an item, its guard owed');
}
is(srv_watches(), $srv0, 'no guard on the server');
my $since = since();
$px->cut('node1');
ok(zk_set_failpoints($node1, ''), 'failpoint cleared, the link cut');
$h[4]->send('ROLLBACK');		# released while cut
ok(wait_until(sub { psql1($node1, 'SELECT state FROM zk_lock_status') ne 'connected' },
		timeout => 30), 'node1 notices the cut');
$px->heal('node1');
ok(zk_wait_connected($node1, 60), 'node1 connected again');
isnt(since(), $since, 'node1 did reconnect');
my $r = $h[4]->wait(60);
ok($r && $r->{sqlstate} eq '00000', 'the ROLLBACK while cut returned') or diag(explain($r));
ok(wait_until(sub { srv_watches() == $srv0 + 4 }, timeout => 30),
	'the 4 owed guards are sent: 4 watches more') or diag('got ' . srv_watches());
sleep(1);
is(srv_watches(), $srv0 + 4, 'and no more');

$since = since();
$px->cut('node1');
ok(wait_until(sub { psql1($node1, 'SELECT state FROM zk_lock_status') ne 'connected' },
		timeout => 30), 'cut again: node1 notices (no traffic but its pings)');
$px->heal('node1');
ok(zk_wait_connected($node1, 60), 'node1 connected again');
ok(wait_until(sub { since() ne $since }, timeout => 30), 'a second reconnection');
ok(wait_until(sub { srv_watches() == $srv0 + 4 }, timeout => 30),
	'still 4 watches after it') or diag('got ' . srv_watches());

$h[0]->query_ok('COMMIT');
$h[1]->query_ok('COMMIT');
$h[2]->query_ok('ROLLBACK');
$h[3]->query_ok('ROLLBACK');
$consumed += 2;
back_to_start('the 4 released');
is($o->query_ok(q{SELECT zk_queue_length('gw')}), 100 - $consumed,
	'the queue has what it should');

$_->quit for @h, $s, $o;
$px->stop;
zk_done_check();
done_testing();
