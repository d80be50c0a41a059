/*-------------------------------------------------------------------------
 *
 * channel.c
 *		The request channel between backends and the worker: the work
 *		queue, and every change of an entry's state.  No other file assigns
 *		ZkLockEntry.state or frees an entry, except channel_limits.c (the
 *		free list, counted against backend slots; a consume's verdict).
 *		(shmem.c sets up the segment, zeroed: zklock_channel_init.)
 *
 * The shared table (zklock.h) has one entry per lock node of this instance,
 * or per request for one, from the moment a backend asks for it until the
 * worker knows that the node is gone.  The table therefore doubles as the
 * list of every node this instance owns.
 *
 * Ownership
 * ---------
 * An entry is owned by one side at a time, and only its owner changes it:
 *
 *	FREE --submit--> REQUESTED --answer--> GRANTED --withdraw--> RELEASING
 *	(free list)		(worker's)	|		   (backend's;			(worker's)
 *								|			lost: LOST)				|
 *								+--> NOT_GRANTED / FAILED / DONE	|
 *								|	 (backend's; it frees them)		|
 *								+--withdraw--> RELEASING			|
 *																	v
 *						released, once the node is known gone: FREE
 *
 * - The backend owns its request until it is submitted: it fills in a
 *   ZkChannelRequest in its own memory, and zklock_channel_submit takes a
 *   free entry, copies the request into it, marks it REQUESTED and queues
 *   it, all in one locked section.  No other process ever sees a
 *   half-filled entry, and nothing returns holding the lock.
 * - The worker owns a REQUESTED entry until its verdict: only the worker
 *   moves it to GRANTED, NOT_GRANTED, FAILED or DONE (zklock_channel_grant,
 *   _not_granted, _fail, _done).  The backend's only move meanwhile is to
 *   withdraw it (REQUESTED -> RELEASING), after which the worker's verdict
 *   is not given: a grant that comes too late deletes the node instead, a
 *   try-lock's refusal leaves the entry to its release (already queued),
 *   and a failure or a finished listing frees the entry at once, as does a
 *   withdrawn request the worker had not yet taken
 *   (zklock_channel_released).  (A failure leaves nothing in ZooKeeper
 *   except an explicit request's persistent node whose grant could not be
 *   written: that node is left to its time to live and the sweep.)
 *   Two more moves of the backend's on its REQUESTED entry (deadlock.c):
 *   marking it long_wait (zklock_channel_mark_long_wait; the flag only,
 *   and the table's long_wait_marks, for the worker to publish), and the
 *   withdrawal of a deadlock's victim only while it is still REQUESTED
 *   (zklock_channel_withdraw_waiting), so that a grant given first wins.
 * - The backend owns a verdict: it reads it (zklock_channel_result) and
 *   frees NOT_GRANTED, FAILED and DONE entries (zklock_channel_collect,
 *   zklock_channel_withdraw).  A GRANTED entry stays its own until it
 *   withdraws it; the worker may meanwhile only mark it LOST (its node or
 *   session is gone), which the backend reads at its commit fence -- or,
 *   when the mark came before the backend looked at its verdict, at once:
 *   a grant is reported held only while it stands
 *   (zklock_channel_grant_stands), else it is given back.  An
 *   explicit lock's GRANTED entry is freed by the backend at once
 *   (zklock_channel_collect): its persistent node lives on without it.
 * - The worker owns a RELEASING entry: it deletes the node, then frees the
 *   entry (zklock_channel_released); the backend, which may have exited,
 *   never looks at it again, except to wait for its free (a full slot's,
 *   a queue take's COMMIT): the worker sets its latch then
 *   (channel_freed_wake).
 * - When the worker stops, or a new one starts after one that stopped
 *   (zklock_channel_worker_gone), every request the worker owned becomes
 *   FAILED, every GRANTED entry LOST, and every RELEASING one is freed:
 *   the session that held their nodes is being closed.  A queue take's
 *   COMMIT that awaits its consume's verdict gets it (DONE) instead of
 *   the free, here and wherever the worker frees (channel_consume.c).
 *
 * Every worker-side call about one entry checks its generation, bumped at
 * each allocation and each free: an answer for a request that was freed
 * (and perhaps reused) meanwhile changes nothing.  So do the backend's
 * calls, which matters only for withdraw (an entry given back twice).
 *
 * Locking rules
 * -------------
 * ZkLockShared->lock (an LWLock) guards the free list, the work queue, the
 * per-slot counts and every field of every entry.  Every function here
 * takes it itself, except those that say "caller holds the lock".  Nobody
 * holds it across a ZooKeeper call, a wait or an ERROR (a lost lock is
 * counted under it, in stats.c, whose lock is taken last of all and never
 * raises), and the frequent calls set the latch they owe only after
 * releasing it (channel_unlock_and_wake).  Nothing in this file allocates
 * under it (the SQL views of status.c palloc their rows while holding it
 * shared, which PostgreSQL's LWLocks allow: an ERROR there releases the
 * lock).
 *
 * Who writes which fields of an entry (zklock.h marks them):
 * - "lock" fields (state, queued, generation, next_free, count_slot): only
 *   this file and channel_limits.c.
 * - "backend" fields: copied from the ZkChannelRequest by
 *   zklock_channel_submit while the entry is still FREE, under the lock;
 *   afterwards only data and data_version change, by the owning backend on
 *   a GRANTED entry (zklock_channel_set_data, a changed scope).  The
 *   worker reads them under the lock: when it takes the request
 *   (zklock_channel_take), and data, node and list_size again where it
 *   uses them (protocol.c, admin.c, listing.c, recipe.c).
 * - "worker" fields: written by the worker under the lock, here, with its
 *   verdict (the entry leaves REQUESTED in the same section); read by the
 *   owner under the lock once it has seen the verdict.  The worker never
 *   writes a "backend" field: the waiter= line of an explicit request's
 *   data goes into its own copy (protocol.c).
 *
 * Reads done without the lock, and why they are safe:
 * - A LIST request's result segment (dsm): the worker writes it while the
 *   entry is REQUESTED and before zklock_channel_done; the backend reads it
 *   after it has seen DONE under the lock.  The lock's release and
 *   acquisition order the two.  A backend that gave up leaves REQUESTED
 *   under the lock, then detaches the segment; the worker attaches it
 *   under the lock while the entry is REQUESTED (recipe.c, queue_util.c),
 *   so its handle cannot name another segment by then.
 * - ZkLockShared.worker_alive_at: an atomic, written without the lock by
 *   the worker; its age is all a reader needs.
 * No field of an entry is read without the lock.
 *
 * Limits: an entry that is not FREE counts against the backend slot that
 * allocated it, and a lock request may not take the entries kept for
 * administrative ones: channel_limits.c, which holds the free list.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/timestamp.h"

#include "channel.h"
#include "channel_int.h"
#include "compat.h"
#include "lease.h"
#include "settings.h"
#include "shmem.h"
#include "stats.h"
#include "zklock.h"

static inline ZkLockEntry *
channel_entry(int idx)
{
	return &zklock_shared->entries[idx];
}

/*
 * Put an entry in the worker's queue, once.  The ring holds every entry at
 * most once, so it cannot overflow.  Caller holds the lock.
 */
