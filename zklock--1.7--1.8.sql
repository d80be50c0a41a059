/* zklock--1.7--1.8.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION zklock UPDATE TO '1.8'" to load this file. \quit

-- zklock 1.8: secured ensembles (TLS and SASL).  zk_lock_status says how
-- the session reaches ZooKeeper and who ZooKeeper takes it for.  Node data
-- unchanged: 1.7 and 1.8 instances share a root.

-- ==== zk_lock_status: transport, identity, tls_expires ====

-- Those of the session the worker asked for last: transport 'tcp' or
-- 'tls'; identity, what ZooKeeper authenticates it as ('digest:<user>',
-- 'sasl:<user or principal>', 'x509:<subject>' in RFC 2253 form as
-- ZooKeeper's X509AuthenticationProvider names it, or '' for none); and
-- tls_expires, the client certificate's end of validity.  The view gains
-- the columns at its end (CREATE OR REPLACE VIEW) and zk_lock_status()
-- stays as it is, as in 1.3 and 1.4, so that an update keeps the views
-- and grants users made on either.  Granted where the view is (1.7).
CREATE FUNCTION zk_lock_status_security(
    OUT transport text, OUT identity text, OUT tls_expires timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'zklock_status_security'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_lock_status_security() IS
  'The transport (tcp or tls) of this instance''s zklock session, the identity ZooKeeper authenticates it as, and when its client certificate expires (zk_lock_status.transport, identity, tls_expires).';
REVOKE ALL ON FUNCTION zk_lock_status_security() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION zk_lock_status_security() TO pg_read_all_stats;

CREATE OR REPLACE VIEW zk_lock_status AS
  SELECT s.*, @extschema@.zk_lock_status_watches() AS watches,
         @extschema@.zk_lock_status_notifications() AS notifications,
         t.transport, t.identity, t.tls_expires
  FROM @extschema@.zk_lock_status() AS s,
       @extschema@.zk_lock_status_security() AS t;

-- ==== privileges, last ====

-- zk_lock_settle_privileges() as 1.7's (zklock--1.3--1.4.sql says the
-- rule), with 1.8's member zk_lock_status_security among those not
-- granted to PUBLIC and granted to pg_read_all_stats.
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
                             'zk_lock_status_notifications',
                             'zk_lock_status_security'];
  -- granted to pg_read_all_stats by the scripts: kept, even when default
  -- privileges would give the same grant
  monitoring text[] := ARRAY['zk_lock_waits', 'zk_lock_status',
                             'zk_lock_status_watches',
                             'zk_lock_status_notifications',
                             'zk_lock_status_security'];
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
