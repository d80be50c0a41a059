--
-- Acquire, try, release; conflicts with another backend (through dblink);
-- fencing tokens.
--
SELECT dblink_connect('other', self_dsn());

-- uncontended acquire returns a positive token; released at commit
BEGIN;
SELECT zk_lock_acquire('locks/a') AS t1 \gset
SELECT :t1 > 0 AS token_positive;
SELECT resource, mode, granted, scope, pid = pg_backend_pid() AS mine
FROM zk_locks WHERE resource = 'locks/a';
COMMIT;
SELECT count(*) AS nodes_after_commit FROM zk_locks WHERE resource = 'locks/a';

-- the token grows with every grant of a resource
SELECT zk_lock_acquire_session('locks/a') AS t2 \gset
SELECT zk_lock_release('locks/a');
SELECT zk_lock_acquire_session('locks/a') AS t3 \gset
SELECT zk_lock_release('locks/a');
SELECT :t1 < :t2 AND :t2 < :t3 AS tokens_increase;

-- another backend holds EXCLUSIVE: try fails at once and leaves no node
SELECT * FROM dblink('other', $$SELECT zk_lock_acquire_session('locks/b') > 0$$) AS t(ok boolean);
SELECT zk_lock_try_acquire('locks/b') IS NULL AS not_granted;
SELECT zk_lock_try_acquire('locks/b', 'shared') IS NULL AS shared_not_granted;
SELECT zk_lock_try_acquire_session('locks/b') IS NULL AS session_not_granted;
SELECT count(*) AS nodes, bool_and(pid <> pg_backend_pid()) AS only_theirs
FROM zk_locks WHERE resource = 'locks/b';

-- a waiting acquire with a timeout fails with 55P03 and leaves no node
SELECT err($$SELECT zk_lock_acquire('locks/b', 'exclusive', '200 ms')$$);
SELECT err($$SELECT zk_lock_acquire_session('locks/b', 'shared', '0')$$);
SELECT count(*) AS nodes FROM zk_locks WHERE resource = 'locks/b';

-- lock_timeout and statement_timeout end a wait too
SET lock_timeout = '200ms';
SELECT err($$SELECT zk_lock_acquire('locks/b')$$);
RESET lock_timeout;
SET statement_timeout = '200ms';
SELECT zk_lock_acquire('locks/b');
RESET statement_timeout;
SELECT count(*) AS nodes FROM zk_locks WHERE resource = 'locks/b';

-- released there, granted here
SELECT * FROM dblink('other', $$SELECT zk_lock_release('locks/b')$$) AS t(ok boolean);
SELECT zk_lock_try_acquire('locks/b') > 0 AS granted_now;

-- SHARED with SHARED is compatible, SHARED with EXCLUSIVE is not
SELECT * FROM dblink('other', $$SELECT zk_lock_acquire_session('locks/c', 'shared') > 0$$) AS t(ok boolean);
SELECT zk_lock_try_acquire_session('locks/c', 'shared') > 0 AS shared_granted;
SELECT zk_lock_try_acquire_session('locks/d', 'exclusive') > 0 AS other_resource_granted;
SELECT * FROM dblink('other', $$SELECT zk_lock_try_acquire('locks/d', 'shared') IS NULL$$) AS t(blocked boolean);
SELECT resource, mode, granted FROM zk_locks WHERE resource IN ('locks/c', 'locks/d')
ORDER BY resource, pid = pg_backend_pid();
SELECT zk_lock_release_all();
SELECT * FROM dblink('other', $$SELECT zk_lock_release_all()$$) AS t(n integer);

-- releasing what is not held: false and a WARNING, like pg_advisory_unlock
SELECT zk_lock_release('locks/never');
SELECT zk_lock_release('locks/c', 'exclusive');

-- hierarchical names are separate resources
SELECT zk_lock_try_acquire_session('locks/tree') > 0 AS parent,
       zk_lock_try_acquire_session('locks/tree/leaf') > 0 AS child;
SELECT zk_lock_release_all();

SELECT dblink_disconnect('other');
SELECT count(*) AS nodes_left FROM zk_locks WHERE resource LIKE 'locks/%';
