
# Privileges whatever default privileges exist (issue 20, finding 3;
# REVIEW.md class 15: install and upgrade paths).
#
# With ALTER DEFAULT PRIVILEGES in place -- for functions, tables,
# sequences and types, to a role and to PUBLIC, globally and IN SCHEMA --
# before CREATE EXTENSION, or only before ALTER EXTENSION UPDATE, every
# path (a fresh install; 1.0, 1.1 and 1.2 updated step by step and at
# once; 1.3, 1.4, 1.6, 1.7 and 1.8 updated to the default), into a schema whose name has capitals, a space and a %:
#  - ends with the documented privileges: the superuser-only members
#    (zk_lock_admin_node, zk_lock_force_release, zk_lock_revoke) and those
#    not granted to PUBLIC (zk_lock_nodes, zk_lock_queue, zk_lock_local,
#    zk_lock_fence; 1.6: zk_lock_waits, zk_lock_stats_reset) executable by neither the default-privilege role nor
#    PUBLIC, zk_lock_fences and the views read-only for both; grants an
#    administrator made by hand on those not granted to PUBLIC (zk_lock_fence
#    to a writer, zk_lock_nodes and zk_lock_local to a monitor) kept; every
#    path started with the default privileges ends with exactly the objects,
#    definitions and grants of the fresh install;
#  - as the default-privilege role, every attack of the finding is refused
#    with 42501: force-releasing and revoking another user's lock taken in
#    another database (and calling zk_lock_admin_node), reading the unmasked
#    listing (zk_lock_nodes, zk_lock_queue, zk_lock_local), writing
#    zk_lock_fences (UPDATE, DELETE, TRUNCATE, INSERT, a trigger), and
#    fencing; the lock is still held afterwards, and a stale token 5 is
#    still refused after 1000;
#  - the same refusals for a role the administrative functions and writes
#    to zk_lock_fences were granted to by hand: they are superusers' (and
#    the table's owner's) whatever grants exist.
#  - (1.9) zk_queue_purge and zk_queue_item_nodes are among those not
#    granted to PUBLIC: app, whom default privileges would give them, can
#    neither empty a queue nor read who holds its items (42501).
#  - (1.9, review of issue 31, findings 4 and 5) so are the queue's own
#    functions: neither app nor plain (PUBLIC) can put into, take from,
#    peek at or count a queue (42501: before, every role could read and
#    consume every queue's items and fill ZooKeeper with 1 MB items); a
#    role granted the documented set by hand (doc/security.md) puts,
#    peeks, counts and takes, keeps its grants when the privileges are
#    settled again (as the next update does), and still may not purge.
#  - (1.7; 1.8's zk_lock_status_security too) a member of pg_monitor reads zk_lock_status (granted to
#    pg_read_all_stats, as zk_lock_waits) on every path.
# A schema name with a double quote is refused by PostgreSQL itself (it
# substitutes @extschema@ only into names without quotes, $ or \).
# And zk_lock_force_release naming a waiting node (or none) warns and
# removes nothing.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;

zk_start();
my $node = zk_node('node1');

my $default = psql1($node,
	q{SELECT default_version FROM pg_available_extensions WHERE name = 'zklock'});

$node->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;      -- what default privileges give things to
	CREATE ROLE plain LOGIN;    -- PUBLIC alone
	CREATE ROLE victim LOGIN;   -- holds a lock
	CREATE ROLE writer LOGIN;   -- granted zk_lock_fence by hand
	CREATE ROLE mon LOGIN;      -- granted the raw listings by hand
	CREATE ROLE ops LOGIN;      -- granted the admin functions by hand
	CREATE ROLE watcher LOGIN IN ROLE pg_monitor;   -- monitoring
	CREATE ROLE qw LOGIN;       -- granted the queue's functions by hand
	CREATE ROLE "Ap%p ""x";     -- a name to quote});

