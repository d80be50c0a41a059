
# Extension versions: zklock 1.0 is installed in the field.
#  - the new library serves a database still at 1.0 (a rolling upgrade
#    replaces the library first): status, locks and listings work;
#  - ALTER EXTENSION zklock UPDATE brings it to the default version;
#  - the updated database has exactly the objects, definitions and grants
#    of a fresh CREATE EXTENSION.
#  - the same for a database at 1.1; and zk_locks says the same of one
#    queue of SHARED and EXCLUSIVE holders and waiters at 1.1 (Hive's rule
#    in SQL) as at 1.2 (the C grant rule, through zk_lock_queue's granted
#    and blocked_by); zk_lock_revoke's node data from the codec
#    (zk_lock_revocation_data) is 1.1's format() after "v=2".
#  - the same for a database at 1.2: its zk_lock_status (18 columns) under
#    the new library, and the watches column (1.3) after the update.
#  - the same for a database at 1.3 (19 columns), and after its update
#    (to 1.4, compared with the fresh install script zklock--1.4.sql) a
#    semaphore, an advisory key, zk_locks.max_holders and
#    zk_lock_status.notifications.
#  - the same for a database at 1.4 (1.5.0 shipped no SQL): the 1.6 library
#    under 1.4's objects (zk_lock_local's 7 columns, no zk_lock_stats), and
#    after its update to 1.6 (compared with zklock--1.6.sql) zk_lock_stats
#    counts the locks taken while the database was still at 1.4 (the
#    counts are the instance's, in shared memory), zk_lock_waits is there
#    and zk_lock_stats_reset is not granted to PUBLIC.
#  - the same for a database at 1.6 (1.6.1 shipped no SQL): the 1.7 library
#    under 1.6's objects, where zk_lock_status is its owner's alone; after
#    the update to 1.7 (compared with zklock--1.7.sql) pg_read_all_stats
#    reads zk_lock_status and calls the functions behind it, PUBLIC does
#    neither (before, it called them), and zk_lock_revoke and
#    zk_lock_force_release are 1.7's (they list holders unmasked).
#  - the same for a database at 1.7: the 1.8 library under 1.7's objects
#    (zk_lock_status without transport and identity) takes a lock; after
#    the update to 1.8 (compared with zklock--1.8.sql) zk_lock_status ends
#    with transport ('tcp' here), identity ('' here: no credentials) and
#    tls_expires (NULL), readable by pg_read_all_stats and not by PUBLIC.
#  - the same for a database at 1.8: the 1.9 library under 1.8's objects
#    (no queue functions) takes a lock; after the update to 1.9 (compared
#    with zklock--1.9.sql) an item is put and taken, zk_queues and
#    zk_queue_items are PUBLIC's, zk_queue_purge and zk_queue_item_nodes
#    are not, nor (review of issue 31) are the functions that put, take,
#    peek and count: a role without a grant is refused (42501), a role
#    granted them as doc/security.md says puts and takes.
#  (test/t/ops/044 does every path again with default privileges in place and
#  a schema named We%ird s.)
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;

zk_start();
my $node = zk_node('node1');

$node->safe_psql('postgres', 'CREATE DATABASE old');
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('postgres', 'CREATE DATABASE v11');
$node->safe_psql('postgres', 'CREATE DATABASE v12');
$node->safe_psql('postgres', 'CREATE DATABASE v13');
$node->safe_psql('postgres', 'CREATE DATABASE v14');
$node->safe_psql('postgres', 'CREATE DATABASE v16');
$node->safe_psql('postgres', 'CREATE DATABASE v17');
$node->safe_psql('postgres', 'CREATE DATABASE v18');
$node->safe_psql('v11', q{CREATE EXTENSION zklock VERSION '1.1'});
$node->safe_psql('v12', q{CREATE EXTENSION zklock VERSION '1.2'});
$node->safe_psql('v13', q{CREATE EXTENSION zklock VERSION '1.3'});
$node->safe_psql('v14', q{CREATE EXTENSION zklock VERSION '1.4'});
$node->safe_psql('v16', q{CREATE EXTENSION zklock VERSION '1.6'});
$node->safe_psql('v17', q{CREATE EXTENSION zklock VERSION '1.7'});
$node->safe_psql('v18', q{CREATE EXTENSION zklock VERSION '1.8'});
$node->safe_psql('old', q{CREATE EXTENSION zklock VERSION '1.0'});
$node->safe_psql('fresh', 'CREATE EXTENSION zklock');

