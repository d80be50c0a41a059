
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
#    another instance leads meanwhile) cannot commit: 55P03, nothing lands.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/..";
use ZkLockTest;
use ZkElection;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $SESSION_TIMEOUT = 4;    # zk_node's default zklock.session_timeout
my $SLACK = 5;              # a loaded test machine

my $hosts = zk_start();
my $conf = "zklock.elections = 'nightly'";
my $node1 = zk_node('node1', extra_conf => $conf);
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


done_testing();
