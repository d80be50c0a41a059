
# Group commit (src/worker/batch.c): the creates and deletes that reach the worker
# in one pass of its loop go to ZooKeeper as one multi (one write
# transaction), a lock and its implicit SHARED parents included.
#
#  (a) a nested name 'gc/r' acquired and released costs 2 write
#      transactions per cycle (ZooKeeper's zxid, from srvr, before and after
#      N cycles, the idle change subtracted), as a flat name does; the
#      requests per cycle (mntr's packets received) are printed
#  (b) a grant's token is its node's czxid, the parent's and the leaf's
#      nodes made in one transaction (one czxid); when the multi's replies
#      are lost (failpoint), both nodes are found by prefix and adopted
#  (c) 16 backends acquire 4 nested resources at the same moment, over and
#      over: the tokens of every resource grow strictly with its grants
#  (d) 17 backends' requests reach the stopped worker together, one of them
#      on a resource node that refuses our creates: the multi fails as a
#      whole, the other 16 are still granted, the one fails with 38000, and
#      no lock node is left behind
#      (and a multi of deletes, one of whose nodes another client deleted:
#      the other is deleted all the same)
#  (e) 32 clients on 32 resources: their cycles share transactions (fewer
#      than 2 per cycle), printed with the requests per cycle
#  (f) connection losses (a proxy the test owns cuts the link and closes
#      it) while 16 clients on two instances take a nested lock over and
#      over: the chaos checker finds nothing granted twice, tokens that
#      grow, and nothing left behind; once the instances stop, their
#      anchor nodes (batch.c) are gone too
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkChaos;

use Test::More;
use Time::HiRes qw(sleep time);

my $hosts = zk_start();
my ($zk_port) = $hosts =~ /:(\d+)$/;

# no sweep during the test: its clock node would be writes of its own
my $node1 = zk_node('node1', extra_conf => "zklock.sweep_interval = '1h'");
my @stop_at_end = ($node1);

# ZooKeeper's zxid (srvr) and packets received (mntr)
sub zxid
{
	my $out = zk_server('4lw', 1, 'srvr');
	my ($z) = $out =~ /^Zxid: 0x([0-9a-f]+)/mi;
	return defined $z ? hex($z) : undef;
}

sub packets
{
	my $out = zk_server('4lw', 1, 'mntr');
	my ($p) = $out =~ /^zk_packets_received\t(\d+)/m;
	my ($q) = $out =~ /^zk_packets_sent\t(\d+)/m;
	return wantarray ? ($p, $q) : $p;
}

# Writes and requests of $work (a sub), less what the same time idle costs
sub measure
{
	my ($work) = @_;
	my ($z0, $t0) = (zxid(), time());
	my ($p0, $q0) = packets();
	$work->();
	sleep(0.5);    # the last deletes (COMMIT does not wait for them)
	my ($z1, $t1) = (zxid(), time());
	my ($p1, $q1) = packets();
	sleep($t1 - $t0);
	my $z2 = zxid();
	my ($p2, $q2) = packets();
	return ($z1 - $z0 - ($z2 - $z1), $p1 - $p0 - ($p2 - $p1),
		$q1 - $q0 - ($q2 - $q1));
}

# Keep the containers of the measured resources alive (ZooKeeper removes
# an empty one, a write of its own, and the next cycle would make it again):
# a keeper holds each SHARED, and the cycles take it SHARED too.
my $keeper = zk_session($node1, 'keeper');
$keeper->query_ok(q{SELECT zk_lock_acquire_session('gc/r', 'shared')});
$keeper->query_ok(q{SELECT zk_lock_acquire_session('gcflat', 'shared')});

