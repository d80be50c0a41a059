
# A NOTIFY is fenced as a write is (issue 28, finding 4; doc/safety.md "Work
# under a session lock is fenced too", "Instance leadership").  PostgreSQL
# gives a transaction whose only effect is a NOTIFY its id after the
# pre-commit callbacks, so "has an xid" did not see it.  On node1:
#  - under a session lock that is held: NOTIFY and pg_notify commit and are
#    delivered (no false refusal);
#  - under a session lock force-released from node2 and taken there: a
#    transaction whose only effect is NOTIFY, or pg_notify, fails at COMMIT
#    with 55P03, as a write does, and the listener receives nothing; a
#    read-only transaction, and a NOTIFY rolled back with its savepoint,
#    still commit;
#  - under leadership (zk_is_leader true): NOTIFY commits and is delivered;
#    once the leadership is lost (the candidate node deleted, node2 leads),
#    a transaction that saw true and only notifies fails with 55P03 and
#    the listener receives nothing; a read-only one commits.
# The listener's check: a notification sent afterwards by a session that
# holds nothing arrives, and none of the refused ones came before it.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my $conf = "zklock.elections = 'etl'";
my $node1 = zk_node('node1', extra_conf => $conf);
ok(wait_until(sub { psql1($node1, q{SELECT zk_is_leader('etl')}) eq 't' }, timeout => 20),
	'node1, first, leads the group');
my $node2 = zk_node('node2', extra_conf => $conf);

# review: NOTIFY from a statement trigger on an UPDATE of no row, from a
# function in a READ ONLY transaction, in a PL/pgSQL exception block, and
# from a procedure that commits (the probe runs under PL/pgSQL's error
# context stack); objects made before the lock is lost.
$node1->safe_psql('postgres', q{
CREATE TABLE t93(id int);
CREATE FUNCTION t93_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_notify('etl_done', 'trig'); RETURN NULL; END $$;
CREATE TRIGGER t93_stmt AFTER UPDATE ON t93 FOR EACH STATEMENT EXECUTE FUNCTION t93_notify();
CREATE FUNCTION notify_fn(p text) RETURNS void LANGUAGE sql AS $$ SELECT pg_notify('etl_done', p) $$;
CREATE PROCEDURE notify_commit(p text) LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_notify('etl_done', p); COMMIT; END $$;
});

my $listener = zk_session($node1, 'listener');
$listener->query_ok('LISTEN etl_done');
my $heard = '';
my $r0;

# Poll the listener until the payload $want has arrived (bounded).
sub hear
{
	my ($want) = @_;
	return wait_until(
		sub {
			my $r = $listener->query('SELECT 1');
			$heard .= $r->{out} . "\n";
			return $heard =~ /"etl_done" with payload "\Q$want\E"/;
		},
		timeout => 20);
}

my $sentinel = 0;
# A notification from a session that holds nothing; once it arrived, every
# notification committed before it has arrived too.
sub heard_nothing_of
{
	my ($what, @payloads) = @_;
	$sentinel++;
	$node1->safe_psql('postgres', "NOTIFY etl_done, 'sentinel$sentinel'");
	ok(hear("sentinel$sentinel"), "$what: a later notification arrives");
	my @got = grep { $heard =~ /"etl_done" with payload "\Q$_\E"/ } @payloads;
	is("@got", '', "$what: the listener received none of the refused notifications");
}

# --- under a session lock ------------------------------------------------------
my $etl = zk_session($node1, 'etl');
$etl->query_ok(q{SELECT zk_lock_acquire_session('etl/step')});
is($etl->query('BEGIN; NOTIFY etl_done, \'held1\'; COMMIT')->{sqlstate}, '00000',
	'lock held: BEGIN; NOTIFY; COMMIT commits');
is($etl->query(q{SELECT pg_notify('etl_done', 'held2')})->{sqlstate}, '00000',
	'lock held: pg_notify commits');
ok(hear('held1') && hear('held2'), 'lock held: the listener receives both');
# review: the probe's caught ERROR leaves no trace: 200 commits in one DO
# block (an error stack entry left behind would PANIC after 5), with every
# log and backtrace setting that could report it; nothing is reported.
$etl->query_ok(q{SET log_min_messages = debug5; SET backtrace_functions = 'AtPrepare_Notify'});
$r0 = $etl->query(
	q{DO $$ BEGIN FOR i IN 1..200 LOOP PERFORM pg_notify('etl_done', 'loop' || i); COMMIT; END LOOP; END $$});
is($r0->{sqlstate}, '00000', 'lock held: 200 NOTIFY-only commits in a DO block commit');
unlike($r0->{err}, qr/cannot PREPARE|ERROR/, 'and nothing is reported to the client');
ok(hear('loop200'), 'lock held: the listener receives the last of them');
is($etl->query(q{BEGIN; LISTEN other_chan; COMMIT; UNLISTEN other_chan})->{sqlstate}, '00000',
	'lock held: LISTEN and UNLISTEN commit');
is($etl->query(q{UPDATE t93 SET id = id})->{sqlstate}, '00000',
	'lock held: a NOTIFY from a statement trigger on an UPDATE of no row commits');
ok(hear('trig'), 'lock held: the listener receives it');
$heard = '';

is(psql1($node2, q{SELECT zk_lock_force_release('etl/step')}), '1',
	'node2 force-releases the session lock');
my $other = zk_session($node2, 'other');
ok($other->query_ok(q{SELECT zk_lock_acquire_session('etl/step', timeout => '20 s')}) > 0,
	'and takes it');
