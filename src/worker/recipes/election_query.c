/*-------------------------------------------------------------------------
 *
 * election_query.c
 *		The worker's side of zk_leader and zk_elections: a backend's
 *		request of kind ZKR_ELECTION lists one group's candidates.
 *
 * The request's resource is "zklock.elections/<group>" (leader.c).  The
 * worker lists the group's children, reads every candidate node (at most
 * QUERY_MAX_CANDIDATES, all in flight at once: one round trip after the
 * listing), and hands the backend the rows in its DSM segment, in the
 * order of their sequence numbers (the first leads):
 * "node \t mtime (ms since the epoch) \t data", data escaped as listing
 * rows are (nodedata.c).  A group without a node has no rows.  Rows beyond
 * the segment are counted: the backend asks again with the size needed.
 *
 * A query owns its memory (a context of its own), dropped however it ends:
 * answered, failed (a lost reply fails it: the backend may ask again), or
 * withdrawn by its backend.  It carries its entry's index and generation
 * in its tags, with operations no other recipe uses.  Worker memory only.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/memutils.h"

#include "channel.h"
#include "election.h"
#include "election_int.h"
#include "recipe.h"
#include "nodedata.h"

#define QUERY_MAX_CANDIDATES	4096

typedef struct QueryNode
{
	char	   *name;
	int64		seq;
	int64		mtime;
	char	   *data;			/* NULL: not read yet, or gone */
	int			datalen;
	bool		gone;
} QueryNode;

typedef struct Query
{
	struct Query *next;
	MemoryContext cxt;			/* owns this and all below */
	int			idx;
	uint32		generation;
	int			pending;		/* reads in flight */
	int			n;
	QueryNode  *nodes;			/* in sequence order */
} Query;

static Query *queries = NULL;

static Query *
query_find(int idx)
{
	for (Query *q = queries; q; q = q->next)
		if (q->idx == idx && q->generation == zklock_work[idx].generation)
			return q;
	return NULL;
}

static void
query_drop(int idx)
{
	for (Query **p = &queries; *p; p = &(*p)->next)
	{
		if ((*p)->idx == idx)
		{
			Query	   *q = *p;

			*p = q->next;
			MemoryContextDelete(q->cxt);
			return;
		}
	}
}

/* The query ends with a failure, or its backend withdrew it */
static void
query_fail(int idx, const char *why)
{
	WorkEntry  *w = &zklock_work[idx];

	query_drop(idx);
	if (w->release)
		zklock_recipe_released(idx);
	else
		zklock_recipe_fail(idx, ERRCODE_CONNECTION_FAILURE, why);
}

void
zklock_election_query_start(int idx)
{
	WorkEntry  *w = &zklock_work[idx];

	query_drop(idx);			/* an earlier request's, if any */
	w->phase = PH_CHECKING;
	if (!zkc_get_children(w->parent, TAG(w->generation, EOP_Q_CHILDREN, idx)))
		query_fail(idx, "could not ask ZooKeeper for the election group");
}

static int
seq_cmp(const void *a, const void *b)
{
	int64		x = ((const QueryNode *) a)->seq;
	int64		y = ((const QueryNode *) b)->seq;

	return x < y ? -1 : x > y ? 1 : 0;
}

/* Rows to the backend's segment, in order, and the query is done */
static void
query_finish(int idx, Query *q)
{
	WorkEntry  *w = &zklock_work[idx];
	StringInfoData rows;
	bool		ok;

	initStringInfo(&rows);
	for (int i = 0; q && i < q->n; i++)
	{
		QueryNode  *qn = &q->nodes[i];

		if (qn->gone)
			continue;
		appendStringInfo(&rows, "%s\t" INT64_FORMAT "\t", qn->name, qn->mtime);
		if (qn->datalen > 0)
		{
			enlargeStringInfo(&rows, 2 * qn->datalen + 1);
			rows.len += zklock_nodedata_escape(rows.data + rows.len, qn->data,
											   qn->datalen);
			rows.data[rows.len] = '\0';
		}
		appendStringInfoChar(&rows, '\n');
	}
	ok = zklock_recipe_put_rows(idx, rows.data, rows.len);
	if (ok)
		zklock_channel_done(idx, w->generation, 0, rows.len + 1);
	else if (!w->release)
		zklock_channel_fail(idx, w->generation, ERRCODE_CONNECTION_FAILURE,
							"the election query could not be answered", false);
	else
		zklock_channel_released(idx, w->generation);
	pfree(rows.data);
	query_drop(idx);
	w->phase = PH_IDLE;
}

