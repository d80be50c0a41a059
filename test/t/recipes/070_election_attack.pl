
# Review of instance leadership (issue 17): attacks that the authors' tests
# did not make.
#  (a) Names kept for itself: another ZooKeeper client creates a group's
#      node first, letting anyone create children but not list them.  The
#      worker's create succeeds, its listing fails (NOAUTH).  It must not
#      make a new candidate node at each retry (nodes that grow, each one a
#      candidate ahead of the next in the same session, so that once the
#      node can be listed again the instance waits behind itself forever):
#      at most one node of the instance, and it leads once the ACL is
#      opened.
#  (b) Order of teardown: a reload of zklock.hosts on the leader closes its
#      session on purpose while a transaction that relied on the leadership
#      has passed the fence and waits (for the NOTIFY lock) before its
#      commit record.  The leader stops claiming at once, but the other
#      candidate must not lead until that commit has ended; the commit lands.
#  (c) Edge values and growth: sixteen groups swapped for sixteen others by
#      reloads in quick succession (removed groups still leaving while new
#      ones wait for their slots), and reloads to the same list: in the end
#      each group of the setting has exactly one node of the instance, which
#      leads it, no node of a removed group is left, the worker is the same,
#      and it keeps one watch per group at most.
#  (d) Stalls: a backend stopped (SIGSTOP) between zk_is_leader and its
#      COMMIT while its instance leaves the group and another leads: once
#      resumed, its write does not commit (55P03), nothing lands.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $hosts = zk_start();
# node1 can hold a commit past its fence: a session waiting for a
# synchronous standby that does not exist holds the NOTIFY lock (as in 035)
my $node1 = zk_node('node1',
	extra_conf => "synchronous_standby_names = 'zklock_no_such_standby'\n"
	  . "synchronous_commit = local\nwal_level = replica\nmax_wal_senders = 2");

# --- (a) a group node squatted with create-but-not-read rights ---------------
my $squatter = 'squatter:secret';
my $gpath = zk_path('zklock.elections/squat');
my ($rc, $out, $err) = zkutil('create-acl', $gpath, 'cdwa', $squatter);
is($rc, 0, 'another client makes the group node: anyone may create, nobody else list')
  or diag($err);

my $log_at = -s $node1->logfile;
$node1->safe_psql('postgres',
	q{ALTER SYSTEM SET zklock.elections = 'squat'; SELECT pg_reload_conf()});
ok($node1->wait_for_log(qr/could not join election group "squat"/, $log_at),
	'the worker cannot join the group and says so');

# three retries' worth (the worker tries again every 5 s)
sleep(16);

sub own_nodes
{
	local $ENV{ZKUTIL_AUTH} = $squatter;
	my ($rc, $out, $err) = zkutil('ls-r', $gpath);
	die "zkutil ls-r: $err" if $rc != 0;
	return scalar(grep { m{/cand-[^/]+$} } split /\n/, $out);
}
my $n = own_nodes();
cmp_ok($n, '<=', 1, "the instance has at most one candidate node in the group ($n)");
is(psql1($node1, q{SELECT zk_is_leader('squat')}), 'f', 'and does not claim to lead it');

($rc, $out, $err) = zkutil('open-acl', $gpath, $squatter);
is($rc, 0, 'the group node is opened to everyone') or diag($err);
ok(wait_until(sub { psql1($node1, q{SELECT zk_is_leader('squat')}) eq 't' }, timeout => 20),
	'then the only candidate leads the group');
$n = own_nodes();
is($n, 1, "with one node ($n)");


# --- (b) zklock.hosts reloaded on the leader, a commit past the fence ------
my $node2 = zk_node('node2', extra_conf => "zklock.elections = 'win'");
ok(wait_until(sub { psql1($node2, q{SELECT zk_is_leader('win')}) eq 't' }, timeout => 20),
	"node2 leads 'win' alone");
$node2->safe_psql('postgres',
	q{ALTER SYSTEM SET zklock.elections = 'other'; SELECT pg_reload_conf()});
$node1->safe_psql('postgres',
	q{ALTER SYSTEM SET zklock.elections = 'win'; SELECT pg_reload_conf()});
ok(wait_until(sub { psql1($node1, q{SELECT zk_is_leader('win')}) eq 't' }, timeout => 20),
	"node2 left 'win': node1 leads it");
$node2->safe_psql('postgres',
	q{ALTER SYSTEM SET zklock.elections = 'win'; SELECT pg_reload_conf()});
ok( wait_until(
		sub {
			psql1($node2, q{SELECT cardinality(candidates) FROM zk_elections WHERE "group" = 'win'}) eq '2';
		},
		timeout => 20),
	"node2 is a candidate behind node1");
$node1->safe_psql('postgres', 'CREATE TABLE win_runs(v int)');
my $sr = zk_session($node1, 'syncrep');
$sr->query_ok('SET synchronous_commit = on');
$sr->query_ok('BEGIN');
$sr->query_ok('INSERT INTO win_runs VALUES (0)');
$sr->query_ok('NOTIFY zklock_win');
$sr->send('COMMIT');
ok( wait_until(
		sub {
			psql1($node1, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $sr->pid) eq 'SyncRep';
		},
		timeout => 20),
	'a session waits for a synchronous standby, holding the NOTIFY lock');
