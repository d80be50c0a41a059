/*-------------------------------------------------------------------------
 *
 * advisory.c
 *		The SQL-callable advisory-lock API: PostgreSQL's pg_advisory_*
 *		functions, with their argument and return types, stacking and
 *		release behaviour, over zklock's ZooKeeper locks.
 *
 * A key is a resource under the reserved prefix, which users cannot name
 * themselves (resource.c): "zklock.advisory/<namespace>/<key>", the key
 * "42" for a bigint and "1,2" for a pair of integers, so that the two key
 * spaces stay apart as they do in PostgreSQL.  The namespace is
 * zklock.advisory_namespace, or by default the current database's name
 * (PostgreSQL scopes advisory locks to a database; its bytes when they are
 * UTF-8, as for every name of a shared catalog), in UTF-8, escaped into
 * one valid path segment (namespace_segment).  No parents' SHARED locks.
 *
 * Stacking and scopes are the backend side's (local_locks.c): a session hold
 * and a transaction hold of one key share one node, each unlock drops one
 * session hold, transaction holds end with the transaction.  One backend
 * may hold a key in both modes: its own node of the other mode does not
 * block it (acquire.c, grant_rule.c).  Nothing here touches shared state.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "commands/dbcommands.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"

#include "zklock.h"
#include "settings.h"
#include "resource.h"
#include "grant_rule.h"
#include "backend.h"
#include "functions.h"

PG_FUNCTION_INFO_V1(zklock_advisory_lock);
PG_FUNCTION_INFO_V1(zklock_advisory_lock_shared);
PG_FUNCTION_INFO_V1(zklock_try_advisory_lock);
PG_FUNCTION_INFO_V1(zklock_try_advisory_lock_shared);
PG_FUNCTION_INFO_V1(zklock_advisory_xact_lock);
PG_FUNCTION_INFO_V1(zklock_advisory_xact_lock_shared);
PG_FUNCTION_INFO_V1(zklock_try_advisory_xact_lock);
PG_FUNCTION_INFO_V1(zklock_try_advisory_xact_lock_shared);
PG_FUNCTION_INFO_V1(zklock_advisory_unlock);
PG_FUNCTION_INFO_V1(zklock_advisory_unlock_shared);
PG_FUNCTION_INFO_V1(zklock_advisory_unlock_all);

/* the longest raw namespace: a database name's length */
#define NAMESPACE_MAX	(NAMEDATALEN - 1)

/* bytes of the namespace kept as they are: the rest is percent-encoded */
static bool
plain_byte(unsigned char c)
{
	return c >= 0x20 && c != 0x7f && c != '/' && c != '%';
}

/*
 * The namespace (in UTF-8) as one path segment, into out (at least
 * NAMESPACE_MAX * 3 * 4 + 1 bytes), or the rule it breaks.  Percent-encoded:
 * '%', '/' and control characters; "." and ".." entirely ("%2E"); and the
 * last character of a segment that would read as a lock node name (a lock
 * mark and ten digits), which would count as a contender among the keys'
 * parent's children.  None of these encodings can come from another
 * namespace (the characters encoded are otherwise kept as they are), so
 * different namespaces never share a segment.
 */
static const char *
namespace_segment(const char *ns, char *out)
{
	char	   *o = out;

	if (ns[0] == '\0')
		return "The namespace must not be empty.";
	if (strlen(ns) > NAMESPACE_MAX * 4)
		return "The namespace must not be longer than a database name (63 bytes).";
	if (strcmp(ns, ".") == 0 || strcmp(ns, "..") == 0)
	{
		for (const char *p = ns; *p; p++)
			o += sprintf(o, "%%2E");
		return NULL;
	}
	for (const unsigned char *p = (const unsigned char *) ns; *p; p++)
	{
		if (plain_byte(*p))
			*o++ = (char) *p;
		else
			o += sprintf(o, "%%%02X", *p);
	}
	*o = '\0';
	if (zklock_parse_node_name(out, NULL, NULL))
	{
		/* the last character is a digit: encode it */
		char		last = o[-1];

		sprintf(o - 1, "%%%02X", (unsigned char) last);
	}
	return NULL;
}

/*
 * The checks of zklock.advisory_namespace (zklock.c): NULL when good, or
 * what is wrong.  Its form (length, control characters) anywhere; in full
 * (valid UTF-8, code points ZooKeeper refuses, the key's length) where the
 * database encoding is known, in a backend of a database.
 */
const char *
zklock_advisory_namespace_form(const char *value)
{
	if (value == NULL || value[0] == '\0')
		return NULL;			/* the database's name */
	if (strlen(value) > NAMESPACE_MAX)
		return "zklock.advisory_namespace must not be longer than a database name (63 bytes).";
	for (const unsigned char *p = (const unsigned char *) value; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return "zklock.advisory_namespace must not contain control characters.";
	return NULL;
}

const char *
zklock_advisory_namespace_problem(const char *value)
{
	char	   *utf8;
	char		segment[NAMESPACE_MAX * 12 + 16];
	char		resource[sizeof(segment) + 16];
	const char *why = zklock_advisory_namespace_form(value);

	if (why || value == NULL || value[0] == '\0')
		return why;
	if (!OidIsValid(MyDatabaseId))
		return NULL;			/* no database encoding yet: checked at use */
	utf8 = (char *) pg_server_to_any(value, strlen(value), PG_UTF8);
	why = namespace_segment(utf8, segment);
	if (why)
		return why;
	/* the rest of the rules of a resource name, on a key below it */
	snprintf(resource, sizeof(resource), "advisory/%s/0", segment);
	return zklock_resource_problem(resource, NULL);
}

zklock_noreturn static void advisory_namespace_error(const char *ns,
													 const char *why);

static void
advisory_namespace_error(const char *ns, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid zklock advisory-lock namespace \"%s\"", ns),
			 errdetail("%s", why),
			 errhint("The namespace is zklock.advisory_namespace, or the database's name when that is empty.")));
}

