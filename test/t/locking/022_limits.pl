
# Limits (trust issue, findings 7, 9 and 11), with several sessions and roles:
#  - a PUBLIC role taking session locks on ever more names stops at
#    zklock.max_locks_per_backend (53400, a hint naming the setting); other
#    roles can still lock, list zk_locks and force-release;
#  - entries still being released count against their backend: with the
#    worker stopped, withdrawn requests pile up to the cap and no further;
#  - a table made small with zklock.max_locks fills (53200), and listing and
#    force release still work from the administrators' reserve;
#  - zklock.allowed_subtrees set per role with ALTER ROLE ... SET: the role
#    locks inside its subtrees only (42501 outside) and cannot change it;
#  - a lock set of 100,000 names ends within a few seconds of a cancel
#    (statement_timeout), and 100,000 names with few distinct ones succeed;
#  - text read from ZooKeeper that is not valid in the database encoding
#    is shown with each invalid byte replaced by "?", not an error.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my $node = zk_node('lim',
	extra_conf => "zklock.max_locks_per_backend = 4\nzklock.connect_timeout = '1s'");

$node->safe_psql('postgres', q{
	CREATE ROLE mallory LOGIN;
	CREATE ROLE alice LOGIN;
	GRANT pg_read_all_stats TO alice;
});

# --- one PUBLIC role cannot deny everyone ---------------------------------
my $m = zk_session($node, 'flood', user => 'mallory');
my $r = $m->query(q{DO $$ BEGIN
	FOR i IN 1..1000 LOOP
		PERFORM zk_lock_acquire_session('flood/' || i, parents => false);
	END LOOP; END $$}, 120);
is($r->{sqlstate}, '53400', 'a flood of session locks stops at the per-backend cap');
like($r->{err}, qr/this backend has used all of its zklock lock entries/,
	"53400's message is doc/sql.md's errors table's");
like($r->{err}, qr/zklock\.max_locks_per_backend/, 'the hint names the setting');
is(psql1($node, 'SELECT count(*) FROM zk_lock_local WHERE pid = ' . $m->pid),
	'4', 'the flooding backend holds its cap, no more');

my $a = zk_session($node, 'other', user => 'alice');
is($a->query(q{SELECT zk_lock_try_acquire_session('other/x') > 0})->{out}, 't',
	'another role still takes a lock');
is($a->query(q{SELECT count(*) FROM zk_locks WHERE resource LIKE 'flood/%'})->{out},
	'4', 'zk_locks lists the flood');
$a->query_ok(q{SELECT zk_lock_release_all()});
is(($node->psql('postgres', q{SELECT zk_lock_force_release('flood/1')}))[1], '1',
	'force release works');
$m->query_ok(q{SELECT zk_lock_release_all()});

# --- entries still being released count against their backend -------------
ok( wait_until(
		sub { psql1($node, 'SELECT entries_in_use FROM zk_lock_status') eq '0' },
		timeout => 15),
	'every entry is free again');
my $worker = psql1($node, 'SELECT worker_pid FROM zk_lock_status');
kill 'STOP', $worker;
my @states;
for my $i (1 .. 6)
{
	my $q = $m->query(qq{SELECT zk_lock_try_acquire_session('stuck/$i', parents => false)}, 30);
	push @states, $q->{sqlstate};
}
is_deeply(\@states, [ ('55000') x 4, '53400', '53400' ],
	'withdrawn requests of a stopped worker count until the worker frees them');

# A backend that exits leaves its withdrawn entries to its slot: the next
# backend in the slot inherits them, so connecting again does not get a
# fresh share of that slot.  PostgreSQL 15 and 16 hand the next backend the
# PGPROC freed last (the same slot); 17 and later the one freed longest ago
# (another slot, with its own share: every slot is capped all the same).
my $e1 = zk_session($node, 'exit1', user => 'mallory');
my $e1pid = $e1->pid;
for my $i (1 .. 3)
{
	$e1->query(qq{SELECT zk_lock_try_acquire_session('gone/$i', parents => false)}, 30);
}
$e1->quit;
ok( wait_until(
		sub {
			$a->query(qq{SELECT count(*) FROM pg_stat_activity WHERE pid = $e1pid})->{out} eq '0';
		},
		timeout => 15),
	'the first backend has exited');
