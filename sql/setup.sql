--
-- zklock is loaded through shared_preload_libraries and its worker is
-- connected to the ZooKeeper that test/run_tests.sh started.
--
CREATE EXTENSION zklock;
CREATE EXTENSION dblink;

-- wait (bounded) until the worker is connected
DO $$
BEGIN
  FOR i IN 1..100 LOOP
    EXIT WHEN (SELECT state FROM zk_lock_status) = 'connected';
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$;

SELECT state, worker_pid > 0 AS worker_running, session_id IS NOT NULL AS has_session,
       root, session_timeout > 0 AS negotiated
FROM zk_lock_status;

SELECT name, setting FROM pg_settings WHERE name LIKE 'zklock.%' AND name <> 'zklock.hosts'
ORDER BY name;

-- err(query): the SQLSTATE, message, detail and hint of the error the query
-- raises, so that expected output checks error codes
CREATE FUNCTION err(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  st text; msg text; det text; hnt text;
BEGIN
  EXECUTE q;
  RETURN 'no error';
EXCEPTION WHEN others THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                          det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
  RETURN st || ': ' || msg || coalesce(E'\nDETAIL: ' || nullif(det, ''), '')
            || coalesce(E'\nHINT: ' || nullif(hnt, ''), '');
END $$;
