--
-- Bad input: a clear ERROR with an errcode, before anything reaches ZooKeeper.
--

-- modes
SELECT err($q$SELECT zk_lock_acquire('etl/a', 'exclusivee')$q$);
SELECT err($q$SELECT zk_lock_try_acquire('etl/a', '')$q$);
SELECT err($q$SELECT zk_lock_acquire('etl/a', NULL)$q$);
SELECT err($q$SELECT zk_lock_release('etl/a', 'read')$q$);

-- resource names
SELECT err($q$SELECT zk_lock_acquire('')$q$);
SELECT err($q$SELECT zk_lock_acquire(NULL)$q$);
SELECT err($q$SELECT zk_lock_acquire(repeat('x', 256))$q$);
SELECT err($q$SELECT zk_lock_acquire('/etl/a')$q$);
SELECT err($q$SELECT zk_lock_acquire('etl/a/')$q$);
SELECT err($q$SELECT zk_lock_acquire('etl//a')$q$);
SELECT err($q$SELECT zk_lock_acquire('etl/./a')$q$);
SELECT err($q$SELECT zk_lock_acquire('etl/../../zookeeper')$q$);
SELECT err($q$SELECT zk_lock_acquire('..')$q$);
SELECT err($q$SELECT zk_lock_acquire(E'etl/a\nb')$q$);
SELECT err($q$SELECT zk_lock_acquire(E'etl/\t')$q$);
SELECT err($q$SELECT zk_lock_acquire('etl/LOCK-EXCLUSIVE-0000000001')$q$);
SELECT err($q$SELECT zk_lock_try_acquire_session('/')$q$);

-- timeouts
SELECT err($q$SELECT zk_lock_acquire('etl/a', 'exclusive', '-1 second')$q$);
SELECT err($q$SELECT zk_lock_acquire('etl/a', 'exclusive', '1000 years')$q$);

-- the longest valid name is fine, and the mode is case-insensitive
SELECT zk_lock_try_acquire(repeat('x', 255), 'EXCLUSIVE') > 0 AS granted;
SELECT zk_lock_try_acquire('etl/Mixed Case/ünïcode', 'Shared') > 0 AS granted;

-- nothing was left behind by the errors
SELECT count(*) AS lock_nodes FROM zk_locks WHERE pid = pg_backend_pid();

-- a lock set larger than this backend's share (zklock.max_locks_per_backend)
SELECT err($q$SELECT zk_lock_acquire_all(ARRAY(SELECT 'set/' || i FROM generate_series(1, 40) i))$q$);

-- ZooKeeper unreachable: 08006 says where and for how long, whatever asked
-- (the errors table in doc/sql.md), for a parent's lock and for zk_locks
ALTER SYSTEM SET zklock.hosts = '127.0.0.1:9';
SELECT pg_reload_conf();
SELECT wait_until($$(SELECT state FROM zk_lock_status) <> 'connected'$$, 10) AS disconnected;
SELECT err($q$SELECT zk_lock_acquire('st/other', 'exclusive', '10 s')$q$);
SELECT err($q$SELECT count(*) FROM zk_locks$q$);
ALTER SYSTEM RESET zklock.hosts;
SELECT pg_reload_conf();
SELECT wait_until($$(SELECT state FROM zk_lock_status) = 'connected'$$, 10) AS connected;

-- zklock.auth (deprecated, a password): a superuser and a member of
-- pg_read_all_settings see the mask ('********', or '' when unset, as
-- here); anyone else gets 42501 from SHOW and current_setting() alike,
-- also with missing_ok; pg_settings does not list it for anyone.
CREATE ROLE regress_zkl_settings IN ROLE pg_read_all_settings;
CREATE ROLE regress_zkl_plain;
SELECT current_setting('zklock.auth') AS superuser_sees;
SET ROLE regress_zkl_settings;
SELECT current_setting('zklock.auth') AS read_all_settings_sees;
SELECT count(*) AS in_pg_settings FROM pg_settings WHERE name = 'zklock.auth';
SET ROLE regress_zkl_plain;
-- (PostgreSQL's own message, which differs between majors: its SQLSTATE,
-- and that it names the setting)
SELECT q, split_part(err(q), ':', 1) AS sqlstate, err(q) LIKE '%"zklock.auth"%' AS names_it
FROM (VALUES ($q$SHOW zklock.auth$q$),
             ($q$SELECT current_setting('zklock.auth')$q$),
             ($q$SELECT current_setting('zklock.auth', true)$q$)) v(q);
SELECT count(*) AS in_pg_settings FROM pg_settings WHERE name = 'zklock.auth';
RESET ROLE;

-- the administrative functions are superusers' whatever grants exist
-- (1.3): granted by hand, they still refuse (42501); so does writing to
-- zk_lock_fences other than through zk_lock_fence, and no UPDATE lowers a
-- recorded token
GRANT EXECUTE ON FUNCTION zk_lock_force_release(text, text), zk_lock_revoke(text, text),
  zk_lock_admin_node(text, text, text, text), zk_lock_fence(text, bigint) TO regress_zkl_plain;
GRANT INSERT, UPDATE, DELETE, TRUNCATE ON zk_lock_fences TO regress_zkl_plain;
SELECT zk_lock_fence('priv/fence', 1000) AS fenced;
SET ROLE regress_zkl_plain;
SELECT err($q$SELECT zk_lock_force_release('priv/r')$q$);
SELECT err($q$SELECT zk_lock_revoke('priv/r', 'terminate')$q$);
SELECT err($q$SELECT zk_lock_admin_node('priv/r', 'LOCK-EXCLUSIVE-0000000000', 'delete', NULL)$q$);
SELECT err($q$UPDATE zk_lock_fences SET token = 5 WHERE resource = 'priv/fence'$q$);
SELECT err($q$DELETE FROM zk_lock_fences WHERE resource = 'priv/fence'$q$);
SELECT err($q$TRUNCATE zk_lock_fences$q$);
SELECT err($q$INSERT INTO zk_lock_fences VALUES ('priv/other', 1)$q$);
SELECT err($q$SELECT zk_lock_fence('priv/fence', 5)$q$);
SELECT zk_lock_fence('priv/fence', 1001) AS fenced_by_the_writer;
RESET ROLE;
-- to delegate them, a superuser wraps them in a SECURITY DEFINER function
CREATE FUNCTION regress_zkl_force(r text) RETURNS integer
LANGUAGE sql SECURITY DEFINER SET search_path = public, pg_temp
AS $$ SELECT zk_lock_force_release(r) $$;
GRANT EXECUTE ON FUNCTION regress_zkl_force(text) TO regress_zkl_plain;
SET ROLE regress_zkl_plain;
SELECT regress_zkl_force('priv/r') AS released_through_the_wrapper;
RESET ROLE;
DROP FUNCTION regress_zkl_force(text);
SELECT err($q$UPDATE zk_lock_fences SET token = 5 WHERE resource = 'priv/fence'$q$);
SELECT resource, token FROM zk_lock_fences WHERE resource = 'priv/fence';
DELETE FROM zk_lock_fences WHERE resource = 'priv/fence';
REVOKE ALL ON FUNCTION zk_lock_force_release(text, text), zk_lock_revoke(text, text),
  zk_lock_admin_node(text, text, text, text), zk_lock_fence(text, bigint) FROM regress_zkl_plain;
REVOKE ALL ON zk_lock_fences FROM regress_zkl_plain;
DROP ROLE regress_zkl_plain;
DROP ROLE regress_zkl_settings;
