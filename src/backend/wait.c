/*-------------------------------------------------------------------------
 *
 * wait.c
 *		The backend's end of a request: submit it to the worker, wait for
 *		the answer, and raise the worker's error.
 *
 * A request goes through the request channel (channel.c), which alone
 * changes an entry's state: zklock_submit hands a request over, the wait
 * polls zklock_channel_state for the entry and generation it submitted,
 * and an entry this backend no longer wants goes back with
 * zklock_channel_withdraw (never raises).
 *
 * A wait is interruptible: query cancel, statement_timeout, lock_timeout
 * (armed here, since core arms it only around its own waits) and the
 * caller's timeout end it, and the request is withdrawn so that the worker
 * removes the waiter's node.  A FATAL (pg_terminate_backend) skips
 * PG_CATCH: the request being waited for is the pending one, which the
 * exit callback withdraws (zklock_withdraw_pending), as it withdraws a
 * batch submitted at once until the caller has taken it over
 * (zklock_withdraw_batch).  A worker that has not taken the request, or not
 * run, for zklock.connect_timeout, a client that has gone, and a wait that
 * ZooKeeper's unavailability ended each end the wait with their own error.
 * Before the request is submitted, a backend slot that is full only of
 * entries still being removed waits for the worker to free them, at most
 * zklock.connect_timeout, interruptibly (submit_request; nothing is in the
 * channel yet, so an interrupt leaves nothing behind), then 53400.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "backend_int.h"
#include "channel.h"
#include "compat.h"
#include "wait_events.h"
#include "zklock.h"
#include "settings.h"
#include "shmem.h"
#include "resource.h"
#include "lease.h"
#include "stats.h"
#include "failpoint.h"

/* the request this backend is waiting for, for the exit callback */
static int	pending_idx = -1;
static uint32 pending_gen = 0;

/* the requests of a batch submitted at once (acquire.c), likewise */
static int	nbatch = 0;
static int	batch_idx[ZKLOCK_MAX_BATCH];
static uint32 batch_gen[ZKLOCK_MAX_BATCH];

/* Start a request of this kind, in the backend's own memory */
void
zklock_request_init(ZkChannelRequest *req, ZkEntryKind kind)
{
	memset(req, 0, sizeof(*req));
	req->kind = kind;
}

/*
 * The error of a backend slot that is full: at once when the backend
 * holds or waits for its whole share, else (draining) after
 * zklock.connect_timeout, with how many entries are still being removed.
 */
static void
submit_full_error(bool draining)
{
	int			releasing = draining ? zklock_channel_my_releasing() : 0;

	if (releasing > 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("this backend has used all of its zklock lock entries"),
				 errdetail("A backend may hold or wait for %d lock nodes at once, its parents' locks included; %d of them were still being removed after zklock.connect_timeout (%d ms).",
						   zklock_max_locks_per_backend, releasing,
						   zklock_connect_timeout),
				 errhint("Check the zklock worker and ZooKeeper, or increase zklock.max_locks_per_backend.")));
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("this backend has used all of its zklock lock entries"),
			 errdetail("A backend may hold or wait for %d lock nodes at once, its parents' locks included; nodes still being removed for an earlier backend in the same slot count too.",
					   zklock_max_locks_per_backend),
			 errhint("Release locks first, or increase zklock.max_locks_per_backend.")));
}

/*
 * Hand a filled-in request to the worker (zklock_channel_submit), waking
 * it if wake; returns its entry, and its generation in *gen.  A worker
 * that is (re)starting gets zklock.connect_timeout to appear; so does a
 * backend slot that is full only because some of its entries are still
 * being removed (the worker sets the latch as it frees them).  Nothing is
 * submitted meanwhile: an interrupt leaves nothing behind.
 */
