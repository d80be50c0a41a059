/*-------------------------------------------------------------------------
 *
 * local_locks.c
 *		What this backend holds: the local lock table, the holds of each
 *		lock in its scopes, and every change of them, up to their ends at
 *		a release, a transaction's or subtransaction's end and exit.
 *
 * Reentrancy and scope never cost a ZooKeeper round trip: a backend keeps
 * its locks in a local hash table keyed by (resource, mode) with a session
 * count and a stack of transaction-level holds (one per acquisition, tagged
 * with the subtransaction that took it), exactly as PostgreSQL counts
 * advisory locks.  One shared entry, hence one lock node, backs each local
 * lock however often it is taken.  The table is this backend's own memory
 * (TopMemoryContext): no lock guards it.
 *
 * Ending a hold never raises an ERROR: after the commit record is written an
 * ERROR would be a PANIC.  A lock whose last hold ends is handed to the
 * worker (the entry goes to RELEASING, zklock_channel_withdraw) and never
 * waited for.  When the holds change, so does what the node's data says
 * of them (show_holds), written by the worker without anyone waiting.
 *
 * When holds end is backend.c's (its callbacks and the session-level
 * releases call the ends here), and acquire.c's when a call undoes what it
 * took.  Nothing here calls the fence (fence.c), which reads this table.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "mb/pg_wchar.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "backend_int.h"
#include "channel.h"
#include "zklock.h"
#include "resource.h"
#include "nodedata.h"
#include "stats.h"

/* this backend's locks: LocalLock by (resource, mode) */
HTAB	   *zklock_local_locks = NULL;

/* First use in this backend (zklock_backend_init): the empty table */
void
zklock_local_locks_init(void)
{
	HASHCTL		ctl;

	ctl.keysize = sizeof(LocalLockKey);
	ctl.entrysize = sizeof(LocalLock);
	ctl.hcxt = TopMemoryContext;
	zklock_local_locks = hash_create("zklock local locks", 16, &ctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
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
void
zklock_release_session_hold(LocalLock *lock)
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
 * Drop every session-level hold (zk_lock_release_all).  Returns the number
 * of locks whose own session-level holds were dropped.
 */
int
zklock_drop_session_holds(void)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;
	int			n = 0;

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
 * Drop every session-level advisory hold, in any namespace
 * (zk_advisory_unlock_all); zk_lock_* locks and transaction-level holds
 * stay.
 */
void
zklock_drop_advisory_session_holds(void)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;

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
void
zklock_end_xact_holds(void)
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
 * A subtransaction's end: ROLLBACK TO (commit false) releases what it
 * took; RELEASE (commit true) hands its holds to the parent.
 */
void
zklock_end_subxact_holds(bool commit, SubTransactionId mySubid,
						 SubTransactionId parentSubid)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;

	hash_seq_init(&seq, zklock_local_locks);
	while ((lock = hash_seq_search(&seq)) != NULL)
	{
		int			kept = 0;

		for (int i = 0; i < lock->nxact; i++)
		{
			if (lock->xact_holds[i].subid != mySubid)
				lock->xact_holds[kept++] = lock->xact_holds[i];
			else if (commit)
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
 * Backend exit, FATAL included: give back every lock, each taken out of the
 * table as it goes (why: backend_exit, backend.c).  Never raises an ERROR.
 */
void
zklock_forget_all_at_exit(void)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;

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
