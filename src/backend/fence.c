/*-------------------------------------------------------------------------
 *
 * fence.c
 *		Lost locks and the commit fence: what this backend's locks are
 *		worth when it reports them held, or commits under them.
 *
 * A lock is lost when the worker says so (the channel's LOST state: its
 * node was deleted, or its ZooKeeper session ended); the user hears of it
 * at the next acquire (an ERROR) or release (a WARNING), zklock_check_lost.
 *
 * A lock is held only while the lease proves its session alive
 * (zklock_prove_held, lease.c): a state flag written by a worker that may
 * be stalled proves nothing.  A fence that passed opens this backend's
 * commit window (lease.c), which backend.c's transaction callback closes
 * when the transaction has ended.  The commit fence runs at
 * XACT_EVENT_PRE_COMMIT, before the commit record is written, so its
 * ERROR fails the commit; PREPARE TRANSACTION is refused at
 * XACT_EVENT_PRE_PREPARE while locks are held, since no fence can run at
 * COMMIT PREPARED.  Both are called from backend.c's transaction callback
 * and read the local lock table (local_locks.c) only.
 *
 * Leadership a transaction relied on (zk_is_leader said true, leader.c)
 * is fenced the same way when the transaction had an effect: it wrote, or
 * it has NOTIFY, LISTEN or UNLISTEN pending (zklock_xact_has_effects).
 * The leadership fence (zklock_leader_fence, called from leader.c's
 * transaction callback) treats it as a lock it holds, whose loss fails the
 * commit.  It reads the groups' shared
 * state (election.c's, election.h) and the lease in one section under
 * zklock_shared->lock (shared mode), where the commit window opens.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "commands/async.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/hsearch.h"
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
#include "election.h"

/* lost-lock bookkeeping: the shared n_lost when we last looked */
static uint64 seen_lost = 0;
static bool known_lost = false;
/* Has the worker found this lock lost (its node gone, its session ended)? */
static bool
is_lost(LocalLock *lock)
{
	return zklock_channel_state(lock->idx, lock->generation) == ZKE_LOST;
}

/*
 * Tell the user about locks of this backend that were lost: an ERROR on
 * the next acquire, a WARNING on a release.  Cheap when nothing was lost:
 * one look at the shared counter.
 */
void
zklock_check_lost(int elevel)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;
	LocalLock  *first = NULL;
	int			n = 0;
	uint64		nlost;

	if (hash_get_num_entries(zklock_local_locks) == 0)
		return;
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	nlost = zklock_shared->n_lost;
	LWLockRelease(zklock_shared->lock);
	if (nlost == seen_lost && !known_lost)
		return;
	seen_lost = nlost;

	hash_seq_init(&seq, zklock_local_locks);
	while ((lock = hash_seq_search(&seq)) != NULL)
	{
		if (is_lost(lock))
		{
			/* name the most specific one: a child, not its parent */
			if (first == NULL ||
				strlen(lock->key.resource) > strlen(first->key.resource))
				first = lock;
			n++;
		}
	}
	known_lost = (n > 0);
	if (first)
		ereport(elevel,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("zklock lock on resource \"%s\" (%s) was lost",
						first->key.resource, zklock_mode_name(first->key.mode)),
				 errdetail_plural("%d lock of this session was lost: the ZooKeeper session expired, the worker restarted, or the node was deleted.",
								  "%d locks of this session were lost: the ZooKeeper session expired, the worker restarted, or the node was deleted.",
								  n, n),
				 errhint("Release lost session locks with zk_lock_release(), zk_advisory_unlock() for advisory keys, or zk_lock_release_all(); a transaction holding a lost lock cannot commit.")));
}

/*
 * The negotiated session timeout of the worker's session (ms), 0 when
 * there is none.
 */
static int
negotiated_timeout(void)
{
	int			t;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	t = zklock_shared->negotiated_timeout;
	LWLockRelease(zklock_shared->lock);
	return t;
}

/*
 * The lease did not cover a lock for bound_ms: 55P03, naming the resource
 * the caller asked for (asked; NULL: the lock's own) and, when the lock is
 * a parent of it, that parent.  When zklock.lease_margin is half the
 * session timeout or more, no lease can ever cover it (lease.c: a lease
 * reaches at most timeout - margin beyond its proof): the detail says that
 * rather than blame the leader's answers.
 */
