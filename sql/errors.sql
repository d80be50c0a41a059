--
-- Bad input: a clear ERROR with an errcode, before anything reaches ZooKeeper.
--

-- modes
SELECT err($q$SELECT zk_lock_acquire('etl/a', 'exclusivee')$q$);
SELECT err($q$SELECT zk_lock_try_acquire('etl/a', '')$q$);
SELECT err($q$SELECT zk_lock_acquire('etl/a', NULL)$q$);
SELECT err($q$SELECT zk_lock_release('etl/a', 'read')$q$);

-- resource names
SELECT err($q$SELECT zk_lock_acquire('')$q$);
SELECT err($q$SELECT zk_lock_acquire(NULL)$q$);
SELECT err($q$SELECT zk_lock_acquire(repeat('x', 256))$q$);
SELECT err($q$SELECT zk_lock_acquire('/etl/a')$q$);
SELECT err($q$SELECT zk_lock_acquire('etl/a/')$q$);
SELECT err($q$SELECT zk_lock_acquire('etl//a')$q$);
SELECT err($q$SELECT zk_lock_acquire('etl/./a')$q$);
SELECT err($q$SELECT zk_lock_acquire('etl/../../zookeeper')$q$);
SELECT err($q$SELECT zk_lock_acquire('..')$q$);
SELECT err($q$SELECT zk_lock_acquire(E'etl/a\nb')$q$);
SELECT err($q$SELECT zk_lock_acquire(E'etl/\t')$q$);
SELECT err($q$SELECT zk_lock_acquire('etl/LOCK-EXCLUSIVE-0000000001')$q$);
SELECT err($q$SELECT zk_lock_try_acquire_session('/')$q$);

-- timeouts
SELECT err($q$SELECT zk_lock_acquire('etl/a', 'exclusive', '-1 second')$q$);
SELECT err($q$SELECT zk_lock_acquire('etl/a', 'exclusive', '1000 years')$q$);

-- the longest valid name is fine, and the mode is case-insensitive
SELECT zk_lock_try_acquire(repeat('x', 255), 'EXCLUSIVE') > 0 AS granted;
SELECT zk_lock_try_acquire('etl/Mixed Case/ünïcode', 'Shared') > 0 AS granted;

-- nothing was left behind by the errors
SELECT count(*) AS lock_nodes FROM zk_locks WHERE pid = pg_backend_pid();

-- a lock set larger than this backend's share (zklock.max_locks_per_backend)
SELECT err($q$SELECT zk_lock_acquire_all(ARRAY(SELECT 'set/' || i FROM generate_series(1, 40) i))$q$);

-- ZooKeeper unreachable: 08006 says where and for how long, whatever asked
-- (the errors table in the README), for a parent's lock and for zk_locks
ALTER SYSTEM SET zklock.hosts = '127.0.0.1:9';
SELECT pg_reload_conf();
SELECT wait_until($$(SELECT state FROM zk_lock_status) <> 'connected'$$, 10) AS disconnected;
SELECT err($q$SELECT zk_lock_acquire('st/other', 'exclusive', '10 s')$q$);
SELECT err($q$SELECT count(*) FROM zk_locks$q$);
ALTER SYSTEM RESET zklock.hosts;
SELECT pg_reload_conf();
SELECT wait_until($$(SELECT state FROM zk_lock_status) = 'connected'$$, 10) AS connected;
