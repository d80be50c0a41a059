/*-------------------------------------------------------------------------
 *
 * stats.c
 *		Per-resource, per-mode contention statistics of this instance:
 *		the shared hash that holds them, the calls that count (stats.h),
 *		and the copy and the reset that status.c's zk_lock_stats() and
 *		zk_lock_stats_reset() are made of.
 *
 * Modeled on pg_stat_statements.  A fixed shared hash of at most
 * zklock.stats_max entries, one per (resource, mode), sized at server
 * start; when it is full, the least used entries give way: each entry's
 * usage grows by one at each event counted, all usages decay by 1 % at
 * each eviction, and an eviction removes the 5 % least used (at least 10).
 * A new entry starts with the median usage of the last eviction, so that
 * it is not the first to go again.
 *
 * What is counted, by whom (never with a ZooKeeper round trip of its own):
 *	- acquisitions: lock nodes granted to a backend of this instance (a
 *	  lock a backend holds already, taken again, costs nothing and is not
 *	  counted); each parent's implicit SHARED lock is a node, counted under
 *	  the parent's name.  granted_at_once: those granted without waiting
 *	  behind another node (acquire.c, from the worker's word: the entry's
 *	  waiting_since).
 *	- waited: requests that waited behind another node, granted or not; a
 *	  request that ended without a grant (timeout, cancel, deadlock) is
 *	  counted as having waited.  total_wait_time and max_wait_time (ms):
 *	  from the request until its end, for these.
 *	- not_granted: try-locks refused at once; timeouts: 55P03 (the call's
 *	  timeout, lock_timeout); cancels: 57014 (query cancel,
 *	  statement_timeout); deadlocks: counted by the deadlock detector
 *	  (zklock_stats_count); lost: counted by the worker when it marks a
 *	  granted entry lost (channel.c).
 *	- total_held_time and max_held_time (ms): from the grant until the
 *	  backend gave the node back (release, transaction end, exit).  An
 *	  explicit lock counts when taken (request.c), with no held time: it
 *	  is nobody's once granted.
 *
 * Queues (1.9, zk_queue_stats) live in the same hash, under the same
 * lock, zklock.track_stats, zklock.stats_max and reset: a queue's row is
 * keyed (queue, ZKLOCK_STATS_QUEUE), its counters the ZkQueueCounters of
 * the entry's union, counted by the backend (backend/queue.c,
 * queue_put.c), never with a request of its own:
 *	- puts: an item in the queue: zk_queue_put_now's at its answer,
 *	  zk_queue_put's at its transaction's COMMIT;
 *	- takes: items held by a take; timeouts: takes that ended with no item
 *	  (a timeout, a try-take that found none); waits and wait_time (ms):
 *	  takes that had to wait (the worker's listing found no free item for
 *	  them: the entry's queue_waited; or ended with none after waiting),
 *	  from the request to the item or the timeout;
 *	- consumed: items held at a COMMIT; given_back: items held at an
 *	  ABORT, a ROLLBACK TO, the backend's exit (back in the queue: a
 *	  redelivery to come).
 * A take cancelled or failed (an ERROR) is not counted.
 *
 * Locking rules
 * -------------
 * StatsShared->lock (an LWLock, its own tranche "zklock_stats") guards the
 * hash table's membership: a lookup holds it shared, an insert, an
 * eviction and a reset hold it exclusively.  Each entry's counters are
 * guarded by the entry's spinlock (mutex), taken while the LWLock is held
 * (shared or exclusive); while the LWLock is held exclusively nobody else
 * touches any entry, so an eviction reads usages without the spinlocks.
 * The LWLock is taken after any other lock of zklock (the worker counts a
 * lost lock while it holds ZkLockShared->lock) and nothing is taken while
 * it is held: no lock order can cycle.  Nothing here raises an ERROR while
 * counting, and nothing allocates: an eviction sorts in an array of
 * zklock.stats_max pointers set aside in shared memory.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "resource.h"
#include "settings.h"
#include "shmem.h"
#include "stats.h"
#include "zklock.h"

#define STATS_DECAY			0.99	/* usages decay by this at an eviction */
#define STATS_EVICT_PERCENT	5		/* the share of entries an eviction
									 * removes */
#define STATS_EVICT_MIN		10

typedef struct StatsKey
{
	char		resource[ZKLOCK_MAX_RESOURCE_LEN + 1];
	int32		mode;			/* ZkLockMode */
} StatsKey;


