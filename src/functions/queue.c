/*-------------------------------------------------------------------------
 *
 * queue.c
 *		The SQL-callable functions of the distributed queue (1.9, issue
 *		31): argument checks, then the backend side (backend/queue.c).
 *
 * No shared state here.  A queue's name has the rules of a resource name
 * (zklock_resource_arg), and none of its components is one of a queue's
 * own child nodes (entries, taken, pending: queue_arg), and
 * zklock.allowed_queues allows it (42501); an item is bytea or text (the same varlena: the
 * text's bytes in the database encoding), not NULL, at most
 * ZKLOCK_QUEUE_MAX_ITEM bytes (54000); a priority 0..999 (22023), as
 * Kazoo's.  Each function sets the backend side up (zklock_backend_init)
 * right before it calls backend/queue.c, which does not.  zk_queue_stats'
 * rows are stats.c's (its lock, copied there).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "backend.h"
#include "functions.h"
#include "queue_common.h"
#include "resource.h"
#include "settings.h"
#include "stats.h"

PG_FUNCTION_INFO_V1(zklock_queue_put_now_sql);
PG_FUNCTION_INFO_V1(zklock_queue_put_sql);
PG_FUNCTION_INFO_V1(zklock_queue_take_sql);
PG_FUNCTION_INFO_V1(zklock_queue_try_take_sql);
PG_FUNCTION_INFO_V1(zklock_queue_length_sql);
PG_FUNCTION_INFO_V1(zklock_queue_peek_sql);
PG_FUNCTION_INFO_V1(zklock_queue_purge_sql);
PG_FUNCTION_INFO_V1(zklock_queue_stats_sql);

/* a queue's own child nodes: no component of a queue's name */
static const char *const queue_reserved[] = {
	ZKLOCK_QUEUE_ENTRIES, ZKLOCK_QUEUE_TAKEN, ZKLOCK_QUEUE_PENDING
};

/* the reserved component of queue (UTF-8), or NULL */
static const char *
queue_reserved_component(const char *queue)
{
	const char *p = queue;

	for (;;)
	{
		size_t		len = strcspn(p, "/");

		for (int i = 0; i < lengthof(queue_reserved); i++)
			if (len == strlen(queue_reserved[i]) &&
				strncmp(p, queue_reserved[i], len) == 0)
				return queue_reserved[i];
		if (p[len] == '\0')
			return NULL;
		p += len + 1;
	}
}

/*
 * The queue argument (0), as UTF-8: a resource name (22023, 42622, 22021,
 * zklock_check_resource) none of whose components is a queue's own child
 * node's name (22023).  Queue x's node holds x/entries, x/taken and
 * x/pending: a queue named "x/entries" would put its nodes among x's items
 * (which Kazoo's takers of x would take), "x/taken/..." among x's holds.
 * Then zklock.allowed_queues must allow it (42501; superusers too, as
 * zklock.allowed_subtrees: they can SET it).  Checked before any request
 * reaches the worker, and after zklock_backend_init: without the library
 * preloaded the setting does not exist (its variable is NULL, which allows
 * nothing), and the caller must hear 55000 "zklock is not loaded", not
 * 42501 (test 005).
 */
static char *
queue_arg(FunctionCallInfo fcinfo)
{
	char	   *queue = zklock_resource_arg(fcinfo);
	const char *reserved;

	zklock_check_resource(queue);
	reserved = queue_reserved_component(queue);
	if (reserved != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid zklock queue name \"%s\"",
						text_to_cstring(PG_GETARG_TEXT_PP(0))),
				 errdetail("The component \"%s\" is reserved: a queue keeps its items, holds and pending puts in child nodes named \"%s\", \"%s\" and \"%s\".",
						   reserved, ZKLOCK_QUEUE_ENTRIES, ZKLOCK_QUEUE_TAKEN,
						   ZKLOCK_QUEUE_PENDING),
				 errhint("Use another name for that component; only the exact words are reserved (\"%s2\" is allowed).",
						 reserved)));
	zklock_backend_init();
	if (!zklock_allowed_by(zklock_allowed_queues, queue))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("not allowed to use zklock queue \"%s\"",
						text_to_cstring(PG_GETARG_TEXT_PP(0))),
				 errdetail("zklock.allowed_queues is \"%s\".",
						   zklock_allowed_queues ? zklock_allowed_queues : ""),
				 errhint("A superuser can allow it with ALTER ROLE ... SET zklock.allowed_queues.")));
	return queue;
}

static int
priority_arg(FunctionCallInfo fcinfo, int argno)
{
	int			p;

	if (PG_NARGS() <= argno || PG_ARGISNULL(argno))
		return ZKLOCK_QUEUE_DEFAULT_PRIORITY;
	p = PG_GETARG_INT32(argno);
	if (p < 0 || p > ZKLOCK_QUEUE_MAX_PRIORITY)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zklock queue priority %d is out of range", p),
				 errdetail("A priority is between 0 and %d; lower is taken first.",
						   ZKLOCK_QUEUE_MAX_PRIORITY)));
	return p;
}

