/*-------------------------------------------------------------------------
 *
 * functions.c
 *		The SQL-callable lock functions of zklock: acquire and release
 *		(one resource or a set, transaction or session scope), explicit
 *		locks, and zk_lock_admin_node.
 *
 * Each function checks its arguments and calls backend.c; nothing here
 * knows about ZooKeeper or shared memory.  The listings and status
 * functions are in status.c, the advisory-lock API in advisory.c.
 * Privileges are the SQL objects' grants, except for zk_lock_admin_node,
 * which refuses every caller that is not a superuser, whatever grants
 * exist (zklock_admin).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "zklock.h"
#include "settings.h"
#include "shmem.h"
#include "resource.h"
#include "grant_rule.h"
#include "lease.h"
#include "nodedata.h"
#include "backend.h"

#include "functions.h"

PG_FUNCTION_INFO_V1(zklock_acquire);
PG_FUNCTION_INFO_V1(zklock_outer_role);
PG_FUNCTION_INFO_V1(zklock_try_acquire);
PG_FUNCTION_INFO_V1(zklock_acquire_session);
PG_FUNCTION_INFO_V1(zklock_try_acquire_session);
PG_FUNCTION_INFO_V1(zklock_acquire_all);
PG_FUNCTION_INFO_V1(zklock_try_acquire_all);
PG_FUNCTION_INFO_V1(zklock_acquire_all_session);
PG_FUNCTION_INFO_V1(zklock_try_acquire_all_session);
PG_FUNCTION_INFO_V1(zklock_release);
PG_FUNCTION_INFO_V1(zklock_admin);
PG_FUNCTION_INFO_V1(zklock_acquire_explicit);
PG_FUNCTION_INFO_V1(zklock_release_all);

/*
 * Resource names, node names and node data are UTF-8 inside zklock, as
 * ZooKeeper reads them, whatever the database encoding: converted on the
 * way in by zklock_utf8_in (a SQL_ASCII database's bytes are taken as they
 * are, and names are checked as UTF-8), and back on the way out by
 * status.c's text_out (which never fails).
 */
char *
zklock_utf8_in(char *name)
{
	return (char *) pg_server_to_any(name, strlen(name), PG_UTF8);
}

/* resource and mode arguments; NULLs are errors, not silent NULLs */
char *
zklock_resource_arg(FunctionCallInfo fcinfo)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("zklock resource name must not be null")));
	return zklock_utf8_in(text_to_cstring(PG_GETARG_TEXT_PP(0)));
}

static ZkLockMode
mode_arg(FunctionCallInfo fcinfo)
{
	if (PG_NARGS() < 2)
		return ZKLOCK_EXCLUSIVE;
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("zklock lock mode must not be null"),
				 errhint("The mode is 'exclusive' or 'shared'.")));
	return zklock_parse_mode(text_to_cstring(PG_GETARG_TEXT_PP(1)));
}

/* an interval in milliseconds (a month is 30 days, as elsewhere) */
static double
interval_ms(Interval *span)
{
	return (double) span->time / 1000.0 +
		((double) span->day + (double) span->month * DAYS_PER_MONTH) *
		SECS_PER_DAY * 1000.0;
}

/* the timeout argument (argument argno) in milliseconds; -1 for none */
int
zklock_timeout_arg(FunctionCallInfo fcinfo, int argno)
{
	double		ms;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return -1;
	ms = interval_ms(PG_GETARG_INTERVAL_P(argno));
	if (ms < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zklock timeout must not be negative")));
	if (ms > INT_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zklock timeout is too large"),
				 errhint("Use NULL to wait without a limit.")));
	return (int) ms;
}

static int
timeout_arg(FunctionCallInfo fcinfo)
{
	return zklock_timeout_arg(fcinfo, 2);
}

/*
 * The acquire functions: (resource, mode, timeout, parents) for the waiting
 * ones, (resource, mode, parents) for the try ones.
 */
static Datum
lock_common(FunctionCallInfo fcinfo, bool session, bool wait)
{
	char	   *resource = zklock_resource_arg(fcinfo);
	ZkLockMode	mode = mode_arg(fcinfo);
	int			timeout_ms = wait ? timeout_arg(fcinfo) : -1;
	int			parents_arg = wait ? 3 : 2;
	bool		parents = true;
	bool		acquired;
	int64		token;

	if (PG_NARGS() > parents_arg && !PG_ARGISNULL(parents_arg))
		parents = PG_GETARG_BOOL(parents_arg);
	token = zklock_lock(resource, mode, session, wait, timeout_ms, parents,
						&acquired);
	if (!acquired)
		PG_RETURN_NULL();
	PG_RETURN_INT64(token);
}

