/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		zklock's shared memory: the entry table, its free list and the
 *		worker's work queue.
 *
 * The locking rules are stated in zklock.h.  Every function here that
 * touches the free list or the queue expects the caller to hold
 * zklock_shared->lock exclusively.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/twophase.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"

#include "shmem.h"
#include "compat.h"
#include "zklock.h"
#include "settings.h"

ZkLockShared *zklock_shared = NULL;

/* The worker numbers its requests with 24 bits of entry index */
#define ZKLOCK_MAX_ENTRIES		0xffffff

/*
 * The size of the entry table: zklock.max_locks, or by default
 * zklock.max_locks_per_backend times the number of backends, which no
 * backend can fill on its own; plus the administrators' reserve.
 */
static int
zklock_nentries(void)
{
	int64		n = zklock_max_locks;

	if (n == 0)
		n = (int64) MaxBackends * zklock_max_locks_per_backend;
	if (n > ZKLOCK_MAX_ENTRIES - ZKLOCK_ADMIN_RESERVE)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("zklock's shared entry table would have " INT64_FORMAT " entries, more than the %d it can have",
						n, ZKLOCK_MAX_ENTRIES - ZKLOCK_ADMIN_RESERVE),
				 errhint("Set zklock.max_locks, or lower zklock.max_locks_per_backend or max_connections.")));
	return (int) n + ZKLOCK_ADMIN_RESERVE;
}

