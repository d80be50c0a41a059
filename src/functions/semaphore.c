/*-------------------------------------------------------------------------
 *
 * semaphore.c
 *		The SQL-callable functions of counting semaphores (zklock 1.4).
 *
 * A semaphore of max_holders lets that many holders in at once across
 * every instance, first come first served (1 is a mutex).  Each function
 * checks its arguments and calls the backend side: a slot is taken as a
 * lock is (acquire.c, zklock_semaphore_lock: parents' SHARED locks,
 * stacking, scopes, waits, the commit fence), and the worker applies the
 * semaphore's rule to its node (protocol.c, grant_rule.c).  Also here:
 * what zk_locks and zk_lock_status show of semaphores.  No shared state is
 * written here; zk_lock_status_notifications reads one counter under the
 * lock.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "zklock.h"
#include "functions.h"
#include "shmem.h"
#include "grant_rule.h"
#include "backend.h"

PG_FUNCTION_INFO_V1(zklock_semaphore_acquire);
PG_FUNCTION_INFO_V1(zklock_semaphore_try_acquire);
PG_FUNCTION_INFO_V1(zklock_semaphore_acquire_session);
PG_FUNCTION_INFO_V1(zklock_semaphore_try_acquire_session);
PG_FUNCTION_INFO_V1(zklock_semaphore_release);
PG_FUNCTION_INFO_V1(zklock_semaphore_node_limit);
PG_FUNCTION_INFO_V1(zklock_status_notifications);

/* max_holders: 1 (a mutex) to ZKLOCK_MAX_SEMAPHORE_HOLDERS */
static int
max_holders_arg(FunctionCallInfo fcinfo)
{
	int			n;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("zklock semaphore max_holders must not be null")));
	n = PG_GETARG_INT32(1);
	if (n < 1 || n > ZKLOCK_MAX_SEMAPHORE_HOLDERS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zklock semaphore max_holders %d is out of range", n),
				 errdetail("max_holders is between 1 and %d.",
						   ZKLOCK_MAX_SEMAPHORE_HOLDERS)));
	return n;
}

/*
 * The acquire functions: (resource, max_holders, timeout) for the waiting
 * ones, (resource, max_holders) for the try ones.  The token, or NULL for
 * a try not granted.
 */
static Datum
semaphore_common(FunctionCallInfo fcinfo, bool session, bool wait)
{
	char	   *resource = zklock_resource_arg(fcinfo);
	int			max_holders = max_holders_arg(fcinfo);
	int			timeout_ms = wait ? zklock_timeout_arg(fcinfo, 2) : -1;
	bool		acquired;
	int64		token;

	token = zklock_semaphore_lock(resource, max_holders, session, wait,
								  timeout_ms, &acquired);
	if (!acquired)
		PG_RETURN_NULL();
	PG_RETURN_INT64(token);
}

Datum
zklock_semaphore_acquire(PG_FUNCTION_ARGS)
{
	return semaphore_common(fcinfo, false, true);
}

Datum
zklock_semaphore_try_acquire(PG_FUNCTION_ARGS)
{
	return semaphore_common(fcinfo, false, false);
}

Datum
zklock_semaphore_acquire_session(PG_FUNCTION_ARGS)
{
	return semaphore_common(fcinfo, true, true);
}

Datum
zklock_semaphore_try_acquire_session(PG_FUNCTION_ARGS)
{
	return semaphore_common(fcinfo, true, false);
}

/* One session-level hold of a slot, as zk_lock_release gives up a lock */
Datum
zklock_semaphore_release(PG_FUNCTION_ARGS)
{
	char	   *resource = zklock_resource_arg(fcinfo);

	PG_RETURN_BOOL(zklock_unlock(resource, ZKLOCK_SEMAPHORE));
}

/*
 * zk_semaphore_node_limit(node): the limit a semaphore node's name says,
 * or NULL for any other name (grant_rule.c's parser, for zk_locks).
 */
Datum
zklock_semaphore_node_limit(PG_FUNCTION_ARGS)
{
	char	   *node = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int			limit;

	if (!zklock_parse_semaphore_node(node, &limit, NULL))
		PG_RETURN_NULL();
	PG_RETURN_INT32(limit);
}

/* zk_lock_status.notifications (1.4): node watch notifications received */
Datum
zklock_status_notifications(PG_FUNCTION_ARGS)
{
	int64		n;

	zklock_check_loaded();
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	n = (int64) zklock_shared->n_notifications;
	LWLockRelease(zklock_shared->lock);
	PG_RETURN_INT64(n);
}
