/*-------------------------------------------------------------------------
 *
 * acquire.c
 *		Taking a lock, with its parents' SHARED locks, and a set of locks:
 *		all or none, under one timeout.
 *
 * An acquisition is a list of steps (LockStep): each parent's SHARED lock,
 * top down, then the resource itself; a set's steps are sorted by resource
 * so that two sets never deadlock each other.  A step stacks onto a lock
 * this backend holds (local_locks.c's table; no round trip), or asks the
 * worker for a node and waits (wait.c).  Steps are taken in order, and an
 * error or a try not granted undoes every hold the call took.  A lock is
 * reported held only while it is: a stacked step proves it
 * (zklock_prove_held), a new grant must still stand when the backend looks
 * at it (check_grant_stands).
 *
 * Several nodes not held yet are first asked for at once, as try-locks
 * (zklock_take_at_once, acquire_batch.c), so that an uncontended
 * acquisition costs one round trip; if any is not granted, all are given
 * back and the steps are taken one by one, waiting in order.  An error
 * gives that batch back, and so does the exit callback until its locks are
 * entered (wait.c keeps it for that, zklock_withdraw_batch).
 *
 * A session-level acquisition holds the DROP EXTENSION guard (guard.c)
 * from before its first request until that request is submitted.  Every
 * loop over the caller's input serves interrupts, and none is quadratic.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
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
#include "stats.h"
#include "wait_events.h"

/*
 * Stack a step onto the lock this backend holds on its resource (in
 * held_mode): refuse a mode that would wait for this session itself, and a
 * session hold that disagrees about the parents; the lock must be proven
 * held to be reported as held again.
 */
static LocalLock *
stack_step(LocalLock *lock, ZkLockMode held_mode, LockStep *step,
		   bool session)
{
	zklock_check_semaphore_stack(lock, held_mode, step->mode,
								 step->max_holders, step->child);
	/* a parent's SHARED lock is covered by an EXCLUSIVE one we hold */
	if (held_mode != step->mode &&
		!(step->implicit && held_mode == ZKLOCK_EXCLUSIVE))
	{
		char	   *hint = zklock_held_hint(lock);

		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("zklock resource \"%s\" is already held in %s mode by this session",
						step->resource, zklock_mode_name(held_mode)),
				 errdetail("Taking it in %s mode too would wait for this session itself.",
						   zklock_mode_name(step->mode)),
				 errhint("%s", hint)));
	}
	/*
	 * A session-level release takes the parents' holds along when the
	 * lock was taken with them: its session holds must agree on that.
	 */
	if (session && !step->implicit)
	{
		if (lock->session_count > 0 && lock->parents != step->parents)
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("zklock resource \"%s\" is already held %s its parents' locks by this session",
							step->resource, lock->parents ? "with" : "without"),
					 errhint("Take it the same way, or release it first.")));
		lock->parents = step->parents;
	}
	/* reported as held again: it must be held (named as asked for) */
	zklock_prove_held(lock, GetCurrentTimestamp(),
					  zklock_session_timeout + zklock_connect_timeout,
					  step->child ? step->child : step->resource,
					  "it is not taken again");
	zklock_add_hold(lock, session, step->implicit);
	return lock;
}

/*
 * A grant is reported held only while it stands (zklock_channel_grant_stands):
 * a backend that looks at its answer only after the worker stopped, or
 * after the session that holds the node began to end (the worker marked
 * the entry LOST, or withdrew the lease first), must not return the lock
 * as held -- that session is closed or being closed, and another holder
 * may have the lock by now.  And, as a stacked step (zklock_prove_held),
 * only while the lease proves its session alive: a worker stopped (SIGSTOP,
 * starvation) since the grant withdraws nothing, and its session may have
 * expired meanwhile.  The lease is waited for (a new session's first one
 * comes about zklock.lease_margin after it connects) within the bound of
 * the commit fence.  Otherwise the entry goes back to the worker, and the
 * acquire fails with 55P03.
 */
