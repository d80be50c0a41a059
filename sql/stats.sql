--
-- Statistics (1.6): zk_lock_stats counts, per resource and mode, what this
-- instance's backends did, after a known sequence; zk_lock_stats_reset;
-- zklock.track_stats; zk_lock_waits while a backend waits.
--
SELECT zk_lock_stats_reset();
CREATE VIEW st AS
  SELECT resource, mode, acquisitions AS acq, granted_at_once AS at_once,
         waited, not_granted AS refused, timeouts, cancels, deadlocks, lost
  FROM zk_lock_stats WHERE resource = 'st' OR resource LIKE 'st/%'
  ORDER BY resource, mode;
SELECT * FROM st;

-- a session lock taken twice (one node: counted once) with its parent's
-- SHARED lock (a node too, counted under the parent), held 50 ms at least
SELECT zk_lock_acquire_session('st/a') > 0 AS ok;
SELECT zk_lock_acquire_session('st/a') > 0 AS ok;
SELECT pg_sleep(0.05);
SELECT zk_lock_release('st/a') AS released, zk_lock_release('st/a') AS released;
SELECT * FROM st;
SELECT resource, mode, total_held_time >= 50 AS held_50ms,
       max_held_time = total_held_time AS one_hold,
       total_wait_time = 0 AS no_wait
FROM zk_lock_stats WHERE resource IN ('st', 'st/a') ORDER BY resource;

-- transaction scope: a SHARED lock, released at COMMIT (its hold counted)
BEGIN;
SELECT zk_lock_acquire('st/b', 'shared') > 0 AS ok;
SELECT pg_sleep(0.02);
COMMIT;
SELECT * FROM st WHERE resource IN ('st', 'st/b');
SELECT max_held_time >= 20 AS held_20ms FROM zk_lock_stats WHERE resource = 'st/b';

