
# Instance leadership (issue 17) across two, then three instances on one
# ZooKeeper (doc/sql.md "Instance leadership", doc/safety.md):
#  - exactly one instance of a group leads: zk_is_leader is true on exactly
#    one, sampled every 20 ms on all at once, never on two at the same time;
#  - zk_leader names the same instance on every node, the one that leads;
#  - zk_elections lists the candidates in the order they joined, the first
#    leading; a third instance joins behind and does not take over;
#  - a reload adds a group (the worker joins it) and removes one (its node
#    is deleted; the leadership moves to the next candidate);
#  - a transaction that saw zk_is_leader true, wrote, and lost the
#    leadership before COMMIT (its worker stopped past the session timeout,
#    another instance leads meanwhile) cannot commit: 55P03, nothing lands;
#  - a commit past the leadership fence keeps the node: a reload that
#    removes the group does not let the next candidate lead until that
#    commit has ended;
#  - zk_elections lists a group whose rows outgrow the first shared memory
#    segment (the backend asks again, bigger);
#  - the leader's node deleted by someone else ends its leadership; the
#    worker joins again;
#  - a create whose reply is lost (failpoint election-after-create-reply):
#    the worker finds its node by its prefix and adopts it, no second node;
#  - each candidacy holds one watch at most (zk_lock_status.watches);
#  - many sessions calling zk_leader and zk_elections at once, some of them
#    cancelled in the middle (statement_timeout): every call answers or
#    fails cleanly, the worker stays, and no entry is left in use.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkElection;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $SESSION_TIMEOUT = 4;    # zk_node's default zklock.session_timeout
my $SLACK = 5;              # a loaded test machine

my $hosts = zk_start();
my $conf = "zklock.elections = 'nightly'";
# node1 can hold a commit past its fence: a session waiting for a
# synchronous standby that does not exist holds the NOTIFY lock (as in 035)
my $node1 = zk_node('node1',
	extra_conf => "$conf\nsynchronous_standby_names = 'zklock_no_such_standby'\n"
	  . "synchronous_commit = local\nwal_level = replica\nmax_wal_senders = 2");
my $node2 = zk_node('node2', extra_conf => $conf);
my @two = ($node1, $node2);

# --- two instances: exactly one leads ---------------------------------------
my @l;
ok(wait_until(sub { @l = leaders_now('nightly', @two); @l == 1 }, timeout => 20),
	'two instances: exactly one leads') or diag("leaders: @l");
my $leader = $l[0];

my $samples = finish_sampling(start_sampling('nightly', 3, @two));
my @o = overlaps($samples);
is(scalar(@o), 0, 'two instances: never two leaders at once, sampled 3 s on both')
  or diag(join("\n", @o));
is(scalar(grep { $_->[1] } @{ $samples->{$leader} }),
	scalar(@{ $samples->{$leader} }), "the leader ($leader) was true in every sample");
my ($other) = grep { $_ ne $leader } map { $_->name } @two;
is(scalar(grep { $_->[1] } @{ $samples->{$other} }), 0,
	"the other ($other) was false in every sample");
cmp_ok(scalar(@{ $samples->{$leader} }), '>', 50, 'the samplers took many samples');

# zk_leader agrees everywhere, and names the leader
my @named = map { psql1($_, q{SELECT zk_leader('nightly')}) } @two;
is($named[0], $named[1], 'zk_leader gives the same answer on both');
like($named[0], qr/^\Q$leader\E \(\d+:\d+\) on /, "and names $leader");

# --- a third instance joins behind -------------------------------------------
my $node3 = zk_node('node3', extra_conf => $conf);
my @three = ($node1, $node2, $node3);
ok( wait_until(
		sub {
			psql1($node1, q{SELECT cardinality(candidates) FROM zk_elections WHERE "group" = 'nightly'})
			  eq '3';
		},
		timeout => 20),
	'three candidates are listed');
