/*-------------------------------------------------------------------------
 *
 * status.c
 *		The SQL-callable listing and status functions of zklock:
 *		zk_lock_nodes, zk_lock_revocation_data, zk_lock_status (and its
 *		1.3, 1.4 and 1.8 columns),
 *		zk_lock_local and zk_lock_waits.
 *
 * Each reads the worker's listing (through backend.c) or a copy of the
 * shared state taken under its lock, and converts what it shows to the
 * database encoding without ever failing on a foreign node's bytes.
 * Nothing here changes shared state.  Privileges are the SQL objects'
 * grants.
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
#include "stats.h"

#include "functions.h"

PG_FUNCTION_INFO_V1(zklock_nodes);
PG_FUNCTION_INFO_V1(zklock_nodes_1_2);
PG_FUNCTION_INFO_V1(zklock_revocation_data);
PG_FUNCTION_INFO_V1(zklock_status);
PG_FUNCTION_INFO_V1(zklock_status_watches);
PG_FUNCTION_INFO_V1(zklock_status_security);
PG_FUNCTION_INFO_V1(zklock_local);
PG_FUNCTION_INFO_V1(zklock_lock_waits);
PG_FUNCTION_INFO_V1(zklock_lock_stats);
PG_FUNCTION_INFO_V1(zklock_lock_stats_reset);

static char *valid_utf8(char *s);

/*
 * Text read from ZooKeeper or shared memory -- names and node data, UTF-8
 * -- in the database encoding, never failing: one foreign node must not
 * fail a listing, nor an admin function that lists a subtree.  A byte that
 * does not begin a valid UTF-8 character becomes "?" (valid_utf8); a
 * character the database encoding cannot hold becomes \uXXXX, its code
 * point in hexadecimal (\UXXXXXXXX past U+FFFF), as in an E'' literal; the
 * rest is converted.  A SQL_ASCII database gets the UTF-8 as it is.
 */
static char *
text_out(char *s)
{
	int			enc = GetDatabaseEncoding();
	unsigned char *src = (unsigned char *) s;
	int			srclen;
	Oid			proc = InvalidOid;
	StringInfoData out;
	char	   *buf;
	bool		ascii = true;

	valid_utf8(s);
	if (enc == PG_UTF8 || enc == PG_SQL_ASCII)
		return s;
	for (const char *p = s; *p; p++)
		if (IS_HIGHBIT_SET(*p))
			ascii = false;
	if (ascii)
		return s;

	srclen = strlen(s);
	proc = FindDefaultConversionProc(PG_UTF8, enc);
	buf = palloc((Size) srclen * MAX_CONVERSION_GROWTH + 1);
	initStringInfo(&out);
	while (srclen > 0)
	{
		int			done = 0;
		int			l;

		if (OidIsValid(proc))
		{
			/* as much as converts, up to the first character that does not */
			done = pg_do_encoding_conversion_buf(proc, PG_UTF8, enc,
												 src, srclen,
												 (unsigned char *) buf,
												 srclen * MAX_CONVERSION_GROWTH + 1,
												 true);
			appendStringInfoString(&out, buf);
			src += done;
			srclen -= done;
			if (srclen == 0)
				break;
		}
		l = pg_utf_mblen(src);
		if (*src < 0x80)
			appendStringInfoChar(&out, (char) *src);
		else
		{
			pg_wchar	cp = utf8_to_unicode(src);

			appendStringInfo(&out, cp > 0xffff ? "\\U%08x" : "\\u%04x",
							 (unsigned int) cp);
		}
		src += l;
		srclen -= l;
	}
	pfree(buf);
	return out.data;
}

/*
 * Text read from ZooKeeper is whatever bytes its writer sent.  Names must
 * be UTF-8 (ZooKeeper's own rule): replace each byte that does not begin a
 * valid character with "?" (in place: never longer), so that one foreign
 * node cannot fail a whole listing.
 */