ok( wait_until(
		sub {
			psql1($node1, q{SELECT count(*) FROM zk_lock_local WHERE state = 'lost'}) eq '1';
		},
		timeout => 20),
	'node1 sees its session lock lost');

my $r = $etl->query(q{BEGIN; NOTIFY etl_done, 'lost1'; COMMIT});
is($r->{sqlstate}, '55P03', 'lock lost: BEGIN; NOTIFY; COMMIT fails with 55P03, as a write does');
like($r->{err}, qr/was lost; the transaction cannot commit/, 'and says why');
$r = $etl->query(q{SELECT pg_notify('etl_done', 'lost2')});
is($r->{sqlstate}, '55P03', 'lock lost: pg_notify in its own transaction fails with 55P03');
is($etl->query(q{BEGIN; SELECT count(*) FROM pg_class; COMMIT})->{sqlstate}, '00000',
	'lock lost: a read-only transaction still commits');
is( $etl->query(q{BEGIN; SAVEPOINT a; NOTIFY etl_done, 'rolled'; ROLLBACK TO a; COMMIT})
	  ->{sqlstate},
	'00000',
	'lock lost: a NOTIFY rolled back with its savepoint leaves nothing to fence: commits');
$r = $etl->query(q{UPDATE t93 SET id = id});
is($r->{sqlstate}, '55P03', 'lock lost: a NOTIFY from a statement trigger on an UPDATE of no row (no xid) fails');
is($etl->query(q{BEGIN READ ONLY; SELECT notify_fn('ro'); COMMIT})->{sqlstate}, '55P03',
	'lock lost: pg_notify in a function of a READ ONLY transaction fails');
is( $etl->query(
		q{DO $$ BEGIN BEGIN PERFORM pg_notify('etl_done', 'exc'); RAISE EXCEPTION 'x'; EXCEPTION WHEN others THEN NULL; END; END $$}
	)->{sqlstate},
	'00000',
	'lock lost: a NOTIFY rolled back by a PL/pgSQL exception block: commits');
is( $etl->query(
		q{DO $$ BEGIN BEGIN PERFORM pg_notify('etl_done', 'exc2'); EXCEPTION WHEN others THEN NULL; END; END $$}
	)->{sqlstate},
	'55P03',
	'lock lost: a NOTIFY kept by a PL/pgSQL exception block that caught nothing fails');
$r = $etl->query(q{CALL notify_commit('proc')});
is($r->{sqlstate}, '55P03', 'lock lost: COMMIT inside a procedure after pg_notify fails');
unlike($r->{err}, qr/cannot PREPARE/, 'and the probe\'s ERROR is not what is reported');
is($etl->query(q{LISTEN other_chan})->{sqlstate}, '55P03',
	'lock lost: LISTEN counts as an effect (doc/safety.md)');
is($etl->query(q{SELECT 1})->{sqlstate}, '00000', 'lock lost: the session goes on');
heard_nothing_of('lock lost', 'lost1', 'lost2', 'rolled', 'trig', 'ro', 'exc', 'exc2', 'proc');
unlike(slurp_file($node1->logfile), qr/cannot PREPARE a transaction that has executed/,
	"the probe's ERROR never reached the server log");
$etl->query('SELECT zk_lock_release_all()');
$other->query_ok(q{SELECT zk_lock_release_all()});

# --- under leadership ----------------------------------------------------------
my $j = zk_session($node1, 'job');
is($j->query(q{BEGIN; SELECT zk_is_leader('etl'); NOTIFY etl_done, 'lead1'; COMMIT})->{sqlstate},
	'00000', 'leading: a transaction that saw zk_is_leader true and notifies commits');
ok(hear('lead1'), 'leading: the listener receives it');

my @jobs = map { zk_session($node1, "job$_") } 1 .. 3;
for my $s (@jobs)
{
	$s->query_ok('BEGIN');
	is($s->query_ok(q{SELECT zk_is_leader('etl')}), 't', $s->name . ': zk_is_leader true');
}
my $gpath = zk_path('zklock.elections/etl');
my (undef, $ls) = zkutil('ls-r', $gpath);
my @cands = sort { ($a =~ /(\d+)$/)[0] <=> ($b =~ /(\d+)$/)[0] } grep { /cand-/ } split /\n/, $ls;
ok(@cands == 2, 'two candidate nodes') or diag($ls);
my ($rc) = zkutil('delete-r', $cands[0]);
is($rc, 0, "someone deletes node1's candidate node");
ok(wait_until(sub { psql1($node2, q{SELECT zk_is_leader('etl')}) eq 't' }, timeout => 20),
	'node2 leads');

$jobs[0]->query_ok(q{NOTIFY etl_done, 'lost4'});
$r = $jobs[0]->query('COMMIT');
is($r->{sqlstate}, '55P03', 'leadership lost: NOTIFY; COMMIT fails with 55P03');
like($r->{err}, qr/leadership of election group "etl" was lost/, 'and says why');
$jobs[1]->query_ok(q{SELECT pg_notify('etl_done', 'lost5')});
is($jobs[1]->query('COMMIT')->{sqlstate}, '55P03', 'leadership lost: pg_notify; COMMIT fails with 55P03');
$jobs[2]->query_ok('SELECT count(*) FROM pg_class');
is($jobs[2]->query('COMMIT')->{sqlstate}, '00000', 'leadership lost: a read-only transaction commits');
heard_nothing_of('leadership lost', 'lost4', 'lost5');

$_->quit for ($etl, $other, $j, @jobs, $listener);
zk_done_check();
done_testing();
