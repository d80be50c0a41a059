--
-- Queues (1.9, issue 31): every signature of the queue functions, and
-- every error their arguments can raise (SQLSTATE, message, detail).
-- The two-instance behaviour is test/t/recipes/130-136's.
--

-- the signatures, as the extension installs them
SELECT p.oid::regprocedure AS function, pg_get_function_result(p.oid) AS returns
FROM pg_proc p JOIN pg_depend d
  ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
 AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
WHERE p.proname LIKE 'zk\_queue%'
ORDER BY 1::text;

-- who may call them: PUBLIC only the functions behind the views (an
-- administrator grants the others: doc/security.md)
SELECT p.oid::regprocedure AS function,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public
FROM pg_proc p JOIN pg_depend d
  ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
 AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
WHERE p.proname LIKE 'zk\_queue%'
ORDER BY 1::text;
SELECT c.relname, has_table_privilege('public', c.oid, 'SELECT') AS public
FROM pg_class c WHERE c.relname IN ('zk_queues', 'zk_queue_items', 'zk_queue_stats') ORDER BY 1;

-- zk_queue_stats' columns (stats.c counts them; test/t/recipes/143)
SELECT attname, atttypid::regtype FROM pg_attribute
WHERE attrelid = 'zk_queue_stats'::regclass AND attnum > 0 ORDER BY attnum;

-- each signature once: put (bytea, text; default and given priority),
-- length, peek, try_take and take (default and given timeout), purge
SELECT zk_queue_purge('rq/a');
SELECT zk_queue_put_now('rq/a', '\x01'::bytea) LIKE 'entry-100-%' AS put_bytea;
SELECT zk_queue_put_now('rq/a', 'two'::text, 5) LIKE 'entry-005-%' AS put_text;
SELECT zk_queue_put_now('rq/a', 'three') LIKE 'entry-100-%' AS put_unknown_is_text;
SELECT zk_queue_length('rq/a');
SELECT convert_from(item, 'UTF8') AS item, priority FROM zk_queue_peek('rq/a');
BEGIN;
SELECT convert_from(item, 'UTF8') AS item, priority FROM zk_queue_try_take('rq/a');
SELECT item, priority FROM zk_queue_take('rq/a');
SELECT convert_from(item, 'UTF8') AS item, priority FROM zk_queue_take('rq/a', '1s');
SELECT id IS NULL AS none, item IS NULL AS no_item FROM zk_queue_take('rq/a', '100ms');
SELECT id IS NULL AS none FROM zk_queue_try_take('rq/a');
SELECT * FROM zk_queues WHERE queue = 'rq/a';
COMMIT;
SELECT zk_queue_length('rq/a');
BEGIN;
SELECT zk_queue_put('rq/a', '\x02'::bytea, 7) IS NOT NULL AS put_tx_bytea;
SELECT zk_queue_put('rq/a', 'tx'::text) IS NOT NULL AS put_tx_text;
SELECT zk_queue_length('rq/a');   -- 0: not before the COMMIT
COMMIT;
SELECT zk_queue_length('rq/a');
SELECT zk_queue_purge('rq/a');
SELECT id IS NULL AS none FROM zk_queue_peek('rq/a');

-- NULL arguments
SELECT err($$SELECT zk_queue_put_now(NULL, 'x')$$);
SELECT err($$SELECT zk_queue_put_now('rq/a', NULL::text)$$);
SELECT err($$SELECT zk_queue_put_now('rq/a', NULL::bytea)$$);
SELECT zk_queue_put_now('rq/a', 'x', NULL) LIKE 'entry-100-%' AS null_priority_is_default;
SELECT err($$SELECT zk_queue_put(NULL, 'x')$$);
SELECT err($$SELECT zk_queue_put('rq/a', NULL::bytea)$$);
SELECT err($$SELECT zk_queue_try_take(NULL)$$);
SELECT err($$SELECT zk_queue_take(NULL, '1s')$$);
SELECT err($$SELECT zk_queue_length(NULL)$$);
SELECT err($$SELECT zk_queue_peek(NULL)$$);
SELECT err($$SELECT zk_queue_purge(NULL)$$);
-- review: the text forms and the put's priority too
SELECT err($$SELECT zk_queue_put('rq/a', NULL::text)$$);
SELECT err($$SELECT zk_queue_put('rq/a', 'x'::text, NULL)$$);
SELECT err($$SELECT zk_queue_put('rq/a', 'x'::text, 1000)$$);
SELECT err($$SELECT zk_queue_put('rq/a', repeat('x', 1000001))$$);
SELECT err($$SELECT zk_queue_put_now('zklock.x', 'x')$$);
SELECT err($$SELECT zk_queue_put_now('rq/' || chr(1), 'x')$$);
SELECT count(*) >= 0 AS item_nodes FROM zk_queue_item_nodes();
SELECT zk_queue_purge('rq/a');

-- priorities out of range
SELECT err($$SELECT zk_queue_put_now('rq/a', 'x', -1)$$);
SELECT err($$SELECT zk_queue_put_now('rq/a', 'x', 1000)$$);
SELECT err($$SELECT zk_queue_put('rq/a', 'x'::bytea, -1)$$);
SELECT zk_queue_put_now('rq/a', 'x', 0) LIKE 'entry-000-%' AS lowest;
SELECT zk_queue_put_now('rq/a', 'x', 999) LIKE 'entry-999-%' AS highest;
SELECT zk_queue_purge('rq/a');

