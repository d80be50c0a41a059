--
-- Scopes and stacking, as pg_advisory_lock users know them.
--

-- transaction scope: released at COMMIT and at ROLLBACK
BEGIN;
SELECT zk_lock_acquire('scope/x') > 0 AS ok;
SELECT count(*) FROM zk_locks WHERE resource = 'scope/x';
ROLLBACK;
SELECT count(*) AS after_rollback FROM zk_locks WHERE resource = 'scope/x';

-- outside an explicit transaction, a transaction lock lasts one statement
SELECT zk_lock_acquire('scope/x') > 0 AS ok;
SELECT count(*) AS after_statement FROM zk_locks WHERE resource = 'scope/x';

-- stacking: the same token, one node, held until released as often
SELECT zk_lock_acquire_session('scope/s') AS s1 \gset
SELECT zk_lock_acquire_session('scope/s') AS s2 \gset
SELECT :s1 = :s2 AS same_token;
SELECT count(*) AS one_node FROM zk_locks WHERE resource = 'scope/s';
SELECT zk_lock_release('scope/s');
SELECT count(*) AS still_held FROM zk_locks WHERE resource = 'scope/s';
SELECT zk_lock_release('scope/s');
SELECT count(*) AS released FROM zk_locks WHERE resource = 'scope/s';
SELECT zk_lock_release('scope/s');

-- session and transaction holds of one lock share its node
BEGIN;
SELECT zk_lock_acquire('scope/m') AS m1 \gset
SELECT zk_lock_acquire_session('scope/m') AS m2 \gset
COMMIT;
SELECT :m1 = :m2 AS same_token;
SELECT count(*) AS session_hold_remains FROM zk_locks WHERE resource = 'scope/m';
SELECT zk_lock_release('scope/m');
SELECT count(*) AS gone FROM zk_locks WHERE resource = 'scope/m';

-- a transaction lock cannot be released with zk_lock_release
BEGIN;
SELECT zk_lock_acquire('scope/t') > 0 AS ok;
SELECT zk_lock_release('scope/t');
SELECT count(*) AS still_held FROM zk_locks WHERE resource = 'scope/t';
COMMIT;

-- one backend cannot hold a resource in both modes: it would wait for itself
BEGIN;
SELECT zk_lock_acquire('scope/u', 'shared') > 0 AS ok;
SELECT err($$SELECT zk_lock_acquire('scope/u', 'exclusive')$$);
ROLLBACK;

-- savepoints: ROLLBACK TO releases what the subtransaction took
BEGIN;
SELECT zk_lock_acquire('scope/p1') > 0 AS ok;
SAVEPOINT a;
SELECT zk_lock_acquire('scope/p2') > 0 AS ok;
SELECT zk_lock_acquire('scope/p1') > 0 AS stacked;
SELECT resource FROM zk_locks WHERE resource LIKE 'scope/p%' ORDER BY 1;
ROLLBACK TO a;
SELECT resource FROM zk_locks WHERE resource LIKE 'scope/p%' ORDER BY 1;
SAVEPOINT b;
SELECT zk_lock_acquire('scope/p3') > 0 AS ok;
RELEASE b;
SELECT resource FROM zk_locks WHERE resource LIKE 'scope/p%' ORDER BY 1;
COMMIT;
SELECT count(*) AS after_commit FROM zk_locks WHERE resource LIKE 'scope/p%';

-- an error in a subtransaction (PL/pgSQL exception block) releases its locks
DO $$
BEGIN
  BEGIN
    PERFORM zk_lock_acquire('scope/plpgsql');
    RAISE EXCEPTION 'boom';
  EXCEPTION WHEN others THEN
    RAISE NOTICE 'caught: %', SQLERRM;
  END;
  RAISE NOTICE 'nodes after the block: %',
    (SELECT count(*) FROM zk_locks WHERE resource = 'scope/plpgsql');
END $$;

-- PREPARE TRANSACTION with transaction locks is refused (and rolls back)
BEGIN;
SELECT zk_lock_acquire('scope/2pc') > 0 AS ok;
PREPARE TRANSACTION 'zk';
SELECT count(*) AS after_failed_prepare FROM zk_locks WHERE resource = 'scope/2pc';
-- the refusal names zklock even where PREPARE would otherwise work
SELECT zk_lock_acquire_session('scope/2pc') > 0 AS ok;
SELECT zk_lock_release_all();

-- Mixed scopes: what zk_locks shows (read from the node data, as any other
-- instance reads it) follows the holds that remain.  Session wins over
-- transaction; a lock is implicit only while every hold is a child's.
BEGIN;
SELECT zk_lock_acquire('mix/a') > 0 AS ok;            -- + mix, implicit
SELECT zk_lock_acquire_session('mix/a') > 0 AS ok;
SELECT wait_until($$(SELECT string_agg(resource || ':' || scope || ':' || implicit, ' ' ORDER BY resource)
                     FROM zk_locks WHERE pid = pg_backend_pid() AND resource LIKE 'mix%')
                    = 'mix:session:true mix/a:session:false'$$, 5) AS session_wins;
COMMIT;
SELECT wait_until($$(SELECT string_agg(resource || ':' || scope || ':' || implicit, ' ' ORDER BY resource)
                     FROM zk_locks WHERE pid = pg_backend_pid() AND resource LIKE 'mix%')
                    = 'mix:session:true mix/a:session:false'$$, 5) AS session_after_commit;
-- the parent taken by name too: no longer implicit, and again once released
SELECT zk_lock_acquire_session('mix', 'shared') > 0 AS ok;
SELECT wait_until($$(SELECT implicit FROM zk_locks
                     WHERE pid = pg_backend_pid() AND resource = 'mix') = false$$, 5) AS named;
SELECT zk_lock_release('mix', 'shared');
SELECT wait_until($$(SELECT implicit FROM zk_locks
                     WHERE pid = pg_backend_pid() AND resource = 'mix') = true$$, 5) AS implicit_again;
-- a session hold released inside a transaction that still holds it
BEGIN;
SELECT zk_lock_acquire('mix/a') > 0 AS ok;
SELECT zk_lock_release('mix/a');
SELECT wait_until($$(SELECT string_agg(resource || ':' || scope || ':' || implicit, ' ' ORDER BY resource)
                     FROM zk_locks WHERE pid = pg_backend_pid() AND resource LIKE 'mix%')
                    = 'mix:transaction:true mix/a:transaction:false'$$, 5) AS transaction_left;
COMMIT;
SELECT count(*) AS mix_nodes FROM zk_locks WHERE resource LIKE 'mix%';
