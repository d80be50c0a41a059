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
