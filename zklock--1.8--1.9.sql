/* zklock--1.8--1.9.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION zklock UPDATE TO '1.9'" to load this file. \quit

-- The distributed queue (issue 31; doc/sql.md "Queues").  Kazoo's
-- LockingQueue layout under <zklock.root>/zklock.queues/<queue>.
--
-- Not granted to PUBLIC (REVOKEs below; zk_lock_settle_privileges keeps
-- them from PUBLIC and from default privileges' grantees): queues have no
-- owner and no per-role namespace, so a role that may put or take may do
-- so on every queue -- read any item (zk_queue_peek, a take), consume it,
-- and write persistent nodes of up to 1 MB into the ensemble that every
-- instance shares.  An administrator grants EXECUTE to the roles that use
-- queues (doc/security.md "Queues").  The views show names and counts
-- only, as zk_locks does for locks, and stay PUBLIC's.

CREATE FUNCTION zk_queue_put_now(queue text, item bytea,
                                 priority integer DEFAULT 100)
RETURNS text
AS 'MODULE_PATHNAME', 'zklock_queue_put_now_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_queue_put_now(text, bytea, integer) IS
  'Put an item into the queue at once, outside the transaction; returns its id (its entry''s name).';

CREATE FUNCTION zk_queue_put_now(queue text, item text,
                                 priority integer DEFAULT 100)
RETURNS text
AS 'MODULE_PATHNAME', 'zklock_queue_put_now_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_queue_put_now(text, text, integer) IS
  'Put a text item (its bytes in the database encoding) into the queue at once, outside the transaction; returns its id.';

CREATE FUNCTION zk_queue_put(queue text, item bytea,
                             priority integer DEFAULT 100)
RETURNS text
AS 'MODULE_PATHNAME', 'zklock_queue_put_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_queue_put(text, bytea, integer) IS
  'Put an item into the queue when the transaction commits (nothing if it rolls back); returns the put''s key (its node under pending/ until the commit).';

CREATE FUNCTION zk_queue_put(queue text, item text,
                             priority integer DEFAULT 100)
RETURNS text
AS 'MODULE_PATHNAME', 'zklock_queue_put_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_queue_put(text, text, integer) IS
  'Put a text item (its bytes in the database encoding) into the queue when the transaction commits; returns the put''s key.';

CREATE FUNCTION zk_queue_try_take(queue text,
                                  OUT id text, OUT item bytea,
                                  OUT priority integer)
RETURNS record
AS 'MODULE_PATHNAME', 'zklock_queue_try_take_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_queue_try_take(text) IS
  'Take the first item no one holds, now, held until the end of the transaction (consumed at COMMIT); NULLs when there is none.';

CREATE FUNCTION zk_queue_take(queue text, timeout interval DEFAULT NULL,
                              OUT id text, OUT item bytea,
                              OUT priority integer)
RETURNS record
AS 'MODULE_PATHNAME', 'zklock_queue_take_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_queue_take(text, interval) IS
  'Wait for the first item no one holds (up to timeout; NULL: no limit), held until the end of the transaction (consumed at COMMIT); NULLs at the timeout.';

CREATE FUNCTION zk_queue_length(queue text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zklock_queue_length_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_queue_length(text) IS
  'The number of items in the queue, waiting and held.';

CREATE FUNCTION zk_queue_peek(queue text,
                              OUT id text, OUT item bytea,
                              OUT priority integer)
RETURNS record
AS 'MODULE_PATHNAME', 'zklock_queue_peek_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_queue_peek(text) IS
  'The first item no one holds, read without taking it; NULLs when there is none.';

CREATE FUNCTION zk_queue_purge(queue text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zklock_queue_purge_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_queue_purge(text) IS
  'Delete the items of the queue that no one holds (held items stay with their holders); returns the number deleted.';

-- Administrators, and the roles they grant each to (see the top).  Purge
-- is granted apart: a role allowed to take can already empty a queue
-- (take and COMMIT in a loop), but only item by item, each one read.
REVOKE ALL ON FUNCTION zk_queue_put_now(text, bytea, integer),
  zk_queue_put_now(text, text, integer), zk_queue_put(text, bytea, integer),
  zk_queue_put(text, text, integer), zk_queue_try_take(text),
  zk_queue_take(text, interval), zk_queue_length(text), zk_queue_peek(text),
  zk_queue_purge(text) FROM PUBLIC;

-- Every queue item under <root>/zklock.queues (every instance and client),
-- with its hold; not granted to PUBLIC, as zk_lock_nodes.  The views below
-- are what users read.
CREATE FUNCTION zk_queue_item_nodes(
    OUT queue text, OUT id text, OUT priority integer, OUT held boolean,
    OUT instance text, OUT pid integer, OUT username text,
    OUT since timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'zklock_queue_item_nodes'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION zk_queue_item_nodes() FROM PUBLIC;

-- The items, in the order they are taken, and who holds each: the pid of a
-- holder is shown as zk_locks shows it (superusers, pg_read_all_stats, and
-- the roles whose privileges the caller has; others see NULL).
CREATE FUNCTION zk_queue_items(
    OUT queue text, OUT id text, OUT priority integer, OUT held boolean,
    OUT instance text, OUT pid integer, OUT since timestamptz)
RETURNS SETOF record
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT i.queue, i.id, i.priority, i.held, i.instance,
         CASE WHEN (SELECT rolsuper FROM pg_roles WHERE oid = @extschema@.zk_lock_outer_role())
                OR pg_has_role(@extschema@.zk_lock_outer_role(), 'pg_read_all_stats', 'USAGE')
                OR EXISTS (SELECT 1 FROM pg_roles o
                           WHERE o.rolname = i.username
                             AND pg_has_role(@extschema@.zk_lock_outer_role(), o.oid, 'USAGE'))
              THEN i.pid END,
         i.since
  FROM @extschema@.zk_queue_item_nodes() AS i
  ORDER BY i.queue, i.id
$$;
CREATE VIEW zk_queue_items AS SELECT * FROM zk_queue_items();
GRANT SELECT ON zk_queue_items TO PUBLIC;

-- Each queue with items: how many wait, how many are held.
CREATE VIEW zk_queues AS
  SELECT queue, count(*) FILTER (WHERE NOT held) AS waiting,
         count(*) FILTER (WHERE held) AS held
  FROM zk_queue_items() GROUP BY queue ORDER BY queue;
GRANT SELECT ON zk_queues TO PUBLIC;

-- ==== statistics (stats.c) ====

-- Per queue, counted on this instance since the server started or the
-- last zk_lock_stats_reset() (which resets both views): items put (in the
-- queue: zk_queue_put's at its commit), taken, consumed (their taker
-- committed), given back (rolled back, the backend gone: to be taken
-- again), takes that waited and their total wait (ms), takes that ended
-- with no item.  In zk_lock_stats' table (zklock.stats_max, its eviction,
-- zklock.track_stats).  Readable by everyone, as zk_lock_stats.
CREATE FUNCTION zk_queue_stats(
    OUT queue text, OUT puts bigint, OUT takes bigint, OUT consumed bigint,
    OUT given_back bigint, OUT waits bigint,
    OUT wait_time double precision, OUT timeouts bigint,
    OUT stats_reset timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'zklock_queue_stats_sql'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW zk_queue_stats AS SELECT * FROM zk_queue_stats();
GRANT SELECT ON zk_queue_stats TO PUBLIC;

-- ==== privileges, last ====

-- zk_lock_settle_privileges() as 1.8's (zklock--1.3--1.4.sql says the
-- rule), with 1.9's queue functions and zk_queue_item_nodes among those
-- not granted to PUBLIC: a grant that default privileges give them is
-- removed (the role would otherwise read, take and fill every queue, or
-- read who holds what); grants made by hand are kept.
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
                             'zk_lock_status_security',
                             'zk_queue_put_now', 'zk_queue_put',
                             'zk_queue_try_take', 'zk_queue_take',
                             'zk_queue_length', 'zk_queue_peek',
                             'zk_queue_purge', 'zk_queue_item_nodes'];
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
