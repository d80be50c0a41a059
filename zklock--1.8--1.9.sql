/* zklock--1.8--1.9.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION zklock UPDATE TO '1.9'" to load this file. \quit

-- The distributed queue (issue 31; doc/sql.md "Queues").  Kazoo's
-- LockingQueue layout under <zklock.root>/zklock.queues/<queue>.

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

-- Administrators only: any role could otherwise empty any queue.
CREATE FUNCTION zk_queue_purge(queue text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'zklock_queue_purge_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION zk_queue_purge(text) IS
  'Delete the items of the queue that no one holds (held items stay with their holders); returns the number deleted.';
REVOKE ALL ON FUNCTION zk_queue_purge(text) FROM PUBLIC;

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

SELECT @extschema@.zk_lock_settle_privileges();
