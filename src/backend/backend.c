/*-------------------------------------------------------------------------
 *
 * backend.c
 *		The backend side: its first use in a backend, the transaction,
 *		subtransaction and exit callbacks, and session-level releases.
 *
 * What this backend holds, and every change of its holds, is the local
 * lock table's (local_locks.c); this file says when holds end: at a
 * release the user asks for (zk_lock_release, zk_advisory_unlock and their
 * _all forms), at a transaction's or subtransaction's end, and at exit.
 * Ending a hold never raises an ERROR: after the commit record is written
 * an ERROR would be a PANIC.  What may fail is checked earlier, at
 * XACT_EVENT_PRE_COMMIT (the commit fence: a lost lock fails the commit)
 * and XACT_EVENT_PRE_PREPARE (PREPARE with locks is refused): both in
 * fence.c.
 *
 * A FATAL (pg_terminate_backend) skips PG_CATCH, so an exit callback
 * withdraws the pending request and the batch in flight (wait.c) and every
 * lock held.  Backend-local state only: no lock guards any of it.
 *
 * The rest of the backend side, each in its own file, sharing the types
 * and calls of backend_int.h:
 *	local_locks.c	the local lock table: what this backend holds, its holds
 *	wait.c		submitting a request and waiting for the worker's answer
 *	acquire.c	taking a lock with its parents, and lock sets
 *	guard.c		DROP EXTENSION against session locks being taken
 *	fence.c		lost locks and the commit fence
 *	request.c	explicit locks, listings and administrators' requests
 *	holder.c	the holder's node data every lock request writes
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/hsearch.h"

#include "backend.h"
#include "backend_int.h"
#include "zklock.h"
#include "shmem.h"
#include "resource.h"
#include "lease.h"

static bool backend_ready = false;

static void xact_callback(XactEvent event, void *arg);
static void subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							 SubTransactionId parentSubid, void *arg);
static void backend_exit(int code, Datum arg);
static void queue_xact_event(XactEvent event);

/*
 * Without shared_preload_libraries there is no worker and no shared memory:
 * every function but zk_lock_fence (plain SQL) says so.
 */
void
zklock_check_loaded(void)
{
	if (zklock_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock is not loaded"),
				 errhint("Add zklock to shared_preload_libraries and restart the server.")));
}

/*
 * First use in this backend: check that zklock can work at all, then set up
 * the local table and the callbacks.
 */
void
zklock_backend_init(void)
{
	zklock_check_loaded();
	if (backend_ready)
		return;

	zklock_local_locks_init();
	RegisterXactCallback(xact_callback, NULL);
	RegisterSubXactCallback(subxact_callback, NULL);
	before_shmem_exit(backend_exit, (Datum) 0);
	backend_ready = true;
}

/*
 * Release one session-level hold, like pg_advisory_unlock.
 */
bool
zklock_unlock(const char *resource, ZkLockMode mode)
{
	LocalLock  *lock;

	zklock_backend_init();
	zklock_check_resource(resource);
	zklock_check_lost(WARNING);
	lock = zklock_held_lock_in(resource, mode);
	if (lock == NULL || lock->session_count == 0)
	{
		if (mode == ZKLOCK_SEMAPHORE)
			ereport(WARNING,
					(errmsg("you don't own a session-level zklock semaphore slot on resource \"%s\"",
							resource)));
		else
			ereport(WARNING,
					(errmsg("you don't own a session-level zklock lock on resource \"%s\" in %s mode",
							resource, zklock_mode_name(mode))));
		return false;
	}
	zklock_release_session_hold(lock);
	return true;
}

/*
 * Release every session-level hold, like pg_advisory_unlock_all.  Returns
 * the number of locks whose session-level holds were released.
 */
int
zklock_unlock_all(void)
{
	zklock_backend_init();
	zklock_check_lost(WARNING);
	return zklock_drop_session_holds();
}

/*
 * Release one session-level hold of an advisory key, like
 * pg_advisory_unlock: false, with PostgreSQL's WARNING, when this backend
 * holds none in that mode (its transaction-level holds do not count).
 */