Datum
zklock_acquire(PG_FUNCTION_ARGS)
{
	return lock_common(fcinfo, false, true);
}

Datum
zklock_try_acquire(PG_FUNCTION_ARGS)
{
	return lock_common(fcinfo, false, false);
}

Datum
zklock_acquire_session(PG_FUNCTION_ARGS)
{
	return lock_common(fcinfo, true, true);
}

Datum
zklock_try_acquire_session(PG_FUNCTION_ARGS)
{
	return lock_common(fcinfo, true, false);
}

/*
 * The set functions: (resources text[], modes text[], timeout) for the
 * waiting ones, (resources, modes) for the try ones.  Returns the tokens in
 * the order of resources, or NULL for a try that was not granted.
 */
static Datum
lock_set_common(FunctionCallInfo fcinfo, bool session, bool wait)
{
	Datum	   *rdatums;
	bool	   *rnulls;
	int			n;
	Datum	   *mdatums = NULL;
	bool	   *mnulls = NULL;
	int			nmodes = 0;
	char	  **resources;
	ZkLockMode *modes;
	int64	   *tokens;
	Datum	   *out;
	int			timeout_ms = wait ? timeout_arg(fcinfo) : -1;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("zklock resource list must not be null")));
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(0), TEXTOID, -1, false,
					  TYPALIGN_INT, &rdatums, &rnulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zklock resource list must not be empty")));
	if (PG_NARGS() > 1 && !PG_ARGISNULL(1))
	{
		deconstruct_array(PG_GETARG_ARRAYTYPE_P(1), TEXTOID, -1, false,
						  TYPALIGN_INT, &mdatums, &mnulls, &nmodes);
		if (nmodes != n)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("zklock mode list has %d elements, the resource list %d",
							nmodes, n),
					 errhint("Give one mode per resource, or NULL for all exclusive.")));
	}

	resources = palloc(sizeof(char *) * n);
	modes = palloc(sizeof(ZkLockMode) * n);
	tokens = palloc0(sizeof(int64) * n);
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (rnulls[i] || (mdatums && mnulls[i]))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("zklock resource and mode lists must not contain nulls")));
		resources[i] = zklock_utf8_in(TextDatumGetCString(rdatums[i]));
		modes[i] = mdatums ?
			zklock_parse_mode(TextDatumGetCString(mdatums[i])) : ZKLOCK_EXCLUSIVE;
	}

	if (!zklock_lock_set(n, resources, modes, session, wait, timeout_ms, tokens))
		PG_RETURN_NULL();

	out = palloc(sizeof(Datum) * n);
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		out[i] = Int64GetDatum(tokens[i]);
	}
	PG_RETURN_ARRAYTYPE_P(construct_array(out, n, INT8OID, 8, FLOAT8PASSBYVAL,
										  TYPALIGN_DOUBLE));
}

Datum
zklock_acquire_all(PG_FUNCTION_ARGS)
{
	return lock_set_common(fcinfo, false, true);
}

Datum
zklock_try_acquire_all(PG_FUNCTION_ARGS)
{
	return lock_set_common(fcinfo, false, false);
}

Datum
zklock_acquire_all_session(PG_FUNCTION_ARGS)
{
	return lock_set_common(fcinfo, true, true);
}

Datum
zklock_try_acquire_all_session(PG_FUNCTION_ARGS)
{
	return lock_set_common(fcinfo, true, false);
}

Datum
zklock_release(PG_FUNCTION_ARGS)
{
	char	   *resource = zklock_resource_arg(fcinfo);
	ZkLockMode	mode = mode_arg(fcinfo);

	PG_RETURN_BOOL(zklock_unlock(resource, mode));
}

Datum
zklock_release_all(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(zklock_unlock_all());
}

/*
 * zk_lock_admin_node(resource, node, action, data): the worker deletes
 * ('delete') or writes data into ('revoke') another holder's node.  Only
 * for zk_lock_force_release, zk_lock_revoke and zk_lock_release_explicit
 * (SECURITY DEFINER, run as the extension's owner, a superuser).
 *
 * Superusers only, whatever grants exist: a grant made by ALTER DEFAULT
 * PRIVILEGES (or by hand) must not let a role delete or rewrite the lock
 * nodes of every instance.  The same symbol serves the SQL objects of
 * 1.0 to 1.3, so a database not yet updated is covered too.
 */
