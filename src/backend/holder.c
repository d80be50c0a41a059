/*-------------------------------------------------------------------------
 *
 * holder.c
 *		What every lock request of this backend writes into its node: the
 *		holder's data (zklock_holder_data), and a shared catalog's name as
 *		node data has it (zklock_catalog_name_utf8, also request.c's quota).
 *
 * Below the rest of the backend side: it calls only common/ (nodedata.c)
 * and PostgreSQL; request.c, acquire.c (through zklock_step_request) and
 * queue.c call it.  Backend-local, no state: no lock guards anything here.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/timestamp.h"

#include "backend_int.h"
#include "zklock.h"
#include "settings.h"
#include "nodedata.h"
#include "resource.h"

/*
 * Room left in a transaction or session lock's node data for scope= and
 * implicit= to grow when their holds change and the data is rewritten in
 * place ("session" to "transaction", "true" to "false": show_holds in
 * local_locks.c), so that the rewrite cuts nothing either.
 */
#define HOLDER_DATA_GROWTH	5

/* text in the database encoding as node data has it: UTF-8 */
static const char *
holder_utf8(const char *s)
{
	/* a SQL_ASCII database's bytes have no known encoding: as they are */
	if (s == NULL || GetDatabaseEncoding() == PG_SQL_ASCII)
		return s;
	return (const char *) pg_server_to_any(s, strlen(s), PG_UTF8);
}

/*
 * A name from a shared catalog (pg_authid's rolname, pg_database's
 * datname) as node data has it.  Such a name has no encoding of its own:
 * its bytes are whatever the database it was created from had, and every
 * database of the cluster reads the same bytes.  Converted from each
 * reader's database encoding, a role "q\u00e9" made from a UTF8 database
 * would be user=q\u00e9 from UTF8 databases and "q\u00c3\u00a9" from
 * LATIN1 ones: two roles to the quota (check_explicit_quota), and one that
 * zk_lock_release_explicit does not recognise.  So bytes that are valid
 * UTF-8 are written as they are, the same from every database; only a name
 * that is not UTF-8 is converted from the database encoding (a name made
 * from a LATIN1 database, "q\xe9", is then "q\u00e9" too: the two roles
 * share a user=, as they share a name in a LATIN1 database).
 */
const char *
zklock_catalog_name_utf8(const char *name)
{
	if (name == NULL ||
		pg_verify_mbstr(PG_UTF8, name, strlen(name), true))
		return name;
	return holder_utf8(name);
}

/*
 * The query, as much of it as can end up in node data, in UTF-8.  No
 * character of a server encoding is more than four times shorter in UTF-8
 * (at most twice), so its first 4 * ZKLOCK_MAX_DATA_LEN bytes, cut between
 * characters, hold all that can fit: a query of megabytes is not converted
 * whole at each lock it takes.
 */
static const char *
holder_query_utf8(const char *query)
{
	int			len = strlen(query);

	if (len > 4 * ZKLOCK_MAX_DATA_LEN)
		query = pnstrdup(query, pg_mbcliplen(query, len,
											 4 * ZKLOCK_MAX_DATA_LEN));
	return holder_utf8(query);
}

/*
 * Who holds the node: key=value lines (the format, every field and its
 * version: nodedata.c), read back by zk_locks, by zk_lock_release_explicit
 * (user=: the role the caller acts as, SET ROLE and SECURITY DEFINER
 * included) and by every instance's sweep (an explicit lock's ttl=,
 * waiter=).  An explicit lock's node (ttl_ms > 0) also carries
 *	ttl=<ms>			its time to live; it counts from the node's mtime of
 *						the write that granted it (ZooKeeper's own time)
 *	expires_at=<s.us>	for people: when that is, by this machine's clock
 *						(never used to expire anything)
 *	waiter=<16 hex>		while the request waits: the worker fills in its
 *						session id, and removes the line when it is granted
 *
 * Node data is UTF-8 and at most buflen - 1 bytes.  Each field is converted
 * first, then the data is made to fit by cutting the free text alone (the
 * query, then the application name), on a character boundary
 * (zklock_nodedata_encode_fit): a cut after the
 * conversion fell through the fields at the end, ttl= among them, when the
 * names grew in UTF-8 (issue 20: "ttl=3", and a lock of a year swept in a
 * second).  When the other fields alone do not fit (long names that grow in
 * UTF-8), the request is refused with 54000.  This replaces backend.c's
 * zklock_describe_holder (before 1.3).
 */
void
zklock_holder_data(char *buf, size_t buflen, const char *scope,
				   bool implicit, int64 ttl_ms)
{
	ZkNodeData	f = {0};
	char	   *dbname = get_database_name(MyDatabaseId);
	char		pid[16];
	char		vxid[32];
	char		since_text[32];
	char		ttl_text[32];
	char		expires_at[32];
	int64		since;
	int			len;

	/* since: Unix epoch seconds, readable whatever anyone's DateStyle */
	since = GetCurrentTimestamp() +
		(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * USECS_PER_SEC;
	snprintf(pid, sizeof(pid), "%d", MyProcPid);
	snprintf(vxid, sizeof(vxid), "%d/%u", ZKLOCK_MY_VXID_PROC, ZKLOCK_MY_VXID_LXID);
	zklock_nodedata_epoch(since_text, sizeof(since_text), since);
	f.instance = holder_utf8(zklock_instance_name());
	f.pid = pid;
	f.database = zklock_catalog_name_utf8(dbname ? dbname : "");
	f.user = zklock_catalog_name_utf8(GetUserNameFromId(GetOuterUserId(), false));
	f.application = holder_utf8(application_name ? application_name : "");
	f.vxid = vxid;
	f.scope = scope;
	f.implicit = implicit ? "true" : "false";
	f.since = since_text;
	if (ttl_ms > 0)
	{
		snprintf(ttl_text, sizeof(ttl_text), INT64_FORMAT, ttl_ms);
		zklock_nodedata_epoch(expires_at, sizeof(expires_at),
							  since + ttl_ms * 1000);
		f.ttl = ttl_text;
		f.expires_at = expires_at;
		f.waiter = "0000000000000000";	/* the worker fills it in */
	}
	f.query = holder_query_utf8(debug_query_string ? debug_query_string : "");

	len = zklock_nodedata_encode_fit(buf, ttl_ms > 0 ? buflen :
									 buflen - HOLDER_DATA_GROWTH, &f);
	if (len < 0)
	{
		ZkNodeData	fixed = f;
		char		whole[2 * ZKLOCK_MAX_DATA_LEN];

		fixed.query = "";
		fixed.application = "";
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("zklock lock node data would be too long"),
				 errdetail("The names of the instance, the database and the role, in UTF-8, with the lock's other fields take %zu bytes; a lock node's data holds at most %zu.",
						   zklock_nodedata_encode(whole, sizeof(whole), &fixed),
						   (ttl_ms > 0 ? buflen : buflen - HOLDER_DATA_GROWTH) - 1),
				 errhint("Use shorter names (zklock.node_name, the database's, the role's).")));
	}
}