sleep(1);    # its slot goes back to the free list after pg_stat_activity
my $e2 = zk_session($node, 'exit2', user => 'mallory');
@states = ();
for my $i (1 .. 2)
{
	push @states, $e2->query(qq{SELECT zk_lock_try_acquire_session('gone2/$i', parents => false)}, 30)->{sqlstate};
}
my $major = $a->query(q{SELECT current_setting('server_version_num')::int / 10000})->{out};
if ($major < 17)
{
	is_deeply(\@states, [ '55000', '53400' ],
		'the next backend in the slot inherits the entries still being released');
}
else
{
	is_deeply(\@states, [ '55000', '55000' ],
		"PostgreSQL $major: the next backend gets another slot, with that slot's own share");
}
$e2->quit;
kill 'CONT', $worker;
ok( wait_until(
		sub { psql1($node, 'SELECT entries_in_use FROM zk_lock_status') eq '0' },
		timeout => 15),
	'the worker frees them once it runs again');
is($m->query(q{SELECT zk_lock_try_acquire_session('stuck/7') > 0})->{out},
	't', 'and the backend can lock again');
$m->query_ok(q{SELECT zk_lock_release_all()});

# --- zklock.allowed_subtrees, per role -----------------------------------
my ($rc, $out, $err) = $node->psql('postgres',
	q{ALTER ROLE mallory SET zklock.allowed_subtrees = 'mallory, shared/tmp'});
is($rc, 0, 'a superuser restricts a role to its subtrees') or diag($err);
my $m2 = zk_session($node, 'restricted', user => 'mallory');
is($m2->query(q{SELECT zk_lock_try_acquire('mallory/a/b') > 0})->{out}, 't',
	'inside its subtree (parents included)');
$r = $m2->query(q{SELECT zk_lock_try_acquire('etl/nightly_load')});
is($r->{sqlstate}, '42501', 'outside its subtrees: 42501');
like($r->{err}, qr/not allowed to lock zklock resource "etl\/nightly_load"/,
	'with a clear message');
$r = $m2->query(q{SELECT zk_lock_acquire_explicit('etl/nightly_load', ttl => '1 hour')});
is($r->{sqlstate}, '42501', 'explicit locks too');
$r = $m2->query(q{SELECT zk_lock_try_acquire_all(ARRAY['mallory/c', 'shared/tmp/d', 'shared/x'])});
is($r->{sqlstate}, '42501', 'and lock sets');
$r = $m2->query(q{SET zklock.allowed_subtrees = '*'});
is($r->{sqlstate}, '42501', 'the role cannot widen it with SET');
$r = $m2->query(q{ALTER ROLE mallory SET zklock.allowed_subtrees = '*'});
is($r->{sqlstate}, '42501', 'nor with ALTER ROLE');
{
	local $ENV{PGOPTIONS} = '-c zklock.allowed_subtrees=*';
	($rc, $out, $err) = $node->psql('postgres', 'SHOW zklock.allowed_subtrees',
		extra_params => [ '-U', 'mallory' ]);
}
isnt($rc, 0, 'nor at connection time (PGOPTIONS)');
like($err, qr/permission denied to set parameter/, 'permission denied');
is($a->query(q{SELECT zk_lock_try_acquire('etl/nightly_load') > 0})->{out}, 't',
	'other roles keep the open default');
$m2->quit;
$node->safe_psql('postgres', q{ALTER ROLE mallory RESET zklock.allowed_subtrees});

# --- a full table: the administrators' reserve ---------------------------
my $small = zk_node('small',
	extra_conf => "zklock.max_locks = 6\nzklock.max_locks_per_backend = 4");
my $f1 = zk_session($small, 'fill1');
$small->safe_psql('postgres', 'CREATE ROLE mallory LOGIN');
my $f2 = zk_session($small, 'fill2', user => 'mallory');
my $fill = q{DO $$ BEGIN FOR i IN 1..4 LOOP
	PERFORM zk_lock_acquire_session('full/%s' || i, parents => false);
	END LOOP; END $$};
$f1->query_ok(sprintf($fill, 'a'));
$r = $f2->query(sprintf($fill, 'b'));
is($r->{sqlstate}, '53200', 'the table of zklock.max_locks entries fills: 53200');
like($r->{err}, qr/out of zklock lock entries/,
	"53200's message is doc/sql.md's errors table's");
like($r->{err}, qr/zklock\.max_locks/, 'the hint names the setting');
is(psql1($small, q{SELECT count(*) FROM zk_locks WHERE resource LIKE 'full/%'}), '6',
	'zk_locks still lists, from the reserve');