static void
check_grant_stands(int idx, uint32 gen, const char *what)
{
	TimestampTz start = GetCurrentTimestamp();
	int			bound_ms = zklock_session_timeout + zklock_connect_timeout;
	bool		stands = true;
	bool		proven = false;

	zklock_set_pending(idx, gen);	/* a FATAL meanwhile gives it back */
	PG_TRY();
	{
		for (;;)
		{
			stands = zklock_channel_grant_stands(idx, gen, &proven);
			if (!stands || proven ||
				TimestampDifferenceExceeds(start, GetCurrentTimestamp(),
										   bound_ms))
				break;
			(void) WaitLatch(MyLatch,
							 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 50, zklock_wait_event(ZKLOCK_WAIT_LEASE));
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		zklock_set_pending(-1, 0);
		zklock_channel_withdraw(idx, gen);
		PG_RE_THROW();
	}
	PG_END_TRY();
	zklock_set_pending(-1, 0);
	if (proven)
		return;
	zklock_channel_withdraw(idx, gen);
	if (!stands)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("zklock lock on %s was lost as it was granted", what),
				 errdetail("The ZooKeeper session that held its node ended (the zklock worker stopped, or the session expired or was closed) before this backend took the grant; another holder may have been granted the lock since."),
				 errhint("Try again: the worker starts a new ZooKeeper session.")));
	ereport(ERROR,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 errmsg("zklock lock on %s is not proven held as it was granted", what),
			 errdetail("For %d ms, no answer of the ZooKeeper leader has proven that this instance's session is alive for zklock.lease_margin (%d ms) more; another holder may have been granted the lock.",
					   bound_ms, zklock_lease_margin),
			 errhint("zk_lock_status shows the worker's session and lease.")));
}

/*
 * Take one step: stack onto a lock this backend holds, or ask the worker
 * for a node and wait.  Returns the local lock, or NULL when a try-lock
 * was not granted.
 */
static LocalLock *
take_step(LockStep *step, bool session, bool wait, TimestampTz deadline,
		  int timeout_total)
{
	LocalLock  *lock;
	ZkLockMode	held_mode;
	int			idx;
	uint32		gen;
	ZkChannelRequest req;
	ZkEntryState state;
	int			timeout_ms = -1;
	char	   *what;
	LocalLock  *other = NULL;
	TimestampTz asked_at;

	if (step->advisory)
	{
		/*
		 * PostgreSQL lets one backend hold an advisory key both shared and
		 * exclusive: stack onto the same mode only, and tell the worker
		 * which node of ours, of the other mode, must not block us.
		 */
		lock = zklock_held_lock_in(step->resource, step->mode);
		if (lock)
			return stack_step(lock, step->mode, step, session);
		other = zklock_held_lock_in(step->resource,
									step->mode == ZKLOCK_EXCLUSIVE ?
									ZKLOCK_SHARED : ZKLOCK_EXCLUSIVE);
	}
	else if ((lock = zklock_held_lock(step->resource, &held_mode)) != NULL)
		return stack_step(lock, held_mode, step, session);

	if (step->mode == ZKLOCK_SHARED &&
		zklock_naming_style(step->resource) == ZKLOCK_NAMING_CURATOR_MUTEX)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("zklock resource \"%s\" cannot be locked in shared mode",
						step->resource),
				 errdetail("zklock.node_naming names its nodes as Curator's InterProcessMutex does, which has no shared mode.")));

	/* a waiting request with no time left is a try that raises */
	if (wait && deadline != 0)
	{
		TimestampTz now = GetCurrentTimestamp();

		timeout_ms = now >= deadline ? 0 :
			(int) Min(TimestampDifferenceMilliseconds(now, deadline), INT_MAX);
	}

	/* ask the worker */
	zklock_request_init(&req, (wait && timeout_ms != 0) ? ZKR_ACQUIRE : ZKR_TRY_ACQUIRE);
	zklock_step_request(&req, step, session);
	if (other)
	{
		ZkChannelResult held;

		zklock_channel_result(other->idx, other->generation, &held);
		strlcpy(req.ignore_node, held.node, sizeof(req.ignore_node));
	}
	asked_at = GetCurrentTimestamp();
	idx = zklock_submit(&req, &gen);

	what = step->child ?
		psprintf("resource \"%s\" (a parent of \"%s\")", step->resource, step->child) :
		psprintf("resource \"%s\"", step->resource);
	/* a try answers at once; only a real wait gets the deadline */
	state = req.kind == ZKR_ACQUIRE ?
		zklock_wait_counted(idx, gen, what, timeout_ms, timeout_total,
							step->resource, step->mode, asked_at) :
		zklock_wait_for_answer(idx, gen, what, -1, timeout_total, false);

	if (state == ZKE_NOT_GRANTED)
	{
		zklock_channel_withdraw(idx, gen);
		zklock_stats_count(step->resource, step->mode,
						   wait ? ZKLOCK_STAT_TIMEOUT : ZKLOCK_STAT_NOT_GRANTED);
		if (wait)				/* no time was left to wait */
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("could not obtain zklock lock on %s within %d ms",
							what, timeout_total)));
		return NULL;
	}
	if (state == ZKE_FAILED)
		zklock_raise_failure(idx, gen, psprintf("acquire zklock lock on %s", what));
	check_grant_stands(idx, gen, what);

	lock = zklock_enter_lock(step->resource, step->mode,
							 !step->implicit && step->parents, idx, gen, asked_at);
	zklock_add_hold(lock, session, step->implicit);
	return lock;
}

