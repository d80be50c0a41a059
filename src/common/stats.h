/*-------------------------------------------------------------------------
 *
 * stats.h
 *		Per-resource, per-mode contention statistics of this instance
 *		(zk_lock_stats): the calls that count, one per outcome of an
 *		acquisition, one at a release, one for a lost lock.  stats.c states
 *		what each counts and the locking rules.
 *
 * Every call is cheap (one lookup in a shared hash and a spinlock), never
 * raises an ERROR, and does nothing while zklock.track_stats is off or
 * before shared memory is set up.  The mode is the lock's
 * (zklock_mode_name: 'exclusive', 'shared', 'semaphore').
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_STATS_H
#define ZKLOCK_STATS_H

#include "zklock.h"

/* One outcome of an acquisition, or what befell a held lock */
typedef enum ZkStatEvent
{
	ZKLOCK_STAT_NOT_GRANTED,	/* a try-lock refused at once */
	ZKLOCK_STAT_TIMEOUT,		/* the caller's timeout or lock_timeout */
	ZKLOCK_STAT_CANCEL,			/* query cancel, statement_timeout */
	ZKLOCK_STAT_DEADLOCK,		/* chosen as a deadlock's victim */
	ZKLOCK_STAT_LOST			/* a granted lock's node or session gone */
} ZkStatEvent;

/* The counters of one (resource, mode); see the file's header */
typedef struct ZkStatsCounters
{
	int64		acquisitions;
	int64		granted_at_once;
	int64		waited;
	int64		not_granted;
	double		total_wait_time;	/* ms */
	double		max_wait_time;	/* ms */
	int64		timeouts;
	int64		cancels;
	int64		deadlocks;
	int64		lost;
	double		total_held_time;	/* ms */
	double		max_held_time;	/* ms */
} ZkStatsCounters;

/*
 * The counters of one queue (1.9, zk_queue_stats), in the same hash as the
 * locks' (its key's mode ZKLOCK_STATS_QUEUE): see stats.c's header
 */
#define ZKLOCK_STATS_QUEUE	(-1)

typedef struct ZkQueueCounters
{
	int64		puts;
	int64		takes;
	int64		consumed;
	int64		given_back;
	int64		waits;
	double		wait_time;		/* ms */
	int64		timeouts;
} ZkQueueCounters;

/* What befell an item held: consumed at COMMIT, or given back */
typedef enum ZkQueueStatEvent
{
	ZKLOCK_QSTAT_PUT,
	ZKLOCK_QSTAT_CONSUMED,
	ZKLOCK_QSTAT_GIVEN_BACK
} ZkQueueStatEvent;

/* One row of zk_queue_stats */
typedef struct ZkQueueStatsRow
{
	char		queue[ZKLOCK_MAX_RESOURCE_LEN + 1];
	ZkQueueCounters c;
} ZkQueueStatsRow;

/* One row of zk_lock_stats: a (resource, mode) and its counters */
typedef struct ZkStatsRow
{
	char		resource[ZKLOCK_MAX_RESOURCE_LEN + 1];
	ZkLockMode	mode;
	ZkStatsCounters c;
} ZkStatsRow;

/* shared memory (shmem.c asks for it and sets it up) */
extern Size zklock_stats_shmem_size(void);
extern void zklock_stats_shmem_init(void);

/*
 * A lock node granted: at once (waited false), or after waiting wait_ms
 * (since the request was sent).
 */
extern void zklock_stats_granted(const char *resource, ZkLockMode mode,
								 bool waited, double wait_ms);

/*
 * A wait that ended without a grant, after wait_ms: a timeout, a cancel,
 * or (outcome -1) anything else (an error, a deadlock: the deadlock
 * detector counts its victim with zklock_stats_count).
 */
extern void zklock_stats_wait_ended(const char *resource, ZkLockMode mode,
									int outcome, double wait_ms);

/* One more of an event: a refused try, a timeout, a deadlock, a loss */
extern void zklock_stats_count(const char *resource, ZkLockMode mode,
							   ZkStatEvent event);

/* A lock released (its node given back) after held_ms */
extern void zklock_stats_released(const char *resource, ZkLockMode mode,
								  double held_ms);

/* A queue's put (in the queue), or an item held consumed or given back */
extern void zklock_stats_queue_count(const char *queue, ZkQueueStatEvent event);

/*
 * A take's end: an item held (got) or none (a timeout, a try-take that
 * found nothing); waited: it had to wait, for wait_ms
 */
extern void zklock_stats_queue_take(const char *queue, bool got, bool waited,
									double wait_ms);

/* zk_queue_stats (functions/queue.c): the queues' rows, the last reset */
extern int	zklock_stats_queue_copy(ZkQueueStatsRow **rows,
									TimestampTz *reset_at);

/* zk_lock_stats and zk_lock_stats_reset (status.c): copy, forget */
extern int	zklock_stats_copy(ZkStatsRow **rows);
extern void zklock_stats_reset(void);

/* The milliseconds from start to now, as the counters take them */
extern double zklock_stats_ms_since(TimestampTz start);

#endif							/* ZKLOCK_STATS_H */
