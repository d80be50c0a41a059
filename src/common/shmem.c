/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		zklock's shared memory: the segment that holds the entry table,
 *		the commit windows (lease.c), the worker's work queue and the
 *		per-slot counts; and the requests of the elections (election.c)
 *		and of the statistics (stats.c).
 *
 * Only the segment's setup is here: its free list, its queue and every
 * change of an entry's state are channel.c's, where the locking rules are
 * stated.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/twophase.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"

#include "channel.h"
#include "shmem.h"
#include "compat.h"
#include "zklock.h"
#include "settings.h"
#include "election.h"
#include "stats.h"

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
	size = add_size(size, mul_size(zklock_nslots(), sizeof(pg_atomic_uint64)));
	size = add_size(size, mul_size(zklock_nslots(), sizeof(uint32)));
	size = add_size(size, mul_size(zklock_nentries(), sizeof(int)));
	size = add_size(size, mul_size(zklock_nslots(), sizeof(int)));
	size = add_size(size, mul_size(zklock_nslots(), sizeof(int)));
	return size;
}

void
zklock_shmem_request(void)
{
	RequestAddinShmemSpace(zklock_shmem_size());
	RequestAddinShmemSpace(zklock_election_shmem_size());
	RequestAddinShmemSpace(zklock_stats_shmem_size());
	RequestNamedLWLockTranche("zklock", 1);
	RequestNamedLWLockTranche("zklock_stats", 1);
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
		pg_atomic_init_u64(&zklock_shared->worker_alive_at, 0);
		zklock_shared->nslots = zklock_nslots();
	}

	/*
	 * The commit windows (8-byte aligned: an entry's size is a multiple of
	 * 8) and the groups they vouch for, the queue and the per-slot counts
	 * live behind the entries; every process sets its pointers.
	 */
	zklock_shared->commit_session =
		(pg_atomic_uint64 *) &zklock_shared->entries[n];
	zklock_shared->commit_groups =
		(uint32 *) &zklock_shared->commit_session[zklock_shared->nslots];
	zklock_shared->queue =
		(int *) &zklock_shared->commit_groups[zklock_shared->nslots];
	zklock_shared->slot_entries = zklock_shared->queue + n;
	zklock_shared->slot_releasing =
		zklock_shared->slot_entries + zklock_shared->nslots;
	if (!found)
	{
		for (int i = 0; i < zklock_shared->nslots; i++)
		{
			pg_atomic_init_u64(&zklock_shared->commit_session[i], 0);
			zklock_shared->commit_groups[i] = 0;
		}
		zklock_channel_init();	/* every entry FREE, on the free list */
	}
	zklock_election_shmem_init();
	zklock_stats_shmem_init();
	LWLockRelease(AddinShmemInitLock);
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
