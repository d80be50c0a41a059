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

-- ==== privileges, last ====
