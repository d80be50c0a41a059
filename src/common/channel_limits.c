/*-------------------------------------------------------------------------
 *
 * channel_limits.c
 *		The request channel's free list and its limits: an entry's
 *		allocation, counted against the backend slot that asks for it, and
 *		its free; and a consume's verdict, which moves a RELEASING
 *		entry to DONE (channel_consume.c).  Part of the channel
 *		(channel.c), which calls it for every entry it takes or frees.
 *
 * Limits: every entry that is not FREE counts against the backend slot
 * (PGPROC number) that allocated it, until it is freed -- also while it is
 * RELEASING after its backend has exited, so that a new backend in the
 * same slot inherits the count and a connect-lock-exit loop cannot fill the
 * table.  A lock request is refused when its slot has
 * zklock.max_locks_per_backend entries; an administrative request (LIST,
 * FORCE_DELETE, REVOKE) may go ZKLOCK_ADMIN_PER_BACKEND beyond that, and
 * only administrative requests may take the last ZKLOCK_ADMIN_RESERVE free
 * entries, so that zk_locks and zk_lock_force_release work when the table
 * is full.
 *
 * A slot that is full only because some of its entries are RELEASING (the
 * backend is done with them, the worker has not deleted their nodes yet)
 * is draining: zklock_channel_submit answers ZKLOCK_ALLOC_BACKEND_DRAINING,
 * and the backend waits for the worker, at most zklock.connect_timeout
 * (wait.c's submit_request); the worker's free of an entry of a full slot
 * sets that slot's latch (channel.c).  A slot's RELEASING entries are
 * counted (slot_releasing, beside slot_entries), not scanned for.
 *
 * Runs in every process that uses the channel: a backend's submit
 * allocates, and whichever side ends an entry frees it (channel.c says
 * who may when); the postmaster links the free list at startup
 * (zklock_channel_init, from shmem.c).  Locking: zklock_shared->lock
 * guards the free list, the per-slot counts and the entries' "lock"
 * fields; zklock_channel_alloc and zklock_channel_free are called with it
 * held exclusively, and take no lock themselves.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/latch.h"
#include "storage/proc.h"

#include "channel.h"
#include "channel_int.h"
#include "settings.h"
#include "shmem.h"
#include "zklock.h"

/* Link every entry into the free list.  At startup, on a zeroed table. */
void
zklock_channel_init(void)
{
	int			n = zklock_shared->nentries;

	for (int i = 0; i < n; i++)
	{
		Assert(zklock_shared->entries[i].state == ZKE_FREE);
		zklock_shared->entries[i].next_free = (i + 1 < n) ? i + 1 : -1;
		zklock_shared->entries[i].count_slot = -1;
	}
	zklock_shared->free_head = n > 0 ? 0 : -1;
	zklock_shared->nfree = n;
	pg_atomic_init_u64(&zklock_shared->long_wait_marks, 0);
}

static bool
channel_is_admin_kind(ZkEntryKind kind)
{
	return kind == ZKR_LIST || kind == ZKR_FORCE_DELETE || kind == ZKR_REVOKE ||
		kind == ZKR_ELECTION ||	/* election */
		kind == ZKR_WAITS;		/* a deadlock search, beside a lock's wait */
}

/*
 * Take a free entry for a request of this kind, counted against backend
 * slot "slot" (its PGPROC number).  Returns ZKLOCK_ALLOC_BACKEND_FULL when
 * the slot has used its share (ZKLOCK_ALLOC_BACKEND_DRAINING when some of
 * it is still being removed), ZKLOCK_ALLOC_TABLE_FULL when the table has
 * no entry this kind of request may take (see "Limits" above).  Caller
 * holds the lock.
 */