static void
not_proven(LocalLock *lock, int bound_ms, const char *asked, const char *what)
{
	int			timeout = negotiated_timeout();
	char	   *name;

	if (asked != NULL && strcmp(asked, lock->key.resource) != 0)
		name = psprintf("\"%s\" (its parent \"%s\", held by this session)",
						asked, lock->key.resource);
	else
		name = psprintf("\"%s\"", lock->key.resource);
	if (timeout > 0 && 2 * (int64) zklock_lease_margin >= timeout)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("zklock lock on resource %s is not proven held; %s",
						name, what),
				 errdetail("zklock.lease_margin (%d ms) is at least half of the negotiated session timeout (%d ms): no lease can cover it.",
						   zklock_lease_margin, timeout),
				 errhint("Lower zklock.lease_margin, or raise zklock.session_timeout (and ZooKeeper's maxSessionTimeout); keep the timeout at least three times the margin.")));
	ereport(ERROR,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 errmsg("zklock lock on resource %s is not proven held; %s",
					name, what),
			 errdetail("For %d ms, no answer of the ZooKeeper leader has proven that this instance's session is alive for zklock.lease_margin (%d ms) more.",
					   bound_ms, zklock_lease_margin),
			 errhint("Another holder may have been granted the lock. zk_lock_status shows the worker's session and lease.")));
}

/*
 * Is a lock held by a session that the lease proves alive for at least
 * zklock.lease_margin more (lease.c)?  A state flag written by a worker
 * that may be stalled, or a follower cut from its leader, proves nothing.
 * Raises 55P03 when the lock is lost; when the lease does not cover it,
 * waits for the worker to renew the lease (it does so by itself when the
 * lease runs short) until bound_ms after start, then raises 55P03 naming
 * asked, the resource the caller asked for (NULL: the lock's own).
 */
void
zklock_prove_held(LocalLock *lock, TimestampTz start, int bound_ms,
				  const char *asked, const char *what)
{
	int64		left;

	for (;;)
	{
		if (is_lost(lock))
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("zklock lock on resource \"%s\" was lost; %s",
							lock->key.resource, what),
					 errdetail("Another holder may have been granted the lock since.")));
		if (zklock_lease_covers(lock->session_id, &left))
			return;
		if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(), bound_ms))
			not_proven(lock, bound_ms, asked, what);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 50, zklock_wait_event(ZKLOCK_WAIT_LEASE));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Are NOTIFY, LISTEN or UNLISTEN actions pending in this transaction?
 * async.c keeps them in static lists, and PreCommit_Notify, which runs
 * after the pre-commit callbacks, is what gives such a transaction its
 * id.  The one exported function that reads those lists is
 * AtPrepare_Notify: on PostgreSQL 15, 17 and 18 it raises ERROR 0A000 if
 * and only if any are pending, and changes nothing (it is meant for
 * PREPARE, which refuses them).  So call it and catch that ERROR.  The
 * ERROR is never reported: no context callback runs, and the interrupt
 * holdoff counts that errfinish resets are put back.  Where an ERROR
 * would be promoted to FATAL (ExitOnAnyError, proc_exit under way), or to
 * PANIC (a critical section), do not probe: say yes, so the fence runs.
 */
static bool
notify_pending(void)
{
	MemoryContext mcxt = CurrentMemoryContext;
	uint32		holdoff = InterruptHoldoffCount;
	uint32		cancel_holdoff = QueryCancelHoldoffCount;
	volatile bool pending = false;

	if (ExitOnAnyError || proc_exit_inprogress || CritSectionCount > 0)
		return true;
	PG_TRY();
	{
		error_context_stack = NULL; /* PG_END_TRY/PG_CATCH restore it */
		AtPrepare_Notify();
	}
	PG_CATCH();
	{
		/* not the probe's answer (out of memory): as if uncaught */
		if (geterrcode() != ERRCODE_FEATURE_NOT_SUPPORTED)
			PG_RE_THROW();
		MemoryContextSwitchTo(mcxt);
		InterruptHoldoffCount = holdoff;
		QueryCancelHoldoffCount = cancel_holdoff;
		FlushErrorState();
		pending = true;
	}
	PG_END_TRY();
	return pending;
}

