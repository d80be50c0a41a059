--
-- Hive's hierarchy: "db/table/part" takes "db" and "db/table" SHARED; lock
-- sets all or none; SHOW LOCKS with blocked-by.
--
SELECT dblink_connect('o', self_dsn() || ' application_name=other');

-- a writer of partition p1 elsewhere
SELECT * FROM dblink('o', $$SELECT zk_lock_acquire_session('db/t/p1') > 0$$) AS t(ok boolean);
SELECT resource, mode, implicit, scope FROM zk_locks WHERE resource LIKE 'db%' ORDER BY resource;

-- writers of different partitions run side by side
SELECT zk_lock_try_acquire_session('db/t/p2') > 0 AS other_partition;
SELECT resource, mode, implicit FROM zk_locks WHERE resource LIKE 'db%' AND pid = pg_backend_pid()
ORDER BY resource;
-- releasing a session lock releases its parents' holds with it
SELECT zk_lock_release('db/t/p2');
SELECT count(*) AS mine FROM zk_locks WHERE resource LIKE 'db%' AND pid = pg_backend_pid();
-- a table-level EXCLUSIVE lock waits for the partition writers, with or
-- without its own parents (Hive's explicit LOCK TABLE takes none)
SELECT zk_lock_try_acquire('db/t') IS NULL AS table_blocked;
SELECT zk_lock_try_acquire('db/t', 'exclusive', parents => false) IS NULL AS table_alone_blocked;
-- the database-level EXCLUSIVE lock too
SELECT zk_lock_try_acquire('db') IS NULL AS db_blocked;
-- but SHARED on the table is fine
SELECT zk_lock_try_acquire('db/t', 'shared') > 0 AS table_shared;
SELECT * FROM dblink('o', $$SELECT zk_lock_release_all()$$) AS t(n integer);


-- parents are counted: two children share the parents' holds
SELECT zk_lock_acquire_session('h/x/y') > 0, zk_lock_acquire_session('h/x/z') > 0;
SELECT resource, mode, implicit FROM zk_locks WHERE resource LIKE 'h%' ORDER BY resource;
SELECT zk_lock_release('h/x/y');
SELECT resource FROM zk_locks WHERE resource LIKE 'h%' ORDER BY resource;
SELECT zk_lock_release('h/x/z');
SELECT count(*) AS h_left FROM zk_locks WHERE resource LIKE 'h%';

-- holding the parent EXCLUSIVE covers a child's implicit SHARED hold
BEGIN;
SELECT zk_lock_acquire('ex') > 0, zk_lock_acquire('ex/child') > 0;
SELECT resource, mode FROM zk_locks WHERE resource LIKE 'ex%' ORDER BY resource;
COMMIT;

-- a lock taken with parents and again without, in one session: refused
SELECT zk_lock_acquire_session('mix/a') > 0;
SELECT err($$SELECT zk_lock_acquire_session('mix/a', 'exclusive', NULL, false)$$);
SELECT zk_lock_release('mix/a');

-- SHOW LOCKS: the waiter, and the node it waits behind
SELECT zk_lock_acquire_session('show/r') > 0;
SELECT dblink_send_query('o', $$SELECT zk_lock_acquire('show/r', 'shared', '30 s')$$);
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'show/r') = 2$$, 5) AS ready;
SELECT w.resource, w.mode, w.granted, w.application_name,
       w.blocked_by = h.node AS behind_holder, w.blocked_by_pid = pg_backend_pid() AS blocker_pid,
       w.blocked_by_instance
FROM zk_locks w JOIN zk_locks h ON h.resource = w.resource AND h.granted
WHERE w.resource = 'show/r' AND NOT w.granted;
SELECT count(*) AS show_subtree FROM zk_locks('show');
SELECT count(*) AS other_subtree FROM zk_locks('nothing/here');
SELECT zk_lock_release('show/r');
SELECT token > 0 FROM dblink_get_result('o') AS t(token bigint);
SELECT count(*) FROM dblink_get_result('o') AS t(token bigint);  -- ends the async query

