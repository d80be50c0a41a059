/*-------------------------------------------------------------------------
 *
 * queue_write.c
 *		The queue recipe's writes of items (issue 31): a put at once, and
 *		a transactional put's pending node, its move into entries (one
 *		multi, after its transaction's commit record) and its drop
 *		(doc/design.md "Queues"; the rest of the recipe: queue.c).
 *
 * A ZKR_QUEUE_PUT's mode is its data's "qop=" line (queue_common.h).  The
 * queue's path (its node, entries, taken, pending) is made on the first
 * NONODE, and the write sent again, at most three tries; a move is not
 * sent again (the multi failed as a whole: a pending node already moved
 * by queue_pending.c is why); a failed move owes queue_pending.c a walk,
 * which moves it again.  Rules: only the worker's thread; a put's item is
 * in the backend's segment, read when the write is sent.  Called by
 * queue.c (its start and its dispatch), it calls queue_util.c of the
 * recipe (paths, the segment, each put's mode, a failure) and
 * queue_pending.c's zklock_queue_pending_retry.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/dsm.h"

#include "channel.h"
#include "failpoint.h"
#include "queue_common.h"
#include "queue_int.h"
#include "recipe.h"
#include "settings.h"

/* The queue's path from the root down, entries and taken: persistent */
static bool
send_parents(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	char		path[Q_MAX_PATH];
	bool		ok = true;

	for (char *p = w->parent + strlen(zklock_root) + 1; ok; p++)
	{
		if (*p == '/' || *p == '\0')
		{
			memcpy(path, w->parent, p - w->parent);
			path[p - w->parent] = '\0';
			ok = zkc_create(path, NULL, -1, 0,
							TAG(w->generation, QOP_PARENT, idx));
			if (*p == '\0')
				break;
		}
	}
	zklock_queue_sub_path(path, w, ZKLOCK_QUEUE_ENTRIES, NULL);
	ok = ok && zkc_create(path, NULL, -1, 0, TAG(w->generation, QOP_PARENT, idx));
	zklock_queue_sub_path(path, w, ZKLOCK_QUEUE_TAKEN, NULL);
	ok = ok && zkc_create(path, NULL, -1, 0, TAG(w->generation, QOP_PARENT, idx));
	zklock_queue_sub_path(path, w, ZKLOCK_QUEUE_PENDING, NULL);
	return ok && zkc_create(path, NULL, -1, 0,
							TAG(w->generation, QOP_PARENT, idx));
}

/* A move: the entry's create and the pending node's delete, one multi */
static bool
send_move(int idx, const char *item, int len)
{
	WorkEntry  *w = &zklock_work[idx];
	char		entry_path[Q_MAX_PATH];
	char		pending_path[Q_MAX_PATH];
	ZkcMultiOp	ops[2];

	zklock_queue_sub_path(entry_path, w, ZKLOCK_QUEUE_ENTRIES, w->node);
	zklock_queue_sub_path(pending_path, w, ZKLOCK_QUEUE_PENDING, w->ignore_node);
	memset(ops, 0, sizeof(ops));
	ops[0].create = true;
	ops[0].path = entry_path;
	ops[0].data = item;
	ops[0].datalen = len;
	ops[0].flags = ZKC_PERSISTENT_SEQUENTIAL;
	ops[0].tag = TAG(w->generation, QOP_PUT, idx);
	ops[1].path = pending_path;
	ops[1].tag = TAG(w->generation, QOP_MOVED, idx);
	/* all or nothing: the pending node never deleted without its entry */
	ops[0].together = ops[1].together = true;
	/* the queue's node is the multi's anchor: its setData gives the zxid */
	return zkc_multi(ops, 2, w->parent);
}

/* The write of a put, by its mode */
static bool
send_put_write(int idx, const char *item, int len)
{
	WorkEntry  *w = &zklock_work[idx];
	char		path[Q_MAX_PATH];

	switch ((QPutMode) zklock_queue_put_modes[idx])
	{
		case QPUT_PEND:
			zklock_queue_sub_path(path, w, ZKLOCK_QUEUE_PENDING, w->node);
			return zkc_create(path, item, len, 0,
							  TAG(w->generation, QOP_PUT, idx));
		case QPUT_MOVE:
			(void) ZKLOCK_FAILPOINT("queue-before-move");
			return send_move(idx, item, len);
		case QPUT_DROP:
			zklock_queue_sub_path(path, w, ZKLOCK_QUEUE_PENDING, w->node);
			return zkc_delete(path, TAG(w->generation, QOP_DROP, idx));
		default:
			zklock_queue_sub_path(path, w, ZKLOCK_QUEUE_ENTRIES, w->node);
			return zkc_create(path, item, len, ZKC_PERSISTENT_SEQUENTIAL,
							  TAG(w->generation, QOP_PUT, idx));
	}
}

void
zklock_queue_send_put(int idx, bool with_parents)
{
	WorkEntry  *w = &zklock_work[idx];
	dsm_segment *seg;
	Size		size;
	bool		ok;

	seg = zklock_queue_segment(idx, &size);
	if (seg == NULL)
	{
		zklock_queue_fail(idx, ERRCODE_CONNECTION_FAILURE, "the put was withdrawn");
		return;
	}
	w->phase = PH_CHECKING;
	w->tries++;
	ok = (!with_parents || send_parents(idx)) &&
		send_put_write(idx, dsm_segment_address(seg), (int) size);
	dsm_detach(seg);
	if (!ok)
		zklock_queue_fail(idx, ERRCODE_CONNECTION_FAILURE,
			   "could not send the put to ZooKeeper");
}

void
zklock_queue_on_put(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];
	const char *slash = ev->path ? strrchr(ev->path, '/') : NULL;

	if (ev->rc == ZKC_NONODE && w->tries < 3 && !w->release &&
		zklock_queue_put_modes[idx] != QPUT_MOVE)
		zklock_queue_send_put(idx, true);
	else if (ev->rc != ZKC_OK)
	{
		if (zklock_queue_put_modes[idx] == QPUT_MOVE)
			zklock_queue_pending_retry();	/* its pending node stays */
		zklock_queue_fail(idx, ev->rc == ZKC_NOAUTH ? ERRCODE_INSUFFICIENT_PRIVILEGE :
			   ERRCODE_CONNECTION_FAILURE,
			   psprintf("the put's outcome is unknown: %s", zklock_queue_rc_text(ev)));
	}
	else if (w->release)
		zklock_recipe_released(idx);
	else
	{
		w->phase = PH_IDLE;
		zklock_channel_grant(idx, w->generation, ev->czxid,
							 zklock_recipe_session_id(),
							 slash ? slash + 1 : ev->path);
	}
}

/* A pending node deleted (the transaction aborted): gone either way */
void
zklock_queue_on_drop(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	if (ev->rc != ZKC_OK && ev->rc != ZKC_NONODE)
		zklock_queue_fail(idx, ERRCODE_CONNECTION_FAILURE,
			   psprintf("the pending item was not deleted: %s", zklock_queue_rc_text(ev)));
	else if (w->release)
		zklock_recipe_released(idx);
	else
	{
		w->phase = PH_IDLE;
		zklock_channel_done(idx, w->generation, 0, 0);
	}
}

