/*-------------------------------------------------------------------------
 *
 * queue.c
 *		Recipe: the distributed queue (issue 31), in Kazoo's LockingQueue
 *		layout (queue_common.h; the design: doc/design.md "Queues").
 *
 * Four kinds of request, each an entry of the channel:
 *	- ZKR_QUEUE_PUT (its writes in queue_write.c): at once, or a
 *	  transactional put's pending node, move or drop; at once, create
 *	  entries/entry-PPP- (PERSISTENT_SEQUENTIAL) with
 *	  the item from the backend's segment; its name (the item's id) is the
 *	  answer, as a grant the backend collects at once.  A missing queue is
 *	  made first (persistent nodes, as Kazoo's ensure_path).  A lost reply
 *	  fails the put with 08006: the entry's name carries nothing of ours,
 *	  so whether it was made cannot be told (the caller may put again).
 *	- ZKR_QUEUE_TAKE and ZKR_QUEUE_TRY_TAKE: list entries and taken (one
 *	  round trip), then for the first entry without a hold create the hold
 *	  taken/<entry> (EPHEMERAL, the holder's data and our req= line) and
 *	  read the entry, sent back to back (one round trip; the read's reply,
 *	  the second, acts on both), into the backend's segment and grant: the entry is
 *	  GRANTED while held (PH_HELD), guarded by an exists with a watch on
 *	  the hold: deleted by someone else, the take is LOST (the fence
 *	  fails its commit); the watch is dropped at the release.  A hold that exists is skipped; an
 *	  entry gone under our new hold has its hold deleted, and the next is
 *	  tried.  No entry left: a try is NOT_GRANTED.  A ZKR_QUEUE_TAKE
 *	  (a wait) lists nothing itself: it waits in its queue's group
 *	  (queue_wait.c), whose shared listing hands it one free entry
 *	  (try_entry, its callback); its hold failed, it waits again, first.
 *	  A lost reply of the hold's create is found
 *	  again once connected by reading the hold: ours when it is of our
 *	  session and names our request (req=).
 *	- ZKR_QUEUE_LENGTH: the number of entries (Kazoo's len()), as DONE;
 *	  with "qop=purge", the entries without a hold deleted one at a time
 *	  after the take's listing (held ones stay), DONE with their number.
 *	- a ZKR_QUEUE_TRY_TAKE with "qop=peek": the take's listing, then the
 *	  first entry without a hold read, no hold made: GRANTED with the
 *	  item, the entry PH_IDLE (the backend withdraws it at once).
 * The release of a held take (the backend withdrew it) deletes the hold;
 * when the backend committed, its entry's data says "consume=1" (written
 * before the withdrawal, backend/queue.c) and the entry and the hold are
 * deleted as one multi (queue_release.c, with the hold's guard).
 *
 * The top of the recipe's files: it calls queue_write.c, queue_release.c,
 * queue_wait.c and queue_util.c, and none of them calls it; what they must
 * reach here is registered at q_init, as callbacks: queue_wait.c's
 * hand-out of an entry (try_entry) and a request's failure's cleanup
 * (take_end, run by queue_util.c's zklock_queue_fail).
 *
 * Rules: only the worker's thread runs this; a take's listing lives in
 * this file's memory (takes[idx], its own context) from the listing to
 * the grant or the end of the request; everything shared goes through
 * channel.c.  Every reply checks the request's generation and phase.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/dsm.h"
#include "utils/memutils.h"

#include "channel.h"
#include "failpoint.h"
#include "nodedata.h"
#include "queue_common.h"
#include "queue_int.h"
#include "recipe.h"
#include "settings.h"

/* A take's listing: the candidates, in order */
typedef struct QTake
{
	MemoryContext cxt;
	uint32		generation;
	bool		have_entries;
	bool		have_taken;
	char	  **entries;
	int			nentries;
	char	  **taken;
	int			ntaken;
	int			next;			/* the next entry to try */
	bool		paired;			/* the hold's create and the read in flight */
	int			hold_rc;		/* the hold's create's result, once answered */
	int			hold_zoo_rc;	/* and ZooKeeper's code, for the message */
	bool		peek;			/* a peek: read the entry, hold nothing */
	bool		purge;			/* a purge: delete the entries not held */
	int64		purged;			/* a purge's entries deleted so far */
} QTake;