# ---------------------------------------------------------------------------
# (a) writes and requests per cycle
{
	my $n = 60;
	my $s = zk_session($node1, 'cycler');
	my $cycle = sub {
		my ($sql) = @_;
		return sub {
			for (1 .. $n)
			{
				$s->query_ok('BEGIN');
				$s->query_ok($sql);
				$s->query_ok('COMMIT');
				# the release is not waited for: let it go before the next
				# cycle, so that cycles do not share transactions here
				sleep(0.02);
			}
		};
	};
	# one cycle first: the worker's first multi of the session also makes
	# its anchor node (batch.c), once
	$cycle->(q{SELECT zk_lock_acquire('gc/r', 'shared')})->() for 1;
	my ($wn, $pn, $sn) = measure($cycle->(q{SELECT zk_lock_acquire('gc/r', 'shared')}));
	my ($wf, $pf, $sf) = measure($cycle->(q{SELECT zk_lock_acquire('gcflat', 'shared', parents => false)}));
	diag(sprintf('(a) nested name: %.2f write transactions, %.2f requests and %.2f packets sent per cycle; '
		  . 'flat name: %.2f, %.2f and %.2f', $wn / $n, $pn / $n, $sn / $n,
		$wf / $n, $pf / $n, $sf / $n));
	cmp_ok($wn / $n, '<=', 2.0,
		"(a) a nested name costs at most 2 write transactions per cycle ($wn in $n cycles)");
	cmp_ok($wn / $n, '>=', 1.0, '(a) and the cycles were counted');
	cmp_ok($wf / $n, '<=', 2.0, "(a) a flat name too ($wf in $n cycles)");
	$s->quit;
}

# ---------------------------------------------------------------------------
# (b) the token is the czxid; parent and leaf in one transaction
{
	my $s = zk_session($node1, 'token');
	$s->query_ok('BEGIN');
	my $t = $s->query_ok(q{SELECT zk_lock_acquire('gc/r', 'shared')});
	my %czxid;
	foreach my $l (zk_lock_info(zk_path('gc')))
	{
		$czxid{ $l->[0] =~ m{/gc/r/} ? 'leaf' : 'parent' }{ $l->[1] } = 1;
	}
	ok($czxid{leaf}{$t}, "(b) the token ($t) is the czxid of the leaf's new node");
	ok($czxid{parent}{$t},
		'(b) the parent\'s SHARED node was made in the same transaction (same czxid)');
	$s->query_ok('COMMIT');
	$s->quit;
}

# (b) again with the replies of the multi's creates dropped, as a
# connection loss drops them: both nodes are found by their prefix
{
	my $log_at = -s $node1->logfile;
	ok(zk_set_failpoints($node1, 'after-create-reply=fail'),
		'(b) failpoint after-create-reply=fail');
	my $s = zk_session($node1, 'lost_replies');
	$s->query_ok('BEGIN');
	my $t = $s->query_ok(q{SELECT zk_lock_acquire('gc/r', 'shared', timeout => '20 s')});
	ok(zk_wait_log($node1, qr{adopted lock node "[^"]*/gc/r/[^"/]*"}, $log_at),
		'(b) the leaf\'s node, its reply lost, adopted');
	ok(zk_wait_log($node1, qr{adopted lock node "[^"]*/gc/zk[^"/]*"}, $log_at),
		'(b) the parent\'s node too');
	my %czxid = map { $_->[1] => 1 } zk_lock_info(zk_path('gc/r'));
	ok($czxid{$t}, "(b) the token ($t) is its node's czxid all the same");
	$s->query_ok('COMMIT');
	$s->quit;
	ok(zk_set_failpoints($node1, ''), '(b) failpoints cleared');
	ok(zk_wait_count(zk_path('gc'), 2, 10), '(b) only the keeper\'s nodes are left');
}

# ---------------------------------------------------------------------------
# (c) tokens grow strictly per resource, many backends at once
{
	$node1->safe_psql('postgres', q{
		CREATE TABLE grants (id bigserial PRIMARY KEY, res text, token bigint);
		CREATE FUNCTION grab(r text) RETURNS void LANGUAGE plpgsql AS $$
		DECLARE t bigint;
		BEGIN
			t := zk_lock_acquire(r, timeout => '60 s');
			-- the id is drawn while the lock is held: grants of one
			-- resource are numbered in their order
			INSERT INTO grants (res, token) VALUES (r, t);
		END $$;});
	my $k = 12;
	my @s = map { zk_session($node1, "grab$_") } 1 .. 16;
	my $i = 0;
	foreach my $x (@s)
	{
		my $sql = join(' ', map {
				my $r = 'tk/' . (qw(a b c d))[ ($i + $_) % 4 ];
				"BEGIN; SELECT grab('$r'); COMMIT;"
		} 1 .. $k);
		$x->send($sql);
		$i++;
	}
	my $ok = 1;
	foreach my $x (@s)
	{
		my $r = $x->wait(90);
		$ok = 0 unless $r && $r->{sqlstate} eq '00000';
		$x->quit;
	}
	ok($ok, '(c) 16 backends, 4 nested resources: every transaction committed');
	is(psql1($node1, 'SELECT count(*) FROM grants'), 16 * $k, '(c) every grant recorded');
	is(psql1($node1, q{
		SELECT count(*) FROM (
			SELECT token <= lag(token) OVER (PARTITION BY res ORDER BY id) AS bad
			FROM grants) g WHERE bad}),
		'0', '(c) each resource\'s tokens grow strictly with its grants');
	ok(zk_wait_no_locks(zk_path('tk'), 15), '(c) no lock node left');
}