void
zklock_channel_enqueue(int idx)
{
	ZkLockEntry *e = channel_entry(idx);
	int			n = zklock_shared->nentries;

	if (e->queued)
		return;
	e->queued = true;
	zklock_shared->queue[(zklock_shared->queue_head +
						  zklock_shared->queue_count) % n] = idx;
	zklock_shared->queue_count++;
}

/* Set the latch of an entry's owner.  Caller holds the lock. */
static void
channel_wake_owner(ZkLockEntry *e)
{
	SetLatch(ZKLOCK_PROC_LATCH(e->owner_procno));
}

/*
 * The frequent calls (a submit, a withdraw, a verdict) do not set a latch
 * inside their locked section: they note whose (the worker's procno, or
 * the entry's owner's; -1 for none) and set it once the lock is released
 * (channel_unlock_and_wake).  The woken process then does not find the lock
 * still held, and the kill() of SetLatch is not part of the section.  A
 * latch set late wakes at worst a process that no longer waits for this:
 * every wait here is a loop that checks its state again.
 */
static int
channel_worker_procno_locked(void)
{
	return zklock_shared->worker_pid != 0 ? zklock_shared->worker_procno : -1;
}

/* Release the lock, then set the latch of procno (-1: none) */
static void
channel_unlock_and_wake(int procno)
{
	LWLockRelease(zklock_shared->lock);
	if (procno >= 0)
		SetLatch(ZKLOCK_PROC_LATCH(procno));
}