my $qs = '"We%ird s"';    # capitals, a space and a %

my $defaults = qq{
	ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO app WITH GRANT OPTION;
	ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO app;
	ALTER DEFAULT PRIVILEGES GRANT SELECT, UPDATE, DELETE ON TABLES TO PUBLIC;
	ALTER DEFAULT PRIVILEGES GRANT ALL ON SEQUENCES TO app, PUBLIC;
	ALTER DEFAULT PRIVILEGES GRANT ALL ON TYPES TO app;
	ALTER DEFAULT PRIVILEGES IN SCHEMA $qs GRANT EXECUTE ON FUNCTIONS TO PUBLIC, app;
	ALTER DEFAULT PRIVILEGES IN SCHEMA $qs GRANT ALL ON TABLES TO PUBLIC, app;
	ALTER DEFAULT PRIVILEGES IN SCHEMA $qs GRANT ALL ON SEQUENCES TO app;
	ALTER DEFAULT PRIVILEGES IN SCHEMA $qs GRANT ALL ON TYPES TO PUBLIC, app;
	ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO "Ap%p ""x";
	ALTER DEFAULT PRIVILEGES IN SCHEMA $qs GRANT ALL ON TABLES TO "Ap%p ""x";};

# grants an administrator makes by hand: the documented ones, and the
# superuser-only functions (which the update to 1.3 removes)
my $hand_grants = qq{
	GRANT EXECUTE ON FUNCTION $qs.zk_lock_fence(text, bigint) TO writer;
	GRANT EXECUTE ON FUNCTION $qs.zk_lock_nodes(text), $qs.zk_lock_local() TO mon;
	GRANT SELECT ON $qs.zk_lock_local TO mon;};
# the queue's functions, as doc/security.md tells an administrator to grant
# them (1.9: they exist only once the updates are done)
my $queue_grants = qq{
	GRANT EXECUTE ON FUNCTION
	  $qs.zk_queue_put(text, bytea, integer), $qs.zk_queue_put(text, text, integer),
	  $qs.zk_queue_put_now(text, bytea, integer), $qs.zk_queue_put_now(text, text, integer),
	  $qs.zk_queue_take(text, interval), $qs.zk_queue_try_take(text),
	  $qs.zk_queue_length(text), $qs.zk_queue_peek(text)
	TO qw;};
my $admin_grants = qq{
	GRANT EXECUTE ON FUNCTION $qs.zk_lock_force_release(text, text),
	  $qs.zk_lock_revoke(text, text),
	  $qs.zk_lock_admin_node(text, text, text, text) TO ops;};

# a victim's session lock, taken in another database (postgres)
my $victim = zk_session($node, 'victim', user => 'victim');
$victim->query_ok(q{SELECT zk_lock_acquire_session('priv/victim') > 0 AS /* secret query */ ok});
my $vnode = psql1($node,
	q{SELECT node FROM zk_locks WHERE resource = 'priv/victim' AND granted});
like($vnode, qr/LOCK-EXCLUSIVE-/, 'the victim holds its lock');

