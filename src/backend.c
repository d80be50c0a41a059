/*-------------------------------------------------------------------------
 *
 * backend.c
 *		The backend side: what this backend holds (the local lock table),
 *		its scopes and holds, and the transaction and exit callbacks.
 *
 * Reentrancy and scope never cost a ZooKeeper round trip: a backend keeps
 * its locks in a local hash table keyed by (resource, mode) with a session
 * count and a stack of transaction-level holds (one per acquisition, tagged
 * with the subtransaction that took it), exactly as PostgreSQL counts
 * advisory locks.  One shared entry, hence one lock node, backs each local
 * lock however often it is taken.
 *
 * Ending a hold never raises an ERROR: after the commit record is written an
 * ERROR would be a PANIC.  Releases are handed to the worker (the entry goes
 * to RELEASING, zklock_channel_withdraw) and never waited for.  What may
 * fail is checked earlier, at XACT_EVENT_PRE_COMMIT (the commit fence: a
 * lost lock fails the commit) and XACT_EVENT_PRE_PREPARE (PREPARE with
 * locks is refused): both in fence.c.
 *
 * A FATAL (pg_terminate_backend) skips PG_CATCH, so an exit callback
 * withdraws the pending request (wait.c), the batch in flight (acquire.c)
 * and every lock held.
 *
 * The rest of the backend side, each in its own file, sharing the types
 * and calls of backend_int.h:
 *	wait.c		submitting a request and waiting for the worker's answer
 *	acquire.c	taking a lock with its parents, and lock sets
 *	guard.c		DROP EXTENSION against session locks being taken
 *	fence.c		lost locks and the commit fence
 *	request.c	explicit locks, listings and administrators' requests
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/dbcommands.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "backend.h"
#include "backend_int.h"
#include "channel.h"
#include "compat.h"
#include "zklock.h"
#include "settings.h"
#include "shmem.h"
#include "resource.h"
#include "nodedata.h"
#include "lease.h"
#include "stats.h"

/* this backend's locks: LocalLock by (resource, mode) */
HTAB	   *zklock_local_locks = NULL;
static bool backend_ready = false;

static void xact_callback(XactEvent event, void *arg);
static void subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							 SubTransactionId parentSubid, void *arg);
static void backend_exit(int code, Datum arg);

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
	HASHCTL		ctl;

	zklock_check_loaded();
	if (backend_ready)
		return;

	ctl.keysize = sizeof(LocalLockKey);
	ctl.entrysize = sizeof(LocalLock);
	ctl.hcxt = TopMemoryContext;
	zklock_local_locks = hash_create("zklock local locks", 16, &ctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	RegisterXactCallback(xact_callback, NULL);
	RegisterSubXactCallback(subxact_callback, NULL);
	before_shmem_exit(backend_exit, (Datum) 0);
	backend_ready = true;
}

static void
make_key(LocalLockKey *key, const char *resource, ZkLockMode mode)
{
	memset(key, 0, sizeof(*key));
	strlcpy(key->resource, resource, sizeof(key->resource));
	key->mode = mode;
}

/*
 * The lock this backend already holds on a resource, in any mode (a
 * semaphore's slot too)
 */
LocalLock *
zklock_held_lock(const char *resource, ZkLockMode *mode)
{
	static const ZkLockMode modes[] = {ZKLOCK_EXCLUSIVE, ZKLOCK_SHARED,
	ZKLOCK_SEMAPHORE};
	LocalLockKey key;
	LocalLock  *lock = NULL;

	for (int i = 0; i < lengthof(modes) && lock == NULL; i++)
	{
		make_key(&key, resource, modes[i]);
		lock = hash_search(zklock_local_locks, &key, HASH_FIND, NULL);
	}
	if (lock && mode)
		*mode = lock->key.mode;
	return lock;
}

/* The lock this backend holds on a resource in one mode (advisory locks) */
LocalLock *
zklock_held_lock_in(const char *resource, ZkLockMode mode)
{
	LocalLockKey key;

	make_key(&key, resource, mode);
	return hash_search(zklock_local_locks, &key, HASH_FIND, NULL);
}

/*
 * What to do about a lock this backend holds that is in the way.  A
 * parent's implicit holds (for a child's sake) cannot be released by
 * themselves: name a child lock whose release gives them back.  Only
 * session-level holds are released by zk_lock_release; a transaction's
 * holds go at its end.
 */