/*
 * Whose latch the worker sets when it frees a RELEASING entry: a full
 * slot's backend, which may wait for it to drain; else the owner of a
 * queue take, whose COMMIT waits until its item is consumed
 * (backend/queue.c, wait_consumed).  Without this wake that COMMIT slept
 * to its poll's timeout after every consumption (7.5 ms of a cycle's
 * 11.7, doc/performance.md).  An owner that no longer waits (a take
 * given back by ROLLBACK) finds its latch set once, as any late wake.
 * Caller holds the lock; called before zklock_channel_free.
 */
static int
channel_freed_wake(int idx)
{
	ZkLockEntry *e = channel_entry(idx);
	int			slot = zklock_channel_full_slot(idx);

	if (slot >= 0)
		return slot;
	if (e->kind == ZKR_QUEUE_TAKE || e->kind == ZKR_QUEUE_TRY_TAKE)
		return e->owner_procno;
	return -1;
}

/* Is the worker's ZooKeeper session connected now? */
bool
zklock_channel_connected(void)
{
	bool		connected;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	connected = zklock_shared->session_state == ZKS_CONNECTED;
	LWLockRelease(zklock_shared->lock);
	return connected;
}

/*
 * Is entry idx still the one of this generation, in this state?  Caller
 * holds the lock.
 */
static inline bool
channel_is(int idx, uint32 generation, ZkEntryState state)
{
	return channel_entry(idx)->generation == generation &&
		channel_entry(idx)->state == state;
}

/* ---- backend side ---- */

/*
 * Submit a request: take a free entry counted against this backend's slot,
 * copy *req into it, mark it REQUESTED and queue it; wake the worker unless
 * !wake (a batch wakes it once, when all are in).  Returns the entry's
 * index and sets *generation, or returns ZKLOCK_CHANNEL_NO_WORKER when no
 * worker runs, or a ZKLOCK_ALLOC_* answer; the caller raises the error, or
 * waits (ZKLOCK_ALLOC_BACKEND_DRAINING: the worker sets the latch of a full
 * slot when it frees one of its entries).
 */