int
zklock_channel_alloc(ZkEntryKind kind, int slot)
{
	int			idx = zklock_shared->free_head;
	bool		admin = channel_is_admin_kind(kind);
	int			cap = zklock_max_locks_per_backend;
	ZkLockEntry *e;

	if (admin)
		cap += ZKLOCK_ADMIN_PER_BACKEND;
	if (zklock_shared->slot_entries[slot] >= cap)
		return zklock_channel_slot_releasing(slot) > 0 ?
			ZKLOCK_ALLOC_BACKEND_DRAINING : ZKLOCK_ALLOC_BACKEND_FULL;
	if (idx < 0 || (!admin && zklock_shared->nfree <= ZKLOCK_ADMIN_RESERVE))
		return ZKLOCK_ALLOC_TABLE_FULL;
	e = &zklock_shared->entries[idx];
	zklock_shared->free_head = e->next_free;
	zklock_shared->nfree--;
	zklock_shared->slot_entries[slot]++;
	e->count_slot = slot;
	e->next_free = -1;
	e->generation++;
	/* queued stays: an entry freed while queued keeps its one ring slot */
	e->token = 0;
	e->granted_at = 0;
	e->list_needed = 0;
	e->sqlstate = 0;
	e->node[0] = '\0';
	e->error[0] = '\0';
	e->long_wait = false;
	e->awaits_verdict = false;
	return idx;
}

/*
 * How many of slot's entries are RELEASING: counted as they become
 * RELEASING (zklock_channel_set_releasing) and are freed, not scanned (a
 * backend really full, retrying in a loop, would otherwise hold the lock
 * exclusively over the whole table at each try).  Caller holds the lock
 * (shared is enough).
 */
int
zklock_channel_slot_releasing(int slot)
{
	return zklock_shared->slot_releasing[slot];
}

/*
 * Entry idx (REQUESTED, GRANTED or LOST) goes to the worker for its node
 * to be deleted: RELEASING, counted against its slot's draining entries.
 * Caller holds the lock.
 */
void
zklock_channel_set_releasing(int idx)
{
	ZkLockEntry *e = &zklock_shared->entries[idx];

	Assert(e->state != ZKE_FREE && e->state != ZKE_RELEASING);
	e->state = ZKE_RELEASING;
	if (e->count_slot >= 0)
		zklock_shared->slot_releasing[e->count_slot]++;
}

/*
 * The slot to wake when entry idx is freed: its count's, when that slot is
 * full (its backend may wait for it to drain), else -1.  Caller holds the
 * lock.
 */
int
zklock_channel_full_slot(int idx)
{
	int			slot = zklock_shared->entries[idx].count_slot;

	if (slot >= 0 &&
		zklock_shared->slot_entries[slot] >= zklock_max_locks_per_backend)
		return slot;
	return -1;
}

/* Return an entry to the free list.  Caller holds the lock. */
void
zklock_channel_free(int idx)
{
	ZkLockEntry *e = &zklock_shared->entries[idx];

	Assert(e->state != ZKE_FREE);
	if (e->state == ZKE_RELEASING && e->count_slot >= 0)
	{
		Assert(zklock_shared->slot_releasing[e->count_slot] > 0);
		zklock_shared->slot_releasing[e->count_slot]--;
	}
	e->state = ZKE_FREE;
	e->generation++;			/* late replies can never match again */
	if (e->count_slot >= 0)
	{
		Assert(zklock_shared->slot_entries[e->count_slot] > 0);
		zklock_shared->slot_entries[e->count_slot]--;
		e->count_slot = -1;
	}
	e->next_free = zklock_shared->free_head;
	zklock_shared->free_head = idx;
	zklock_shared->nfree++;
}

/*
 * An entry that is RELEASING and awaits its verdict becomes DONE with it
 * (its owner woken), and true; else false (the caller frees it as before).
 * Caller holds the lock exclusively.
 */
bool
zklock_channel_verdict_locked(int idx, int verdict, const char *why)
{
	ZkLockEntry *e = &zklock_shared->entries[idx];

	if (e->state != ZKE_RELEASING || !e->awaits_verdict)
		return false;
	if (e->count_slot >= 0)
		zklock_shared->slot_releasing[e->count_slot]--;
	e->state = ZKE_DONE;
	e->token = verdict;
	strlcpy(e->error, why, sizeof(e->error));
	SetLatch(ZKLOCK_PROC_LATCH(e->owner_procno));
	return true;
}