typedef struct StatsEntry
{
	StatsKey	key;			/* hash key; must be first.  lock */
	slock_t		mutex;			/* guards usage and c */
	double		usage;			/* mutex: events counted, decayed at
								 * evictions */
	union
	{
		ZkStatsCounters lock;	/* a lock's (key.mode a ZkLockMode) */
		ZkQueueCounters queue;	/* a queue's (ZKLOCK_STATS_QUEUE) */
	}			c;				/* mutex (and the lock held, any mode) */
} StatsEntry;

typedef struct StatsShared
{
	LWLock	   *lock;			/* set at startup, then read only */
	double		median_usage;	/* lock (exclusive to write): new entries'
								 * usage */
	int64		evictions;		/* lock (exclusive) */
	TimestampTz reset_at;		/* lock (exclusive to write): the start or
								 * the last reset */
	StatsEntry *sort[FLEXIBLE_ARRAY_MEMBER];	/* lock (exclusive): an
												 * eviction's scratch */
} StatsShared;

/* A change to an entry's counters: what one call counts */
typedef struct StatsDelta
{
	ZkStatsCounters add;		/* added to the counters */
	double		wait_ms;		/* < 0: no wait to take the maximum of */
	double		held_ms;		/* < 0: no hold */
} StatsDelta;

static StatsShared *stats = NULL;
static HTAB *stats_hash = NULL;

static Size
stats_struct_size(void)
{
	return add_size(offsetof(StatsShared, sort),
					mul_size(zklock_stats_max, sizeof(StatsEntry *)));
}

/* The shared memory the statistics need (shmem.c asks for it) */
Size
zklock_stats_shmem_size(void)
{
	return add_size(MAXALIGN(stats_struct_size()),
					hash_estimate_size(zklock_stats_max, sizeof(StatsEntry)));
}

/*
 * Set up (or, in a process started later, find) the statistics.  Caller
 * holds AddinShmemInitLock.
 */
void
zklock_stats_shmem_init(void)
{
	bool		found;
	HASHCTL		info;

	stats = ShmemInitStruct("zklock stats", stats_struct_size(), &found);
	if (!found)
	{
		stats->lock = &(GetNamedLWLockTranche("zklock_stats"))->lock;
		stats->median_usage = 1.0;
		stats->evictions = 0;
		stats->reset_at = GetCurrentTimestamp();
	}
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(StatsKey);
	info.entrysize = sizeof(StatsEntry);
	stats_hash = ShmemInitHash("zklock stats hash",
							   zklock_stats_max, zklock_stats_max,
							   &info, HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
}

static int
usage_cmp(const void *a, const void *b)
{
	double		x = (*(StatsEntry *const *) a)->usage;
	double		y = (*(StatsEntry *const *) b)->usage;

	return (x > y) - (x < y);
}

/*
 * Make room: decay every usage, and remove the least used 5 % (at least
 * STATS_EVICT_MIN).  Caller holds the lock exclusively.
 */
static void
stats_evict(void)
{
	HASH_SEQ_STATUS seq;
	StatsEntry *e;
	int			n = 0;
	int			victims;

	hash_seq_init(&seq, stats_hash);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if (n < zklock_stats_max)
			stats->sort[n++] = e;
		e->usage *= STATS_DECAY;
	}
	if (n == 0)
		return;
	qsort(stats->sort, n, sizeof(StatsEntry *), usage_cmp);
	stats->median_usage = stats->sort[n / 2]->usage;
	victims = Max(STATS_EVICT_MIN, n * STATS_EVICT_PERCENT / 100);
	victims = Min(victims, n);
	for (int i = 0; i < victims; i++)
		hash_search(stats_hash, &stats->sort[i]->key, HASH_REMOVE, NULL);
	stats->evictions++;
}

/*
 * The entry of a key, made if need be (evicting when the table is full).
 * Caller holds the lock exclusively.  NULL only if the hash refuses (it
 * should not: there is room after an eviction).
 */
static StatsEntry *
stats_enter(const StatsKey *key)
{
	StatsEntry *e;
	bool		found;

	e = hash_search(stats_hash, key, HASH_FIND, NULL);
	if (e)
		return e;
	if (hash_get_num_entries(stats_hash) >= zklock_stats_max)
		stats_evict();
	e = hash_search(stats_hash, key, HASH_ENTER_NULL, &found);
	if (e && !found)
	{
		SpinLockInit(&e->mutex);
		memset(&e->c, 0, sizeof(e->c));
		e->usage = stats->median_usage;
	}
	return e;
}

static void
apply_delta(ZkStatsCounters *c, const StatsDelta *d)
{
	c->acquisitions += d->add.acquisitions;
	c->granted_at_once += d->add.granted_at_once;
	c->waited += d->add.waited;
	c->not_granted += d->add.not_granted;
	c->timeouts += d->add.timeouts;
	c->cancels += d->add.cancels;
	c->deadlocks += d->add.deadlocks;
	c->lost += d->add.lost;
	if (d->wait_ms >= 0)
	{
		c->total_wait_time += d->wait_ms;
		c->max_wait_time = Max(c->max_wait_time, d->wait_ms);
	}
	if (d->held_ms >= 0)
	{
		c->total_held_time += d->held_ms;
		c->max_held_time = Max(c->max_held_time, d->held_ms);
	}
}

