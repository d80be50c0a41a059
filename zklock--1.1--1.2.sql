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
