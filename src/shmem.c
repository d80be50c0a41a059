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

#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"

#include "zklock.h"

ZkLockShared *zklock_shared = NULL;

static int
zklock_nentries(void)
{
	return MaxBackends * zklock_max_locks_per_backend;
}

static Size
zklock_shmem_size(void)
{
	Size		size;

	size = offsetof(ZkLockShared, entries);
	size = add_size(size, mul_size(zklock_nentries(), sizeof(ZkLockEntry)));
	size = add_size(size, mul_size(zklock_nentries(), sizeof(int)));
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
		}
		zklock_shared->free_head = n > 0 ? 0 : -1;
		pg_atomic_init_u64(&zklock_shared->worker_alive_at, 0);
	}
	/* the queue lives behind the entries; every process sets its pointer */
	zklock_shared->queue = (int *) &zklock_shared->entries[n];
	LWLockRelease(AddinShmemInitLock);
}

/* Take a free entry; -1 when the table is full.  Caller holds the lock. */
int
zklock_entry_alloc(void)
{
	int			idx = zklock_shared->free_head;
	ZkLockEntry *e;

	if (idx < 0)
		return -1;
	e = &zklock_shared->entries[idx];
	zklock_shared->free_head = e->next_free;
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
	e->next_free = zklock_shared->free_head;
	zklock_shared->free_head = idx;
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