int
zklock_channel_submit(const ZkChannelRequest *req, bool wake,
					  uint32 *generation)
{
	int			slot = ZKLOCK_MY_PROCNO;
	int			idx;
	ZkLockEntry *e;
	int			wake_procno = -1;

	if (slot < 0 || slot >= zklock_shared->nslots)
		elog(ERROR, "zklock: backend slot %d out of range", slot);

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (zklock_shared->worker_pid == 0)
	{
		LWLockRelease(zklock_shared->lock);
		return ZKLOCK_CHANNEL_NO_WORKER;
	}
	idx = zklock_channel_alloc(req->kind, slot);
	if (idx < 0)
	{
		LWLockRelease(zklock_shared->lock);
		return idx;
	}
	e = channel_entry(idx);
	e->kind = req->kind;
	e->mode = req->mode;
	e->persistent = req->persistent;
	e->max_holders = req->max_holders;
	e->owner_procno = slot;
	e->owner_pid = MyProcPid;
	strlcpy(e->resource, req->resource, sizeof(e->resource));
	strlcpy(e->data, req->data, sizeof(e->data));
	e->data_version = 0;
	strlcpy(e->node, req->node, sizeof(e->node));
	strlcpy(e->ignore_node, req->ignore_node, sizeof(e->ignore_node));
	e->list_handle = req->list_handle;
	e->list_size = req->list_size;
	e->waiting_since = 0;
	e->queue_waited = false;
	e->wait_node[0] = '\0';
	e->waits_behind[0] = '\0';
	e->state = ZKE_REQUESTED;
	zklock_channel_enqueue(idx);
	if (wake)
		wake_procno = channel_worker_procno_locked();
	*generation = e->generation;
	channel_unlock_and_wake(wake_procno);
	return idx;
}

/* How many of this backend slot's entries are still being removed */
int
zklock_channel_my_releasing(void)
{
	int			n;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	n = zklock_channel_slot_releasing(ZKLOCK_MY_PROCNO);
	LWLockRelease(zklock_shared->lock);
	return n;
}

/* Wake the worker (after a batch of submissions) */
void
zklock_channel_wake_worker(void)
{
	int			wake_procno;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	wake_procno = channel_worker_procno_locked();
	channel_unlock_and_wake(wake_procno);
}

/*
 * The state of the backend's entry: REQUESTED until the worker's verdict.
 * FREE if the entry is no longer of this generation (which cannot happen
 * to an entry the backend has not withdrawn).
 */
ZkEntryState
zklock_channel_state(int idx, uint32 generation)
{
	ZkEntryState state = ZKE_FREE;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	if (channel_entry(idx)->generation == generation)
		state = channel_entry(idx)->state;
	LWLockRelease(zklock_shared->lock);
	return state;
}

/* Is the entry still in the worker's queue (not yet taken)? */
bool
zklock_channel_queued(int idx)
{
	bool		queued;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	queued = channel_entry(idx)->queued;
	LWLockRelease(zklock_shared->lock);
	return queued;
}

/* Copy the verdict of an entry.  Caller holds the lock. */
static void
channel_copy_result(int idx, uint32 generation, ZkChannelResult *result)
{
	ZkLockEntry *e = channel_entry(idx);

	result->state = e->generation == generation ? e->state : ZKE_FREE;
	result->token = e->token;
	result->session_id = e->session_id;
	result->list_needed = e->list_needed;
	result->sqlstate = e->sqlstate;
	result->max_holders = e->max_holders;
	strlcpy(result->error, e->error, sizeof(result->error));
	strlcpy(result->data, e->data, sizeof(result->data));
	strlcpy(result->node, e->node, sizeof(result->node));
	result->waited = e->waiting_since != 0 || e->queue_waited;
}

/* Read the worker's verdict (and the node data) of the backend's entry */
void
zklock_channel_result(int idx, uint32 generation, ZkChannelResult *result)
{
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	channel_copy_result(idx, generation, result);
	LWLockRelease(zklock_shared->lock);
}

/*
 * Does the worker's grant of the backend's entry still stand: is it
 * GRANTED, and (a lock node that lives with its session) of the session
 * the lease is for, one the worker has not begun to end?  *proven: and the
 * lease covers that session now (lease.c) -- a worker that stopped (a
 * SIGSTOP, starvation) withdraws nothing, so only the lease's deadline
 * tells that its session may have expired meanwhile.  Read in one locked
 * section.  A grant the backend looks at only after the worker stopped,
 * or after its session ended, is not one: the session that held the node
 * is closed or being closed, and another holder may have the lock
 * (acquire.c reports it held only if this says so, and proven).
 */