-- lock sets: all or none, tokens in the order asked
SELECT array_length(zk_lock_acquire_all_session(ARRAY['set/b', 'set/a', 'set/b'],
                                                ARRAY['exclusive', 'shared', 'exclusive']), 1) AS tokens;
SELECT resource, mode, implicit FROM zk_locks WHERE resource LIKE 'set%' ORDER BY resource;
SELECT zk_lock_release_all();

-- members share their parents' locks: releasing one member, or the parent
-- itself, leaves the parent locked for the other members
SELECT array_length(zk_lock_acquire_all_session(ARRAY['pset/x/1', 'pset/x/2', 'pset/x']), 1) AS tokens;
SELECT zk_lock_release('pset/x/1');
SELECT resource, mode FROM zk_locks WHERE resource LIKE 'pset%' ORDER BY resource;
SELECT zk_lock_release('pset/x');
SELECT resource, mode FROM zk_locks WHERE resource LIKE 'pset%' ORDER BY resource;
SELECT zk_lock_release('pset/x/2');
SELECT count(*) AS pset_left FROM zk_locks WHERE resource LIKE 'pset%';
-- a member listed twice is one lock, in the strongest mode, with one set of
-- parent holds: one release gives everything back
SELECT array_length(zk_lock_acquire_all_session(ARRAY['pset/y/1', 'pset/y/1'],
                                                ARRAY['shared', 'exclusive']), 1) AS tokens;
SELECT resource, mode FROM zk_locks WHERE resource LIKE 'pset%' ORDER BY resource;
SELECT zk_lock_release('pset/y/1');
SELECT count(*) AS pset_left FROM zk_locks WHERE resource LIKE 'pset%';

-- one member held elsewhere: a try set gets nothing and leaves nothing
SELECT * FROM dblink('o', $$SELECT zk_lock_acquire_session('set/c') > 0$$) AS t(ok boolean);
SELECT zk_lock_try_acquire_all(ARRAY['set/a', 'set/c', 'set/d']) IS NULL AS not_granted;
SELECT count(*) AS mine FROM zk_locks WHERE pid = pg_backend_pid();
-- a waiting set obeys one timeout and leaves nothing
SELECT err($$SELECT zk_lock_acquire_all(ARRAY['set/a', 'set/c', 'set/d'], NULL, '300 ms')$$);
SELECT count(*) AS mine FROM zk_locks WHERE pid = pg_backend_pid();
SELECT * FROM dblink('o', $$SELECT zk_lock_release_all()$$) AS t(n integer);

-- bad sets
SELECT err($$SELECT zk_lock_acquire_all(ARRAY[]::text[])$$);
SELECT err($$SELECT zk_lock_acquire_all(ARRAY['a', 'b'], ARRAY['shared'])$$);
SELECT err($$SELECT zk_lock_acquire_all(ARRAY['a', NULL])$$);
SELECT err($$SELECT zk_lock_acquire_all(ARRAY['a', 'b/../c'])$$);

-- a parent held only for its children's sake cannot be released by itself:
-- the hint says to release the child locks, naming one
SELECT zk_lock_acquire_session('imp/t') > 0 AS ok;
SELECT err($$SELECT zk_lock_acquire_session('imp')$$);
SELECT zk_lock_release('imp', 'shared') AS released_directly;
SELECT zk_lock_release('imp/t');
SELECT zk_lock_acquire_session('imp') > 0 AS granted_now;
SELECT zk_lock_release('imp');
-- held both for itself and for a child: both must go
SELECT zk_lock_acquire_session('imp', 'shared') > 0 AS ok;
SELECT zk_lock_acquire_session('imp/t') > 0 AS ok;
SELECT err($$SELECT zk_lock_acquire_session('imp')$$);
SELECT zk_lock_release_all();
-- held for a transaction-level child: until the transaction ends
BEGIN;
SELECT zk_lock_acquire('imp/x/y') > 0 AS ok;
SELECT err($$SELECT zk_lock_acquire('imp/x')$$);
ROLLBACK;
SELECT count(*) AS imp_left FROM zk_locks WHERE resource LIKE 'imp%';

SELECT dblink_disconnect('o');
SELECT count(*) AS left_over FROM zk_locks;