char *
zklock_held_hint(LocalLock *lock)
{
	const char *resource = lock->key.resource;
	const char *mode = zklock_mode_name(lock->key.mode);
	size_t		len = strlen(resource);
	HASH_SEQ_STATUS seq;
	LocalLock  *c;
	LocalLock  *child = NULL;

	/* a lock below it, taken with its parents; one held for the session first */
	hash_seq_init(&seq, zklock_local_locks);
	while ((c = hash_seq_search(&seq)) != NULL)
	{
		if (c == lock || !c->parents ||
			strncmp(c->key.resource, resource, len) != 0 ||
			c->key.resource[len] != '/')
			continue;
		if (child == NULL || (child->session_count == 0 && c->session_count > 0))
			child = c;
	}
	if (child == NULL)
		return lock->session_count > 0 ?
			psprintf("Release the %s lock first.", mode) :
			psprintf("The %s lock is held until the transaction ends.", mode);
	if (child->session_count == 0)
		return psprintf("The %s lock on \"%s\" is held for the locks on its children, such as \"%s\", until the transaction ends.",
						mode, resource, child->key.resource);
	if (lock->session_count > 0)
		return psprintf("Release the %s lock and the locks on its children, such as \"%s\", first.",
						mode, child->key.resource);
	return psprintf("The %s lock on \"%s\" is held for the locks on its children: release those first, such as \"%s\".",
					mode, resource, child->key.resource);
}

/*
 * What zk_locks shows of a lock, on every instance, is in its node's data:
 * scope= and implicit= (zklock_describe_holder).  When the holds change, so does
 * what they should say: "session" while any session-level hold remains
 * (session wins over transaction), else "transaction"; implicit only while
 * every hold is for a child's sake.  Rewrite the entry's data and hand it
 * to the worker, which writes it into the node (protocol.c, rewrite_data)
 * without anyone waiting.  Only the two values change, in place, so a 1.0
 * or 1.1 instance reads the node as before.  Called also at transaction
 * end: nothing here may raise.
 */
static void
show_holds(LocalLock *lock)
{
	bool		session = lock->session_count + lock->session_implicit > 0;
	bool		implicit = lock->session_count == 0;
	ZkChannelResult held;

	for (int i = 0; i < lock->nxact && implicit; i++)
		if (!lock->xact_holds[i].implicit)
			implicit = false;
	if (!session && lock->nxact == 0)
		return;					/* going */
	if (session == lock->shown_session && implicit == lock->shown_implicit)
		return;

	/*
	 * The data is this backend's to change while the lock is GRANTED: read,
	 * rewrite, and hand back (zklock_channel_set_data checks the state
	 * again).
	 */
	zklock_channel_result(lock->idx, lock->generation, &held);
	if (held.state == ZKE_GRANTED)
	{
		/* room for the two values to grow: nothing is cut mid-character */
		char		scoped[ZKLOCK_MAX_DATA_LEN + 32];
		char		data[ZKLOCK_MAX_DATA_LEN + 32];
		int			len;

		/* the two values in place; the query (last) is cut if it grew */
		zklock_nodedata_set(scoped, sizeof(scoped), held.data, "scope=",
							session ? "session" : "transaction");
		zklock_nodedata_set(data, sizeof(data), scoped, "implicit=",
							implicit ? "true" : "false");
		len = pg_encoding_mbcliplen(PG_UTF8, data, strlen(data),
									ZKLOCK_MAX_DATA_LEN);
		data[len] = '\0';
		zklock_channel_set_data(lock->idx, lock->generation, data);
	}
	lock->shown_session = session;
	lock->shown_implicit = implicit;
}

/*
 * A lock this backend holds (in held_mode) asked for again in mode (with
 * max_holders for a semaphore's slot; child: whose parent it is taken
 * for): a semaphore (1.4) and a lock never stack onto each other (55000),
 * and a slot is asked for with the limit it was taken with (22023).
 */
void
zklock_check_semaphore_stack(LocalLock *lock, ZkLockMode held_mode,
							 ZkLockMode mode, int max_holders,
							 const char *child)
{
	if ((held_mode == ZKLOCK_SEMAPHORE) != (mode == ZKLOCK_SEMAPHORE))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock resource \"%s\" is held as a %s by this session: it cannot be used as a %s at the same time",
						lock->key.resource,
						held_mode == ZKLOCK_SEMAPHORE ? "semaphore" : "lock",
						mode == ZKLOCK_SEMAPHORE ? "semaphore" : "lock"),
				 child ?
				 errdetail("\"%s\" is a parent of \"%s\", whose lock takes it in shared mode.",
						   lock->key.resource, child) : 0));
	if (held_mode == ZKLOCK_SEMAPHORE && lock->max_holders != max_holders)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zklock semaphore \"%s\" is held by this session with max_holders %d, not %d",
						lock->key.resource, lock->max_holders, max_holders)));
}

