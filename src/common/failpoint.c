/*-------------------------------------------------------------------------
 *
 * failpoint.c
 *		Failpoints: let a test stop the worker at a named point, so that a
 *		race becomes a deterministic test.
 *
 * Built only with "make FAILPOINTS=1" (the test command does); a normal
 * build has neither this file's code nor the setting.  The setting
 * zklock.failpoints (reloadable, superuser only through the configuration
 * files) is a comma-separated list of name=action, where action is
 *
 *	pause		wait, serving reloads, until the setting no longer says
 *				pause for this name (at most five minutes)
 *	sleep:N		sleep N milliseconds
 *	fail		the caller treats the operation as failed (what failing
 *				means is said where the point is)
 *	exit		proc_exit(1), as a crash of the worker would end it
 *	error		raise an ERROR there, as an out of memory at that point
 *				would (the worker's ends the worker: worker.c)
 *
 * Every point reached with an action logs "zklock: failpoint "name"
 * reached (action)", which a test waits for.
 *
 * The points (protocol.c, worker.c, root.c, orphan.c and
 * deadlock_publish.c; deadlock.c and wait.c in backends), and what "fail"
 * does at each:
 *
 *	after-create-reply	a create's successful reply arrived; fail: drop it
 *						as a connection loss would, so the node is found
 *						again by its prefix and adopted (or not) by its
 *						ephemeralOwner
 *	election-after-create-reply	election.c: the same for a candidate
 *						node (found by the instance's prefix, adopted by
 *						its ephemeralOwner)
 *	before-guard		a lock was granted, or its node changed, and its
 *						guard (a read with a watch) is not set yet; fail:
 *						as if the request's reply was lost
 *	before-wait			a waiter is about to watch the node it waits
 *						behind (sleep: that node may go meanwhile, and the
 *						exists then finds no node); fail: as if the exists
 *						could not be sent (the children are listed again)
 *	before-delete		a delete of our node is about to be sent; fail: as
 *						if its reply was lost (retried)
 *	force-read-reply	admin.c: a force release's read of the node came
 *						back; fail: as a connection loss (read again, never
 *						deleted early)
 *	before-revoke-post	admin.c: a revocation was written, its note to the
 *						holder's mailbox not sent yet; fail: as if it could
 *						not be sent (the request fails, 38000)
 *	explicit-grant-sent	an explicit request's granting write (and the
 *						delete of its waiter child) was sent, its reply not
 *						read yet (no "fail"; "exit" ends the worker there)
 *	queue-before-move	worker/recipes/queue.c: a committed transaction's
 *						queue item is about to be moved from pending into
 *						entries (no "fail"; "pause", then a crash, leaves
 *						it to queue_pending.c's walk)
 *	queue-before-hold	worker/recipes/queue.c: a take is about to send the
 *						create of its hold on an entry a listing showed
 *						(sleep: puts and releases land meanwhile, their
 *						notifications wait; no "fail")
 *	queue-wait-before-exists	queue_wait.c: a waiting takers' listing found
 *						no entries (or taken) node, the exists that sets
 *						its creation watch is about to be sent; fail: as if
 *						it could not be sent (the connection just lost):
 *						the group lists again once connected
 *	queue-hold-reply	worker/recipes/queue.c: a hold's create was answered,
 *						its entry's read (sent behind it) not handled yet
 *						(pause: the entry may be consumed meanwhile; no
 *						"fail")
 *	queue-before-guard	worker/recipes/queue_release.c: a take was
 *						granted (or its hold changed), the exists that
 *						watches its hold not sent yet; fail: as if it could
 *						not be sent (disconnected): sent again by q_retry
 *	queue-before-consume	worker/recipes/queue_release.c: a committed
 *						take's multi (delete entry and hold) is about to
 *						be sent (pause: either may go meanwhile; no "fail")
 *	orphans-loaded		orphan.c: the next worker read the orphans' file and
 *						deleted nothing yet (no "fail")
 *	session-lost-before-close	held locks are marked lost, the session
 *						not closed yet (no "fail")
 *	root-acl-check		root.c: the chroot was found, the credentials'
 *						part of the root check not sent yet (no "fail")
 *	before-commit-cancel	lease.c: the worker counted the commit windows
 *						it waited a session timeout for and has not
 *						cancelled their backends yet (sleep, pause: one may
 *						leave its window meanwhile; no "fail")
 *	commit-cancel-locked	lease.c: under the lock in exclusive mode, a
 *						window to cancel was seen open, its backend not
 *						signalled yet ("sleep" only: the backend's end of
 *						its window waits for the lock meanwhile)
 *	deadlock-before-withdraw	deadlock.c, in a backend: a deadlock's
 *						victim found the cycle again and has not withdrawn
 *						its request yet (sleep: it may be granted
 *						meanwhile, and must then go on; no "fail")
 *	waits-rebuild-locked	deadlock_publish.c: the worker rebuilds the
 *						publication of long waits, holding
 *						zklock_shared->lock (shared), at a long wait
 *						(error: as an out of memory there; no "fail")
 *	queue-fence-window	backend/queue.c, in a backend: the queue fence
 *						proved its holds and opened the commit window,
 *						its second look not made (pause: a hold may be
 *						deleted meanwhile; no "fail")
 *	backend-before-answer	wait.c, in a backend: about to look for the
 *						worker's answer to its request (pause: the worker
 *						may answer, stop and close its session meanwhile;
 *						no "fail")
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"

#include "failpoint.h"
#include "compat.h"
#include "wait_events.h"

#ifdef ZKLOCK_FAILPOINTS

char	   *zklock_failpoints = NULL;

void
zklock_define_failpoints(void)
{
	DefineCustomStringVariable("zklock.failpoints",
							   "Test builds only: named points where the worker pauses, sleeps, fails or exits.",
							   NULL,
							   &zklock_failpoints,
							   "",
							   PGC_SIGHUP,
							   GUC_NOT_IN_SAMPLE,
							   NULL, NULL, NULL);
}

/* The action the setting gives for a point, copied into buf; false if none */
static bool
failpoint_action(const char *name, char *buf, size_t buflen)
{
	size_t		len = strlen(name);
	const char *p = zklock_failpoints;

	while (p && *p)
	{
		const char *end = strchr(p, ',');
		size_t		itemlen = end ? (size_t) (end - p) : strlen(p);

		if (itemlen > len && strncmp(p, name, len) == 0 && p[len] == '=')
		{
			size_t		alen = Min(itemlen - len - 1, buflen - 1);

			memcpy(buf, p + len + 1, alen);
			buf[alen] = '\0';
			return true;
		}
		p = end ? end + 1 : NULL;
	}
	return false;
}