static int
submit_request(const ZkChannelRequest *req, uint32 *gen, bool wake)
{
	int			idx;
	TimestampTz start = GetCurrentTimestamp();

	while ((idx = zklock_channel_submit(req, wake, gen)) ==
		   ZKLOCK_CHANNEL_NO_WORKER || idx == ZKLOCK_ALLOC_BACKEND_DRAINING)
	{
		if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(),
									   zklock_connect_timeout))
		{
			if (idx == ZKLOCK_ALLOC_BACKEND_DRAINING)
				submit_full_error(true);
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("zklock worker is not running"),
					 errhint("The server log says why; the worker is restarted after a second.")));
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 idx == ZKLOCK_CHANNEL_NO_WORKER ? 50 : 100,
						 zklock_wait_event(ZKLOCK_WAIT_WORKER));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	if (idx == ZKLOCK_ALLOC_BACKEND_FULL)
		submit_full_error(false);
	if (idx < 0)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of zklock lock entries"),
				 errhint("You might need to increase zklock.max_locks (or, when it is 0, zklock.max_locks_per_backend).")));
	return idx;
}

/*
 * Submit a request and make it the pending one, which the exit callback
 * withdraws (zklock_withdraw_pending) until zklock_wait_for_answer is done
 * with it.
 */
int
zklock_submit(const ZkChannelRequest *req, uint32 *gen)
{
	int			idx = submit_request(req, gen, true);

	pending_idx = idx;
	pending_gen = *gen;
	return idx;
}

/*
 * Make an answered request the pending one again (idx -1: none), while its
 * caller may still be interrupted before it keeps or gives back the entry
 * (acquire.c's wait for the lease of a new grant): a FATAL then withdraws
 * it in the exit callback.
 */
void
zklock_set_pending(int idx, uint32 gen)
{
	pending_idx = idx;
	pending_gen = gen;
}

/*
 * Submit one request of a batch (acquire.c): the worker is not woken (the
 * caller wakes it once, when all are in), and the request is not the
 * pending one but one of the batch, which the exit callback withdraws
 * until zklock_forget_batch (zklock_withdraw_batch).
 */
int
zklock_submit_batched(const ZkChannelRequest *req, uint32 *gen)
{
	int			idx;

	if (nbatch >= ZKLOCK_MAX_BATCH)
		elog(ERROR, "zklock batch of more than %d requests", ZKLOCK_MAX_BATCH);
	idx = submit_request(req, gen, false);
	pending_idx = -1;
	batch_idx[nbatch] = idx;
	batch_gen[nbatch] = *gen;
	nbatch++;
	return idx;
}

/*
 * A worker that is running but has not taken a request out of its queue
 * within zklock.connect_timeout, or has taken it and then not gone through
 * its main loop (which it does at least once a second) for that long, is
 * stuck (stopped, or looping): end the wait with an error rather than wait
 * for it without a bound.  Called with the entry still REQUESTED; the
 * caller's error path withdraws it.
 */
static void
check_worker_responds(int idx, TimestampTz since)
{
	bool		queued;
	int64		idle_ms;

	if (!TimestampDifferenceExceeds(since, GetCurrentTimestamp(),
									zklock_connect_timeout))
		return;
	queued = zklock_channel_queued(idx);
	idle_ms = (zklock_boottime_us() -
			   (int64) pg_atomic_read_u64(&zklock_shared->worker_alive_at)) / 1000;
	if (queued)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock worker is not responding"),
				 errdetail("The worker has not taken the request within zklock.connect_timeout (%d ms).",
						   zklock_connect_timeout),
				 errhint("Check the zklock worker's process (zk_lock_status.worker_pid) and the server log.")));
	if (idle_ms > zklock_connect_timeout + 1000)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock worker is not responding"),
				 errdetail("The worker has not run for %lld ms, longer than zklock.connect_timeout (%d ms).",
						   (long long) idle_ms, zklock_connect_timeout),
				 errhint("Check the zklock worker's process (zk_lock_status.worker_pid) and the server log.")));
}