my @lists = map {
	psql1($_, q{SELECT array_to_string(candidates, '|') || '#' || leader || '#' || is_leader FROM zk_elections WHERE "group" = 'nightly'})
} @three;
my @cands = map { (split /#/)[0] } @lists;
is($cands[1], $cands[0], 'node2 lists the candidates as node1 does');
is($cands[2], $cands[0], 'node3 lists the candidates as node1 does');
my @order = map { (split / /)[0] } split /\|/, $cands[0];
is($order[0], $leader, 'the first candidate is the leader');
is($order[2], 'node3', 'the instance that joined last is last');
is(join(',', map { (split /#/)[2] } @lists),
	join(',', map { $_->name eq $leader ? 'true' : 'false' } @three),
	'is_leader is true on the leader only');
like((split /#/, $lists[2])[1], qr/^\Q$leader\E /, 'node3 names the same leader');

$samples = finish_sampling(start_sampling('nightly', 3, @three));
@o = overlaps($samples);
is(scalar(@o), 0, 'three instances: never two leaders at once')
  or diag(join("\n", @o));
my @true_nodes = grep { grep { $_->[1] } @{ $samples->{$_} } } keys %$samples;
is_deeply(\@true_nodes, [$leader], 'three instances: only the first leads, the newcomer did not take over');

# --- a reload adds and removes groups ------------------------------------------
my %byname = map { $_->name => $_ } @three;
my ($second) = $order[1];
my $n2 = $byname{$second};
$n2->safe_psql('postgres',
	q{ALTER SYSTEM SET zklock.elections = 'nightly, compaction'; SELECT pg_reload_conf()});
ok(wait_until(sub { psql1($n2, q{SELECT zk_is_leader('compaction')}) eq 't' }, timeout => 20),
	"reload: $second joins the new group 'compaction' and leads it alone");
like(psql1($byname{$leader}, q{SELECT zk_leader('compaction')}), qr/^\Q$second\E /,
	"the other instances see $second lead 'compaction'");
is(psql1($byname{$leader}, q{SELECT count(*) FROM zk_elections WHERE "group" = 'compaction'}),
	'0', 'zk_elections lists only the groups of its own zklock.elections');

# remove 'nightly' from the leader: the next candidate takes over
my $ln = $byname{$leader};
$ln->safe_psql('postgres',
	q{ALTER SYSTEM SET zklock.elections = 'compaction'; SELECT pg_reload_conf()});
ok(wait_until(sub { @l = leaders_now('nightly', @three); @l == 1 && $l[0] eq $second },
		timeout => 20),
	"reload: the leader leaves 'nightly', $second leads it now") or diag("leaders: @l");
ok( wait_until(
		sub {
			psql1($n2, q{SELECT cardinality(candidates) FROM zk_elections WHERE "group" = 'nightly'})
			  eq '2';
		},
		timeout => 20),
	'the node of the instance that left is deleted');
is(psql1($ln, q{SELECT zk_is_leader('nightly')}), 'f', 'the instance that left does not lead');
$ln->safe_psql('postgres',
	q{ALTER SYSTEM SET zklock.elections = 'nightly'; SELECT pg_reload_conf()});
$n2->safe_psql('postgres',
	q{ALTER SYSTEM SET zklock.elections = 'nightly'; SELECT pg_reload_conf()});
ok(wait_until(sub { psql1($n2, q{SELECT zk_leader('compaction') IS NULL}) eq 't' }, timeout => 20),
	"reload: 'compaction' removed everywhere, its last node is gone");
ok( wait_until(
		sub {
			psql1($n2, q{SELECT cardinality(candidates) FROM zk_elections WHERE "group" = 'nightly'})
			  eq '3';
		},
		timeout => 20),
	"the instance that left joins 'nightly' again, at the end");

# --- the fence: leadership lost before COMMIT ---------------------------------
my $fl = $n2;    # leads 'nightly' now
is(psql1($fl, q{SELECT zk_is_leader('nightly')}), 't', "$second leads");
$fl->safe_psql('postgres', 'CREATE TABLE nightly_runs(v int)');
my $h = zk_session($fl, 'job');
$h->query_ok('BEGIN');
is($h->query_ok(q{SELECT zk_is_leader('nightly')}), 't', 'the job sees it leads');
$h->query_ok('INSERT INTO nightly_runs VALUES (1)');
my $worker = psql1($fl, 'SELECT worker_pid FROM zk_lock_status');
kill 'STOP', $worker;
my $t_stop = time();
my @others = grep { $_->name ne $second } @three;
my $moved = wait_until(sub { (leaders_now('nightly', @others)) == 1 },
	timeout => $SESSION_TIMEOUT * 2 + $SLACK);
my $t_moved = time() - $t_stop;
is(psql1($fl, q{SELECT zk_is_leader('nightly')}), 'f',
	'the stopped worker\'s instance does not claim to lead');
kill 'CONT', $worker;
ok($moved, sprintf('another instance leads while the worker is stopped (after %.1f s)', $t_moved));
my $r = $h->query('COMMIT', 60);
is($r->{sqlstate}, '55P03', 'the COMMIT of the job fails with 55P03');
like($r->{err}, qr/leadership of election group "nightly" (was lost|is not proven)/,
	'saying the leadership is lost');
is(psql1($fl, 'SELECT count(*) FROM nightly_runs'), '0', 'nothing the job wrote is visible');
ok(wait_until(sub { @l = leaders_now('nightly', @three); @l == 1 }, timeout => 20),
	'afterwards, exactly one instance leads') or diag("leaders: @l");
ok( wait_until(
		sub {
			psql1($fl, q{SELECT cardinality(candidates) FROM zk_elections WHERE "group" = 'nightly'})
			  eq '3';
		},
		timeout => 30),
	'the stopped instance is a candidate again in its next session');


# --- a commit past the fence keeps the node ------------------------------------
foreach my $n ($node1, $node2)
{
	$n->safe_psql('postgres',
		q{ALTER SYSTEM SET zklock.elections = 'nightly, window'; SELECT pg_reload_conf()});
	ok(wait_until(sub { psql1($n, q{SELECT zk_leader('window') IS NOT NULL}) eq 't' }, timeout => 20),
		$n->name . " joins 'window'");
}
ok(wait_until(sub { psql1($node2, q{SELECT cardinality(candidates) FROM zk_elections WHERE "group" = 'window'}) eq '2' },
		timeout => 20), "'window' has two candidates");
is(psql1($node1, q{SELECT zk_is_leader('window')}), 't', "node1 leads 'window'");
$node1->safe_psql('postgres', 'CREATE TABLE window_runs(v int)');
my $sr = zk_session($node1, 'syncrep');
$sr->query_ok('SET synchronous_commit = on');
$sr->query_ok('BEGIN');
$sr->query_ok('INSERT INTO window_runs VALUES (0)');
$sr->query_ok('NOTIFY zklock_window');
$sr->send('COMMIT');
ok( wait_until(
		sub {
			psql1($node1, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $sr->pid) eq 'SyncRep';
		},
		timeout => 20),
	'a session waits for a synchronous standby, holding the NOTIFY lock');
my $b = zk_session($node1, 'job_window');
$b->query_ok('BEGIN');
is($b->query_ok(q{SELECT zk_is_leader('window')}), 't', 'the job sees node1 lead');
$b->query_ok('INSERT INTO window_runs VALUES (1)');
$b->query_ok('NOTIFY zklock_window');
$b->send('COMMIT');
ok( wait_until(
		sub {
			psql1($node1, 'SELECT wait_event_type FROM pg_stat_activity WHERE pid = ' . $b->pid) eq 'Lock';
		},
		timeout => 20),
	'its COMMIT passed the leadership fence and waits for the NOTIFY lock');
$node1->safe_psql('postgres',
	q{ALTER SYSTEM SET zklock.elections = 'nightly'; SELECT pg_reload_conf()});
ok(wait_until(sub { psql1($node1, q{SELECT zk_is_leader('window')}) eq 'f' }, timeout => 20),
	'reload: node1 no longer claims to lead the removed group');
sleep(2);
like(psql1($node2, q{SELECT zk_leader('window')}), qr/^node1 /,
	'but its node stays while the commit past the fence can still land');
is(psql1($node2, q{SELECT zk_is_leader('window')}), 'f', 'so node2 does not lead yet');
$node1->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $sr->pid . ')');
$r = $b->wait(30);
is($r && $r->{sqlstate}, '00000', 'the COMMIT past the fence succeeds');
ok(wait_until(sub { psql1($node2, q{SELECT zk_is_leader('window')}) eq 't' }, timeout => 20),
	'then the node goes and node2 leads');
is(psql1($node1, 'SELECT count(*) FROM window_runs WHERE v = 1'), '1', 'the job\'s row is committed');
$node2->safe_psql('postgres',
	q{ALTER SYSTEM SET zklock.elections = 'nightly'; SELECT pg_reload_conf()});

# --- many candidates, and the leader's node deleted by someone else ---------
$node3->safe_psql('postgres',
	q{ALTER SYSTEM SET zklock.elections = 'nightly, many'; SELECT pg_reload_conf()});
ok(wait_until(sub { psql1($node3, q{SELECT zk_is_leader('many')}) eq 't' }, timeout => 20),
	"node3 leads 'many' alone");
my $gpath = zk_path('zklock.elections/many');
my $fat = "\t" x 400;    # each escaped as two bytes in the rows
for my $i (1 .. 20)
{
	my ($rc, $out, $err) = zkutil('create-seq', $gpath . "/cand-99-$i-00000000000000ff-",
		"v=2\\nkind=candidate\\ninstance_id=99:$i\\nnode_name=fake$i$fat\\nhost=h\\npid=1");
	die "zkutil create-seq: $err" if $rc != 0;
}
is(psql1($node3, q{SELECT cardinality(candidates) FROM zk_elections WHERE "group" = 'many'}),
	'21', 'zk_elections lists 21 candidates whose rows outgrow 16 kB');
like(psql1($node3, q{SELECT candidates[21] FROM zk_elections WHERE "group" = 'many'}),
	qr/^fake20\t/, '... in order, the last one last');
is(psql1($node3, q{SELECT zk_is_leader('many')}), 't', 'node3, the first, still leads');
my $since0 = psql1($node3, q{SELECT leader_since FROM zk_elections WHERE "group" = 'many'});
zkutil('delete-r', $gpath);    # may meet node3's new node: NOTEMPTY at the end
ok( wait_until(
		sub {
			psql1($node3,
				qq{SELECT cardinality(candidates) = 1 AND leader_since > '$since0' AND is_leader FROM zk_elections WHERE "group" = 'many'}
			) eq 't';
		},
		timeout => 20),
	"someone deletes every node of 'many': node3's worker joins again and leads again, since later");
ok($node3->log_contains(qr/candidate node "cand-[0-9]+-[0-9]+-[0-9a-f]{16}-[0-9]+" of election group "many" was deleted while it led; joining again/),
	'the log says so');

# --- a lost create reply ------------------------------------------------------
my $log_at = -s $node3->logfile;
ok(zk_set_failpoints($node3, 'election-after-create-reply=fail'), 'failpoint set on node3');
$node3->safe_psql('postgres',
	q{ALTER SYSTEM SET zklock.elections = 'nightly, lost'; SELECT pg_reload_conf()});
ok(wait_until(sub { psql1($node3, q{SELECT zk_is_leader('lost')}) eq 't' }, timeout => 20),
	"node3 leads 'lost' although its create's reply was lost");
ok($node3->wait_for_log(qr/adopted candidate node "cand-[0-9a-f-]+" of election group "lost" after its create's reply was lost/, $log_at),
	'it adopted the node it found by its prefix');
is(psql1($node3, q{SELECT cardinality(candidates) FROM zk_elections WHERE "group" = 'lost'}),
	'1', 'one node, not two');
ok(zk_set_failpoints($node3, ''), 'failpoint cleared');

# --- watches: one per candidacy at most ---------------------------------------
foreach my $n (@three)
{
	my $groups = psql1($n, 'SELECT count(*) FROM zk_elections');
	my $w;
	ok( wait_until(
			sub {
				$w = psql1($n, 'SELECT watches FROM zk_lock_status');
				$w <= $groups + 1;	# and the revocation mailbox's (issue 18)
			},
			timeout => 10),
		$n->name . ": at most one watch per group, and the mailbox's ($w watches, $groups groups)");
}

# --- queries at once, some cancelled ---------------------------------------------
my $worker3 = psql1($node3, 'SELECT worker_pid FROM zk_lock_status');
my @q;
for my $i (1 .. 8)
{
	my $s = zk_session($node3, "query$i");
	$s->send(q{DO $$ DECLARE n int := 0; BEGIN FOR i IN 1..300 LOOP
	  BEGIN
	    PERFORM zk_leader('nightly'), count(*) FROM zk_elections;
	  EXCEPTION WHEN query_canceled THEN n := n + 1;
	  END;
	END LOOP; RAISE NOTICE 'cancelled %', n; END $$});
	push @q, $s;
}
my $t_end = time() + 1.5;
while (time() < $t_end)
{
	$node3->safe_psql('postgres',
		'SELECT pg_cancel_backend(pid) FROM unnest(ARRAY['
		  . join(',', map { $q[$_]->pid } grep { $_ % 2 } 0 .. $#q)
		  . ']) AS pid');
	sleep(0.02);
}
my $bad = 0;
my $cancelled = 0;
foreach my $i (0 .. $#q)
{
	my $r = $q[$i]->wait(120);

	# A cancel that arrives while the previous one is being cleaned up (or
	# between two blocks) is processed at the next block's entry, outside
	# the handler: a cancelled session may end in 57014 itself.
	$bad++
	  unless $r
	  && ($r->{sqlstate} eq '00000'
		|| ($i % 2 && $r->{sqlstate} eq '57014' && !$r->{exited}));
	$cancelled += $1 if $r && $r->{err} =~ /cancelled (\d+)/;
	$cancelled++ if $r && $r->{sqlstate} eq '57014';
}
cmp_ok($cancelled, '>', 10, "queries were cancelled in the middle ($cancelled times)");
is($bad, 0, 'eight sessions querying at once, half of them cancelled again and again, all end cleanly');
is(psql1($node3, 'SELECT worker_pid FROM zk_lock_status'), $worker3, 'the worker is the same');
ok(wait_until(sub { psql1($node3, 'SELECT entries_in_use FROM zk_lock_status') eq '0' }, timeout => 10),
	'no entry is left in use');
like(psql1($node3, q{SELECT zk_leader('nightly')}), qr/^node\d /, 'zk_leader still answers');

done_testing();
