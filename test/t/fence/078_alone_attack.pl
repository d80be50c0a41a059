
# Attacks on the listing guard counting lock nodes only (issue 18, by a
# reviewer who did not write it): a parent's implicit SHARED lock on "m",
# whose resource node also has the child resource "r", is granted "alone"
# and guarded by its listing's child watch.  What else is among the
# children must not matter for safety.  "r" is made beforehand in (a)-(c),
# so that the parent's listing shows its lock node beside "r" (else making
# "r" fires that listing and the guard is the node's own): (a)-(c) assert
# the listing guards it (wchp: no data watch on the node), which fails
# without the change; every safety assertion passes with and without it.
#  (a) 'am/r' held in a transaction, another client deletes ONLY the
#      parent's lock node under "am": LOST, COMMIT refused;
#  (b) the same with 'bm/r' held at session scope, a transaction writing
#      under it: COMMIT refused;
#  (c) while the parent's lock is held, other child resources of "cm"
#      ("cm/x", "cm/y") are created and removed by other backends of both
#      instances and by the container cleanup; then the parent's lock node
#      is deleted: LOST, COMMIT refused;
#  (d) lock nodes of other clients' formats (Hive's, Curator's, Kazoo's)
#      and a child that almost looks like a lock node ("LOCK-SHARED-12")
#      beside the parent's lock node: deletion still refused at COMMIT;
#      and after release, no watch is left (mntr zk_watch_count);
#  (g) only the nested lock's own node deleted (transaction, session;
#      the parent's lock then guarded by its listing): LOST, refused;
#  (f) the parent's resource node deleted with its subtree: both LOST;
#  (e) herd: 8 backends on two instances cycling 'hm/a'..'hm/h' (all under
#      "hm"): notifications per cycle (packets sent minus requests, idle
#      subtracted) stay bounded, and 8 backends cost about what 2 do.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my $conf = "zklock.sweep_interval = '1h'";
my $node1 = zk_node('node1', session_timeout => '20s', extra_conf => $conf);
my $node2 = zk_node('node2', session_timeout => '20s', extra_conf => $conf);
$node1->safe_psql('postgres', 'CREATE TABLE guarded(v int)');

sub lost_on
{
	my ($node) = @_;
	return psql1($node, q{SELECT count(*) FROM zk_lock_local WHERE state = 'lost'});
}

# the lock nodes directly under resource $res (not those of its children)
sub own_lock_nodes
{
	my ($res, @other) = @_;
	my $p = zk_path($res);
	my %other = map { $_ => 1 } @other;
	return grep { !$other{$_} && m{^\Q$p\E/[^/]*LOCK-(SHARED|EXCLUSIVE)-\d{10}$} }
	  zk_list_znodes($p);
}

