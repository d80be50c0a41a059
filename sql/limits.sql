--
-- Limits and edge values (trust issue, findings 7, 9 and 11).
--

-- A zero timeout is a try that raises 55P03 only when something is really
-- held elsewhere: with parents and with a lock set too (finding 11).
BEGIN;
SELECT zk_lock_acquire('lim0/a/b', timeout => '0') > 0 AS granted_with_parents;
SELECT array_length(zk_lock_acquire_all(ARRAY['lim0/x/1', 'lim0/y/2', 'lim0/z'], NULL, '0'), 1)
  AS set_granted;
SELECT count(*) AS nodes FROM zk_lock_local WHERE pid = pg_backend_pid();
COMMIT;
SELECT zk_lock_acquire_session('lim0/s/t', timeout => '0 s') > 0 AS session_granted;
SELECT zk_lock_acquire_all_session(ARRAY['lim0/s/u', 'lim0/v'], NULL, '0') IS NOT NULL
  AS session_set_granted;
SELECT zk_lock_release_all();

-- ... and it does raise 55P03 when another session holds a member
SELECT dblink_connect('lim', self_dsn() || ' application_name=lim_holder');
SELECT * FROM dblink('lim', $$SELECT zk_lock_acquire_session('lim0/held/c') > 0$$) AS t(ok boolean);
SELECT err($q$SELECT zk_lock_acquire('lim0/held/c/d', timeout => '0')$q$);
SELECT err($q$SELECT zk_lock_acquire_all(ARRAY['lim0/free', 'lim0/held/c'], NULL, '0')$q$);
SELECT err($q$SELECT zk_lock_acquire('lim0/held/c', 'shared', '0', false)$q$);
SELECT count(*) AS left_behind FROM zk_lock_local WHERE pid = pg_backend_pid();
SELECT * FROM dblink('lim', 'SELECT zk_lock_release_all()') AS t(n integer);
SELECT dblink_disconnect('lim');

-- Names with code points ZooKeeper refuses (PathUtils.validatePath: C1
-- controls, surrogates and private use, U+FFF0..U+FFFF; a code point past
-- U+FFFF is a surrogate pair in Java): 22023 before anything is sent
SELECT err($q$SELECT zk_lock_acquire('lim1/' || chr(128))$q$);
SELECT err($q$SELECT zk_lock_acquire('lim1/a' || chr(159) || 'b')$q$);
SELECT err($q$SELECT zk_lock_try_acquire('lim1/' || chr(57344))$q$);
SELECT err($q$SELECT zk_lock_try_acquire('lim1/' || chr(63743))$q$);
SELECT err($q$SELECT zk_lock_acquire_session('lim1/' || chr(65520))$q$);
SELECT err($q$SELECT zk_lock_acquire_session('lim1/' || chr(65535))$q$);
SELECT err($q$SELECT zk_lock_acquire_all(ARRAY['lim1/ok', 'lim1/' || chr(128512)])$q$);
SELECT err($q$SELECT zk_lock_release('lim1/' || chr(65535))$q$);
-- the code points around them are fine
SELECT zk_lock_try_acquire('lim1/' || chr(160) || chr(55295) || chr(63744) || chr(65519)) > 0
  AS edges_granted;

-- NULL arguments give 22004, as doc/sql.md says
SELECT err($q$SELECT zk_lock_release(NULL)$q$);
SELECT err($q$SELECT zk_lock_release('lim2/a', NULL)$q$);
SELECT err($q$SELECT zk_lock_release_explicit(NULL)$q$);
SELECT err($q$SELECT zk_lock_release_explicit('lim2/a', NULL)$q$);
SELECT err($q$SELECT zk_lock_revoke(NULL)$q$);
SELECT err($q$SELECT zk_lock_revoke('lim2/a', NULL)$q$);
SELECT err($q$SELECT zk_lock_force_release(NULL)$q$);
SELECT err($q$SELECT zk_lock_force_release(NULL, NULL)$q$);
-- a NULL node is still "every granted node"
SELECT zk_lock_force_release('lim2/a', NULL) AS removed;

