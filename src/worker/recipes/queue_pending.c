/*-------------------------------------------------------------------------
 *
 * queue_pending.c
 *		Recipe: the pending puts of this instance's transactions that no
 *		backend finished (issue 31; doc/design.md "Queues").
 *
 * A transactional put is the persistent node
 * <root>/zklock.queues/<queue>/pending/<system id>-<full xid>-<n>-<PPP>
 * from PRE_COMMIT until its backend moves it into entries (one multi,
 * after the commit record) or deletes it (abort): backend/queue_put.c.
 * When that did not happen (the instance crashed between the commit
 * record and the move, the worker or the connection went, the backend's
 * wait ran out, the move's multi failed), the node stays.  At every
 * connection this recipe walks <root>/zklock.queues down to every queue,
 * nested ones too ("x/y": every child of a queue's node other than its
 * entries, taken and pending is a queue), lists each queue's pending, and
 * for each node of this system id whose transaction is no longer in
 * progress asks the commit log: committed, it reads the node and moves it (the same multi
 * as the backend's: the entry made, the pending node deleted, all or
 * nothing, so a move raced by the backend's own happens once); not
 * committed (aborted, or never committed before a crash), it deletes it.
 * A transaction still in progress is its backend's.  A transaction whose
 * commit log is gone (older than the oldest xid it keeps) is left, with a
 * LOG line.  Pending nodes of an instance (system id) never started again
 * are not this recipe's: nobody else can read that commit log; they stay
 * invisible to takers until an administrator removes them.
 *
 * The worker starts with the postmaster: while the instance recovers the
 * walk waits (walk_owed) and runs at the first tick after.  Rules: only
 * the worker's thread runs this; it keeps no state beyond the generation
 * of its walk (a reply of an older walk is ignored) and walk_owed.  Cost:
 * two listings per queue node (its children, its pending) at each
 * connection.  A move is the entry's create and the pending node's delete,
 * both marked together (zk_multi.c): a multi that fails leaves the pending
 * node, and a walk moves it again: the next connection's, or sooner, the
 * one a failed move owes (zklock_queue_pending_retry: after 1 s, backing
 * off to one a minute while moves keep failing; retry_at and retry_ms).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xlog.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "utils/timestamp.h"

#include "queue_common.h"
#include "queue_int.h"
#include "recipe.h"
#include "settings.h"
#include "zklock.h"
#include "compat.h"

enum
{
	POP_QUEUES = 1,				/* listing of <root>/zklock.queues */
	POP_PENDING,				/* listing of a queue's pending */
	POP_READ,					/* a committed item's data */
	POP_DONE					/* a move's or a delete's reply */
};

static uint32 walk_gen = 0;
static bool walk_owed = false;	/* connected during recovery: walk after */

/* a move failed while connected: a walk at retry_at, backing off */
#define QP_RETRY_FIRST_MS	1000
#define QP_RETRY_MAX_MS		60000
static TimestampTz retry_at = 0;	/* 0: none owed */
static int	retry_ms = 0;		/* the last delay; 0 after a connection */

#define QP_MAX_PATH	(ZKLOCK_MAX_PATH + 2 * ZKLOCK_MAX_NODE_NAME_LEN + 32)

/* Our system id's node: its transaction's xid and its priority */
static bool
pending_parse(const char *name, FullTransactionId *fxid, int *priority)
{
	char		mine[32];
	unsigned long long x;
	int			n;

	snprintf(mine, sizeof(mine), UINT64_FORMAT "-", GetSystemIdentifier());
	if (strncmp(name, mine, strlen(mine)) != 0 ||
		sscanf(name + strlen(mine), "%llu-%d-%d", &x, &n, priority) != 3)
		return false;
	*fxid = FullTransactionIdFromU64((uint64) x);
	return true;
}

/*
 * The commit log's verdict: 1 committed, 0 not (aborted, or never
 * committed before a crash), -1 undecided (in progress, not an xid of
 * ours, or older than the oldest the commit log keeps: its status would
 * be an ERROR, "could not access status of transaction", which would end
 * the worker at every connection).  As pg_xact_status: the oldest kept
 * (oldestClogXid) read and the commit log looked at under
 * XactTruncationLock, so that no truncation comes in between.
 */