/*
 * Locks zklock_take_at_once made that no step took a hold of: give them back.
 * (Looked up by key: a lock whose holds were dropped is gone already.)
 */
static void
forget_unheld(LocalLockKey *made, int nmade)
{
	for (int i = 0; i < nmade; i++)
	{
		LocalLock  *lock = hash_search(zklock_local_locks, &made[i], HASH_FIND, NULL);

		if (lock && lock->session_count == 0 && lock->session_implicit == 0 &&
			lock->nxact == 0)
			zklock_forget(lock);
	}
}

/*
 * Take the steps in order, all or none: if one is not granted (try) or
 * raises (timeout, cancel, error), every hold taken so far by this call is
 * undone.  Returns false for a try that was not granted.
 */
static bool
take_steps(LockStep *steps, int nsteps, bool session, bool wait,
		   int timeout_ms)
{
	TimestampTz deadline = 0;
	volatile int ntaken = 0;
	bool		granted = true;
	LocalLockKey made[ZKLOCK_MAX_BATCH];
	volatile int nmade;

	if (timeout_ms >= 0)
		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											   timeout_ms);
	nmade = zklock_take_at_once(steps, nsteps, made, session, wait,
								deadline, timeout_ms);
	if (nmade < 0)
	{
		if (!wait)
			return false;		/* a try: something is taken now */
		nmade = 0;				/* wait for each in order */
		/* the batch was given back: nothing a DROP would count now */
		if (session)
			zklock_extension_guard_begin();
	}

	PG_TRY();
	{
		for (int i = 0; i < nsteps; i++)
		{
			CHECK_FOR_INTERRUPTS();
			steps[i].lock = take_step(&steps[i], session, wait, deadline,
									  timeout_ms);
			if (steps[i].lock == NULL)
			{
				granted = false;
				break;
			}
			ntaken = i + 1;
		}
	}
	PG_CATCH();
	{
		for (int i = ntaken - 1; i >= 0; i--)
			zklock_drop_hold(steps[i].lock, session, steps[i].implicit);
		forget_unheld(made, nmade);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (!granted)
		for (int i = ntaken - 1; i >= 0; i--)
			zklock_drop_hold(steps[i].lock, session, steps[i].implicit);
	forget_unheld(made, nmade);
	return granted;
}

