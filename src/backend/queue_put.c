/*-------------------------------------------------------------------------
 *
 * queue_put.c
 *		The transactional put of the distributed queue (issue 31): an item
 *		is in the queue only once the offering transaction commits
 *		(doc/design.md "Queues").
 *
 * zk_queue_put keeps the item here (qputs[], TopMemoryContext), with the
 * subtransaction that put it; nothing reaches ZooKeeper before the commit.
 *	- PRE_COMMIT (zklock_queue_puts_pend): each item becomes the persistent
 *	  node <queue>/pending/<key>, key = <system id>-<full xid>-<n>-<PPP>
 *	  (PPP the priority), which no taker reads; the transaction gets an xid at the put, so that its
 *	  commit record, and so the commit log, decides.  An ERROR here aborts
 *	  the transaction (the nodes made are then dropped).
 *	- COMMIT, after the commit record (zklock_queue_puts_end(true)): one
 *	  multi per item makes entries/entry-PPP-<seq> and deletes the pending
 *	  node (an asynchronous commit's record flushed first: an item never
 *	  shows before its commit is durable); the backend waits for it, interrupts held, at most a session
 *	  timeout, and never raises (a WARNING: the item stays pending, moved
 *	  by the worker's recovery, worker/recipes/queue_pending.c).
 *	- ABORT: the pending nodes made are deleted (waited for, bounded, no
 *	  ERROR); ROLLBACK TO forgets the subtransaction's items (none made).
 * Backend-local state only; the requests are the channel's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/dsm.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "backend.h"
#include "backend_int.h"
#include "channel.h"
#include "queue_common.h"
#include "settings.h"
#include "stats.h"
#include "wait_events.h"

typedef struct QueuePut
{
	SubTransactionId subid;
	bool		made;			/* its pending node exists (PRE_COMMIT) */
	int			priority;
	char		queue[ZKLOCK_MAX_RESOURCE_LEN + 1];
	char		key[ZKLOCK_MAX_NODE_NAME_LEN + 1];
	char	   *item;			/* TopMemoryContext */
	Size		len;
} QueuePut;

static QueuePut *qputs = NULL;
static int	nqputs = 0;
static int	maxqputs = 0;
static int	put_counter = 0;	/* <n> of the keys, per backend */

/*
 * zk_queue_put: the item, kept until the commit; returns its key (the
 * name of its pending node).  The queue's name is checked now.
 */
char *
zklock_queue_put(const char *queue, const char *item, Size len, int priority)
{
	ZkChannelRequest req;
	QueuePut   *p;
	FullTransactionId fxid;

	zklock_queue_request(&req, ZKR_QUEUE_PUT, queue);	/* the checks */
	zklock_queue_check_room(queue);
	fxid = GetTopFullTransactionId();
	if (nqputs == maxqputs)
	{
		maxqputs = Max(8, maxqputs * 2);
		qputs = qputs ? repalloc(qputs, sizeof(QueuePut) * maxqputs) :
			MemoryContextAlloc(TopMemoryContext, sizeof(QueuePut) * maxqputs);
	}
	p = &qputs[nqputs];
	memset(p, 0, sizeof(*p));
	p->subid = GetCurrentSubTransactionId();
	p->priority = priority;
	strlcpy(p->queue, queue, sizeof(p->queue));
	snprintf(p->key, sizeof(p->key), UINT64_FORMAT "-" UINT64_FORMAT "-%d-%03d",
			 GetSystemIdentifier(), U64FromFullTransactionId(fxid),
			 put_counter++, priority);
	p->item = MemoryContextAlloc(TopMemoryContext, Max(len, 1));
	memcpy(p->item, item, len);
	p->len = len;
	nqputs++;
	return pstrdup(p->key);
}

/* Submit one put's request (qop: pend, move or drop), the item attached */
static int
put_submit(QueuePut *p, const char *qop, uint32 *gen, dsm_segment **seg)
{
	ZkChannelRequest req;

	zklock_queue_request(&req, ZKR_QUEUE_PUT, p->queue);
	snprintf(req.data, sizeof(req.data), "%s%s\n", ZKLOCK_QUEUE_OP_FIELD, qop);
	if (strcmp(qop, "move") == 0)
	{
		snprintf(req.node, sizeof(req.node), "%s%03d-", ZKLOCK_QUEUE_ENTRY,
				 p->priority);
		strlcpy(req.ignore_node, p->key, sizeof(req.ignore_node));
	}
	else
		strlcpy(req.node, p->key, sizeof(req.node));
	*seg = dsm_create(Max(p->len, 1), 0);
	if (p->len > 0)
		memcpy(dsm_segment_address(*seg), p->item, p->len);
	req.list_handle = dsm_segment_handle(*seg);
	req.list_size = p->len;
	return zklock_submit(&req, gen);
}

