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