static QTake **takes = NULL;

static void try_next(int idx);

static bool
queue_kind(ZkEntryKind k)
{
	return k == ZKR_QUEUE_PUT || k == ZKR_QUEUE_TAKE ||
		k == ZKR_QUEUE_TRY_TAKE || k == ZKR_QUEUE_LENGTH;
}

static void
take_drop(int idx)
{
	if (takes && takes[idx])
	{
		MemoryContextDelete(takes[idx]->cxt);
		takes[idx] = NULL;
	}
}

/* A request's end (zklock_queue_fail's hook): its take, its group left */
static void
take_end(int idx)
{
	take_drop(idx);
	zklock_queue_wait_leave(idx);
}

/* ---- a take: list, hold, read ---- */

static void
send_listing(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	QTake	   *t;
	MemoryContext cxt;
	char		path[Q_MAX_PATH];
	bool		ok;
	const char *qop;

	take_drop(idx);
	cxt = AllocSetContextCreate(TopMemoryContext, "zklock queue take",
								ALLOCSET_SMALL_SIZES);
	t = MemoryContextAllocZero(cxt, sizeof(QTake));
	t->cxt = cxt;
	t->generation = w->generation;
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	qop = zklock_node_field(entry(idx)->data, ZKLOCK_QUEUE_OP_FIELD);
	t->peek = qop != NULL && strncmp(qop, "peek", 4) == 0;
	t->purge = qop != NULL && strncmp(qop, "purge", 5) == 0;
	LWLockRelease(zklock_shared->lock);
	takes[idx] = t;
	w->phase = PH_CHECKING;
	w->node[0] = '\0';
	w->created = false;
	zklock_queue_sub_path(path, w, ZKLOCK_QUEUE_ENTRIES, NULL);
	ok = zkc_get_children(path, TAG(w->generation, QOP_ENTRIES, idx));
	zklock_queue_sub_path(path, w, ZKLOCK_QUEUE_TAKEN, NULL);
	ok = ok && zkc_get_children(path, TAG(w->generation, QOP_TAKEN, idx));
	if (!ok)
		set_recovering(w);
}

/* A listing's names into the take's memory; entries sorted */
static void
keep_names(QTake *t, ZkEvent *ev, bool entries)
{
	if (entries)
	{
		t->entries = zklock_queue_names(t->cxt, ev, true, &t->nentries);
		t->have_entries = true;
	}
	else
	{
		t->taken = zklock_queue_names(t->cxt, ev, false, &t->ntaken);
		t->have_taken = true;
	}
}

static bool
is_taken(QTake *t, const char *name)
{
	for (int i = 0; i < t->ntaken; i++)
		if (strcmp(t->taken[i], name) == 0)
			return true;
	return false;
}

/*
 * A peek reads the first entry without a hold, as a take would hold it,
 * and holds nothing: answered as GRANTED with the item in the segment,
 * then withdrawn by the backend at once (released as PH_IDLE).
 */
static void
send_peek(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	char		path[Q_MAX_PATH];

	w->created = false;
	w->create_unknown = false;
	w->phase = PH_CHECKING;
	zklock_queue_sub_path(path, w, ZKLOCK_QUEUE_ENTRIES, w->node);
	if (!zkc_get_data(path, TAG(w->generation, QOP_READ, idx)))
		set_recovering(w);
}

/*
 * A purge deletes, one at a time, the entries the listing found without a
 * hold; held ones stay (their holder's COMMIT consumes them, a ROLLBACK
 * gives them back).  Done: DONE with the count deleted.
 */
static void
purge_next(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	QTake	   *t = takes[idx];
	char		path[Q_MAX_PATH];

	if (t->next >= t->nentries)
	{
		int64		n = t->purged;

		take_drop(idx);
		w->phase = PH_IDLE;
		zklock_channel_done(idx, w->generation, n, 0);
		return;
	}
	zklock_queue_sub_path(path, w, ZKLOCK_QUEUE_ENTRIES, t->entries[t->next++]);
	w->phase = PH_CHECKING;
	if (!zkc_delete(path, TAG(w->generation, QOP_PURGE, idx)))
		zklock_queue_fail(idx, ERRCODE_CONNECTION_FAILURE,
						  "not connected to ZooKeeper");
}

