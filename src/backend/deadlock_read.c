/*-------------------------------------------------------------------------
 *
 * deadlock_read.c
 *		A deadlock search's read of every instance's published long waits
 *		(deadlock_publish.c publishes them; deadlock.c searches them), and
 *		of one resource's children (the victim's check that a cycle's
 *		edges learned from another instance's publication still stand).
 *
 * The waiting backend submits a ZKR_WAITS request beside its pending lock
 * request, with a DSM segment for the answer ("@<session hex>\n<data>\n"
 * per instance, as zk_locks' listing; with a resource named, that
 * resource's child node names, one a line), waits for it on its latch,
 * and copies the answer out.  It owns the request until read_done: its exit
 * callback (wait.c's zklock_withdraw_pending) withdraws it through
 * zklock_deadlock_withdraw_read, and an error while waiting withdraws it
 * before going on.  Shared state is changed only through channel.c.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/dsm.h"
#include "storage/latch.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "backend_int.h"
#include "channel.h"
#include "wait_events.h"
#include "zklock.h"

/*
 * The search's read (ZKR_WAITS), submitted beside the lock's pending
 * request: the exit callback (wait.c's zklock_withdraw_pending) withdraws
 * it too, until read_done.
 */
static int	read_idx = -1;
static uint32 read_gen = 0;

/* Never raises: a negative answer when no worker runs or no entry is free */
static int
submit_read(const ZkChannelRequest *req, uint32 *gen)
{
	int			idx = zklock_channel_submit(req, true, gen);

	if (idx < 0)
		return idx;
	read_idx = idx;
	read_gen = *gen;
	return idx;
}

static void
read_done(void)
{
	read_idx = -1;
}

/* Backend exit, FATAL included: withdraw the search's read.  Never raises. */
void
zklock_deadlock_withdraw_read(void)
{
	if (read_idx >= 0)
		zklock_channel_withdraw(read_idx, read_gen);
	read_idx = -1;
}

/*
 * The size of the segment a read starts with: the last answer's that did
 * not fit, so that a publication past 16 kB costs a second read (another
 * getChildren and getData per instance) once per backend, not every search
 * (a resource's children: their own)
 */
static Size read_size = 16 * 1024;
static Size children_size = 4 * 1024;

/*
 * A ZKR_WAITS read (resource "": every instance's long waits; else that
 * resource's children), in the current memory context; NULL when it could
 * not be read by the deadline, with *why saying why (left alone when the
 * answer outgrew three reads' segments).  Beside the lock's pending
 * request.  *read_sizep: the segment's size to start with, grown to what
 * an answer needed.
 */
static char *
read_rows(const char *resource, Size *read_sizep, TimestampTz deadline,
		  const char **why)
{
	Size		size = *read_sizep;

	for (int attempt = 0; attempt < 3; attempt++)
	{
		dsm_segment *seg = dsm_create(size, 0);
		ZkChannelRequest req;
		ZkChannelResult done;
		ZkEntryState state = ZKE_REQUESTED;
		uint32		gen;
		int			idx;
		char	   *result;

		memset(&req, 0, sizeof(req));
		req.kind = ZKR_WAITS;
		strlcpy(req.resource, resource, sizeof(req.resource));
		req.list_handle = dsm_segment_handle(seg);
		req.list_size = size;
		idx = submit_read(&req, &gen);
		if (idx < 0)
		{
			dsm_detach(seg);
			*why = "no zklock entry is free for it, or no worker runs";
			return NULL;
		}
		PG_TRY();
		{
			while ((state = zklock_channel_state(idx, gen)) == ZKE_REQUESTED &&
				   GetCurrentTimestamp() < deadline)
			{
				(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT |
								 WL_EXIT_ON_PM_DEATH, 50,
								 zklock_wait_event(ZKLOCK_WAIT_WORKER));
				ResetLatch(MyLatch);

				/*
				 * lock_timeout is the lock's wait's to report (wait.c says
				 * 08006 for it when ZooKeeper was unreachable all along):
				 * stop reading, and let that wait see it at once.
				 */
				if (get_timeout_indicator(LOCK_TIMEOUT, false))
				{
					SetLatch(MyLatch);
					break;
				}
				CHECK_FOR_INTERRUPTS();
			}
		}
		PG_CATCH();
		{
			zklock_channel_withdraw(idx, gen);
			read_done();
			PG_RE_THROW();
		}
		PG_END_TRY();
		if (state != ZKE_DONE)
		{
			if (state == ZKE_FAILED)
			{
				zklock_channel_collect(idx, gen, &done);
				*why = pstrdup(done.error);
			}
			else
			{
				zklock_channel_withdraw(idx, gen);
				*why = resource[0] ?
					"the children of a cycle's resource could not be read in time" :
					"the long waits could not be read in time";
			}
			read_done();
			dsm_detach(seg);
			return NULL;
		}
		zklock_channel_collect(idx, gen, &done);
		read_done();
		result = zklock_channel_take_rows(seg, &size, done.list_needed);
		if (result)
			return result;
		*read_sizep = Max(*read_sizep, size);
	}
	return NULL;
}

/*
 * Every instance's long waits, read by the worker; NULL when they could
 * not be read (*why says why, or is left alone when they outgrew three
 * reads' segments: no give-up is logged then, the next search tries again)
 */
char *
zklock_deadlock_read_waits(TimestampTz deadline, const char **why)
{
	return read_rows("", &read_size, deadline, why);
}

/*
 * The names of resource's child nodes, one a line ("" when it has none or
 * is gone), read by the worker with one getChildren; NULL when they could
 * not be read, as zklock_deadlock_read_waits
 */
char *
zklock_deadlock_read_children(const char *resource, TimestampTz deadline,
							  const char **why)
{
	return read_rows(resource, &children_size, deadline, why);
}
