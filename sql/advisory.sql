--
-- The advisory-lock API: PostgreSQL's pg_advisory_* over ZooKeeper.
--
-- this session's advisory nodes, the database's name shown as <db>
CREATE FUNCTION adv_held() RETURNS TABLE (resource text, mode text, state text)
LANGUAGE sql AS $$
  SELECT replace(resource, current_database(), '<db>'), mode, state
  FROM zk_lock_local
  WHERE pid = pg_backend_pid() AND resource LIKE 'zklock.advisory/%'
    AND state <> 'releasing'
  ORDER BY 1, 2
$$;
SELECT dblink_connect('o', self_dsn() || ' application_name=other');

-- every signature, and the return types of PostgreSQL's; PARALLEL UNSAFE
-- where PostgreSQL's are restricted
SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args,
       p.prorettype::regtype AS zk_returns, p.proisstrict AS strict,
       p.prorettype = pg.prorettype AND p.proisstrict = pg.proisstrict AS as_pg,
       p.proparallel AS zk_parallel, pg.proparallel AS pg_parallel
FROM pg_proc p
  JOIN pg_proc pg ON pg.proname = 'pg' || substr(p.proname, 3)
                 AND pg.proargtypes = p.proargtypes
WHERE p.proname LIKE 'zk\_%advisory%'
ORDER BY 1, 2;

-- session level: holds stack, each unlock drops one
SELECT zk_advisory_lock(42);
SELECT zk_advisory_lock(42);
SELECT * FROM adv_held();
SELECT * FROM dblink('o', 'SELECT zk_try_advisory_lock(42)') AS t(got boolean);
SELECT zk_advisory_unlock(42);
SELECT * FROM dblink('o', 'SELECT zk_try_advisory_lock(42)') AS t(got boolean);
SELECT zk_advisory_unlock(42);
SELECT * FROM adv_held();
-- not held: false, and PostgreSQL's WARNING
SELECT zk_advisory_unlock(42);
SELECT zk_advisory_unlock_shared(42);
SELECT zk_advisory_unlock(1, 2);
-- the other session can have it now, and gives it back
SELECT * FROM dblink('o', 'SELECT zk_try_advisory_lock(42)') AS t(got boolean);
SELECT zk_try_advisory_lock(42) AS while_other_holds;
SELECT * FROM dblink('o', 'SELECT zk_advisory_unlock(42)') AS t(released boolean);
SELECT zk_try_advisory_lock(42) AS after_other_released;
SELECT zk_advisory_unlock(42);

-- the two key spaces stay apart: (0, 42) is not 42
SELECT zk_advisory_lock(0, 42);
SELECT * FROM dblink('o', 'SELECT zk_try_advisory_lock(42)') AS t(got boolean);
SELECT * FROM dblink('o', 'SELECT zk_try_advisory_lock(0, 42)') AS t(got boolean);
SELECT * FROM adv_held();
SELECT * FROM dblink('o', 'SELECT zk_advisory_unlock(42)') AS t(released boolean);
SELECT zk_advisory_unlock(0, 42);

-- shared: with each other, not with exclusive
SELECT zk_advisory_lock_shared(7);
SELECT * FROM dblink('o', 'SELECT zk_try_advisory_lock_shared(7)') AS t(got boolean);
SELECT * FROM dblink('o', 'SELECT zk_try_advisory_lock(7)') AS t(got boolean);
SELECT * FROM dblink('o', 'SELECT zk_advisory_unlock_shared(7)') AS t(released boolean);
SELECT zk_try_advisory_lock_shared(7) AS stacked;
SELECT zk_advisory_unlock_shared(7), zk_advisory_unlock_shared(7), zk_advisory_unlock_shared(7);
SELECT zk_try_advisory_lock_shared(3, 4), zk_advisory_unlock_shared(3, 4);
SELECT zk_advisory_lock_shared(3, 4), zk_advisory_unlock_shared(3, 4);
SELECT zk_try_advisory_lock(3, 4), zk_advisory_unlock(3, 4);

-- transaction level: ends with the transaction; unlock does not touch it
BEGIN;
SELECT zk_advisory_xact_lock(5);
SELECT zk_advisory_xact_lock(5);
SELECT zk_try_advisory_xact_lock(6), zk_try_advisory_xact_lock_shared(8);
SELECT zk_advisory_xact_lock_shared(9), zk_advisory_xact_lock(1, 1),
       zk_advisory_xact_lock_shared(1, 2);
