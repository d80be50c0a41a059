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
