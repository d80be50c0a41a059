--
-- zklock is loaded through shared_preload_libraries and its worker is
-- connected to the ZooKeeper that test/run_tests.sh started.
--
CREATE EXTENSION zklock;
CREATE EXTENSION dblink;

-- wait_until(cond, secs): poll a boolean SQL expression every 50 ms, for
-- at most secs seconds; true once it holds, false if it never did
CREATE FUNCTION wait_until(cond text, secs float8) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  ok boolean;
BEGIN
  FOR i IN 1..ceil(secs * 20)::int LOOP
    EXECUTE 'SELECT (' || cond || ')' INTO ok;
    IF ok THEN
      RETURN true;
    END IF;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN false;
END $$;

-- self_dsn(): a libpq connection string back to this server and database,
-- for dblink; `make installcheck` may test a server at any socket and port
-- (the backend's libpq would otherwise take its compiled-in defaults)
CREATE FUNCTION self_dsn() RETURNS text LANGUAGE sql STABLE AS $$
  SELECT 'dbname=' || current_database() || ' port=' || current_setting('port')
         || ' host=' || coalesce(nullif(trim(split_part(current_setting('unix_socket_directories'), ',', 1)), ''),
                                 'localhost')
$$;

-- wait (bounded) until the worker is connected
SELECT wait_until($$(SELECT state FROM zk_lock_status) = 'connected'$$, 10) AS ready;

SELECT state, worker_pid > 0 AS worker_running, session_id IS NOT NULL AS has_session,
       root, session_timeout > 0 AS negotiated
FROM zk_lock_status;

-- (zklock.failpoints exists only in the test build)
SELECT name, setting FROM pg_settings WHERE name LIKE 'zklock.%'
  AND name NOT IN ('zklock.hosts', 'zklock.failpoints')
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