Datum
zklock_admin(PG_FUNCTION_ARGS)
{
	char	   *resource;
	char	   *node;
	char	   *action;
	char	   *data = NULL;
	ZkEntryKind kind;

	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for function zk_lock_admin_node"),
				 errdetail("Only superusers may delete or rewrite other holders' zklock lock nodes, whatever grants exist."),
				 errhint("Call zk_lock_force_release or zk_lock_revoke as a superuser.")));
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("resource, node and action must not be null")));
	resource = zklock_utf8_in(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	node = zklock_utf8_in(text_to_cstring(PG_GETARG_TEXT_PP(1)));
	action = text_to_cstring(PG_GETARG_TEXT_PP(2));
	if (!PG_ARGISNULL(3))
		data = zklock_utf8_in(text_to_cstring(PG_GETARG_TEXT_PP(3)));
	if (strcmp(action, "delete") == 0)
		kind = ZKR_FORCE_DELETE;
	else if (strcmp(action, "revoke") == 0)
		kind = ZKR_REVOKE;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid zklock node action \"%s\"", action),
				 errhint("The action is 'delete' or 'revoke'.")));
	PG_RETURN_BOOL(zklock_admin_node(resource, node, kind, data));
}

/*
 * An explicit lock's time to live, in milliseconds (a fraction of one
 * counts as one).  It is positive and at most a year, both counted as
 * now() + ttl counts them: months and years by the calendar, in the
 * session's time zone, from the time of the call -- '1 year' is 365 or 366
 * days, as is '12 months'; '366 days' is a year only when a 29 February
 * is ahead.  From there it is a duration (the node's ttl=, counted from
 * the grant by ZooKeeper's clock).
 */
/* -limit <= part <= limit, without negating part (INT_MIN has no negation) */
static bool
part_within(int64 part, int64 limit)
{
	return part >= -limit && part <= limit;
}

static int64
explicit_ttl_ms(Interval *ttl)
{
	Interval	year;
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz end;
	TimestampTz year_end;

	memset(&year, 0, sizeof(year));
	year.month = MONTHS_PER_YEAR;

	/*
	 * A part beyond a thousand years either way is refused as it is (the
	 * parts could still cancel out, but adding them to now could leave the
	 * range of a timestamp): the calendar is only asked about the rest.
	 */
	if (!part_within(ttl->month, 1000 * MONTHS_PER_YEAR) ||
		!part_within(ttl->day, 1000 * 366) ||
		!part_within(ttl->time, INT64CONST(1000) * 366 * USECS_PER_DAY))
		end = now;
	else
		end = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
													  TimestampTzGetDatum(now),
													  IntervalPGetDatum(ttl)));
	year_end = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
													   TimestampTzGetDatum(now),
													   IntervalPGetDatum(&year)));
	if (end <= now || end > year_end)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zklock explicit lock time to live must be positive and at most a year"),
				 errdetail("It is counted as now() + ttl counts it: '1 year' or '12 months' is the longest, '366 days' only when a 29 February is ahead.")));
	return (end - now + 999) / 1000;
}

/*
 * zk_lock_acquire_explicit(resource, mode, ttl, timeout)
 */
Datum
zklock_acquire_explicit(PG_FUNCTION_ARGS)
{
	char	   *resource = zklock_resource_arg(fcinfo);
	ZkLockMode	mode = mode_arg(fcinfo);
	int64		ttl_ms;

	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("an explicit zklock lock needs a time to live"),
				 errhint("Nothing persistent without an end: give ttl, e.g. '2 hours'.")));
	ttl_ms = explicit_ttl_ms(PG_GETARG_INTERVAL_P(2));
	PG_RETURN_INT64(zklock_lock_explicit(resource, mode, ttl_ms,
										 zklock_timeout_arg(fcinfo, 3)));
}

/*
 * zk_lock_outer_role(): the role the caller acts as -- its session user or
 * the role of SET ROLE -- even inside a SECURITY DEFINER function, where
 * current_user is the function's owner.  zk_locks shows a user the details
 * of its own roles' locks by it.
 */
Datum
zklock_outer_role(PG_FUNCTION_ARGS)
{
	zklock_check_loaded();		/* as every function but zk_lock_fence */
	PG_RETURN_OID(GetOuterUserId());
}