SELECT zk_try_advisory_xact_lock(2, 1), zk_try_advisory_xact_lock_shared(2, 2);
SELECT zk_advisory_unlock(5);
SELECT * FROM adv_held();
SELECT * FROM dblink('o', 'SELECT zk_try_advisory_xact_lock(5)') AS t(got boolean);
COMMIT;
SELECT * FROM adv_held();
SELECT * FROM dblink('o', 'SELECT zk_try_advisory_xact_lock(5)') AS t(got boolean);
-- a session hold and a transaction hold of one key share its node
BEGIN;
SELECT zk_advisory_lock(10);
SELECT zk_advisory_xact_lock(10);
SELECT * FROM adv_held();
ROLLBACK;
SELECT * FROM adv_held();
SELECT zk_advisory_unlock(10);
-- a session-level hold outlives the aborted transaction that took it, as in
-- PostgreSQL
BEGIN;
SELECT zk_advisory_lock(12);
SAVEPOINT s;
SELECT zk_advisory_lock(12);
ROLLBACK TO s;
ROLLBACK;
SELECT * FROM adv_held();
SELECT zk_advisory_unlock(12), zk_advisory_unlock(12), zk_advisory_unlock(12);
-- ROLLBACK TO gives back what the subtransaction took, as PostgreSQL does
BEGIN;
SAVEPOINT s;
SELECT zk_advisory_xact_lock(11);
ROLLBACK TO s;
SELECT * FROM adv_held();
COMMIT;

-- unlock_all: every session-level advisory hold, not zk_lock_* locks, not
-- transaction-level holds
SELECT zk_lock_acquire_session('adv/plain') > 0 AS ok;
BEGIN;
SELECT zk_advisory_lock(20), zk_advisory_lock(20), zk_advisory_lock_shared(21),
       zk_advisory_lock(2, 0), zk_advisory_xact_lock(22);
SELECT zk_advisory_unlock_all();
SELECT * FROM adv_held();
SELECT count(*) AS plain_kept FROM zk_lock_local
WHERE pid = pg_backend_pid() AND resource = 'adv/plain';
COMMIT;
SELECT * FROM adv_held();
SELECT zk_lock_release('adv/plain');
SELECT zk_advisory_unlock_all();
-- zk_lock_release_all releases every session-level lock, advisory ones too
SELECT zk_advisory_lock(13), zk_advisory_lock_shared(14);
SELECT zk_lock_release_all();
SELECT * FROM adv_held();

-- STRICT, as PostgreSQL's: NULL in, NULL out, nothing taken
SELECT zk_advisory_lock(NULL) IS NULL AS n1, zk_try_advisory_lock(NULL, 1) IS NULL AS n2,
       zk_advisory_unlock(NULL::bigint) IS NULL AS n3,
       zk_try_advisory_xact_lock_shared(1, NULL) IS NULL AS n4;
SELECT * FROM adv_held();

-- one backend may hold a key both shared and exclusive, either way round
SELECT zk_advisory_lock_shared(30);
SELECT zk_try_advisory_lock(30) AS exclusive_too;
SELECT * FROM adv_held();
SELECT * FROM dblink('o', 'SELECT zk_try_advisory_lock_shared(30)') AS t(got boolean);
SELECT zk_advisory_unlock(30);
SELECT * FROM dblink('o', 'SELECT zk_try_advisory_lock_shared(30)') AS t(got boolean);
SELECT * FROM dblink('o', 'SELECT zk_advisory_unlock_shared(30)') AS t(released boolean);
SELECT zk_advisory_lock(31);
SELECT zk_advisory_lock_shared(31);
SELECT * FROM adv_held();
-- zk_locks cannot tell whose nodes they are: the second shows as waiting
SELECT mode, granted FROM zk_locks
WHERE resource = 'zklock.advisory/' || current_database() || '/31' ORDER BY mode;
SELECT zk_advisory_unlock(31), zk_advisory_unlock(31);
SELECT * FROM dblink('o', 'SELECT zk_try_advisory_lock(31)') AS t(got boolean);
SELECT zk_advisory_unlock_all();
SELECT * FROM adv_held();
-- zk_lock_* keeps its rule: one mode per resource and session
SELECT zk_lock_acquire_session('adv/one', 'shared') > 0 AS ok;
SELECT err($$SELECT zk_lock_acquire_session('adv/one', 'exclusive')$$);
SELECT zk_lock_release('adv/one', 'shared');

