/*-------------------------------------------------------------------------
 *
 * queue_release.c
 *		The end of a held take (issue 31; the rest of the recipe:
 *		queue.c): the hold's guard while held, and the consume of a
 *		committed take (doc/design.md "Queues").
 *
 * The consume is one multi, as Kazoo's consume(): delete entries/<node>
 * (QOP_CONSUME), delete taken/<node> (QOP_CONSUMED), with the queue's node
 * as zk_multi.c's anchor.  One request and one transaction where two
 * deletes were two of each.  Rolled back because one of the two was gone,
 * zk_multi.c sends the other again alone with its own tag: the entry gone
 * (consumed meanwhile: NONODE for QOP_CONSUME, then the hold's delete's
 * reply), or the hold gone (NONODE for QOP_CONSUMED, then the entry's
 * delete's reply).  Either way two replies come, the entry's delete among
 * them, and the take is released after the second: a COMMIT that returned
 * has its item's entry deleted.  A lost reply leaves the take held
 * (created): once connected, q_retry releases it again, the same multi.
 * A delete refused for good (NOTEMPTY: another client's child under the
 * entry; NOAUTH) counts as its reply, with a LOG line: retried, it would
 * fail again and hold the take's channel entry to each reconnection.
 * A crash before the multi leaves the entry (redelivered: the hold is
 * ephemeral).  The consume's end is its verdict, which the COMMIT waiting
 * for it reads (channel_consume.c): consumed (the entry's delete OK or
 * NONODE), not consumed (NOTEMPTY, NOAUTH), or, when the session ends
 * with the multi in flight (queue.c's q_session_lost), unknown.
 *
 * Rules: only the worker's thread runs this; consume_left and
 * consume_refused are this file's (by idx, the replies a consume still
 * waits for, and its entry's delete's refusal).  Called by queue.c, it
 * calls only queue_util.c of the recipe.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "channel.h"
#include "failpoint.h"
#include "nodedata.h"
#include "queue_common.h"
#include "queue_int.h"
#include "recipe.h"

static uint8 *consume_left = NULL;
static int *consume_refused = NULL; /* by idx: the entry's delete's refusal */

/*
 * The hold's guard: an exists with a watch on taken/<entry> while held, so
 * that a hold deleted by someone else marks the take LOST (its commit then
 * fails at the fence, as a lock's whose node went).  One request per take,
 * sent with the grant (no round trip waited for); nothing per commit.
 * Not sent (disconnected at the grant): guard_needed, and q_retry sends it
 * again, soon while connected and at the reconnection; it then finds a
 * hold deleted meanwhile gone (NONODE: LOST), or another taker's of the
 * same name made since (another czxid: LOST too).
 */
void
zklock_queue_send_guard(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	char		path[Q_MAX_PATH];
	bool		owed = w->guard_needed;

	zklock_queue_sub_path(path, w, ZKLOCK_QUEUE_TAKEN, w->node);
	w->guard_needed = ZKLOCK_FAILPOINT("queue-before-guard") ||
		!zkc_watch_node(path, TAG(w->generation, QOP_GUARD, idx));
	if (w->guard_needed)
	{
		if (!owed)				/* once, not at each retry */
			ereport(LOG,
					(errmsg("zklock: could not watch the hold \"%s\" yet; it is watched once connected",
							path)));
		zklock_recipe_retry_soon();
	}
}

/* The guard: the hold is gone (or changed: watch it again) */
void
zklock_queue_on_guard(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	if (w->phase != PH_HELD || w->release || !w->created)
		return;					/* our own delete, or not held any more */
	if (ev->kind == ZKEV_WATCH && ev->watch_type != ZKC_WATCH_DELETED)
	{
		zklock_queue_send_guard(idx);
		return;
	}
	if (ev->kind != ZKEV_WATCH && ev->rc != ZKC_NONODE && ev->rc != ZKC_OK)
	{
		/* its reply lost (the connection went): no watch set, again */
		w->guard_needed = true;
		zklock_recipe_retry_soon();
		return;
	}
	/*
	 * There, and ours: the watch is set.  A hold is named after its entry,
	 * so a guard sent late (owed) can find another taker's hold of the
	 * same entry, made after ours was deleted: its czxid says it is not
	 * ours, and ours is gone (the watch on theirs goes with their hold).
	 */
	if (ev->kind != ZKEV_WATCH && ev->rc == ZKC_OK && ev->czxid == w->czxid)
		return;
	w->created = false;
	(void) zklock_channel_lost(idx, w->generation, NULL);
	ereport(LOG,
			(errmsg("zklock: the hold \"%s/%s/%s\" of a queue item was deleted while held",
					w->parent, ZKLOCK_QUEUE_TAKEN, w->node)));
}

