
# Issue 28, finding 1: leaving an election group (a reload of
# zklock.elections) waits only for the commits that relied on the group's
# leadership (zk_is_leader said true, and their leadership fence passed),
# and for those no longer than a session's close waits (cancelled after a
# session timeout, logged).  A commit is held after its fence by a
# synchronous standby that does not exist (as in 035).
#  (a) The leader has a commit under an unrelated lock held after its
#      fence: it leaves, and the other instance leads at once.
#  (b) A candidate that does not lead, with such a commit, leaves at once:
#      when the leader leaves too, the third candidate leads.
#  (c) A commit that relied on zk_is_leader and hangs after its fence: the
#      leave waits for it (the other instance does not lead while it can
#      still land), cancels it after a session timeout with a LOG line,
#      and then the other instance leads; the unrelated commit of (a) is
#      not cancelled.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $PROMPT = 10;    # "at once", on a loaded 2-core machine

my $sync = "synchronous_standby_names = 'zklock_no_such_standby'\n"
  . "synchronous_commit = local\nwal_level = replica\nmax_wal_senders = 2";
zk_start();
my $node1 = zk_node('node1', extra_conf => "$sync\nzklock.elections = 'ga, gb, gc'");
ok( wait_until(
		sub { psql1($node1, q{SELECT count(*) FROM zk_elections WHERE is_leader}) eq '3' },
		timeout => 30),
	'node1, alone, leads ga, gb and gc');
my $node2 = zk_node('node2', extra_conf => "$sync\nzklock.elections = 'ga, gb, gc'");

sub candidates
{
	my ($node, $group) = @_;
	return psql1($node,
		qq{SELECT coalesce(cardinality(candidates), 0) FROM zk_elections WHERE "group" = '$group'});
}
ok( wait_until(
		sub { psql1($node2, q{SELECT count(*) FROM zk_elections WHERE cardinality(candidates) = 2}) eq '3' },
		timeout => 30),
	'node2 stands behind node1 in each group');
my $node3 = zk_node('node3', extra_conf => "zklock.elections = 'gb'");
ok(wait_until(sub { candidates($node3, 'gb') eq '3' }, timeout => 30),
	'node3 stands third in gb');
$_->safe_psql('postgres', 'CREATE TABLE runs(v int)') for ($node1, $node2);

sub set_elections
{
	my ($node, $value) = @_;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET zklock.elections = '$value'; SELECT pg_reload_conf()");
}

# A session whose COMMIT waits for the standby, after its fence passed;
# $rely: it relied on zk_is_leader($rely), else on a session lock
sub stuck_commit
{
	my ($node, $name, $rely) = @_;
	my $s = zk_session($node, $name);
	$s->query_ok('SET synchronous_commit = on');
	$s->query_ok('BEGIN');
	$s->query_ok(qq{SELECT zk_lock_acquire('unrelated/$name') > 0}) unless $rely;
	is($s->query_ok(qq{SELECT zk_is_leader('$rely')}), 't', "$name: zk_is_leader('$rely')")
	  if $rely;
	$s->query_ok("INSERT INTO runs VALUES (1)");
	$s->send('COMMIT');
	ok(wait_until(sub { in_syncrep($node, $s) }, timeout => 20),
		"$name: its COMMIT passed the fence and waits for the standby");
	return $s;
}

sub in_syncrep
{
	my ($node, $s) = @_;
	return psql1($node, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $s->pid) eq
	  'SyncRep';
}

# Seconds until $node leads $group (polled every 50 ms), undef if not
# within $timeout
sub leads_after
{
	my ($node, $group, $t0, $timeout) = @_;
	my $ok = wait_until(sub { psql1($node, qq{SELECT zk_is_leader('$group')}) eq 't' },
		timeout => $timeout, interval => 0.05);
	return $ok ? time() - $t0 : undef;
}

# --- (a) the leader, a lock-fenced commit held, leaves ga -------------------
my $s1 = stuck_commit($node1, 'lock1');
my $t0 = time();
set_elections($node1, 'gb, gc');
my $took = leads_after($node2, 'ga', $t0, 30);
note(sprintf('(a) node2 led ga %.3f s after node1 left it', $took // -1));
ok(defined $took && $took < $PROMPT,
	sprintf('(a) node2 leads ga at once (%.2f s) though node1 has a commit held under a lock',
		$took // -1));
ok(in_syncrep($node1, $s1), '(a) the held commit is not cancelled');

# --- (b) a candidate that does not lead, such a commit held, leaves gb ------
my $s2 = stuck_commit($node2, 'lock2');
$t0 = time();
set_elections($node2, 'ga, gc');
ok(wait_until(sub { candidates($node3, 'gb') eq '2' }, timeout => 30, interval => 0.05),
	'(b) node2 left gb');
$took = time() - $t0;
note(sprintf('(b) node2 left gb after %.3f s', $took));
cmp_ok($took, '<', $PROMPT, '(b) ... at once');
$t0 = time();
set_elections($node1, 'gc');
$took = leads_after($node3, 'gb', $t0, 30);
note(sprintf('(b) node3 led gb %.3f s after node1 left it', $took // -1));
ok(defined $took && $took < $PROMPT, '(b) the leader leaves gb too: node3 leads at once');

# --- (c) a commit that relied on gc's leadership ---------------------------
my $s3 = stuck_commit($node1, 'leader1', 'gc');
my $log_at = -s $node1->logfile;
$t0 = time();
set_elections($node1, '');
my ($led, $overlap) = (undef, 0);
while (time() < $t0 + 40)
{
	my $leads = psql1($node2, q{SELECT zk_is_leader('gc')}) eq 't';
	my $held = in_syncrep($node1, $s3);
	$overlap++ if $leads && $held;
	if ($leads) { $led = time() - $t0; last; }
	sleep(0.05);
}
note(sprintf('(c) node2 led gc %.3f s after node1 left it', $led // -1));
is($overlap, 0, '(c) node2 does not lead while the commit that relied on gc can still land');
ok(defined $led, '(c) node2 leads gc once that commit has ended');
cmp_ok($led // 0, '>', 2, '(c) ... not before: the leave waited for it');
my $r = $s3->wait(30);
ok($r && $r->{sqlstate} eq '00000', '(c) the COMMIT ended');
like($r ? $r->{err} : '', qr/canceling wait for synchronous replication/,
	'(c) ... cancelled in its wait for the standby (committed locally)');
ok( $node1->log_contains(
		qr/keeping the candidate node of election group "gc" until 1 commit that relied on its leadership has ended.*\n.*cancelled now/,
		$log_at),
	'(c) the cancel is logged, naming the group');
ok(in_syncrep($node1, $s1), '(c) the commit under a lock is not cancelled by the leave');
ok(in_syncrep($node2, $s2), '(c) nor the one on node2');

$node1->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $s1->pid . ')');
$node2->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $s2->pid . ')');
$_->wait(30) for ($s1, $s2);
$_->quit for ($s1, $s2, $s3);
zk_done_check();
done_testing();