/*
 * Does the transaction about to commit have an effect that others see once
 * it commits, so that the locks and leadership it ran under must guard it?
 * It wrote (it has an xid), or it has NOTIFY, LISTEN or UNLISTEN pending
 * (also from pg_notify or a trigger; one rolled back with its savepoint is
 * not pending any more).  Effects it cannot see are listed in
 * doc/safety.md: nextval and setval (not transactional), a remote commit in
 * another extension's pre-commit callback (postgres_fdw), dblink.
 * Called at XACT_EVENT_PRE_COMMIT only.
 */
bool
zklock_xact_has_effects(void)
{
	if (TransactionIdIsValid(GetTopTransactionIdIfAny()))
		return true;
	return notify_pending();
}

/*
 * The commit fence, run before the commit record is written: every lock
 * that guards the transaction must be proven held (prove_held), within one
 * bound of the session timeout plus zklock.connect_timeout.  A lost lock
 * fails at once, naming the most specific one (a child, not its parent).
 *
 * The locks that guard a transaction are its transaction-level locks and,
 * when it had an effect (zklock_xact_has_effects: it wrote, or notifies),
 * the backend's session-level locks too: an ETL step run under a session
 * lock does not commit its writes, nor its NOTIFY, once that lock is lost.
 * A read-only transaction is not held up by a lost session lock
 * (zk_lock_release says so instead).
 */
void
zklock_commit_fence(void)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;
	LocalLock  *lost = NULL;
	bool		effects = zklock_xact_has_effects();
	TimestampTz start = GetCurrentTimestamp();
	int			bound_ms = zklock_session_timeout + zklock_connect_timeout;

#define GUARDS(l) ((l)->nxact > 0 || \
				   (effects && (l)->session_count + (l)->session_implicit > 0))

	hash_seq_init(&seq, zklock_local_locks);
	while ((lock = hash_seq_search(&seq)) != NULL)
	{
		if (GUARDS(lock) && is_lost(lock) &&
			(lost == NULL ||
			 strlen(lock->key.resource) > strlen(lost->key.resource)))
			lost = lock;
	}
	if (lost)
		zklock_prove_held(lost, start, bound_ms, NULL,
						  "the transaction cannot commit");

	/*
	 * Every guard proven held, then the commit window opened for their
	 * session in one look at the lease (lease.c): until this transaction
	 * ends, zklock does not end that session itself.  Should the lease have
	 * been withdrawn in between, prove them again (within the same bound).
	 */
	for (;;)
	{
		int64		session_id = 0;

		hash_seq_init(&seq, zklock_local_locks);
		while ((lock = hash_seq_search(&seq)) != NULL)
		{
			if (GUARDS(lock))
			{
				zklock_prove_held(lock, start, bound_ms, NULL,
								  "the transaction cannot commit");
				session_id = lock->session_id;
			}
		}
		if (session_id == 0 || zklock_lease_enter_commit(session_id))
			break;
	}

	/*
	 * A force release (lock_held.c) marks the lock lost under the lock in
	 * exclusive mode, then waits while this window is open: a lock marked
	 * lost before the window opened is seen here, and fails the commit
	 * (the abort closes the window); one marked after it is waited for.
	 */
	hash_seq_init(&seq, zklock_local_locks);
	while ((lock = hash_seq_search(&seq)) != NULL)
	{
		if (GUARDS(lock) && is_lost(lock))
		{
			hash_seq_term(&seq);
			zklock_lease_leave_commit();
			zklock_prove_held(lock, start, bound_ms, NULL,
							  "the transaction cannot commit");
		}
	}
#undef GUARDS
}

/*
 * PREPARE TRANSACTION (XACT_EVENT_PRE_PREPARE) is refused while this
 * backend holds transaction-level locks: a prepared transaction outlives
 * the backend, whose exit releases them.
 */