/*
 * Append the steps for one requested resource: its parents' SHARED locks
 * first (top down), when asked, then the resource itself.
 */
static int
add_steps(LockStep *steps, int n, const char *resource, ZkLockMode mode,
		  bool parents, int input)
{
	if (parents)
	{
		for (const char *p = resource; (p = strchr(p, '/')) != NULL; p++)
		{
			memcpy(steps[n].resource, resource, p - resource);
			steps[n].resource[p - resource] = '\0';
			/* Curator's mutex cannot express a SHARED parent lock */
			if (zklock_naming_style(steps[n].resource) ==
				ZKLOCK_NAMING_CURATOR_MUTEX)
				continue;
			steps[n].mode = ZKLOCK_SHARED;
			steps[n].max_holders = 0;
			steps[n].implicit = true;
			steps[n].parents = false;
			steps[n].input = -1;
			steps[n].child = resource;
			n++;
		}
	}
	strlcpy(steps[n].resource, resource, sizeof(steps[n].resource));
	steps[n].mode = mode;
	steps[n].max_holders = 0;	/* a semaphore's: lock_resource sets it */
	steps[n].implicit = false;
	steps[n].parents = parents && strchr(resource, '/') != NULL;
	steps[n].input = input;
	steps[n].child = NULL;
	return n + 1;
}

/*
 * Take a lock, with its parents' SHARED locks when parents is true (Hive's
 * semantics: "db/table/part" in any mode takes "db" and "db/table" SHARED),
 * or (mode SEMAPHORE, 1.4) a slot of a semaphore of max_holders, whose rule
 * the worker applies, or (advisory) an advisory key, whose name zklock
 * made.  Returns the fencing token; *acquired is false only when wait is
 * false and the lock is held elsewhere (try-lock).
 */
static int64
lock_one(const char *resource, ZkLockMode mode, int max_holders, bool session,
		 bool wait, int timeout_ms, bool parents, bool advisory,
		 bool *acquired)
{
	LockStep   *steps;
	int			nsteps;

	zklock_backend_init();
	if (!advisory)
	{
		zklock_check_resource(resource);
		zklock_check_allowed(resource);
	}
	*acquired = false;
	zklock_check_lost(ERROR);
	steps = palloc0(sizeof(LockStep) * (zklock_resource_depth(resource) + 1));
	nsteps = add_steps(steps, 0, resource, mode, parents, 0);
	steps[nsteps - 1].advisory = advisory;
	steps[nsteps - 1].max_holders = max_holders;
	if (session)
		zklock_extension_guard_begin();
	*acquired = take_steps(steps, nsteps, session, wait, timeout_ms);
	zklock_extension_guard_end();
	if (!*acquired)
		return 0;
	return steps[nsteps - 1].lock->token;
}

/*
 * Take an advisory key (advisory.c): a resource under the reserved prefix,
 * made there, not named by the user; no parents' locks, no timeout.
 */
bool
zklock_lock_advisory(const char *resource, ZkLockMode mode, bool session,
					 bool wait)
{
	bool		acquired;

	lock_one(resource, mode, 0, session, wait, -1, false, true, &acquired);
	return acquired;
}

int64
zklock_lock(const char *resource, ZkLockMode mode, bool session, bool wait,
			int timeout_ms, bool parents, bool *acquired)
{
	return lock_one(resource, mode, 0, session, wait, timeout_ms, parents,
					false, acquired);
}

/* A semaphore's slot (1.4): as a lock is taken, with its parents' locks */
int64
zklock_semaphore_lock(const char *resource, int max_holders, bool session,
					  bool wait, int timeout_ms, bool *acquired)
{
	return lock_one(resource, ZKLOCK_SEMAPHORE, max_holders, session, wait,
					timeout_ms, true, false, acquired);
}

static int
step_cmp(const void *a, const void *b)
{
	const LockStep *x = a;
	const LockStep *y = b;
	int			c = strcmp(x->resource, y->resource);

	if (c != 0)
		return c;
	/* of one resource, the explicit step first: it absorbs the others */
	return (int) x->implicit - (int) y->implicit;
}