-- waiting: lock_timeout gives 55P03 as PostgreSQL does, statement_timeout
-- 57014; nothing is left behind
SELECT * FROM dblink('o', 'SELECT zk_try_advisory_lock(40)') AS t(got boolean);
SET lock_timeout = '200ms';
SELECT err($$SELECT zk_advisory_lock(40)$$);
SELECT err($$SELECT zk_advisory_xact_lock_shared(40)$$);
RESET lock_timeout;
SET statement_timeout = '200ms';
SELECT zk_advisory_lock(40);
RESET statement_timeout;
SELECT * FROM adv_held();
SELECT * FROM dblink('o', 'SELECT zk_advisory_unlock(40)') AS t(released boolean);

-- users cannot name the keys' resources themselves
SELECT err($$SELECT zk_lock_try_acquire('zklock.advisory/' || current_database() || '/42')$$) ~ 'must not begin with "zklock."' AS refused;
SELECT err($$SELECT zk_lock_release('zklock.advisory/x/42')$$) ~ 'must not begin with "zklock."' AS refused;

-- zklock.advisory_namespace: a superuser's setting
SHOW zklock.advisory_namespace;
SET zklock.advisory_namespace = 'shared-ns';
SELECT zk_advisory_lock(50);
SELECT * FROM adv_held();
RESET zklock.advisory_namespace;
-- unlock names the key in the current namespace; unlock_all every namespace
SELECT zk_advisory_unlock(50);
SELECT zk_advisory_unlock_all();
SELECT * FROM adv_held();
-- escaped into one path segment: '/', '%', "." and ".." kept apart
SET zklock.advisory_namespace = 'a/b%c';
SELECT zk_advisory_lock(1);
SET zklock.advisory_namespace = '..';
SELECT zk_advisory_lock(1);
SET zklock.advisory_namespace = 'x-LOCK-EXCLUSIVE-0000000001';
SELECT zk_advisory_lock(1);
SET zklock.advisory_namespace = 'café';
SELECT zk_advisory_lock(1);
SELECT * FROM adv_held();
RESET zklock.advisory_namespace;
SELECT zk_advisory_unlock_all();
-- bad values: errors at SET, naming the rule
SELECT err($$SET zklock.advisory_namespace = 'a23456789012345678901234567890123456789012345678901234567890abcd'$$);
SELECT err($$SET zklock.advisory_namespace = E'tab\there'$$);
SELECT err($$SET zklock.advisory_namespace = 'privateuse'$$);
SELECT err($$ALTER DATABASE postgres SET zklock.advisory_namespace = E'x\ny'$$);
SHOW zklock.advisory_namespace;
-- not for other roles
CREATE ROLE adv_user;
SET ROLE adv_user;
SELECT err($$SET zklock.advisory_namespace = 'elsewhere'$$);
SELECT zk_try_advisory_lock(60), zk_advisory_unlock(60);
RESET ROLE;
DROP ROLE adv_user;

-- the edges of both key spaces
SELECT zk_try_advisory_lock(-9223372036854775808), zk_try_advisory_lock(9223372036854775807),
       zk_try_advisory_lock(-2147483648, 2147483647);
SELECT * FROM adv_held();
SELECT zk_advisory_unlock_all();

-- listed by subtree; a superuser frees a key another session holds
SELECT * FROM dblink('o', 'SELECT zk_try_advisory_lock(95)') AS t(got boolean);
SELECT count(*) AS listed FROM zk_locks('zklock.advisory/' || current_database() || '/95');
SELECT count(*) AS listed FROM zk_locks('zklock.advisory')
WHERE resource = 'zklock.advisory/' || current_database() || '/95';
SELECT zk_lock_force_release('zklock.advisory/' || current_database() || '/95') AS freed;
SELECT zk_try_advisory_lock(95) AS got_it, zk_advisory_unlock(95);
SELECT * FROM dblink('o', 'SELECT zk_advisory_unlock(95)') AS t(released boolean);
-- zk_lock_revoke too: 'terminate' ends the holder's session, and its lock
SELECT dblink_connect('r', self_dsn() || ' application_name=revoked');
SELECT * FROM dblink('r', 'SELECT zk_try_advisory_lock(96)') AS t(got boolean);
SELECT zk_lock_revoke('zklock.advisory/' || current_database() || '/96', 'terminate') AS revoked;
SELECT wait_until($$zk_try_advisory_lock(96)$$, 10) AS got_it;
SELECT zk_advisory_unlock(96);
SELECT dblink_disconnect('r');
SELECT err($$SELECT zk_locks('zklock.advisoryx')$$) ~ 'must not begin with "zklock."' AS refused;
SELECT err($$SELECT zk_locks('zklock.advisory/')$$) ~ 'must not end with' AS refused;