/* A purge's delete answered: the next (an entry gone meanwhile counts not) */
static void
on_purge(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];
	QTake	   *t = takes[idx];

	if (t == NULL || !t->purge || w->phase != PH_CHECKING)
		return;
	if (w->release)
		zklock_queue_fail(idx, 0, NULL);	/* withdrawn: released */
	else if (ev->rc != ZKC_OK && ev->rc != ZKC_NONODE)
		zklock_queue_fail(idx, ERRCODE_CONNECTION_FAILURE,
						  zklock_queue_rc_text(ev));
	else
	{
		if (ev->rc == ZKC_OK)
			t->purged++;
		try_next(idx);
	}
}

/* Hold the next entry of the listing without a hold, or say there is none */
static void
try_next(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	QTake	   *t = takes[idx];
	char		path[Q_MAX_PATH];
	char		data[ZKLOCK_MAX_DATA_LEN + 1];
	char		mine[ZKLOCK_MAX_DATA_LEN + 1];
	char		req[24];

	while (t->next < t->nentries && is_taken(t, t->entries[t->next]))
		t->next++;
	if (t->purge)
	{
		purge_next(idx);
		return;
	}
	if (t->next >= t->nentries)
	{
		if (w->kind == ZKR_QUEUE_TRY_TAKE)
		{
			take_drop(idx);
			w->phase = PH_IDLE;
			zklock_channel_not_granted(idx, w->generation);
		}
		else
		{
			/* back to the waiters, first: the group lists again */
			take_drop(idx);
			zklock_queue_wait_join(idx, true);
		}
		return;
	}
	strlcpy(w->node, t->entries[t->next++], sizeof(w->node));
	if (t->peek)
	{
		send_peek(idx);
		return;
	}
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	strlcpy(data, entry(idx)->data, sizeof(data));
	LWLockRelease(zklock_shared->lock);
	snprintf(req, sizeof(req), "%d.%u", idx, w->generation);
	zklock_nodedata_add(mine, sizeof(mine), data, ZKLOCK_QUEUE_REQ_FIELD, req);
	zklock_queue_sub_path(path, w, ZKLOCK_QUEUE_TAKEN, w->node);
	(void) ZKLOCK_FAILPOINT("queue-before-hold");
	w->phase = PH_CHECKING;
	w->create_unknown = true;
	t->paired = true;
	t->hold_rc = ZKC_CONNLOSS;
	if (!zkc_create(path, mine, strlen(mine), ZKC_EPHEMERAL,
					TAG(w->generation, QOP_HOLD, idx)))
		set_recovering(w);
	else
	{
		/* the read behind it, answered after it: its reply decides */
		zklock_queue_sub_path(path, w, ZKLOCK_QUEUE_ENTRIES, w->node);
		if (!zkc_get_data(path, TAG(w->generation, QOP_READ, idx)))
			set_recovering(w);
	}
}

/*
 * queue_wait.c's callback (zklock_queue_wait_init): a waiting take is
 * handed an entry its group's listing showed free: try to hold it
 * (failing that, it waits again, first)
 */
static void
try_entry(int idx, const char *name)
{
	WorkEntry  *w = &zklock_work[idx];
	MemoryContext cxt;
	QTake	   *t;

	take_drop(idx);
	cxt = AllocSetContextCreate(TopMemoryContext, "zklock queue take",
								ALLOCSET_SMALL_SIZES);
	t = MemoryContextAllocZero(cxt, sizeof(QTake));
	t->cxt = cxt;
	t->generation = w->generation;
	t->entries = MemoryContextAlloc(cxt, sizeof(char *));
	t->entries[0] = MemoryContextStrdup(cxt, name);
	t->nentries = 1;
	t->have_entries = t->have_taken = true;
	takes[idx] = t;
	w->phase = PH_CHECKING;
	w->node[0] = '\0';
	w->created = false;
	try_next(idx);
}

