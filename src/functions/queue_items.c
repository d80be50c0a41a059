/*-------------------------------------------------------------------------
 *
 * queue_items.c
 *		zk_queue_item_nodes(): every queue item under <root>/zklock.queues,
 *		of every instance and client, with its hold if it has one (1.9,
 *		issue 31).  The views zk_queues and zk_queue_items are SQL over it
 *		(zklock--1.8--1.9.sql), masking others' details as zk_locks does.
 *
 * The worker's queues' listing (worker/recipes/listing.c) gives one line
 * per entry ("<path>\t0\t0\t", by name: the item is not read) and per
 * hold ("<path>\tczxid\towner\t<data>", the holder's data, escaped).
 * Backend-local only: no shared state here.  Not granted to PUBLIC.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "backend.h"
#include "nodedata.h"
#include "queue_common.h"
#include "settings.h"

PG_FUNCTION_INFO_V1(zklock_queue_item_nodes);

#define QI_COLS 8

/* One line of the listing: a queue, its dir (entries or taken), a name */
typedef struct QiLine
{
	char	   *queue;
	char	   *name;
	char	   *data;			/* a hold's data (unescaped), else NULL */
	bool		hold;
} QiLine;

/* Split "<root>/zklock.queues/<queue>/<dir>/<name>\t..." ; false if not */
static bool
qi_parse(char *line, QiLine *out)
{
	char		prefix[ZKLOCK_MAX_ROOT_LEN + 32];
	char	   *tab = strchr(line, '\t');
	char	   *name;
	char	   *dir;
	size_t		plen;

	if (tab == NULL)
		return false;
	*tab = '\0';
	snprintf(prefix, sizeof(prefix), "%s%s%s", zklock_root,
			 zklock_root[strlen(zklock_root) - 1] == '/' ? "" : "/",
			 ZKLOCK_QUEUE_PREFIX);
	plen = strlen(prefix);
	if (strncmp(line, prefix, plen) != 0 ||
		(name = strrchr(line, '/')) == NULL)
		return false;
	*name++ = '\0';
	if ((dir = strrchr(line, '/')) == NULL || dir < line + plen)
		return false;
	*dir++ = '\0';
	out->hold = strcmp(dir, ZKLOCK_QUEUE_TAKEN) == 0;
	if (!out->hold && strcmp(dir, ZKLOCK_QUEUE_ENTRIES) != 0)
		return false;
	out->queue = line + plen;
	out->name = name;
	out->data = NULL;
	if (out->hold)
	{
		char	   *d = strchr(tab + 1, '\t');

		d = d ? strchr(d + 1, '\t') : NULL;
		out->data = d ? zklock_nodedata_unescape(d + 1) : NULL;
	}
	return true;
}

static int
qi_cmp(const void *a, const void *b)
{
	const QiLine *x = a;
	const QiLine *y = b;
	int			c = strcmp(x->queue, y->queue);

	return c != 0 ? c : strcmp(x->name, y->name);
}

/* the hold's field key, or NULL */
static char *
qi_field(const char *data, const char *key)
{
	const char *v = data ? zklock_node_field(data, key) : NULL;

	return v ? pnstrdup(v, zklock_node_field_len(v)) : NULL;
}

static Datum
qi_text(const char *s)
{
	return CStringGetTextDatum(pg_any_to_server(s, strlen(s), PG_UTF8));
}

/* One row: an entry and its hold (NULL when no one holds it) */
static void
qi_put(ReturnSetInfo *rsinfo, QiLine *e, QiLine *h)
{
	Datum		values[QI_COLS];
	bool		nulls[QI_COLS] = {false};
	char	   *v;

	values[0] = qi_text(e->queue);
	values[1] = qi_text(e->name);
	values[2] = Int32GetDatum(atoi(e->name + strlen(ZKLOCK_QUEUE_ENTRY)));
	values[3] = BoolGetDatum(h != NULL);
	for (int c = 4; c < QI_COLS; c++)
		nulls[c] = true;
	if (h && (v = qi_field(h->data, "instance=")) != NULL)
		values[4] = qi_text(v), nulls[4] = false;
	if (h && (v = qi_field(h->data, "pid=")) != NULL)
		values[5] = Int32GetDatum(atoi(v)), nulls[5] = false;
	if (h && (v = qi_field(h->data, "user=")) != NULL)
		values[6] = qi_text(v), nulls[6] = false;
	if (h && (v = qi_field(h->data, "since=")) != NULL)
	{
		double		secs = strtod(v, NULL);

		if (secs > 0)
		{
			values[7] = TimestampTzGetDatum((TimestampTz) (secs * USECS_PER_SEC) -
											(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) *
											SECS_PER_DAY * USECS_PER_SEC);
			nulls[7] = false;
		}
	}
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * zk_queue_item_nodes(): (queue, id, priority, held, instance, pid,
 * username, since), by queue and then id (priority, then arrival).
 */
Datum
zklock_queue_item_nodes(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Size		len;
	char	   *rows;
	char	   *next;
	QiLine	   *lines;
	int			n = 0;
	int			max = 64;

	zklock_backend_init();
	InitMaterializedSRF(fcinfo, 0);
	rows = zklock_list_nodes("zklock.queues", &len);
	lines = palloc(sizeof(QiLine) * max);
	for (char *line = rows; line && *line; line = next)
	{
		CHECK_FOR_INTERRUPTS();
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (n == max)
			lines = repalloc_huge(lines, sizeof(QiLine) * (max *= 2));
		if (qi_parse(line, &lines[n]))
			n++;
	}
	qsort(lines, n, sizeof(QiLine), qi_cmp);
	/* sorted: an entry's hold, if any, is next to it (same queue, name) */
	for (int i = 0; i < n; i++)
	{
		QiLine	   *hold = NULL;

		CHECK_FOR_INTERRUPTS();
		if (lines[i].hold)
			continue;			/* a hold whose entry is gone: no item */
		if (i + 1 < n && lines[i + 1].hold && qi_cmp(&lines[i], &lines[i + 1]) == 0)
			hold = &lines[i + 1];
		else if (i > 0 && lines[i - 1].hold && qi_cmp(&lines[i], &lines[i - 1]) == 0)
			hold = &lines[i - 1];
		qi_put(rsinfo, &lines[i], hold);
	}
	return (Datum) 0;
}
