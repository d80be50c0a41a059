/*-------------------------------------------------------------------------
 *
 * queue_util.c
 *		The queue recipe's lowest file (issue 31): what its other files
 *		share (queue.c, queue_write.c, queue_release.c, queue_wait.c): a
 *		queue's child paths, a reply's failure in words, a request's
 *		segment, each put's mode, and a request's failure.
 *
 * It calls no other file of the recipe: the files above call it, and a
 * request's failure runs what queue.c must drop first (its take, the
 * waiters' group) through the hook queue.c registers at the recipe's
 * init (zklock_queue_util_init), so that no file below queue.c calls it.
 *
 * Rules: only the worker's thread; zklock_queue_put_modes (by idx) is
 * this file's (TopMemoryContext), written by queue.c at a put's start and
 * read by queue_write.c; everything shared goes through channel.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/dsm.h"
#include "utils/memutils.h"

#include "channel.h"
#include "queue_int.h"
#include "recipe.h"

char	   *zklock_queue_put_modes = NULL; /* QPutMode of each put, by idx */

static QueueEndHook end_hook = NULL;

/* At the recipe's init: each put's mode, and the hook a failure runs */
void
zklock_queue_util_init(QueueEndHook on_end)
{
	zklock_queue_put_modes = MemoryContextAllocZero(TopMemoryContext,
													zklock_recipe_nentries());
	end_hook = on_end;
}

void
zklock_queue_sub_path(char *buf, WorkEntry *w, const char *dir,
					  const char *name)
{
	snprintf(buf, Q_MAX_PATH, "%s/%s%s%s", w->parent, dir,
			 name ? "/" : "", name ? name : "");
}

const char *
zklock_queue_rc_text(ZkEvent *ev)
{
	return ev->rc == ZKC_CONNLOSS ? "connection to ZooKeeper lost" :
		ev->rc == ZKC_EXPIRED ? "ZooKeeper session expired" :
		zkc_result_text(ev->zoo_rc);
}

/*
 * The request ends in failure (or, withdrawn, is released); queue.c's
 * hook drops its take and takes it out of its group first
 */
void
zklock_queue_fail(int idx, int sqlstate, const char *msg)
{
	WorkEntry  *w = &zklock_work[idx];

	if (end_hook)
		end_hook(idx);
	if (w->release)
		zklock_recipe_released(idx);
	else
		zklock_recipe_fail(idx, sqlstate, msg);
}

/*
 * The request's segment, attached, and its size, if the request is still
 * asked for; else NULL.
 *
 * Attached under the channel's lock, with the check: a backend leaves
 * REQUESTED (withdraw, at an ERROR, a cancel or its exit: before_shmem_exit,
 * ahead of its DSM detach) under that lock in exclusive mode, before it
 * detaches the segment, so a handle read while the entry is REQUESTED
 * names the backend's live segment, and once we are attached the segment
 * lives (its reference count) until our dsm_detach, whatever the backend
 * does: its handle cannot be given to another segment meanwhile.  Attached
 * after the release (as before), the backend could withdraw and destroy it
 * in between and a new segment take its handle: another backend's memory
 * read as an item or written with one.  dsm_attach under an LWLock is what
 * PostgreSQL's own dsa.c does (get_best_segment attaches under the area's
 * lock); it takes DynamicSharedMemoryControlLock inside, and nothing takes
 * our lock while holding that one.  An ERROR in it (mapping failed) ends
 * the worker, whose exit releases every LWLock.
 */
dsm_segment *
zklock_queue_segment(int idx, Size *size)
{
	ZkLockEntry *e = entry(idx);
	dsm_segment *seg = NULL;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	*size = e->list_size;
	if (e->generation == zklock_work[idx].generation &&
		e->state == ZKE_REQUESTED)
		seg = dsm_attach(e->list_handle);
	LWLockRelease(zklock_shared->lock);
	return seg;
}