/* A take lists again: a waiting take through its group, others alone */
static void
list_again(int idx)
{
	if (zklock_work[idx].kind == ZKR_QUEUE_TAKE)
	{
		take_drop(idx);
		zklock_queue_wait_join(idx, true);
	}
	else
		send_listing(idx);
}

static void
on_listing(int idx, ZkEvent *ev, bool entries)
{
	WorkEntry  *w = &zklock_work[idx];
	QTake	   *t = takes[idx];

	if (t == NULL || w->phase != PH_CHECKING || w->node[0] != '\0')
		return;
	if (w->release)
	{
		zklock_queue_fail(idx, 0, NULL);	/* withdrawn: released */
		return;
	}
	if (ev->rc != ZKC_OK && ev->rc != ZKC_NONODE)
	{
		if (t->purge)
		{
			zklock_queue_fail(idx, ERRCODE_CONNECTION_FAILURE,
							  zklock_queue_rc_text(ev));
			return;
		}
		take_drop(idx);
		set_recovering(w);
		return;
	}
	keep_names(t, ev, entries);
	if (t->have_entries && t->have_taken)
		try_next(idx);
}

static void
send_read(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	char		path[Q_MAX_PATH];

	w->created = true;
	w->create_unknown = false;
	if (takes[idx])
		takes[idx]->paired = false; /* a read alone */
	zklock_queue_sub_path(path, w, ZKLOCK_QUEUE_ENTRIES, w->node);
	if (!zkc_get_data(path, TAG(w->generation, QOP_READ, idx)))
		set_recovering(w);
}

static void
send_unhold(int idx, int op)
{
	WorkEntry  *w = &zklock_work[idx];
	char		path[Q_MAX_PATH];

	zklock_queue_sub_path(path, w, ZKLOCK_QUEUE_TAKEN, w->node);
	w->phase = PH_DELETING;
	if (!zkc_delete(path, TAG(w->generation, op, idx)))
		set_recovering(w);
}

/* The hold's create answered: kept for the read's reply behind it */
static void
on_hold(int idx, ZkEvent *ev)
{
	(void) ZKLOCK_FAILPOINT("queue-hold-reply");
	if (takes[idx] && takes[idx]->paired)
	{
		takes[idx]->hold_rc = ev->rc;
		takes[idx]->hold_zoo_rc = ev->zoo_rc;
		if (ev->rc == ZKC_OK)
			zklock_work[idx].czxid = ev->czxid;
	}
}

/* Both answered, the hold not made (or made and withdrawn meanwhile) */
static void
on_hold_failed(int idx, int rc)
{
	WorkEntry  *w = &zklock_work[idx];

	if (rc == ZKC_OK)
		send_unhold(idx, QOP_UNHOLD);	/* withdrawn */
	else if (rc == ZKC_NODEEXISTS && !w->release)
		try_next(idx);			/* held by someone else */
	else if (rc == ZKC_NONODE && !w->release)
		zklock_queue_fail(idx, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
			   "the queue has no \"taken\" node");
	else if (rc == ZKC_CONNLOSS)
		set_recovering(w);		/* the hold may exist: find it */
	else
	{
		w->create_unknown = false;
		zklock_queue_fail(idx, ERRCODE_CONNECTION_FAILURE,
						  rc == ZKC_EXPIRED ? "ZooKeeper session expired" :
						  zkc_result_text(takes[idx]->hold_zoo_rc));
	}
}

/* After a lost reply of the hold's create: is the hold ours? */
static void
on_find(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];
	char		req[24];
	const char *v = ev->data ? zklock_node_field(ev->data,
												 ZKLOCK_QUEUE_REQ_FIELD) : NULL;

	snprintf(req, sizeof(req), "%d.%u", idx, w->generation);
	if (ev->rc == ZKC_OK && v && ev->ephemeral_owner == zklock_recipe_session_id() &&
		zklock_node_field_len(v) == strlen(req) &&
		strncmp(v, req, strlen(req)) == 0)
	{
		w->czxid = ev->czxid;
		w->phase = PH_CHECKING;
		if (w->release)
			send_unhold(idx, QOP_UNHOLD);
		else
			send_read(idx);
	}
	else if (ev->rc == ZKC_OK || ev->rc == ZKC_NONODE)
	{
		w->create_unknown = false;	/* not made, or not ours */
		if (w->release)
			zklock_recipe_released(idx);
		else
			list_again(idx);
	}
	else
		set_recovering(w);
}