bool
zklock_channel_grant_stands(int idx, uint32 generation, bool *proven)
{
	ZkLockEntry *e;
	bool		stands;
	int64		left;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	e = channel_entry(idx);
	stands = channel_is(idx, generation, ZKE_GRANTED) &&
		(e->persistent || zklock_lease_session_live_locked(e->session_id));
	*proven = stands &&
		(e->persistent || zklock_lease_covers_locked(e->session_id, &left));
	LWLockRelease(zklock_shared->lock);
	return stands;
}

/*
 * The backend's last look at an entry it owns: read the verdict and free
 * the entry.  For a NOT_GRANTED, FAILED or DONE entry, and for an explicit
 * lock's GRANTED (or LOST) one, whose persistent node lives on without it.
 */
void
zklock_channel_collect(int idx, uint32 generation, ZkChannelResult *result)
{
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	channel_copy_result(idx, generation, result);
	Assert(result->state != ZKE_REQUESTED && result->state != ZKE_RELEASING);
	if (result->state != ZKE_FREE && result->state != ZKE_REQUESTED &&
		result->state != ZKE_RELEASING)
		zklock_channel_free(idx);
	LWLockRelease(zklock_shared->lock);
}

/*
 * A listing's rows (ZKR_LIST, ZKR_ELECTION, ZKR_WAITS) out of the segment
 * of *size bytes its request carried, once collected DONE with
 * list_needed (the rows and a NUL): palloc'd and NUL-terminated when they
 * fit; else NULL, and *size becomes the size to ask again with.  Detaches
 * seg either way.  The backend's listings call it (request.c, leader.c,
 * deadlock_read.c).
 */
char *
zklock_channel_take_rows(dsm_segment *seg, Size *size, Size list_needed)
{
	char	   *rows = NULL;

	if (list_needed <= *size)
	{
		rows = palloc(list_needed);
		memcpy(rows, dsm_segment_address(seg), list_needed);
		rows[list_needed - 1] = '\0';
	}
	else
		*size = list_needed + list_needed / 4;
	dsm_detach(seg);
	return rows;
}

/*
 * New node data for a GRANTED lock (its scope changed): the worker writes
 * it to the node.  Nothing happens unless the entry is still GRANTED and
 * not an explicit lock's.
 */
void
zklock_channel_set_data(int idx, uint32 generation, const char *data)
{
	ZkLockEntry *e;
	int			wake_procno = -1;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	e = channel_entry(idx);
	if (channel_is(idx, generation, ZKE_GRANTED) && !e->persistent)
	{
		strlcpy(e->data, data, sizeof(e->data));
		e->data_version++;
		zklock_channel_enqueue(idx);
		wake_procno = channel_worker_procno_locked();
	}
	channel_unlock_and_wake(wake_procno);
}

/*
 * A backend that gives back several entries at once (its locks at the end
 * of a transaction, a lock and its parents) wakes the worker once, after
 * the last, so that the worker takes them in one pass and sends their
 * deletes as one transaction (batch.c).  Backend-local; between hold and
 * release the worker still takes the queue at every pass of its loop (at
 * least once a second).
 */
static int	wake_hold = 0;
static bool wake_owed = false;

void
zklock_channel_hold_wakes(void)
{
	wake_hold++;
}

void
zklock_channel_release_wakes(void)
{
	if (wake_hold > 0 && --wake_hold == 0 && wake_owed)
	{
		wake_owed = false;
		zklock_channel_wake_worker();
	}
}

/*
 * Give an entry back: a pending or held one goes to the worker for its node
 * to be deleted; a finished one is freed here.  Never raises an ERROR.
 */
