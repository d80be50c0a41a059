
# zklock.allowed_queues (1.9): which queues a role may use, set per role by
# a superuser, as zklock.allowed_subtrees is for locks:
#  - a role granted every queue function (purge too) and limited to "etl"
#    puts into, takes from, peeks at, counts and purges etl and etl/x;
#    etlx and other are refused (42501, the queue and the setting named) by
#    every function, and nothing reaches ZooKeeper: no node for a queue it
#    named, an item of other's neither held, nor taken, nor purged
#  - "*" allows every queue, "" none
#  - doc/security.md's GRANT and ALTER ROLE block is run as written
#  - a non-superuser cannot SET it; ALTER ROLE ... SET applies at the
#    role's next login (not to its open session); an item that is no
#    queue name (a/../b) is refused when set
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;

zk_start();
my $node = zk_node('node1');
$node->safe_psql('postgres', q{
	CREATE ROLE etl LOGIN;
	GRANT EXECUTE ON FUNCTION
	  zk_queue_put(text, bytea, integer), zk_queue_put(text, text, integer),
	  zk_queue_put_now(text, bytea, integer), zk_queue_put_now(text, text, integer),
	  zk_queue_take(text, interval), zk_queue_try_take(text),
	  zk_queue_length(text), zk_queue_peek(text), zk_queue_purge(text)
	TO etl;});
# doc/security.md's block that gives a role its own queues, run as written
# (test/t/recipes/132 runs the section's other two)
my $doc = PostgreSQL::Test::Utils::slurp_file("$FindBin::RealBin/../../../doc/security.md");
my ($section) = $doc =~ /^## Queues: who may use them \(1\.9\)\n(.*?)^## /ms;
my @blocks = ($section // '') =~ /^  ```sql\n(.*?)^  ```\n/msg;
like($blocks[1] // '', qr/^\s*GRANT EXECUTE .*\bTO etl;\s*ALTER ROLE etl SET zklock.allowed_queues = 'etl';\s*$/s,
	'doc/security.md: the GRANT and ALTER ROLE of etl');
$node->safe_psql('postgres', $blocks[1]);

my $root = zk_root();
my $qroot = "$root/zklock.queues";

# the queue nodes under zklock.queues, as names relative to it
sub queue_nodes
{
	return sort map { m{^\Q$qroot\E/(.+)$} ? $1 : () }
	  zk_list_znodes($qroot);
}

# a superuser's item in other, which etl must not reach
my $admin = zk_session($node, 'admin');
my $other_id = $admin->query_ok(q{SELECT zk_queue_put_now('other', 'secret')});

my $s = zk_session_as($node, 'etl', 'etl');
is($s->query_ok('SHOW zklock.allowed_queues'), 'etl', 'the role has its setting');

# ---------------------------------------------------------------------------
# Allowed: etl and the queues below it, with every function.
$s->query_ok(q{BEGIN});
$s->query_ok(q{SELECT zk_queue_put('etl', 'a'), zk_queue_put('etl/x', '\x01'::bytea, 5)});
$s->query_ok(q{COMMIT});
$s->query_ok(q{SELECT zk_queue_put_now('etl', 'b'), zk_queue_put_now('etl/x', '\x02'::bytea)});
is($s->query_ok(q{SELECT zk_queue_length('etl') || ' ' || zk_queue_length('etl/x')}),
	'2 2', 'etl and etl/x: put and put_now (both variants), length');
is($s->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_peek('etl')}),
	'a', 'peek on etl');
$s->query_ok(q{BEGIN});
is($s->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('etl')}),
	'a', 'try_take on etl');
is($s->query_ok(q{SELECT priority FROM zk_queue_take('etl/x', '5s')}),
	'5', 'take on etl/x');
$s->query_ok(q{COMMIT});
is($s->query_ok(q{SELECT zk_queue_purge('etl') + zk_queue_purge('etl/x')}),
	'2', 'purge of etl and etl/x (granted)');

# ---------------------------------------------------------------------------
# Refused: every function, on etlx and other; nothing reaches ZooKeeper.
my @before = queue_nodes();
my @calls = (
	q{SELECT zk_queue_put_now('etlx', 'x')},
	q{SELECT zk_queue_put_now('other', 'x'::bytea, 3)},
	q{BEGIN; SELECT zk_queue_put('etlx', 'x')},
	q{BEGIN; SELECT zk_queue_put('other', '\x01'::bytea)},
	q{BEGIN; SELECT * FROM zk_queue_take('other', '1s')},
	q{BEGIN; SELECT * FROM zk_queue_try_take('other')},
	q{SELECT * FROM zk_queue_peek('other')},
	q{SELECT zk_queue_length('etlx')},
	q{SELECT zk_queue_purge('other')},);