static int
pending_verdict(FullTransactionId fxid)
{
	TransactionId xid = XidFromFullTransactionId(fxid);
	FullTransactionId next = ReadNextFullTransactionId();
	TransactionId oldest;
	FullTransactionId oldest_fxid;
	uint32		epoch = EpochFromFullTransactionId(next);
	int			verdict;

	if (!TransactionIdIsNormal(xid) || !FullTransactionIdPrecedes(fxid, next))
		return -1;				/* not ours to judge */
	if (TransactionIdIsInProgress(xid))
		return -1;
	LWLockAcquire(XactTruncationLock, LW_SHARED);
	oldest = ZKLOCK_TRANSAM_VARIABLES->oldestClogXid;
	if (oldest <= XidFromFullTransactionId(next) || epoch == 0)
		oldest_fxid = FullTransactionIdFromEpochAndXid(epoch, oldest);
	else
		oldest_fxid = FullTransactionIdFromEpochAndXid(epoch - 1, oldest);
	if (FullTransactionIdPrecedes(fxid, oldest_fxid))
		verdict = -2;
	else
		verdict = TransactionIdDidCommit(xid) ? 1 : 0;
	LWLockRelease(XactTruncationLock);
	return verdict;
}

/* A queue's own folder (entries, taken, pending): not a queue below it */
static bool
queue_folder(const char *name)
{
	return strcmp(name, ZKLOCK_QUEUE_ENTRIES) == 0 ||
		strcmp(name, ZKLOCK_QUEUE_TAKEN) == 0 ||
		strcmp(name, ZKLOCK_QUEUE_PENDING) == 0;
}

/*
 * The children of zklock.queues, or of a queue's node: each is a queue
 * (queue names nest, "x/y", and no component of a name is a queue's own
 * folder).  Its pending is listed, and its own children, at any depth;
 * bounded by ZooKeeper's tree and by the path's length.
 */
static void
on_queues(ZkEvent *ev)
{
	char		path[QP_MAX_PATH];

	for (int i = 0; ev->rc == ZKC_OK && i < ev->nchildren; i++)
	{
		if (queue_folder(ev->children[i]) ||
			snprintf(path, sizeof(path), "%s/%s/%s", ev->path, ev->children[i],
					 ZKLOCK_QUEUE_PENDING) >= (int) sizeof(path))
			continue;
		(void) zkc_get_children(path, TAG(walk_gen, POP_PENDING, QPENDING_IDX));
		snprintf(path, sizeof(path), "%s/%s", ev->path, ev->children[i]);
		(void) zkc_get_children(path, TAG(walk_gen, POP_QUEUES, QPENDING_IDX));
	}
}

static void
on_pending(ZkEvent *ev)
{
	char		path[QP_MAX_PATH];

	for (int i = 0; ev->rc == ZKC_OK && i < ev->nchildren; i++)
	{
		FullTransactionId fxid;
		int			priority;
		int			verdict;

		if (!pending_parse(ev->children[i], &fxid, &priority))
			continue;
		snprintf(path, sizeof(path), "%s/%s", ev->path, ev->children[i]);
		verdict = pending_verdict(fxid);
		if (verdict == -2)
			ereport(LOG,
					(errmsg("zklock: leaving the queue item \"%s\": its transaction is older than the commit log",
							path),
					 errdetail("Whether it committed cannot be told; an administrator removes it.")));
		else if (verdict == 1)
			(void) zkc_get_data(path, TAG(walk_gen, POP_READ, QPENDING_IDX));
		else if (verdict == 0)
		{
			ereport(LOG,
					(errmsg("zklock: deleting the queue item \"%s\" of a transaction that did not commit",
							path)));
			(void) zkc_delete(path, TAG(walk_gen, POP_DONE, QPENDING_IDX));
		}
	}
}