-- Which subtrees a role may lock: zklock.allowed_subtrees (finding 9)
SHOW zklock.allowed_subtrees;
SET zklock.allowed_subtrees = 'lim3/etl, lim3/reports/daily';
BEGIN;
SELECT zk_lock_acquire('lim3/etl/job/step') > 0 AS allowed_with_parents;
SELECT zk_lock_acquire('lim3/etl', 'shared') > 0 AS allowed_root_of_subtree;
SELECT zk_lock_acquire('lim3/reports/daily/x', 'shared') > 0 AS allowed_second_item;
SELECT err($q$SELECT zk_lock_acquire('lim3/etlx')$q$);
SELECT err($q$SELECT zk_lock_acquire('lim3')$q$);
SELECT err($q$SELECT zk_lock_try_acquire('lim3/reports')$q$);
SELECT err($q$SELECT zk_lock_acquire_session('other/x')$q$);
SELECT err($q$SELECT zk_lock_acquire_all(ARRAY['lim3/etl/a', 'other/y'])$q$);
SELECT err($q$SELECT zk_lock_acquire_explicit('other/z', ttl => '1 minute')$q$);
COMMIT;
SET zklock.allowed_subtrees = '';
SELECT err($q$SELECT zk_lock_acquire('lim3/etl')$q$);
RESET zklock.allowed_subtrees;
SELECT zk_lock_try_acquire('lim3/any') > 0 AS open_again;
-- only a superuser sets it
CREATE ROLE lim_user;
SET ROLE lim_user;
SELECT err($q$SET zklock.allowed_subtrees = '*'$q$);
RESET ROLE;
DROP ROLE lim_user;
SELECT err($q$SET zklock.allowed_subtrees = 'a,,b'$q$);
SELECT err($q$SET zklock.allowed_subtrees = '/abs'$q$);

-- A lock set is counted with its parents not held yet, each once
-- (zklock.max_locks_per_backend is 32 here): 20 members under 20 parents
-- need 41 entries and fail before anything is taken ...
-- (the releases above are the worker's to finish: wait for them, bounded)
SELECT wait_until($$(SELECT count(*) FROM zk_lock_local WHERE pid = pg_backend_pid()) = 0$$, 10) AS released;
SELECT granted AS granted_before FROM zk_lock_status \gset
SELECT err($q$SELECT zk_lock_acquire_all(ARRAY(SELECT 'lim4/p' || i || '/c' FROM generate_series(1, 20) i))$q$);
SELECT count(*) AS taken FROM zk_lock_local WHERE pid = pg_backend_pid();
SELECT granted - :granted_before AS granted_meanwhile FROM zk_lock_status;
-- ... while 30 members under one parent need 32: granted
BEGIN;
SELECT array_length(zk_lock_acquire_all(ARRAY(SELECT 'lim4/q/c' || i FROM generate_series(1, 30) i)), 1)
  AS members_granted;
SELECT count(*) AS nodes FROM zk_lock_local WHERE pid = pg_backend_pid();
COMMIT;

-- nothing was left behind
SELECT count(*) AS lock_nodes FROM zk_locks WHERE pid = pg_backend_pid();

-- doc/settings.md's shared memory figures (max_locks): bytes per entry (the entry
-- and its place in the worker's queue; the per-slot arrays -- 20 bytes a
-- slot: the commit window, its groups, the counts of entries and of those
-- being removed -- are taken off for the slots of backends and workers;
-- the allocation's header and the auxiliary processes' slots, whose
-- number changes with the major, are less than one byte per entry, so the
-- division drops them), and per connection slot by default (its share of
-- entries and its two 4-byte counters: entries, and those being removed)
SELECT (a.size - 20 * n.slots) / n.entries AS bytes_per_entry,
       (a.size - 20 * n.slots) / n.entries * current_setting('zklock.max_locks_per_backend')::int + 8
         AS bytes_per_connection_slot
FROM pg_shmem_allocations a,
     (SELECT slots, slots * current_setting('zklock.max_locks_per_backend')::int + 16 AS entries
      FROM (SELECT current_setting('max_connections')::int
              -- autovacuum's workers, their launcher; from 17 the slot sync
              -- worker; from 18 the slots of autovacuum's workers
              + CASE WHEN v >= 180000 THEN current_setting('autovacuum_worker_slots')::int
                     ELSE current_setting('autovacuum_max_workers')::int END
              + CASE WHEN v >= 170000 THEN 2 ELSE 1 END
              + current_setting('max_worker_processes')::int + current_setting('max_wal_senders')::int
              AS slots
            FROM (SELECT current_setting('server_version_num')::int AS v) s) m) n
WHERE a.name = 'zklock';