for my $sql (@calls)
{
	my $r = $s->query($sql);
	my ($queue) = $sql =~ /zk_queue_\w+\('(\w+)'/;
	like($r->{err},
		qr/ERROR:\s+42501: not allowed to use zklock queue "$queue"\nDETAIL:\s+zklock.allowed_queues is "etl"\./,
		"refused: $sql");
	$s->query_ok('ROLLBACK') if $sql =~ /^BEGIN/;
}
is_deeply([ queue_nodes() ], \@before,
	'no node was made for a refused queue (etlx has none)');
ok(!grep({ m{^etlx} } queue_nodes()), 'etlx does not exist');
is($admin->query_ok(q{SELECT id || ' ' || convert_from(item, 'UTF8') FROM zk_queue_peek('other')}),
	"$other_id secret", "other's item is still there, not held");
is($admin->query_ok(q{SELECT count(*) FROM zk_queue_items WHERE queue = 'other' AND NOT held}),
	'1', 'and zk_queue_items shows it free');

# ---------------------------------------------------------------------------
# ALTER ROLE ... SET applies at the next login.
$node->safe_psql('postgres', q{ALTER ROLE etl SET zklock.allowed_queues = ''});
is($s->query_ok(q{SELECT zk_queue_length('etl')}), '0',
	'the open session keeps its value');
my $r = $s->query(q{SET zklock.allowed_queues = '*'});
like($r->{err}, qr/42501: permission denied to set parameter "zklock.allowed_queues"/,
	'a non-superuser cannot SET it');
$s->quit;

my ($rc, $out, $err) = $node->psql('postgres', q{\set VERBOSITY verbose
	SELECT zk_queue_length('etl')}, extra_params => [ '-U', 'etl' ]);
like($err, qr/42501: not allowed to use zklock queue "etl"\nDETAIL:\s+zklock.allowed_queues is ""\./,
	'empty, at the next login: no queue at all');

# the views are not filtered: names and ids of every queue (doc/security.md)
($rc, $out, $err) = $node->psql('postgres', q{
	SELECT string_agg(queue || ' ' || id, ',') FROM zk_queue_items WHERE queue = 'other'},
	extra_params => [ '-U', 'etl' ]);
is($out, "other $other_id", 'a role allowed no queue still sees other in zk_queue_items');

$node->safe_psql('postgres', q{ALTER ROLE etl SET zklock.allowed_queues = '*'});
($rc, $out, $err) = $node->psql('postgres', q{
	SELECT zk_queue_length('other') || ' ' || zk_queue_length('etlx')},
	extra_params => [ '-U', 'etl' ]);
is($out, '1 0', '"*": every queue');

# bad items are refused when set, by ALTER ROLE too
($rc, $out, $err) = $node->psql('postgres', q{\set VERBOSITY verbose
	ALTER ROLE etl SET zklock.allowed_queues = 'etl, a/../b'});
like($err, qr/22023: invalid value for parameter "zklock.allowed_queues": "etl, a\/..\/b"\nDETAIL:\s+zklock.allowed_queues is "\*" or a comma-separated list of queue names/,
	'a/../b is refused when set');
is($node->safe_psql('postgres', q{SELECT setconfig::text FROM pg_db_role_setting
	WHERE setrole = 'etl'::regrole}), '{zklock.allowed_queues=*}',
	'and the stored value stays');

# ... nor widen it otherwise (review, class 8): RESET, RESET ALL, its own
# ALTER ROLE, PGOPTIONS at connection time
$node->safe_psql('postgres', q{ALTER ROLE etl SET zklock.allowed_queues = 'etl'});
($rc, $out, $err) = $node->psql('postgres', q{\set VERBOSITY verbose
	RESET ALL;
	SHOW zklock.allowed_queues;
	SELECT zk_queue_length('other');}, extra_params => [ '-U', 'etl' ]);
is($out, 'etl', 'RESET ALL keeps the role\'s value');
like($err, qr/42501: not allowed to use zklock queue "other"/, 'and other stays refused');
for my $sql (q{RESET zklock.allowed_queues}, q{ALTER ROLE etl SET zklock.allowed_queues = '*'},
	q{ALTER ROLE etl RESET zklock.allowed_queues})
{
	($rc, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql", extra_params => [ '-U', 'etl' ]);
	like($err, qr/ERROR:\s+42501: permission denied/, "the role cannot: $sql");
}
{
	local $ENV{PGOPTIONS} = '-c zklock.allowed_queues=*';
	($rc, $out, $err) = $node->psql('postgres', 'SHOW zklock.allowed_queues',
		extra_params => [ '-U', 'etl' ]);
}
isnt($rc, 0, 'nor at connection time (PGOPTIONS)');
like($err, qr/permission denied to set parameter "zklock.allowed_queues"/, 'permission denied');

# Whose setting (review, class 20): the login role's, as PostgreSQL
# applies ALTER ROLE ... SET: a member of etl logging in as itself keeps
# its own, and SET ROLE etl does not bring etl's (doc/security.md)
$node->safe_psql('postgres', q{CREATE ROLE member LOGIN IN ROLE etl});
($rc, $out, $err) = $node->psql('postgres', q{SHOW zklock.allowed_queues; SET ROLE etl;
	SHOW zklock.allowed_queues; SELECT zk_queue_length('other');}, extra_params => [ '-U', 'member' ]);
is($out, "*\n*\n1", 'a member of a confined role is not confined, also after SET ROLE');

# ---------------------------------------------------------------------------
# Names in other encodings (review): the queue is compared in UTF-8, as it
# becomes a node; the setting's items are read as UTF-8 too (shared
# catalog: one value for every database).  Set from a UTF8 database, a
# non-ASCII item allows that queue from a LATIN1 database; a LATIN1
# database refuses the item when set (its bytes are not UTF-8).
$node->safe_psql('postgres', q{
	CREATE DATABASE lat1 TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C';});
$node->safe_psql('lat1', q{CREATE EXTENSION zklock;
	GRANT EXECUTE ON FUNCTION zk_queue_put_now(text, text, integer), zk_queue_length(text) TO etl;});
$node->safe_psql('postgres', q{DO $$BEGIN
	EXECUTE format('ALTER ROLE etl SET zklock.allowed_queues = %L', 'etl, q' || chr(233));
	END$$;});
($rc, $out, $err) = $node->psql('lat1', q{\set VERBOSITY verbose
	SELECT zk_queue_put_now('q' || chr(233), 'x') IS NOT NULL;
	SELECT zk_queue_length('q' || chr(233) || '/x');
	SELECT zk_queue_length('qe');}, extra_params => [ '-U', 'etl' ]);
is($out, "t\n0", 'LATIN1 database: a non-ASCII item set from UTF8 allows its queue and those below');
like($err, qr/42501: not allowed to use zklock queue "qe"/, 'and nothing else');
ok((grep { $_ eq "q\xc3\xa9" } queue_nodes()), 'the queue node is named in UTF-8');
($rc, $out, $err) = $node->psql('lat1', q{\set VERBOSITY verbose
	SELECT set_config('zklock.allowed_queues', 'q' || chr(233), false)});
like($err, qr/22023: invalid value for parameter "zklock.allowed_queues".*\nDETAIL:.*valid UTF-8/,
	'LATIN1 database: a non-ASCII item is refused when set there (never compared as other bytes)');

# ---------------------------------------------------------------------------
# Who the check sees (review, class 20): the session's setting, also
# inside SECURITY DEFINER functions, whose owner's setting is not read.
# doc/security.md's wrappers, run as written, fail for a caller confined
# elsewhere; ALTER FUNCTION ... SET zklock.allowed_queues (a superuser's)
# makes them work for it.
$node->safe_psql('postgres', q{CREATE ROLE bob LOGIN});
my @wrappers = ($section // '') =~ /^  ```sql\n(.*?)^  ```\n/msg;
$node->safe_psql('postgres', $wrappers[2]);
$node->safe_psql('postgres', q{ALTER ROLE bob SET zklock.allowed_queues = 'bob'});
($rc, $out, $err) = $node->psql('postgres', q{\set VERBOSITY verbose
	SELECT put_jobs('b')}, extra_params => [ '-U', 'bob' ]);
like($err, qr/42501: not allowed to use zklock queue "jobs"\nDETAIL:\s+zklock.allowed_queues is "bob"\./,
	'a wrapper runs under its caller\'s setting, not its owner\'s');
$node->safe_psql('postgres', q{ALTER FUNCTION put_jobs(text) SET zklock.allowed_queues = 'jobs'});
($rc, $out, $err) = $node->psql('postgres', q{SELECT put_jobs('b') IS NOT NULL; SHOW zklock.allowed_queues},
	extra_params => [ '-U', 'bob' ]);
is($out, "t\nbob", 'with ALTER FUNCTION ... SET zklock.allowed_queues it works, and the caller keeps its own');
# and the other way round: a confined role's SECURITY DEFINER function,
# called by a session allowed more, reaches what that session allows
$node->safe_psql('postgres', q{CREATE SCHEMA etl_s AUTHORIZATION etl});
$node->safe_psql('postgres', q{SET ROLE etl;
	CREATE FUNCTION etl_s.count_other() RETURNS bigint LANGUAGE sql SECURITY DEFINER
	  SET search_path = public, pg_temp AS $$ SELECT zk_queue_length('other') $$;});
is($admin->query_ok(q{SELECT etl_s.count_other()}), '1',
	'a confined role\'s SECURITY DEFINER function called by a "*" session reaches other (doc/security.md says so)');
is($admin->query_ok(q{SELECT zk_queue_purge('jobs') + zk_queue_purge('q' || chr(233))}), '2', 'cleanup of jobs');

is($admin->query_ok(q{SELECT zk_queue_purge('other')}), '1', 'cleanup');
$admin->quit;
done_testing();