/* The entry's data: the item, to the backend's segment, and the grant */
static void
on_read(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];
	dsm_segment *seg;
	Size		size;
	uint32		len = ev->datalen > 0 ? ev->datalen : 0;
	bool		peek = takes[idx] != NULL && takes[idx]->peek;

	if (takes[idx] && takes[idx]->paired)
	{
		takes[idx]->paired = false;
		w->created = takes[idx]->hold_rc == ZKC_OK;
		w->create_unknown = takes[idx]->hold_rc == ZKC_CONNLOSS;
		if (!w->created || w->release)
		{
			on_hold_failed(idx, takes[idx]->hold_rc);
			return;
		}
	}
	if (peek && (w->release || ev->rc != ZKC_OK))
	{
		if (ev->rc == ZKC_NONODE && !w->release)
			try_next(idx);		/* consumed meanwhile: the next */
		else if (ev->rc == ZKC_CONNLOSS && !w->release)
			set_recovering(w);
		else
			zklock_queue_fail(idx, ERRCODE_CONNECTION_FAILURE,
							  zklock_queue_rc_text(ev));
		return;
	}
	if (ev->rc == ZKC_NONODE && !w->release)
	{
		send_unhold(idx, QOP_SKIP); /* consumed meanwhile: the next */
		return;
	}
	if (ev->rc != ZKC_OK || w->release)
	{
		if (ev->rc == ZKC_CONNLOSS && !w->release)
			set_recovering(w);
		else
			send_unhold(idx, QOP_UNHOLD);
		return;
	}
	seg = zklock_queue_segment(idx, &size);
	if (peek && (seg == NULL || len + sizeof(uint32) > size))
	{
		if (seg)
			dsm_detach(seg);
		zklock_queue_fail(idx, ERRCODE_PROGRAM_LIMIT_EXCEEDED,
						  "the item is larger than this version of zklock can take");
		return;
	}
	if (seg == NULL || len + sizeof(uint32) > size)
	{
		if (seg)
			dsm_detach(seg);
		w->fail_sqlstate = ERRCODE_PROGRAM_LIMIT_EXCEEDED;
		send_unhold(idx, QOP_UNHOLD);
		return;
	}
	memcpy(dsm_segment_address(seg), &len, sizeof(uint32));
	if (len > 0)
		memcpy((char *) dsm_segment_address(seg) + sizeof(uint32), ev->data, len);
	dsm_detach(seg);
	take_drop(idx);
	if (peek)
	{
		/* nothing held: the backend collects the item and withdraws */
		w->phase = PH_IDLE;
		zklock_channel_grant(idx, w->generation, ev->czxid,
							 zklock_recipe_session_id(), w->node);
		return;
	}
	w->phase = PH_HELD;
	zklock_queue_send_guard(idx);
	zklock_channel_grant(idx, w->generation, w->czxid,
						 zklock_recipe_session_id(), w->node);
}

/* A hold deleted: skipped (try the next), or the request's end */
static void
on_unhold(int idx, ZkEvent *ev, bool skip)
{
	WorkEntry  *w = &zklock_work[idx];

	if (ev->rc == ZKC_CONNLOSS)
	{
		set_recovering(w);
		return;
	}
	w->created = false;
	if (skip && !w->release && takes[idx])
	{
		w->phase = PH_CHECKING;
		try_next(idx);
	}
	else if (w->release)
		zklock_recipe_released(idx);
	else
		zklock_queue_fail(idx, w->fail_sqlstate ? w->fail_sqlstate :
			   ERRCODE_CONNECTION_FAILURE,
			   w->fail_sqlstate ? "the item is larger than this version of zklock can take" :
			   "the take could not read its item");
}

/* ---- release, length, dispatch ---- */