/*
 * Is the client still there?  A wait for a lock may last as long as its
 * holder keeps it, and the node of a waiter whose client is gone would keep
 * its place in the queue all that time (and be granted, to nobody).  Core
 * notices a lost client only every client_connection_check_interval, which
 * is off by default; a zklock wait looks itself, at most once a second
 * (pq_check_connection: a poll of the socket, no wait), and ends as core
 * would, with FATAL "connection to client lost": the exit callback then
 * withdraws the request and releases everything held.
 *
 * pq_check_connection() may reset our latch: called after ResetLatch(),
 * before the caller looks at its entry's state again, that loses nothing.
 */
#define ZKLOCK_CLIENT_CHECK_MS 1000

/*
 * From libpq/libpq.h, which cannot be included here: it pulls in
 * libpq-be.h and with it the GSSAPI headers, which a server built with
 * GSSAPI needs but an extension's build machine need not have.
 */
extern bool pq_check_connection(void);

static void
check_client(void)
{
	static TimestampTz last_check = 0;
	TimestampTz now;

	if (MyProcPort == NULL || whereToSendOutput != DestRemote ||
		!WaitEventSetCanReportClosed())
		return;
	now = GetCurrentTimestamp();
	if (!TimestampDifferenceExceeds(last_check, now, ZKLOCK_CLIENT_CHECK_MS))
		return;
	last_check = now;
	if (!pq_check_connection())
	{
		/* CHECK_FOR_INTERRUPTS raises core's FATAL for it */
		ClientConnectionLost = true;
		InterruptPending = true;
	}
}

/*
 * Was the session connected at the start of the current wait
 * (wait_connected), and how often had it become connected by then
 * (wait_n_connected)?  A wait that ends by its timeout while ZooKeeper
 * could not be reached at any moment since is a connection failure, not
 * a lock that someone else holds: the request never got to ZooKeeper.
 */
static bool wait_connected;
static uint64 wait_n_connected;

void
zklock_note_wait_start(void)
{
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	wait_connected = zklock_shared->session_state == ZKS_CONNECTED;
	wait_n_connected = zklock_shared->n_connected;
	LWLockRelease(zklock_shared->lock);
}

static bool
unreachable_throughout_wait(void)
{
	bool		unreachable;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	unreachable = !wait_connected &&
		zklock_shared->session_state != ZKS_CONNECTED &&
		zklock_shared->n_connected == wait_n_connected;
	LWLockRelease(zklock_shared->lock);
	return unreachable;
}

/*
 * The error for a request that ZooKeeper's unavailability ended, as the
 * doc/sql.md's errors table has it: the connection failure as the message,
 * what was asked in DETAIL.
 */
static void
raise_unreachable(const char *msg, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("%s", msg),
			 errdetail("zklock was asked to %s.", what),
			 errhint("Check that ZooKeeper is running at zklock.hosts = '%s'; zk_lock_status shows the worker's view.",
					 zklock_hosts)));
}

/*
 * A wait for a lock on <what> ended by its timeout (of ms) with ZooKeeper
 * unreachable all along: 08006, whether the timeout is shorter than
 * zklock.connect_timeout or not.
 */
static void
raise_wait_unreachable(const char *what, int ms)
{
	raise_unreachable(psprintf("could not connect to ZooKeeper at \"%s\" within %d ms",
							   zklock_hosts, ms),
					  psprintf("acquire zklock lock on %s", what));
}

/*
 * One pass of a wait for the worker's answer to entry idx (still
 * REQUESTED): end it if the worker does not respond or the deadline (0:
 * none) has passed -- raising 55P03 "... on <what> within <shown_ms> ms",
 * or 08006 if ZooKeeper could not be reached at any moment of the wait --
 * else sleep until the latch is set, at most a second, and serve
 * interrupts (cancel, statement_timeout, lock_timeout, terminate, and a
 * lost client: check_client).  for_lock: the answer is a lock's grant (the
 * wait shows as ZklockAcquire, else ZklockWorker: wait_events.c).
 */
