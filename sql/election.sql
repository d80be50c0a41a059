--
-- Instance leadership: zk_is_leader, zk_leader, zk_elections and
-- zklock.elections (the worker's candidacies; test/t/065 and 066 run
-- them across instances).
--
-- signatures
SELECT p.oid::regprocedure AS function, pg_get_function_result(p.oid) AS result
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'zklock'
WHERE p.proname IN ('zk_is_leader', 'zk_leader', 'zk_elections')
ORDER BY 1::text;
SELECT has_table_privilege('public', 'zk_elections', 'SELECT') AS public_can_read;

-- NULL and bad group names are errors
SELECT zk_is_leader(NULL);
SELECT zk_leader(NULL);
SELECT zk_is_leader('');
SELECT zk_is_leader('..');
SELECT zk_is_leader('a/b');
SELECT zk_is_leader('a,b');
SELECT zk_is_leader(repeat('x', 64));
-- a group this instance is not a candidate of: false; nobody: no leader
SELECT zk_is_leader('regress_none') AS is_leader;
SELECT zk_leader('regress_none') AS leader;
SELECT count(*) FROM zk_elections;

-- the setting: reload only, checked
SET zklock.elections = 'x';
ALTER SYSTEM SET zklock.elections = 'a,a';
ALTER SYSTEM SET zklock.elections = 'a,,b';
ALTER SYSTEM SET zklock.elections = 'a b';
ALTER SYSTEM SET zklock.elections = '.';
ALTER SYSTEM SET zklock.elections = 'a/b';
ALTER SYSTEM SET zklock.elections = 'g1,g2,g3,g4,g5,g6,g7,g8,g9,g10,g11,g12,g13,g14,g15,g16,g17';
ALTER SYSTEM SET zklock.elections = ' regress_e1 , regress_e2 ';
SELECT pg_reload_conf();

-- alone in its groups, this instance leads both
SELECT wait_until($$zk_is_leader('regress_e1') AND zk_is_leader('regress_e2')$$, 20) AS leads;
SELECT zk_leader('regress_e1') ~ ('^regress \(' || (SELECT system_identifier FROM pg_control_system())
       || ':' || current_setting('port') || '\) on ') AS leader_is_us;
SELECT "group", cardinality(candidates) AS candidates, candidates[1] = leader AS first_leads,
       leader_since <= now() AS since_ok, is_leader
FROM zk_elections ORDER BY 1;

-- a writing transaction that relied on leadership lost before COMMIT
CREATE TABLE election_log (ran_at timestamptz);
BEGIN;
SELECT zk_is_leader('regress_e1') AS is_leader;
INSERT INTO election_log VALUES (now());
SELECT dblink_exec(self_dsn(), $$ALTER SYSTEM SET zklock.elections = 'regress_e2'$$);
SELECT pg_reload_conf();
SELECT wait_until($$NOT zk_is_leader('regress_e1')$$, 20) AS lost;
COMMIT;
SELECT count(*) FROM election_log;
-- a read-only transaction is not held up
BEGIN;
SELECT zk_is_leader('regress_e2') AS is_leader;
SELECT dblink_exec(self_dsn(), $$ALTER SYSTEM SET zklock.elections = ''$$);
SELECT pg_reload_conf();
SELECT wait_until($$NOT zk_is_leader('regress_e2')$$, 20) AS lost;
COMMIT;
-- one that still leads commits
ALTER SYSTEM SET zklock.elections = 'regress_e1';
SELECT pg_reload_conf();
SELECT wait_until($$zk_is_leader('regress_e1')$$, 20) AS leads;
BEGIN;
SELECT zk_is_leader('regress_e1') AS is_leader;
INSERT INTO election_log VALUES (now());
COMMIT;
SELECT count(*) FROM election_log;
-- PREPARE after relying on it is refused
BEGIN;
SELECT zk_is_leader('regress_e1') AS is_leader;
INSERT INTO election_log VALUES (now());
PREPARE TRANSACTION 'election';
-- relied on inside a subtransaction rolled back: still fenced at COMMIT
BEGIN;
SAVEPOINT s;
SELECT zk_is_leader('regress_e1') AS is_leader;
ROLLBACK TO s;
INSERT INTO election_log VALUES (now());
SELECT dblink_exec(self_dsn(), $$ALTER SYSTEM SET zklock.elections = ''$$);
SELECT pg_reload_conf();
SELECT wait_until($$NOT zk_is_leader('regress_e1')$$, 20) AS lost;
COMMIT;
SELECT count(*) FROM election_log;
-- the groups left: their nodes are gone
ALTER SYSTEM RESET zklock.elections;
SELECT pg_reload_conf();
SELECT wait_until($$zk_leader('regress_e1') IS NULL AND zk_leader('regress_e2') IS NULL$$, 20) AS gone;
SELECT count(*) FROM zk_elections;
DROP TABLE election_log;