-- another backend of this instance holds st/c (its acquisitions count too:
-- the statistics are the instance's)
SELECT dblink_connect('o', self_dsn() || ' application_name=st_holder');
SELECT * FROM dblink('o', $$SELECT zk_lock_acquire_session('st/c') > 0$$) AS t(ok boolean);

-- a try-lock refused: not granted, no wait
SELECT zk_lock_try_acquire_session('st/c') IS NULL AS refused;
SELECT zk_lock_try_acquire('st/c', parents => false) IS NULL AS refused;
SELECT * FROM st WHERE resource = 'st/c';

-- a timeout: counted as waited and timed out (the wait is the call's
-- 200 ms less the microseconds before its request)
SELECT err($$SELECT zk_lock_acquire_session('st/c', timeout => '200 ms', parents => false)$$);
-- lock_timeout: the same
SET lock_timeout = '150ms';
SELECT err($$SELECT zk_lock_acquire_session('st/c', parents => false)$$);
RESET lock_timeout;
SELECT * FROM st WHERE resource = 'st/c';
SELECT waited, max_wait_time >= 195 AS max_195ms, total_wait_time >= 345 AS total_345ms,
       max_wait_time < total_wait_time AS two_waits
FROM zk_lock_stats WHERE resource = 'st/c';

-- statement_timeout cancels the wait: a cancel (57014 is not caught by
-- err(): PL/pgSQL's OTHERS does not catch a cancel)
SET statement_timeout = '150ms';
SELECT zk_lock_acquire_session('st/c', parents => false);
RESET statement_timeout;
SELECT * FROM st WHERE resource = 'st/c';

-- zk_lock_waits: a backend waiting behind the holder's node
SELECT dblink_connect('w', self_dsn() || ' application_name=st_waiter');
SELECT * FROM dblink('w', $$SELECT pg_backend_pid()$$) AS t(pid integer) \gset w_
SELECT * FROM dblink('o', $$SELECT pg_backend_pid()$$) AS t(pid integer) \gset o_
SELECT total_wait_time AS tw0 FROM zk_lock_stats WHERE resource = 'st/c' \gset
SELECT dblink_send_query('w', $$SELECT zk_lock_acquire_session('st/c', parents => false) > 0$$);
SELECT wait_until($$(SELECT count(*) FROM zk_lock_waits WHERE resource = 'st/c') = 1$$, 10) AS waiting;
SELECT w.pid = :w_pid AS waiter, w.mode,
       w.node = (SELECT node FROM zk_locks l WHERE l.resource = 'st/c' AND NOT l.granted) AS own_node,
       w.waits_behind = (SELECT node FROM zk_lock_local l WHERE l.pid = :o_pid AND l.resource = 'st/c') AS behind_holder,
       w.waiting_since <= now() AS since
FROM zk_lock_waits w;
-- the holder goes; the waiter is granted after waiting
SELECT pg_sleep(0.1);
SELECT * FROM dblink('o', $$SELECT zk_lock_release('st/c')$$) AS t(ok boolean);
SELECT * FROM dblink_get_result('w') AS t(ok boolean);
SELECT count(*) AS no_more FROM dblink_get_result('w') AS t(ok boolean);
SELECT count(*) AS waits_left FROM zk_lock_waits WHERE resource = 'st/c';
SELECT * FROM dblink('w', $$SELECT zk_lock_release('st/c')$$) AS t(ok boolean);
SELECT dblink_disconnect('w');
SELECT dblink_disconnect('o');
SELECT * FROM st WHERE resource = 'st/c';
SELECT total_wait_time - :tw0 >= 100 AS granted_wait_100ms FROM zk_lock_stats WHERE resource = 'st/c';

-- a session lock its backend still holds at exit: the hold is counted then
SELECT dblink_connect('x', self_dsn() || ' application_name=st_exit');
SELECT * FROM dblink('x', $$SELECT zk_lock_acquire_session('st/exit', parents => false) > 0$$) AS t(ok boolean);
SELECT dblink_disconnect('x');
SELECT wait_until($$(SELECT max_held_time > 0 FROM zk_lock_stats WHERE resource = 'st/exit')$$, 10) AS held_counted_at_exit;

-- a semaphore's slot counts under the mode 'semaphore'
SELECT zk_semaphore_try_acquire_session('st/sem', 2) > 0 AS ok;
SELECT zk_semaphore_release('st/sem') AS released;
SELECT * FROM st WHERE resource = 'st/sem';

-- an explicit lock counts when it is taken (acquisitions; its held time is
-- nobody's), and a refused try on it too
SELECT zk_lock_acquire_explicit('st/expl', ttl => '1 min') > 0 AS ok;
SELECT err($$SELECT zk_lock_acquire_explicit('st/expl', timeout => '0', ttl => '1 min')$$);
SELECT zk_lock_release_explicit('st/expl') AS released;
SELECT resource, mode, acquisitions, granted_at_once, waited, not_granted,
       total_held_time
FROM zk_lock_stats WHERE resource = 'st/expl';

-- zklock.track_stats off: nothing is counted
SET zklock.track_stats = off;
SELECT zk_lock_acquire_session('st/off', parents => false) > 0 AS ok;
SELECT zk_lock_release('st/off') AS released;
RESET zklock.track_stats;
SELECT count(*) AS counted_off FROM zk_lock_stats WHERE resource = 'st/off';

-- a role without grants reads the view, but may neither reset it, nor
-- turn counting off, nor read zk_lock_waits (it names backends)
CREATE ROLE regress_zkl_stats;
SET ROLE regress_zkl_stats;
SELECT count(*) > 0 AS readable FROM zk_lock_stats WHERE resource LIKE 'st/%';
SELECT err($$SELECT zk_lock_stats_reset()$$);
SELECT err($$SET zklock.track_stats = off$$);
SELECT err($$SELECT * FROM zk_lock_waits$$);
RESET ROLE;
-- a monitoring role (pg_monitor, through pg_read_all_stats) reads it
GRANT pg_monitor TO regress_zkl_stats;
SET ROLE regress_zkl_stats;
SELECT count(*) >= 0 AS monitor_reads FROM zk_lock_waits;
SELECT count(*) >= 0 AS monitor_calls FROM zk_lock_waits();
RESET ROLE;
DROP ROLE regress_zkl_stats;

-- the reset forgets every count
SELECT zk_lock_stats_reset();
SELECT count(*) AS after_reset FROM zk_lock_stats;
DROP VIEW st;

-- doc/operations.md's two queries run as written
SELECT count(*) >= 0 AS runs FROM (
SELECT resource, mode, acquisitions, waited,
       round((total_wait_time / nullif(waited, 0))::numeric, 1) AS mean_wait_ms,
       max_wait_time, timeouts, cancels, deadlocks, lost
FROM zk_lock_stats ORDER BY total_wait_time DESC LIMIT 10) q;
SELECT count(*) >= 0 AS runs FROM (
SELECT w.pid, w.resource, w.mode, w.waits_behind, now() - w.waiting_since AS waiting
FROM zk_lock_waits w ORDER BY waiting_since) q;
