--
-- zklock.node_naming: zklock names its nodes like another client under the
-- subtrees that client locks, and honours every client's nodes everywhere.
--
ALTER SYSTEM SET zklock.node_naming = 'kz=kazoo, cur=curator, mx=curator-mutex, rc=recipe, kz/hive=hive';
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);    -- the worker and this backend reload
SHOW zklock.node_naming;

SELECT zk_lock_acquire_session('kz/a') > 0, zk_lock_acquire_session('kz/b', 'shared') > 0,
       zk_lock_acquire_session('cur/a') > 0, zk_lock_acquire_session('cur/b', 'shared') > 0,
       zk_lock_acquire_session('mx/a') > 0,
       zk_lock_acquire_session('rc/a') > 0, zk_lock_acquire_session('rc/b', 'shared') > 0,
       zk_lock_acquire_session('kz/hive/c') > 0, zk_lock_acquire_session('other') > 0;
SELECT resource, mode,
       regexp_replace(node, '^(_c_)?zk[0-9a-f]{8}\.[0-9a-f]+\.[0-9a-f]+-', '\1<prefix>-') AS node
FROM zk_locks ORDER BY resource;

-- Curator's mutex has no shared mode
SELECT err($$SELECT zk_lock_acquire('mx/b', 'shared')$$);

-- every client's lock marks are recognised, so none can be a resource name
SELECT err($$SELECT zk_lock_acquire('a/x__lock__0000000001')$$);
SELECT err($$SELECT zk_lock_acquire('a/_c_1234-__READ__0000000001/b')$$);
SELECT zk_lock_try_acquire('a/lock-000000001') > 0 AS nine_digits_is_a_name;

-- a malformed setting is refused
ALTER SYSTEM SET zklock.node_naming = 'kz=zookeeper';
ALTER SYSTEM SET zklock.node_naming = '=kazoo';
-- each subtree follows the resource name rules; the DETAIL names the bad part
ALTER SYSTEM SET zklock.node_naming = 'a/=kazoo';
ALTER SYSTEM SET zklock.node_naming = '/a=kazoo';
ALTER SYSTEM SET zklock.node_naming = 'a/../b=kazoo';
ALTER SYSTEM SET zklock.node_naming = 'a//b=kazoo';
ALTER SYSTEM SET zklock.node_naming = 'a/LOCK-SHARED-0000000001=kazoo';
ALTER SYSTEM SET zklock.node_naming = 'a=kazoo,,b=hive';
ALTER SYSTEM SET zklock.node_naming = 'a=kazoo,';
ALTER SYSTEM SET zklock.node_naming = 'a=kazoo,a=curator';
ALTER SYSTEM SET zklock.node_naming = 'a=kazoo, b=hive, a=kazoo';
ALTER SYSTEM SET zklock.node_naming = 'a =kazoo';
ALTER SYSTEM SET zklock.node_naming = 'a= kazoo';
ALTER SYSTEM SET zklock.node_naming = 'a=kazoo=hive';
-- spaces around the commas (and at either end) are allowed, as in search_path
ALTER SYSTEM SET zklock.node_naming = ' a=kazoo ,b/c=hive , a/b c=recipe ';
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);    -- the worker and this backend reload
SHOW zklock.node_naming;
BEGIN;
SELECT zk_lock_try_acquire('a/b c/d') > 0 AS granted;
SELECT resource, regexp_replace(node, '^zk[0-9a-f]{8}\.[0-9a-f]+\.[0-9a-f]+-', '<prefix>-') AS node
FROM zk_locks WHERE pid = pg_backend_pid() AND resource LIKE 'a%' ORDER BY resource;
COMMIT;

SELECT zk_lock_release_all();
ALTER SYSTEM RESET zklock.node_naming;
SELECT pg_reload_conf();