static char *
valid_utf8(char *s)
{
	size_t		len = strlen(s);

	for (char *p = s; *p;)
	{
		int			l = pg_encoding_verifymbchar(PG_UTF8, p, len - (p - s));

		if (l < 0)
		{
			*p++ = '?';
			continue;
		}
		p += l;
	}
	return s;
}

/* the value of "key=" in node data (nodedata.c), or NULL */
static char *
data_field(const char *data, const char *key)
{
	char		k[32];
	const char *v;

	snprintf(k, sizeof(k), "%s=", key);
	v = zklock_node_field(data, k);
	return v ? pnstrdup(v, zklock_node_field_len(v)) : NULL;
}

/*
 * "seconds.micros" since the Unix epoch, as backend.c writes it.  Anything
 * else (other clients' data) is not an error, just no timestamp.
 */
static bool
parse_epoch(const char *v, TimestampTz *result)
{
	char	   *end;
	long long	secs;
	long		micros = 0;

	errno = 0;
	secs = strtoll(v, &end, 10);
	if (errno != 0 || end == v || secs < 0 || secs > INT64CONST(100000000000))
		return false;
	if (*end == '.')
	{
		const char *frac = end + 1;

		micros = strtol(frac, &end, 10);
		if (end - frac != 6 || micros < 0)
			return false;
	}
	if (*end != '\0')
		return false;
	*result = (TimestampTz) secs * USECS_PER_SEC + micros -
		(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * USECS_PER_SEC;
	return true;
}

/*
 * zk_lock_nodes(): one row per lock node under zklock.root, in the whole
 * ensemble.  The zk_locks view adds who is granted (1.0 and 1.1: in SQL;
 * from 1.2, zk_lock_nodes says it, by the grant rule of grant_rule.c).
 */
#define NODES_COLS 17			/* zklock_nodes: 1.0 and 1.1 */
#define NODES_COLS_1_2 19		/* zklock_nodes_1_2: and granted, blocked_by */

/* One row of zk_lock_nodes, and where it stands among its resource's nodes */
typedef struct NodesRow
{
	const char *parent;			/* the resource's full path, as listed */
	ZkLockMode	mode;
	int64		seq;
	Datum		values[NODES_COLS_1_2];
	bool		nulls[NODES_COLS_1_2];
} NodesRow;

/*
 * Fill a row (its first NODES_COLS columns) from one line of the worker's
 * listing; false for a line that is not a lock node under the root.
 */
static bool
nodes_row(char *line, size_t rootlen, NodesRow *row)
{
	Datum	   *values = row->values;
	bool	   *nulls = row->nulls;
	char	   *fields[4];
	char	   *slash;
	char	   *p = line;
	char	   *v;
	int			nf = 0;
	TimestampTz since;

	while (nf < 4)
	{
		fields[nf++] = p;
		if (nf < 4)
		{
			p = strchr(p, '\t');
			if (p == NULL)
				break;
			*p++ = '\0';
		}
	}
	if (nf < 4 || strncmp(fields[0], zklock_root, rootlen) != 0)
		return false;
	slash = strrchr(fields[0], '/');
	if (slash == NULL || slash - fields[0] <= (ptrdiff_t) rootlen ||
		!zklock_parse_node_name(slash + 1, &row->mode, &row->seq))
		return false;
	*slash = '\0';
	row->parent = fields[0];
	/* node data: UTF-8 (1.0 wrote its database's encoding) */
	fields[3] = text_out(zklock_nodedata_unescape(fields[3]));

	memset(nulls, 0, sizeof(row->nulls));
	values[0] = CStringGetTextDatum(text_out(fields[0] + rootlen + 1));
	values[1] = CStringGetTextDatum(text_out(slash + 1));
	values[2] = CStringGetTextDatum(zklock_mode_name(row->mode));
	values[3] = Int64GetDatum(row->seq);
	values[4] = Int64GetDatum(strtoll(fields[1], NULL, 10));	/* token */
	values[5] = Int64GetDatum(strtoll(fields[2], NULL, 10));	/* session */
#define FIELD(col, key) \
	if ((v = data_field(fields[3], key)) != NULL) \
		values[col] = CStringGetTextDatum(v); \
	else \
		nulls[col] = true
	FIELD(6, "instance");
	if ((v = data_field(fields[3], "pid")) != NULL)
		values[7] = Int32GetDatum(atoi(v));
	else
		nulls[7] = true;
	FIELD(8, "database");
	FIELD(9, "user");
	FIELD(10, "application");
	FIELD(11, "vxid");
	FIELD(12, "scope");
	if ((v = data_field(fields[3], "since")) != NULL &&
		parse_epoch(v, &since))
		values[13] = TimestampTzGetDatum(since);
	else
		nulls[13] = true;
	FIELD(14, "query");
#undef FIELD
	if ((v = data_field(fields[3], "implicit")) != NULL)
		values[15] = BoolGetDatum(strcmp(v, "true") == 0);
	else
		nulls[15] = true;
	/* 1.0 wrote expires=; 1.1 writes expires_at= (shown, never used) */
	if (((v = data_field(fields[3], "expires")) != NULL ||
		 (v = data_field(fields[3], "expires_at")) != NULL) &&
		parse_epoch(v, &since))
		values[16] = TimestampTzGetDatum(since);
	else
		nulls[16] = true;
	return true;
}

/* The listing of the subtree the first argument names (or the whole root) */
static char *
nodes_listing(FunctionCallInfo fcinfo, Size *len)
{
	char	   *subtree = NULL;

	zklock_backend_init();		/* errors out unless preloaded */
	if (PG_NARGS() > 0 && !PG_ARGISNULL(0))
	{
		subtree = zklock_utf8_in(text_to_cstring(PG_GETARG_TEXT_PP(0)));
		zklock_check_named_resource(subtree);	/* advisory keys too */
	}
	InitMaterializedSRF(fcinfo, 0);
	return zklock_list_nodes(subtree, len);
}

/* zk_lock_nodes of 1.0 and 1.1: the rows in the listing's order */
Datum
zklock_nodes(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Size		len;
	char	   *rows = nodes_listing(fcinfo, &len);
	size_t		rootlen = strlen(zklock_root);
	char	   *next;
	NodesRow	row;

	for (char *line = rows; line && *line; line = next)
	{
		CHECK_FOR_INTERRUPTS();
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (nodes_row(line, rootlen, &row))
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc,
								 row.values, row.nulls);
	}
	return (Datum) 0;
}