bool
zklock_unlock_advisory(const char *resource, ZkLockMode mode)
{
	LocalLock  *lock;

	zklock_backend_init();
	zklock_check_lost(WARNING);
	lock = zklock_held_lock_in(resource, mode);
	if (lock == NULL || lock->session_count == 0)
	{
		ereport(WARNING,
				(errmsg("you don't own a lock of type %s",
						mode == ZKLOCK_EXCLUSIVE ? "ExclusiveLock" : "ShareLock")));
		return false;
	}
	zklock_drop_hold(lock, true, false);	/* no parents: may free lock */
	return true;
}

/*
 * Release every session-level advisory hold, in any namespace, like
 * pg_advisory_unlock_all; zk_lock_* locks and transaction-level holds stay.
 */
void
zklock_unlock_all_advisory(void)
{
	zklock_backend_init();
	zklock_check_lost(WARNING);
	zklock_drop_advisory_session_holds();
}

/*
 * Transaction end: every transaction-level hold goes.  Before the commit,
 * the fence: a lost lock fails the commit (fence.c); PREPARE is refused
 * while locks are held (likewise).
 */
static void
xact_callback(XactEvent event, void *arg)
{
	/* an error between extension_guard_begin and _end: the abort released it */
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		zklock_extension_guard_reset();
	/*
	 * Aborted or prepared: the fence's window closes.  Committed (its record
	 * written): once the consumes of its takes have their verdicts
	 * (queue_xact_event), so that zklock does not end the session under
	 * them itself (a reload, a worker restart wait for the window,
	 * lease.c).
	 */
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PREPARE)
		zklock_lease_leave_commit();
	queue_xact_event(event);
	if (zklock_local_locks == NULL ||
		hash_get_num_entries(zklock_local_locks) == 0)
		return;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			zklock_commit_fence();
			break;

		case XACT_EVENT_PRE_PREPARE:
			zklock_prepare_check();
			break;

		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			zklock_end_xact_holds();
			break;

		default:
			break;
	}
}

/*
 * The queue's holds (queue.c): fenced before the commit, consumed after
 * its record, given back at an abort
 */
static void
queue_xact_event(XactEvent event)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			zklock_queue_puts_pend();
			zklock_queue_fence();
			break;
		case XACT_EVENT_PRE_PREPARE:
			zklock_queue_prepare_check();
			zklock_queue_puts_prepare_check();
			break;
		case XACT_EVENT_COMMIT:
			zklock_queue_xact_end(true);

			/*
			 * The window closes here, before the moves of the puts: a
			 * consume needs the session that holds its take, a move does
			 * not (any session moves a pending item).  Open, it would
			 * hold a worker that ends its session (a reload, a restart)
			 * in its wait for the window, while that worker defers the
			 * move to its next session: both stalled for a session
			 * timeout, and the item left pending.
			 */
			zklock_lease_leave_commit();
			zklock_queue_puts_end(true);
			break;
		case XACT_EVENT_ABORT:
			zklock_queue_xact_end(false);
			zklock_queue_puts_end(false);
			break;
		default:
			break;
	}
}

/*
 * Subtransactions: ROLLBACK TO releases what the subtransaction took;
 * RELEASE hands its holds to the parent.
 */
static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		zklock_extension_guard_reset();	/* as in xact_callback */
	if (event == SUBXACT_EVENT_ABORT_SUB || event == SUBXACT_EVENT_COMMIT_SUB)
	{
		zklock_queue_subxact_end(event == SUBXACT_EVENT_COMMIT_SUB, mySubid,
								 parentSubid);
		zklock_queue_puts_subxact_end(event == SUBXACT_EVENT_COMMIT_SUB,
									  mySubid, parentSubid);
	}
	if (zklock_local_locks == NULL)
		return;
	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	zklock_end_subxact_holds(event == SUBXACT_EVENT_COMMIT_SUB, mySubid,
							 parentSubid);
}

/*
 * Backend exit, FATAL included: withdraw the pending request and the batch
 * in flight, and release everything held.  This runs before core's
 * ShutdownPostgres (registered earlier), whose abort of an open transaction
 * calls xact_callback: each lock given back here leaves the local table, so
 * that the abort does not give it back, and count its hold in the
 * statistics, a second time.
 */
static void
backend_exit(int code, Datum arg)
{
	zklock_lease_leave_commit();	/* no commit of ours can land now */
	zklock_withdraw_pending();	/* wait.c */
	zklock_withdraw_batch();	/* wait.c: acquire.c's batch */
	zklock_queue_at_exit();		/* queue.c: the items held go back */
	zklock_forget_all_at_exit();
}
