/* zklock--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION zklock" to load this file. \quit

-- Transaction-level locks: released at COMMIT or ROLLBACK.
CREATE FUNCTION zk_lock_acquire(resource text, mode text DEFAULT 'exclusive',
                                timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zklock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_lock_try_acquire(resource text, mode text DEFAULT 'exclusive')
RETURNS bigint
AS 'MODULE_PATHNAME', 'zklock_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Session-level locks: released by zk_lock_release or at backend exit.
CREATE FUNCTION zk_lock_acquire_session(resource text, mode text DEFAULT 'exclusive',
                                        timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zklock_acquire_session'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_lock_try_acquire_session(resource text, mode text DEFAULT 'exclusive')
RETURNS bigint
AS 'MODULE_PATHNAME', 'zklock_try_acquire_session'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_lock_release(resource text, mode text DEFAULT 'exclusive')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zklock_release'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

CREATE FUNCTION zk_lock_release_all()
RETURNS integer
AS 'MODULE_PATHNAME', 'zklock_release_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Every lock node under zklock.root, from every instance.
CREATE FUNCTION zk_lock_nodes(
    OUT resource text, OUT node text, OUT mode text, OUT seq bigint,
    OUT token bigint, OUT session_id bigint, OUT instance text, OUT pid integer,
    OUT database text, OUT username text, OUT application_name text,
    OUT vxid text, OUT scope text, OUT since timestamptz, OUT query text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'zklock_nodes'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Hive's conflict rule decides who is granted: an exclusive node with no
-- lower node, a shared node with no lower exclusive node.
CREATE VIEW zk_locks AS
SELECT n.resource,
       n.mode,
       CASE WHEN n.mode = 'exclusive'
            THEN count(*) OVER w = 0
            ELSE count(*) FILTER (WHERE n.mode = 'exclusive') OVER w = 0
       END AS granted,
       n.node,
       n.instance,
       n.pid,
       n.database,
       n.username,
       n.application_name,
       n.scope,
       n.since,
       n.token,
       to_hex(n.session_id) AS session_id,
       n.query
FROM zk_lock_nodes() AS n
WINDOW w AS (PARTITION BY n.resource ORDER BY n.seq
             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
ORDER BY n.resource, n.seq;

CREATE FUNCTION zk_lock_status(
    OUT worker_pid integer, OUT state text, OUT session_id text,
    OUT hosts text, OUT root text, OUT session_timeout integer,
    OUT state_since timestamptz, OUT entries_in_use integer,
    OUT granted bigint, OUT waited bigint, OUT not_granted bigint,
    OUT failed bigint, OUT lost bigint, OUT in_doubt integer,
    OUT disconnected_since timestamptz, OUT last_error text)
RETURNS record
AS 'MODULE_PATHNAME', 'zklock_status'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW zk_lock_status AS SELECT * FROM zk_lock_status();

-- This instance's lock entries, as the worker sees them: what each backend
-- holds or waits for, and whether a held lock is lost or in doubt.
CREATE FUNCTION zk_lock_local(
    OUT pid integer, OUT resource text, OUT mode text, OUT state text,
    OUT node text, OUT token bigint, OUT granted_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'zklock_local'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW zk_lock_local AS SELECT * FROM zk_lock_local();

-- Fencing: the newest token written with, per resource, in this database.
CREATE TABLE zk_lock_fences (
    resource text PRIMARY KEY,
    token bigint NOT NULL,
    fenced_at timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('zk_lock_fences', '');

-- zk_lock_fence(resource, token): call it in the transaction that writes
-- under the lock.  It records the token, or raises 55P03 if a newer token
-- has been recorded for the resource: the caller's lock was lost and
-- granted to someone else, who has written since.  Concurrent callers
-- serialize on the row, so the check and the write are one step.
CREATE FUNCTION zk_lock_fence(resource text, token bigint)
RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  newest bigint;
BEGIN
  IF resource IS NULL OR token IS NULL THEN
    RAISE EXCEPTION 'zk_lock_fence needs a resource and a token'
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  INSERT INTO @extschema@.zk_lock_fences AS f (resource, token)
  VALUES (zk_lock_fence.resource, zk_lock_fence.token)
  ON CONFLICT ON CONSTRAINT zk_lock_fences_pkey
  DO UPDATE SET token = EXCLUDED.token, fenced_at = now()
     WHERE f.token <= EXCLUDED.token
  RETURNING f.token INTO newest;
  IF NOT FOUND THEN
    SELECT f.token INTO newest FROM @extschema@.zk_lock_fences AS f
    WHERE f.resource = zk_lock_fence.resource;
    RAISE EXCEPTION 'stale fencing token % for zklock resource "%"', token, resource
      USING ERRCODE = 'lock_not_available',
            DETAIL = format('Token %s has been used for this resource since.', newest),
            HINT = 'The lock was lost and granted to another holder; this transaction must not write.';
  END IF;
  RETURN token;
END $$;

REVOKE ALL ON zk_lock_fences FROM PUBLIC;
GRANT SELECT ON zk_lock_fences TO PUBLIC;
REVOKE ALL ON FUNCTION zk_lock_fence(text, bigint) FROM PUBLIC;

-- The listing reads every instance's lock data (users, queries): not for PUBLIC.
REVOKE ALL ON FUNCTION zk_lock_nodes() FROM PUBLIC;
REVOKE ALL ON zk_locks FROM PUBLIC;
REVOKE ALL ON FUNCTION zk_lock_local() FROM PUBLIC;
REVOKE ALL ON zk_lock_local FROM PUBLIC;
