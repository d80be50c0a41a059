
# A reviewer's attacks on the advisory-lock API (issue 17, doc/sql.md
# "Advisory locks"), each asserting what a user relies on:
#  - holding a key both ways never lets two backends hold it in conflicting
#    modes: four sessions take and drop one key at random, shared and
#    exclusive, waiting and trying, and mirror each hold into PostgreSQL's
#    own advisory lock on the same key, which must always be free for it
#    (the built-in lock manager is the oracle);
#  - size: a transaction taking more keys than zklock.max_locks_per_backend
#    fails with 53400 (PostgreSQL takes thousands), gives back what it took
#    and leaves no node; doc/sql.md's differences say so;
#  - zklock.allowed_subtrees does not apply to the keys (as the docs say);
#    ALTER ROLE ... SET refuses a bad namespace;
#  - the WARNING of a lost key names the call that releases it;
#  - the namespace is only the database's name by default: a role that may
#    create databases reaches the keys of a namespace named like the
#    database it creates (the docs say so, not that nobody can);
#  - a database's name (a shared catalog's, no encoding of its own) makes
#    the same namespace from a LATIN1 database as from a UTF8 one;
#  - a backend terminated while it holds a key both ways leaves no node;
#  - with ZooKeeper unreachable a try raises 08006 (doc/sql.md says so);
#  - both ways when the create replies of both nodes were lost: the second
#    request names the adopted first node, and is granted at once.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;

zk_start();
my $node = zk_node('node1');
my $adv = zk_path('zklock.advisory');
my $r;