is(psql1($small, q{SELECT zk_lock_force_release('full/b1')}), '1',
	'zk_lock_force_release still works, from the reserve');
$f1->query_ok(q{SELECT zk_lock_release_all()});
$f2->query(q{SELECT zk_lock_release_all()});

# A set that fits: 100,000 names under a cap that allows them and a table
# of 20,000 entries; statement_timeout cancels it while it is taking them
# one by one, and everything it took is given back.
$small->append_conf('postgresql.conf',
	"zklock.max_locks = 20000\nzklock.max_locks_per_backend = 200000");
$small->restart;
zk_wait_connected($small) or BAIL_OUT('small did not reconnect');
my $c = zk_session($small, 'cancelled');
$c->query_ok(q{SET statement_timeout = '1s'});
$r = $c->query(
	q{SELECT zk_lock_try_acquire_all(array(SELECT 'cancel/n' || i FROM generate_series(1, 100000) i))},
	120);
diag("100,000 names, taken one by one: $r->{sqlstate} after $r->{elapsed} s");
ok($r->{sqlstate} eq '57014' || $r->{sqlstate} eq '53200',
	'a set being taken is cancelled (or fills the table)') or diag($r->{err});
cmp_ok($r->{elapsed}, '<', 1 + 10, 'ended within 10 s of the cancel');
is(psql1($small, "SELECT count(*) FROM zk_lock_local WHERE pid = " . $c->pid
	  . " AND state <> 'releasing'"), '0', 'the cancelled set holds nothing');
ok( wait_until(
		sub { psql1($small, 'SELECT entries_in_use FROM zk_lock_status') eq '0' },
		timeout => 60),
	'and its nodes are removed');

# --- a lock set of 100,000 names and a cancel -----------------------------
my $big = zk_session($node, 'bigset');
$big->query_ok(q{SET statement_timeout = '1s'});
$r = $big->query(
	q{SELECT zk_lock_try_acquire_all(array(SELECT 'big/n' || i FROM generate_series(1, 100000) i))},
	120);
diag("100,000 distinct names: $r->{sqlstate} after $r->{elapsed} s");
ok($r->{sqlstate} eq '57014' || $r->{sqlstate} eq '53400',
	'100,000 distinct names: cancelled or refused') or diag($r->{err});
cmp_ok($r->{elapsed}, '<', 1 + 10, 'ended within 10 s of the cancel');
$r = $big->query(
	q{SELECT array_length(zk_lock_try_acquire_all_session(array(SELECT 'big' || (i % 3) FROM generate_series(1, 100000) i)), 1)},
	120);
diag("100,000 names, 3 distinct: $r->{sqlstate} after $r->{elapsed} s");
ok($r->{sqlstate} eq '00000' || $r->{sqlstate} eq '57014',
	'100,000 names of 3 distinct resources: granted (or cancelled)') or diag($r->{err});
cmp_ok($r->{elapsed}, '<', 1 + 10, 'ended within 10 s of the cancel');
is($big->query_ok(q{SELECT count(*) FROM zk_lock_local WHERE pid = pg_backend_pid() AND resource LIKE 'big/%'}),
	'0', 'nothing of the cancelled set is held');
$big->query_ok(q{RESET statement_timeout});
$big->query_ok(q{SELECT zk_lock_release_all()});

# --- text from ZooKeeper in the database encoding ----------------------------
my $data = "instance=elsewhere\npid=77\ndatabase=d\xffb\nuser=us\xc3er\nscope=session\nquery=SELECT \xe2\x82";
my ($crc, $made) = ZkLockTest::zkutil('create-seq-hex', zk_path('enc/r') . '/LOCK-EXCLUSIVE-',
	unpack('H*', $data));
is($crc, 0, 'another client made a node whose data is not UTF-8');
($rc, $out, $err) = $node->psql('postgres',
	q{SELECT database, username, query, octet_length(query) FROM zk_lock_nodes('enc/r')});
is($rc, 0, 'zk_lock_nodes reads it') or diag($err);
is($out, 'd?b|us?er|SELECT ??|9', 'each invalid byte is shown as "?"');
is(psql1($node, q{SELECT count(*) FROM zk_locks WHERE resource = 'enc/r'}), '1',
	'zk_locks lists it');
chomp $made;
ZkLockTest::zkutil('delete-r', $made);

zk_done_check();
done_testing();
