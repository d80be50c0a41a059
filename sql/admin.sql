--
-- Administration across holders: force release and revocation.
--
SELECT dblink_connect('h', self_dsn() || ' application_name=holder');

-- force release: the holder's transaction can no longer commit
SELECT dblink_exec('h', 'CREATE TABLE adm_t(v int)');
SELECT dblink_exec('h', 'BEGIN');
SELECT * FROM dblink('h', $$SELECT zk_lock_acquire('adm/x') > 0$$) AS t(ok boolean);
SELECT dblink_exec('h', 'INSERT INTO adm_t VALUES (1)');
SELECT zk_lock_force_release('adm/x') AS removed;
SELECT wait_until($$(SELECT count(*) FROM zk_lock_local WHERE resource = 'adm/x' AND state = 'lost') = 1$$, 5) AS ready;
SELECT resource, state FROM zk_lock_local WHERE resource = 'adm/x';
SELECT err($$SELECT dblink_exec('h', 'COMMIT')$$) ~ 'was lost; the transaction cannot commit' AS commit_refused;
SELECT dblink_exec('h', 'ROLLBACK');
SELECT count(*) AS rows_written FROM adm_t;
SELECT zk_lock_force_release('adm/x') AS nothing_left;

-- revoke with cancel: the holder's statement is canceled, its transaction
-- ends, the lock goes
SELECT dblink_connect('h2', self_dsn() || ' application_name=holder2');
SELECT dblink_send_query('h2', $$BEGIN; SELECT zk_lock_acquire('adm/r'); SELECT pg_sleep(30); COMMIT$$);
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'adm/r' AND granted) = 1$$, 5) AS ready;
SELECT zk_lock_revoke('adm/r') AS asked;
SELECT wait_until($$dblink_is_busy('h2') = 0$$, 5) AS ready;
SELECT dblink_disconnect('h2');
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'adm/r') = 0$$, 5) AS ready;
SELECT count(*) AS nodes_after_revoke FROM zk_locks WHERE resource = 'adm/r';

-- revoke with terminate: the holder's session ends
SELECT dblink_connect('h3', self_dsn() || ' application_name=holder3');
SELECT dblink_send_query('h3', $$SELECT zk_lock_acquire_session('adm/s'), pg_sleep(30)$$);
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'adm/s' AND granted) = 1$$, 5) AS ready;
SELECT zk_lock_revoke('adm/s', 'terminate') AS asked;
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'adm/s') = 0$$, 5) AS ready;
SELECT count(*) AS nodes_after_terminate FROM zk_locks WHERE resource = 'adm/s';
SELECT count(*) AS holder_gone FROM pg_stat_activity WHERE application_name = 'holder3';
SELECT dblink_disconnect('h3');
SELECT dblink_disconnect('h');

-- force release removes other holders' nodes, not the caller's own: those
-- it releases itself (zk_lock_release, or the end of its transaction)
SELECT dblink_connect('o', self_dsn() || ' application_name=other_holder');
SELECT zk_lock_acquire_session('adm/own', 'shared') > 0 AS ok;
SELECT * FROM dblink('o', $$SELECT zk_lock_acquire_session('adm/own', 'shared') > 0$$) AS t(ok boolean);
SELECT zk_lock_force_release('adm/own') AS removed;
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'adm/own') = 1$$, 5) AS ready;
SELECT pid = pg_backend_pid() AS own_node_left FROM zk_locks WHERE resource = 'adm/own';
SELECT pid = pg_backend_pid() AS mine, state FROM zk_lock_local WHERE resource = 'adm/own' ORDER BY 1, 2;
-- named, the caller's own node is left too
SELECT zk_lock_force_release('adm/own', (SELECT node FROM zk_locks WHERE resource = 'adm/own')) AS removed;
SELECT pid = pg_backend_pid() AS mine, state FROM zk_lock_local WHERE resource = 'adm/own' ORDER BY 1, 2;
SELECT zk_lock_release('adm/own', 'shared');
BEGIN;
SELECT zk_lock_acquire('adm/own') > 0 AS ok;
SELECT zk_lock_force_release('adm/own') AS removed;
COMMIT;
SELECT dblink_disconnect('o');
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'adm/own') = 0$$, 5) AS ready;

-- bad input, and who may do this
SELECT err($$SELECT zk_lock_revoke('adm/r', 'kill')$$);
SELECT err($$SELECT zk_lock_admin_node('adm/r', '../x', 'delete', NULL)$$);
SELECT has_function_privilege('public', 'zk_lock_force_release(text, text)', 'EXECUTE') AS public_may_force,
       has_function_privilege('public', 'zk_lock_revoke(text, text)', 'EXECUTE') AS public_may_revoke;
DROP TABLE adm_t;