# --- both modes against the built-in lock manager ---------------------------
# mx(op, mode): take or drop one hold of key 1 in ZooKeeper, and mirror it
# into pg_advisory_*(1) of the same mode.  The mirror is taken after the zk
# hold and dropped before it, so it is free whenever zklock is right.
$node->safe_psql('postgres', q{
CREATE FUNCTION mx(op text, m text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF op = 'unlock' THEN
    IF m = 'x' THEN
      PERFORM pg_advisory_unlock(1); PERFORM zk_advisory_unlock(1);
    ELSE
      PERFORM pg_advisory_unlock_shared(1); PERFORM zk_advisory_unlock_shared(1);
    END IF;
    RETURN 'unlocked';
  END IF;
  IF op = 'try' THEN
    IF (m = 'x' AND NOT zk_try_advisory_lock(1)) OR
       (m = 's' AND NOT zk_try_advisory_lock_shared(1)) THEN
      RETURN 'busy';
    END IF;
  ELSIF m = 'x' THEN
    PERFORM zk_advisory_lock(1);
  ELSE
    PERFORM zk_advisory_lock_shared(1);
  END IF;
  IF (m = 'x' AND NOT pg_try_advisory_lock(1)) OR
     (m = 's' AND NOT pg_try_advisory_lock_shared(1)) THEN
    RETURN 'VIOLATION';
  END IF;
  RETURN 'got';
END $$});

my @s = map { zk_session($node, "mx$_") } 1 .. 4;
$_->query_ok(q{SET lock_timeout = '150ms'}) for @s;
my @held = map { { x => 0, s => 0 } } @s;
my $seed = $ENV{ZKLOCK_SEED} // time;
srand($seed);
note "seed $seed";
my ($violations, $got, $waited_out, $both) = (0, 0, 0, 0);
for my $round (1 .. 120)
{
	my @op;
	for my $i (0 .. $#s)
	{
		# mostly the mode it does not hold, when it holds one: both ways
		my $m = rand() < 0.5 ? 'x' : 's';
		$m = $held[$i]{x} ? 's' : 'x'
		  if ($held[$i]{x} xor $held[$i]{s}) && rand() < 0.5;
		my $op;
		if ($held[$i]{$m} > 0 && rand() < 0.5) { $op = 'unlock'; }
		elsif ($held[$i]{$m} >= 2) { $op = 'unlock'; }
		else { $op = rand() < 0.5 ? 'lock' : 'try'; }
		$op[$i] = [ $op, $m ];
		$s[$i]->send("SELECT mx('$op', '$m')");
	}
	for my $i (0 .. $#s)
	{
		my $res = $s[$i]->wait(30);
		die "mx$i: no answer" unless defined $res;
		my ($op, $m) = @{ $op[$i] };
		if ($res->{sqlstate} eq '55P03')
		{
			$waited_out++;
			next;
		}
		die "mx$i: $res->{sqlstate} $res->{err}" if $res->{sqlstate} ne '00000';
		$violations++ if $res->{out} eq 'VIOLATION';
		if ($res->{out} eq 'got')
		{
			$held[$i]{$m}++;
			$got++;
			$both++ if $held[$i]{x} > 0 && $held[$i]{s} > 0;
		}
		$held[$i]{$m}-- if $res->{out} eq 'unlocked';
	}
}
is($violations, 0,
	'no hold granted by zklock found the built-in lock of its mode taken by another backend');
ok($got > 20 && $waited_out > 0 && $both > 0,
	"the run took holds ($got), some making a backend hold the key both ways ($both), and had waits end by lock_timeout ($waited_out)");
$_->query_ok('SELECT zk_advisory_unlock_all(), pg_advisory_unlock_all()') for @s;
ok(zk_wait_count("$adv/postgres/1", 0, 10), 'no node of key 1 is left');

# --- size: more keys than zklock.max_locks_per_backend ----------------------
my $a = $s[0];
$a->query_ok('BEGIN');
$r = $a->query(
	'SELECT count(zk_advisory_xact_lock(g)) FROM generate_series(1, 33) g');
is($r->{sqlstate}, '53400',
	'a transaction taking 33 keys fails with 53400 (zklock.max_locks_per_backend is 32)');
$a->query_ok('ROLLBACK');
is($a->query_ok(
		q{SELECT count(*) FROM zk_lock_local WHERE pid = pg_backend_pid() AND state <> 'releasing'}),
	'0', 'and holds nothing after it (its nodes are being removed)');
ok(zk_wait_no_locks($adv, 10), 'no node of it is left');
my $apid = $a->pid;
ok( wait_until(
		sub {
			psql1($node, "SELECT count(*) FROM zk_lock_local WHERE pid = $apid") eq '0';
		},
		timeout => 10),
	'and its entries are free again');
$a->query_ok('BEGIN');
is($a->query_ok(
		'SELECT count(zk_advisory_xact_lock(g)) FROM generate_series(1, 32) g'),
	'32', '32 keys fit');
$a->query_ok('COMMIT');
my ($doc) = slurp_file("$FindBin::RealBin/../../../doc/sql.md") =~
  /^## Advisory locks\n(.*)\z/ms;
like($doc, qr/max_locks_per_backend/,
	'doc/sql.md lists the limit among the differences from PostgreSQL');

# --- zklock.allowed_subtrees does not apply to the keys ---------------------
$node->safe_psql('postgres', q{
CREATE ROLE narrow LOGIN;
ALTER ROLE narrow SET zklock.allowed_subtrees = '';
});
my $narrow = zk_session($node, 'narrow', user => 'narrow');
is($narrow->query_ok('SHOW zklock.allowed_subtrees'), '',
	'the role may lock no resource by name');
$r = $narrow->query(q{SELECT zk_lock_try_acquire('etl/x')});
is($r->{sqlstate}, '42501', 'zk_lock_* refuses it');
is($narrow->query_ok('SELECT zk_try_advisory_lock(7)'), 't',
	'its advisory keys are not subject to zklock.allowed_subtrees');
$narrow->query_ok('SELECT zk_advisory_unlock(7)');

# refused when set per role too (doc/settings.md: SET, ALTER DATABASE/ROLE)
$r = $s[1]->query(q{ALTER ROLE narrow SET zklock.advisory_namespace = E'x\ty'});
is($r->{sqlstate}, '22023', 'ALTER ROLE ... SET refuses a bad namespace');

# --- a lost key: the WARNING says how to release it -------------------------
$a->query_ok('SELECT zk_advisory_lock(8)');
my ($lost_node) = zk_lock_nodes("$adv/postgres/8");
is((ZkLockTest::zkutil('delete-r', $lost_node))[0], 0, 'an administrator deletes a key\'s node');
ok( wait_until(
		sub {
			psql1($node,
				q{SELECT count(*) FROM zk_lock_local WHERE resource LIKE 'zklock.advisory/%/8' AND state = 'lost'}
			) eq '1';
		},
		timeout => 10),
	'the holder\'s lock is lost');
$r = $a->query('SELECT zk_advisory_unlock(8)');
like($r->{err}, qr/HINT:.*zk_advisory_unlock/,
	'the WARNING names zk_advisory_unlock, which releases it (zk_lock_release cannot name the key)');
is($r->{out}, 't', 'and zk_advisory_unlock releases it');

# --- the namespace is the name of a database a role can create --------------
$node->safe_psql('postgres', q{
CREATE DATABASE app_one;
ALTER DATABASE app_one SET zklock.advisory_namespace = 'app';
REVOKE CONNECT ON DATABASE app_one FROM PUBLIC;
CREATE ROLE maker LOGIN CREATEDB;
});
$node->safe_psql('app_one', 'CREATE EXTENSION zklock');
my $one = zk_session($node, 'one', dbname => 'app_one');
$one->query_ok('SELECT zk_advisory_lock(5)');
$node->safe_psql('postgres', 'CREATE DATABASE app',
	extra_params => [ '-U', 'maker' ]);
$node->safe_psql('app', 'CREATE EXTENSION zklock');
is( $node->safe_psql(
		'app', 'SELECT zk_try_advisory_lock(5)',
		extra_params => [ '-U', 'maker' ]),
	'f',
	'a role that may create databases shares the keys of namespace "app" by naming its database app'
);
like($doc, qr/CREATEDB/,
	'doc/sql.md says so: a namespace is shared with any database of that name');
unlike(slurp_file("$FindBin::RealBin/../../../doc/settings.md"),
	qr/a role cannot reach another database's keys/,
	'doc/settings.md does not promise that only a superuser can reach another database\'s keys');
$one->query_ok('SELECT zk_advisory_unlock(5)');

# --- a database's name is a shared catalog's: its bytes when UTF-8 ---------
# A database "caf\u00e9" made from a UTF8 database has the UTF-8 bytes of its
# name in pg_database whatever its own encoding, as every other database of
# the cluster sees it (request.c's catalog_name_utf8 writes such names into
# node data so).  Converted from its LATIN1 encoding, its namespace would be
# "caf\u00c3\u00a9": not the keys of a UTF8 database "caf\u00e9" on another
# instance, nor of the namespace 'caf\u00e9' set in one.
my $e_acute = "\xc3\xa9";
$node->safe_psql('postgres', q{
	CREATE DATABASE u8 TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C';
});
$node->safe_psql('u8', qq{SET client_encoding = 'UTF8';
	CREATE DATABASE "caf$e_acute" TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C'});
$node->safe_psql($_, 'CREATE EXTENSION zklock') foreach ('u8', "caf$e_acute");
my $lat = zk_session($node, 'latin1', dbname => "caf$e_acute");
$lat->query_ok(q{SET client_encoding = 'UTF8'});
$lat->query_ok('SELECT zk_advisory_lock(3)');
my $u8 = zk_session($node, 'utf8', dbname => 'u8');
$u8->query_ok(q{SET client_encoding = 'UTF8'});
$u8->query_ok(qq{SET zklock.advisory_namespace = 'caf$e_acute'});
is($u8->query_ok('SELECT zk_try_advisory_lock(3)'), 'f',
	'a LATIN1 database named caf\u00e9 (UTF-8 catalog bytes) holds the keys of namespace caf\u00e9');
$lat->query_ok('SELECT zk_advisory_unlock(3)');
is($u8->query_ok('SELECT zk_try_advisory_lock(3)'), 't', 'and gives them back');
$u8->query_ok('SELECT zk_advisory_unlock(3)');
$_->quit for ($lat, $u8);

# --- a PL/pgSQL exception block, as PostgreSQL: the block's transaction-level
# holds go when it fails, session-level ones stay
$a->query_ok(q{DO $$
BEGIN
  BEGIN
    PERFORM zk_advisory_xact_lock(4), zk_advisory_lock_shared(4);
    RAISE EXCEPTION 'undo';
  EXCEPTION WHEN raise_exception THEN NULL;
  END;
END $$});
is( $a->query_ok(
		q{SELECT string_agg(mode, ',' ORDER BY mode) FROM zk_lock_local WHERE pid = pg_backend_pid() AND resource LIKE 'zklock.advisory/%/4'}
	),
	'shared',
	'a failed exception block gives back its EXCLUSIVE transaction hold, not its SHARED session hold');
is($s[1]->query_ok('SELECT zk_try_advisory_lock_shared(4)'), 't', 'another backend shares the key');
is($s[1]->query_ok('SELECT zk_try_advisory_lock(4)'), 'f', 'but cannot take it exclusively');
$s[1]->query_ok('SELECT zk_advisory_unlock_all()');
$a->query_ok('SELECT zk_advisory_unlock_shared(4)');

# --- terminated while holding a key both ways -------------------------------
my $t = zk_session($node, 'terminated');
$t->query_ok('SELECT zk_advisory_lock_shared(9), zk_advisory_lock(9)');
is(zk_count_locks("$adv/postgres/9"), 2, 'one backend holds key 9 both ways');
psql1($node, 'SELECT pg_terminate_backend(' . $t->pid . ')');
ok(zk_wait_count("$adv/postgres/9", 0, 10),
	'terminated, it leaves neither node behind');
is($a->query_ok('SELECT zk_try_advisory_lock(9)'), 't', 'another backend takes the key');
$a->query_ok('SELECT zk_advisory_unlock_all()');

# --- both ways after lost create replies (adopted nodes) --------------------
# The second mode's request carries the name of the first mode's node, which
# the worker learnt by adopting it: the backend must not wait for itself.
my $log_at = -s $node->logfile;
ok(zk_set_failpoints($node, 'after-create-reply=fail'),
	"failpoints set to 'after-create-reply=fail'");
my $ad = zk_session($node, 'adopter');
$ad->query_ok('SELECT zk_advisory_lock_shared(11)');
is($ad->query_ok('SELECT zk_try_advisory_lock(11)'), 't',
	'holding an adopted SHARED node, the same backend is granted EXCLUSIVE at once');
ok(zk_log_count($node, qr/adopted lock node "[^"]*zklock\.advisory\/postgres\/11\/[^"]*"/, $log_at) >= 2,
	'both nodes were adopted after their create replies were lost');
is($a->query_ok('SELECT zk_try_advisory_lock_shared(11)'), 'f',
	'another backend is kept out of the key');
$ad->query_ok('SELECT zk_advisory_unlock_shared(11)');
$ad->query_ok('SELECT zk_advisory_lock_shared(11)');
is(zk_count_locks("$adv/postgres/11"), 2,
	'after dropping SHARED and taking it again under the adopted EXCLUSIVE: two nodes');
ok(zk_set_failpoints($node, ''), "failpoints set to ''");
$ad->query_ok('SELECT zk_advisory_unlock_all()');
ok(zk_wait_count("$adv/postgres/11", 0, 10), 'both go at unlock_all');
$ad->quit;

$_->quit for @s, $narrow, $one;
ok(zk_wait_no_locks($adv, 10), 'no advisory lock node is left');
zk_done_check();

# --- ZooKeeper unreachable: a try fails, where PostgreSQL's never does ------
zk_stop();
my $try = zk_session($node, 'try_without_zk');
$r = $try->query('SELECT zk_try_advisory_lock(12)', 60);
is($r->{sqlstate}, '08006',
	'with ZooKeeper down, zk_try_advisory_lock raises 08006 (pg_try_advisory_lock would answer)');
like($doc, qr/ZooKeeper unreachable[^.]*08006/,
	'doc/sql.md lists it among the differences from PostgreSQL');
$try->quit;
done_testing();
