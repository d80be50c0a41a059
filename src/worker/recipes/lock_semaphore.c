/*-------------------------------------------------------------------------
 *
 * lock_semaphore.c
 *		A semaphore's request in the lock recipe: its step 2 (the
 *		semaphore's rule instead of Hive's) and its step 3 (waiting behind
 *		the max_holders nearest lower semaphore nodes).
 *
 * protocol.c creates a semaphore's node and lists the children as for a
 * lock, then hands the listing to zklock_semaphore_decide, and the watches
 * of its wait to zklock_semaphore_on_wait; the grant, the guard and the
 * delete are the lock's (lock_held.c).  The rule itself is a pure function
 * (grant_rule.c, zklock_semaphore_rule).
 *
 * Why the max_holders nearest lower nodes: a waiter is eligible once fewer
 * than max_holders semaphore nodes are lower than its own, and while the
 * max_holders nearest of them all exist it cannot be; so a deletion among
 * them is the only news it must hear, whatever order holders release in
 * and also when a waiter ahead withdraws.  A deletion notifies at most
 * max_holders waiters (those that have the node among their nearest):
 * no herd.  Curator's one watch on the node max_holders places ahead
 * misses releases by the other holders.
 *
 * All of it runs in the worker; the WorkEntry fields it uses (sem_*) are
 * the worker's own memory.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "recipe.h"
#include "lock_int.h"
#include "zklock.h"
#include "grant_rule.h"
#include "settings.h"
#include "zk_client.h"

/*
 * Step 2 for a semaphore's request: the semaphore rule (grant_rule.c).
 * Granted, or failed (a lower lock node, a semaphore node of another
 * limit: our node goes first), or, not granted, a try deletes its node;
 * each done here.  A waiter: returns true, with the nodes protocol.c is to
 * watch (step 3) in nodes[] (room for ZKLOCK_MAX_SEMAPHORE_HOLDERS), their
 * number in *nnodes, and in *keep whether the watches still set stay.
 */
bool
zklock_semaphore_decide(int idx, ZkEvent *ev, int64 my_seq,
						const char **nodes, int *nnodes, bool *keep_watches)
{
	WorkEntry  *w = &zklock_work[idx];
	const char *resource = w->parent + strlen(zklock_root) + 1;
	int			watch[ZKLOCK_MAX_SEMAPHORE_HOLDERS];
	int64		watch_seq[ZKLOCK_MAX_SEMAPHORE_HOLDERS];
	int			nwatch;
	int			nlower;
	int			conflict;
	int			limit = 0;
	int			nnew = 0;
	bool		keep;

	if (w->max_holders < 1 || w->max_holders > ZKLOCK_MAX_SEMAPHORE_HOLDERS)
	{
		/* the backend checks it (semaphore.c): never here */
		zklock_lock_fail_deleting(idx, ERRCODE_INVALID_PARAMETER_VALUE,
					  "zklock semaphore max_holders %d is out of range",
					  w->max_holders);
		return false;
	}
	switch (zklock_semaphore_rule((const char *const *) ev->children,
								  ev->nchildren, my_seq, w->max_holders,
								  watch, watch_seq, &nwatch, &nlower,
								  &conflict))
	{
		case ZKLOCK_SEM_GRANTED:
			grant(idx);
			return false;
		case ZKLOCK_SEM_USED_AS_LOCK:
			zklock_lock_fail_deleting(idx, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
						  "zklock resource \"%s\" is used as a lock (node \"%s\"): it cannot be used as a semaphore at the same time",
						  resource, ev->children[conflict]);
			return false;
		case ZKLOCK_SEM_OTHER_LIMIT:
			(void) zklock_parse_semaphore_node(ev->children[conflict],
											   &limit, NULL);
			zklock_lock_fail_deleting(idx, ERRCODE_INVALID_PARAMETER_VALUE,
						  "zklock semaphore \"%s\" has max_holders %d, not %d",
						  resource, limit, w->max_holders);
			return false;
		case ZKLOCK_SEM_WAIT:
			break;
	}
	if (w->kind == ZKR_TRY_ACQUIRE)
	{
		w->try_failed = true;
		send_delete(idx);
		return false;
	}

	/*
	 * Listing again behind a deletion (zklock_semaphore_on_wait), the nodes still
	 * watched are among the nearest again (the lower nodes only went, and
	 * those watched were the nearest): their watches stay, and only the
	 * nodes new to the set are watched.  Otherwise (a first wait, or after
	 * a lost reply) every watch is set anew.
	 */
	keep = w->sem_relist;
	w->sem_relist = false;
	for (int i = 0; i < nwatch; i++)
	{
		bool		watched = false;

		for (int k = 0; keep && !watched && k < w->sem_nwatched; k++)
			watched = (w->sem_watched[k] == watch_seq[i]);
		if (!watched)
			nodes[nnew++] = ev->children[watch[i]];
	}

	/* the watched set, to count each deletion once (on_wait) */
	if (w->sem_room < nwatch)
	{
		if (w->sem_watched)
			pfree(w->sem_watched);
		w->sem_watched = MemoryContextAlloc(TopMemoryContext,
											sizeof(int64) * w->max_holders);
		w->sem_room = w->max_holders;
	}
	memcpy(w->sem_watched, watch_seq, sizeof(int64) * nwatch);
	w->sem_nwatched = nwatch;
	w->sem_lower = nlower;
	w->sem_gone = 0;
	*nnodes = nnew;
	*keep_watches = keep;
	return true;
}