my $default = $node->safe_psql('postgres',
	q{SELECT default_version FROM pg_available_extensions WHERE name = 'zklock'});
isnt($default, '1.0', "the default version is newer than 1.0 ($default)");

# the new library under the 1.0 objects
is($node->safe_psql('old', 'SELECT state FROM zk_lock_status'), 'connected',
	'1.0 objects: zk_lock_status works with the new library');
is($node->safe_psql('old',
		q{BEGIN; SELECT zk_lock_acquire('upgrade/a') > 0; COMMIT;}),
	't', '1.0 objects: a lock is taken and released');
is($node->safe_psql('old',
		q{SELECT count(*) FROM (SELECT zk_lock_acquire_session('upgrade/b') AS t) s, zk_locks l WHERE l.resource = 'upgrade/b'}),
	'1', '1.0 objects: zk_locks lists a lock');

# the new library under the 1.2 objects: zk_lock_status has 1.2's columns
is($node->safe_psql('v12',
		q{SELECT state, lease_margin > 0, (SELECT count(*) FROM pg_attribute
		   WHERE attrelid = 'zk_lock_status'::regclass AND attnum > 0) FROM zk_lock_status}),
	'connected|t|18', '1.2 objects: zk_lock_status works with the new library');

# the new library under the 1.3 objects: locks, zk_locks and zk_lock_status
# (1.3's 19 columns) work; 1.4's functions are not there until the update
is($node->safe_psql('v13',
		q{SELECT state, watches >= 0, (SELECT count(*) FROM pg_attribute
		   WHERE attrelid = 'zk_lock_status'::regclass AND attnum > 0) FROM zk_lock_status}),
	'connected|t|19', '1.3 objects: zk_lock_status works with the new library');
is($node->safe_psql('v13',
		q{SELECT count(*) FROM (SELECT zk_lock_acquire_session('upgrade/v13') AS t) s, zk_locks l
		  WHERE l.resource = 'upgrade/v13' AND l.mode = 'exclusive'}),
	'1', '1.3 objects: a lock is taken and zk_locks lists it');
$node->safe_psql('v13', q{SELECT zk_lock_release_all()});
is($node->safe_psql('v13',
		q{SELECT count(*) FROM pg_proc WHERE proname IN ('zk_semaphore_acquire', 'zk_advisory_lock', 'zk_is_leader')}),
	'0', '1.3 objects: no semaphore, advisory or leadership function before the update');

# the new library under the 1.4 objects: zk_lock_local keeps 1.4's columns,
# locks work, and 1.6's statistics and waits are not there until the update
is($node->safe_psql('v14',
		q{SELECT zk_lock_acquire_session('upgrade/v14') > 0,
		         (SELECT count(*) FROM zk_lock_local WHERE resource = 'upgrade/v14'),
		         (SELECT count(*) FROM pg_attribute
		          WHERE attrelid = 'zk_lock_local'::regclass AND attnum > 0),
		         zk_lock_release('upgrade/v14')}),
	't|1|7|t', '1.4 objects: a lock is taken and zk_lock_local (7 columns) lists it');
is($node->safe_psql('v14',
		q{SELECT count(*) FROM pg_proc WHERE proname IN ('zk_lock_stats', 'zk_lock_stats_reset', 'zk_lock_waits')}),
	'0', '1.4 objects: no statistics or waits function before the update');

# the new library under the 1.6 objects: locks and zk_lock_stats work;
# zk_lock_status is not granted to pg_read_all_stats until the update
is($node->safe_psql('v16',
		q{SELECT zk_lock_acquire_session('upgrade/v16') > 0,
		         (SELECT acquisitions >= 1 FROM zk_lock_stats
		          WHERE resource = 'upgrade/v16' AND mode = 'exclusive'),
		         zk_lock_release('upgrade/v16'),
		         has_table_privilege('pg_read_all_stats', 'zk_lock_status', 'SELECT')}),
	't|t|t|f', '1.6 objects: a lock is taken and counted; zk_lock_status not granted to pg_read_all_stats');