/* A committed item: the entry made and the pending node deleted, at once */
static void
on_read(ZkEvent *ev)
{
	char		queue[QP_MAX_PATH];
	char		entry[QP_MAX_PATH];
	char	   *slash;
	FullTransactionId fxid;
	int			priority;
	ZkcMultiOp	ops[2];

	if (ev->rc != ZKC_OK || (slash = strrchr(ev->path, '/')) == NULL ||
		!pending_parse(slash + 1, &fxid, &priority))
		return;
	strlcpy(queue, ev->path, sizeof(queue));
	*strrchr(queue, '/') = '\0';	/* .../<queue>/pending */
	*strrchr(queue, '/') = '\0';	/* .../<queue> */
	snprintf(entry, sizeof(entry), "%s/%s/%s%03d-", queue,
			 ZKLOCK_QUEUE_ENTRIES, ZKLOCK_QUEUE_ENTRY, priority);
	memset(ops, 0, sizeof(ops));
	ops[0].create = true;
	ops[0].path = entry;
	ops[0].data = ev->data;
	ops[0].datalen = Max(ev->datalen, 0);
	ops[0].flags = ZKC_PERSISTENT_SEQUENTIAL;
	ops[0].tag = TAG(walk_gen, POP_DONE, QPENDING_IDX);
	ops[1].path = ev->path;
	ops[1].tag = TAG(walk_gen, POP_DONE, QPENDING_IDX);
	/* all or nothing: the pending node never deleted without its entry */
	ops[0].together = ops[1].together = true;
	ereport(LOG,
			(errmsg("zklock: moving the queue item \"%s\" of a committed transaction into the queue",
					ev->path)));
	(void) zkc_multi(ops, 2, queue);
}

/*
 * A move failed (the backend's, queue_write.c, or a walk's): its pending
 * node stays, and one more walk is owed, after 1 s, then twice as long
 * each time (at most 60 s) until the next connection, so that a failure
 * that lasts (an ACL on entries) costs a walk a minute, not a loop.
 */
void
zklock_queue_pending_retry(void)
{
	if (retry_at != 0)
		return;					/* one owed already */
	retry_ms = retry_ms == 0 ? QP_RETRY_FIRST_MS :
		Min(retry_ms * 2, QP_RETRY_MAX_MS);
	retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), retry_ms);
}

static void
qp_event(ZkEvent *ev)
{
	if (TAG_GEN(ev->tag) != walk_gen)
		return;
	if (TAG_OP(ev->tag) == POP_DONE && ev->kind == ZKEV_CREATED &&
		ev->rc != ZKC_OK)
		zklock_queue_pending_retry();	/* the walk's own move failed */
	switch (TAG_OP(ev->tag))
	{
		case POP_QUEUES:
			on_queues(ev);
			break;
		case POP_PENDING:
			on_pending(ev);
			break;
		case POP_READ:
			on_read(ev);
			break;
		default:
			break;				/* POP_DONE: the next walk sees what stays */
	}
}

/*
 * Walk the queues' pending nodes; not while the instance recovers (the
 * worker starts with the postmaster, before crash recovery ends, when the
 * commit log is not yet final): then at the first tick after
 */
static void
qp_walk(void)
{
	char		path[QP_MAX_PATH];

	walk_owed = RecoveryInProgress();
	if (walk_owed)
		return;
	walk_gen++;
	snprintf(path, sizeof(path), "%s/%.*s", zklock_root,
			 (int) strlen(ZKLOCK_QUEUE_PREFIX) - 1, ZKLOCK_QUEUE_PREFIX);
	(void) zkc_get_children(path, TAG(walk_gen, POP_QUEUES, QPENDING_IDX));
}

static void
qp_connected(int64 session_id)
{
	retry_at = 0;
	retry_ms = 0;
	qp_walk();
}

static long
qp_tick(void)
{
	long		wait = -1;

	if (walk_owed && zklock_connected)
		qp_walk();
	if (retry_at != 0 && zklock_connected)
	{
		wait = (long) ((retry_at - GetCurrentTimestamp()) / 1000);
		if (wait <= 0)
		{
			retry_at = 0;
			wait = -1;
			qp_walk();
		}
	}
	if (walk_owed)
		wait = wait < 0 ? 1000 : Min(wait, 1000);
	return wait;
}

const ZkRecipe zklock_queue_pending_recipe = {
	.name = "queue pending",
	.idx_first = QPENDING_IDX,
	.idx_count = 1,
	.event = qp_event,
	.connected = qp_connected,
	.tick = qp_tick,
};
