--
-- Fencing tokens with zk_lock_fence: a writer with an older token than one
-- already used for the resource is refused.
--
BEGIN;
SELECT zk_lock_acquire('fence/orders') AS old_token \gset
SELECT zk_lock_fence('fence/orders', :old_token) = :old_token AS recorded;
COMMIT;

-- the next holder fences with its newer token
BEGIN;
SELECT zk_lock_acquire('fence/orders') AS new_token \gset
SELECT :new_token > :old_token AS newer;
SELECT zk_lock_fence('fence/orders', :new_token) = :new_token AS recorded;
-- fencing again with the same token is fine
SELECT zk_lock_fence('fence/orders', :new_token) = :new_token AS same_again;
COMMIT;

-- a stale holder (the old token) is refused, with 55P03
SELECT regexp_replace(err(format('SELECT zk_lock_fence(%L, %s)', 'fence/orders', :old_token)),
                      '(oken) [0-9]+', '\1 N', 'g') AS stale;
SELECT token = :new_token AS newest_kept FROM zk_lock_fences WHERE resource = 'fence/orders';

SELECT err($$SELECT zk_lock_fence(NULL, 1)$$);
-- the resource-name rules apply (1.3), and nothing is recorded
SELECT err($$SELECT zk_lock_fence('f//b', 1)$$);
SELECT err($$SELECT zk_lock_fence('a/../b', 1)$$);
SELECT count(*) AS recorded FROM zk_lock_fences WHERE resource IN ('f//b', 'a/../b');

-- only the owner may fence by default
SELECT has_function_privilege('public', 'zk_lock_fence(text, bigint)', 'EXECUTE') AS public_may_fence,
       has_table_privilege('public', 'zk_lock_fences', 'SELECT') AS public_may_read,
       has_table_privilege('public', 'zk_lock_fences', 'INSERT') AS public_may_insert,
       has_table_privilege('public', 'zk_locks', 'SELECT') AS public_may_list;
DELETE FROM zk_lock_fences;