my $job = zk_session($node1, 'job');
$job->query_ok('BEGIN');
is($job->query_ok(q{SELECT zk_is_leader('win')}), 't', 'the job sees node1 lead');
$job->query_ok('INSERT INTO win_runs VALUES (1)');
$job->query_ok('NOTIFY zklock_win');
$job->send('COMMIT');
ok( wait_until(
		sub {
			psql1($node1, 'SELECT wait_event_type FROM pg_stat_activity WHERE pid = ' . $job->pid) eq 'Lock';
		},
		timeout => 20),
	'its COMMIT passed the leadership fence and waits for the NOTIFY lock');
(my $other_spelling = $hosts) =~ s/127\.0\.0\.1/localhost/g;
$node1->safe_psql('postgres',
	"ALTER SYSTEM SET zklock.hosts = '$other_spelling'; SELECT pg_reload_conf()");
ok(wait_until(sub { psql1($node1, q{SELECT zk_is_leader('win')}) eq 'f' }, timeout => 20),
	'reload of zklock.hosts: node1 no longer claims to lead');
my $t_end = time() + 2;
my $two = 0;
while (time() < $t_end)
{
	$two++ if psql1($node2, q{SELECT zk_is_leader('win')}) eq 't';
	sleep(0.05);
}
is($two, 0, 'node2 does not lead while the commit past the fence can still land');
$node1->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $sr->pid . ')');
my $r = $job->wait(30);
is($r && $r->{sqlstate}, '00000', 'the COMMIT past the fence succeeds');
is(psql1($node1, 'SELECT count(*) FROM win_runs WHERE v = 1'), '1', 'the job\'s row is committed');
ok(wait_until(sub { psql1($node2, q{SELECT zk_is_leader('win')}) eq 't' }, timeout => 20),
	'then node1\'s session is closed and node2 leads');
ok( wait_until(
		sub {
			psql1($node1, q{SELECT cardinality(candidates) FROM zk_elections WHERE "group" = 'win'}) eq '2';
		},
		timeout => 20),
	'node1 is a candidate again in its new session, behind node2');
is(psql1($node1, q{SELECT zk_is_leader('win')}), 'f', 'and does not lead');

# --- (c) sixteen groups swapped by reloads in quick succession ---------------
$node2->stop;
my $worker = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
my $g = join(',', map { sprintf('g%02d', $_) } 1 .. 16);
my $h = join(',', map { sprintf('h%02d', $_) } 1 .. 16);
for my $round (1 .. 6)
{
	for my $list ($h, $g, $g)
	{
		$node1->safe_psql('postgres',
			"ALTER SYSTEM SET zklock.elections = '$list'; SELECT pg_reload_conf()");
		sleep(0.1);
	}
}
ok( wait_until(
		sub {
			psql1($node1,
				q{SELECT count(*) FILTER (WHERE is_leader AND cardinality(candidates) = 1) FROM zk_elections})
			  eq '16';
		},
		timeout => 30),
	'after the reloads, node1 is the only candidate of each of the sixteen groups and leads each');
my %left;
ok( wait_until(
		sub {
			my ($rc, $out) = zkutil('ls-r', zk_path('zklock.elections'));
			%left = ();
			$left{$_}++ for $out =~ m{/zklock\.elections/([^/]+)/cand-[^/]+$}mg;
			return 0 if grep { /^h/ || $left{$_} != 1 } keys %left;
			return scalar(grep { /^g\d\d$/ } keys %left) == 16;
		},
		timeout => 20),
	'one node in each group of the setting, none in a removed one')
  or diag(join(' ', map { "$_=$left{$_}" } sort keys %left));
is(psql1($node1, 'SELECT worker_pid FROM zk_lock_status'), $worker, 'the worker is the same');
my $w;
# and the revocation mailbox's (issue 18)
ok(wait_until(sub { $w = psql1($node1, 'SELECT watches FROM zk_lock_status'); $w <= 17 }, timeout => 10),
	"at most one watch per group, and the mailbox's ($w)");

# --- (d) a backend stopped between zk_is_leader and COMMIT -------------------
$node2->start;
$node2->safe_psql('postgres',
	q{ALTER SYSTEM SET zklock.elections = 'g01'; SELECT pg_reload_conf()});
ok( wait_until(
		sub {
			psql1($node1, q{SELECT cardinality(candidates) FROM zk_elections WHERE "group" = 'g01'}) eq '2';
		},
		timeout => 20),
	"node2 is a candidate of 'g01' behind node1");
my $st = zk_session($node1, 'stalled');
$st->query_ok('BEGIN');
is($st->query_ok(q{SELECT zk_is_leader('g01')}), 't', 'the job sees node1 lead g01');
$st->query_ok('INSERT INTO win_runs VALUES (2)');
kill 'STOP', $st->pid;
$node1->safe_psql('postgres',
	"ALTER SYSTEM SET zklock.elections = '$g'; SELECT pg_reload_conf()");
$node1->safe_psql('postgres',
	q{ALTER SYSTEM SET zklock.elections = 'g02'; SELECT pg_reload_conf()});
my $moved = wait_until(sub { psql1($node2, q{SELECT zk_is_leader('g01')}) eq 't' }, timeout => 20);
$node1->safe_psql('postgres',
	q{ALTER SYSTEM SET zklock.elections = 'g01'; SELECT pg_reload_conf()});
kill 'CONT', $st->pid;
ok($moved, 'node1 left g01 while the backend was stopped: node2 leads');
$r = $st->query('COMMIT', 60);
is($r->{sqlstate}, '55P03', 'the resumed COMMIT fails with 55P03');
is(psql1($node1, 'SELECT count(*) FROM win_runs WHERE v = 2'), '0', 'nothing it wrote is visible');

done_testing();
