/* zklock--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION zklock" to load this file. \quit

-- Transaction-level locks: released at COMMIT or ROLLBACK.  With parents
-- (the default), "a/b/c" in any mode also takes "a" and "a/b" SHARED, as
-- Hive's query locks do; parents => false locks the one node alone.
CREATE FUNCTION zk_lock_acquire(resource text, mode text DEFAULT 'exclusive',
                                timeout interval DEFAULT NULL,
                                parents boolean DEFAULT true)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zklock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_lock_try_acquire(resource text, mode text DEFAULT 'exclusive',
                                    parents boolean DEFAULT true)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zklock_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Session-level locks: released by zk_lock_release or at backend exit.
CREATE FUNCTION zk_lock_acquire_session(resource text, mode text DEFAULT 'exclusive',
                                        timeout interval DEFAULT NULL,
                                        parents boolean DEFAULT true)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zklock_acquire_session'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_lock_try_acquire_session(resource text, mode text DEFAULT 'exclusive',
                                            parents boolean DEFAULT true)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zklock_try_acquire_session'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Lock sets: all or none, in one canonical order, under one timeout.
-- modes NULL means all exclusive.  Returns the tokens in resource order.
CREATE FUNCTION zk_lock_acquire_all(resources text[], modes text[] DEFAULT NULL,
                                    timeout interval DEFAULT NULL)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'zklock_acquire_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_lock_try_acquire_all(resources text[], modes text[] DEFAULT NULL)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'zklock_try_acquire_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_lock_acquire_all_session(resources text[], modes text[] DEFAULT NULL,
                                            timeout interval DEFAULT NULL)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'zklock_acquire_all_session'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_lock_try_acquire_all_session(resources text[], modes text[] DEFAULT NULL)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'zklock_try_acquire_all_session'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_lock_release(resource text, mode text DEFAULT 'exclusive')
RETURNS boolean
AS 'MODULE_PATHNAME', 'zklock_release'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

CREATE FUNCTION zk_lock_release_all()
RETURNS integer
AS 'MODULE_PATHNAME', 'zklock_release_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Every lock node under zklock.root (or under one resource subtree), from
-- every instance and every client.
CREATE FUNCTION zk_lock_nodes(subtree text DEFAULT NULL,
    OUT resource text, OUT node text, OUT mode text, OUT seq bigint,
    OUT token bigint, OUT session_id bigint, OUT instance text, OUT pid integer,
    OUT database text, OUT username text, OUT application_name text,
    OUT vxid text, OUT scope text, OUT since timestamptz, OUT query text,
    OUT implicit boolean, OUT expires timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'zklock_nodes'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The role the caller acts as (SET ROLE or the session user), also inside
-- a SECURITY DEFINER function such as zk_locks.
CREATE FUNCTION zk_lock_outer_role()
RETURNS oid
AS 'MODULE_PATHNAME', 'zklock_outer_role'
LANGUAGE C STABLE PARALLEL SAFE;

-- SHOW LOCKS: holders and waiters with what each waiter waits behind.
-- Hive's rule decides who is granted (an exclusive node with no lower node,
-- a shared node with no lower exclusive node) and whom a waiter watches
-- (an exclusive its predecessor, a shared the nearest lower exclusive).
-- Users who are not superusers see the details of their own locks only (the
-- locks of roles whose privileges they have; pg_read_all_stats sees all).
CREATE FUNCTION zk_locks(subtree text DEFAULT NULL,
    OUT resource text, OUT mode text, OUT granted boolean, OUT node text,
    OUT blocked_by text, OUT blocked_by_pid integer, OUT blocked_by_instance text,
    OUT instance text, OUT pid integer, OUT database text, OUT username text,
    OUT application_name text, OUT scope text, OUT implicit boolean,
    OUT since timestamptz, OUT expires timestamptz, OUT token bigint,
    OUT session_id text, OUT query text)
RETURNS SETOF record
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  WITH n AS MATERIALIZED (
    SELECT * FROM @extschema@.zk_lock_nodes(subtree)
  ), ranked AS (
    SELECT n.*,
           count(*) OVER w = 0 AS first,
           count(*) FILTER (WHERE n.mode = 'exclusive') OVER w = 0 AS no_lower_x,
           lag(n.seq) OVER (PARTITION BY n.resource ORDER BY n.seq) AS pred_seq,
           max(n.seq) FILTER (WHERE n.mode = 'exclusive') OVER w AS pred_x_seq
    FROM n
    WINDOW w AS (PARTITION BY n.resource ORDER BY n.seq
                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
  ), decided AS (
    SELECT r.*,
           CASE WHEN r.mode = 'exclusive' THEN r.first ELSE r.no_lower_x END AS is_granted,
           CASE WHEN r.mode = 'exclusive' THEN r.pred_seq ELSE r.pred_x_seq END AS behind_seq,
           -- SECURITY DEFINER makes current_user the owner: judge by the
           -- role the caller acts as, who sees the locks of every role it
           -- has the privileges of (matched by name: other instances' roles
           -- have other oids), everything when it is a superuser or has
           -- pg_read_all_stats, as in pg_stat_activity
           ((SELECT rolsuper FROM pg_roles WHERE oid = @extschema@.zk_lock_outer_role())
            OR pg_has_role(@extschema@.zk_lock_outer_role(), 'pg_read_all_stats', 'USAGE')
            OR EXISTS (SELECT 1 FROM pg_roles o
                       WHERE o.rolname = r.username
                         AND pg_has_role(@extschema@.zk_lock_outer_role(), o.oid, 'USAGE'))) AS visible
    FROM ranked r
  )
  SELECT d.resource, d.mode, d.is_granted, d.node,
         CASE WHEN NOT d.is_granted THEN b.node END,
         CASE WHEN NOT d.is_granted AND b.visible THEN b.pid END,
         CASE WHEN NOT d.is_granted THEN b.instance END,
         d.instance,
         CASE WHEN d.visible THEN d.pid END,
         CASE WHEN d.visible THEN d.database END,
         CASE WHEN d.visible THEN d.username END,
         CASE WHEN d.visible THEN d.application_name END,
         d.scope, d.implicit, d.since, d.expires, d.token,
         CASE WHEN d.session_id <> 0 THEN to_hex(d.session_id) END,
         CASE WHEN d.visible THEN d.query END
  FROM decided d
  LEFT JOIN decided b ON b.resource = d.resource AND b.seq = d.behind_seq
  ORDER BY d.resource, d.seq
$$;

CREATE VIEW zk_locks AS SELECT * FROM zk_locks();

-- Explicit locks (Hive's LOCK TABLE): persistent nodes that survive the
-- session and a restart, with a required time to live; every instance's
-- worker removes expired ones.  No parent locks.
CREATE FUNCTION zk_lock_acquire_explicit(resource text, mode text DEFAULT 'exclusive',
                                         ttl interval DEFAULT NULL,
                                         timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zklock_acquire_explicit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Administration across instances: superuser-only by default.
CREATE FUNCTION zk_lock_admin_node(resource text, node text, action text, data text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zklock_admin'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Remove other holders' nodes of a resource (every granted node, or the one
-- named).  Their instances see the node go: a transaction holding it can
-- no longer commit.  Returns how many nodes were removed.
CREATE FUNCTION zk_lock_force_release(resource text, node text DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  r record;
  n integer := 0;
BEGIN
  FOR r IN SELECT l.node, l.instance, l.pid, l.mode
           FROM @extschema@.zk_locks(zk_lock_force_release.resource) AS l
           WHERE l.resource = zk_lock_force_release.resource AND l.granted
             AND (zk_lock_force_release.node IS NULL OR l.node = zk_lock_force_release.node)
  LOOP
    IF @extschema@.zk_lock_admin_node(resource, r.node, 'delete', NULL) THEN
      n := n + 1;
      RAISE LOG 'zklock: % force-released % lock node %/% held by pid % on %',
        current_user, r.mode, resource, r.node, r.pid, r.instance;
    END IF;
  END LOOP;
  RETURN n;
END $$;

-- Ask the holders of a resource to give it up (Curator's revocation, done
-- for the holder): their instance's worker cancels the holder's statement
-- ('cancel') or ends its session ('terminate').  zklock holders only; other
-- clients' nodes are left alone.  Returns how many holders were asked.
CREATE FUNCTION zk_lock_revoke(resource text, action text DEFAULT 'cancel')
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  r record;
  n integer := 0;
BEGIN
  IF action IS NULL OR action NOT IN ('cancel', 'terminate') THEN
    RAISE EXCEPTION 'invalid zklock revocation action "%"', action
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'The action is ''cancel'' or ''terminate''.';
  END IF;
  FOR r IN SELECT l.* FROM @extschema@.zk_locks(zk_lock_revoke.resource) AS l
           WHERE l.resource = zk_lock_revoke.resource AND l.granted AND l.pid IS NOT NULL
  LOOP
    IF @extschema@.zk_lock_admin_node(resource, r.node, 'revoke',
         format(E'instance=%s\npid=%s\ndatabase=%s\nuser=%s\napplication=%s\nscope=%s\nimplicit=%s\nrevoke=%s\nrevoked_by=%s\nquery=%s',
                r.instance, r.pid, r.database, r.username, r.application_name, r.scope,
                r.implicit, action, current_user, left(r.query, 200))) THEN
      n := n + 1;
      RAISE LOG 'zklock: % revoked (%) % lock node %/% held by pid % on %',
        current_user, action, r.mode, resource, r.node, r.pid, r.instance;
    END IF;
  END LOOP;
  RETURN n;
END $$;

-- UNLOCK: remove the explicit locks of a resource in a mode that the caller
-- took (a superuser: anyone's).  Returns how many were removed.
CREATE FUNCTION zk_lock_release_explicit(resource text, mode text DEFAULT 'exclusive')
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  r record;
  n integer := 0;
  su boolean := (SELECT rolsuper FROM pg_roles WHERE rolname = session_user);
BEGIN
  IF lower(mode) NOT IN ('exclusive', 'shared') THEN
    RAISE EXCEPTION 'invalid zklock lock mode "%"', mode
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'The mode is ''exclusive'' or ''shared''.';
  END IF;
  FOR r IN SELECT n.node, n.username
           FROM @extschema@.zk_lock_nodes(zk_lock_release_explicit.resource) AS n
           WHERE n.resource = zk_lock_release_explicit.resource
             AND n.scope = 'explicit' AND n.mode = lower(zk_lock_release_explicit.mode)
  LOOP
    IF su OR r.username = session_user THEN
      IF @extschema@.zk_lock_admin_node(resource, r.node, 'delete', NULL) THEN
        n := n + 1;
      END IF;
    END IF;
  END LOOP;
  IF n = 0 THEN
    RAISE WARNING 'you don''t own an explicit zklock lock on resource "%" in % mode',
      resource, lower(mode);
  END IF;
  RETURN n;
END $$;

REVOKE ALL ON FUNCTION zk_lock_admin_node(text, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION zk_lock_force_release(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION zk_lock_revoke(text, text) FROM PUBLIC;

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

-- The raw listing shows every instance's lock data (users, queries): not for
-- PUBLIC; zk_locks shows others' details to superusers only.
REVOKE ALL ON FUNCTION zk_lock_nodes(text) FROM PUBLIC;
GRANT SELECT ON zk_locks TO PUBLIC;
REVOKE ALL ON FUNCTION zk_lock_local() FROM PUBLIC;
REVOKE ALL ON zk_lock_local FROM PUBLIC;