void
zklock_channel_withdraw(int idx, uint32 generation)
{
	ZkLockEntry *e;
	int			wake_procno = -1;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	e = channel_entry(idx);
	if (e->generation == generation)
	{
		switch (e->state)
		{
			case ZKE_REQUESTED:
			case ZKE_GRANTED:
			case ZKE_LOST:
				zklock_channel_set_releasing(idx);
				zklock_channel_enqueue(idx);
				if (wake_hold > 0)
					wake_owed = true;	/* woken once, at the release */
				else
					wake_procno = channel_worker_procno_locked();
				break;
			case ZKE_NOT_GRANTED:
			case ZKE_FAILED:
			case ZKE_DONE:
				zklock_channel_free(idx);
				break;
			case ZKE_FREE:
			case ZKE_RELEASING:
				break;
		}
	}
	channel_unlock_and_wake(wake_procno);
}

/*
 * The backend's request (still REQUESTED) has waited past the deadlock
 * timeout: mark it, for the worker to publish (deadlock_publish.c), and
 * wake the worker.  Marked once; returns false when the entry no longer
 * waits.
 */
bool
zklock_channel_mark_long_wait(int idx, uint32 generation)
{
	ZkLockEntry *e;
	bool		waiting;
	int			wake_procno = -1;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	e = channel_entry(idx);
	waiting = channel_is(idx, generation, ZKE_REQUESTED);
	if (waiting && !e->long_wait)
	{
		e->long_wait = true;
		pg_atomic_fetch_add_u64(&zklock_shared->long_wait_marks, 1);
		wake_procno = channel_worker_procno_locked();
	}
	channel_unlock_and_wake(wake_procno);
	return waiting;
}

/*
 * A deadlock's victim withdraws its request, but only if it still waits
 * (REQUESTED), in one locked section: a grant that came first wins, and
 * the caller goes on with its lock (returns false).  Never raises.
 */
bool
zklock_channel_withdraw_waiting(int idx, uint32 generation)
{
	bool		waiting;
	int			wake_procno = -1;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	waiting = channel_is(idx, generation, ZKE_REQUESTED);
	if (waiting)
	{
		zklock_channel_set_releasing(idx);
		zklock_channel_enqueue(idx);
		wake_procno = channel_worker_procno_locked();
	}
	channel_unlock_and_wake(wake_procno);
	return waiting;
}

/* ---- worker side ---- */

/*
 * Next queued entry for the worker, or -1.  Caller holds the lock.  An
 * entry may come out freed or reused since it was queued: the worker takes
 * it by its state and generation now (zklock_channel_take).
 */
int
zklock_channel_dequeue(void)
{
	int			idx;

	if (zklock_shared->queue_count == 0)
		return -1;
	idx = zklock_shared->queue[zklock_shared->queue_head];
	zklock_shared->queue_head = (zklock_shared->queue_head + 1) %
		zklock_shared->nentries;
	zklock_shared->queue_count--;
	channel_entry(idx)->queued = false;
	return idx;
}

/*
 * Take a dequeued entry: its state and generation, and, if it is
 * REQUESTED, a copy of the request.
 */
ZkEntryState
zklock_channel_take(int idx, ZkChannelRequest *req, uint32 *generation)
{
	ZkLockEntry *e;
	ZkEntryState state;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	e = channel_entry(idx);
	state = e->state;
	*generation = e->generation;
	if (state == ZKE_REQUESTED)
	{
		req->kind = e->kind;
		req->mode = e->mode;
		req->persistent = e->persistent;
		req->max_holders = e->max_holders;
		strlcpy(req->resource, e->resource, sizeof(req->resource));
		strlcpy(req->data, e->data, sizeof(req->data));
		strlcpy(req->node, e->node, sizeof(req->node));
		strlcpy(req->ignore_node, e->ignore_node, sizeof(req->ignore_node));
		req->list_handle = e->list_handle;
		req->list_size = e->list_size;
	}
	LWLockRelease(zklock_shared->lock);
	return state;
}

/*
 * Grant a REQUESTED entry: its node (named node, czxid token, of session
 * session_id, 0 for a persistent one) is first in line.  Returns false if
 * the request was withdrawn meanwhile: the caller deletes the node.
 */