/* A committed take: its entry and its hold deleted as one multi */
void
zklock_queue_send_consume(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	char		entry_path[Q_MAX_PATH];
	char		hold_path[Q_MAX_PATH];
	ZkcMultiOp	ops[2];

	if (consume_left == NULL)
	{
		consume_left = MemoryContextAllocZero(TopMemoryContext,
											  zklock_recipe_nentries());
		consume_refused = MemoryContextAllocZero(TopMemoryContext,
												 sizeof(int) * zklock_recipe_nentries());
	}
	zklock_queue_sub_path(entry_path, w, ZKLOCK_QUEUE_ENTRIES, w->node);
	zklock_queue_sub_path(hold_path, w, ZKLOCK_QUEUE_TAKEN, w->node);
	memset(ops, 0, sizeof(ops));
	ops[0].path = entry_path;
	ops[0].tag = TAG(w->generation, QOP_CONSUME, idx);
	ops[1].path = hold_path;
	ops[1].tag = TAG(w->generation, QOP_CONSUMED, idx);
	(void) ZKLOCK_FAILPOINT("queue-before-consume");
	w->phase = PH_DELETING;
	consume_left[idx] = 2;
	consume_refused[idx] = ZKC_OK;
	if (!zkc_multi(ops, 2, w->parent))
		set_recovering(w);
}

/* One of the consume's two replies (see the header) */
void
zklock_queue_on_consume(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	if (w->phase != PH_DELETING || consume_left == NULL ||
		consume_left[idx] == 0)
		return;
	if (ev->rc != ZKC_OK && ev->rc != ZKC_NONODE &&
		ev->rc != ZKC_NOTEMPTY && ev->rc != ZKC_NOAUTH)
	{
		consume_left[idx] = 0;
		set_recovering(w);		/* still held: released again */
		return;
	}
	if (ev->rc == ZKC_NOTEMPTY || ev->rc == ZKC_NOAUTH)
	{
		/*
		 * Refused for good (another client's child under the entry:
		 * NOTEMPTY; an ACL): the same multi sent again at a reconnection
		 * would be refused again, and its hold's delete, sent alone,
		 * would delete another taker's hold.  Answered: said here, and
		 * the take released after its other reply (the item stays).
		 */
		ereport(LOG,
				(errmsg("zklock: could not consume item \"%s\" of a zklock queue (\"%s\"): %s",
						w->node, w->parent, zklock_queue_rc_text(ev)),
				 TAG_OP(ev->tag) == QOP_CONSUME ?
				 errdetail("ZooKeeper refused the delete of its entry: the item stays in the queue.") :
				 errdetail("ZooKeeper refused the delete of its hold: the hold stays to the end of this ZooKeeper session.")));
		if (TAG_OP(ev->tag) == QOP_CONSUME)
			consume_refused[idx] = ev->rc;
	}
	if (--consume_left[idx] > 0)
		return;
	if (consume_refused[idx] == ZKC_NOTEMPTY)
		zklock_queue_consume_end(idx, ZKLOCK_NOT_CONSUMED,
								 "ZooKeeper refused to delete its entry, which has child nodes (NOTEMPTY)");
	else if (consume_refused[idx] == ZKC_NOAUTH)
		zklock_queue_consume_end(idx, ZKLOCK_NOT_CONSUMED,
								 "ZooKeeper refused to delete its entry: no permission (NOAUTH)");
	else
		zklock_queue_consume_end(idx, ZKLOCK_CONSUMED, "");
}

/* Is idx a committed take, given back to be consumed (its "consume=")? */
bool
zklock_queue_consuming(int idx)
{
	bool		consume;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	consume = zklock_node_field(entry(idx)->data, "consume=") != NULL;
	LWLockRelease(zklock_shared->lock);
	return consume;
}

/*
 * A committed take's end: the verdict to the COMMIT that waits for it
 * (channel_consume.c), the entry released
 */
void
zklock_queue_consume_end(int idx, int verdict, const char *why)
{
	WorkEntry  *w = &zklock_work[idx];

	if (consume_left)
		consume_left[idx] = 0;
	w->created = false;
	zklock_channel_consume_end(idx, w->generation, verdict, why);
	w->phase = PH_IDLE;
}
