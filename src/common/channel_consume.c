/*-------------------------------------------------------------------------
 *
 * channel_consume.c
 *		A committed queue take's consume and its verdict (issue 31): the
 *		part of the channel (channel.c's rules) that lets a COMMIT tell
 *		"consumed" from "freed for another reason" (doc/design.md "Queues").
 *
 * A take's COMMIT gives its GRANTED entry back with "consume=1" in its data
 * and awaits_verdict set, in one locked section (zklock_channel_consume).
 * The worker owns it then, RELEASING, as any withdrawn entry.  Wherever the
 * worker (or a worker's stop) would free it, an entry that awaits its
 * verdict becomes DONE instead, with the verdict (ZkConsumeVerdict) in its
 * token and the reason in its error, and its owner's latch set
 * (zklock_channel_verdict_locked, in channel_limits.c, which channel.c
 * calls too: the consume's end, queue_release.c; a
 * session lost before the consume was sent, channel.c's
 * zklock_channel_session_lost; the worker's stop, _worker_gone; any other
 * release, _released, which says "not consumed").  The owner reads the
 * verdict and frees the entry (zklock_channel_take_verdict).  An owner that
 * gives up waiting (its bound) clears awaits_verdict under the lock while
 * the entry is still RELEASING: the worker then frees it as before, and
 * nobody is left to collect a DONE entry.  The owner waits from its
 * withdrawal to its verdict or its give-up within one call of its COMMIT
 * (interrupts held), so no DONE entry outlives it.
 *
 * Locking: every function here takes zklock_shared->lock exclusively
 * itself (channel_limits.c's zklock_channel_verdict_locked is called with
 * it held).
 * awaits_verdict is a "lock" field (zklock.h): written by the owning
 * backend only, under the lock; reset at each allocation.
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
#include "shmem.h"
#include "zklock.h"

static inline bool
consume_is(ZkLockEntry *e, uint32 generation, ZkEntryState state)
{
	return e->generation == generation && e->state == state;
}

/*
 * Backend side, at COMMIT: give a GRANTED take back with data (its
 * "consume=1") and await the consume's verdict.  Returns the state found:
 * only GRANTED was given back; the caller withdraws anything else (LOST)
 * itself.  Wakes the worker.  Never raises an ERROR.
 */
ZkEntryState
zklock_channel_consume(int idx, uint32 generation, const char *data)
{
	ZkLockEntry *e = &zklock_shared->entries[idx];
	ZkEntryState state = ZKE_FREE;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (e->generation == generation)
		state = e->state;
	if (state == ZKE_GRANTED)
	{
		strlcpy(e->data, data, sizeof(e->data));
		e->data_version++;
		e->awaits_verdict = true;
		zklock_channel_set_releasing(idx);
		zklock_channel_enqueue(idx);
	}
	LWLockRelease(zklock_shared->lock);
	if (state == ZKE_GRANTED)
		zklock_channel_wake_worker();
	return state;
}

/*
 * Backend side: the consume's verdict (ZkConsumeVerdict), its reason in
 * why, the entry freed; -1 while the worker still owns it (RELEASING).
 * give_up: the caller waits no longer; a RELEASING entry is then left to
 * the worker to free, and the verdict is ZKLOCK_CONSUME_UNKNOWN.  An entry
 * found neither RELEASING nor DONE (cannot happen) is unknown too.
 */
int
zklock_channel_take_verdict(int idx, uint32 generation, bool give_up,
							char *why, Size whylen)
{
	ZkLockEntry *e = &zklock_shared->entries[idx];
	int			verdict = ZKLOCK_CONSUME_UNKNOWN;

	why[0] = '\0';
	/* the 10 ms poll looks under the lock shared, as zklock_channel_state */
	if (!give_up)
	{
		bool		pending;

		LWLockAcquire(zklock_shared->lock, LW_SHARED);
		pending = consume_is(e, generation, ZKE_RELEASING);
		LWLockRelease(zklock_shared->lock);
		if (pending)
			return -1;
	}
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (consume_is(e, generation, ZKE_DONE) && e->awaits_verdict)
	{
		verdict = (int) e->token;
		strlcpy(why, e->error, whylen);
		zklock_channel_free(idx);
	}
	else if (consume_is(e, generation, ZKE_RELEASING))
	{
		if (give_up)
			e->awaits_verdict = false;
		else
			verdict = -1;
	}
	LWLockRelease(zklock_shared->lock);
	return verdict;
}

/*
 * Worker side: a committed take's consume has ended, with verdict (why:
 * the reason, for a verdict other than consumed).  Its entry goes to the
 * COMMIT that waits for it, else it is freed as any release.
 */
void
zklock_channel_consume_end(int idx, uint32 generation, int verdict,
						   const char *why)
{
	bool		done;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	done = consume_is(&zklock_shared->entries[idx], generation,
					  ZKE_RELEASING) &&
		zklock_channel_verdict_locked(idx, verdict, why);
	LWLockRelease(zklock_shared->lock);
	if (!done)
		zklock_channel_released(idx, generation);
}
