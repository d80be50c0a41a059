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
 * The names are registered once, in the postmaster, when shared memory is
 * made (and made again after a crash): every process forked after inherits
 * the numbers in a static array, so no backend registers anything, and a
 * wait never takes the lock of the registry.  The registry holds 128 names
 * shared by every extension; when it is full, zklock's waits show as plain
 * "Extension" and the postmaster's log says why (a WARNING at start).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/lwlock.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "wait_events.h"

#ifdef ZKLOCK_HAVE_NAMED_WAIT_EVENTS

static const char *const wait_event_names[ZKLOCK_WAIT_EVENT_COUNT] = {
	[ZKLOCK_WAIT_ACQUIRE] = "ZklockAcquire",
	[ZKLOCK_WAIT_WORKER] = "ZklockWorker",
	[ZKLOCK_WAIT_LEASE] = "ZklockLease",
};

/* the numbers, set in the postmaster; 0: not registered */
static uint32 wait_event_info[ZKLOCK_WAIT_EVENT_COUNT];

uint32
zklock_wait_event(ZkWaitEvent which)
{
	Assert(which >= 0 && which < ZKLOCK_WAIT_EVENT_COUNT);
	return wait_event_info[which] != 0 ? wait_event_info[which] :
		PG_WAIT_EXTENSION;
}

/*
 * Register every name (the postmaster, at shared memory startup).  A full
 * registry is not an error of zklock's: the WARNING says so, and the waits
 * keep the plain event.  The registry's lock may be held when its ERROR is
 * raised; no transaction will release it here, so this does.
 */
void
zklock_wait_events_init(void)
{
	MemoryContext ctx = CurrentMemoryContext;

	memset(wait_event_info, 0, sizeof(wait_event_info));
	PG_TRY();
	{
		for (int i = 0; i < ZKLOCK_WAIT_EVENT_COUNT; i++)
			wait_event_info[i] = WaitEventExtensionNew(wait_event_names[i]);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(ctx);
		edata = CopyErrorData();
		FlushErrorState();
		LWLockReleaseAll();
		memset(wait_event_info, 0, sizeof(wait_event_info));
		ereport(WARNING,
				(errmsg("zklock could not name its wait events: %s",
						edata->message),
				 errdetail("zklock's waits show as wait event \"Extension\" in pg_stat_activity.")));
		FreeErrorData(edata);
	}
	PG_END_TRY();
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
