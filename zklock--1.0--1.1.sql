/* zklock--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION zklock UPDATE TO '1.1'" to load this file. \quit

-- zklock 1.1: the trust release.  Each section below says which finding of
-- the trust issue it belongs to.  Node data written by 1.0 stays readable.