bool
zklock_failpoint(const char *name)
{
	char		action[64];

	if (!failpoint_action(name, action, sizeof(action)))
		return false;
	ereport(LOG,
			(errmsg("zklock: failpoint \"%s\" reached (%s)", name, action)));
	if (strcmp(action, "fail") == 0)
		return true;
	if (strcmp(action, "exit") == 0)
		proc_exit(1);
	if (strcmp(action, "error") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("zklock: failpoint \"%s\" raised an error", name)));
	if (strncmp(action, "sleep:", 6) == 0)
		pg_usleep(atol(action + 6) * 1000L);
	else if (strcmp(action, "pause") == 0)
	{
		for (int i = 0; i < 3000 && !ShutdownRequestPending; i++)
		{
			if (ConfigReloadPending)
			{
				ConfigReloadPending = false;
				ProcessConfigFile(PGC_SIGHUP);
			}
			if (!failpoint_action(name, action, sizeof(action)) ||
				strcmp(action, "pause") != 0)
				break;
			(void) WaitLatch(MyLatch,
							 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 100, ZKLOCK_WORKER_WAIT_EVENT);
			ResetLatch(MyLatch);
		}
		ereport(LOG,
				(errmsg("zklock: failpoint \"%s\" released", name)));
	}
	return false;
}

#endif							/* ZKLOCK_FAILPOINTS */