/*
 * The entry of (name, mode), made if need be, with the lock held (shared,
 * or exclusively for a first event of a key, to make its entry): the
 * caller counts under the entry's spinlock, then releases the lock.  NULL
 * (the lock held too) only if the hash refuses.
 */
static StatsEntry *
stats_find(const char *name, int32 mode)
{
	StatsKey	key;
	StatsEntry *e;

	memset(&key, 0, sizeof(key));
	strlcpy(key.resource, name, sizeof(key.resource));
	key.mode = mode;

	LWLockAcquire(stats->lock, LW_SHARED);
	e = hash_search(stats_hash, &key, HASH_FIND, NULL);
	if (e == NULL)
	{
		LWLockRelease(stats->lock);
		LWLockAcquire(stats->lock, LW_EXCLUSIVE);
		e = stats_enter(&key);
	}
	return e;
}

/*
 * Add a delta to the counters of (resource, mode): one lookup under the
 * lock and the entry's spinlock.  Never raises.
 */
static void
stats_add(const char *resource, ZkLockMode mode, const StatsDelta *d)
{
	StatsEntry *e;

	if (!zklock_track_stats || stats == NULL)
		return;
	e = stats_find(resource, (int32) mode);
	if (e)
	{
		SpinLockAcquire(&e->mutex);
		apply_delta(&e->c.lock, d);
		e->usage += 1.0;
		SpinLockRelease(&e->mutex);
	}
	LWLockRelease(stats->lock);
}

/* Add to a queue's counters, as stats_add does.  Never raises. */
static void
stats_queue_add(const char *queue, const ZkQueueCounters *d)
{
	StatsEntry *e;

	if (!zklock_track_stats || stats == NULL)
		return;
	e = stats_find(queue, ZKLOCK_STATS_QUEUE);
	if (e)
	{
		ZkQueueCounters *c = &e->c.queue;

		SpinLockAcquire(&e->mutex);
		c->puts += d->puts;
		c->takes += d->takes;
		c->consumed += d->consumed;
		c->given_back += d->given_back;
		c->waits += d->waits;
		c->wait_time += d->wait_time;
		c->timeouts += d->timeouts;
		e->usage += 1.0;
		SpinLockRelease(&e->mutex);
	}
	LWLockRelease(stats->lock);
}

void
zklock_stats_queue_count(const char *queue, ZkQueueStatEvent event)
{
	ZkQueueCounters d;

	memset(&d, 0, sizeof(d));
	switch (event)
	{
		case ZKLOCK_QSTAT_PUT:
			d.puts = 1;
			break;
		case ZKLOCK_QSTAT_CONSUMED:
			d.consumed = 1;
			break;
		case ZKLOCK_QSTAT_GIVEN_BACK:
			d.given_back = 1;
			break;
	}
	stats_queue_add(queue, &d);
}

void
zklock_stats_queue_take(const char *queue, bool got, bool waited,
						double wait_ms)
{
	ZkQueueCounters d;

	memset(&d, 0, sizeof(d));
	if (got)
		d.takes = 1;
	else
		d.timeouts = 1;
	if (waited)
	{
		d.waits = 1;
		d.wait_time = wait_ms;
	}
	stats_queue_add(queue, &d);
}

static void
delta_init(StatsDelta *d)
{
	memset(d, 0, sizeof(*d));
	d->wait_ms = -1;
	d->held_ms = -1;
}

double
zklock_stats_ms_since(TimestampTz start)
{
	TimestampTz now = GetCurrentTimestamp();

	return now > start ? (double) (now - start) / 1000.0 : 0.0;
}

void
zklock_stats_granted(const char *resource, ZkLockMode mode, bool waited,
					 double wait_ms)
{
	StatsDelta	d;

	delta_init(&d);
	d.add.acquisitions = 1;
	if (waited)
	{
		d.add.waited = 1;
		d.wait_ms = wait_ms;
	}
	else
		d.add.granted_at_once = 1;
	stats_add(resource, mode, &d);
}

static void
delta_event(StatsDelta *d, ZkStatEvent event)
{
	switch (event)
	{
		case ZKLOCK_STAT_NOT_GRANTED:
			d->add.not_granted = 1;
			break;
		case ZKLOCK_STAT_TIMEOUT:
			d->add.timeouts = 1;
			break;
		case ZKLOCK_STAT_CANCEL:
			d->add.cancels = 1;
			break;
		case ZKLOCK_STAT_DEADLOCK:
			d->add.deadlocks = 1;
			break;
		case ZKLOCK_STAT_LOST:
			d->add.lost = 1;
			break;
	}
}

