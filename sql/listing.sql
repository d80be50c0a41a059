--
-- zk_locks shows every lock node with its holder; zk_lock_status the worker.
--
SELECT dblink_connect('w', self_dsn() || ' application_name=waiter');

SELECT zk_lock_acquire_session('list/r', 'shared') > 0 AS ok;
SELECT zk_lock_acquire_session('list/w') > 0 AS ok;
-- a waiter in the other backend
SELECT dblink_send_query('w', $$SELECT zk_lock_acquire('list/w', 'exclusive', '30 s')$$);
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'list/w') = 2$$, 5) AS ready;

SELECT resource, mode, granted, scope, instance = current_setting('zklock.node_name') AS this_instance,
       application_name, database = current_database() AS db, username = current_user AS usr,
       since <= now() + interval '1 min' AS since_ok, token > 0 AS token_ok,
       node ~ '^zk[0-9a-f]{8}\.[0-9a-f]+\.[0-9a-f]+-LOCK-(SHARED|EXCLUSIVE)-[0-9]{10}$' AS node_name_ok
FROM zk_locks WHERE resource LIKE 'list/%'
ORDER BY resource, granted DESC;

-- the waiter shows the wait event while it waits: named from PostgreSQL 17
SELECT wait_event_type,
       wait_event = CASE WHEN current_setting('server_version_num')::int >= 170000
                         THEN 'ZklockAcquire' ELSE 'Extension' END AS wait_event_ok
FROM pg_stat_activity WHERE application_name = 'waiter';

-- a user who is not a superuser sees the details of its own locks only
CREATE ROLE regress_zkl_alice LOGIN;
SELECT dblink_connect('a', self_dsn() || ' user=regress_zkl_alice');
SELECT * FROM dblink('a', $$SELECT zk_lock_acquire_session('list/alice', 'shared') > 0$$) AS t(ok boolean);
SET SESSION AUTHORIZATION regress_zkl_alice;
SELECT resource, granted, pid IS NOT NULL AS sees_pid, username, query IS NOT NULL AS sees_query
FROM zk_locks WHERE resource IN ('list/r', 'list/w', 'list/alice') ORDER BY resource, granted DESC;
RESET SESSION AUTHORIZATION;
-- SET ROLE counts, not the session user
SET ROLE regress_zkl_alice;
SELECT count(*) FILTER (WHERE pid IS NOT NULL) AS details_seen FROM zk_locks
WHERE resource IN ('list/r', 'list/w', 'list/alice');
RESET ROLE;
SELECT dblink_disconnect('a');
DROP ROLE regress_zkl_alice;
-- a line break in a role name cannot forge a field of the node data
CREATE ROLE "regress_zkl
scope=explicit";
SET ROLE "regress_zkl
scope=explicit";
SELECT zk_lock_acquire_session('list/nl') > 0 AS ok;
RESET ROLE;
SELECT scope, implicit, username FROM zk_locks WHERE resource = 'list/nl';
SELECT zk_lock_release('list/nl');
DROP ROLE "regress_zkl
scope=explicit";
SELECT zk_lock_release('list/w');
SELECT token > 0 AS waiter_granted FROM dblink_get_result('w') AS t(token bigint);
SELECT dblink_disconnect('w');
SELECT zk_lock_release_all();
SELECT count(*) AS left_over FROM zk_locks WHERE resource LIKE 'list/%';

SELECT state, entries_in_use, granted > 0 AS granted_some, waited > 0 AS waited_some,
       not_granted > 0 AS refused_some, lost
FROM zk_lock_status;

-- 1.8: the session's transport and identity (plain TCP, no credentials)
SELECT transport, identity, tls_expires FROM zk_lock_status;
