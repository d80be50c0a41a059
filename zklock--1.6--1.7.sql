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