void
zklock_wait_a_while(int idx, TimestampTz since, TimestampTz deadline,
					const char *what, int shown_ms, bool for_lock)
{
	long		sleep_ms = 1000;
	ZkWaitEvent event = for_lock ? ZKLOCK_WAIT_ACQUIRE : ZKLOCK_WAIT_WORKER;

	check_worker_responds(idx, since);
	if (deadline != 0)
	{
		TimestampTz now = GetCurrentTimestamp();

		if (now >= deadline)
		{
			if (unreachable_throughout_wait())
				raise_wait_unreachable(what, shown_ms);
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("could not obtain zklock lock on %s within %d ms",
							what, shown_ms)));
		}
		sleep_ms = Min(sleep_ms,
					   TimestampDifferenceMilliseconds(now, deadline) + 1);
	}
	if (for_lock)
		sleep_ms = Min(sleep_ms, zklock_deadlock_due_ms(since));
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 sleep_ms, zklock_wait_event(event));
	ResetLatch(MyLatch);
	check_client();

	/*
	 * lock_timeout, with ZooKeeper unreachable all along: report it as
	 * ProcessInterrupts would report the timeout, with our error instead.
	 */
	if (get_timeout_indicator(LOCK_TIMEOUT, false) &&
		unreachable_throughout_wait())
	{
		(void) get_timeout_indicator(LOCK_TIMEOUT, true);
		QueryCancelPending = false;
		raise_wait_unreachable(what, LockTimeout);
	}
	CHECK_FOR_INTERRUPTS();
}

/*
 * One pass of a wait that ends by itself at its deadline (0: none), with
 * no error there: a queue's take (queue.c), whose timeout answers "no
 * item".  As zklock_wait_a_while otherwise: the worker must respond, the
 * client must be there, interrupts are served.
 */
void
zklock_wait_pass(int idx, TimestampTz since, TimestampTz deadline)
{
	long		sleep_ms = 1000;

	check_worker_responds(idx, since);
	if (deadline != 0)
		sleep_ms = Min(sleep_ms,
					   Max(1, TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
															  deadline)));
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 sleep_ms, zklock_wait_event(ZKLOCK_WAIT_WORKER));
	ResetLatch(MyLatch);
	check_client();
	CHECK_FOR_INTERRUPTS();
}

/*
 * Wait until the worker has answered the pending request (entry idx of
 * generation gen, just submitted), or until timeout_ms (-1: no limit) has
 * passed: then withdraw it and raise 55P03 (saying shown_ms, the caller's
 * whole timeout).  An ERROR or FATAL raised while waiting withdraws it too
 * (a FATAL through pending_idx, in the exit callback).
 */
ZkEntryState
zklock_wait_for_answer(int idx, uint32 gen, const char *what, int timeout_ms,
				int shown_ms, bool lock_timeout)
{
	TimestampTz deadline = 0;
	TimestampTz since = GetCurrentTimestamp();
	ZkEntryState state;

	zklock_extension_guard_end();	/* the request is visible to a DROP now */
	if (timeout_ms >= 0)
		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											   timeout_ms);
	zklock_note_wait_start();
	PG_TRY();
	{
		if (lock_timeout && LockTimeout > 0)
			enable_timeout_after(LOCK_TIMEOUT, LockTimeout);
		for (;;)
		{
			(void) ZKLOCK_FAILPOINT("backend-before-answer");
			state = zklock_channel_state(idx, gen);
			if (state != ZKE_REQUESTED)
				break;
			zklock_wait_a_while(idx, since, deadline, what, shown_ms,
									lock_timeout);
			if (lock_timeout)
				zklock_deadlock_check(idx, gen, since, deadline);
		}
		if (lock_timeout && LockTimeout > 0)
			disable_timeout(LOCK_TIMEOUT, false);
	}
	PG_CATCH();
	{
		if (lock_timeout && LockTimeout > 0)
			disable_timeout(LOCK_TIMEOUT, false);
		zklock_channel_withdraw(idx, gen);
		pending_idx = -1;
		PG_RE_THROW();
	}
	PG_END_TRY();
	pending_idx = -1;
	return state;
}