/* Record one hold of a lock in a scope */
void
zklock_add_hold(LocalLock *lock, bool session, bool implicit)
{
	if (session)
	{
		if (implicit)
			lock->session_implicit++;
		else
			lock->session_count++;
		show_holds(lock);
		return;
	}
	if (lock->nxact >= lock->maxxact)
	{
		int			newmax = Max(4, lock->maxxact * 2);

		lock->xact_holds = lock->xact_holds ?
			repalloc(lock->xact_holds, newmax * sizeof(XactHold)) :
			MemoryContextAlloc(TopMemoryContext, newmax * sizeof(XactHold));
		lock->maxxact = newmax;
	}
	lock->xact_holds[lock->nxact].subid = GetCurrentSubTransactionId();
	lock->xact_holds[lock->nxact].implicit = implicit;
	lock->nxact++;
	show_holds(lock);
}

/* Undo one hold (the last one of its kind); the lock goes at zero */
void
zklock_drop_hold(LocalLock *lock, bool session, bool implicit)
{
	if (session)
	{
		if (implicit && lock->session_implicit > 0)
			lock->session_implicit--;
		else if (!implicit && lock->session_count > 0)
			lock->session_count--;
	}
	else if (lock->nxact > 0)
		lock->nxact--;
	if (lock->session_count == 0 && lock->session_implicit == 0 &&
		lock->nxact == 0)
		zklock_forget(lock);
	else
		show_holds(lock);
}

/*
 * Enter a lock just granted (entry idx of that generation) into the local
 * table, with no holds yet; parents: it was taken with its parents' locks.
 * Counted in the statistics (stats.c) as granted at once, or after a wait
 * since asked_at, as the worker says.
 */
LocalLock *
zklock_enter_lock(const char *resource, ZkLockMode mode, bool parents,
				  int idx, uint32 generation, TimestampTz asked_at)
{
	LocalLockKey key;
	LocalLock  *lock;
	bool		found;
	ZkChannelResult granted;

	zklock_channel_result(idx, generation, &granted);
	make_key(&key, resource, mode);
	lock = hash_search(zklock_local_locks, &key, HASH_ENTER, &found);
	Assert(!found);
	lock->idx = idx;
	lock->generation = generation;
	lock->token = granted.token;
	lock->session_id = granted.session_id;
	lock->parents = parents;
	lock->max_holders = granted.max_holders;	/* a semaphore's limit */
	lock->session_count = 0;
	lock->session_implicit = 0;
	lock->nxact = 0;
	lock->maxxact = 0;
	lock->xact_holds = NULL;
	/* what zklock_describe_holder wrote into the node */
	lock->shown_session =
		strstr(granted.data, "\nscope=session\n") != NULL;
	lock->shown_implicit =
		strstr(granted.data, "\nimplicit=true\n") != NULL;
	lock->granted_at = GetCurrentTimestamp();
	zklock_stats_granted(resource, mode, granted.waited,
						 granted.waited ?
						 (double) (lock->granted_at - asked_at) / 1000.0 : 0);
	return lock;
}

/* Drop a local lock whose counts reached zero, and its node */
void
zklock_forget(LocalLock *lock)
{
	zklock_channel_withdraw(lock->idx, lock->generation);
	zklock_stats_released(lock->key.resource, lock->key.mode,
						  zklock_stats_ms_since(lock->granted_at));
	if (lock->xact_holds)
		pfree(lock->xact_holds);
	hash_search(zklock_local_locks, &lock->key, HASH_REMOVE, NULL);
}

/* Release one session hold of a lock, and its parents' implicit holds */
static void
release_session_hold(LocalLock *lock)
{
	char		resource[ZKLOCK_MAX_RESOURCE_LEN + 1];
	bool		parents = lock->parents;

	strlcpy(resource, lock->key.resource, sizeof(resource));
	/* the lock's and its parents' deletes reach the worker together */
	zklock_channel_hold_wakes();
	PG_TRY();
	{
		zklock_drop_hold(lock, true, false);	/* may free lock */
		for (char *p = resource + strlen(resource); parents && p > resource; p--)
		{
			if (*p == '/')
			{
				LocalLock  *parent;

				*p = '\0';
				parent = zklock_held_lock(resource, NULL);
				if (parent)
					zklock_drop_hold(parent, true, true);
			}
		}
	}
	PG_FINALLY();
	{
		zklock_channel_release_wakes();
	}
	PG_END_TRY();
}

/*
 * Release one session-level hold, like pg_advisory_unlock.
 */