# the new library under the 1.1 objects, beside a 1.2 database: one queue,
# holders SHARED, SHARED, then waiters EXCLUSIVE, SHARED, EXCLUSIVE
my @q;
for my $m (qw(shared shared exclusive shared exclusive))
{
	my $s = zk_session($node, "q$m" . scalar(@q), dbname => 'fresh');
	$s->send(qq{BEGIN; SELECT zk_lock_acquire('upgrade/q', '$m') > 0;});
	if (@q < 2)
	{
		my $r = $s->wait(20);
		ok($r && $r->{out} eq 't', "queue: holder $m granted");
	}
	else
	{
		# waiting, in its final place: a request with a parent first asks
		# for both as try-locks and queues again when the try fails, so the
		# next session may start only once this one's waiting node is the
		# same in two looks 0.3 s apart (a loaded machine can be slow
		# between the try's answer and the queued create)
		my $pid = $s->pid;
		my $mine = qq{SELECT node FROM zk_locks WHERE resource = 'upgrade/q'
		                AND pid = $pid AND NOT granted};
		my $last = '';
		ok( wait_for_waiting($node, $pid)
			  && wait_until(
				sub {
					my $n = $node->safe_psql('fresh', $mine);
					my $same = $n ne '' && $n eq $last;
					$last = $n;
					return $same;
				},
				timeout => 20,
				interval => 0.3),
			"queue: $m waits");
	}
	push @q, $s;
}
my $show = q{SELECT mode, granted, node, blocked_by, blocked_by_pid,
                    blocked_by_instance, pid, scope, implicit, since IS NOT NULL
             FROM zk_locks WHERE resource = 'upgrade/q'};
my $at11 = $node->safe_psql('v11', $show);
my $at12 = $node->safe_psql('fresh', $show);
is($at12, $at11, 'zk_locks: the C grant rule (1.2) says what the SQL rule (1.1) says');
my @rows = map { [ split /\|/ ] } split /\n/, $at12;
is(join(',', map { $_->[1] } @rows), 't,t,f,f,f',
	'zk_locks: the two SHARED holders granted, every waiter not');
