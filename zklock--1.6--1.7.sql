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
-- ensemble's hosts and the last error.
GRANT SELECT ON zk_lock_status TO pg_read_all_stats;

-- ==== privileges, last ====

-- 1.6's rule and members, unchanged: settled again, as every version's
-- script does last.
SELECT @extschema@.zk_lock_settle_privileges();