sub watches_back
{
	my ($label) = @_;
	my $left;
	ok(wait_until(sub { ($left = zk_mntr()->{zk_watch_count} // -1) == 2 }, timeout => 15),
		"$label: no watch left (the two mailboxes')") or diag("zk_watch_count $left");
}

# "r" under $m made beforehand (as a holder of $m/r would leave it), so that
# the parent's listing shows its lock node beside "r": the case the change
# guards by the listing alone
sub premake
{
	my ($m) = @_;
	is((ZkLockTest::zkutil('create-acl', zk_path("$m/r"), 'rwcda', 'o:pw'))[0], 0,
		"\"$m/r\" exists beforehand");
}

# guarded by its listing: no data watch on the lock node (wchp lists data
# watches only; the listing's is a child watch)
sub listing_guarded
{
	my ($path, $label) = @_;
	my %watched = map { $_ => 1 } map { m{(/\S+)} ? $1 : () } split /\n/, zk_server('4lw', 1, 'wchp');
	ok(!$watched{$path}, "$label: the parent's lock is guarded by its listing, not by a watch on its node")
	  or diag(zk_server('4lw', 1, 'wchp'));
}

sub refused
{
	my ($h, $label) = @_;
	my $r = $h->query('COMMIT');
	is($r->{sqlstate}, '55P03', "$label: COMMIT refused");
	$h->quit;
}

ok(wait_until(sub { (zk_mntr()->{zk_watch_count} // -1) == 2 }, timeout => 20),
	'baseline: both mailboxes are watched');

# --- (a) transaction scope: only the parent's lock node deleted -------------
{
	premake('am');
	my $h = zk_session($node1, 'a');
	$h->query_ok('BEGIN');
	$h->query_ok(q{SELECT zk_lock_acquire('am/r')});
	$h->query_ok('INSERT INTO guarded VALUES (1)');
	my @p = own_lock_nodes('am');
	is(scalar @p, 1, '(a) one lock node under "am" (the parent\'s SHARED), beside "r"')
	  or diag(join ' ', zk_list_znodes(zk_path('am')));
	listing_guarded($p[0], '(a)');
	is((ZkLockTest::zkutil('delete-r', $p[0]))[0], 0, '(a) another client deletes it alone');
	ok(wait_until(sub { lost_on($node1) eq '1' }, timeout => 10), '(a) the parent\'s lock is LOST');
	refused($h, '(a)');
	ok(zk_wait_no_locks(zk_path('am'), 10), '(a) no node left');
	ZkLockTest::zkutil('delete-private', zk_path('am'), 'o:pw');
	watches_back('(a)');
}

# --- (b) session scope ----------------------------------------------------
{
	premake('bm');
	my $h = zk_session($node1, 'b');
	$h->query_ok(q{SELECT zk_lock_acquire_session('bm/r')});
	$h->query_ok('BEGIN');
	$h->query_ok('INSERT INTO guarded VALUES (2)');
	my @p = own_lock_nodes('bm');
	is(scalar @p, 1, '(b) one lock node under "bm"');
	listing_guarded($p[0], '(b)');
	is((ZkLockTest::zkutil('delete-r', $p[0]))[0], 0, '(b) another client deletes it alone');
	ok(wait_until(sub { lost_on($node1) eq '1' }, timeout => 10), '(b) the parent\'s session lock is LOST');
	refused($h, '(b)');
	ok(zk_wait_no_locks(zk_path('bm'), 10), '(b) no node left');
	ZkLockTest::zkutil('delete-private', zk_path('bm'), 'o:pw');
	watches_back('(b)');
}

# --- (c) sibling child resources churn, then the parent's node deleted -------
for my $scope ('transaction', 'session')
{
	my $L = "(c $scope)";
	premake('cm');
	my $h = zk_session($node1, "c-$scope");
	if ($scope eq 'session')
	{
		$h->query_ok(q{SELECT zk_lock_acquire_session('cm/r')});
		$h->query_ok('BEGIN');
	}
	else
	{
		$h->query_ok('BEGIN');
		$h->query_ok(q{SELECT zk_lock_acquire('cm/r')});
	}
	$h->query_ok('INSERT INTO guarded VALUES (3)');
	my @p = own_lock_nodes('cm');
	is(scalar @p, 1, "$L one lock node under \"cm\"");
	listing_guarded($p[0], $L);
	# other backends of both instances take and release "cm/x" and "cm/y"
	# (their resource nodes, containers, come and go), with and without the
	# parent's lock
	for my $i (1 .. 3)
	{
		$node2->safe_psql('postgres',
			q{SELECT zk_lock_acquire_session('cm/x', parents => false); SELECT zk_lock_release('cm/x')});
		$node1->safe_psql('postgres',
			q{SELECT zk_lock_acquire_session('cm/y'); SELECT zk_lock_release('cm/y')});
	}
	# and the container cleanup removes the empty "x" and "y" (1 s interval)
	ok(wait_until(sub { !grep { m{/cm/[xy]$} } zk_list_znodes(zk_path('cm')) }, timeout => 15),
		"$L the container cleanup removed \"cm/x\" and \"cm/y\"");
	is(lost_on($node1), '0', "$L the holder is not disturbed by the churn");
	is((ZkLockTest::zkutil('delete-r', $p[0]))[0], 0, "$L then another client deletes the parent's lock node");
	ok(wait_until(sub { lost_on($node1) eq '1' }, timeout => 10), "$L the lock is LOST");
	refused($h, $L);
	ok(zk_wait_no_locks(zk_path('cm'), 10), "$L no node left");
	ZkLockTest::zkutil('delete-private', zk_path('cm'), 'o:pw');
	watches_back($L);
}

# --- (f) the parent's whole resource node deleted, child resource and all ---
{
	my $h = zk_session($node1, 'f');
	$h->query_ok('BEGIN');
	$h->query_ok(q{SELECT zk_lock_acquire('fm/r')});
	$h->query_ok('INSERT INTO guarded VALUES (5)');
	is((ZkLockTest::zkutil('delete-r', zk_path('fm')))[0], 0,
		'(f) another client deletes "fm" with its lock node and "fm/r"');
	ok(wait_until(sub { lost_on($node1) eq '2' }, timeout => 10), '(f) both locks are LOST');
	refused($h, '(f)');
	ok(zk_wait_no_locks(zk_path('fm'), 10), '(f) no node left');
	watches_back('(f)');
}

# --- (g) only the nested lock's own node deleted (not its parent's) ---------
for my $scope ('transaction', 'session')
{
	my $L = "(g $scope)";
	my $h = zk_session($node1, "g-$scope");
	$h->query_ok('BEGIN') if $scope eq 'transaction';
	$h->query_ok($scope eq 'transaction' ? q{SELECT zk_lock_acquire('gm/r')}
		: q{SELECT zk_lock_acquire_session('gm/r')});
	$h->query_ok('BEGIN') if $scope eq 'session';
	$h->query_ok('INSERT INTO guarded VALUES (6)');
	my @p = own_lock_nodes('gm/r');
	is(scalar @p, 1, "$L one lock node under \"gm/r\"");
	is((ZkLockTest::zkutil('delete-r', $p[0]))[0], 0, "$L another client deletes it alone");
	ok(wait_until(sub { lost_on($node1) eq '1' }, timeout => 10), "$L the nested lock is LOST");
	refused($h, $L);
	ok(zk_wait_no_locks(zk_path('gm'), 10), "$L no node left");
	watches_back($L);
}

# --- (d) other clients' nodes, and a near-lock name, beside ours ------------
{
	my $uuid = '0f0e0d0c-0b0a-0908-0706-050403020100';
	# before our lock (lower sequence numbers, SHARED, so that ours is
	# granted) or after it (any mode), or not a lock node at all
	my @cases = (
		[ 'hive shared before',    [ 'LOCK-SHARED-' ],              [] ],
		[ 'curator read before',   [ "_c_$uuid-__READ__" ],         [] ],
		[ 'kazoo rlock before',    [ "${uuid}__rlock__" ],          [] ],
		[ 'curator mutex after',   [],                              [ "_c_$uuid-lock-" ] ],
		[ 'kazoo lock after',      [],                              [ "${uuid}__lock__" ] ],
		[ 'near-lock name before', [ 'plain:LOCK-SHARED-12' ],      [] ],
		[ 'near-lock names both',  [ 'plain:LOCK-SHARED-12', 'plain:lock-123' ],
			[ 'plain:__lock__99' ] ],
	);
	my $i = 0;
	for my $c (@cases)
	{
		my ($label, $before, $after) = @$c;
		my $res = 'dm' . $i++;
		my $make = sub {
			my ($name) = @_;
			if ($name =~ s/^plain://)
			{
				ZkLockTest::zkutil('create-acl', zk_path("$res/$name"), 'rwcda', 'o:pw');
				return zk_path("$res/$name");
			}
			my ($rc, $out) = ZkLockTest::zkutil('create-seq', zk_path("$res/$name"), 'other');
			chomp $out;
			return $out;
		};
		my @foreign = map { $make->($_) } @$before;
		my $h = zk_session($node1, "d$i");
		$h->query_ok('BEGIN');
		$h->query_ok(qq{SELECT zk_lock_acquire('$res/r')});
		$h->query_ok('INSERT INTO guarded VALUES (4)');
		push @foreign, map { $make->($_) } @$after;
		my @p = own_lock_nodes($res, @foreign);
		is(scalar @p, 1, "(d $label) our parent lock beside " . join(', ', map { s{.*/}{}r } @foreign));
		is((ZkLockTest::zkutil('delete-r', $p[0]))[0], 0, "(d $label) another client deletes it");
		ok(wait_until(sub { lost_on($node1) eq '1' }, timeout => 10), "(d $label) the lock is LOST");
		refused($h, "(d $label)");
		ZkLockTest::zkutil('delete-private', zk_path($res), 'o:pw');
		watches_back("(d $label)");
	}
	# released normally (not lost) beside such nodes: no watch left either
	my $res = 'dmr';
	ZkLockTest::zkutil('create-acl', zk_path("$res/LOCK-SHARED-12"), 'rwcda', 'o:pw');
	ZkLockTest::zkutil('create-seq', zk_path("$res/${uuid}__rlock__"), 'other');
	for my $k (1 .. 20)
	{
		$node1->safe_psql('postgres', qq{BEGIN; SELECT zk_lock_acquire('$res/r'); COMMIT;});
		$node2->safe_psql('postgres', qq{SELECT zk_lock_acquire_session('$res/s$k'); SELECT zk_lock_release('$res/s$k')});
	}
	watches_back('(d released 40 times beside foreign nodes)');
	is_worker_watches($node1, '1', '(d) node1 counts its mailbox only');
	is_worker_watches($node2, '1', '(d) node2 counts its mailbox only');
	ZkLockTest::zkutil('delete-private', zk_path($res), 'o:pw');
}

# --- (e) herd: 8 backends, two instances, 'hm/a' .. 'hm/h' -------------------
{
	for my $n ($node1, $node2)
	{
		$n->safe_psql('postgres', <<'EOS');
CREATE FUNCTION hcycles(k int, secs float8) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	n int := 0;
	t0 timestamptz := clock_timestamp();
	r text;
BEGIN
	WHILE clock_timestamp() < t0 + make_interval(secs => secs) LOOP
		r := 'hm/' || chr(97 + (k + n) % 8);
		PERFORM zk_lock_acquire_session(r);
		PERFORM zk_lock_release(r);
		n := n + 1;
	END LOOP;
	RETURN n;
END $$;
EOS
	}
	my $herd = sub {
		my ($n) = @_;
		my $m0 = zk_mntr();
		my $t0 = time();
		sleep(2);
		my $m1 = zk_mntr();
		my $t1 = time();
		my $idle = (($m1->{zk_packets_sent} - $m1->{zk_packets_received}) -
			  ($m0->{zk_packets_sent} - $m0->{zk_packets_received})) / ($t1 - $t0);
		my @s = map { zk_session($_ % 2 ? $node2 : $node1, "herd$n-$_") } 0 .. $n - 1;
		$s[$_]->send("SELECT hcycles($_, 4)") for 0 .. $n - 1;
		my $cycles = 0;
		for my $s (@s)
		{
			my $r = $s->wait(60);
			ok($r && $r->{sqlstate} eq '00000', $s->name . ' cycled without error');
			$cycles += ($r && $r->{out} =~ /(\d+)/) ? $1 : 0;
			$s->quit;
		}
		sleep(0.5);
		my $m2 = zk_mntr();
		my $t2 = time();
		my $notes = (($m2->{zk_packets_sent} - $m2->{zk_packets_received}) -
			  ($m1->{zk_packets_sent} - $m1->{zk_packets_received})) - $idle * ($t2 - $t1);
		cmp_ok($cycles, '>', 50, "(e) $cycles cycles of $n backends");
		my $per = $notes / ($cycles || 1);
		diag sprintf('(e) %d backends: notifications per cycle %.2f (%d over %d cycles)',
			$n, $per, $notes, $cycles);
		return $per;
	};
	my $two = $herd->(2);
	my $eight = $herd->(8);
	# one child watch per session and path: 8 backends cost no more
	# notifications per cycle than 2 (one per instance) do
	cmp_ok($eight, '<=', $two + 2.5, '(e) 8 backends cost about what 2 do per cycle: no herd');
	cmp_ok($eight, '<=', 5, '(e) notifications per cycle stay bounded (<= 5)');
	ok(zk_wait_no_locks(zk_path('hm'), 10), '(e) no node left');
	watches_back('(e)');
}

zk_done_check();
done_testing();
