/* zklock--1.7.sql: made by make from zklock--1.0.sql zklock--1.0--1.1.sql zklock--1.1--1.2.sql zklock--1.2--1.3.sql zklock--1.3--1.4.sql zklock--1.4--1.6.sql zklock--1.6--1.7.sql; do not edit */

/* ---- zklock--1.0.sql */
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

/* ---- zklock--1.0--1.1.sql */
/* zklock--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION zklock UPDATE TO '1.1'" to load this file. \quit

-- zklock 1.1: the trust release.  Each section below says which finding of
-- the trust issue it belongs to.  Node data written by 1.0 stays readable.

-- Finding 1: the commit fence is a lease.  zk_lock_status shows how much of
-- it is left (ms; NULL when no session is proven alive) and the margin a
-- commit needs; in_doubt counts held locks the lease does not cover.
DROP VIEW zk_lock_status;
DROP FUNCTION zk_lock_status();
CREATE FUNCTION zk_lock_status(
    OUT worker_pid integer, OUT state text, OUT session_id text,
    OUT hosts text, OUT root text, OUT session_timeout integer,
    OUT state_since timestamptz, OUT entries_in_use integer,
    OUT granted bigint, OUT waited bigint, OUT not_granted bigint,
    OUT failed bigint, OUT lost bigint, OUT in_doubt integer,
    OUT disconnected_since timestamptz, OUT last_error text,
    OUT lease_remaining integer, OUT lease_margin integer)
RETURNS record
AS 'MODULE_PATHNAME', 'zklock_status'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW zk_lock_status AS SELECT * FROM zk_lock_status();

-- Finding 11 (NULL arguments): every NULL argument of these functions is an
-- error with SQLSTATE 22004, as the README says, instead of a silent NULL
-- (zk_lock_release was STRICT) or a silent 0.  The C function raises 22004
-- itself; the PL/pgSQL bodies below are 1.0's with only the NULL checks
-- added at the top; zk_lock_release_explicit and zk_lock_revoke get the same
-- checks in their finding 4 section below.
ALTER FUNCTION zk_lock_release(text, text) CALLED ON NULL INPUT;

CREATE OR REPLACE FUNCTION zk_lock_force_release(resource text, node text DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  r record;
  n integer := 0;
BEGIN
  IF resource IS NULL THEN
    RAISE EXCEPTION 'zklock resource name must not be null'
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
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

-- Finding 4 (explicit locks are granted twice).
--
-- UNLOCK removes granted explicit locks only: a waiting request's node is
-- not a lock (1.0 deleted it too, and its waiter was then handed a token
-- with no node behind it).  The caller is the role it acts as (SET ROLE,
-- zk_lock_outer_role(); 1.0 compared session_user), which is the role the
-- node records; like ownership in PostgreSQL, the members of that role may
-- remove it too.  zk_locks tells who is granted, by Hive's rule.
CREATE OR REPLACE FUNCTION zk_lock_release_explicit(resource text, mode text DEFAULT 'exclusive')
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  r record;
  n integer := 0;
  me oid := @extschema@.zk_lock_outer_role();
  su boolean := (SELECT rolsuper FROM pg_roles WHERE oid = @extschema@.zk_lock_outer_role());
BEGIN
  IF resource IS NULL OR mode IS NULL THEN
    RAISE EXCEPTION 'zklock resource name and lock mode must not be null'
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF lower(mode) NOT IN ('exclusive', 'shared') THEN
    RAISE EXCEPTION 'invalid zklock lock mode "%"', mode
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'The mode is ''exclusive'' or ''shared''.';
  END IF;
  FOR r IN SELECT l.node, l.username
           FROM @extschema@.zk_locks(zk_lock_release_explicit.resource) AS l
           WHERE l.resource = zk_lock_release_explicit.resource
             AND l.scope = 'explicit' AND l.granted
             AND l.mode = lower(zk_lock_release_explicit.mode)
  LOOP
    IF su OR EXISTS (SELECT 1 FROM pg_roles o
                     WHERE o.rolname = r.username AND pg_has_role(me, o.oid, 'USAGE')) THEN
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

-- A revocation asks a holder's instance to cancel or end the holder's
-- session.  An explicit lock has no holding session: nobody is asked, and its
-- node is left as it is (1.0 rewrote it without its expiry, so that it never
-- expired).  Use zk_lock_release_explicit or zk_lock_force_release for it.
CREATE OR REPLACE FUNCTION zk_lock_revoke(resource text, action text DEFAULT 'cancel')
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  r record;
  n integer := 0;
BEGIN
  IF resource IS NULL OR action IS NULL THEN
    RAISE EXCEPTION 'zklock resource name and revocation action must not be null'
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF action NOT IN ('cancel', 'terminate') THEN
    RAISE EXCEPTION 'invalid zklock revocation action "%"', action
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'The action is ''cancel'' or ''terminate''.';
  END IF;
  FOR r IN SELECT l.* FROM @extschema@.zk_locks(zk_lock_revoke.resource) AS l
           WHERE l.resource = zk_lock_revoke.resource AND l.granted AND l.pid IS NOT NULL
             AND l.scope IS DISTINCT FROM 'explicit'
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
REVOKE ALL ON FUNCTION zk_lock_revoke(text, text) FROM PUBLIC;

/* ---- zklock--1.1--1.2.sql */
/* zklock--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION zklock UPDATE TO '1.2'" to load this file. \quit

-- zklock 1.2: one codec for node data and one definition of Hive's rule,
-- both in C (src/nodedata.c, src/grant_rule.c); what users see is as in
-- 1.1, plus two functions (zk_lock_queue, zk_lock_revocation_data).  The library of
-- 1.2 keeps the C functions 1.0 and 1.1 call (a rolling upgrade replaces
-- the library before ALTER EXTENSION UPDATE).

-- zk_lock_queue: zk_lock_nodes' rows with who is granted, by the grant
-- rule the lock protocol applies: granted, and blocked_by, the node a
-- waiting one waits behind.  A function of its own, so that zk_lock_nodes,
-- its grants and whatever depends on it stay as they were.
CREATE FUNCTION zk_lock_queue(subtree text DEFAULT NULL,
    OUT resource text, OUT node text, OUT mode text, OUT seq bigint,
    OUT token bigint, OUT session_id bigint, OUT instance text, OUT pid integer,
    OUT database text, OUT username text, OUT application_name text,
    OUT vxid text, OUT scope text, OUT since timestamptz, OUT query text,
    OUT implicit boolean, OUT expires timestamptz,
    OUT granted boolean, OUT blocked_by text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'zklock_nodes_1_2'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
-- The raw listing shows every instance's lock data (users, queries): not for
-- PUBLIC, as zk_lock_nodes; zk_locks shows others' details to superusers only.
REVOKE ALL ON FUNCTION zk_lock_queue(text) FROM PUBLIC;
-- nor for a role that default privileges (ALTER DEFAULT PRIVILEGES ... ON
-- FUNCTIONS) gave it to as it was created: only its owner runs it.  (The
-- schema's name reaches the statement through %I alone: in the format
-- string, a name with % in it failed the update, as it did in 1.2.)
DO $$
DECLARE
  g record;
  saved_path text := pg_catalog.current_setting('search_path');
BEGIN
  -- pg_catalog alone: no operator of the extension's schema (where others
  -- may create) is picked by a comparison below (test/t/058)
  PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
  FOR g IN SELECT DISTINCT a.grantee::regrole::text AS role, n.nspname
           FROM pg_catalog.pg_proc p
           JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace,
                pg_catalog.aclexplode(p.proacl) a
           WHERE p.oid = '@extschema@.zk_lock_queue(text)'::pg_catalog.regprocedure
             AND a.grantee <> p.proowner AND a.grantee <> 0
  LOOP
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %I.zk_lock_queue(text) FROM %s',
                              g.nspname, g.role);
  END LOOP;
  PERFORM pg_catalog.set_config('search_path', saved_path, true);
END $$;

-- SHOW LOCKS, as before; granted and blocked_by come from zk_lock_queue.
CREATE OR REPLACE FUNCTION zk_locks(subtree text DEFAULT NULL,
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
    SELECT * FROM @extschema@.zk_lock_queue(subtree)
  ), decided AS (
    SELECT r.*,
           r.granted AS is_granted,
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
    FROM n r
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
  LEFT JOIN decided b ON b.resource = d.resource AND b.node = d.blocked_by
  ORDER BY d.resource, d.seq
$$;

-- The node data of a revocation (zk_lock_revoke), by the codec: what
-- 1.0 and 1.1 built with format(), after a first line "v=2".
CREATE FUNCTION zk_lock_revocation_data(instance text, pid integer,
    database text, username text, application_name text, scope text,
    implicit boolean, action text, revoked_by text, query text)
RETURNS text
AS 'MODULE_PATHNAME', 'zklock_revocation_data'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

CREATE OR REPLACE FUNCTION zk_lock_revoke(resource text, action text DEFAULT 'cancel')
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  r record;
  n integer := 0;
BEGIN
  IF resource IS NULL OR action IS NULL THEN
    RAISE EXCEPTION 'zklock resource name and revocation action must not be null'
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF action NOT IN ('cancel', 'terminate') THEN
    RAISE EXCEPTION 'invalid zklock revocation action "%"', action
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'The action is ''cancel'' or ''terminate''.';
  END IF;
  FOR r IN SELECT l.* FROM @extschema@.zk_locks(zk_lock_revoke.resource) AS l
           WHERE l.resource = zk_lock_revoke.resource AND l.granted AND l.pid IS NOT NULL
             AND l.scope IS DISTINCT FROM 'explicit'
  LOOP
    IF @extschema@.zk_lock_admin_node(resource, r.node, 'revoke',
         @extschema@.zk_lock_revocation_data(r.instance, r.pid, r.database,
           r.username, r.application_name, r.scope, r.implicit, action,
           current_user, left(r.query, 200))) THEN
      n := n + 1;
      RAISE LOG 'zklock: % revoked (%) % lock node %/% held by pid % on %',
        current_user, action, r.mode, resource, r.node, r.pid, r.instance;
    END IF;
  END LOOP;
  RETURN n;
END $$;
REVOKE ALL ON FUNCTION zk_lock_revoke(text, text) FROM PUBLIC;

/* ---- zklock--1.2--1.3.sql */
/* zklock--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION zklock UPDATE TO '1.3'" to load this file. \quit

-- zklock 1.3.  A fresh install runs 1.0's script and every update script
-- in turn, so this script is the last word on every install and every
-- update: what it sets at its end (the privileges) holds whatever the
-- earlier scripts, or default privileges, did.  The library of 1.3 keeps
-- the C functions that 1.0 to 1.2 call (a rolling upgrade replaces the
-- library before ALTER EXTENSION UPDATE).

-- zk_lock_status: and watches, the ZooKeeper watches this instance's
-- session has set and not yet seen fire or removed.  The view gains the
-- column at its end (CREATE OR REPLACE VIEW), and the function
-- zk_lock_status() stays as it is, so that an update keeps the views and
-- grants that users made on either.
CREATE FUNCTION zk_lock_status_watches()
RETURNS bigint
AS 'MODULE_PATHNAME', 'zklock_status_watches'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_lock_status_watches() IS
  'The ZooKeeper watches this instance''s zklock session has set and not yet seen fire or removed (zk_lock_status.watches).';

CREATE OR REPLACE VIEW zk_lock_status AS
  SELECT s.*, @extschema@.zk_lock_status_watches() AS watches
  FROM @extschema@.zk_lock_status() AS s;

-- zk_lock_force_release: superusers only, whatever grants exist (the C
-- function it calls, zk_lock_admin_node, refuses everyone else too); a
-- node named that is waiting, not holding, or not there at all, is not
-- removed, and a WARNING says so (1.2 returned 0 without a word).
CREATE OR REPLACE FUNCTION zk_lock_force_release(resource text, node text DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  r record;
  n integer := 0;
  seen boolean := false;
BEGIN
  IF NOT coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false) THEN
    RAISE EXCEPTION 'permission denied for function zk_lock_force_release'
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'zk_lock_force_release is for superusers only, whatever grants exist.';
  END IF;
  IF resource IS NULL THEN
    RAISE EXCEPTION 'zklock resource name must not be null'
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  FOR r IN SELECT l.node, l.instance, l.pid, l.mode, l.granted
           FROM @extschema@.zk_locks(zk_lock_force_release.resource) AS l
           WHERE l.resource = zk_lock_force_release.resource
             AND (l.granted OR l.node = zk_lock_force_release.node)
             AND (zk_lock_force_release.node IS NULL OR l.node = zk_lock_force_release.node)
  LOOP
    seen := true;
    IF NOT r.granted THEN
      RAISE WARNING 'zklock lock node "%" on resource "%" is waiting, not holding: it was not removed',
        r.node, resource
        USING HINT = 'zk_lock_force_release removes holders'' nodes only.  A waiter ends with its timeout, a cancel of its statement or the end of its session.';
      CONTINUE;
    END IF;
    IF @extschema@.zk_lock_admin_node(resource, r.node, 'delete', NULL) THEN
      n := n + 1;
      RAISE LOG 'zklock: % force-released % lock node %/% held by pid % on %',
        current_user, r.mode, resource, r.node, r.pid, r.instance;
    END IF;
  END LOOP;
  IF node IS NOT NULL AND NOT seen THEN
    RAISE WARNING 'there is no zklock lock node "%" on resource "%"', node, resource
      USING HINT = 'zk_locks lists the nodes of a resource.';
  END IF;
  RETURN n;
END $$;

-- zk_lock_revoke: superusers only, whatever grants exist; otherwise 1.2's.
CREATE OR REPLACE FUNCTION zk_lock_revoke(resource text, action text DEFAULT 'cancel')
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  r record;
  n integer := 0;
BEGIN
  IF NOT coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false) THEN
    RAISE EXCEPTION 'permission denied for function zk_lock_revoke'
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'zk_lock_revoke is for superusers only, whatever grants exist.';
  END IF;
  IF resource IS NULL OR action IS NULL THEN
    RAISE EXCEPTION 'zklock resource name and revocation action must not be null'
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF action NOT IN ('cancel', 'terminate') THEN
    RAISE EXCEPTION 'invalid zklock revocation action "%"', action
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'The action is ''cancel'' or ''terminate''.';
  END IF;
  FOR r IN SELECT l.* FROM @extschema@.zk_locks(zk_lock_revoke.resource) AS l
           WHERE l.resource = zk_lock_revoke.resource AND l.granted AND l.pid IS NOT NULL
             AND l.scope IS DISTINCT FROM 'explicit'
  LOOP
    IF @extschema@.zk_lock_admin_node(resource, r.node, 'revoke',
         @extschema@.zk_lock_revocation_data(r.instance, r.pid, r.database,
           r.username, r.application_name, r.scope, r.implicit, action,
           current_user, left(r.query, 200))) THEN
      n := n + 1;
      RAISE LOG 'zklock: % revoked (%) % lock node %/% held by pid % on %',
        current_user, action, r.mode, resource, r.node, r.pid, r.instance;
    END IF;
  END LOOP;
  RETURN n;
END $$;

-- zk_lock_fences: a recorded token never goes backwards, whatever grants
-- exist.  Rows are written by zk_lock_fence (SECURITY DEFINER, as the
-- table's owner) and by the owner (or a superuser) alone: anyone else is
-- refused even with INSERT, UPDATE, DELETE or TRUNCATE granted; and an
-- UPDATE never lowers a token or renames a resource, whoever runs it.
-- (Deleting the rows, which DROP EXTENSION needs, is left to the owner.)
CREATE FUNCTION zk_lock_fences_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF NOT pg_has_role(current_user,
                     (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID),
                     'USAGE') THEN
    RAISE EXCEPTION 'permission denied for table zk_lock_fences'
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'Fencing tokens are recorded by zk_lock_fence; only the table''s owner writes them otherwise, whatever grants exist.';
  END IF;
  IF TG_OP = 'UPDATE' THEN
    IF NEW.resource IS DISTINCT FROM OLD.resource OR NEW.token < OLD.token THEN
      RAISE EXCEPTION 'zklock fencing token of resource "%" cannot go backwards', OLD.resource
        USING ERRCODE = 'check_violation',
              DETAIL = format('Token %s is recorded; the update asked for %s on resource "%s".',
                              OLD.token, NEW.token, NEW.resource);
    END IF;
    RETURN NEW;
  ELSIF TG_OP = 'INSERT' THEN
    RETURN NEW;
  ELSIF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION zk_lock_fences_guard() FROM PUBLIC;

CREATE TRIGGER zk_lock_fences_guard
  BEFORE INSERT OR UPDATE OR DELETE ON zk_lock_fences
  FOR EACH ROW EXECUTE FUNCTION zk_lock_fences_guard();
CREATE TRIGGER zk_lock_fences_guard_truncate
  BEFORE TRUNCATE ON zk_lock_fences
  FOR EACH STATEMENT EXECUTE FUNCTION zk_lock_fences_guard();

-- zk_lock_fence applies the resource-name rules too.
-- (issue 20) zk_lock_fence accepted names no lock can have
-- ('f//b', 'a/../b', 'zklock.anchor').  It now applies the resource-name
-- rules first (22023 / 42622, as every other function), through a C
-- function that needs no shared memory, so zk_lock_fence keeps working
-- without shared_preload_libraries.
--

CREATE FUNCTION zk_lock_check_resource(resource text)
RETURNS void
LANGUAGE C
AS 'MODULE_PATHNAME', 'zklock_check_resource_name';
COMMENT ON FUNCTION zk_lock_check_resource(text) IS
  'Raises the error a zklock function would for a bad resource name (22023, 42622, 22021); returns nothing otherwise.';

CREATE OR REPLACE FUNCTION zk_lock_fence(resource text, token bigint)
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
  PERFORM @extschema@.zk_lock_check_resource(zk_lock_fence.resource);
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
-- (CREATE OR REPLACE keeps the privileges zk_lock_fence had)

-- Privileges: what README promises of every member, whatever default
-- privileges (ALTER DEFAULT PRIVILEGES, globally or in this schema, for
-- functions and tables, to a role or to PUBLIC) gave as the scripts of 1.0
-- to 1.3 created the members, now or at an earlier install or update.
-- One WARNING names every privilege taken away (a NOTICE would not be
-- seen: PostgreSQL runs extension scripts with client_min_messages at
-- least warning).
--
--  - superuser-only (zk_lock_admin_node, zk_lock_force_release,
--    zk_lock_revoke, zk_lock_fences_guard): every grant to anyone but the
--    owner is removed.  They refuse non-superusers anyway.
--  - not granted to PUBLIC (zk_lock_nodes, zk_lock_queue, zk_lock_local
--    and its view, zk_lock_fence): a grant that the default privileges of
--    the member's owner would give (a role, or PUBLIC, with that
--    privilege in a pg_default_acl entry of the owner, global or for this
--    schema) is removed; other grants -- an administrator's GRANT, e.g. of
--    zk_lock_fence to the roles that write under locks -- stay.  (A grant
--    by hand that the owner's default privileges would also give cannot be
--    told from one they gave: it is removed, and the WARNING says so.)
--  - every relation (the table zk_lock_fences, the views): read-only for
--    everyone but the owner: INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES
--    and TRIGGER are removed from everyone else (a TRIGGER privilege on
--    zk_lock_fences would run the holder's code as zk_lock_fence's owner).
--  (zklock has no sequences and no types of its own: default privileges on
--  those give nothing here; test/t/044 sets them too.)
--
-- Names reach the statements through %I and quote_ident alone: a schema
-- or role name with %, quotes, spaces or capitals is just a name here.
-- The block looks names up in pg_catalog alone (set_config below): the
-- script's search_path begins with the extension's schema, where a role
-- with CREATE there could have put an operator that an unqualified
-- comparison would pick and run as the superuser (test/t/058).  The path
-- is restored at the end.
DO $$
DECLARE
  saved_path text := pg_catalog.current_setting('search_path');
  ext oid;
  su_only text[] := ARRAY['zk_lock_admin_node', 'zk_lock_force_release',
                          'zk_lock_revoke', 'zk_lock_fences_guard'];
  not_public text[] := ARRAY['zk_lock_nodes', 'zk_lock_queue', 'zk_lock_local',
                             'zk_lock_fence'];
  g record;
  who text;
  removed text[] := '{}';
BEGIN
  PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
  ext := (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'zklock');
  FOR g IN
    SELECT DISTINCT 'FUNCTION' AS kind,
           pg_catalog.format('%I.%I(%s)', n.nspname, p.proname,
                             pg_catalog.pg_get_function_identity_arguments(p.oid)) AS object,
           a.grantee, a.privilege_type
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_proc p ON p.oid = d.objid
    JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
    CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
    WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
      AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
      AND d.refobjid = ext AND d.deptype = 'e'
      AND a.grantee <> p.proowner
      AND (p.proname = ANY (su_only)
           OR (p.proname = ANY (not_public)
               AND EXISTS (SELECT 1
                           FROM pg_catalog.pg_default_acl da
                           CROSS JOIN LATERAL pg_catalog.aclexplode(da.defaclacl) x
                           WHERE da.defaclrole = p.proowner
                             AND da.defaclobjtype = 'f'
                             AND da.defaclnamespace IN (0, p.pronamespace)
                             AND x.grantee = a.grantee
                             AND x.privilege_type = a.privilege_type)))
    UNION
    SELECT DISTINCT 'TABLE',
           pg_catalog.format('%I.%I', n.nspname, c.relname),
           a.grantee, a.privilege_type
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_class c ON c.oid = d.objid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
    WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
      AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
      AND d.refobjid = ext AND d.deptype = 'e'
      AND a.grantee <> c.relowner
      AND (a.privilege_type <> 'SELECT'
           OR (c.relname = ANY (not_public)
               AND EXISTS (SELECT 1
                           FROM pg_catalog.pg_default_acl da
                           CROSS JOIN LATERAL pg_catalog.aclexplode(da.defaclacl) x
                           WHERE da.defaclrole = c.relowner
                             AND da.defaclobjtype = 'r'
                             AND da.defaclnamespace IN (0, c.relnamespace)
                             AND x.grantee = a.grantee
                             AND x.privilege_type = a.privilege_type)))
    ORDER BY 1, 2, 3, 4
  LOOP
    who := CASE WHEN g.grantee = 0 THEN 'PUBLIC'
                ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END;
    EXECUTE pg_catalog.format('REVOKE %s ON %s %s FROM %s CASCADE',
                              g.privilege_type, g.kind, g.object, who);
    removed := removed || pg_catalog.format('%s on %s %s from %s',
                                            g.privilege_type, pg_catalog.lower(g.kind),
                                            g.object, who);
  END LOOP;
  -- a trigger someone put on a member table (with a TRIGGER privilege that
  -- default privileges gave, before 1.3) runs as whoever writes the table:
  -- on zk_lock_fences, as zk_lock_fence's owner.  Not zklock's to drop:
  -- disabled and named, for the administrator.
  FOR g IN
    SELECT pg_catalog.format('%I on %I.%I', t.tgname, n.nspname, c.relname) AS object,
           pg_catalog.format('%I.%I', n.nspname, c.relname) AS tbl, t.tgname
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_class c ON c.oid = d.objid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_catalog.pg_trigger t ON t.tgrelid = c.oid
    WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
      AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
      AND d.refobjid = ext AND d.deptype = 'e'
      AND NOT t.tgisinternal
      AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend fd
                      WHERE fd.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                        AND fd.objid = t.tgfoid
                        AND fd.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
                        AND fd.refobjid = ext AND fd.deptype = 'e')
    ORDER BY 1
  LOOP
    EXECUTE pg_catalog.format('ALTER TABLE %s DISABLE TRIGGER %I', g.tbl, g.tgname);
    RAISE WARNING 'zklock: trigger % is not zklock''s: disabled', g.object
      USING DETAIL = 'It would run with the privileges of whoever writes the table (zk_lock_fence writes zk_lock_fences as the extension''s owner).',
            HINT = 'Drop it, or enable it again (ALTER TABLE ... ENABLE TRIGGER) if you made it and trust its function.';
  END LOOP;
  IF pg_catalog.cardinality(removed) > 0 THEN
    RAISE WARNING 'zklock: removed % privileges on its members that default privileges or grants gave',
      pg_catalog.cardinality(removed)
      USING DETAIL = pg_catalog.array_to_string(removed, E'\n'),
            HINT = 'zklock''s superuser-only members keep no grants; those not granted to PUBLIC keep none that their owner''s default privileges give; its tables and views keep no privilege but SELECT.  A grant made by hand afterwards is kept by later updates unless those default privileges would also give it.';
  END IF;
  PERFORM pg_catalog.set_config('search_path', saved_path, true);
END $$;

/* ---- zklock--1.3--1.4.sql */
/* zklock--1.3--1.4.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION zklock UPDATE TO '1.4'" to load this file. \quit

-- zklock 1.4: semaphores, instance leadership and the advisory-lock API.
-- The fresh install script zklock--1.4.sql is made by make from 1.0's
-- script and every update script, this one last: what this script sets
-- at its end (the privileges) holds on every install and every update.
-- The library of 1.4 keeps the C functions that 1.0 to 1.3 call (a
-- rolling upgrade replaces the library before ALTER EXTENSION UPDATE).

-- ==== semaphores (owner: semaphore work) ====

-- Counting semaphores: at most max_holders holders of a resource at once,
-- across every instance, first come first served (1 is a mutex).  A slot
-- is taken as a lock is: its parents' SHARED locks, stacking, the scope of
-- the transaction or the session, timeouts, cancel, lock_timeout and the
-- commit fence; the token is its node's czxid.  Every participant must
-- give the same max_holders (22023 otherwise), and a resource is a lock or
-- a semaphore, never both at once (55000).
CREATE FUNCTION zk_semaphore_acquire(resource text, max_holders integer,
                                     timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zklock_semaphore_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_semaphore_acquire(text, integer, interval) IS
  'Take a slot of the semaphore of max_holders on resource until the end of the transaction, waiting (at most timeout); returns the fencing token.';

CREATE FUNCTION zk_semaphore_try_acquire(resource text, max_holders integer)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zklock_semaphore_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_semaphore_try_acquire(text, integer) IS
  'Take a slot of the semaphore of max_holders on resource until the end of the transaction if one is free now; returns the fencing token, or NULL.';

CREATE FUNCTION zk_semaphore_acquire_session(resource text, max_holders integer,
                                             timeout interval DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zklock_semaphore_acquire_session'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_semaphore_acquire_session(text, integer, interval) IS
  'Take a slot of the semaphore of max_holders on resource until zk_semaphore_release or the end of the session, waiting (at most timeout); returns the fencing token.';

CREATE FUNCTION zk_semaphore_try_acquire_session(resource text, max_holders integer)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zklock_semaphore_try_acquire_session'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_semaphore_try_acquire_session(text, integer) IS
  'Take a slot of the semaphore of max_holders on resource for the session if one is free now; returns the fencing token, or NULL.';

CREATE FUNCTION zk_semaphore_release(resource text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zklock_semaphore_release'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_semaphore_release(text) IS
  'Give up one session-level hold of a semaphore slot on resource; false (and a WARNING) when this session holds none.';

-- The limit a semaphore node's name says ("...SEMAPHORE-<n>-LOCK-EXCLUSIVE-
-- <seq>"), NULL for every other name: the parser of the worker's rule.
CREATE FUNCTION zk_semaphore_node_limit(node text)
RETURNS integer
AS 'MODULE_PATHNAME', 'zklock_semaphore_node_limit'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION zk_semaphore_node_limit(text) IS
  'The max_holders a semaphore node''s name says, or NULL when the name is not a semaphore node''s.';

-- zk_lock_status: and notifications, the node watch notifications this
-- instance's worker has received (a release or withdrawal notifies at most
-- max_holders waiters of a semaphore).  The view gains the column at its
-- end, as 1.3 added watches; the functions stay as they are.
CREATE FUNCTION zk_lock_status_notifications()
RETURNS bigint
AS 'MODULE_PATHNAME', 'zklock_status_notifications'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_lock_status_notifications() IS
  'The node watch notifications this instance''s zklock worker has received (zk_lock_status.notifications).';

CREATE OR REPLACE VIEW zk_lock_status AS
  SELECT s.*, @extschema@.zk_lock_status_watches() AS watches,
         @extschema@.zk_lock_status_notifications() AS notifications
  FROM @extschema@.zk_lock_status() AS s;

-- SHOW LOCKS, with semaphores: a semaphore node's mode is 'semaphore', and
-- it is granted when fewer than its max_holders semaphore nodes of its
-- resource are lower (the worker's rule, grant_rule.c); a waiting one is
-- shown blocked by its nearest lower node.  Same columns as before, so
-- that users' objects on zk_locks() keep working; the view zk_locks adds
-- max_holders at its end (NULL for a lock).
CREATE OR REPLACE FUNCTION zk_locks(subtree text DEFAULT NULL,
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
  WITH q AS MATERIALIZED (
    SELECT q.*, @extschema@.zk_semaphore_node_limit(q.node) AS max_holders
    FROM @extschema@.zk_lock_queue(subtree) AS q
  ), n AS (
    SELECT q.*,
           CASE WHEN q.max_holders IS NOT NULL
                THEN count(*) FILTER (WHERE q.max_holders IS NOT NULL)
                       OVER (PARTITION BY q.resource ORDER BY q.seq
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                       < q.max_holders
                ELSE q.granted END AS slot_granted
    FROM q
  ), decided AS (
    SELECT r.*,
           r.slot_granted AS is_granted,
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
    FROM n r
  )
  SELECT d.resource,
         CASE WHEN d.max_holders IS NOT NULL THEN 'semaphore' ELSE d.mode END,
         d.is_granted, d.node,
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
  LEFT JOIN decided b ON b.resource = d.resource AND b.node = d.blocked_by
  ORDER BY d.resource, d.seq
$$;

CREATE OR REPLACE VIEW zk_locks AS
  SELECT l.*, @extschema@.zk_semaphore_node_limit(l.node) AS max_holders
  FROM @extschema@.zk_locks() AS l;


-- ==== instance leadership (owner: election work) ====

-- Instance leadership (ZooKeeper's election recipe, held by the worker for
-- each group of zklock.elections).  zk_is_leader asks no one: true only
-- while this instance leads the group and the session lease covers it; a
-- transaction that saw true and wrote cannot commit once the leadership
-- is lost (the commit fence).
CREATE FUNCTION zk_is_leader("group" text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zklock_is_leader'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_is_leader(text) IS
  'True while this instance leads the election group under a valid session lease; a transaction that saw true and wrote cannot commit once the leadership is lost.';

CREATE FUNCTION zk_leader("group" text)
RETURNS text
AS 'MODULE_PATHNAME', 'zklock_leader'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_leader(text) IS
  'The instance that leads the election group now, as ZooKeeper shows it (one round trip): node_name (system identifier:port) on host; NULL when it has no candidate.';

CREATE FUNCTION zk_elections(
    OUT "group" text, OUT candidates text[], OUT leader text,
    OUT leader_since timestamptz, OUT is_leader boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'zklock_election_list'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_elections() IS
  'For each group of zklock.elections: its candidates in order (the first leads), the leader, since when it leads (its node''s mtime) and whether this instance leads it.';

CREATE VIEW zk_elections AS SELECT * FROM zk_elections();

COMMENT ON VIEW zk_elections IS
  'The election groups of zklock.elections: candidates in order, leader, since when, and whether this instance leads.';

GRANT SELECT ON zk_elections TO PUBLIC;

-- ==== the advisory-lock API (owner: advisory work) ====

-- The advisory-lock API: PostgreSQL's pg_advisory_* functions, with their
-- argument and return types, stacking and release behaviour, over zklock's
-- ZooKeeper locks (src/advisory.c), so that replacing the prefix is the
-- migration.  A key is the resource "zklock.advisory/<namespace>/<key>"
-- (zklock.advisory_namespace, by default the database's name; the key "42"
-- or "1,2", two key spaces apart).  STRICT as PostgreSQL's; for PUBLIC as
-- PostgreSQL's and zk_lock_acquire are.  doc/sql.md, "Advisory locks".

CREATE FUNCTION zk_advisory_lock(key bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'zklock_advisory_lock'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_advisory_lock(bigint) IS
  'Waits for an exclusive session-level advisory lock on the key, in ZooKeeper (as pg_advisory_lock); holds stack.';

CREATE FUNCTION zk_advisory_lock(key1 integer, key2 integer)
RETURNS void
AS 'MODULE_PATHNAME', 'zklock_advisory_lock'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_advisory_lock(integer, integer) IS
  'Waits for an exclusive session-level advisory lock on the key, in ZooKeeper (as pg_advisory_lock); holds stack.';

CREATE FUNCTION zk_advisory_lock_shared(key bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'zklock_advisory_lock_shared'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_advisory_lock_shared(bigint) IS
  'Waits for a shared session-level advisory lock on the key, in ZooKeeper (as pg_advisory_lock_shared); holds stack.';

CREATE FUNCTION zk_advisory_lock_shared(key1 integer, key2 integer)
RETURNS void
AS 'MODULE_PATHNAME', 'zklock_advisory_lock_shared'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_advisory_lock_shared(integer, integer) IS
  'Waits for a shared session-level advisory lock on the key, in ZooKeeper (as pg_advisory_lock_shared); holds stack.';

CREATE FUNCTION zk_try_advisory_lock(key bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zklock_try_advisory_lock'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_try_advisory_lock(bigint) IS
  'An exclusive session-level advisory lock on the key, in ZooKeeper, if it can be had now (as pg_try_advisory_lock).';

CREATE FUNCTION zk_try_advisory_lock(key1 integer, key2 integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zklock_try_advisory_lock'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_try_advisory_lock(integer, integer) IS
  'An exclusive session-level advisory lock on the key, in ZooKeeper, if it can be had now (as pg_try_advisory_lock).';

CREATE FUNCTION zk_try_advisory_lock_shared(key bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zklock_try_advisory_lock_shared'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_try_advisory_lock_shared(bigint) IS
  'A shared session-level advisory lock on the key, in ZooKeeper, if it can be had now (as pg_try_advisory_lock_shared).';

CREATE FUNCTION zk_try_advisory_lock_shared(key1 integer, key2 integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zklock_try_advisory_lock_shared'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_try_advisory_lock_shared(integer, integer) IS
  'A shared session-level advisory lock on the key, in ZooKeeper, if it can be had now (as pg_try_advisory_lock_shared).';

CREATE FUNCTION zk_advisory_xact_lock(key bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'zklock_advisory_xact_lock'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_advisory_xact_lock(bigint) IS
  'Waits for an exclusive transaction-level advisory lock on the key, in ZooKeeper (as pg_advisory_xact_lock); it ends with the transaction.';

CREATE FUNCTION zk_advisory_xact_lock(key1 integer, key2 integer)
RETURNS void
AS 'MODULE_PATHNAME', 'zklock_advisory_xact_lock'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_advisory_xact_lock(integer, integer) IS
  'Waits for an exclusive transaction-level advisory lock on the key, in ZooKeeper (as pg_advisory_xact_lock); it ends with the transaction.';

CREATE FUNCTION zk_advisory_xact_lock_shared(key bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'zklock_advisory_xact_lock_shared'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_advisory_xact_lock_shared(bigint) IS
  'Waits for a shared transaction-level advisory lock on the key, in ZooKeeper (as pg_advisory_xact_lock_shared); it ends with the transaction.';

CREATE FUNCTION zk_advisory_xact_lock_shared(key1 integer, key2 integer)
RETURNS void
AS 'MODULE_PATHNAME', 'zklock_advisory_xact_lock_shared'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_advisory_xact_lock_shared(integer, integer) IS
  'Waits for a shared transaction-level advisory lock on the key, in ZooKeeper (as pg_advisory_xact_lock_shared); it ends with the transaction.';

CREATE FUNCTION zk_try_advisory_xact_lock(key bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zklock_try_advisory_xact_lock'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_try_advisory_xact_lock(bigint) IS
  'An exclusive transaction-level advisory lock on the key, in ZooKeeper, if it can be had now (as pg_try_advisory_xact_lock).';

CREATE FUNCTION zk_try_advisory_xact_lock(key1 integer, key2 integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zklock_try_advisory_xact_lock'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_try_advisory_xact_lock(integer, integer) IS
  'An exclusive transaction-level advisory lock on the key, in ZooKeeper, if it can be had now (as pg_try_advisory_xact_lock).';

CREATE FUNCTION zk_try_advisory_xact_lock_shared(key bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zklock_try_advisory_xact_lock_shared'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_try_advisory_xact_lock_shared(bigint) IS
  'A shared transaction-level advisory lock on the key, in ZooKeeper, if it can be had now (as pg_try_advisory_xact_lock_shared).';

CREATE FUNCTION zk_try_advisory_xact_lock_shared(key1 integer, key2 integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zklock_try_advisory_xact_lock_shared'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_try_advisory_xact_lock_shared(integer, integer) IS
  'A shared transaction-level advisory lock on the key, in ZooKeeper, if it can be had now (as pg_try_advisory_xact_lock_shared).';

CREATE FUNCTION zk_advisory_unlock(key bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zklock_advisory_unlock'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_advisory_unlock(bigint) IS
  'Releases one exclusive session-level hold of the key (as pg_advisory_unlock); false, with a WARNING, when none is held.';

CREATE FUNCTION zk_advisory_unlock(key1 integer, key2 integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zklock_advisory_unlock'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_advisory_unlock(integer, integer) IS
  'Releases one exclusive session-level hold of the key (as pg_advisory_unlock); false, with a WARNING, when none is held.';

CREATE FUNCTION zk_advisory_unlock_shared(key bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zklock_advisory_unlock_shared'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_advisory_unlock_shared(bigint) IS
  'Releases one shared session-level hold of the key (as pg_advisory_unlock_shared); false, with a WARNING, when none is held.';

CREATE FUNCTION zk_advisory_unlock_shared(key1 integer, key2 integer)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zklock_advisory_unlock_shared'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_advisory_unlock_shared(integer, integer) IS
  'Releases one shared session-level hold of the key (as pg_advisory_unlock_shared); false, with a WARNING, when none is held.';

CREATE FUNCTION zk_advisory_unlock_all()
RETURNS void
AS 'MODULE_PATHNAME', 'zklock_advisory_unlock_all'
LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_advisory_unlock_all() IS
  'Releases every session-level zk advisory lock of this session, in any namespace (as pg_advisory_unlock_all); zk_lock_* locks and transaction-level holds stay.';

-- ==== privileges, last ====

-- Privileges: what the manual promises of every member (doc/safety.md),
-- whatever default privileges (ALTER DEFAULT PRIVILEGES, globally or in
-- this schema, for functions and tables, to a role or to PUBLIC) gave as
-- the scripts created the members, now or at an earlier install or update.
-- 1.3 did this in a DO block at its end; from 1.4 the rule is the function
-- zk_lock_settle_privileges(), which each version's script calls last, so
-- that the members it adds are covered too (1.4: the views and functions of
-- semaphores, leadership and advisory locks; all for PUBLIC but the
-- function itself, which is superuser-only).  The rule is 1.3's:
--
--  - superuser-only (zk_lock_admin_node, zk_lock_force_release,
--    zk_lock_revoke, zk_lock_fences_guard, zk_lock_settle_privileges):
--    every grant to anyone but the owner is removed.
--  - not granted to PUBLIC (zk_lock_nodes, zk_lock_queue, zk_lock_local
--    and its view, zk_lock_fence): a grant that the default privileges of
--    the member's owner would give is removed; other grants stay.
--  - every relation: read-only for everyone but the owner (INSERT, UPDATE,
--    DELETE, TRUNCATE, REFERENCES and TRIGGER are removed from everyone
--    else), and a trigger someone put on a member table is disabled.
--
-- One WARNING names every privilege taken away.  Names reach statements
-- through %I and quote_ident alone; names are looked up in pg_catalog
-- alone (the function's search_path; test/t/058).  Returns how many
-- privileges it removed.
CREATE FUNCTION zk_lock_settle_privileges()
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ext oid;
  su_only text[] := ARRAY['zk_lock_admin_node', 'zk_lock_force_release',
                          'zk_lock_revoke', 'zk_lock_fences_guard',
                          'zk_lock_settle_privileges'];
  not_public text[] := ARRAY['zk_lock_nodes', 'zk_lock_queue', 'zk_lock_local',
                             'zk_lock_fence'];
  g record;
  who text;
  removed text[] := '{}';
BEGIN
  IF NOT coalesce((SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user), false) THEN
    RAISE EXCEPTION 'permission denied for function zk_lock_settle_privileges'
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'zk_lock_settle_privileges is for superusers only, whatever grants exist.';
  END IF;
  ext := (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'zklock');
  FOR g IN
    SELECT DISTINCT 'FUNCTION' AS kind,
           pg_catalog.format('%I.%I(%s)', n.nspname, p.proname,
                             pg_catalog.pg_get_function_identity_arguments(p.oid)) AS object,
           a.grantee, a.privilege_type
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_proc p ON p.oid = d.objid
    JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
    CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
    WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
      AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
      AND d.refobjid = ext AND d.deptype = 'e'
      AND a.grantee <> p.proowner
      AND (p.proname = ANY (su_only)
           OR (p.proname = ANY (not_public)
               AND EXISTS (SELECT 1
                           FROM pg_catalog.pg_default_acl da
                           CROSS JOIN LATERAL pg_catalog.aclexplode(da.defaclacl) x
                           WHERE da.defaclrole = p.proowner
                             AND da.defaclobjtype = 'f'
                             AND da.defaclnamespace IN (0, p.pronamespace)
                             AND x.grantee = a.grantee
                             AND x.privilege_type = a.privilege_type)))
    UNION
    SELECT DISTINCT 'TABLE',
           pg_catalog.format('%I.%I', n.nspname, c.relname),
           a.grantee, a.privilege_type
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_class c ON c.oid = d.objid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
    WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
      AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
      AND d.refobjid = ext AND d.deptype = 'e'
      AND a.grantee <> c.relowner
      AND (a.privilege_type <> 'SELECT'
           OR (c.relname = ANY (not_public)
               AND EXISTS (SELECT 1
                           FROM pg_catalog.pg_default_acl da
                           CROSS JOIN LATERAL pg_catalog.aclexplode(da.defaclacl) x
                           WHERE da.defaclrole = c.relowner
                             AND da.defaclobjtype = 'r'
                             AND da.defaclnamespace IN (0, c.relnamespace)
                             AND x.grantee = a.grantee
                             AND x.privilege_type = a.privilege_type)))
    ORDER BY 1, 2, 3, 4
  LOOP
    who := CASE WHEN g.grantee = 0 THEN 'PUBLIC'
                ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END;
    EXECUTE pg_catalog.format('REVOKE %s ON %s %s FROM %s CASCADE',
                              g.privilege_type, g.kind, g.object, who);
    removed := removed || pg_catalog.format('%s on %s %s from %s',
                                            g.privilege_type, pg_catalog.lower(g.kind),
                                            g.object, who);
  END LOOP;
  -- a trigger someone put on a member table (with a TRIGGER privilege that
  -- default privileges gave, before 1.3) runs as whoever writes the table:
  -- on zk_lock_fences, as zk_lock_fence's owner.  Not zklock's to drop:
  -- disabled and named, for the administrator.
  FOR g IN
    SELECT pg_catalog.format('%I on %I.%I', t.tgname, n.nspname, c.relname) AS object,
           pg_catalog.format('%I.%I', n.nspname, c.relname) AS tbl, t.tgname
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_class c ON c.oid = d.objid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_catalog.pg_trigger t ON t.tgrelid = c.oid
    WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
      AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
      AND d.refobjid = ext AND d.deptype = 'e'
      AND NOT t.tgisinternal
      AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend fd
                      WHERE fd.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                        AND fd.objid = t.tgfoid
                        AND fd.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
                        AND fd.refobjid = ext AND fd.deptype = 'e')
    ORDER BY 1
  LOOP
    EXECUTE pg_catalog.format('ALTER TABLE %s DISABLE TRIGGER %I', g.tbl, g.tgname);
    RAISE WARNING 'zklock: trigger % is not zklock''s: disabled', g.object
      USING DETAIL = 'It would run with the privileges of whoever writes the table (zk_lock_fence writes zk_lock_fences as the extension''s owner).',
            HINT = 'Drop it, or enable it again (ALTER TABLE ... ENABLE TRIGGER) if you made it and trust its function.';
  END LOOP;
  IF pg_catalog.cardinality(removed) > 0 THEN
    RAISE WARNING 'zklock: removed % privileges on its members that default privileges or grants gave',
      pg_catalog.cardinality(removed)
      USING DETAIL = pg_catalog.array_to_string(removed, E'\n'),
            HINT = 'zklock''s superuser-only members keep no grants; those not granted to PUBLIC keep none that their owner''s default privileges give; its tables and views keep no privilege but SELECT.  A grant made by hand afterwards is kept by later updates unless those default privileges would also give it.';
  END IF;
  RETURN pg_catalog.cardinality(removed);
END $$;

COMMENT ON FUNCTION zk_lock_settle_privileges() IS
  'Remove the privileges on zklock''s members that the manual says they do not have (superuser-only; each version''s script runs it last).';
REVOKE ALL ON FUNCTION zk_lock_settle_privileges() FROM PUBLIC;

SELECT @extschema@.zk_lock_settle_privileges();

/* ---- zklock--1.4--1.6.sql */
/* zklock--1.4--1.6.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION zklock UPDATE TO '1.6'" to load this file. \quit

-- (1.5.0 shipped library-only on SQL 1.4: there is no SQL 1.5, so that the
-- extension's and the release's numbers stay in step.)

-- ==== statistics (stats.c) ====

-- Per resource and mode, counted on this instance since the server started
-- or the last zk_lock_stats_reset(): lock nodes granted (at once, or after
-- waiting behind another node), waits and their times (ms), refused
-- try-locks, timeouts, cancels, deadlocks, lost locks, and how long the
-- locks were held (ms).  At most zklock.stats_max pairs: the least used give
-- way.  Readable by everyone: the resource names are in zk_locks already.
CREATE FUNCTION zk_lock_stats(
    OUT resource text, OUT mode text,
    OUT acquisitions bigint, OUT granted_at_once bigint, OUT waited bigint,
    OUT not_granted bigint,
    OUT total_wait_time double precision, OUT max_wait_time double precision,
    OUT timeouts bigint, OUT cancels bigint, OUT deadlocks bigint,
    OUT lost bigint,
    OUT total_held_time double precision, OUT max_held_time double precision)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'zklock_lock_stats'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW zk_lock_stats AS SELECT * FROM zk_lock_stats();
GRANT SELECT ON zk_lock_stats TO PUBLIC;

-- Forget every count, as pg_stat_statements_reset(): not granted to PUBLIC
-- (an administrator may grant it).
CREATE FUNCTION zk_lock_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'zklock_lock_stats_reset'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION zk_lock_stats_reset() FROM PUBLIC;

-- ==== waits ====

-- This instance's requests waiting behind another node: who waits (pid),
-- for what, its own node, the node it waits behind (the one it watches;
-- it changes as the queue moves) and since when.  As zk_lock_local, not
-- granted to PUBLIC (it names backends); a monitoring role reads it, as
-- pg_stat_activity's details, through pg_read_all_stats (pg_monitor).  A new function: zk_lock_local()
-- keeps the columns 1.4's SQL declares (a rolling upgrade runs this
-- library under it).
CREATE FUNCTION zk_lock_waits(
    OUT pid integer, OUT resource text, OUT mode text, OUT node text,
    OUT waits_behind text, OUT waiting_since timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'zklock_lock_waits'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW zk_lock_waits AS SELECT * FROM zk_lock_waits();
REVOKE ALL ON FUNCTION zk_lock_waits() FROM PUBLIC;
REVOKE ALL ON zk_lock_waits FROM PUBLIC;
GRANT EXECUTE ON FUNCTION zk_lock_waits() TO pg_read_all_stats;
GRANT SELECT ON zk_lock_waits TO pg_read_all_stats;

-- ==== privileges, last ====

-- zk_lock_settle_privileges() as 1.4's (zklock--1.3--1.4.sql says the
-- rule), with 1.6's members: zk_lock_waits (its function and view) and
-- zk_lock_stats_reset are not granted to PUBLIC.
CREATE OR REPLACE FUNCTION zk_lock_settle_privileges()
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ext oid;
  su_only text[] := ARRAY['zk_lock_admin_node', 'zk_lock_force_release',
                          'zk_lock_revoke', 'zk_lock_fences_guard',
                          'zk_lock_settle_privileges'];
  not_public text[] := ARRAY['zk_lock_nodes', 'zk_lock_queue', 'zk_lock_local',
                             'zk_lock_fence', 'zk_lock_waits',
                             'zk_lock_stats_reset'];
  g record;
  who text;
  removed text[] := '{}';
BEGIN
  IF NOT coalesce((SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user), false) THEN
    RAISE EXCEPTION 'permission denied for function zk_lock_settle_privileges'
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'zk_lock_settle_privileges is for superusers only, whatever grants exist.';
  END IF;
  ext := (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'zklock');
  FOR g IN
    SELECT DISTINCT 'FUNCTION' AS kind,
           pg_catalog.format('%I.%I(%s)', n.nspname, p.proname,
                             pg_catalog.pg_get_function_identity_arguments(p.oid)) AS object,
           a.grantee, a.privilege_type
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_proc p ON p.oid = d.objid
    JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
    CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
    WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
      AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
      AND d.refobjid = ext AND d.deptype = 'e'
      AND a.grantee <> p.proowner
      AND (p.proname = ANY (su_only)
           OR (p.proname = ANY (not_public)
               AND EXISTS (SELECT 1
                           FROM pg_catalog.pg_default_acl da
                           CROSS JOIN LATERAL pg_catalog.aclexplode(da.defaclacl) x
                           WHERE da.defaclrole = p.proowner
                             AND da.defaclobjtype = 'f'
                             AND da.defaclnamespace IN (0, p.pronamespace)
                             AND x.grantee = a.grantee
                             AND x.privilege_type = a.privilege_type)))
    UNION
    SELECT DISTINCT 'TABLE',
           pg_catalog.format('%I.%I', n.nspname, c.relname),
           a.grantee, a.privilege_type
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_class c ON c.oid = d.objid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
    WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
      AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
      AND d.refobjid = ext AND d.deptype = 'e'
      AND a.grantee <> c.relowner
      AND (a.privilege_type <> 'SELECT'
           OR (c.relname = ANY (not_public)
               AND EXISTS (SELECT 1
                           FROM pg_catalog.pg_default_acl da
                           CROSS JOIN LATERAL pg_catalog.aclexplode(da.defaclacl) x
                           WHERE da.defaclrole = c.relowner
                             AND da.defaclobjtype = 'r'
                             AND da.defaclnamespace IN (0, c.relnamespace)
                             AND x.grantee = a.grantee
                             AND x.privilege_type = a.privilege_type)))
    ORDER BY 1, 2, 3, 4
  LOOP
    who := CASE WHEN g.grantee = 0 THEN 'PUBLIC'
                ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END;
    EXECUTE pg_catalog.format('REVOKE %s ON %s %s FROM %s CASCADE',
                              g.privilege_type, g.kind, g.object, who);
    removed := removed || pg_catalog.format('%s on %s %s from %s',
                                            g.privilege_type, pg_catalog.lower(g.kind),
                                            g.object, who);
  END LOOP;
  -- a trigger someone put on a member table (with a TRIGGER privilege that
  -- default privileges gave, before 1.3) runs as whoever writes the table:
  -- on zk_lock_fences, as zk_lock_fence's owner.  Not zklock's to drop:
  -- disabled and named, for the administrator.
  FOR g IN
    SELECT pg_catalog.format('%I on %I.%I', t.tgname, n.nspname, c.relname) AS object,
           pg_catalog.format('%I.%I', n.nspname, c.relname) AS tbl, t.tgname
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_class c ON c.oid = d.objid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_catalog.pg_trigger t ON t.tgrelid = c.oid
    WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
      AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
      AND d.refobjid = ext AND d.deptype = 'e'
      AND NOT t.tgisinternal
      AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend fd
                      WHERE fd.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                        AND fd.objid = t.tgfoid
                        AND fd.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
                        AND fd.refobjid = ext AND fd.deptype = 'e')
    ORDER BY 1
  LOOP
    EXECUTE pg_catalog.format('ALTER TABLE %s DISABLE TRIGGER %I', g.tbl, g.tgname);
    RAISE WARNING 'zklock: trigger % is not zklock''s: disabled', g.object
      USING DETAIL = 'It would run with the privileges of whoever writes the table (zk_lock_fence writes zk_lock_fences as the extension''s owner).',
            HINT = 'Drop it, or enable it again (ALTER TABLE ... ENABLE TRIGGER) if you made it and trust its function.';
  END LOOP;
  IF pg_catalog.cardinality(removed) > 0 THEN
    RAISE WARNING 'zklock: removed % privileges on its members that default privileges or grants gave',
      pg_catalog.cardinality(removed)
      USING DETAIL = pg_catalog.array_to_string(removed, E'\n'),
            HINT = 'zklock''s superuser-only members keep no grants; those not granted to PUBLIC keep none that their owner''s default privileges give; its tables and views keep no privilege but SELECT.  A grant made by hand afterwards is kept by later updates unless those default privileges would also give it.';
  END IF;
  RETURN pg_catalog.cardinality(removed);
END $$;

COMMENT ON FUNCTION zk_lock_settle_privileges() IS
  'Remove the privileges on zklock''s members that the manual says they do not have (superuser-only; each version''s script runs it last).';
REVOKE ALL ON FUNCTION zk_lock_settle_privileges() FROM PUBLIC;

SELECT @extschema@.zk_lock_settle_privileges();

/* ---- zklock--1.6--1.7.sql */
/* zklock--1.6--1.7.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION zklock UPDATE TO '1.7'" to load this file. \quit

-- zklock 1.7: the delegation the manual documents works, and zk_lock_status
-- is readable by monitoring roles.  No new object; node data unchanged.

-- ==== revocation and forced release, delegated ====

-- zk_lock_revoke and zk_lock_force_release listed the holders through
-- zk_locks, which masks pid, database, user and query by the role the
-- caller acts as (zk_lock_outer_role(), which looks through SECURITY
-- DEFINER): called from a superuser's SECURITY DEFINER function by a role
-- that is not one -- the delegation doc/sql.md documents -- every pid was
-- masked, and zk_lock_revoke, which skips a holder without one, revoked
-- nothing.  Both now read the unmasked rows (zk_lock_queue, with
-- zk_locks' rule for semaphores); they stay superuser-only, whatever
-- grants exist, judged by current_user (the wrapper's owner).
CREATE OR REPLACE FUNCTION zk_lock_force_release(resource text, node text DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  r record;
  n integer := 0;
  seen boolean := false;
BEGIN
  IF NOT coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false) THEN
    RAISE EXCEPTION 'permission denied for function zk_lock_force_release'
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'zk_lock_force_release is for superusers only, whatever grants exist.';
  END IF;
  IF resource IS NULL THEN
    RAISE EXCEPTION 'zklock resource name must not be null'
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  FOR r IN WITH q AS MATERIALIZED (
             SELECT q.*, @extschema@.zk_semaphore_node_limit(q.node) AS max_holders
             FROM @extschema@.zk_lock_queue(zk_lock_force_release.resource) AS q
             WHERE q.resource = zk_lock_force_release.resource
           ), l AS (
             SELECT q.node, q.instance, q.pid, q.mode, q.seq, q.max_holders,
                    CASE WHEN q.max_holders IS NOT NULL
                         THEN count(*) FILTER (WHERE q.max_holders IS NOT NULL)
                                OVER (ORDER BY q.seq
                                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                                < q.max_holders
                         ELSE q.granted END AS granted
             FROM q
           )
           SELECT l.node, l.instance, l.pid,
                  CASE WHEN l.max_holders IS NOT NULL THEN 'semaphore' ELSE l.mode END AS mode,
                  l.granted
           FROM l
           WHERE (l.granted OR l.node = zk_lock_force_release.node)
             AND (zk_lock_force_release.node IS NULL OR l.node = zk_lock_force_release.node)
           ORDER BY l.seq
  LOOP
    seen := true;
    IF NOT r.granted THEN
      RAISE WARNING 'zklock lock node "%" on resource "%" is waiting, not holding: it was not removed',
        r.node, resource
        USING HINT = 'zk_lock_force_release removes holders'' nodes only.  A waiter ends with its timeout, a cancel of its statement or the end of its session.';
      CONTINUE;
    END IF;
    IF @extschema@.zk_lock_admin_node(resource, r.node, 'delete', NULL) THEN
      n := n + 1;
      RAISE LOG 'zklock: % force-released % lock node %/% held by pid % on %',
        current_user, r.mode, resource, r.node, r.pid, r.instance;
    END IF;
  END LOOP;
  IF node IS NOT NULL AND NOT seen THEN
    RAISE WARNING 'there is no zklock lock node "%" on resource "%"', node, resource
      USING HINT = 'zk_locks lists the nodes of a resource.';
  END IF;
  RETURN n;
END $$;

CREATE OR REPLACE FUNCTION zk_lock_revoke(resource text, action text DEFAULT 'cancel')
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  r record;
  n integer := 0;
BEGIN
  IF NOT coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false) THEN
    RAISE EXCEPTION 'permission denied for function zk_lock_revoke'
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'zk_lock_revoke is for superusers only, whatever grants exist.';
  END IF;
  IF resource IS NULL OR action IS NULL THEN
    RAISE EXCEPTION 'zklock resource name and revocation action must not be null'
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF action NOT IN ('cancel', 'terminate') THEN
    RAISE EXCEPTION 'invalid zklock revocation action "%"', action
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'The action is ''cancel'' or ''terminate''.';
  END IF;
  FOR r IN WITH q AS MATERIALIZED (
             SELECT q.*, @extschema@.zk_semaphore_node_limit(q.node) AS max_holders
             FROM @extschema@.zk_lock_queue(zk_lock_revoke.resource) AS q
             WHERE q.resource = zk_lock_revoke.resource
           ), l AS (
             SELECT q.*,
                    CASE WHEN q.max_holders IS NOT NULL
                         THEN count(*) FILTER (WHERE q.max_holders IS NOT NULL)
                                OVER (ORDER BY q.seq
                                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                                < q.max_holders
                         ELSE q.granted END AS is_granted
             FROM q
           )
           SELECT l.node, l.instance, l.pid, l.database, l.username,
                  l.application_name, l.scope, l.implicit, l.query,
                  CASE WHEN l.max_holders IS NOT NULL THEN 'semaphore' ELSE l.mode END AS mode
           FROM l
           WHERE l.is_granted AND l.pid IS NOT NULL
             AND l.scope IS DISTINCT FROM 'explicit'
           ORDER BY l.seq
  LOOP
    IF @extschema@.zk_lock_admin_node(resource, r.node, 'revoke',
         @extschema@.zk_lock_revocation_data(r.instance, r.pid, r.database,
           r.username, r.application_name, r.scope, r.implicit, action,
           current_user, left(r.query, 200))) THEN
      n := n + 1;
      RAISE LOG 'zklock: % revoked (%) % lock node %/% held by pid % on %',
        current_user, action, r.mode, resource, r.node, r.pid, r.instance;
    END IF;
  END LOOP;
  RETURN n;
END $$;

-- ==== zk_lock_status, for monitoring ====

-- The view was its owner's alone (no grant since 1.0), while the manual
-- makes it the thing to monitor: granted, as zk_lock_waits, to
-- pg_read_all_stats (so to pg_monitor).  Not to PUBLIC: it names the
-- ensemble's hosts and the last error.  The functions behind it and its
-- columns were executable by everyone since 1.0 and 1.3/1.4, so that
-- anyone read the view's rows through zk_lock_status(): as zk_lock_waits
-- (and pg_buffercache), they are granted where the view is, and no longer
-- to PUBLIC.  All three are members not granted to PUBLIC from now on
-- (zk_lock_settle_privileges below).
REVOKE ALL ON FUNCTION zk_lock_status() FROM PUBLIC;
REVOKE ALL ON FUNCTION zk_lock_status_watches() FROM PUBLIC;
REVOKE ALL ON FUNCTION zk_lock_status_notifications() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION zk_lock_status() TO pg_read_all_stats;
GRANT EXECUTE ON FUNCTION zk_lock_status_watches() TO pg_read_all_stats;
GRANT EXECUTE ON FUNCTION zk_lock_status_notifications() TO pg_read_all_stats;
GRANT SELECT ON zk_lock_status TO pg_read_all_stats;

-- ==== privileges, last ====

-- zk_lock_settle_privileges() as 1.6's (zklock--1.3--1.4.sql says the
-- rule), with 1.7's members: zk_lock_status (its view and the three
-- functions) is not granted to PUBLIC; the grants to pg_read_all_stats of
-- the monitoring members (zk_lock_waits, zk_lock_status) are the scripts'
-- own and kept, even where default privileges give the same.
CREATE OR REPLACE FUNCTION zk_lock_settle_privileges()
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  ext oid;
  su_only text[] := ARRAY['zk_lock_admin_node', 'zk_lock_force_release',
                          'zk_lock_revoke', 'zk_lock_fences_guard',
                          'zk_lock_settle_privileges'];
  not_public text[] := ARRAY['zk_lock_nodes', 'zk_lock_queue', 'zk_lock_local',
                             'zk_lock_fence', 'zk_lock_waits',
                             'zk_lock_stats_reset', 'zk_lock_status',
                             'zk_lock_status_watches',
                             'zk_lock_status_notifications'];
  -- granted to pg_read_all_stats by the scripts: kept, even when default
  -- privileges would give the same grant
  monitoring text[] := ARRAY['zk_lock_waits', 'zk_lock_status',
                             'zk_lock_status_watches',
                             'zk_lock_status_notifications'];
  g record;
  who text;
  removed text[] := '{}';
BEGIN
  IF NOT coalesce((SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user), false) THEN
    RAISE EXCEPTION 'permission denied for function zk_lock_settle_privileges'
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'zk_lock_settle_privileges is for superusers only, whatever grants exist.';
  END IF;
  ext := (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'zklock');
  FOR g IN
    SELECT DISTINCT 'FUNCTION' AS kind,
           pg_catalog.format('%I.%I(%s)', n.nspname, p.proname,
                             pg_catalog.pg_get_function_identity_arguments(p.oid)) AS object,
           a.grantee, a.privilege_type
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_proc p ON p.oid = d.objid
    JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
    CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
    WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
      AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
      AND d.refobjid = ext AND d.deptype = 'e'
      AND a.grantee <> p.proowner
      AND (p.proname = ANY (su_only)
           OR (p.proname = ANY (not_public)
               AND NOT (p.proname = ANY (monitoring)
                        AND a.grantee = 'pg_read_all_stats'::pg_catalog.regrole)
               AND EXISTS (SELECT 1
                           FROM pg_catalog.pg_default_acl da
                           CROSS JOIN LATERAL pg_catalog.aclexplode(da.defaclacl) x
                           WHERE da.defaclrole = p.proowner
                             AND da.defaclobjtype = 'f'
                             AND da.defaclnamespace IN (0, p.pronamespace)
                             AND x.grantee = a.grantee
                             AND x.privilege_type = a.privilege_type)))
    UNION
    SELECT DISTINCT 'TABLE',
           pg_catalog.format('%I.%I', n.nspname, c.relname),
           a.grantee, a.privilege_type
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_class c ON c.oid = d.objid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
    WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
      AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
      AND d.refobjid = ext AND d.deptype = 'e'
      AND a.grantee <> c.relowner
      AND (a.privilege_type <> 'SELECT'
           OR (c.relname = ANY (not_public)
               AND NOT (c.relname = ANY (monitoring)
                        AND a.grantee = 'pg_read_all_stats'::pg_catalog.regrole)
               AND EXISTS (SELECT 1
                           FROM pg_catalog.pg_default_acl da
                           CROSS JOIN LATERAL pg_catalog.aclexplode(da.defaclacl) x
                           WHERE da.defaclrole = c.relowner
                             AND da.defaclobjtype = 'r'
                             AND da.defaclnamespace IN (0, c.relnamespace)
                             AND x.grantee = a.grantee
                             AND x.privilege_type = a.privilege_type)))
    ORDER BY 1, 2, 3, 4
  LOOP
    who := CASE WHEN g.grantee = 0 THEN 'PUBLIC'
                ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END;
    EXECUTE pg_catalog.format('REVOKE %s ON %s %s FROM %s CASCADE',
                              g.privilege_type, g.kind, g.object, who);
    removed := removed || pg_catalog.format('%s on %s %s from %s',
                                            g.privilege_type, pg_catalog.lower(g.kind),
                                            g.object, who);
  END LOOP;
  -- a trigger someone put on a member table (with a TRIGGER privilege that
  -- default privileges gave, before 1.3) runs as whoever writes the table:
  -- on zk_lock_fences, as zk_lock_fence's owner.  Not zklock's to drop:
  -- disabled and named, for the administrator.
  FOR g IN
    SELECT pg_catalog.format('%I on %I.%I', t.tgname, n.nspname, c.relname) AS object,
           pg_catalog.format('%I.%I', n.nspname, c.relname) AS tbl, t.tgname
    FROM pg_catalog.pg_depend d
    JOIN pg_catalog.pg_class c ON c.oid = d.objid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    JOIN pg_catalog.pg_trigger t ON t.tgrelid = c.oid
    WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
      AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
      AND d.refobjid = ext AND d.deptype = 'e'
      AND NOT t.tgisinternal
      AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend fd
                      WHERE fd.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                        AND fd.objid = t.tgfoid
                        AND fd.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
                        AND fd.refobjid = ext AND fd.deptype = 'e')
    ORDER BY 1
  LOOP
    EXECUTE pg_catalog.format('ALTER TABLE %s DISABLE TRIGGER %I', g.tbl, g.tgname);
    RAISE WARNING 'zklock: trigger % is not zklock''s: disabled', g.object
      USING DETAIL = 'It would run with the privileges of whoever writes the table (zk_lock_fence writes zk_lock_fences as the extension''s owner).',
            HINT = 'Drop it, or enable it again (ALTER TABLE ... ENABLE TRIGGER) if you made it and trust its function.';
  END LOOP;
  IF pg_catalog.cardinality(removed) > 0 THEN
    RAISE WARNING 'zklock: removed % privileges on its members that default privileges or grants gave',
      pg_catalog.cardinality(removed)
      USING DETAIL = pg_catalog.array_to_string(removed, E'\n'),
            HINT = 'zklock''s superuser-only members keep no grants; those not granted to PUBLIC keep none that their owner''s default privileges give; its tables and views keep no privilege but SELECT.  A grant made by hand afterwards is kept by later updates unless those default privileges would also give it.';
  END IF;
  RETURN pg_catalog.cardinality(removed);
END $$;

COMMENT ON FUNCTION zk_lock_settle_privileges() IS
  'Remove the privileges on zklock''s members that the manual says they do not have (superuser-only; each version''s script runs it last).';
REVOKE ALL ON FUNCTION zk_lock_settle_privileges() FROM PUBLIC;

SELECT @extschema@.zk_lock_settle_privileges();