# ---------------------------------------------------------------------------
# (d) a multi that fails: the others are granted all the same
{
	# a resource node that lets anyone read, nobody else create
	my ($rc) = zkutil('create-acl', zk_path('gfbad/r'), 'r', 'other:secret');
	is($rc, 0, '(d) another client made a resource node that refuses our creates');
	my $base = zk_count_locks(zk_root());
	my @s = map { zk_session($node1, "gf$_") } 1 .. 16;
	my $bad = zk_session($node1, 'gfbad');
	my $wpid = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
	my @all = (@s[0 .. 7], $bad, @s[8 .. 15]);
	my @res = map { $all[$_] == $bad ? 'gfbad/r' : 'gf' . ($_ + 1) . '/r' } 0 .. 16;
	# the others' resource nodes are there already (persistent nodes made
	# by another client): their creates can share a multi at once
	foreach my $r (grep { $_ ne 'gfbad/r' } @res)
	{
		my ($rc2) = zkutil('create-acl', zk_path($r), 'rwcda', 'other:secret');
		die "could not make $r" if $rc2 != 0;
	}
	$_->query_ok('BEGIN') for @all;
	my $pids = join(',', map { $_->pid } @all);
	# stopped well within the session timeout (4 s): the requests pile up
	kill('STOP', $wpid);
	$all[$_]->send(qq{SELECT zk_lock_acquire('$res[$_]') > 0}) for 0 .. 16;
	my $queued = wait_until(
		sub {
			psql1($node1, "SELECT count(*) FROM pg_stat_activity WHERE pid IN ($pids) "
				  . "AND wait_event_type = 'Extension' AND state = 'active'") == 17;
		},
		timeout => 2);
	kill('CONT', $wpid);
	ok($queued, '(d) 17 requests queued while the worker was stopped');
	my ($granted, $other) = (0, '');
	foreach my $x (@s)
	{
		my $r = $x->wait(30);
		if ($r && $r->{sqlstate} eq '00000' && $r->{out} eq 't') { $granted++; }
		else { $other .= ($r ? "$r->{sqlstate} $r->{err}" : 'no answer') . "\n"; }
	}
	is($granted, 16, '(d) the 16 others are granted') or diag($other);
	my $r = $bad->wait(30);
	is($r && $r->{sqlstate}, '38000', '(d) the request whose create is refused fails (38000)');
	like($r && $r->{err}, qr/could not create lock node/, '(d) saying so');
	ok(zk_wait_count(zk_root(), 16 * 2 + $base, 10),
		'(d) only the 16 grants\' nodes (and their parents\') and the keeper\'s are there');
	my %czxid = map { $_->[1] => 1 } grep { $_->[0] =~ m{/gf\d+(/r)?/} } zk_lock_info(zk_root());
	cmp_ok(scalar(keys %czxid), '<', 32,
		'(d) their 32 nodes were made in fewer transactions (multis)');
	$_->query_ok('COMMIT') for @s;
	$bad->query_ok('ROLLBACK');
	$_->quit for @all;
	ok(zk_wait_count(zk_root(), $base, 15), '(d) after COMMIT, no lock node of theirs is left');
	my $log = PostgreSQL::Test::Utils::slurp_file($node1->logfile);
	unlike($log, qr/TRAP|server process .* was terminated/, '(d) no crash');
}