# $code of running $sql as $role in $db (search_path the schema)
sub sqlstate_as
{
	my ($db, $role, $sql) = @_;
	my ($rc, $out, $err) = $node->psql($db,
		"\\set VERBOSITY verbose\nSET search_path = $qs, public;\n$sql",
		extra_params => [ '-U', $role ]);
	my ($code) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
	return ($code // ($rc == 0 ? '00000' : "rc=$rc"), $out, $err);
}

# the members that must stay closed, and how
my @closed_functions = (
	'zk_lock_admin_node(text,text,text,text)', 'zk_lock_force_release(text,text)',
	'zk_lock_revoke(text,text)', 'zk_lock_nodes(text)', 'zk_lock_queue(text)',
	'zk_lock_local()', 'zk_lock_fence(text,bigint)',
	'zk_lock_settle_privileges()', 'zk_lock_waits()', 'zk_lock_stats_reset()',
	'zk_lock_status()', 'zk_lock_status_watches()', 'zk_lock_status_notifications()',
	'zk_lock_status_security()', 'zk_queue_purge(text)', 'zk_queue_item_nodes()',
	'zk_queue_put_now(text,bytea,integer)', 'zk_queue_put_now(text,text,integer)',
	'zk_queue_put(text,bytea,integer)', 'zk_queue_put(text,text,integer)',
	'zk_queue_try_take(text)', 'zk_queue_take(text,interval)',
	'zk_queue_length(text)', 'zk_queue_peek(text)');
my @closed_table = qw(INSERT UPDATE DELETE TRUNCATE REFERENCES TRIGGER);
my $closed_query = join("\nUNION ALL ",
	(map { my $f = $_; map { qq{SELECT '$_ $f', has_function_privilege('$_', '$qs.$f', 'EXECUTE')} } (qw(app plain), 'Ap%p "x') } @closed_functions),
	(map { my $p = $_; map { qq{SELECT '$_ zk_lock_fences $p', has_table_privilege('$_', '$qs.zk_lock_fences', '$p')} } (qw(app plain), 'Ap%p "x') } @closed_table),
	(map { my $v = $_; map { qq{SELECT '$_ $v view', has_table_privilege('$_', '$qs.$v', 'SELECT')} } (qw(app plain), 'Ap%p "x') } qw(zk_lock_local zk_lock_waits zk_lock_status)),
	(map { my $v = $_; map { qq{SELECT '$_ $v UPDATE', has_table_privilege('$_', '$qs.$v', 'UPDATE,DELETE,INSERT,TRUNCATE,TRIGGER,REFERENCES')} } qw(app plain) } qw(zk_locks zk_lock_status zk_elections zk_lock_stats)));
my $open_query = qq{
	SELECT has_function_privilege('writer', '$qs.zk_lock_fence(text,bigint)', 'EXECUTE'),
	       has_function_privilege('mon', '$qs.zk_lock_nodes(text)', 'EXECUTE'),
	       has_function_privilege('mon', '$qs.zk_lock_local()', 'EXECUTE'),
	       has_table_privilege('mon', '$qs.zk_lock_local', 'SELECT'),
	       has_table_privilege('plain', '$qs.zk_lock_fences', 'SELECT'),
	       has_function_privilege('plain', '$qs.zk_lock_acquire(text,text,interval,boolean)', 'EXECUTE'),
	       has_table_privilege('plain', '$qs.zk_locks', 'SELECT'),
	       has_table_privilege('plain', '$qs.zk_lock_stats', 'SELECT')};

# what a database's zklock objects are (006's form)
my $describe = q{
  SELECT string_agg(x, E'\n' ORDER BY x) FROM (
    SELECT format('function %s(%s) returns %s strict=%s definer=%s config=%s acl=%s body=%s',
                  p.proname, pg_get_function_identity_arguments(p.oid),
                  pg_get_function_result(p.oid), p.proisstrict, p.prosecdef,
                  p.proconfig, p.proacl, md5(p.prosrc)) AS x
    FROM pg_proc p JOIN pg_depend d
      ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
     AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
    UNION ALL
    SELECT format('relation %s kind=%s acl=%s def=%s', c.relname, c.relkind, c.relacl,
                  CASE WHEN c.relkind = 'v' THEN md5(pg_get_viewdef(c.oid)) END)
    FROM pg_class c JOIN pg_depend d
      ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
     AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
    UNION ALL
    SELECT format('trigger %s on %s', t.tgname, t.tgrelid::regclass::text)
    FROM pg_trigger t JOIN pg_depend d
      ON d.classid = 'pg_class'::regclass AND d.objid = t.tgrelid
     AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
  ) s};

# name, version installed (undef: the default), the updates (undef: to
# the default), when the default privileges are set
my @paths = (
	[ 'fresh',      undef, [],                     'create' ],
	[ 'v10_steps',  '1.0', [ '1.1', '1.2', undef ], 'create' ],
	[ 'v10_once',   '1.0', [undef],                'create' ],
	[ 'v11_steps',  '1.1', [ '1.2', undef ],       'create' ],
	[ 'v11_once',   '1.1', [undef],                'create' ],
	[ 'v12',        '1.2', [undef],                'create' ],
	[ 'v13',        '1.3', [undef],                'create' ],
	[ 'v14',        '1.4', [undef],                'create' ],
	[ 'v16',        '1.6', [undef],                'create' ],
	[ 'v17',        '1.7', [undef],                'create' ],
	[ 'v18',        '1.8', [undef],                'create' ],
	[ 'v10_late',   '1.0', [undef],                'update' ],
	[ 'v11_late',   '1.1', [ '1.2', undef ],       'update' ],
	[ 'v12_late',   '1.2', [undef],                'update' ],
	[ 'v13_late',   '1.3', [undef],                'update' ],
	[ 'v14_late',   '1.4', [undef],                'update' ],
	[ 'v16_late',   '1.6', [undef],                'update' ],
	[ 'v17_late',   '1.7', [undef],                'update' ],
	[ 'v18_late',   '1.8', [undef],                'update' ],
);

my $fresh_described;
foreach my $path (@paths)
{
	my ($name, $version, $updates, $when) = @$path;
	my $db = "p_$name";
	my $what = "$name (" . ($version // 'default') . ', default privileges before '
	  . ($when eq 'create' ? 'CREATE EXTENSION' : 'the update') . ')';
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE SCHEMA $qs; GRANT USAGE ON SCHEMA $qs TO PUBLIC;");
	$node->safe_psql($db, $defaults) if $when eq 'create';
	my ($rc, $out, $err) = $node->psql($db,
		"CREATE EXTENSION zklock SCHEMA $qs"
		  . (defined $version ? " VERSION '$version'" : ''));
	is($rc, 0, "$what: CREATE EXTENSION") or diag($err);
	$node->safe_psql($db, $hand_grants);
	$node->safe_psql($db, $admin_grants) if @$updates;
	$node->safe_psql($db, $defaults) if $when eq 'update';
	# before 1.3, default privileges let app put a trigger on zk_lock_fences
	if ($name eq 'v12')
	{
		my ($tc) = sqlstate_as($db, 'app',
			q{CREATE TRIGGER app_trg BEFORE UPDATE ON zk_lock_fences FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()});
		is($tc, '00000', "$what: before the update, app could put a trigger on zk_lock_fences");
	}
	my $all_err = $err;
	foreach my $to (@$updates)
	{
		($rc, $out, $err) = $node->psql($db,
			'ALTER EXTENSION zklock UPDATE' . (defined $to ? " TO '$to'" : ''));
		is($rc, 0, "$what: ALTER EXTENSION zklock UPDATE TO " . ($to // 'the default'))
		  or diag($err);
		$all_err .= $err;
	}
	is(psql1_db($db, q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
		$default, "$what: at $default");
	like($all_err, qr/WARNING:  zklock: removed \d+ privileges/,
		"$what: a WARNING says which privileges were removed")
	  if $name eq 'fresh' || $name eq 'v12';
	if ($name eq 'v12')
	{
		like($all_err, qr/WARNING:  zklock: trigger app_trg on "We%ird s".zk_lock_fences is not zklock's/,
			"$what: the update names the trigger that is not zklock's");
		is(psql1_db($db, q{SELECT tgenabled FROM pg_trigger WHERE tgname = 'app_trg'}), 'D',
			"$what: and disables it (it would run as zk_lock_fence's owner)");
		$node->safe_psql($db, "DROP TRIGGER app_trg ON $qs.zk_lock_fences");
	}

	# the documented privileges
	my $closed = psql1_db($db,
		"SELECT string_agg(x || ' ' || y, ', ') FROM ($closed_query) s(x, y) WHERE y");
	is($closed, '', "$what: nothing closed is open to the default-privilege role or PUBLIC");
	is(psql1_db($db, $open_query), 't|t|t|t|t|t|t|t',
		"$what: the grants made by hand, and PUBLIC's, are kept");
	is(psql1_db($db, qq{SELECT count(*) FROM aclexplode((SELECT proacl FROM pg_proc
	                    WHERE oid = '$qs.zk_lock_force_release(text,text)'::regprocedure))
	                    WHERE grantee = 'ops'::regrole}),
		'0', "$what: the superuser-only functions granted by hand are no longer granted")
	  if @$updates;
	if ($when eq 'create')
	{
		my $described = psql1_db($db, $describe);
		if ($name eq 'fresh')
		{
			$fresh_described = $described;
		}
		else
		{
			is($described, $fresh_described,
				"$what: the same objects, definitions and grants as the fresh install");
		}
	}

	# the attacks, as the default-privilege role, and as a role granted the
	# admin functions and writes to zk_lock_fences by hand
	$node->safe_psql($db, $queue_grants);
	my ($qc, $qo, $qe) = sqlstate_as($db, 'qw', "SELECT zk_queue_put_now('priv/q', 'secret')");
	is($qc, '00000', "$what: qw, granted the queue's functions, puts") or diag($qe);
	my ($src, $sout, $serr) = $node->psql($db, "SELECT $qs.zk_lock_settle_privileges()");
	is("$src $sout", '0 0', "$what: settling the privileges again removes none of qw's grants")
	  or diag($serr);
	$node->safe_psql($db, $admin_grants);
	($qc, $qo, $qe) = sqlstate_as($db, 'qw', q{
		SELECT zk_queue_put('priv/q', 'later'::text) IS NOT NULL;
		SELECT zk_queue_length('priv/q');
		SELECT convert_from(item, 'UTF8') FROM zk_queue_peek('priv/q');
		SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('priv/q');
		SELECT convert_from(item, 'UTF8') FROM zk_queue_take('priv/q', '10 s');
		SELECT zk_queue_length('priv/q');});
	is("$qc $qo", "00000 t\n2\nsecret\nsecret\nlater\n0",
		"$what: and, the grants kept, puts, counts, peeks and takes") or diag($qe);
	$node->safe_psql($db, "GRANT INSERT, UPDATE, DELETE, TRUNCATE ON $qs.zk_lock_fences TO ops");
	$node->safe_psql($db, "SELECT $qs.zk_lock_fence('priv/fence', 1000)");
	my ($code) = sqlstate_as($db, 'app',
		q{SELECT count(*) FROM zk_locks WHERE resource = 'priv/victim' AND pid IS NULL});
	is($code, '00000', "$what: app reads zk_locks (masked)");
	my ($sc, $so, $se) = sqlstate_as($db, 'watcher', q{SELECT state FROM zk_lock_status});
	is($sc, '00000', "$what: a member of pg_monitor reads zk_lock_status") or diag($se);
	($sc, $so, $se) = sqlstate_as($db, 'watcher',
		q{SELECT s.state, zk_lock_status_watches() >= 0, zk_lock_status_notifications() >= 0, t.transport FROM zk_lock_status() s, zk_lock_status_security() t});
	is($sc, '00000', "$what: and the functions behind it") or diag($se);
	foreach my $attack (
		[ 'app', q{SELECT zk_lock_force_release('priv/victim')} ],
		[ 'app', qq{SELECT zk_lock_force_release('priv/victim', '$vnode')} ],
		[ 'app', qq{SELECT zk_lock_admin_node('priv/victim', '$vnode', 'delete', NULL)} ],
		[ 'app', q{SELECT zk_lock_revoke('priv/victim', 'terminate')} ],
		[ 'app', q{SELECT pid, username, query FROM zk_lock_nodes('priv')} ],
		[ 'app', q{SELECT pid, username, query FROM zk_lock_queue('priv')} ],
		[ 'app', q{SELECT * FROM zk_lock_local} ],
		[ 'app', q{SELECT * FROM zk_lock_local()} ],
		[ 'app', q{UPDATE zk_lock_fences SET token = 5 WHERE resource = 'priv/fence'} ],
		[ 'app', q{DELETE FROM zk_lock_fences WHERE resource = 'priv/fence'} ],
		[ 'app', q{TRUNCATE zk_lock_fences} ],
		[ 'app', q{INSERT INTO zk_lock_fences VALUES ('priv/new', 1)} ],
		[ 'app', q{CREATE TRIGGER mine BEFORE UPDATE ON zk_lock_fences FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()} ],
		[ 'app', q{SELECT zk_lock_fence('priv/fence', 9223372036854775807)} ],
		[ 'app', q{SELECT zk_lock_settle_privileges()} ],
		[ 'app', q{SELECT zk_lock_stats_reset()} ],
		[ 'app', q{SELECT * FROM zk_lock_waits} ],
		[ 'app', q{SELECT * FROM zk_lock_waits()} ],
		[ 'app', q{SELECT zk_queue_purge('priv/q')} ],
		[ 'app', q{SELECT * FROM zk_queue_item_nodes()} ],
		(map { my $r = $_; map { [ $r, $_ ] } (
			q{SELECT zk_queue_put_now('priv/q', 'junk')},
			q{SELECT zk_queue_put_now('priv/q', '\\x00'::bytea, 1)},
			q{SELECT zk_queue_put('priv/q', 'junk'::text)},
			q{SELECT zk_queue_put('priv/q', '\\x00'::bytea)},
			q{SELECT * FROM zk_queue_try_take('priv/q')},
			q{SELECT * FROM zk_queue_take('priv/q', '1 s')},
			q{SELECT convert_from(item, 'UTF8') FROM zk_queue_peek('priv/q')},
			q{SELECT zk_queue_length('priv/q')}) } qw(app plain)),
		[ 'plain', q{SELECT zk_queue_purge('priv/q')} ],
		[ 'qw', q{SELECT zk_queue_purge('priv/q')} ],
		[ 'plain', q{SELECT zk_lock_stats_reset()} ],
		[ 'plain', q{SELECT hosts, last_error FROM zk_lock_status} ],
		[ 'plain', q{SELECT hosts, last_error FROM zk_lock_status()} ],
		[ 'plain', q{SELECT zk_lock_status_watches()} ],
		[ 'plain', q{SELECT zk_lock_status_notifications()} ],
		[ 'plain', q{SELECT identity FROM zk_lock_status_security()} ],
		[ 'app', q{SELECT hosts, last_error FROM zk_lock_status} ],
		[ 'app', q{SELECT hosts, last_error FROM zk_lock_status()} ],
		[ 'plain', q{SELECT zk_lock_force_release('priv/victim')} ],
		[ 'plain', q{UPDATE zk_lock_fences SET token = 5 WHERE resource = 'priv/fence'} ],
		[ 'ops', q{SELECT zk_lock_force_release('priv/victim')} ],
		[ 'ops', q{SELECT zk_lock_revoke('priv/victim', 'terminate')} ],
		[ 'ops', qq{SELECT zk_lock_admin_node('priv/victim', '$vnode', 'delete', NULL)} ],
		[ 'ops', q{UPDATE zk_lock_fences SET token = 5 WHERE resource = 'priv/fence'} ],
		[ 'ops', q{DELETE FROM zk_lock_fences WHERE resource = 'priv/fence'} ],
		[ 'ops', q{TRUNCATE zk_lock_fences} ])
	{
		my ($role, $sql) = @$attack;
		my ($c, $o, $e) = sqlstate_as($db, $role, $sql);
		is($c, '42501', "$what: $role is refused: $sql") or diag("$o $e");
	}
	my ($fc, $fo, $fe) = sqlstate_as($db, 'writer', q{SELECT zk_lock_fence('priv/fence', 5)});
	is($fc, '55P03', "$what: the stale token 5 is refused after 1000");
	is(psql1_db($db, "SELECT token FROM $qs.zk_lock_fences WHERE resource = 'priv/fence'"),
		'1000', "$what: the recorded token is still 1000");
	is(zk_count_locks(zk_path('priv/victim')), 1, "$what: the victim's lock node is still there");
	ok($victim->alive, "$what: the victim's session is alive");
	$node->safe_psql($db, "DELETE FROM $qs.zk_lock_fences");
}

is($victim->query_ok(q{SELECT zk_lock_release('priv/victim')}), 't',
	'the victim still held its lock, and releases it');

# a schema name with a double quote: PostgreSQL refuses it for @extschema@
$node->safe_psql('postgres', 'CREATE DATABASE p_quote');
$node->safe_psql('p_quote', 'CREATE SCHEMA "we%ird ""s"');
foreach my $v ('', " VERSION '1.0'")
{
	my ($rc, $out, $err) = $node->psql('p_quote',
		qq{\\set VERBOSITY verbose\nCREATE EXTENSION zklock SCHEMA "we%ird ""s"$v});
	like($err, qr/ERROR:  22P02: invalid character in extension "zklock" schema/,
		"a schema name with a double quote: PostgreSQL refuses it$v");
}
is($node->safe_psql('p_quote', q{SELECT count(*) FROM pg_extension WHERE extname = 'zklock'}),
	'0', 'and nothing is installed');

# zk_lock_force_release naming a waiting node, or one that is not there:
# a WARNING, nothing removed
my $holder = zk_session($node, 'holder', user => 'victim');
$holder->query_ok(q{SELECT zk_lock_acquire_session('priv/w') > 0});
my $waiter = zk_session($node, 'waiter', user => 'plain');
$waiter->send(q{SELECT zk_lock_acquire_session('priv/w') > 0});
ok(wait_for_waiting($node, $waiter->pid), 'a waiter waits behind the holder');
my $wnode = psql1($node,
	q{SELECT node FROM zk_locks WHERE resource = 'priv/w' AND NOT granted});
my ($rc, $out, $err) = $node->psql('postgres',
	qq{SELECT zk_lock_force_release('priv/w', '$wnode')});
is($out, '0', 'force release of a waiting node: 0');
like($err, qr/WARNING:  zklock lock node "\Q$wnode\E" on resource "priv\/w" is waiting, not holding: it was not removed/,
	'and a WARNING names it as waiting');
ok(is_waiting($node, $waiter->pid), 'the waiter still waits');
($rc, $out, $err) = $node->psql('postgres',
	q{SELECT zk_lock_force_release('priv/w', 'LOCK-EXCLUSIVE-0000099999')});
is($out, '0', 'force release of a node that is not there: 0');
like($err, qr/WARNING:  there is no zklock lock node "LOCK-EXCLUSIVE-0000099999" on resource "priv\/w"/,
	'and a WARNING says so');
is(zk_count_locks(zk_path('priv/w')), 2, 'both nodes are still there');
$holder->query_ok(q{SELECT zk_lock_release('priv/w')});
my $r = $waiter->wait(20);
is($r && $r->{out}, 't', 'the waiter is granted once the holder releases');
$waiter->query_ok(q{SELECT zk_lock_release('priv/w')});
$_->quit for ($victim, $holder, $waiter);

$node->stop;
zk_done_check();
done_testing();

sub psql1_db
{
	my ($db, $sql) = @_;
	return $node->safe_psql($db, $sql, timeout => 60);
}