bool
zklock_channel_grant(int idx, uint32 generation, int64 token,
					 int64 session_id, const char *node)
{
	ZkLockEntry *e;
	int			wake_procno = -1;
	bool		granted = false;
	TimestampTz now = GetCurrentTimestamp();

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	e = channel_entry(idx);
	if (channel_is(idx, generation, ZKE_REQUESTED))
	{
		e->state = ZKE_GRANTED;
		e->token = token;
		e->session_id = session_id;
		e->granted_at = now;
		strlcpy(e->node, node, sizeof(e->node));
		zklock_shared->n_granted++;
		wake_procno = e->owner_procno;
		granted = true;
	}
	channel_unlock_and_wake(wake_procno);
	return granted;
}

/*
 * A REQUESTED entry waits behind another node: its own node and the one it
 * watches, for zk_lock_waits (status.c); the first call sets since when.
 */
void
zklock_channel_waiting(int idx, uint32 generation, const char *node,
					   const char *behind)
{
	ZkLockEntry *e;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	e = channel_entry(idx);
	if (channel_is(idx, generation, ZKE_REQUESTED))
	{
		if (e->waiting_since == 0)
			e->waiting_since = GetCurrentTimestamp();
		strlcpy(e->wait_node, node, sizeof(e->wait_node));
		strlcpy(e->waits_behind, behind, sizeof(e->waits_behind));
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * A try-lock was not granted; its node is already deleted.  A withdrawn
 * request is left to its release (the worker has it queued).
 */
void
zklock_channel_not_granted(int idx, uint32 generation)
{
	int			wake_procno = -1;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (channel_is(idx, generation, ZKE_REQUESTED))
	{
		channel_entry(idx)->state = ZKE_NOT_GRANTED;
		zklock_shared->n_not_granted++;
		wake_procno = channel_entry(idx)->owner_procno;
	}
	channel_unlock_and_wake(wake_procno);
}

/*
 * A request failed; no node of it is left (or its deletion is the worker's
 * business).  Counted in zk_lock_status.failed if counted (a listing's
 * own failure is not, as before).  A withdrawn request is freed.
 */
void
zklock_channel_fail(int idx, uint32 generation, int sqlstate,
					const char *msg, bool counted)
{
	ZkLockEntry *e;
	int			wake_procno = -1;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	e = channel_entry(idx);
	if (channel_is(idx, generation, ZKE_REQUESTED))
	{
		e->state = ZKE_FAILED;
		e->sqlstate = sqlstate;
		strlcpy(e->error, msg, sizeof(e->error));
		if (counted)
			zklock_shared->n_failed++;
		wake_procno = e->owner_procno;
	}
	else if (channel_is(idx, generation, ZKE_RELEASING))
	{
		wake_procno = channel_freed_wake(idx);
		zklock_channel_free(idx);
	}
	channel_unlock_and_wake(wake_procno);
}

/*
 * An administrative request or a listing is done: token (an admin
 * request: whether the node was found), list_needed (a listing: the size
 * of its result).  A withdrawn request is freed.
 */
void
zklock_channel_done(int idx, uint32 generation, int64 token,
					Size list_needed)
{
	ZkLockEntry *e;
	int			wake_procno = -1;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	e = channel_entry(idx);
	if (channel_is(idx, generation, ZKE_REQUESTED))
	{
		e->state = ZKE_DONE;
		e->token = token;
		e->list_needed = list_needed;
		wake_procno = e->owner_procno;
	}
	else if (channel_is(idx, generation, ZKE_RELEASING))
	{
		wake_procno = channel_freed_wake(idx);
		zklock_channel_free(idx);
	}
	channel_unlock_and_wake(wake_procno);
}

/* GRANTED -> LOST, as below.  Caller holds the lock. */
static bool
channel_mark_lost(int idx, uint32 generation, int *owner_pid)
{
	ZkLockEntry *e = channel_entry(idx);

	if (!channel_is(idx, generation, ZKE_GRANTED))
		return false;
	e->state = ZKE_LOST;
	zklock_shared->n_lost++;
	zklock_stats_count(e->resource, e->mode, ZKLOCK_STAT_LOST);
	channel_wake_owner(e);
	if (owner_pid)
		*owner_pid = e->owner_pid;
	return true;
}

/*
 * A GRANTED entry's node is gone without the backend having released it:
 * mark it LOST.  Returns whether it did, and the owner's pid in *owner_pid
 * (if not NULL).
 */
bool
zklock_channel_lost(int idx, uint32 generation, int *owner_pid)
{
	bool		lost;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	lost = channel_mark_lost(idx, generation, owner_pid);
	LWLockRelease(zklock_shared->lock);
	return lost;
}

/*
 * The session that held an entry's node is gone: a GRANTED entry is LOST
 * (as zklock_channel_lost), a RELEASING one is freed (its node went with
 * the session).
 */
bool
zklock_channel_session_lost(int idx, uint32 generation, int *owner_pid)
{
	bool		lost;
	int			wake_procno = -1;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	lost = channel_mark_lost(idx, generation, owner_pid);
	if (!lost && channel_is(idx, generation, ZKE_RELEASING) &&
		!zklock_channel_verdict_locked(idx, ZKLOCK_NOT_CONSUMED,
									   "the ZooKeeper session ended before its consume was sent"))
	{
		wake_procno = channel_freed_wake(idx);
		zklock_channel_free(idx);
	}
	channel_unlock_and_wake(wake_procno);
	return lost;
}

/* A RELEASING entry's node is known gone: free the entry */
void
zklock_channel_released(int idx, uint32 generation)
{
	int			wake_procno = -1;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (channel_is(idx, generation, ZKE_RELEASING) &&
		!zklock_channel_verdict_locked(idx, ZKLOCK_NOT_CONSUMED,
									   "its hold was gone before its consume was sent"))
	{
		wake_procno = channel_freed_wake(idx);
		zklock_channel_free(idx);
	}
	channel_unlock_and_wake(wake_procno);
}

/*
 * The worker stops, or a new one starts after one that stopped: every
 * request fails with why (which starts with ZKLOCK_WORKER_GONE), every
 * GRANTED entry is LOST and every RELEASING one freed -- the session that
 * held their nodes is being closed.  Caller holds the lock exclusively
 * (with the lease and the session state, changed in the same section).
 */
void
zklock_channel_worker_gone(const char *why)
{
	for (int i = 0; i < zklock_shared->nentries; i++)
	{
		ZkLockEntry *e = channel_entry(i);

		switch (e->state)
		{
			case ZKE_REQUESTED:
				e->state = ZKE_FAILED;
				e->sqlstate = ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
				strlcpy(e->error, why, sizeof(e->error));
				channel_wake_owner(e);
				break;
			case ZKE_GRANTED:
				(void) channel_mark_lost(i, e->generation, NULL);
				break;
			case ZKE_RELEASING:
				if (zklock_channel_verdict_locked(i, ZKLOCK_CONSUME_UNKNOWN, why))
					break;		/* a consume's COMMIT: it frees it */
				if (zklock_channel_full_slot(i) >= 0)
					SetLatch(ZKLOCK_PROC_LATCH(e->count_slot));
				zklock_channel_free(i);
				break;
			default:
				break;
		}
	}
}

/*
 * Empty the work queue: a new worker finds every request of the old one
 * ended by zklock_channel_worker_gone.  Caller holds the lock exclusively.
 */
void
zklock_channel_clear_queue(void)
{
	zklock_shared->queue_count = 0;
	zklock_shared->queue_head = 0;
	for (int i = 0; i < zklock_shared->nentries; i++)
		channel_entry(i)->queued = false;
}
