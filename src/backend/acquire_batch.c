/*-------------------------------------------------------------------------
 *
 * acquire_batch.c
 *		The fast path of an acquisition of several steps (a resource with
 *		its parents, a lock set): every node this backend does not hold yet
 *		asked for at once, as try-locks, in one round trip.
 *
 * acquire.c calls zklock_take_at_once before it takes its steps one by one
 * (take_steps).  The requests are submitted without waking the worker
 * (zklock_submit_batched), which is woken once when all are in, so that
 * it pipelines them; their answers are waited for under the caller's
 * timeout and lock_timeout, while connected only.  If all are granted, the
 * local locks are entered (local_locks.c) with no holds yet, and acquire.c
 * adds the holds or, for a lock it did not take after all, gives it back
 * (forget_unheld).  Otherwise every node is given back and acquire.c takes
 * the steps one by one, waiting in order: queueing for several nodes at
 * once could deadlock, trying them cannot.
 *
 * Runs in a backend, in the SQL call that takes the locks.  It holds no
 * LWLock itself: its requests and their answers go through channel.c,
 * which takes zklock_shared->lock.  Until its locks are entered, wait.c
 * keeps the batch's requests (zklock_withdraw_batch, zklock_forget_batch)
 * so that an error, a cancel or the exit callback gives them back.  The
 * DROP EXTENSION guard (guard.c), begun by a session-level acquisition,
 * ends once the batch is submitted.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "backend_int.h"
#include "channel.h"
#include "resource.h"
#include "settings.h"
#include "stats.h"
#include "zklock.h"

/*
 * A batch sent at once (zklock_take_at_once): the steps it asks for, by their
 * positions, and each one's request (entry and generation).  wait.c keeps
 * the requests too, for the exit callback (zklock_withdraw_batch).
 */
typedef struct StepBatch
{
	int			n;
	int			step_of[ZKLOCK_MAX_BATCH];
	int			idx[ZKLOCK_MAX_BATCH];
	uint32		gen[ZKLOCK_MAX_BATCH];
} StepBatch;

/*
 * The steps zklock_take_at_once asks for, by their positions (step_of[]): every
 * resource this backend does not hold yet, once.  Returns their number, or
 * 0 when the fast path does not apply.
 */
static int
batch_steps(LockStep *steps, int nsteps, int *step_of)
{
	int			n = 0;

	for (int i = 0; i < nsteps; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (zklock_held_lock(steps[i].resource, NULL))
			continue;

		/*
		 * The steps of one resource are adjacent (a set's are sorted; one
		 * resource's parents are all different), so a resource asked for
		 * twice shows right after itself.
		 */
		if (i > 0 && strcmp(steps[i - 1].resource, steps[i].resource) == 0)
			continue;			/* stacks onto the earlier step's lock */
		if (steps[i].mode == ZKLOCK_SHARED &&
			zklock_naming_style(steps[i].resource) == ZKLOCK_NAMING_CURATOR_MUTEX)
			return 0;			/* take_step (acquire.c) says why */
		if (n == ZKLOCK_MAX_BATCH)
			return 0;
		step_of[n++] = i;
	}
	return n;
}

/*
 * Send the batch's requests (the steps of b->step_of[0 .. b->n)) as
 * try-locks, waking the worker once when all are in, and wait until each is
 * answered.  An error, while sending or waiting, gives the whole batch back.
 */
