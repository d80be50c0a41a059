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

-- ==== privileges, last ====