-- differences from PostgreSQL
-- PREPARE TRANSACTION is refused while zk advisory locks are held
BEGIN;
SELECT zk_advisory_xact_lock(70);
PREPARE TRANSACTION 'adv';
SELECT * FROM adv_held();
SELECT zk_advisory_lock(71);
BEGIN;
PREPARE TRANSACTION 'adv2';
SELECT zk_advisory_unlock(71);
-- not in pg_locks; zk_lock_local and zk_locks list them
SELECT zk_advisory_lock(72);
SELECT count(*) AS in_pg_locks FROM pg_locks WHERE locktype = 'advisory';
SELECT count(*) AS in_zk_locks FROM zk_locks
WHERE resource = 'zklock.advisory/' || current_database() || '/72';
-- DISCARD ALL releases PostgreSQL's session advisory locks, not these
DISCARD ALL;
SELECT * FROM adv_held();
SELECT zk_advisory_unlock_all();
-- deadlocks are not detected (no 40P01): lock_timeout ends them
SELECT zk_advisory_lock(80);
SELECT * FROM dblink('o', 'SELECT zk_try_advisory_lock(81)') AS t(got boolean);
SELECT dblink_exec('o', $$SET lock_timeout = '10s'$$);
SELECT dblink_send_query('o', 'SELECT zk_advisory_lock(80)');
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource LIKE 'zklock.advisory/%/80' AND NOT granted) = 1$$, 10) AS other_waits;
SET lock_timeout = '300ms';
SELECT err($$SELECT zk_advisory_lock(81)$$);
RESET lock_timeout;
SELECT zk_advisory_unlock(80);
SELECT * FROM dblink_get_result('o') AS t(r text);
SELECT * FROM dblink_get_result('o') AS t(r text);
SELECT * FROM dblink('o', 'SELECT zk_advisory_unlock_all()') AS t(r text);
-- holding a key EXCLUSIVE, asking SHARED waits while another's request is
-- queued between (PostgreSQL grants it): lock_timeout ends the wait
SELECT zk_advisory_lock(90);
SELECT dblink_exec('o', $$SET lock_timeout = '10s'$$);
SELECT dblink_send_query('o', 'SELECT zk_advisory_lock(90)');
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource LIKE 'zklock.advisory/%/90' AND NOT granted) = 1$$, 10) AS other_waits;
SET lock_timeout = '300ms';
SELECT err($$SELECT zk_advisory_lock_shared(90)$$);
RESET lock_timeout;
SELECT zk_advisory_unlock(90);
SELECT * FROM dblink_get_result('o') AS t(r text);
SELECT * FROM dblink_get_result('o') AS t(r text);
SELECT * FROM dblink('o', 'SELECT zk_advisory_unlock_all()') AS t(r text);
-- the same holding SHARED and asking EXCLUSIVE
SELECT zk_advisory_lock_shared(91);
SELECT dblink_send_query('o', 'SELECT zk_advisory_lock(91)');
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource LIKE 'zklock.advisory/%/91' AND NOT granted) = 1$$, 10) AS other_waits;
SET lock_timeout = '300ms';
SELECT err($$SELECT zk_advisory_lock(91)$$);
RESET lock_timeout;
SELECT zk_advisory_unlock_shared(91);
SELECT * FROM dblink_get_result('o') AS t(r text);
SELECT * FROM dblink_get_result('o') AS t(r text);
SELECT * FROM dblink('o', 'SELECT zk_advisory_unlock_all()') AS t(r text);

SELECT dblink_disconnect('o');
DROP FUNCTION adv_held();