bool
zklock_unlock(const char *resource, ZkLockMode mode)
{
	LocalLockKey key;
	LocalLock  *lock;

	zklock_backend_init();
	zklock_check_resource(resource);
	zklock_check_lost(WARNING);
	make_key(&key, resource, mode);
	lock = hash_search(zklock_local_locks, &key, HASH_FIND, NULL);
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
	release_session_hold(lock);
	return true;
}

/*
 * Release every session-level hold, like pg_advisory_unlock_all.  Returns
 * the number of locks whose session-level holds were released.
 */
int
zklock_unlock_all(void)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;
	int			n = 0;

	zklock_backend_init();
	zklock_check_lost(WARNING);
	hash_seq_init(&seq, zklock_local_locks);
	while ((lock = hash_seq_search(&seq)) != NULL)
	{
		if (lock->session_count == 0 && lock->session_implicit == 0)
			continue;
		if (lock->session_count > 0)
			n++;
		lock->session_count = 0;
		lock->session_implicit = 0;
		if (lock->nxact == 0)
			zklock_forget(lock);
		else
			show_holds(lock);
	}
	return n;
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
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;

	zklock_backend_init();
	zklock_check_lost(WARNING);
	hash_seq_init(&seq, zklock_local_locks);
	while ((lock = hash_seq_search(&seq)) != NULL)
	{
		if (strncmp(lock->key.resource, ZKLOCK_ADVISORY_PREFIX,
					strlen(ZKLOCK_ADVISORY_PREFIX)) != 0 ||
			lock->session_count == 0)
			continue;
		lock->session_count = 0;
		if (lock->nxact == 0 && lock->session_implicit == 0)
			zklock_forget(lock);
		else
			show_holds(lock);
	}
}

/*
 * Transaction end (commit or abort): every transaction-level hold goes, and
 * a lock with no session-level hold left goes with them.
 */
static void
end_xact_holds(void)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;

	/* the deletes reach the worker together (one wake, after the last) */
	zklock_channel_hold_wakes();
	PG_TRY();
	{
		hash_seq_init(&seq, zklock_local_locks);
		while ((lock = hash_seq_search(&seq)) != NULL)
		{
			lock->nxact = 0;
			if (lock->session_count == 0 && lock->session_implicit == 0)
				zklock_forget(lock);
			else
				show_holds(lock);
		}
	}
	PG_FINALLY();
	{
		zklock_channel_release_wakes();
	}
	PG_END_TRY();
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
	/* committed (its record written) or aborted: the fence's window closes */
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE)
		zklock_lease_leave_commit();
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
			end_xact_holds();
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
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;

	if (event == SUBXACT_EVENT_ABORT_SUB)
		zklock_extension_guard_reset();	/* as in xact_callback */
	if (zklock_local_locks == NULL)
		return;
	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;

	hash_seq_init(&seq, zklock_local_locks);
	while ((lock = hash_seq_search(&seq)) != NULL)
	{
		int			kept = 0;

		for (int i = 0; i < lock->nxact; i++)
		{
			if (lock->xact_holds[i].subid != mySubid)
				lock->xact_holds[kept++] = lock->xact_holds[i];
			else if (event == SUBXACT_EVENT_COMMIT_SUB)
			{
				lock->xact_holds[i].subid = parentSubid;
				lock->xact_holds[kept++] = lock->xact_holds[i];
			}
		}
		lock->nxact = kept;
		if (lock->nxact == 0 && lock->session_count == 0 &&
			lock->session_implicit == 0)
			zklock_forget(lock);
		else
			show_holds(lock);
	}
}

/*
 * Backend exit, FATAL included: withdraw the pending request and release
 * everything held.  This runs before core's ShutdownPostgres (registered
 * earlier), whose abort of an open transaction calls xact_callback: each
 * lock given back here leaves the local table, so that the abort does not
 * give it back, and count its hold in the statistics, a second time.
 */
static void
backend_exit(int code, Datum arg)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;

	zklock_lease_leave_commit();	/* no commit of ours can land now */
	zklock_withdraw_pending();	/* wait.c */
	zklock_withdraw_batch();	/* acquire.c */
	if (zklock_local_locks == NULL)
		return;
	hash_seq_init(&seq, zklock_local_locks);
	while ((lock = hash_seq_search(&seq)) != NULL)
	{
		zklock_channel_withdraw(lock->idx, lock->generation);
		zklock_stats_released(lock->key.resource, lock->key.mode,
							  zklock_stats_ms_since(lock->granted_at));
		hash_search(zklock_local_locks, &lock->key, HASH_REMOVE, NULL);
	}
}
