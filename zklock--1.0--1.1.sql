/* zklock--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION zklock UPDATE TO '1.1'" to load this file. \quit

-- zklock 1.1: the trust release.  Each section below says which finding of
-- the trust issue it belongs to.  Node data written by 1.0 stays readable.

-- Finding 1: the commit fence is a lease.  zk_lock_status shows how much of
-- it is left (ms; NULL when no session is proven alive) and the margin a
-- commit needs; in_doubt counts held locks the lease does not cover.
DROP VIEW zk_lock_status;
DROP FUNCTION zk_lock_status();
CREATE FUNCTION zk_lock_status(
    OUT worker_pid integer, OUT state text, OUT session_id text,
    OUT hosts text, OUT root text, OUT session_timeout integer,
    OUT state_since timestamptz, OUT entries_in_use integer,
    OUT granted bigint, OUT waited bigint, OUT not_granted bigint,
    OUT failed bigint, OUT lost bigint, OUT in_doubt integer,
    OUT disconnected_since timestamptz, OUT last_error text,
    OUT lease_remaining integer, OUT lease_margin integer)
RETURNS record
AS 'MODULE_PATHNAME', 'zklock_status'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE VIEW zk_lock_status AS SELECT * FROM zk_lock_status();