/* Order a set's input positions by resource name, then by position */
static int
input_cmp(const void *a, const void *b, void *arg)
{
	char	  **resources = (char **) arg;
	int			x = *(const int *) a;
	int			y = *(const int *) b;
	int			c = strcmp(resources[x], resources[y]);

	if (c != 0)
		return c;
	return (x > y) - (x < y);
}

/* bsearch over a set's distinct resources (sorted by name) */
typedef struct NameKey
{
	const char *name;
	char	  **resources;
} NameKey;

static int
name_key_cmp(const void *key, const void *member)
{
	const NameKey *k = key;

	return strcmp(k->name, k->resources[*(const int *) member]);
}

/*
 * The new entries a lock set needs: its distinct resources (order[0 ..
 * ndistinct), sorted by name) and their parents, each once, less those this
 * backend holds already; Curator-mutex parents are not taken (add_steps).
 * A parent "a/b" is counted at the first resource below it: the names
 * beginning with "a/b/" are adjacent in sorted order, so that is the one
 * whose predecessor does not begin with "a/b/".  Linear in the names'
 * length, with a binary search per parent, and no allocation: the set may
 * be huge.
 */
static int
set_entries_needed(char **resources, int *order, int ndistinct)
{
	int			nneeded = 0;
	const char *prev = NULL;

	for (int d = 0; d < ndistinct; d++)
	{
		const char *r = resources[order[d]];
		size_t		common = 0;

		CHECK_FOR_INTERRUPTS();
		if (!zklock_held_lock(r, NULL))
			nneeded++;
		if (prev)
			while (prev[common] && prev[common] == r[common])
				common++;
		/* a parent shared with prev ends inside the common part: skipped */
		for (const char *p = r + common; (p = strchr(p, '/')) != NULL; p++)
		{
			char		parent[ZKLOCK_MAX_RESOURCE_LEN + 1];
			NameKey		key;

			memcpy(parent, r, p - r);
			parent[p - r] = '\0';
			key.name = parent;
			key.resources = resources;
			if (bsearch(&key, order, ndistinct, sizeof(int), name_key_cmp))
				continue;		/* named in the set: counted as such */
			if (zklock_naming_style(parent) == ZKLOCK_NAMING_CURATOR_MUTEX)
				continue;		/* not taken */
			if (!zklock_held_lock(parent, NULL))
				nneeded++;
		}
		prev = r;
	}
	return nneeded;
}

/*
 * A resource listed twice is one lock, in the strongest mode asked (and
 * one set of parent holds, which its release gives back): sort the
 * positions by name; first[i] gets the first position of resources[i],
 * order[] the distinct resources, sorted by name (their number is
 * returned), and *total the number of steps they need at most, parents
 * included.
 */
static int
merge_duplicates(int n, char **resources, ZkLockMode *modes, int *order,
				 int *first, Size *total)
{
	int			ndistinct = 0;

	for (int i = 0; i < n; i++)
		order[i] = i;
	qsort_arg(order, n, sizeof(int), input_cmp, resources);
	for (int k = 0; k < n;)
	{
		int			rep = order[k];
		int			j = k;

		CHECK_FOR_INTERRUPTS();
		while (j < n && strcmp(resources[order[j]], resources[rep]) == 0)
		{
			first[order[j]] = rep;
			if (modes[order[j]] == ZKLOCK_EXCLUSIVE)
				modes[rep] = ZKLOCK_EXCLUSIVE;
			j++;
		}
		order[ndistinct++] = rep;	/* distinct resources, reusing the array */
		*total += zklock_resource_depth(resources[rep]) + 1;
		k = j;
	}
	return ndistinct;
}

/*
 * Each resource not held yet needs a shared entry, and so does each of
 * their parents not held yet, counted once: a set that cannot fit into
 * this backend's share fails now, before any of it is taken.
 */