/* Backend slots: every PGPROC number an entry's owner can have */
static int
zklock_nslots(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

static Size
zklock_shmem_size(void)
{
	Size		size;

	size = offsetof(ZkLockShared, entries);
	size = add_size(size, mul_size(zklock_nentries(), sizeof(ZkLockEntry)));
	size = add_size(size, mul_size(zklock_nentries(), sizeof(int)));
	size = add_size(size, mul_size(zklock_nslots(), sizeof(int)));
	return size;
}

void
zklock_shmem_request(void)
{
	RequestAddinShmemSpace(zklock_shmem_size());
	RequestNamedLWLockTranche("zklock", 1);
}

void
zklock_shmem_startup(void)
{
	bool		found;
	int			n = zklock_nentries();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	zklock_shared = ShmemInitStruct("zklock", zklock_shmem_size(), &found);
	if (!found)
	{
		memset(zklock_shared, 0, zklock_shmem_size());
		zklock_shared->lock = &(GetNamedLWLockTranche("zklock"))->lock;
		zklock_shared->nentries = n;
		zklock_shared->session_state = ZKS_STOPPED;
		for (int i = 0; i < n; i++)
		{
			zklock_shared->entries[i].state = ZKE_FREE;
			zklock_shared->entries[i].next_free = (i + 1 < n) ? i + 1 : -1;
			zklock_shared->entries[i].count_slot = -1;
		}
		zklock_shared->free_head = n > 0 ? 0 : -1;
		pg_atomic_init_u64(&zklock_shared->worker_alive_at, 0);
		zklock_shared->nfree = n;
		zklock_shared->nslots = zklock_nslots();
	}

	/*
	 * The queue and the per-slot counts live behind the entries; every
	 * process sets its pointers.
	 */
	zklock_shared->queue = (int *) &zklock_shared->entries[n];
	zklock_shared->slot_entries = zklock_shared->queue + n;
	LWLockRelease(AddinShmemInitLock);
}

static bool
is_admin_kind(ZkEntryKind kind)
{
	return kind == ZKR_LIST || kind == ZKR_FORCE_DELETE || kind == ZKR_REVOKE;
}

/*
 * Take a free entry for a request of this kind, counted against backend
 * slot "slot" (its PGPROC number).  Returns ZKLOCK_ALLOC_BACKEND_FULL when
 * the slot has used its share, ZKLOCK_ALLOC_TABLE_FULL when the table has
 * no entry this kind of request may take (see "Limits" in zklock.h).
 * Caller holds the lock.
 */
int
zklock_entry_alloc(ZkEntryKind kind, int slot)
{
	int			idx = zklock_shared->free_head;
	bool		admin = is_admin_kind(kind);
	int			cap = zklock_max_locks_per_backend;
	ZkLockEntry *e;

	if (slot < 0 || slot >= zklock_shared->nslots)
		elog(ERROR, "zklock: backend slot %d out of range", slot);
	if (admin)
		cap += ZKLOCK_ADMIN_PER_BACKEND;
	if (zklock_shared->slot_entries[slot] >= cap)
		return ZKLOCK_ALLOC_BACKEND_FULL;
	if (idx < 0 || (!admin && zklock_shared->nfree <= ZKLOCK_ADMIN_RESERVE))
		return ZKLOCK_ALLOC_TABLE_FULL;
	e = &zklock_shared->entries[idx];
	zklock_shared->free_head = e->next_free;
	zklock_shared->nfree--;
	zklock_shared->slot_entries[slot]++;
	e->count_slot = slot;
	e->next_free = -1;
	e->generation++;
	e->queued = false;
	e->token = 0;
	e->granted_at = 0;
	e->list_needed = 0;
	e->sqlstate = 0;
	e->node[0] = '\0';
	e->error[0] = '\0';
	return idx;
}

/* Return an entry to the free list.  Caller holds the lock. */
void
zklock_entry_free(int idx)
{
	ZkLockEntry *e = &zklock_shared->entries[idx];

	Assert(e->state != ZKE_FREE);
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
 * Put an entry in the worker's queue, once.  The ring holds every entry at
 * most once, so it cannot overflow.  Caller holds the lock.
 */
void
zklock_enqueue(int idx)
{
	ZkLockEntry *e = &zklock_shared->entries[idx];
	int			n = zklock_shared->nentries;

	if (e->queued)
		return;
	e->queued = true;
	zklock_shared->queue[(zklock_shared->queue_head +
						  zklock_shared->queue_count) % n] = idx;
	zklock_shared->queue_count++;
}

/* Next entry for the worker, or -1.  Caller holds the lock. */
int
zklock_dequeue(void)
{
	int			idx;

	if (zklock_shared->queue_count == 0)
		return -1;
	idx = zklock_shared->queue[zklock_shared->queue_head];
	zklock_shared->queue_head = (zklock_shared->queue_head + 1) %
		zklock_shared->nentries;
	zklock_shared->queue_count--;
	zklock_shared->entries[idx].queued = false;
	return idx;
}

/* Set the worker's latch, if a worker runs.  Caller holds the lock. */
void
zklock_wake_worker(void)
{
	if (zklock_shared->worker_pid != 0)
		SetLatch(ZKLOCK_PROC_LATCH(zklock_shared->worker_procno));
}

/* Set the latch of an entry's owner.  Caller holds the lock. */
void
zklock_wake_owner(ZkLockEntry *entry)
{
	SetLatch(ZKLOCK_PROC_LATCH(entry->owner_procno));
}

const char *
zklock_session_state_name(ZkSessionState state)
{
	switch (state)
	{
		case ZKS_STOPPED:
			return "stopped";
		case ZKS_CONNECTING:
			return "connecting";
		case ZKS_CONNECTED:
			return "connected";
		case ZKS_EXPIRED:
			return "expired";
		case ZKS_AUTH_FAILED:
			return "auth_failed";
	}
	return "unknown";
}

/*
 * The name this instance gives itself in lock node data: zklock.node_name,
 * or host name and port.
 */
const char *
zklock_instance_name(void)
{
	static char name[128];

	if (zklock_node_name && zklock_node_name[0])
		return zklock_node_name;
	if (name[0] == '\0')
	{
		char		host[64];

		if (gethostname(host, sizeof(host)) != 0)
			strlcpy(host, "localhost", sizeof(host));
		host[sizeof(host) - 1] = '\0';
		snprintf(name, sizeof(name), "%s:%d", host, PostPortNumber);
	}
	return name;
}