static int
nodes_row_cmp(const void *a, const void *b)
{
	const NodesRow *ra = *(const NodesRow *const *) a;
	const NodesRow *rb = *(const NodesRow *const *) b;
	int			c = strcmp(ra->parent, rb->parent);

	if (c != 0)
		return c;
	return ra->seq < rb->seq ? -1 : ra->seq > rb->seq ? 1 : 0;
}

/*
 * zk_lock_queue (1.2): zk_lock_nodes' rows, and granted and blocked_by
 * (the node it waits behind), by Hive's rule among the nodes of its
 * resource (zklock_grant_rule_sorted, the same rule the lock protocol and
 * the sweep apply).  Rows in order of resource and sequence number.
 */
Datum
zklock_nodes_1_2(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Size		len;
	char	   *rows = nodes_listing(fcinfo, &len);
	size_t		rootlen = strlen(zklock_root);
	char	   *next;
	NodesRow  **all = NULL;
	int			n = 0;
	int			room = 0;
	ZkGrantNode *nodes;

	for (char *line = rows; line && *line; line = next)
	{
		NodesRow   *row;

		CHECK_FOR_INTERRUPTS();
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		row = palloc(sizeof(NodesRow));
		if (!nodes_row(line, rootlen, row))
		{
			pfree(row);
			continue;
		}
		if (n == room)
		{
			room = room ? room * 2 : 64;
			all = all ? repalloc_array(all, NodesRow *, room) :
				palloc_array(NodesRow *, room);
		}
		all[n++] = row;
	}
	if (n == 0)
		return (Datum) 0;

	qsort(all, n, sizeof(NodesRow *), nodes_row_cmp);
	nodes = palloc_array(ZkGrantNode, n);
	for (int first = 0, end; first < n; first = end)
	{
		/* one resource's nodes: all[first .. end - 1] */
		for (end = first + 1;
			 end < n && strcmp(all[end]->parent, all[first]->parent) == 0;
			 end++)
			;
		for (int i = first; i < end; i++)
		{
			nodes[i - first].mode = all[i]->mode;
			nodes[i - first].seq = all[i]->seq;
		}
		zklock_grant_rule_sorted(nodes, end - first);
		for (int i = first; i < end; i++)
		{
			NodesRow   *row = all[i];
			int			blocker = nodes[i - first].blocker;

			CHECK_FOR_INTERRUPTS();
			row->values[17] = BoolGetDatum(blocker < 0);
			row->nulls[17] = false;
			if (blocker >= 0)
			{
				row->values[18] = all[first + blocker]->values[1];	/* node */
				row->nulls[18] = false;
			}
			else
				row->nulls[18] = true;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc,
								 row->values, row->nulls);
		}
	}
	return (Datum) 0;
}

