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

-- ==== the advisory-lock API (owner: advisory work) ====

-- ==== privileges, last ====