/*
 * zklock_wait_for_answer for a lock's request that may wait (ZKR_ACQUIRE,
 * sent at asked_at), with lock_timeout: a wait that an error ends -- a
 * timeout (55P03), a cancel (57014), a deadlock, any other -- is counted
 * in the statistics of (resource, mode) before the error goes on (the
 * deadlock detector counts its victim itself: stats.c).
 */
ZkEntryState
zklock_wait_counted(int idx, uint32 gen, const char *what, int timeout_ms,
					int shown_ms, const char *resource, ZkLockMode mode,
					TimestampTz asked_at)
{
	ZkEntryState state;

	PG_TRY();
	{
		state = zklock_wait_for_answer(idx, gen, what, timeout_ms, shown_ms,
									   true);
	}
	PG_CATCH();
	{
		int			code = geterrcode();

		zklock_stats_wait_ended(resource, mode,
								code == ERRCODE_LOCK_NOT_AVAILABLE ? ZKLOCK_STAT_TIMEOUT :
								code == ERRCODE_QUERY_CANCELED ? ZKLOCK_STAT_CANCEL : -1,
								zklock_stats_ms_since(asked_at));
		PG_RE_THROW();
	}
	PG_END_TRY();
	return state;
}

/* Raise the worker's error for a FAILED entry, after freeing it */
void
zklock_raise_failure(int idx, uint32 gen, const char *what)
{
	ZkChannelResult result;
	const char *msg = result.error;
	int			sqlstate;

	zklock_channel_collect(idx, gen, &result);
	sqlstate = result.sqlstate;

	/*
	 * A connection failure is the same whatever was asked: its message is
	 * the worker's ("could not connect to ZooKeeper at ... within N ms", as
	 * doc/sql.md's errors table has it), and what was asked goes in DETAIL.
	 */
	if (sqlstate == ERRCODE_CONNECTION_FAILURE)
		raise_unreachable(msg, what);

	/* the worker stopped or restarted: nothing to do with ZooKeeper */
	if (sqlstate == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE &&
		strncmp(msg, ZKLOCK_WORKER_GONE, strlen(ZKLOCK_WORKER_GONE)) == 0)
		ereport(ERROR,
				(errcode(sqlstate),
				 errmsg("could not %s: %s", what, msg),
				 errhint("Unless the server is shutting down, the zklock worker starts again by itself (zk_lock_status.worker_pid); the server log says why it stopped.")));
	ereport(ERROR,
			(errcode(sqlstate ? sqlstate : ERRCODE_INTERNAL_ERROR),
			 errmsg("could not %s: %s", what, msg)));
}

/*
 * Backend exit, FATAL included: withdraw the request being waited for, if
 * any.  Never raises an ERROR.
 */
void
zklock_withdraw_pending(void)
{
	if (pending_idx >= 0)
		zklock_channel_withdraw(pending_idx, pending_gen);
	pending_idx = -1;
	zklock_deadlock_withdraw_read();	/* a search's read, if one is out */
}

/*
 * Give back every request of the batch in flight, if any: at backend exit
 * (FATAL included), on an error while it was sent or waited for, and
 * before a new batch (acquire.c).  Never raises an ERROR.
 */
void
zklock_withdraw_batch(void)
{
	for (int k = 0; k < nbatch; k++)
		zklock_channel_withdraw(batch_idx[k], batch_gen[k]);
	nbatch = 0;
}

/*
 * The batch's requests are the caller's now (entered in the local lock
 * table, or withdrawn one by one): no longer withdrawn here.
 */
void
zklock_forget_batch(void)
{
	nbatch = 0;
}