/* The group's children: read each candidate, all at once */
static void
on_query_children(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];
	MemoryContext cxt;
	Query	   *q;
	char		path[EL_MAX_PATH];

	if (ev->rc == ZKC_NONODE)
	{
		query_finish(idx, NULL);	/* nobody has joined: no rows */
		return;
	}
	if (ev->rc != ZKC_OK)
	{
		query_fail(idx, ev->rc == ZKC_CONNLOSS ?
				   "connection to ZooKeeper lost during the election query" :
				   zkc_result_text(ev->zoo_rc));
		return;
	}
	cxt = AllocSetContextCreate(TopMemoryContext, "zklock election query",
								ALLOCSET_SMALL_SIZES);
	q = MemoryContextAllocZero(cxt, sizeof(Query));
	q->cxt = cxt;
	q->idx = idx;
	q->generation = w->generation;
	q->nodes = MemoryContextAllocZero(cxt, sizeof(QueryNode) *
									  Min(Max(ev->nchildren, 1),
										  QUERY_MAX_CANDIDATES));
	for (int i = 0; i < ev->nchildren && q->n < QUERY_MAX_CANDIDATES; i++)
	{
		int64		seq = zklock_candidate_instance(ev->children[i], NULL, 0);

		if (seq < 0)
			continue;			/* not a candidate of zklock's */
		q->nodes[q->n].name = MemoryContextStrdup(cxt, ev->children[i]);
		q->nodes[q->n].seq = seq;
		q->n++;
	}
	qsort(q->nodes, q->n, sizeof(QueryNode), seq_cmp);
	q->next = queries;
	queries = q;
	for (int i = 0; i < q->n; i++)
	{
		snprintf(path, sizeof(path), "%s/%s", w->parent, q->nodes[i].name);
		if (!zkc_get_data(path, TAG(w->generation, EOP_Q_DATA, idx)))
		{
			query_fail(idx, "could not read an election candidate");
			return;
		}
		q->pending++;
	}
	if (q->pending == 0)
		query_finish(idx, q);
}

/* A candidate's data */
static void
on_query_data(int idx, ZkEvent *ev)
{
	Query	   *q = query_find(idx);
	const char *slash = strrchr(ev->path, '/');
	const char *name = slash ? slash + 1 : ev->path;

	if (q == NULL)
		return;
	if (ev->rc != ZKC_OK && ev->rc != ZKC_NONODE)
	{
		query_fail(idx, ev->rc == ZKC_CONNLOSS ?
				   "connection to ZooKeeper lost during the election query" :
				   zkc_result_text(ev->zoo_rc));
		return;
	}
	for (int i = 0; i < q->n; i++)
	{
		QueryNode  *qn = &q->nodes[i];

		if (strcmp(qn->name, name) != 0)
			continue;
		if (ev->rc == ZKC_NONODE)
			qn->gone = true;	/* it left meanwhile */
		else
		{
			qn->mtime = ev->mtime;
			qn->datalen = Min(ev->datalen, EL_MAX_DATA);
			qn->data = MemoryContextAlloc(q->cxt, qn->datalen + 1);
			memcpy(qn->data, ev->data ? ev->data : "", qn->datalen);
			qn->data[qn->datalen] = '\0';
		}
		break;
	}
	if (--q->pending == 0)
		query_finish(idx, q);
}

/* A reply for a backend's query (its entry's index and generation) */
void
zklock_election_query_event(int idx, ZkEvent *ev)
{
	WorkEntry  *w;

	if (idx >= zklock_shared->nentries)
		return;
	w = &zklock_work[idx];
	if (TAG_GEN(ev->tag) != w->generation || w->phase != PH_CHECKING ||
		w->kind != ZKR_ELECTION)
		return;					/* an earlier request's */
	if (w->release)
	{
		query_fail(idx, NULL);	/* withdrawn: free the entry */
		return;
	}
	if (TAG_OP(ev->tag) == EOP_Q_CHILDREN)
		on_query_children(idx, ev);
	else if (TAG_OP(ev->tag) == EOP_Q_DATA)
		on_query_data(idx, ev);
}

/* The session is lost: every query in flight fails */
void
zklock_election_queries_lost(const char *why)
{
	for (int idx = 0; idx < zklock_shared->nentries; idx++)
	{
		WorkEntry  *w = &zklock_work[idx];

		if (w->kind == ZKR_ELECTION && w->phase == PH_CHECKING)
			query_fail(idx, why);
	}
}
