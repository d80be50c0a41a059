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

-- ==== instance leadership (owner: election work) ====

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