/*
 * The resource of a key: (bigint) or (int, int), as the function's number
 * of arguments says.
 */
static char *
advisory_resource(FunctionCallInfo fcinfo)
{
	const char *ns = zklock_advisory_namespace;
	char	   *utf8;
	char		segment[NAMESPACE_MAX * 12 + 16];
	char	   *resource;
	const char *why;

	zklock_check_loaded();
	if (ns == NULL || ns[0] == '\0')
	{
		ns = get_database_name(MyDatabaseId);
		if (ns == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_DATABASE),
					 errmsg("current database no longer exists")));

		/*
		 * A shared catalog's name has no encoding of its own: every
		 * database of the cluster reads the same bytes.  Taken as they are
		 * when they are UTF-8 (as request.c's catalog_name_utf8 writes
		 * such names into node data), so that a database has one
		 * namespace whatever its encoding; converted otherwise.
		 */
		utf8 = pg_verify_mbstr(PG_UTF8, ns, strlen(ns), true) ? (char *) ns :
			(char *) pg_server_to_any(ns, strlen(ns), PG_UTF8);
	}
	else
		utf8 = (char *) pg_server_to_any(ns, strlen(ns), PG_UTF8);
	why = namespace_segment(utf8, segment);
	if (why)
		advisory_namespace_error(ns, why);
	if (PG_NARGS() == 1)
		resource = psprintf(ZKLOCK_ADVISORY_PREFIX "%s/" INT64_FORMAT,
							segment, PG_GETARG_INT64(0));
	else
		resource = psprintf(ZKLOCK_ADVISORY_PREFIX "%s/%d,%d",
							segment, PG_GETARG_INT32(0), PG_GETARG_INT32(1));
	/* the rest of a resource name's rules, past the reserved "zklock." */
	if (strlen(resource) > ZKLOCK_MAX_RESOURCE_LEN)
		advisory_namespace_error(ns, "The key's resource name would be longer than " CppAsString2(ZKLOCK_MAX_RESOURCE_LEN) " bytes.");
	why = zklock_resource_problem(resource + strlen(ZKLOCK_RESERVED_PREFIX),
								  NULL);
	if (why)
		advisory_namespace_error(ns, why);
	return resource;
}

/* Take a key: session or transaction level, waiting or not */
static bool
advisory_take(FunctionCallInfo fcinfo, ZkLockMode mode, bool session,
			  bool wait)
{
	return zklock_lock_advisory(advisory_resource(fcinfo), mode, session,
								wait);
}

/* pg_advisory_lock: wait for a session-level hold */
Datum
zklock_advisory_lock(PG_FUNCTION_ARGS)
{
	advisory_take(fcinfo, ZKLOCK_EXCLUSIVE, true, true);
	PG_RETURN_VOID();
}

Datum
zklock_advisory_lock_shared(PG_FUNCTION_ARGS)
{
	advisory_take(fcinfo, ZKLOCK_SHARED, true, true);
	PG_RETURN_VOID();
}

/* pg_try_advisory_lock: a session-level hold if it can be had now */
Datum
zklock_try_advisory_lock(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(advisory_take(fcinfo, ZKLOCK_EXCLUSIVE, true, false));
}

Datum
zklock_try_advisory_lock_shared(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(advisory_take(fcinfo, ZKLOCK_SHARED, true, false));
}

/* pg_advisory_xact_lock: wait for a hold until the transaction ends */
Datum
zklock_advisory_xact_lock(PG_FUNCTION_ARGS)
{
	advisory_take(fcinfo, ZKLOCK_EXCLUSIVE, false, true);
	PG_RETURN_VOID();
}

Datum
zklock_advisory_xact_lock_shared(PG_FUNCTION_ARGS)
{
	advisory_take(fcinfo, ZKLOCK_SHARED, false, true);
	PG_RETURN_VOID();
}

Datum
zklock_try_advisory_xact_lock(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(advisory_take(fcinfo, ZKLOCK_EXCLUSIVE, false, false));
}

Datum
zklock_try_advisory_xact_lock_shared(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(advisory_take(fcinfo, ZKLOCK_SHARED, false, false));
}

/*
 * pg_advisory_unlock: drop one session-level hold; false, with PostgreSQL's
 * WARNING, when there is none (transaction-level holds are not touched)
 */
Datum
zklock_advisory_unlock(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(zklock_unlock_advisory(advisory_resource(fcinfo),
										  ZKLOCK_EXCLUSIVE));
}

Datum
zklock_advisory_unlock_shared(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(zklock_unlock_advisory(advisory_resource(fcinfo),
										  ZKLOCK_SHARED));
}

/* pg_advisory_unlock_all: every session-level advisory hold, in any namespace */
Datum
zklock_advisory_unlock_all(PG_FUNCTION_ARGS)
{
	zklock_check_loaded();
	zklock_unlock_all_advisory();
	PG_RETURN_VOID();
}