is(join(',', map { $_->[3] // '' } @rows),
	join(',', '', '', $rows[1][2], $rows[2][2], $rows[3][2]),
	'zk_locks: each waiter blocked by the nearest lower node it conflicts with');
is(join(',', map { $_->[4] // '' } @rows),
	join(',', '', '', $q[1]->pid, $q[2]->pid, $q[3]->pid),
	'zk_locks: blocked_by_pid names the blocking backend');
is($node->safe_psql('fresh',
		q{SELECT string_agg(format('%s %s', granted, coalesce(blocked_by, '-')), ',' ORDER BY seq)
		  FROM zk_lock_queue('upgrade/q') WHERE resource = 'upgrade/q'}),
	join(',', 't -', 't -', "f $rows[1][2]", "f $rows[2][2]", "f $rows[3][2]"),
	'zk_lock_queue (1.2): granted and blocked_by columns');
# in queue order: each waiter is granted once those before it are gone
for my $s (@q)
{
	$s->wait(20) if defined $s->{pending};
	$s->query('ROLLBACK');
	$s->quit;
}
ok(zk_wait_no_locks(zk_path('upgrade/q'), 20), 'queue: all released');

# zk_lock_revoke's data: 1.1's format() after "v=2", NULLs empty as before
is($node->safe_psql('fresh', q{
	SELECT zk_lock_revocation_data(i, p, d, u, a, s, im, 'cancel', 'admin', q)
	     = E'v=2\n' || format(E'instance=%s\npid=%s\ndatabase=%s\nuser=%s\napplication=%s\nscope=%s\nimplicit=%s\nrevoke=%s\nrevoked_by=%s\nquery=%s',
	                        i, p, d, u, a, s, im, 'cancel', 'admin', q)
	FROM (VALUES ('n1', 42, 'db', 'alice', 'psql', 'session', false, 'SELECT 1'),
	             ('n2', NULL, NULL, 'bob', '', 'transaction', true, NULL),
	             (NULL, 7, 'd', NULL, NULL, NULL, NULL, repeat('é', 200))) v(i, p, d, u, a, s, im, q)}),
	"t\nt\nt", 'zk_lock_revocation_data: format() of 1.1, after v=2');

$node->safe_psql('v11', 'ALTER EXTENSION zklock UPDATE');
is($node->safe_psql('v11', q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
	$default, "1.1: ALTER EXTENSION zklock UPDATE reaches $default");

$node->safe_psql('v12', 'ALTER EXTENSION zklock UPDATE');
is($node->safe_psql('v12', q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
	$default, "1.2: ALTER EXTENSION zklock UPDATE reaches $default");

$node->safe_psql('v13', 'ALTER EXTENSION zklock UPDATE');
is($node->safe_psql('v13', q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
	$default, "1.3: ALTER EXTENSION zklock UPDATE reaches $default");

$node->safe_psql('v14', 'ALTER EXTENSION zklock UPDATE');
is($node->safe_psql('v14', q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
	$default, "1.4: ALTER EXTENSION zklock UPDATE reaches $default");

$node->safe_psql('v16', 'ALTER EXTENSION zklock UPDATE');
is($node->safe_psql('v16', q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
	$default, "1.6: ALTER EXTENSION zklock UPDATE reaches $default");

# the new library under the 1.7 objects: a lock, and no transport yet
is($node->safe_psql('v17',
		q{SELECT zk_lock_acquire_session('upgrade/v17') > 0,
		         zk_lock_release('upgrade/v17'),
		         (SELECT count(*) FROM pg_attribute
		          WHERE attrelid = 'zk_lock_status'::regclass
		            AND attname IN ('transport', 'identity', 'tls_expires'))}),
	't|t|0', '1.7 objects: a lock is taken; zk_lock_status has no transport or identity');

$node->safe_psql('v17', 'ALTER EXTENSION zklock UPDATE');
is($node->safe_psql('v17', q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
	$default, "1.7: ALTER EXTENSION zklock UPDATE reaches $default");

# the new library under the 1.8 objects: a lock, and no queue yet
is($node->safe_psql('v18',
		q{SELECT zk_lock_acquire_session('upgrade/v18') > 0,
		         zk_lock_release('upgrade/v18'),
		         (SELECT count(*) FROM pg_proc WHERE proname LIKE 'zk\_queue%')}),
	't|t|0', '1.8 objects: a lock is taken; no queue functions');

$node->safe_psql('v18', 'ALTER EXTENSION zklock UPDATE');
is($node->safe_psql('v18', q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
	$default, "1.8: ALTER EXTENSION zklock UPDATE reaches $default");

$node->safe_psql('old', 'ALTER EXTENSION zklock UPDATE');
is($node->safe_psql('old', q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
	$default, "ALTER EXTENSION zklock UPDATE reaches $default");

# what a database's zklock objects are, in a comparable form
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
    SELECT format('trigger %s on %s def=%s', t.tgname, t.tgrelid::regclass::text,
                  pg_get_triggerdef(t.oid))
    FROM pg_trigger t JOIN pg_depend d
      ON d.classid = 'pg_class'::regclass AND d.objid = t.tgrelid
     AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
  ) s};
my $old = $node->safe_psql('old', $describe);
my $fresh = $node->safe_psql('fresh', $describe);
is($old, $fresh, 'the updated database has the same objects as a fresh install');
is($node->safe_psql('v11', $describe), $fresh,
	'the database updated from 1.1 has the same objects as a fresh install');
is($node->safe_psql('v12', $describe), $fresh,
	'the database updated from 1.2 has the same objects as a fresh install');
is($node->safe_psql('v13', $describe), $fresh,
	'the database updated from 1.3 has the same objects as a fresh install');
is($node->safe_psql('v14', $describe), $fresh,
	'the database updated from 1.4 has the same objects as a fresh install');
is($node->safe_psql('v16', $describe), $fresh,
	'the database updated from 1.6 has the same objects as a fresh install');
is($node->safe_psql('v17', $describe), $fresh,
	'the database updated from 1.7 has the same objects as a fresh install');
is($node->safe_psql('v18', $describe), $fresh,
	'the database updated from 1.8 has the same objects as a fresh install (zklock--1.9.sql)');
is($node->safe_psql('v18',
		q{SELECT zk_queue_put_now('upgrade/q18', 'x') IS NOT NULL,
		         (SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('upgrade/q18')),
		         has_table_privilege('public', 'zk_queues', 'SELECT'),
		         has_table_privilege('public', 'zk_queue_items', 'SELECT'),
		         has_function_privilege('public', 'zk_queue_purge(text)', 'EXECUTE'),
		         has_function_privilege('public', 'zk_queue_item_nodes()', 'EXECUTE')}),
	't|x|t|t|f|f',
	'updated from 1.8: an item is put and taken; zk_queues and zk_queue_items are PUBLIC\'s, zk_queue_purge and zk_queue_item_nodes are not');
is($node->safe_psql('v18',
		q{SELECT string_agg(p.oid::regprocedure::text, ',' ORDER BY p.proname)
		  FROM pg_proc p WHERE p.proname LIKE 'zk\_queue\_%'
		   AND has_function_privilege('public', p.oid, 'EXECUTE')}),
	'zk_queue_items(),zk_queue_stats()',
	'updated from 1.8: of the queue functions PUBLIC executes only those behind the views');
$node->safe_psql('postgres', 'CREATE ROLE qapp LOGIN; CREATE ROLE qnone LOGIN');
foreach my $sql (q{SELECT zk_queue_put_now('upgrade/q18', 'x')},
	q{SELECT zk_queue_length('upgrade/q18')},
	q{SELECT * FROM zk_queue_peek('upgrade/q18')},
	q{SELECT * FROM zk_queue_try_take('upgrade/q18')})
{
	my ($rc, $out, $err) = $node->psql('v18', "\\set VERBOSITY verbose\n$sql",
		extra_params => [ '-U', 'qnone' ]);
	like($err, qr/ERROR:  42501: permission denied for function/,
		"updated from 1.8: a role without a grant is refused: $sql");
}
$node->safe_psql('v18', q{
	GRANT EXECUTE ON FUNCTION
	  zk_queue_put(text, bytea, integer), zk_queue_put(text, text, integer),
	  zk_queue_put_now(text, bytea, integer), zk_queue_put_now(text, text, integer),
	  zk_queue_take(text, interval), zk_queue_try_take(text),
	  zk_queue_length(text), zk_queue_peek(text)
	TO qapp;});
is($node->safe_psql('v18',
		q{SELECT zk_queue_put('upgrade/q18', 'y'::text) IS NOT NULL;
		  SELECT convert_from(item, 'UTF8') FROM zk_queue_take('upgrade/q18', '10 s');
		  SELECT zk_queue_length('upgrade/q18')},
		extra_params => [ '-U', 'qapp' ]),
	"t\ny\n0", 'updated from 1.8: a role granted the queue functions puts and takes');
is($node->safe_psql('v17',
		q{SELECT transport, identity, tls_expires IS NULL,
		         (SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute
		          WHERE attrelid = 'zk_lock_status'::regclass AND attnum > 18),
		         has_table_privilege('pg_read_all_stats', 'zk_lock_status', 'SELECT'),
		         has_function_privilege('pg_read_all_stats', 'zk_lock_status_security()', 'EXECUTE'),
		         has_function_privilege('public', 'zk_lock_status_security()', 'EXECUTE')
		  FROM zk_lock_status}),
	'tcp||t|watches,notifications,transport,identity,tls_expires|t|t|f',
	'updated from 1.7: zk_lock_status ends with transport, identity and tls_expires (tcp, none, NULL); zk_lock_status_security granted to pg_read_all_stats, not PUBLIC');
is($node->safe_psql('v16',
		q{SELECT has_table_privilege('pg_read_all_stats', 'zk_lock_status', 'SELECT'),
		         has_table_privilege('public', 'zk_lock_status', 'SELECT'),
		         (SELECT string_agg(has_function_privilege('pg_read_all_stats', f, 'EXECUTE')::text
		                            || '/' || has_function_privilege('public', f, 'EXECUTE')::text, ',')
		          FROM unnest(ARRAY['zk_lock_status()', 'zk_lock_status_watches()',
		                            'zk_lock_status_notifications()']) f),
		         has_function_privilege('public', 'zk_lock_revoke(text,text)', 'EXECUTE'),
		         has_function_privilege('public', 'zk_lock_force_release(text,text)', 'EXECUTE'),
		         (SELECT count(*) FROM pg_proc
		          WHERE proname IN ('zk_lock_revoke', 'zk_lock_force_release')
		            AND prosrc LIKE '%zk_lock_queue(%' AND prosrc NOT LIKE '%zk_locks(%')}),
	't|f|true/false,true/false,true/false|f|f|2',
	'updated from 1.6: zk_lock_status and its functions granted to pg_read_all_stats, not PUBLIC; zk_lock_revoke and zk_lock_force_release list holders unmasked, still not PUBLIC');
is($node->safe_psql('v14',
		q{SELECT acquisitions >= 1, granted_at_once >= 1, total_held_time >= 0,
		         (SELECT count(*) FROM zk_lock_waits),
		         has_function_privilege('public', 'zk_lock_stats_reset()', 'EXECUTE'),
		         has_table_privilege('public', 'zk_lock_stats', 'SELECT'),
		         has_table_privilege('public', 'zk_lock_waits', 'SELECT')
		  FROM zk_lock_stats WHERE resource = 'upgrade/v14' AND mode = 'exclusive'}),
	't|t|t|0|f|t|f',
	'updated from 1.4: zk_lock_stats counts the lock taken at 1.4; zk_lock_waits; zk_lock_stats_reset and zk_lock_waits not granted to PUBLIC');
is($node->safe_psql('v13',
		q{SELECT zk_semaphore_try_acquire('upgrade/sem', 2) > 0, zk_try_advisory_lock(7),
		         (SELECT max_holders FROM zk_locks WHERE resource = 'upgrade/sem'),
		         (SELECT notifications >= 0 FROM zk_lock_status)}),
	't|t|2|t', 'updated from 1.3: a semaphore slot, an advisory key, zk_locks.max_holders, zk_lock_status.notifications');
like($fresh, qr/^trigger zk_lock_fences_guard on zk_lock_fences /m,
	'zk_lock_fences is guarded by a trigger');

# 1.1 -> 1.2 in a database where the DBA built on zk_lock_nodes, granted it
# by hand, and set default privileges for new functions: the update goes
# through, keeps both, and the new raw listing (zk_lock_queue, every
# instance's users and queries) is not given to the default-privilege role.
$node->safe_psql('postgres', 'CREATE DATABASE dba; CREATE ROLE mon; CREATE ROLE ops');
$node->safe_psql('dba', q{
	CREATE EXTENSION zklock VERSION '1.1';
	CREATE VIEW my_nodes AS SELECT resource, node FROM zk_lock_nodes();
	GRANT EXECUTE ON FUNCTION zk_lock_nodes(text) TO ops;
	ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO mon;});
my ($urc, $uout, $uerr) = $node->psql('dba', 'ALTER EXTENSION zklock UPDATE');
is($urc, 0, '1.1 -> 1.2 with a view on zk_lock_nodes: the update goes through')
  or diag($uerr);
is($node->safe_psql('dba', q{
	SELECT has_function_privilege('ops', 'zk_lock_nodes(text)', 'EXECUTE'),
	       has_function_privilege('mon', 'zk_lock_queue(text)', 'EXECUTE'),
	       has_function_privilege('ops', 'zk_lock_queue(text)', 'EXECUTE'),
	       (SELECT count(*) FROM my_nodes) >= 0}),
	't|f|f|t',
	'the grant made by hand and the view stay; zk_lock_queue is not given to the default-privilege role');

is($node->safe_psql('old', 'SELECT lease_margin > 0 FROM zk_lock_status'), 't',
	'the updated zk_lock_status has the lease columns');
is($node->safe_psql('v12', 'SELECT watches >= 0 FROM zk_lock_status'), 't',
	'the updated zk_lock_status has the watches column');

$node->stop;
zk_done_check();
done_testing();
