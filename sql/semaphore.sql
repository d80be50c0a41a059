--
-- Counting semaphores (1.4): every signature and error, stacking, scopes,
-- savepoints, parents, limits that disagree, locks and semaphores on one
-- resource, from this backend and from others (through dblink).
--
SELECT dblink_connect('sem2', self_dsn());
SELECT dblink_connect('sem3', self_dsn());

-- arguments: NULLs, limits out of 1 .. 64, a negative timeout
SELECT err($$SELECT zk_semaphore_acquire(NULL, 3)$$);
SELECT err($$SELECT zk_semaphore_acquire('sem/a', NULL)$$);
SELECT err($$SELECT zk_semaphore_acquire('sem/a', 0)$$);
SELECT err($$SELECT zk_semaphore_acquire('sem/a', -1)$$);
SELECT err($$SELECT zk_semaphore_acquire('sem/a', 65)$$);
SELECT err($$SELECT zk_semaphore_acquire('sem/a', 3, '-1 s')$$);
SELECT err($$SELECT zk_semaphore_try_acquire(NULL, 3)$$);
SELECT err($$SELECT zk_semaphore_try_acquire('sem/a', NULL)$$);
SELECT err($$SELECT zk_semaphore_try_acquire('sem/a', 0)$$);
SELECT err($$SELECT zk_semaphore_acquire_session('sem/a', 65)$$);
SELECT err($$SELECT zk_semaphore_acquire_session(NULL, 1)$$);
SELECT err($$SELECT zk_semaphore_try_acquire_session('sem/a', -1)$$);
SELECT err($$SELECT zk_semaphore_try_acquire_session('sem/a', NULL)$$);
SELECT err($$SELECT zk_semaphore_acquire('/bad', 3)$$);
SELECT zk_semaphore_release(NULL) IS NULL AS release_null_is_null;
SELECT count(*) AS nodes FROM zk_locks WHERE resource LIKE 'sem%';

-- a slot for the transaction: a token, shown as a semaphore with its limit
BEGIN;
SELECT zk_semaphore_acquire('sem/a', 2) AS t1 \gset
SELECT :t1 > 0 AS token_positive;
SELECT resource, mode, granted, scope, max_holders, pid = pg_backend_pid() AS mine
FROM zk_locks WHERE resource = 'sem/a';
SELECT node ~ 'SEMAPHORE-2-LOCK-EXCLUSIVE-[0-9]{10}$' AS named_with_limit,
       zk_semaphore_node_limit(node) AS limit_in_name
FROM zk_locks WHERE resource = 'sem/a';
SELECT resource, mode FROM zk_lock_local WHERE resource = 'sem/a';
-- asked again in the transaction: the same slot, no second node
SELECT zk_semaphore_acquire('sem/a', 2) = :t1 AS same_token;
SELECT zk_semaphore_try_acquire('sem/a', 2) = :t1 AS try_same_token;
SELECT count(*) AS nodes FROM zk_locks WHERE resource = 'sem/a';
-- another limit than the one held: 22023
SELECT err($$SELECT zk_semaphore_acquire('sem/a', 3)$$);
COMMIT;
SELECT count(*) AS nodes_after_commit FROM zk_locks WHERE resource = 'sem/a';

-- the node's data says the limit too
SELECT zk_semaphore_acquire_session('sem/a', 7) > 0 AS ok;
SELECT max_holders, scope FROM zk_locks WHERE resource = 'sem/a';
SELECT zk_semaphore_release('sem/a');

-- session slots stack: each acquire one hold, each release one
SELECT zk_semaphore_acquire_session('sem/b', 3) AS t2 \gset
SELECT zk_semaphore_try_acquire_session('sem/b', 3) = :t2 AS stacked;
SELECT err($$SELECT zk_semaphore_acquire_session('sem/b', 4)$$);
SELECT zk_semaphore_release('sem/b') AS first_release;
SELECT count(*) AS still_held FROM zk_locks WHERE resource = 'sem/b';
SELECT zk_semaphore_release('sem/b') AS second_release;
SELECT count(*) AS nodes FROM zk_locks WHERE resource = 'sem/b';
-- releasing what is not held: a WARNING and false
SELECT zk_semaphore_release('sem/b') AS third_release;
SELECT zk_semaphore_release('sem/never') AS never_held;
-- zk_lock_release does not release a semaphore's slot, nor the reverse
SELECT zk_semaphore_acquire_session('sem/b', 3) > 0 AS ok;
SELECT zk_lock_release('sem/b') AS lock_release;
SELECT zk_semaphore_release('sem/b') AS semaphore_release;