/*
 * zk_lock_revocation_data(...): the node data zk_lock_revoke writes into a
 * holder's node, by the codec (nodedata.c).  A NULL is an empty value and
 * implicit= is "t" or "f", as format() made them in 1.0 and 1.1.
 */
Datum
zklock_revocation_data(PG_FUNCTION_ARGS)
{
	ZkNodeData	f = {0};
	const char *text_args[10];
	size_t		need;
	char	   *buf;

	for (int i = 0; i < 10; i++)
	{
		if (PG_ARGISNULL(i))
			text_args[i] = "";
		else if (i == 1)
			text_args[i] = psprintf("%d", PG_GETARG_INT32(i));
		else if (i == 6)
			text_args[i] = PG_GETARG_BOOL(i) ? "t" : "f";	/* as format() */
		else
			text_args[i] = text_to_cstring(PG_GETARG_TEXT_PP(i));
	}
	f.instance = text_args[0];
	f.pid = text_args[1];
	f.database = text_args[2];
	f.user = text_args[3];
	f.application = text_args[4];
	f.scope = text_args[5];
	f.implicit = text_args[6];
	f.revoke = text_args[7];
	f.revoked_by = text_args[8];
	f.query = text_args[9];
	need = zklock_nodedata_encode(NULL, 0, &f);
	buf = palloc(need + 1);
	zklock_nodedata_encode(buf, need + 1, &f);
	PG_RETURN_TEXT_P(cstring_to_text(buf));
}

/*
 * The columns of zk_lock_status(), as many as the version of the SQL
 * objects asks for: 1.0 has 16, 1.1 and later add the lease (18); 1.3's
 * view adds watches from zk_lock_status_watches().  The values are read
 * under the lock, in one pass.
 */
#define STATUS_COLS 18

