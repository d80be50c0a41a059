--
-- Explicit locks (Hive's LOCK TABLE): persistent, with a required expiry.
--
SELECT dblink_connect('x', 'dbname=' || current_database());

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
SELECT * FROM dblink('dbname=' || current_database(),
  $$SELECT zk_lock_acquire_explicit('exp/busy', 'exclusive', '1 hour', '200 ms')$$) AS t(token bigint);
SELECT count(*) AS nodes FROM zk_locks WHERE resource = 'exp/busy';
SELECT zk_lock_release('exp/busy');

-- a long time to live is kept whole (not cut to 24.8 days of milliseconds)
SELECT zk_lock_acquire_explicit('exp/long', 'shared', '300 days') > 0 AS ok;
SELECT expires BETWEEN now() + interval '299 days' AND now() + interval '301 days' AS expires_in_300_days
FROM zk_locks WHERE resource = 'exp/long';
SELECT zk_lock_release_explicit('exp/long', 'shared');

-- nothing persistent without an end
SELECT err($$SELECT zk_lock_acquire_explicit('exp/x')$$);
SELECT err($$SELECT zk_lock_acquire_explicit('exp/x', 'exclusive', '-1 hour')$$);
SELECT err($$SELECT zk_lock_acquire_explicit('exp/x', 'exclusive', '2 years')$$);
SELECT count(*) AS left_over FROM zk_locks WHERE resource LIKE 'exp%';