-- zk_lock_release_all gives up session slots too
SELECT zk_semaphore_acquire_session('sem/b', 3) > 0 AS ok;
SELECT zk_semaphore_acquire_session('sem/b2', 5) > 0 AS ok;
SELECT zk_lock_release_all() AS released;
SELECT count(*) AS nodes FROM zk_locks WHERE resource LIKE 'sem/b%';

-- a lock and a semaphore of this backend on one resource: 55000, both orders
SELECT zk_lock_acquire_session('sem/c') > 0 AS lock_held;
SELECT err($$SELECT zk_semaphore_acquire('sem/c', 2)$$);
SELECT err($$SELECT zk_semaphore_try_acquire_session('sem/c', 2)$$);
SELECT zk_semaphore_release('sem/c') AS semaphore_release_of_a_lock;
SELECT zk_lock_release('sem/c');
SELECT zk_semaphore_acquire_session('sem/c', 2) > 0 AS semaphore_held;
-- the raw listings show its node's mark: exclusive
SELECT mode, granted FROM zk_lock_queue('sem/c');
SELECT err($$SELECT zk_lock_acquire('sem/c')$$);
SELECT err($$SELECT zk_lock_try_acquire('sem/c', 'shared')$$);
-- a lock below it takes it as a parent, in shared mode: 55000 too
SELECT err($$SELECT zk_lock_acquire('sem/c/child')$$);
SELECT zk_semaphore_release('sem/c');
SELECT count(*) AS nodes FROM zk_locks WHERE resource LIKE 'sem/c%';

-- parents: a slot takes its parents' SHARED locks, as a lock does
BEGIN;
SELECT zk_semaphore_acquire('sem/d/x', 2) > 0 AS ok;
SELECT resource, mode, granted, implicit, max_holders FROM zk_locks
WHERE resource LIKE 'sem/d%' ORDER BY resource;
COMMIT;

-- savepoints: ROLLBACK TO gives back what the subtransaction took
BEGIN;
SAVEPOINT s1;
SELECT zk_semaphore_acquire('sem/e', 2) > 0 AS ok;
ROLLBACK TO s1;
SELECT count(*) AS after_rollback_to FROM zk_locks WHERE resource = 'sem/e';
SAVEPOINT s2;
SELECT zk_semaphore_acquire('sem/e', 2) > 0 AS ok;
RELEASE s2;
SELECT count(*) AS after_release FROM zk_locks WHERE resource = 'sem/e';
COMMIT;
SELECT count(*) AS after_commit FROM zk_locks WHERE resource = 'sem/e';

-- PREPARE TRANSACTION with a slot is refused (and rolls back), as with a lock
BEGIN;
SELECT zk_semaphore_acquire('sem/e', 2) > 0 AS ok;
PREPARE TRANSACTION 'zksem';
SELECT count(*) AS after_prepare FROM zk_locks WHERE resource = 'sem/e';