/* The backend is done with a held take: consume it (committed), or not */
static void
q_release(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	bool		consume;

	if (w->kind != ZKR_QUEUE_TAKE && w->kind != ZKR_QUEUE_TRY_TAKE)
	{
		if (w->phase == PH_IDLE)
			zklock_recipe_released(idx);
		return;					/* else its reply releases it */
	}
	if (w->phase == PH_WATCHING)
	{
		zklock_queue_wait_leave(idx);
		take_drop(idx);
		zklock_recipe_released(idx);
		return;
	}
	if (w->phase != PH_HELD && w->phase != PH_IDLE)
		return;					/* its reply in flight releases it */
	zkc_unwatch(TAG(w->generation, QOP_GUARD, idx));
	if (w->phase == PH_IDLE || !w->created)
	{
		zklock_recipe_released(idx);
		return;
	}
	consume = zklock_queue_consuming(idx);
	if (consume)
		zklock_queue_send_consume(idx); /* queue_release.c */
	else
		send_unhold(idx, QOP_UNHOLD);
}

static void
on_length(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];
	int			n = 0;

	if (ev->rc != ZKC_OK && ev->rc != ZKC_NONODE)
	{
		zklock_queue_fail(idx, ERRCODE_CONNECTION_FAILURE, zklock_queue_rc_text(ev));
		return;
	}
	for (int i = 0; ev->rc == ZKC_OK && i < ev->nchildren; i++)
		if (zklock_queue_entry_name(ev->children[i]))
			n++;
	w->phase = PH_IDLE;
	if (w->release)
		zklock_recipe_released(idx);
	else
		zklock_channel_done(idx, w->generation, n, 0);
}

/* A ZKR_QUEUE_LENGTH whose data says "qop=purge" */
static bool
purge_asked(int idx)
{
	const char *qop;
	bool		purge;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	qop = zklock_node_field(entry(idx)->data, ZKLOCK_QUEUE_OP_FIELD);
	purge = qop != NULL && strncmp(qop, "purge", 5) == 0;
	LWLockRelease(zklock_shared->lock);
	return purge;
}

static void
q_start(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	char		path[Q_MAX_PATH];

	w->tries = 0;
	if (w->kind == ZKR_QUEUE_PUT)
	{
		const char *qop;

		LWLockAcquire(zklock_shared->lock, LW_SHARED);
		strlcpy(w->node, entry(idx)->node, sizeof(w->node));
		qop = zklock_node_field(entry(idx)->data, ZKLOCK_QUEUE_OP_FIELD);
		zklock_queue_put_modes[idx] = qop == NULL ? QPUT_NOW :
			strncmp(qop, "pend", 4) == 0 ? QPUT_PEND :
			strncmp(qop, "move", 4) == 0 ? QPUT_MOVE : QPUT_DROP;
		LWLockRelease(zklock_shared->lock);
		zklock_queue_send_put(idx, false);
	}
	else if (w->kind == ZKR_QUEUE_LENGTH && purge_asked(idx))
		send_listing(idx);
	else if (w->kind == ZKR_QUEUE_TAKE)
		zklock_queue_wait_join(idx, false);
	else if (w->kind == ZKR_QUEUE_LENGTH)
	{
		w->phase = PH_CHECKING;
		zklock_queue_sub_path(path, w, ZKLOCK_QUEUE_ENTRIES, NULL);
		if (!zkc_get_children(path, TAG(w->generation, QOP_LENGTH, idx)))
			zklock_queue_fail(idx, ERRCODE_CONNECTION_FAILURE,
				   "could not ask ZooKeeper for the queue's length");
	}
	else
		send_listing(idx);
}

