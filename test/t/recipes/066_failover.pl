
# Leader failover (issue 17, doc/safety.md "Instance leadership"): two
# instances in one election group; the leader is
#  (a) killed: its postmaster gets SIGKILL (its worker leaves with it);
#  (b) stalled: its worker is stopped (SIGSTOP) past the session timeout;
#  (c) cut from ZooKeeper by a proxy that swallows every byte both ways.
# Each time the other instance leads within the bound the issue sets: the
# session timeout, plus ZooKeeper's tick (sessions expire in tick-sized
# buckets), plus 1 s -- with $SLACK more for a loaded test machine -- and
# zk_is_leader, sampled every 20 ms on both instances at once, is never
# true on both at the same time.  (A killed instance cannot be sampled
# after its death: its samples before the kill, and the survivor's, are
# checked.)
#  (d) A candidate's connection is cut for less than the session timeout
#      while the leader leaves the group: once the connection is back, the
#      watch on its predecessor, set again by the client, (or the listing
#      after a lost reply) makes it lead.  Afterwards every instance holds
#      one watch at most.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkChaos;
use ZkElection;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $SESSION_TIMEOUT = 4;      # zk_node's default zklock.session_timeout
my $TICK = 0.2;               # zk_server.sh's tickTime
my $BOUND = $SESSION_TIMEOUT + $TICK + 1;
my $SLACK = 3;                # a loaded 2-core test machine
my $SAMPLE = $BOUND + $SLACK + 3;

my $hosts = zk_start();
my ($zk_port) = $hosts =~ /:(\d+)$/;
my $px = ZkChaos::Proxy->start(
	links => [ [ 'node1', PostgreSQL::Test::Cluster::get_free_port(), $zk_port ] ]);
my $conf = "zklock.elections = 'nightly'";
my $node1 = zk_node('node1', hosts => '127.0.0.1:' . $px->port('node1'),
	extra_conf => $conf);
ok(wait_until(sub { psql1($node1, q{SELECT zk_is_leader('nightly')}) eq 't' }, timeout => 20),
	'node1, alone, leads');
my $node2 = zk_node('node2', extra_conf => $conf);
my %node = (node1 => $node1, node2 => $node2);

# One failover: $cause->() does it; $from leads before, $to must lead within
# the bound.  Samples both (the killed one only until it dies).
sub failover
{
	my ($what, $from, $to, $cause) = @_;
	my @l;
	ok(wait_until(sub { @l = leaders_now('nightly', $node1, $node2); @l == 1 && $l[0] eq $from },
			timeout => 20),
		"$what: $from leads before") or diag("leaders: @l");
	my $samplers = start_sampling('nightly', $SAMPLE, $node{$from}, $node{$to});
	sleep(1);
	my $t0 = time();
	$cause->();
	my $samples = finish_sampling($samplers, $SAMPLE + 60);
	my $first = first_true_after($samples, $to, $t0 - 1);
	ok(defined $first, "$what: $to leads afterwards");
	my $took = defined $first ? $first - $t0 : 1e9;
	note sprintf('%s: failover took %.3f s (bound %.1f s + slack %d s)', $what, $took, $BOUND, $SLACK);
	cmp_ok($took, '<', $BOUND + $SLACK,
		sprintf('%s: within the session timeout + tick + 1 s (took %.2f s)', $what, $took));
	cmp_ok($took, '>', 0, "$what: $to did not lead before the fault");
	my @o = overlaps($samples);
	is(scalar(@o), 0, "$what: never two leaders at once") or diag(join("\n", @o));
	cmp_ok(scalar(@{ $samples->{$to} }), '>', $SAMPLE * 10, "$what: $to was sampled throughout");
	return $samples;
}

# --- (a) the leader's postmaster is killed -----------------------------------
failover('kill', 'node1', 'node2', sub { $node1->kill9; });
ok( wait_until(sub { $node1->start(fail_ok => 1) }, timeout => 30, interval => 0.5),
	'kill: node1 starts again');
ok(zk_wait_connected($node1), 'kill: node1 is connected again');
ok( wait_until(
		sub {
			psql1($node2, q{SELECT cardinality(candidates) FROM zk_elections}) eq '2';
		},
		timeout => 20),
	'kill: node1 is a candidate again, behind node2');
is(psql1($node1, q{SELECT zk_is_leader('nightly')}), 'f', 'kill: node1 does not take over');

# --- (b) the leader's worker is stopped --------------------------------------
my $worker2 = psql1($node2, 'SELECT worker_pid FROM zk_lock_status');
my $s = failover('stop', 'node2', 'node1', sub { kill 'STOP', $worker2; });
kill 'CONT', $worker2;
ok(wait_until(sub { psql1($node2, q{SELECT cardinality(candidates) FROM zk_elections}) eq '2' },
		timeout => 30),
	'stop: node2 is a candidate again in its next session');

# --- (c) the leader is cut from ZooKeeper ------------------------------------
failover('cut', 'node1', 'node2', sub { $px->cut('node1'); });
$px->heal('node1');
ok(zk_wait_connected($node1, 30), 'cut: node1 connects again once healed');
ok(wait_until(sub { psql1($node2, q{SELECT cardinality(candidates) FROM zk_elections}) eq '2' },
		timeout => 30),
	'cut: node1 is a candidate again');
my @l = leaders_now('nightly', $node1, $node2);
is_deeply(\@l, ['node2'], 'cut: node2 still leads');

# --- (d) a watch across a short cut ---------------------------------------------
$px->cut('node1');
sleep(0.5);
$node2->safe_psql('postgres',
	q{ALTER SYSTEM SET zklock.elections = ''; SELECT pg_reload_conf()});
sleep(1);
is(psql1($node1, q{SELECT zk_is_leader('nightly')}), 'f',
	'short cut: node1 does not lead while cut off');
$px->heal('node1');
my $t_heal = time();
ok(wait_until(sub { psql1($node1, q{SELECT zk_is_leader('nightly')}) eq 't' }, timeout => 15),
	sprintf('short cut: node1 leads once its connection is back (after %.1f s)', time() - $t_heal));
$node2->safe_psql('postgres',
	q{ALTER SYSTEM SET zklock.elections = 'nightly'; SELECT pg_reload_conf()});
ok(wait_until(sub { psql1($node1, q{SELECT cardinality(candidates) FROM zk_elections}) eq '2' },
		timeout => 20),
	'node2 stands again');
foreach my $n ($node1, $node2)
{
	my $w;
	# and the revocation mailbox's (issue 18)
	ok(wait_until(sub { $w = psql1($n, 'SELECT watches FROM zk_lock_status'); $w <= 2 }, timeout => 10),
		$n->name . ": one watch at most after all this, and the mailbox's ($w)");
}

done_testing();
