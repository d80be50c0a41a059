--
-- Explicit locks (Hive's LOCK TABLE): persistent, with a required expiry.
--
SELECT dblink_connect('x', self_dsn());

-- taken in another session that then ends: the lock stays
SELECT * FROM dblink('x', $$SELECT zk_lock_acquire_explicit('exp/tbl', 'exclusive', '1 hour') > 0$$) AS t(ok boolean);
SELECT dblink_disconnect('x');
SELECT resource, mode, granted, scope, implicit,
       expires BETWEEN now() + interval '59 min' AND now() + interval '61 min' AS expires_in_an_hour,
       session_id IS NULL AS persistent
FROM zk_locks WHERE resource LIKE 'exp%';
SELECT zk_lock_try_acquire('exp/tbl') IS NULL AS still_locked;
SELECT zk_lock_try_acquire('exp/tbl', 'shared') IS NULL AS shared_blocked_too;

-- UNLOCK
SELECT zk_lock_release_explicit('exp/tbl');
SELECT zk_lock_release_explicit('exp/tbl');
SELECT zk_lock_try_acquire('exp/tbl') > 0 AS free_again;

-- expired locks are removed by the worker (zklock.sweep_interval is 500ms here)
SELECT zk_lock_acquire_explicit('exp/short', 'shared', '1 second') > 0 AS ok;
SELECT count(*) AS present FROM zk_locks WHERE resource = 'exp/short';
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'exp/short') = 0$$, 10) AS ready;
SELECT count(*) AS after_expiry FROM zk_locks WHERE resource = 'exp/short';
-- "expires=" inside another field's value does not hide the real one
SET application_name = 'job expires=never';
SELECT zk_lock_acquire_explicit('exp/app', 'shared', '1 second') > 0 AS ok;
RESET application_name;
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'exp/app') = 0$$, 10) AS ready;
SELECT count(*) AS after_expiry FROM zk_locks WHERE resource = 'exp/app';

-- a waiting explicit request with a timeout leaves nothing behind
SELECT zk_lock_acquire_session('exp/busy') > 0 AS ok;
SELECT * FROM dblink(self_dsn(),
  $$SELECT zk_lock_acquire_explicit('exp/busy', 'exclusive', '1 hour', '200 ms')$$) AS t(token bigint);
SELECT count(*) AS nodes FROM zk_locks WHERE resource = 'exp/busy';
SELECT zk_lock_release('exp/busy');

-- a long time to live is kept whole (not cut to 24.8 days of milliseconds)
SELECT zk_lock_acquire_explicit('exp/long', 'shared', '300 days') > 0 AS ok;
SELECT expires BETWEEN now() + interval '299 days' AND now() + interval '301 days' AS expires_in_300_days
FROM zk_locks WHERE resource = 'exp/long';
SELECT zk_lock_release_explicit('exp/long', 'shared');

-- Issue 9, finding 4: explicit locks are granted once, and only while their
-- node exists.
-- UNLOCK removes the granted lock only, not a waiting request's node; the
-- waiter is then granted, with its node
SELECT zk_lock_acquire_explicit('exp/dbl', ttl => '1 hour') > 0 AS s1_holds;
SELECT dblink_connect('w', self_dsn());
SELECT dblink_send_query('w', $$SELECT zk_lock_acquire_explicit('exp/dbl', ttl => '1 hour', timeout => '20 s') > 0$$);
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'exp/dbl') = 2$$, 10) AS waiting;
SELECT zk_lock_release_explicit('exp/dbl') AS released;
SELECT * FROM dblink_get_result('w') AS t(granted boolean);
SELECT * FROM dblink_get_result('w') AS t(granted boolean);
SELECT count(*) AS nodes, bool_and(granted) AS granted FROM zk_locks WHERE resource = 'exp/dbl';
SELECT zk_lock_try_acquire('exp/dbl') IS NULL AS still_locked;
SELECT zk_lock_release_explicit('exp/dbl') AS released;

-- the sweep never removes a waiting request's node, and the time to live
-- counts from the grant (zklock.sweep_interval is 500ms here)
SELECT zk_lock_acquire_explicit('exp/ttl', ttl => '1 hour') > 0 AS s1_holds;
SELECT dblink_send_query('w', $$SELECT zk_lock_acquire_explicit('exp/ttl', ttl => '2 s', timeout => '20 s') > 0$$);
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'exp/ttl') = 2$$, 10) AS waiting;
SELECT pg_sleep(3.5);
SELECT count(*) AS nodes_after_the_ttl FROM zk_locks WHERE resource = 'exp/ttl';
SELECT zk_lock_release_explicit('exp/ttl') AS released;
SELECT * FROM dblink_get_result('w') AS t(granted boolean);
SELECT * FROM dblink_get_result('w') AS t(granted boolean);
SELECT count(*) AS held_after_the_grant FROM zk_locks WHERE resource = 'exp/ttl' AND granted;
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'exp/ttl') = 0$$, 10) AS expired;
SELECT dblink_disconnect('w');

-- UNLOCK by the role the caller acts as (SET ROLE), as the node records it
CREATE ROLE zk_explicit_u1;
SET ROLE zk_explicit_u1;
SELECT zk_lock_acquire_explicit('exp/role', ttl => '1 hour') > 0 AS ok;
SELECT username FROM zk_locks WHERE resource = 'exp/role';
SELECT zk_lock_release_explicit('exp/role') AS released;
RESET ROLE;
SELECT count(*) AS left_over FROM zk_locks WHERE resource = 'exp/role';
DROP ROLE zk_explicit_u1;

-- a revocation does not take an explicit lock's expiry away
SELECT zk_lock_acquire_explicit('exp/rv', ttl => '1 hour') > 0 AS ok;
SELECT zk_lock_revoke('exp/rv') AS revoked;
SELECT expires BETWEEN now() + interval '59 min' AND now() + interval '61 min' AS still_expires_in_an_hour
FROM zk_locks WHERE resource = 'exp/rv';
SELECT zk_lock_release_explicit('exp/rv') AS released;

-- an explicit lock on what this session holds would wait for itself
SELECT zk_lock_acquire_session('exp/self', 'shared') > 0 AS ok;
SELECT err($$SELECT zk_lock_acquire_explicit('exp/self', ttl => '1 hour', timeout => '2 s')$$);
SELECT zk_lock_acquire_explicit('exp/self', 'shared', ttl => '1 hour') > 0 AS shared_does_not_conflict;
SELECT zk_lock_release_explicit('exp/self', 'shared') AS released;
SELECT zk_lock_release('exp/self', 'shared');
BEGIN;
SELECT zk_lock_acquire('exp/self/t') > 0 AS ok;
SELECT err($$SELECT zk_lock_acquire_explicit('exp/self', ttl => '1 hour', timeout => '2 s')$$);
COMMIT;

-- nothing persistent without an end
SELECT err($$SELECT zk_lock_acquire_explicit('exp/x')$$);
SELECT err($$SELECT zk_lock_acquire_explicit('exp/x', 'exclusive', '-1 hour')$$);
SELECT err($$SELECT zk_lock_acquire_explicit('exp/x', 'exclusive', '2 years')$$);
SELECT count(*) AS left_over FROM zk_locks WHERE resource LIKE 'exp%';