# ---------------------------------------------------------------------------
# (d) a delete in the way: one backend's two locks go back to the worker
# together (one multi of deletes) after another client deleted one of the
# nodes; the other node still goes (sent again alone)
{
	my $s = zk_session($node1, 'gd');
	$s->query_ok('BEGIN');
	$s->query_ok(q{SELECT zk_lock_acquire('gda', parents => false)});
	$s->query_ok(q{SELECT zk_lock_acquire('gdb', parents => false)});
	my ($a) = zk_lock_nodes(zk_path('gda'));
	my $wpid = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
	kill('STOP', $wpid);
	my ($rc) = zkutil('delete-r', $a);
	$s->send('ROLLBACK');
	sleep(0.3);
	kill('CONT', $wpid);
	is($rc, 0, '(d) another client deleted one of the two nodes');
	my $r = $s->wait(20);
	ok($r && !$r->{exited}, '(d) the transaction ended');
	ok(zk_wait_no_locks(zk_path('gdb'), 10), '(d) the other lock\'s node is gone too');
	ok(zk_wait_no_locks(zk_path('gda'), 10), '(d) and nothing is left of the first');
	$s->quit;
}

# ---------------------------------------------------------------------------
# (e) 32 clients on 32 resources
{
	my $k = 15;
	my $keeper2 = zk_session($node1, 'keeper2');
	$keeper2->query_ok(join(' ', map { "SELECT zk_lock_acquire_session('g32_$_', 'shared', parents => false);" } 1 .. 32));
	my @s = map { zk_session($node1, "c32_$_") } 1 .. 32;
	my ($w, $p, $q) = measure(sub {
		foreach my $i (1 .. 32)
		{
			$s[ $i - 1 ]->send(join(' ', map {
				"BEGIN; SELECT zk_lock_acquire('g32_$i', 'shared', parents => false); COMMIT;"
			} 1 .. $k));
		}
		foreach my $x (@s)
		{
			my $r = $x->wait(60);
			fail('(e) a client\'s cycles failed') unless $r && $r->{sqlstate} eq '00000';
		}
	});
	my $cycles = 32 * $k;
	diag(sprintf('(e) 32 clients on 32 resources: %.2f write transactions, %.2f requests and %.2f packets sent per cycle',
		$w / $cycles, $p / $cycles, $q / $cycles));
	cmp_ok($w / $cycles, '<', 2.0,
		'(e) the clients\' creates and deletes share write transactions');
	$_->quit for @s;
	$keeper2->quit;
}
$keeper->quit;
ok(zk_wait_no_locks(zk_root(), 15), 'no lock node left before the chaos round');

# ---------------------------------------------------------------------------
# (f) connection losses under load, nested names
{
	my $px = ZkChaos::Proxy->start(
		links => [ [ 'node2', PostgreSQL::Test::Cluster::get_free_port(), $zk_port ] ]);
	my $node2 = zk_node('node2', hosts => '127.0.0.1:' . $px->port('node2'),
		extra_conf => ZkChaos::node_conf() . "zklock.sweep_interval = '1h'\n");
	$node1->append_conf('postgresql.conf', ZkChaos::node_conf());
	$node1->restart;
	zk_wait_connected($node1);
	push @stop_at_end, $node2;
	my $chaos = ZkChaos->new(nodes => [ $node1, $node2 ], clients_per_node => 8);
	my $run = $chaos->start('gc_connloss', duration => 14, settle => 5,
		resource => 'gcx/chaos/r');
	$run->sleep_until(3);
	$run->fault_begin('node2\'s connection cut and closed, five times');
	for (1 .. 5)
	{
		$px->cut('node2');
		sleep(0.3);
		$px->heal('node2');
		sleep(1.2);
	}
	$run->fault_end;
	$run->check;
	ok(ZkChaos::wait_node_ready($node2, 30), '(f) node2 connected at the end');
	$px->stop;
}

zk_done_check();

# The anchors (<root>/zklock.zxid-..., ephemeral) go with their sessions:
# once the instances are stopped, no znode of zklock's own is left
my @anchors = grep { m{/zklock\.zxid-} } zk_list_znodes(zk_root());
cmp_ok(scalar(@anchors), '>=', 1, 'each running instance has its anchor node');
$_->stop for @stop_at_end;
ok(wait_until(sub { !grep { m{/zklock\.zxid-} } zk_list_znodes(zk_root()) }, timeout => 15),
	'the anchors are gone with the sessions of the stopped instances');
done_testing();