/* The item argument: not NULL, at most ZKLOCK_QUEUE_MAX_ITEM bytes */
static bytea *
item_arg(FunctionCallInfo fcinfo)
{
	bytea	   *item;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("a zklock queue item must not be null")));
	item = PG_GETARG_BYTEA_PP(1);
	if (VARSIZE_ANY_EXHDR(item) > ZKLOCK_QUEUE_MAX_ITEM)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("zklock queue item is too large"),
				 errdetail("The item has %zu bytes; an item may have at most %d.",
						   (size_t) VARSIZE_ANY_EXHDR(item),
						   ZKLOCK_QUEUE_MAX_ITEM)));
	return item;
}

/* zk_queue_put_now(queue, item bytea or text, priority): the item's id */
Datum
zklock_queue_put_now_sql(PG_FUNCTION_ARGS)
{
	char	   *queue = queue_arg(fcinfo);
	bytea	   *item = item_arg(fcinfo);
	int			priority = priority_arg(fcinfo, 2);

	zklock_backend_init();
	PG_RETURN_TEXT_P(cstring_to_text(zklock_queue_put_now(queue,
														  VARDATA_ANY(item),
														  VARSIZE_ANY_EXHDR(item),
														  priority)));
}

/* zk_queue_put(queue, item, priority): at commit; the put's key */
Datum
zklock_queue_put_sql(PG_FUNCTION_ARGS)
{
	char	   *queue = queue_arg(fcinfo);
	bytea	   *item = item_arg(fcinfo);
	int			priority = priority_arg(fcinfo, 2);

	zklock_backend_init();
	PG_RETURN_TEXT_P(cstring_to_text(zklock_queue_put(queue,
													  VARDATA_ANY(item),
													  VARSIZE_ANY_EXHDR(item),
													  priority)));
}

/*
 * (id, item, priority), or a row of NULLs when nothing was taken (a peek:
 * read, not held)
 */
static Datum
take_common(FunctionCallInfo fcinfo, bool wait, bool peek)
{
	char	   *queue = queue_arg(fcinfo);
	int			timeout_ms = wait ? zklock_timeout_arg(fcinfo, 1) : -1;
	bool		found;
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {true, true, true};
	char	   *id;
	bytea	   *item;
	int			priority;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	/*
	 * A timeout of 0 (or under 1 ms) takes what is free now, as a try-take:
	 * waited for, its deadline passed before the worker could answer, so
	 * no item ever came, and zk_queue_stats counted a wait
	 */
	if (wait && timeout_ms == 0)
		wait = false;
	zklock_backend_init();
	found = peek ? zklock_queue_peek(queue, &id, &item, &priority) :
		zklock_queue_take(queue, wait, timeout_ms, &id, &item, &priority);
	if (found)
	{
		values[0] = CStringGetTextDatum(id);
		values[1] = PointerGetDatum(item);
		values[2] = Int32GetDatum(priority);
		nulls[0] = nulls[1] = nulls[2] = false;
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc),
													  values, nulls)));
}

Datum
zklock_queue_take_sql(PG_FUNCTION_ARGS)
{
	return take_common(fcinfo, true, false);
}

Datum
zklock_queue_try_take_sql(PG_FUNCTION_ARGS)
{
	return take_common(fcinfo, false, false);
}

Datum
zklock_queue_length_sql(PG_FUNCTION_ARGS)
{
	char	   *queue = queue_arg(fcinfo);

	zklock_backend_init();
	PG_RETURN_INT64(zklock_queue_length(queue));
}

Datum
zklock_queue_peek_sql(PG_FUNCTION_ARGS)
{
	return take_common(fcinfo, false, true);
}

/* zk_queue_purge(queue): the items deleted (those no one holds) */
Datum
zklock_queue_purge_sql(PG_FUNCTION_ARGS)
{
	char	   *queue = queue_arg(fcinfo);

	zklock_backend_init();
	PG_RETURN_INT64(zklock_queue_purge(queue));
}

/*
 * zk_queue_stats(): the queues' counters (stats.c), copied under its
 * lock, then turned into rows without it
 */
#define QUEUE_STATS_COLUMNS		9

Datum
zklock_queue_stats_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ZkQueueStatsRow *rows;
	TimestampTz reset_at;
	int			nrows;

	zklock_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	nrows = zklock_stats_queue_copy(&rows, &reset_at);
	for (int r = 0; r < nrows; r++)
	{
		Datum		values[QUEUE_STATS_COLUMNS];
		bool		nulls[QUEUE_STATS_COLUMNS] = {0};
		const ZkQueueCounters *c = &rows[r].c;
		int			i = 0;

		CHECK_FOR_INTERRUPTS();
		values[i++] = CStringGetTextDatum(zklock_text_out(rows[r].queue));
		values[i++] = Int64GetDatum(c->puts);
		values[i++] = Int64GetDatum(c->takes);
		values[i++] = Int64GetDatum(c->consumed);
		values[i++] = Int64GetDatum(c->given_back);
		values[i++] = Int64GetDatum(c->waits);
		values[i++] = Float8GetDatum(c->wait_time);
		values[i++] = Int64GetDatum(c->timeouts);
		values[i++] = TimestampTzGetDatum(reset_at);
		Assert(i == QUEUE_STATS_COLUMNS);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values,
							 nulls);
	}
	return (Datum) 0;
}
