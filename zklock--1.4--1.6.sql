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