-- timeouts
SELECT err($$SELECT zk_queue_take('rq/a', '-1s')$$);
SELECT id IS NULL AS none FROM zk_queue_take('rq/a', '0');
SELECT err($$SELECT zk_queue_take('rq/a', '1000 days')$$);

-- an item too large (1,000,000 bytes is the most)
SELECT err($$SELECT zk_queue_put_now('rq/a', repeat('x', 1000001))$$);
SELECT err($$SELECT zk_queue_put('rq/a', repeat('x', 1000001)::bytea)$$);

-- names: the resource rules, and a queue's own length limit
SELECT err($$SELECT zk_queue_put_now('', 'x')$$);
SELECT err($$SELECT zk_queue_put_now('/rq', 'x')$$);
SELECT err($$SELECT zk_queue_put_now('rq//a', 'x')$$);
SELECT err($$SELECT zk_queue_length('rq/./a')$$);
SELECT err($$SELECT zk_queue_try_take(repeat('q', 300))$$);
SELECT err($$SELECT zk_queue_peek(repeat('q', 300))$$);
-- a resource name may have 255 bytes, a queue's 14 fewer ("zklock.queues/")
SELECT err($$SELECT zk_queue_put_now(repeat('q', 242), 'x')$$);
SELECT err($$SELECT zk_queue_length(repeat('q', 241))$$);
-- a queue's own child nodes (entries, taken, pending) are no component
-- of a queue's name, in every function, before ZooKeeper is asked
SELECT err($$SELECT zk_queue_put_now('rq/entries', 'x')$$);
SELECT err($$SELECT zk_queue_put_now('rq/taken', 'x'::bytea)$$);
SELECT err($$SELECT zk_queue_put('rq/pending', 'x')$$);
SELECT err($$SELECT zk_queue_put('rq/entries/b', 'x'::bytea, 5)$$);
SELECT err($$SELECT zk_queue_take('taken/rq', '1s')$$);
SELECT err($$SELECT zk_queue_try_take('pending')$$);
SELECT err($$SELECT zk_queue_peek('rq/a/entries')$$);
SELECT err($$SELECT zk_queue_length('rq/taken/a')$$);
SELECT err($$SELECT zk_queue_purge('rq/pending/x')$$);
-- the rules of a resource name come first
SELECT err($$SELECT zk_queue_length('rq//entries')$$);
-- only whole components: these are names like any other
SELECT zk_queue_length('rq/entries2') AS entries2,
       zk_queue_length('entriesx') AS entriesx,
       zk_queue_length('rq/x.taken') AS dot_taken,
       zk_queue_length('rq/Pending') AS capital;

-- zklock.allowed_queues (1.9): the queues a role may use, each item
-- allowing itself and the queues below it; 42501 outside, in every
-- function, before ZooKeeper is asked (superusers too)
SHOW zklock.allowed_queues;
SET zklock.allowed_queues = 'rq/etl, rq/b';
SELECT zk_queue_length('rq/etl') AS etl, zk_queue_length('rq/etl/x') AS below;
SELECT err($$SELECT zk_queue_length('rq/etlx')$$);
SELECT err($$SELECT zk_queue_put_now('rq', 'x')$$);
SELECT err($$SELECT zk_queue_put_now('other', 'x'::bytea)$$);
SELECT err($$SELECT zk_queue_put('other', 'x')$$);
SELECT err($$SELECT zk_queue_put('other', 'x'::bytea, 5)$$);
SELECT err($$SELECT zk_queue_take('other', '1s')$$);
SELECT err($$SELECT zk_queue_try_take('other')$$);
SELECT err($$SELECT zk_queue_peek('other')$$);
SELECT err($$SELECT zk_queue_purge('other')$$);
-- the rules of a name come first
SELECT err($$SELECT zk_queue_length('other/entries')$$);
SET zklock.allowed_queues = '';
SELECT err($$SELECT zk_queue_length('rq/etl')$$);
-- items are names: refused when set
SELECT err($q$SET zklock.allowed_queues = 'a/../b'$q$);
SELECT err($q$SET zklock.allowed_queues = 'a,,b'$q$);
SELECT err($q$SET zklock.allowed_queues = 'a*'$q$);
-- only a superuser sets it
CREATE ROLE rq_user;
SET ROLE rq_user;
SELECT err($q$SET zklock.allowed_queues = '*'$q$);
RESET ROLE;
DROP ROLE rq_user;
RESET zklock.allowed_queues;
SELECT zk_queue_length('other') AS open_again;

-- PREPARE TRANSACTION is refused with a put or a take; nothing stays
BEGIN;
SELECT zk_queue_put('rq/a', 'p'::text) IS NOT NULL AS put;
PREPARE TRANSACTION 'rq';
SELECT zk_queue_length('rq/a');
SELECT zk_queue_put_now('rq/a', 'q') IS NOT NULL AS put_now;
BEGIN;
SELECT convert_from(item, 'UTF8') AS item FROM zk_queue_try_take('rq/a');
PREPARE TRANSACTION 'rq';
SELECT convert_from(item, 'UTF8') AS item FROM zk_queue_peek('rq/a');
SELECT zk_queue_purge('rq/a');
