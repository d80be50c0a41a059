
# The window a stall leaves open when someone deletes zklock's nodes from
# outside (issue 28, finding 5; doc/safety.md "Nodes deleted from outside
# during a stall").  node1 leads group 'g' and holds a session lock; its
# worker is stopped (SIGSTOP, as in 105); a ZooKeeper client (zkutil.py,
# with the rights that world:anyone gives when zklock.auth_file is unset)
# deletes node1's candidate node and its lock node; node2 leads and is
# granted the lock at once.  Nobody on node1 can learn of the deletions
# while its worker is stopped, so node1 goes on committing under both
# until its lease no longer covers zklock.lease_margin.  What holds, and is
# asserted: no commit that relied on the leadership, or on the lock, began
# later than the worker's stop plus the session timeout minus the margin
# (the lease's bound, with 0.25 s for the two clocks of this machine the
# test compares), and each loop ends refused or no longer leading.  The
# window (how long node1 still committed after node2 led / was granted) is
# measured and reported with note.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $SESSION_TIMEOUT = 4;    # zk_node's default zklock.session_timeout
my $MARGIN = 0.5;           # zk_node's default zklock.lease_margin
my $CLOCKS = 0.25;          # Perl's time() against clock_timestamp()

zk_start();
my $conf = "zklock.elections = 'g'";
my $node1 = zk_node('node1', extra_conf => $conf);
ok(wait_until(sub { psql1($node1, q{SELECT zk_is_leader('g')}) eq 't' }, timeout => 20),
	'node1, first, leads the group');
my $node2 = zk_node('node2', extra_conf => $conf);
ok( wait_until(
		sub {
			psql1($node2, q{SELECT cardinality(candidates) FROM zk_elections WHERE "group" = 'g'}) eq '2';
		},
		timeout => 20),
	'node2 is a candidate behind node1');

$node1->safe_psql('postgres', q{
CREATE TABLE runs(kind text, at timestamptz);
-- a job that writes only while it leads, as the recipe says, until it
-- does not lead any more (or its COMMIT is refused)
CREATE PROCEDURE lead_loop(secs float8) LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
	LOOP
		INSERT INTO runs SELECT 'lead', clock_timestamp() WHERE zk_is_leader('g');
		EXIT WHEN NOT FOUND OR clock_timestamp() > t0 + secs * interval '1 s';
		COMMIT;
		PERFORM pg_sleep(0.02);
	END LOOP;
END $$;
-- an ETL step under a session lock, until its COMMIT is refused
CREATE PROCEDURE lock_loop(secs float8) LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
	LOOP
		INSERT INTO runs VALUES ('lock', clock_timestamp());
		COMMIT;
		EXIT WHEN clock_timestamp() > t0 + secs * interval '1 s';
		PERFORM pg_sleep(0.02);
	END LOOP;
END $$;
});

my $etl = zk_session($node1, 'etl');
$etl->query_ok(q{SELECT zk_lock_acquire_session('stall/r')});
my ($lock_node) = zk_lock_nodes(zk_path('stall/r'));
my (undef, $ls) = zkutil('ls-r', zk_path('zklock.elections/g'));
my @cands = sort { ($a =~ /(\d+)$/)[0] <=> ($b =~ /(\d+)$/)[0] } grep { /cand-/ } split /\n/, $ls;
ok(defined $lock_node && @cands == 2, 'node1 holds a lock node and leads with the first candidate node')
  or diag("lock node: " . ($lock_node // 'none') . "; candidates:\n$ls");
my $job = zk_session($node1, 'job');

my $wpid = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
END { kill('CONT', $wpid) if $wpid; }
# every lease the worker proved ends by the stop plus the session timeout
kill('STOP', $wpid);
my $t_stop = time();
note "SIGSTOP of node1's worker (pid $wpid)";
$job->send('CALL lead_loop(30)');
$etl->send('CALL lock_loop(30)');

my ($rc1) = zkutil('delete-r', $cands[0]);
my ($rc2) = zkutil('delete-r', $lock_node);
my $t_del = time();
is("$rc1 $rc2", '0 0', "someone deletes node1's candidate node and its lock node");
my $t_lead;
ok( wait_until(
		sub {
			return 0 unless psql1($node2, q{SELECT zk_is_leader('g')}) eq 't';
			$t_lead = time();
			return 1;
		},
		timeout => 20, interval => 0.02),
	'node2 leads');
my $other = zk_session($node2, 'other');
my $r = $other->query(q{SELECT zk_lock_acquire_session('stall/r', timeout => '20 s') > 0});
my $t_granted = time();
is($r->{out}, 't', 'node2 is granted the lock');

$r = $job->wait(60);
ok($r && ($r->{sqlstate} eq '00000' || $r->{sqlstate} eq '55P03'),
	'the leader job ends: no longer leading, or its COMMIT refused')
  or diag(explain($r));
$r = $etl->wait(60);
is($r && $r->{sqlstate}, '55P03', 'the ETL step under the lock ends: its COMMIT refused (55P03)');
kill('CONT', $wpid);

my $bound = $t_stop + $SESSION_TIMEOUT - $MARGIN + $CLOCKS;
for my $kind ('lead', 'lock')
{
	my $last = psql1($node1, "SELECT extract(epoch FROM max(at)) FROM runs WHERE kind = '$kind'");
	if ($last eq '')
	{
		note "$kind: node1 made no commit under it after the stop (its lease ran short first)";
		next;
	}
	cmp_ok($last, '<', $bound,
		sprintf('%s: the last commit began %.2f s after the stop, within the lease (session timeout %d s - margin %.1f s)',
			$kind, $last - $t_stop, $SESSION_TIMEOUT, $MARGIN));
	my $other_since = $kind eq 'lead' ? $t_lead : $t_granted;
	note sprintf('%s: window: node1 still committed %.2f s after node2 %s (%.2f s after the deletion, %.2f s after the stop)',
		$kind, $last - ($other_since // $t_del), $kind eq 'lead' ? 'led' : 'was granted',
		$last - $t_del, $last - $t_stop);
}

# node1's worker goes on: its session expired, it joins again behind node2
ok(wait_until(sub { psql1($node1, q{SELECT zk_is_leader('g')}) eq 'f' }, timeout => 20),
	'node1 does not lead once its worker runs again');
ok(wait_until(sub { psql1($node2, q{SELECT zk_is_leader('g')}) eq 't' }, timeout => 20),
	'node2 still leads');
$etl->query('SELECT zk_lock_release_all()');
$other->query_ok('SELECT zk_lock_release_all()');
zk_done_check();
done_testing();