-- other backends: two slots of 2 are taken, a third is not granted
SELECT * FROM dblink('sem2', $$SELECT zk_semaphore_acquire_session('sem/f', 2) > 0$$) AS t(ok boolean);
SELECT zk_semaphore_try_acquire_session('sem/f', 2) > 0 AS second_slot;
SELECT * FROM dblink('sem3', $$SELECT zk_semaphore_try_acquire_session('sem/f', 2) IS NULL$$) AS t(not_granted boolean);
SELECT * FROM dblink('sem3', $$SELECT err('SELECT zk_semaphore_acquire(''sem/f'', 2, ''200 ms'')')$$) AS t(e text);
SELECT count(*) AS nodes, bool_and(granted) AS all_granted FROM zk_locks WHERE resource = 'sem/f';
-- lock_timeout ends a wait too
SELECT * FROM dblink('sem3', $$SET lock_timeout = '200ms'$$) AS t(s text);
SELECT * FROM dblink('sem3', $$SELECT err('SELECT zk_semaphore_acquire(''sem/f'', 2)')$$) AS t(e text);
SELECT * FROM dblink('sem3', $$RESET lock_timeout$$) AS t(s text);
-- another limit than the one its holders gave: 22023 naming both
SELECT * FROM dblink('sem3', $$SELECT err('SELECT zk_semaphore_try_acquire(''sem/f'', 3)')$$) AS t(e text);
SELECT * FROM dblink('sem3', $$SELECT err('SELECT zk_semaphore_acquire(''sem/f'', 1, ''1 s'')')$$) AS t(e text);
-- a lock where a semaphore is held: 55000
SELECT * FROM dblink('sem3', $$SELECT err('SELECT zk_lock_acquire(''sem/f'', ''exclusive'', ''1 s'')')$$) AS t(e text);
SELECT * FROM dblink('sem3', $$SELECT err('SELECT zk_lock_try_acquire(''sem/f'', ''shared'')')$$) AS t(e text);
SELECT count(*) AS nodes FROM zk_locks WHERE resource = 'sem/f';
-- a waiter is granted when a holder releases
SELECT dblink_send_query('sem3', $$SELECT zk_semaphore_acquire_session('sem/f', 2, '30 s') > 0$$);
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'sem/f') = 3$$, 10) AS queued;
SELECT resource, mode, granted, blocked_by IS NOT NULL AS blocked FROM zk_locks WHERE resource = 'sem/f' ORDER BY node ~ '^zk' DESC, granted DESC;
SELECT zk_semaphore_release('sem/f');
SELECT * FROM dblink_get_result('sem3') AS t(granted boolean);
SELECT * FROM dblink_get_result('sem3') AS t(granted boolean);
SELECT * FROM dblink('sem3', $$SELECT zk_semaphore_release('sem/f')$$) AS t(ok boolean);
SELECT * FROM dblink('sem2', $$SELECT zk_semaphore_release('sem/f')$$) AS t(ok boolean);

-- a semaphore where a lock is held: 55000
SELECT * FROM dblink('sem2', $$SELECT zk_lock_acquire_session('sem/g') > 0$$) AS t(ok boolean);
SELECT regexp_replace(err($$SELECT zk_semaphore_acquire('sem/g', 3, '1 s')$$),
                      'node "zk[^"]*-LOCK-EXCLUSIVE-[0-9]{10}"', 'node "...-LOCK-EXCLUSIVE-<seq>"') AS err;
SELECT regexp_replace(err($$SELECT zk_semaphore_try_acquire('sem/g', 3)$$),
                      'node "zk[^"]*-LOCK-EXCLUSIVE-[0-9]{10}"', 'node "...-LOCK-EXCLUSIVE-<seq>"') AS err;
SELECT * FROM dblink('sem2', $$SELECT zk_lock_release('sem/g')$$) AS t(ok boolean);

-- a mutex: max_holders 1
SELECT * FROM dblink('sem2', $$SELECT zk_semaphore_acquire_session('sem/h', 1) > 0$$) AS t(ok boolean);
SELECT zk_semaphore_try_acquire('sem/h', 1) IS NULL AS mutex_not_granted;
SELECT err($$SELECT zk_semaphore_acquire('sem/h', 1, '0')$$);
SELECT * FROM dblink('sem2', $$SELECT zk_semaphore_release('sem/h')$$) AS t(ok boolean);
SELECT zk_semaphore_try_acquire('sem/h', 1) > 0 AS mutex_granted_now;

-- zk_semaphore_node_limit reads names as the worker does
SELECT zk_semaphore_node_limit('zk0.1.2-SEMAPHORE-3-LOCK-EXCLUSIVE-0000000001') AS three,
       zk_semaphore_node_limit('zk0.1.2-LOCK-EXCLUSIVE-0000000001') AS lock_node,
       zk_semaphore_node_limit('zk0.1.2-SEMAPHORE-1001-LOCK-EXCLUSIVE-0000000001') AS out_of_range;

-- zk_lock_status counts the watch notifications the worker received
SELECT notifications >= 1 AS notifications_counted FROM zk_lock_status;

SELECT dblink_disconnect('sem2');
SELECT dblink_disconnect('sem3');
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource LIKE 'sem%') = 0$$, 10) AS none_left;
