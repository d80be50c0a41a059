
# Extension versions: zklock 1.0 is installed in the field.
#  - the new library serves a database still at 1.0 (a rolling upgrade
#    replaces the library first): status, locks and listings work;
#  - ALTER EXTENSION zklock UPDATE brings it to the default version;
#  - the updated database has exactly the objects, definitions and grants
#    of a fresh CREATE EXTENSION.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;

zk_start();
my $node = zk_node('node1');

$node->safe_psql('postgres', 'CREATE DATABASE old');
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
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
  ) s};
my $old = $node->safe_psql('old', $describe);
my $fresh = $node->safe_psql('fresh', $describe);
is($old, $fresh, 'the updated database has the same objects as a fresh install');

is($node->safe_psql('old', 'SELECT lease_margin > 0 FROM zk_lock_status'), 't',
	'the updated zk_lock_status has the lease columns');

$node->stop;
zk_done_check();
done_testing();