static void
q_event(ZkEvent *ev)
{
	int			idx = TAG_IDX(ev->tag);
	WorkEntry  *w;

	if (idx >= QWAIT_IDX_BASE && idx < QWAIT_IDX_BASE + QWAIT_IDX_COUNT)
	{
		zklock_queue_wait_event(ev);
		return;
	}
	if (idx >= zklock_recipe_nentries())
		return;
	w = &zklock_work[idx];
	if (TAG_GEN(ev->tag) != w->generation || !queue_kind(w->kind))
		return;
	switch (TAG_OP(ev->tag))
	{
		case QOP_PUT:
			zklock_queue_on_put(idx, ev);
			break;
		case QOP_ENTRIES:
		case QOP_TAKEN:
			on_listing(idx, ev, TAG_OP(ev->tag) == QOP_ENTRIES);
			break;
		case QOP_HOLD:
			on_hold(idx, ev);
			break;
		case QOP_FIND:
			on_find(idx, ev);
			break;
		case QOP_READ:
			on_read(idx, ev);
			break;
		case QOP_SKIP:
		case QOP_UNHOLD:
			on_unhold(idx, ev, TAG_OP(ev->tag) == QOP_SKIP);
			break;
		case QOP_LENGTH:
			on_length(idx, ev);
			break;
		case QOP_DROP:
			zklock_queue_on_drop(idx, ev);
			break;
		case QOP_GUARD:
			zklock_queue_on_guard(idx, ev);
			break;
		case QOP_PURGE:
			on_purge(idx, ev);
			break;
		case QOP_CONSUME:
		case QOP_CONSUMED:
			zklock_queue_on_consume(idx, ev);
			break;
		default:
			break;				/* QOP_PARENT: the next says */
	}
}

/* Once connected again: redo what lost its reply */
static void
q_retry(void)
{
	for (int idx = 0; idx < zklock_recipe_nentries(); idx++)
	{
		WorkEntry  *w = &zklock_work[idx];
		char		path[Q_MAX_PATH];

		if (queue_kind(w->kind) && w->phase == PH_HELD && w->guard_needed &&
			!w->release && w->created)
			zklock_queue_send_guard(idx);	/* queue_release.c */
		if (!queue_kind(w->kind) || w->phase != PH_RECOVERING)
			continue;
		if (w->create_unknown)
		{
			w->phase = PH_CHECKING;
			zklock_queue_sub_path(path, w, ZKLOCK_QUEUE_TAKEN, w->node);
			if (!zkc_get_data(path, TAG(w->generation, QOP_FIND, idx)))
				set_recovering(w);
		}
		else if (w->created)
		{
			w->phase = PH_HELD;
			if (w->release)
				q_release(idx);
			else
				send_read(idx);
		}
		else if (w->release)
			zklock_recipe_released(idx);
		else
			list_again(idx);
	}
	zklock_queue_wait_retry();
}

static void
q_connected(int64 session_id)
{
	q_retry();
}

/* The session is gone, and every hold with it */
static void
q_session_lost(void)
{
	const char *why = zklock_recipe_loss_why();

	for (int idx = 0; idx < zklock_recipe_nentries(); idx++)
	{
		WorkEntry  *w = &zklock_work[idx];
		int			pid;

		if (!queue_kind(w->kind) || w->phase == PH_IDLE ||
			w->phase == PH_DEFERRED)
			continue;
		take_drop(idx);
		w->created = false;
		w->create_unknown = false;
		if (w->phase == PH_HELD)
		{
			if (zklock_channel_session_lost(idx, w->generation, &pid))
				zklock_recipe_lost_lock(pid);
			w->phase = PH_IDLE;
		}
		else if (w->release && zklock_queue_consuming(idx))
			zklock_queue_consume_end(idx, ZKLOCK_CONSUME_UNKNOWN,
									 psprintf("the ZooKeeper session ended before ZooKeeper answered its consume (%s)",
											  why));
		else
			zklock_queue_fail(idx, ERRCODE_CONNECTION_FAILURE,
				   psprintf("ZooKeeper session lost during a queue request: %s",
							why));
	}
}

static void
q_init(void)
{
	takes = MemoryContextAllocZero(TopMemoryContext,
								   sizeof(QTake *) * zklock_recipe_nentries());
	zklock_queue_util_init(take_end);
	zklock_queue_wait_init(try_entry);
}

const ZkRecipe zklock_queue_recipe = {
	.name = "queue",
	.kinds = RECIPE_KIND(ZKR_QUEUE_PUT) | RECIPE_KIND(ZKR_QUEUE_TAKE) |
	RECIPE_KIND(ZKR_QUEUE_TRY_TAKE) | RECIPE_KIND(ZKR_QUEUE_LENGTH),
	.idx_first = QWAIT_IDX_BASE,
	.idx_count = QWAIT_IDX_COUNT,
	.init = q_init,
	.start = q_start,
	.release = q_release,
	.event = q_event,
	.connected = q_connected,
	.session_lost = q_session_lost,
	.retry = q_retry,
};