static void
ask_at_once(LockStep *steps, int nsteps, StepBatch *b, bool session,
			bool wait, TimestampTz deadline, int timeout_total)
{
	TimestampTz since;
	char	   *what;

	/* a batch cut short by an error while entering its locks */
	zklock_withdraw_batch();
	PG_TRY();
	{
		for (int k = 0; k < b->n; k++)
		{
			LockStep   *step = &steps[b->step_of[k]];
			ZkChannelRequest req;

			zklock_request_init(&req, ZKR_TRY_ACQUIRE);
			zklock_step_request(&req, step, session);
			b->idx[k] = zklock_submit_batched(&req, &b->gen[k]);
		}
		zklock_channel_wake_worker();
		zklock_extension_guard_end();

		/*
		 * Connected, every answer comes within a round trip; but the
		 * connection may go meanwhile, so the caller's timeout and
		 * lock_timeout apply here as they do to a wait.
		 */
		since = GetCurrentTimestamp();
		zklock_note_wait_start();
		what = psprintf("resource \"%s\"", steps[nsteps - 1].resource);
		if (wait && LockTimeout > 0)
			enable_timeout_after(LOCK_TIMEOUT, LockTimeout);
		for (;;)
		{
			int			waiting = -1;

			for (int k = 0; k < b->n; k++)
				if (zklock_channel_state(b->idx[k], b->gen[k]) ==
					ZKE_REQUESTED)
					waiting = k;
			if (waiting < 0)
				break;
			zklock_wait_a_while(b->idx[waiting], since, deadline, what,
								timeout_total, true);
		}
		if (wait && LockTimeout > 0)
			disable_timeout(LOCK_TIMEOUT, false);
	}
	PG_CATCH();
	{
		if (wait && LockTimeout > 0)
			disable_timeout(LOCK_TIMEOUT, false);
		zklock_withdraw_batch();
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/*
 * The batch's answers.  If all were granted, enter the locks (made[] gets
 * their keys) and return how many; otherwise give every node back, raise
 * the first failure (no connection, ...), or return -1 when some step
 * could not be granted now (a refused try, counted if is_try; else the
 * steps are taken, and counted, one by one; a try never waits: no
 * asked_at).
 */
static int
batch_verdict(LockStep *steps, StepBatch *b, LocalLockKey *made, bool is_try)
{
	bool		all_granted = true;
	int			failed = -1;
	int			nmade = 0;

	for (int k = 0; k < b->n; k++)
	{
		ZkEntryState state = zklock_channel_state(b->idx[k], b->gen[k]);

		if (state != ZKE_GRANTED)
			all_granted = false;
		if (state == ZKE_FAILED && failed < 0)
			failed = k;
		if (state == ZKE_NOT_GRANTED && is_try)
			zklock_stats_count(steps[b->step_of[k]].resource,
							   steps[b->step_of[k]].mode,
							   ZKLOCK_STAT_NOT_GRANTED);
	}

	if (!all_granted)
	{
		/* give every node back; a failure (no connection, ...) is raised */
		for (int k = 0; k < b->n; k++)
			if (k != failed)
				zklock_channel_withdraw(b->idx[k], b->gen[k]);
		zklock_forget_batch();
		if (failed >= 0)
			zklock_raise_failure(b->idx[failed], b->gen[failed],
								 psprintf("acquire zklock lock on resource \"%s\"",
										  steps[b->step_of[failed]].resource));
		return -1;
	}

	for (int k = 0; k < b->n; k++)
	{
		LockStep   *step = &steps[b->step_of[k]];

		made[nmade++] = zklock_enter_lock(step->resource, step->mode,
										  !step->implicit && step->parents,
										  b->idx[k], b->gen[k], 0)->key;
	}
	zklock_forget_batch();
	return nmade;
}

/*
 * The fast path for several steps (a resource with its parents, a lock
 * set): ask for every node this backend does not hold yet at once, as
 * try-locks, so that the worker pipelines them and an uncontended request
 * costs one round trip, not one per step.  If all are granted, the local
 * locks are entered with no holds yet (acquire.c's take_steps adds them) and made[]
 * gets their keys; otherwise every node is given back and the caller takes the
 * steps one by one, waiting in order -- queueing for several nodes at once
 * could deadlock, trying them cannot.  Returns the number of locks made (0
 * when the fast path does not apply), or -1 when some step could not be
 * granted now.
 */
int
zklock_take_at_once(LockStep *steps, int nsteps, LocalLockKey *made,
					bool session, bool wait, TimestampTz deadline,
					int timeout_total)
{
	StepBatch	b;
	bool		is_try = !wait;

	/*
	 * A zero timeout makes every step a try (acquire.c's take_step): the batch,
	 * tries already, waits for its answers as a try does, without the
	 * deadline that has passed by now.
	 */
	if (timeout_total == 0)
	{
		deadline = 0;
		wait = false;			/* for lock_timeout: not a real wait */
	}

	b.n = batch_steps(steps, nsteps, b.step_of);
	if (b.n < 2)
		return 0;				/* nothing to gain */

	/*
	 * Only while connected: then every answer comes within a round trip.
	 * Otherwise the requests would wait for the connection without the
	 * caller's timeout; the step-by-step path applies it.
	 */
	if (!zklock_channel_connected())
		return 0;

	ask_at_once(steps, nsteps, &b, session, wait, deadline, timeout_total);
	return batch_verdict(steps, &b, made, is_try);
}