static void
check_set_fits(char **resources, int *order, int ndistinct)
{
	int			nneeded = set_entries_needed(resources, order, ndistinct);

	if (nneeded > zklock_max_locks_per_backend)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("a zklock lock set needing %d new lock entries exceeds this backend's share",
						nneeded),
				 errdetail("A backend may hold or wait for %d lock nodes at once, its parents' locks included.",
						   zklock_max_locks_per_backend),
				 errhint("Take fewer locks at once, or increase zklock.max_locks_per_backend.")));
}

/*
 * The steps of a set's distinct resources (order[0 .. ndistinct), at most
 * total steps) with their parents', in canonical order: sorted by
 * resource, one explicit step per resource.  Returns them, and their
 * number in *nsteps.
 */
static LockStep *
set_steps(char **resources, ZkLockMode *modes, int *order, int ndistinct,
		  Size total, int *nsteps)
{
	LockStep   *steps;
	int			nall = 0;
	int			kept = 0;

	steps = MemoryContextAllocExtended(CurrentMemoryContext,
									   mul_size(sizeof(LockStep), Max(total, 1)),
									   MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	for (int d = 0; d < ndistinct; d++)
	{
		int			rep = order[d];

		CHECK_FOR_INTERRUPTS();
		nall = add_steps(steps, nall, resources[rep], modes[rep], true, rep);
	}
	qsort(steps, nall, sizeof(LockStep), step_cmp);

	/*
	 * Of one resource, the explicit step (one per resource now) sorts
	 * first.  A parent's implicit steps stay: each stacks one implicit hold
	 * onto the lock taken before it, so that releasing one member, or the
	 * parent itself, leaves the other members' parent locks in place.
	 */
	for (int i = 0; i < nall; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (kept > 0 && !steps[i].implicit && !steps[kept - 1].implicit &&
			strcmp(steps[kept - 1].resource, steps[i].resource) == 0)
		{
			if (steps[i].mode == ZKLOCK_EXCLUSIVE)
				steps[kept - 1].mode = ZKLOCK_EXCLUSIVE;
			continue;
		}
		steps[kept++] = steps[i];
	}
	*nsteps = kept;
	return steps;
}

/*
 * Take a set of locks, all or none, under one timeout.  The steps (with the
 * parents' locks) are put in one canonical order, sorted by resource, so
 * two sets can never deadlock each other; a resource asked for twice, or
 * both directly and as a parent, is taken once in the strongest mode.
 * tokens[i] gets the token of resources[i].  Returns false for a try that
 * was not granted (and then nothing is held).
 *
 * The set is the user's input, of any size: every pass over it is
 * O(n log n) at most (sorted, never compared pair by pair) and serves
 * interrupts.
 */
bool
zklock_lock_set(int n, char **resources, ZkLockMode *modes, bool session,
				bool wait, int timeout_ms, int64 *tokens)
{
	LockStep   *steps;
	int		   *order;
	int		   *first;
	int			nsteps;
	Size		total = 0;
	int			ndistinct;
	bool		granted;

	zklock_backend_init();
	zklock_check_lost(ERROR);
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		zklock_check_resource(resources[i]);
		zklock_check_allowed(resources[i]);
	}

	order = palloc(sizeof(int) * n);
	first = palloc(sizeof(int) * n);
	ndistinct = merge_duplicates(n, resources, modes, order, first, &total);
	check_set_fits(resources, order, ndistinct);
	steps = set_steps(resources, modes, order, ndistinct, total, &nsteps);

	if (session)
		zklock_extension_guard_begin();
	granted = take_steps(steps, nsteps, session, wait, timeout_ms);
	zklock_extension_guard_end();
	if (!granted)
		return false;
	for (int i = 0; i < nsteps; i++)
		if (steps[i].input >= 0)
			tokens[steps[i].input] = steps[i].lock->token;
	/* a resource listed twice shares its token */
	for (int i = 0; i < n; i++)
		tokens[i] = tokens[first[i]];
	return true;
}