static Datum
status_row(FunctionCallInfo fcinfo, int maxcols)
{
	TupleDesc	tupdesc;
	Datum		values[STATUS_COLS];
	bool		nulls[STATUS_COLS];
	ZkLockShared *s;
	int			in_use = 0;
	int			in_doubt = 0;
	int64		left;

	zklock_backend_init();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (tupdesc->natts > maxcols)
		elog(ERROR, "zk_lock_status returns at most %d columns, not %d",
			 maxcols, tupdesc->natts);

	memset(nulls, 0, sizeof(nulls));
	s = zklock_shared;
	LWLockAcquire(s->lock, LW_SHARED);
	for (int i = 0; i < s->nentries; i++)
	{
		if (s->entries[i].state != ZKE_FREE)
			in_use++;
		if (s->entries[i].state == ZKE_GRANTED &&
			!s->entries[i].persistent &&
			!zklock_lease_covers_locked(s->entries[i].session_id, &left))
			in_doubt++;
	}
	if (s->worker_pid)
		values[0] = Int32GetDatum(s->worker_pid);
	else
		nulls[0] = true;
	values[1] = CStringGetTextDatum(zklock_session_state_name(s->session_state));
	if (s->session_id)
		values[2] = CStringGetTextDatum(psprintf("0x%llx",
												 (unsigned long long) s->session_id));
	else
		nulls[2] = true;
	values[3] = CStringGetTextDatum(zklock_hosts);
	values[4] = CStringGetTextDatum(zklock_root);
	values[5] = Int32GetDatum(s->negotiated_timeout);
	if (s->state_since)
		values[6] = TimestampTzGetDatum(s->state_since);
	else
		nulls[6] = true;
	values[7] = Int32GetDatum(in_use);
	values[8] = Int64GetDatum((int64) s->n_granted);
	values[9] = Int64GetDatum((int64) s->n_waited);
	values[10] = Int64GetDatum((int64) s->n_not_granted);
	values[11] = Int64GetDatum((int64) s->n_failed);
	values[12] = Int64GetDatum((int64) s->n_lost);
	/* held, but not covered by the lease: the session may have expired */
	values[13] = Int32GetDatum(in_doubt);
	if (s->disconnected_since)
		values[14] = TimestampTzGetDatum(s->disconnected_since);
	else
		nulls[14] = true;
	if (s->last_error[0])
		values[15] = CStringGetTextDatum(s->last_error);
	else
		nulls[15] = true;
	/* 1.1: the lease; a 1.0 tuple descriptor stops before these */
	if (s->lease_session != 0)
		values[16] = Int32GetDatum((int32) Min(Max((s->lease_end - zklock_boottime_us()) / 1000, 0),
											   PG_INT32_MAX));
	else
		nulls[16] = true;
	values[17] = Int32GetDatum(zklock_lease_margin);
	LWLockRelease(s->lock);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* zk_lock_status(): this instance's worker and session */
Datum
zklock_status(PG_FUNCTION_ARGS)
{
	return status_row(fcinfo, STATUS_COLS);
}

/* zk_lock_status.watches (1.3): the worker's count of its watches */
Datum
zklock_status_watches(PG_FUNCTION_ARGS)
{
	int64		n;

	zklock_check_loaded();
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	n = (int64) zklock_shared->n_watches;
	LWLockRelease(zklock_shared->lock);
	PG_RETURN_INT64(n);
}

/*
 * zk_lock_status.transport, identity and tls_expires (1.8): those of the
 * session the worker asked for last (worker/secure.c); NULL before it
 * asked for one, identity '' when it presents none.
 */
Datum
zklock_status_security(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	char		transport[sizeof(zklock_shared->transport)];
	char		identity[ZKLOCK_MAX_IDENTITY_LEN + 1];
	TimestampTz expires;

	zklock_check_loaded();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	strlcpy(transport, zklock_shared->transport, sizeof(transport));
	strlcpy(identity, zklock_shared->identity, sizeof(identity));
	expires = zklock_shared->tls_expires;
	LWLockRelease(zklock_shared->lock);

	nulls[0] = nulls[1] = (transport[0] == '\0');
	values[0] = CStringGetTextDatum(transport);
	values[1] = CStringGetTextDatum(text_out(identity));
	nulls[2] = (expires == 0);
	values[2] = TimestampTzGetDatum(expires);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * zk_lock_local(): this instance's entries, one row per lock node it holds
 * or waits for.  The rows are copied under the lock and shown after it
 * (names converted to the database encoding: a catalog lookup).
 */
typedef struct LocalRow
{
	int			pid;
	ZkLockMode	mode;
	const char *state;
	int64		token;
	TimestampTz granted_at;
	char		resource[ZKLOCK_MAX_RESOURCE_LEN + 1];
	char		node[ZKLOCK_MAX_NODE_NAME_LEN + 1];
} LocalRow;

/*
 * What zk_lock_local shows of an entry's state, or NULL for an entry it
 * does not show (free, a finished request, a listing, a queue's request).  Caller holds the
 * lock (the lease is read under it).
 */
static const char *
local_state(ZkLockEntry *e)
{
	int64		left;

	if (e->kind == ZKR_LIST || e->kind == ZKR_ELECTION || e->kind == ZKR_WAITS)
		return NULL;
	/* a queue's requests are no locks: zk_queue_items shows the holds */
	if (e->kind == ZKR_QUEUE_PUT || e->kind == ZKR_QUEUE_TAKE ||
		e->kind == ZKR_QUEUE_TRY_TAKE || e->kind == ZKR_QUEUE_LENGTH)
		return NULL;
	switch (e->state)
	{
		case ZKE_REQUESTED:
			return "waiting";
		case ZKE_GRANTED:
			/* granted, and the lease still proves the session alive */
			return (e->persistent ||
					zklock_lease_covers_locked(e->session_id, &left)) ?
				"granted" : "in doubt";
		case ZKE_LOST:
			return "lost";
		case ZKE_RELEASING:
			return "releasing";
		default:
			return NULL;
	}
}

/* One row of zk_lock_local, from a copy taken under the lock */
static void
local_put(ReturnSetInfo *rsinfo, LocalRow *row)
{
	Datum		values[7];
	bool		nulls[7];

	memset(nulls, 0, sizeof(nulls));
	values[0] = Int32GetDatum(row->pid);
	values[1] = CStringGetTextDatum(text_out(row->resource));
	values[2] = CStringGetTextDatum(zklock_mode_name(row->mode));
	values[3] = CStringGetTextDatum(row->state);
	if (row->node[0])
		values[4] = CStringGetTextDatum(text_out(row->node));
	else
		nulls[4] = true;
	if (row->token)
		values[5] = Int64GetDatum(row->token);
	else
		nulls[5] = true;
	if (row->granted_at)
		values[6] = TimestampTzGetDatum(row->granted_at);
	else
		nulls[6] = true;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * zk_lock_local: the entries copied under the lock, then turned into rows
 * without it.
 */
Datum
zklock_local(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ZkLockShared *s;
	LocalRow   *rows;
	int			nrows = 0;
	int			maxrows = 64;

	zklock_backend_init();
	InitMaterializedSRF(fcinfo, 0);
	s = zklock_shared;
	rows = palloc(sizeof(LocalRow) * maxrows);
	LWLockAcquire(s->lock, LW_SHARED);
	for (int i = 0; i < s->nentries; i++)
	{
		ZkLockEntry *e = &s->entries[i];
		LocalRow   *row;
		const char *state = local_state(e);

		if (state == NULL)
			continue;
		if (nrows == maxrows)
		{
			maxrows *= 2;
			rows = repalloc_huge(rows, sizeof(LocalRow) * maxrows);
		}
		row = &rows[nrows++];
		row->state = state;
		row->pid = e->owner_pid;
		row->mode = e->mode;
		row->token = e->token;
		row->granted_at = e->granted_at;
		strlcpy(row->resource, e->resource, sizeof(row->resource));
		strlcpy(row->node, e->node, sizeof(row->node));
	}
	LWLockRelease(s->lock);

	for (int i = 0; i < nrows; i++)
	{
		CHECK_FOR_INTERRUPTS();
		local_put(rsinfo, &rows[i]);
	}
	return (Datum) 0;
}

/*
 * zk_lock_waits() (1.6): this instance's requests waiting behind another
 * node, one row each: who waits, for what, its node, the node it watches
 * (the worker's word, updated as the queue moves: protocol.c's
 * wait_behind) and since when.  A new function, so that zk_lock_local
 * keeps the columns that 1.4's SQL declares.
 */
typedef struct WaitRow
{
	int			pid;
	ZkLockMode	mode;
	TimestampTz since;
	char		resource[ZKLOCK_MAX_RESOURCE_LEN + 1];
	char		node[ZKLOCK_MAX_NODE_NAME_LEN + 1];
	char		behind[ZKLOCK_MAX_NODE_NAME_LEN + 1];
} WaitRow;

static void
wait_put(ReturnSetInfo *rsinfo, WaitRow *row)
{
	Datum		values[6];
	bool		nulls[6];

	memset(nulls, 0, sizeof(nulls));
	values[0] = Int32GetDatum(row->pid);
	values[1] = CStringGetTextDatum(text_out(row->resource));
	values[2] = CStringGetTextDatum(zklock_mode_name(row->mode));
	values[3] = CStringGetTextDatum(text_out(row->node));
	values[4] = CStringGetTextDatum(text_out(row->behind));
	values[5] = TimestampTzGetDatum(row->since);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

Datum
zklock_lock_waits(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ZkLockShared *s;
	WaitRow    *rows;
	int			nrows = 0;
	int			maxrows = 16;

	zklock_backend_init();
	InitMaterializedSRF(fcinfo, 0);
	s = zklock_shared;
	rows = palloc(sizeof(WaitRow) * maxrows);
	LWLockAcquire(s->lock, LW_SHARED);
	for (int i = 0; i < s->nentries; i++)
	{
		ZkLockEntry *e = &s->entries[i];
		WaitRow    *row;

		if (e->state != ZKE_REQUESTED || e->waiting_since == 0)
			continue;
		if (nrows == maxrows)
		{
			maxrows *= 2;
			rows = repalloc_huge(rows, sizeof(WaitRow) * maxrows);
		}
		row = &rows[nrows++];
		row->pid = e->owner_pid;
		row->mode = e->mode;
		row->since = e->waiting_since;
		strlcpy(row->resource, e->resource, sizeof(row->resource));
		strlcpy(row->node, e->wait_node, sizeof(row->node));
		strlcpy(row->behind, e->waits_behind, sizeof(row->behind));
	}
	LWLockRelease(s->lock);

	for (int i = 0; i < nrows; i++)
	{
		CHECK_FOR_INTERRUPTS();
		wait_put(rsinfo, &rows[i]);
	}
	return (Datum) 0;
}

/*
 * zk_lock_stats(): stats.c's entries, copied under its lock, then turned
 * into rows without it (names converted to the database encoding: a
 * catalog lookup).
 */
#define STATS_COLUMNS		14

static void
stats_put(ReturnSetInfo *rsinfo, const ZkStatsRow *row)
{
	Datum		values[STATS_COLUMNS];
	bool		nulls[STATS_COLUMNS];
	const ZkStatsCounters *c = &row->c;
	int			i = 0;

	memset(nulls, 0, sizeof(nulls));
	values[i++] = CStringGetTextDatum(text_out((char *) row->resource));
	values[i++] = CStringGetTextDatum(zklock_mode_name(row->mode));
	values[i++] = Int64GetDatum(c->acquisitions);
	values[i++] = Int64GetDatum(c->granted_at_once);
	values[i++] = Int64GetDatum(c->waited);
	values[i++] = Int64GetDatum(c->not_granted);
	values[i++] = Float8GetDatum(c->total_wait_time);
	values[i++] = Float8GetDatum(c->max_wait_time);
	values[i++] = Int64GetDatum(c->timeouts);
	values[i++] = Int64GetDatum(c->cancels);
	values[i++] = Int64GetDatum(c->deadlocks);
	values[i++] = Int64GetDatum(c->lost);
	values[i++] = Float8GetDatum(c->total_held_time);
	values[i++] = Float8GetDatum(c->max_held_time);
	Assert(i == STATS_COLUMNS);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

Datum
zklock_lock_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ZkStatsRow *rows;
	int			nrows;

	zklock_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	nrows = zklock_stats_copy(&rows);
	for (int i = 0; i < nrows; i++)
	{
		CHECK_FOR_INTERRUPTS();
		stats_put(rsinfo, &rows[i]);
	}
	return (Datum) 0;
}

/*
 * zk_lock_stats_reset(): forget every entry.  Not granted to PUBLIC (the
 * SQL object's grants decide who may).
 */
Datum
zklock_lock_stats_reset(PG_FUNCTION_ARGS)
{
	zklock_check_loaded();
	zklock_stats_reset();
	PG_RETURN_VOID();
}

/* text_out for the other files' views (functions/queue.c) */
char *
zklock_text_out(char *s)
{
	return text_out(s);
}
