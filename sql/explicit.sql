--
-- Explicit locks (Hive's LOCK TABLE): persistent, with a required expiry.
--
SELECT dblink_connect('x', self_dsn());

-- taken in another session that then ends: the lock stays
SELECT * FROM dblink('x', $$SELECT zk_lock_acquire_explicit('exp/tbl', 'exclusive', '1 hour') > 0$$) AS t(ok boolean);
SELECT dblink_disconnect('x');
SELECT resource, mode, granted, scope, implicit,
       expires BETWEEN now() + interval '59 min' AND now() + interval '61 min' AS expires_in_an_hour,
       session_id IS NULL AS persistent
FROM zk_locks WHERE resource LIKE 'exp%';
SELECT zk_lock_try_acquire('exp/tbl') IS NULL AS still_locked;
SELECT zk_lock_try_acquire('exp/tbl', 'shared') IS NULL AS shared_blocked_too;

-- UNLOCK
SELECT zk_lock_release_explicit('exp/tbl');
SELECT zk_lock_release_explicit('exp/tbl');
SELECT zk_lock_try_acquire('exp/tbl') > 0 AS free_again;

-- expired locks are removed by the worker (zklock.sweep_interval is 500ms here)
SELECT zk_lock_acquire_explicit('exp/short', 'shared', '1 second') > 0 AS ok;
SELECT count(*) AS present FROM zk_locks WHERE resource = 'exp/short';
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'exp/short') = 0$$, 10) AS ready;
SELECT count(*) AS after_expiry FROM zk_locks WHERE resource = 'exp/short';
-- "expires=" inside another field's value does not hide the real one
SET application_name = 'job expires=never';
SELECT zk_lock_acquire_explicit('exp/app', 'shared', '1 second') > 0 AS ok;
RESET application_name;
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'exp/app') = 0$$, 10) AS ready;
SELECT count(*) AS after_expiry FROM zk_locks WHERE resource = 'exp/app';

-- a waiting explicit request with a timeout leaves nothing behind
SELECT zk_lock_acquire_session('exp/busy') > 0 AS ok;
SELECT * FROM dblink(self_dsn(),
  $$SELECT zk_lock_acquire_explicit('exp/busy', 'exclusive', '1 hour', '200 ms')$$) AS t(token bigint);
SELECT count(*) AS nodes FROM zk_locks WHERE resource = 'exp/busy';
SELECT zk_lock_release('exp/busy');

-- a long time to live is kept whole (not cut to 24.8 days of milliseconds)
SELECT zk_lock_acquire_explicit('exp/long', 'shared', '300 days') > 0 AS ok;
SELECT expires BETWEEN now() + interval '299 days' AND now() + interval '301 days' AS expires_in_300_days
FROM zk_locks WHERE resource = 'exp/long';
SELECT zk_lock_release_explicit('exp/long', 'shared');

-- Issue 9, finding 4: explicit locks are granted once, and only while their
-- node exists.
-- UNLOCK removes the granted lock only, not a waiting request's node; the
-- waiter is then granted, with its node
SELECT zk_lock_acquire_explicit('exp/dbl', ttl => '1 hour') > 0 AS s1_holds;
SELECT dblink_connect('w', self_dsn());
SELECT dblink_send_query('w', $$SELECT zk_lock_acquire_explicit('exp/dbl', ttl => '1 hour', timeout => '20 s') > 0$$);
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'exp/dbl') = 2$$, 10) AS waiting;
SELECT zk_lock_release_explicit('exp/dbl') AS released;
SELECT * FROM dblink_get_result('w') AS t(granted boolean);
SELECT * FROM dblink_get_result('w') AS t(granted boolean);
SELECT count(*) AS nodes, bool_and(granted) AS granted FROM zk_locks WHERE resource = 'exp/dbl';
SELECT zk_lock_try_acquire('exp/dbl') IS NULL AS still_locked;
SELECT zk_lock_release_explicit('exp/dbl') AS released;