void
zklock_stats_wait_ended(const char *resource, ZkLockMode mode, int outcome,
						double wait_ms)
{
	StatsDelta	d;

	delta_init(&d);
	d.add.waited = 1;
	d.wait_ms = wait_ms;
	if (outcome >= 0)
		delta_event(&d, (ZkStatEvent) outcome);
	stats_add(resource, mode, &d);
}

void
zklock_stats_count(const char *resource, ZkLockMode mode, ZkStatEvent event)
{
	StatsDelta	d;

	delta_init(&d);
	delta_event(&d, event);
	stats_add(resource, mode, &d);
}

void
zklock_stats_released(const char *resource, ZkLockMode mode, double held_ms)
{
	StatsDelta	d;

	delta_init(&d);
	d.held_ms = held_ms;
	stats_add(resource, mode, &d);
}

/*
 * Every entry, copied under the lock (each entry's counters under its
 * spinlock) into a palloc'd array: the rows of zk_lock_stats (status.c).
 * The copy is palloc'd under the lock, as status.c's views do: an ERROR
 * releases the lock.  Returns the number of rows; 0 before shared memory
 * is set up.
 */
int
zklock_stats_copy(ZkStatsRow **rows_out)
{
	HASH_SEQ_STATUS seq;
	StatsEntry *e;
	ZkStatsRow *rows;
	int			nrows = 0;
	long		nmax;

	*rows_out = NULL;
	if (stats == NULL)
		return 0;
	LWLockAcquire(stats->lock, LW_SHARED);
	/* no entry comes or goes while the lock is held */
	nmax = hash_get_num_entries(stats_hash);
	rows = palloc(sizeof(ZkStatsRow) * Max(nmax, 1));
	hash_seq_init(&seq, stats_hash);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if (nrows == nmax)
		{
			hash_seq_term(&seq);
			break;
		}
		if (e->key.mode == ZKLOCK_STATS_QUEUE)
			continue;			/* zk_queue_stats' */
		strlcpy(rows[nrows].resource, e->key.resource,
				sizeof(rows[nrows].resource));
		rows[nrows].mode = (ZkLockMode) e->key.mode;
		SpinLockAcquire(&e->mutex);
		rows[nrows].c = e->c.lock;
		SpinLockRelease(&e->mutex);
		nrows++;
	}
	LWLockRelease(stats->lock);
	*rows_out = rows;
	return nrows;
}

/*
 * The queues' entries (zk_queue_stats, functions/queue.c), as
 * zklock_stats_copy; *reset_at: the start or the last reset
 */
int
zklock_stats_queue_copy(ZkQueueStatsRow **rows_out, TimestampTz *reset_at)
{
	HASH_SEQ_STATUS seq;
	StatsEntry *e;
	ZkQueueStatsRow *rows;
	int			nrows = 0;
	long		nmax;

	*rows_out = NULL;
	*reset_at = 0;
	if (stats == NULL)
		return 0;
	LWLockAcquire(stats->lock, LW_SHARED);
	*reset_at = stats->reset_at;
	nmax = hash_get_num_entries(stats_hash);
	rows = palloc(sizeof(ZkQueueStatsRow) * Max(nmax, 1));
	hash_seq_init(&seq, stats_hash);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if (nrows == nmax)
		{
			hash_seq_term(&seq);
			break;
		}
		if (e->key.mode != ZKLOCK_STATS_QUEUE)
			continue;
		strlcpy(rows[nrows].queue, e->key.resource, sizeof(rows[nrows].queue));
		SpinLockAcquire(&e->mutex);
		rows[nrows].c = e->c.queue;
		SpinLockRelease(&e->mutex);
		nrows++;
	}
	LWLockRelease(stats->lock);
	*rows_out = rows;
	return nrows;
}

/* Forget every entry, locks' and queues' (zk_lock_stats_reset, status.c) */
void
zklock_stats_reset(void)
{
	HASH_SEQ_STATUS seq;
	StatsEntry *e;

	if (stats == NULL)
		return;
	LWLockAcquire(stats->lock, LW_EXCLUSIVE);
	hash_seq_init(&seq, stats_hash);
	while ((e = hash_seq_search(&seq)) != NULL)
		hash_search(stats_hash, &e->key, HASH_REMOVE, NULL);
	stats->median_usage = 1.0;
	stats->reset_at = GetCurrentTimestamp();
	LWLockRelease(stats->lock);
}