/* PRE_COMMIT: every item put becomes its pending node (an ERROR aborts) */
void
zklock_queue_puts_pend(void)
{
	for (int i = 0; i < nqputs; i++)
	{
		ZkChannelResult result;
		dsm_segment *seg = NULL;
		uint32		gen;
		int			idx;

		if (qputs[i].made)
			continue;
		PG_TRY();
		{
			idx = put_submit(&qputs[i], "pend", &gen, &seg);
			(void) zklock_queue_answer(idx, gen,
									   psprintf("put an item into queue \"%s\"",
												qputs[i].queue));
		}
		PG_FINALLY();
		{
			if (seg)
				dsm_detach(seg);
			zklock_set_pending(-1, 0);
		}
		PG_END_TRY();
		zklock_channel_collect(idx, gen, &result);
		qputs[i].made = true;
	}
}

/* PRE_PREPARE: the commit log of a prepared transaction is not final */
void
zklock_queue_puts_prepare_check(void)
{
	if (nqputs > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that puts zklock queue items")));
}

/*
 * One move or drop after the end of the transaction: sent and waited for
 * until the deadline; never raises (a WARNING says what stays pending).
 */
static void
put_finish(QueuePut *p, bool commit, TimestampTz deadline)
{
	dsm_segment *seg = NULL;
	uint32		gen = 0;
	int			idx = -1;
	ZkEntryState state = ZKE_FREE;

	PG_TRY();
	{
		idx = put_submit(p, commit ? "move" : "drop", &gen, &seg);
		zklock_set_pending(-1, 0);
		while ((state = zklock_channel_state(idx, gen)) == ZKE_REQUESTED &&
			   GetCurrentTimestamp() < deadline)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 10, zklock_wait_event(ZKLOCK_WAIT_WORKER));
			ResetLatch(MyLatch);
		}
	}
	PG_CATCH();
	{
		FlushErrorState();
		zklock_set_pending(-1, 0);
	}
	PG_END_TRY();
	if (seg)
		dsm_detach(seg);
	if (idx >= 0)
		zklock_channel_withdraw(idx, gen);	/* frees it, or gives it back */
	if (state != ZKE_GRANTED && state != ZKE_DONE)
		ereport(WARNING,
				(errmsg("zklock queue item \"%s\" of queue \"%s\" is still pending after the %s",
						p->key, p->queue, commit ? "commit" : "rollback"),
				 errdetail("This instance's zklock worker moves or deletes it, as the commit log says, once connected to ZooKeeper again.")));
}

/* The transaction ended: COMMIT moves the pending items, ABORT drops them */
void
zklock_queue_puts_end(bool commit)
{
	TimestampTz deadline =
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
									zklock_session_timeout);

	HOLD_INTERRUPTS();
	/* an asynchronous commit's record is flushed before its items show */
	if (commit && nqputs > 0 && XactLastCommitEnd != InvalidXLogRecPtr)
		XLogFlush(XactLastCommitEnd);
	for (int i = 0; i < nqputs; i++)
	{
		if (qputs[i].made)
			put_finish(&qputs[i], commit, deadline);
		if (qputs[i].made && commit)	/* in the queue, or moved later */
			zklock_stats_queue_count(qputs[i].queue, ZKLOCK_QSTAT_PUT);
		pfree(qputs[i].item);
	}
	nqputs = 0;
	RESUME_INTERRUPTS();
}

/* ROLLBACK TO: the subtransaction's items are forgotten; RELEASE: the parent's */
void
zklock_queue_puts_subxact_end(bool commit, SubTransactionId mySubid,
							  SubTransactionId parentSubid)
{
	int			kept = 0;

	for (int i = 0; i < nqputs; i++)
	{
		QueuePut	p = qputs[i];

		if (p.subid == mySubid)
		{
			if (commit)
				p.subid = parentSubid;
			else
			{
				pfree(p.item);
				continue;
			}
		}
		qputs[kept++] = p;
	}
	nqputs = kept;
}