-- the sweep never removes a waiting request's node, and the time to live
-- counts from the grant (zklock.sweep_interval is 500ms here)
SELECT zk_lock_acquire_explicit('exp/ttl', ttl => '1 hour') > 0 AS s1_holds;
SELECT dblink_send_query('w', $$SELECT zk_lock_acquire_explicit('exp/ttl', ttl => '2 s', timeout => '20 s') > 0$$);
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'exp/ttl') = 2$$, 10) AS waiting;
SELECT pg_sleep(3.5);
SELECT count(*) AS nodes_after_the_ttl FROM zk_locks WHERE resource = 'exp/ttl';
SELECT zk_lock_release_explicit('exp/ttl') AS released;
SELECT * FROM dblink_get_result('w') AS t(granted boolean);
SELECT * FROM dblink_get_result('w') AS t(granted boolean);
SELECT count(*) AS held_after_the_grant FROM zk_locks WHERE resource = 'exp/ttl' AND granted;
SELECT wait_until($$(SELECT count(*) FROM zk_locks WHERE resource = 'exp/ttl') = 0$$, 10) AS expired;
SELECT dblink_disconnect('w');

-- UNLOCK by the role the caller acts as (SET ROLE), as the node records it
CREATE ROLE zk_explicit_u1;
SET ROLE zk_explicit_u1;
SELECT zk_lock_acquire_explicit('exp/role', ttl => '1 hour') > 0 AS ok;
SELECT username FROM zk_locks WHERE resource = 'exp/role';
SELECT zk_lock_release_explicit('exp/role') AS released;
RESET ROLE;
SELECT count(*) AS left_over FROM zk_locks WHERE resource = 'exp/role';
-- ... also when the session user is neither the role nor a superuser (1.0's
-- SQL compared session_user), and through SECURITY DEFINER functions,
-- inside which the role the caller acts as is still the caller's
CREATE ROLE zk_explicit_login;
GRANT zk_explicit_u1 TO zk_explicit_login;
CREATE ROLE zk_explicit_owner;
CREATE ROLE zk_explicit_other;
CREATE FUNCTION exp_lock_wrapper(r text) RETURNS boolean
  LANGUAGE sql SECURITY DEFINER AS $$SELECT zk_lock_acquire_explicit(r, ttl => '1 hour') > 0$$;
CREATE FUNCTION exp_unlock_wrapper(r text) RETURNS integer
  LANGUAGE sql SECURITY DEFINER AS $$SELECT zk_lock_release_explicit(r)$$;
ALTER FUNCTION exp_lock_wrapper(text) OWNER TO zk_explicit_owner;
ALTER FUNCTION exp_unlock_wrapper(text) OWNER TO zk_explicit_owner;
SET SESSION AUTHORIZATION zk_explicit_login;
SET ROLE zk_explicit_u1;
SELECT session_user, current_user;
SELECT zk_lock_acquire_explicit('exp/role2', ttl => '1 hour') > 0 AS ok;
SELECT username FROM zk_locks WHERE resource = 'exp/role2';
SELECT zk_lock_release_explicit('exp/role2') AS released;
SELECT exp_lock_wrapper('exp/role3') AS ok;
SELECT username FROM zk_locks WHERE resource = 'exp/role3';
SELECT zk_lock_release_explicit('exp/role3') AS released;
SELECT exp_lock_wrapper('exp/role4') AS ok;
SELECT exp_unlock_wrapper('exp/role4') AS released;
SELECT zk_lock_acquire_explicit('exp/role5', ttl => '1 hour') > 0 AS ok;
RESET ROLE;
RESET SESSION AUTHORIZATION;
-- a role that is not a member of the holder's role cannot release it
SET ROLE zk_explicit_other;
SELECT zk_lock_release_explicit('exp/role5') AS released;
SELECT exp_unlock_wrapper('exp/role5') AS released;
RESET ROLE;
SELECT zk_lock_release_explicit('exp/role5') AS released_by_superuser;
SELECT count(*) AS left_over FROM zk_locks WHERE resource LIKE 'exp/role%';
DROP FUNCTION exp_lock_wrapper(text);
DROP FUNCTION exp_unlock_wrapper(text);
DROP ROLE zk_explicit_login;
DROP ROLE zk_explicit_owner;
DROP ROLE zk_explicit_other;
DROP ROLE zk_explicit_u1;

-- a revocation does not take an explicit lock's expiry away
SELECT zk_lock_acquire_explicit('exp/rv', ttl => '1 hour') > 0 AS ok;
SELECT zk_lock_revoke('exp/rv') AS revoked;
SELECT expires BETWEEN now() + interval '59 min' AND now() + interval '61 min' AS still_expires_in_an_hour
FROM zk_locks WHERE resource = 'exp/rv';
SELECT zk_lock_release_explicit('exp/rv') AS released;

