/*-------------------------------------------------------------------------
 *
 * wait_events.c
 *		The wait events zklock's waits show in pg_stat_activity.
 *
 * From PostgreSQL 17, an extension can name its wait events
 * (WaitEventExtensionNew), so that pg_stat_activity.wait_event says what
 * a backend waits for: "ZklockAcquire" (a lock another holder has),
 * "ZklockWorker" (the worker's answer to a request, or the worker itself
 * to start), "ZklockLease" (the commit fence, for an answer of ZooKeeper
 * that proves the session alive).  wait_event_type is "Extension".  On 15
 * and 16 each of them is the plain "Extension".  The worker's own waits
 * are not named (wait_events.h says why).
 *
 * Each process asks for the numbers once, on first use, and keeps them in
 * a static array: WaitEventExtensionNew finds a name already registered by
 * another process in shared memory, under its own lock.  The worker
 * registers all of them at its start, so that pg_wait_events lists them
 * from then on.  Nothing here is shared state of zklock's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/wait_event.h"

#include "compat.h"
#include "wait_events.h"

#ifdef ZKLOCK_HAVE_NAMED_WAIT_EVENTS

static const char *const wait_event_names[ZKLOCK_WAIT_EVENT_COUNT] = {
	[ZKLOCK_WAIT_ACQUIRE] = "ZklockAcquire",
	[ZKLOCK_WAIT_WORKER] = "ZklockWorker",
	[ZKLOCK_WAIT_LEASE] = "ZklockLease",
};

/* this process's numbers, 0 until asked for */
static uint32 wait_event_info[ZKLOCK_WAIT_EVENT_COUNT];

uint32
zklock_wait_event(ZkWaitEvent which)
{
	Assert(which >= 0 && which < ZKLOCK_WAIT_EVENT_COUNT);
	if (wait_event_info[which] == 0)
		wait_event_info[which] = WaitEventExtensionNew(wait_event_names[which]);
	return wait_event_info[which];
}

/* Register every name now (the worker, at its start) */
void
zklock_wait_events_init(void)
{
	for (int i = 0; i < ZKLOCK_WAIT_EVENT_COUNT; i++)
		(void) zklock_wait_event((ZkWaitEvent) i);
}

#else							/* !ZKLOCK_HAVE_NAMED_WAIT_EVENTS */

uint32
zklock_wait_event(ZkWaitEvent which)
{
	return PG_WAIT_EXTENSION;
}

void
zklock_wait_events_init(void)
{
}

#endif							/* ZKLOCK_HAVE_NAMED_WAIT_EVENTS */
