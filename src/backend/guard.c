/*-------------------------------------------------------------------------
 *
 * guard.c
 *		DROP EXTENSION against session locks: the guard a session-level
 *		acquire holds, and the count of this instance's lock entries in a
 *		database that zklock.c's object-access hook refuses a DROP by.
 *
 * A session lock outlives the statement that takes it, and only the
 * extension's functions release it.  DROP EXTENSION is refused while this
 * instance's backends hold or wait for locks in the database (zklock.c):
 * it takes the extension object in AccessExclusiveLock, then counts the
 * shared entries.  A session-level acquire takes that object in
 * AccessShareLock before its first request exists and keeps it only until
 * that request is visible to such a count (zklock_extension_guard_end,
 * called by wait.c once it is submitted): a DROP then either counts it, or came first, and the acquire
 * fails before any node is made.  A DROP in progress is not waited for
 * (its transaction may stay open for as long as it likes): 55006 at once.
 * The object is not kept during the wait, so a DROP never waits for a
 * waiter; when the pipelined try of several nodes (zklock_take_at_once,
 * in acquire_batch.c) gives them back to wait for them one by one, the
 * object is taken again until the first of those requests is visible.  An
 * abort releases the object by itself: the transaction callbacks then only
 * forget it (zklock_extension_guard_reset).
 *
 * The extension's OID is looked up in pg_extension (an index scan, no
 * syscache) once, and then kept in extension_oid_cache until any pg_proc
 * invalidation arrives (a syscache callback): a DROP EXTENSION deletes
 * the extension's functions, so its commit reaches every backend as
 * pg_proc invalidations, and so does an overflow of the invalidation
 * queue (which calls every callback).  An acquire takes the object by the
 * cached OID, reads the invalidations that arrived meanwhile, and trusts
 * the OID only if the cache survived them; otherwise it looks the OID up
 * again, under the object's lock, as before.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/inval.h"
#include "utils/syscache.h"

#include "backend.h"
#include "backend_int.h"
#include "channel.h"
#include "zklock.h"
#include "shmem.h"

/* the extension object held by zklock_extension_guard_begin, if any */
static Oid	extension_guarded = InvalidOid;

static void
extension_gone_error(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("extension \"zklock\" does not exist in this database"),
			 errdetail("It was dropped while this session lock was asked for; no lock was taken.")));
}

/*
 * The extension's OID, valid until a pg_proc invalidation arrives (see the
 * file header); InvalidOid when unknown.
 */
static Oid	extension_oid_cache = InvalidOid;
static bool extension_callback_registered = false;

static void
extension_oid_invalidate(Datum arg, int cacheid, uint32 hashvalue)
{
	extension_oid_cache = InvalidOid;
}

/*
 * Before a session-level acquire's first request: take the extension
 * object in AccessShareLock, or raise.
 */
void
zklock_extension_guard_begin(void)
{
	Oid			ext;

	if (OidIsValid(extension_guarded))
		return;					/* held already */
	ext = extension_oid_cache;
	if (!OidIsValid(ext))
		ext = get_extension_oid("zklock", true);
	if (!OidIsValid(ext))
		extension_gone_error();
	if (!ConditionalLockDatabaseObject(ExtensionRelationId, ext, 0,
									   AccessShareLock))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("extension \"zklock\" is being dropped or altered"),
				 errdetail("Another transaction holds or waits for the extension in ACCESS EXCLUSIVE mode (DROP EXTENSION, or ALTER EXTENSION); a session lock taken now might not be releasable once it commits. No lock was taken."),
				 errhint("Try again once that transaction has ended.")));
	/* a DROP that committed before we took the object has sent these */
	AcceptInvalidationMessages();
	if (extension_oid_cache != ext)
	{
		/* not known, or a pg_proc change came since: look again */
		if (get_extension_oid("zklock", true) != ext)
		{
			UnlockDatabaseObject(ExtensionRelationId, ext, 0, AccessShareLock);
			extension_gone_error();
		}
		if (!extension_callback_registered)
		{
			CacheRegisterSyscacheCallback(PROCOID, extension_oid_invalidate,
										  (Datum) 0);
			extension_callback_registered = true;
		}
		extension_oid_cache = ext;
	}
	extension_guarded = ext;
}

/* Our request is visible to a DROP's count now, or was never needed */
void
zklock_extension_guard_end(void)
{
	if (!OidIsValid(extension_guarded))
		return;
	UnlockDatabaseObject(ExtensionRelationId, extension_guarded, 0,
						 AccessShareLock);
	extension_guarded = InvalidOid;
}

/*
 * The transaction or subtransaction that took the object aborted, which
 * released it: forget it, without releasing it again.
 */
void
zklock_extension_guard_reset(void)
{
	extension_guarded = InvalidOid;
}

/*
 * How many lock entries backends of this instance connected to database
 * dbid hold or wait for (sets *first_pid to one of those backends): what a
 * DROP EXTENSION would leave with no function to release it (zklock.c).
 * Entries being released, finished requests, listings and administrative
 * requests do not count.
 */
int
zklock_database_locks(Oid dbid, int *first_pid)
{
	int			n = 0;

	*first_pid = 0;
	if (zklock_shared == NULL)
		return 0;
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	for (int i = 0; i < zklock_shared->nentries; i++)
	{
		ZkLockEntry *e = &zklock_shared->entries[i];
		PGPROC	   *proc;

		if ((e->kind != ZKR_ACQUIRE && e->kind != ZKR_TRY_ACQUIRE) ||
			(e->state != ZKE_REQUESTED && e->state != ZKE_GRANTED &&
			 e->state != ZKE_LOST) ||
			e->owner_procno < 0 ||
			e->owner_procno >= (int) ProcGlobal->allProcCount)
			continue;
		proc = &ProcGlobal->allProcs[e->owner_procno];
		if (proc->pid != e->owner_pid || proc->databaseId != dbid)
			continue;
		if (n++ == 0)
			*first_pid = e->owner_pid;
	}
	LWLockRelease(zklock_shared->lock);
	return n;
}