/*
 * A semaphore's watch fired, or its exists came back.  A node of the set
 * it watches gone: granted at once if the lower nodes of the last listing,
 * less those seen go, are fewer than the limit (a node created later has a
 * higher sequence number); else list again, since a lower node it does
 * not watch may have gone too.  Each node counts once: a watch of an
 * earlier set that fired before it was dropped finds its node no longer
 * in the set.  A data change: watch the node again, without listing.
 * Events while it lists again: see below.  Returns true when protocol.c
 * is to list the children again.
 */
bool
zklock_semaphore_on_wait(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];
	const char *slash = strrchr(ev->path, '/');
	int64		seq;
	int			k;

	if (w->phase != PH_WATCHING)
	{
		/*
		 * Listing again (or about to, after a lost reply), it means to keep
		 * the watches of its set still there.  A watch of the set that
		 * fired for anything but its node's deletion (a holder rewriting its
		 * data), or an exists that failed, leaves a node of the set that
		 * may still be there unwatched: the listing sets every watch anew.
		 * (A deletion, or an exists that found no node: the listing, sent
		 * after it, will not have that node.)
		 */
		if ((w->phase == PH_CHECKING || w->phase == PH_RECOVERING) &&
			!(ev->kind == ZKEV_WATCH && ev->watch_type == ZKC_WATCH_DELETED) &&
			!(ev->kind == ZKEV_STAT &&
			  (ev->rc == ZKC_OK || ev->rc == ZKC_NONODE)))
			w->sem_relist = false;
		return false;
	}
	if (ev->kind == ZKEV_STAT && ev->rc != ZKC_OK && ev->rc != ZKC_NONODE)
	{
		if (ev->rc == ZKC_CONNLOSS)
			set_recovering(w);
		return false;
	}
	if (ev->kind == ZKEV_STAT && ev->rc == ZKC_OK)
		return false;			/* watched */
	if (!zklock_parse_node_name(slash ? slash + 1 : ev->path, NULL, &seq))
		return false;
	for (k = 0; k < w->sem_nwatched && w->sem_watched[k] != seq; k++)
		;
	if (k == w->sem_nwatched)
		return false;			/* not of the set we watch now */

	if (ev->kind == ZKEV_WATCH && ev->watch_type == ZKC_WATCH_CHANGED)
	{
		if (!zkc_watch_node(ev->path, TAG(w->generation, OP_WAIT, idx)))
			set_recovering(w);
		return false;
	}
	if (ev->kind == ZKEV_WATCH && ev->watch_type != ZKC_WATCH_DELETED)
		return true;			/* anything else: look again */
	/* deleted (a watch), or gone before the watch was set (NONODE) */
	w->sem_watched[k] = w->sem_watched[--w->sem_nwatched];
	w->sem_gone++;
	if (w->sem_lower - w->sem_gone < w->max_holders)
	{
		grant(idx);
		return false;
	}
	w->sem_relist = true;		/* the watches left stay */
	return true;
}