-- an explicit lock on what this session holds would wait for itself
SELECT zk_lock_acquire_session('exp/self', 'shared') > 0 AS ok;
SELECT err($$SELECT zk_lock_acquire_explicit('exp/self', ttl => '1 hour', timeout => '2 s')$$);
SELECT zk_lock_acquire_explicit('exp/self', 'shared', ttl => '1 hour') > 0 AS shared_does_not_conflict;
SELECT zk_lock_release_explicit('exp/self', 'shared') AS released;
SELECT zk_lock_release('exp/self', 'shared');
BEGIN;
SELECT zk_lock_acquire('exp/self/t') > 0 AS ok;
SELECT err($$SELECT zk_lock_acquire_explicit('exp/self', ttl => '1 hour', timeout => '2 s')$$);
COMMIT;

-- nothing persistent without an end
SELECT err($$SELECT zk_lock_acquire_explicit('exp/x')$$);
SELECT err($$SELECT zk_lock_acquire_explicit('exp/x', 'exclusive', '-1 hour')$$);
SELECT err($$SELECT zk_lock_acquire_explicit('exp/x', 'exclusive', '2 years')$$);

-- at most a year, counted as now() + ttl counts it: months and years by
-- the calendar ('1 year' is 365 or 366 days, not 360); the expiry shown
-- is the grant plus the time to live, not rounded to a second
SELECT zk_lock_acquire_explicit('exp/year', 'shared', '1 year') > 0 AS ok;
SELECT expires >= since + interval '1 year' AND expires < since + interval '1 year 10 s'
       AS expires_in_a_calendar_year
FROM zk_locks WHERE resource = 'exp/year';
SELECT zk_lock_release_explicit('exp/year', 'shared') AS released;
SELECT zk_lock_acquire_explicit('exp/year', 'shared', '11 months 30 days') > 0 AS ok;
SELECT zk_lock_release_explicit('exp/year', 'shared') AS released;
SELECT zk_lock_acquire_explicit('exp/year', 'shared', '365 days') > 0 AS ok;
SELECT zk_lock_release_explicit('exp/year', 'shared') AS released;
SELECT err($$SELECT zk_lock_acquire_explicit('exp/x', 'exclusive', '1 year 2 days', '0')$$);
SELECT err($$SELECT zk_lock_acquire_explicit('exp/x', 'exclusive', '1 year 1 second', '0')$$);
SELECT err($$SELECT zk_lock_acquire_explicit('exp/x', 'exclusive', '12 months 1 day', '0')$$);
SELECT err($$SELECT zk_lock_acquire_explicit('exp/x', 'exclusive', '367 days', '0')$$);
-- 366 days: more than a year unless the coming year holds a 29 February
SELECT (err($$SELECT zk_lock_acquire_explicit('exp/x', 'exclusive', '366 days', '0')$$) LIKE '22023:%')
       = ((now() + interval '1 year') - now() < interval '366 days') AS refused_unless_a_leap_day_is_ahead;
SET client_min_messages = error;
SELECT zk_lock_release_explicit('exp/x') IN (0, 1) AS clean;
RESET client_min_messages;
SELECT err($$SELECT zk_lock_acquire_explicit('exp/x', 'exclusive', '1000000 years', '0')$$);
-- the most negative parts (their negation does not exist): 22023 too
SELECT err($$SELECT zk_lock_acquire_explicit('exp/x', 'exclusive', '-178956970 years -8 months', '0')$$);
SELECT err($$SELECT zk_lock_acquire_explicit('exp/x', 'exclusive', '-2147483648 days', '0')$$);
SELECT err($$SELECT zk_lock_acquire_explicit('exp/x', 'exclusive', '0', '0')$$);
SELECT err($$SELECT zk_lock_acquire_explicit('exp/x', 'exclusive', '1 month -31 days', '0')$$);
SELECT zk_lock_acquire_explicit('exp/frac', ttl => '10.25 s') > 0 AS ok;
SELECT expires - since BETWEEN interval '10.25 s' AND interval '10.75 s' AS counted_to_the_microsecond,
       extract(microseconds FROM expires)::bigint % 1000000 <> 0 AS not_rounded_to_a_second
FROM zk_locks WHERE resource = 'exp/frac';
SELECT zk_lock_release_explicit('exp/frac') AS released;
SELECT count(*) AS left_over FROM zk_locks WHERE resource LIKE 'exp%';