void
zklock_prepare_check(void)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;

	hash_seq_init(&seq, zklock_local_locks);
	while ((lock = hash_seq_search(&seq)) != NULL)
	{
		if (lock->nxact > 0)
		{
			hash_seq_term(&seq);
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot PREPARE a transaction that holds zklock transaction-level locks")));
		}
	}
	/*
	 * Nor while this backend holds session-level locks: COMMIT
	 * PREPARED comes later, from any session, and no fence can run
	 * then, so a write could land after the lock was lost and
	 * granted to another holder.  (PREPARE assigns a transaction
	 * id before this callback, so a writing transaction cannot be
	 * told from a read-only one here: both are refused.)
	 */
	hash_seq_init(&seq, zklock_local_locks);
	while ((lock = hash_seq_search(&seq)) != NULL)
	{
		if (lock->session_count + lock->session_implicit > 0)
		{
			hash_seq_term(&seq);
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot PREPARE a transaction while this session holds zklock locks"),
					 errdetail("COMMIT PREPARED is not fenced: a write could land after the lock was lost."),
					 errhint("Release the session-level locks with zk_lock_release_all() first, or commit without two-phase commit.")));
		}
	}
}

/*
 * Does this instance still lead in the candidacy a transaction relied on
 * (same slot, group, session and node)?  Caller holds zklock_shared->lock
 * (the groups' shared state is election.c's, read under it: election.h).
 * *covered says whether the lease covers it now.
 */
static bool
still_leads_locked(const ZkLeadership *l, bool *covered)
{
	ZkElectionGroup *s = &zklock_elections_shared->groups[l->slot];
	int64		left;

	*covered = false;
	if (s->phase != ZKEL_LEADING || !s->leader ||
		s->session_id != l->session_id || strcmp(s->name, l->group) != 0 ||
		strcmp(s->node, l->node) != 0)
		return false;
	*covered = zklock_lease_covers_locked(s->session_id, &left);
	return true;
}

/* The group slots (a bit each) of the candidacies relied on */
static uint32
groups_of(const ZkLeadership *relied_on, int n)
{
	uint32		groups = 0;

	StaticAssertStmt(ZKLOCK_MAX_ELECTIONS <= 32, "a bit per group slot");
	for (int i = 0; i < n; i++)
		groups |= UINT32_C(1) << relied_on[i].slot;
	return groups;
}

/*
 * The leadership fence, at XACT_EVENT_PRE_COMMIT of a transaction that
 * had an effect (zklock_xact_has_effects) and relied on zk_is_leader
 * (leader.c): each candidacy it relied on
 * must still lead (same group, session and node) under a lease that
 * covers it, or the commit fails (55P03, as a lost lock).  A lease that
 * runs short is waited for, within the lock fence's bound.  In the locked
 * section of the last look, the commit window (lease.c) opens for the
 * session, naming the groups, so that the worker neither ends the session
 * nor deletes those groups' nodes until this transaction has ended.
 */
void
zklock_leader_fence(const ZkLeadership *relied_on, int n)
{
	TimestampTz start = GetCurrentTimestamp();
	int			bound_ms = zklock_session_timeout + zklock_connect_timeout;

	for (;;)
	{
		const ZkLeadership *lost = NULL;
		bool		all_covered = true;

		LWLockAcquire(zklock_shared->lock, LW_SHARED);
		for (int i = 0; i < n && lost == NULL; i++)
		{
			bool		covered;

			if (!still_leads_locked(&relied_on[i], &covered))
				lost = &relied_on[i];
			all_covered = all_covered && covered;
		}
		if (lost == NULL && all_covered)
			zklock_lease_mark_commit_locked(relied_on[0].session_id,
											groups_of(relied_on, n));
		LWLockRelease(zklock_shared->lock);

		if (lost)
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("zklock leadership of election group \"%s\" was lost; the transaction cannot commit",
							lost->group),
					 errdetail("The transaction saw zk_is_leader('%s') true and wrote; another instance may lead the group since.",
							   lost->group)));
		if (all_covered)
			return;
		if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(), bound_ms))
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("zklock leadership of election group \"%s\" is not proven; the transaction cannot commit",
							relied_on[0].group),
					 errdetail("For %d ms, no answer of the ZooKeeper leader has proven that this instance's session is alive for zklock.lease_margin (%d ms) more.",
							   bound_ms, zklock_lease_margin),
					 errhint("Another instance may lead the group. zk_lock_status shows the worker's session and lease.")));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 50, zklock_wait_event(ZKLOCK_WAIT_LEASE));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}
