/*-------------------------------------------------------------------------
 *
 * deadlock.c
 *		A waiting backend's search for a deadlock through its own zklock
 *		wait, across instances and with PostgreSQL's own lock waits on this
 *		instance, and the error that breaks it.  Design: doc/deadlocks.md.
 *
 * A backend whose wait for a zklock lock has lasted zklock.deadlock_timeout
 * (-1: core's deadlock_timeout; 0: off) marks its entry, so that its worker
 * publishes the wait (deadlock_publish.c), and then, while it waits (at one
 * timeout, two, four, eight, and then every DL_MAX_SPACING timeouts), reads
 * every instance's published long waits (deadlock_read.c: a ZKR_WAITS
 * request beside its pending one) and looks for a cycle through itself:
 *
 *	- a vertex is a backend, (ZooKeeper session of its instance, pid);
 *	- a published wait, node n under resource R, waits for the owner of
 *	  every node of R with a lower sequence number whose mode conflicts
 *	  (zklock_modes_conflict), as published (the waiters' own nodes) or in
 *	  this instance's shared table (its granted entries);
 *	- a backend of this instance that waits for no zklock lock waits for
 *	  the pids pg_blocking_pids() names.
 *
 * The victim of a cycle is its zklock request with the highest czxid (the
 * youngest; a tie, creates of one multi, broken by session and pid), by
 * the same rule on every instance; in a cycle through a
 * lock-manager edge, which only this instance's backends can see, the
 * youngest of this instance's zklock requests in it.  Only the victim acts:
 * it reads again, finds a cycle through itself with itself the victim
 * again, checks in ZooKeeper each edge of it that another instance's
 * publication gave (cycle_stands: a stopped worker's publication names
 * nodes deleted since), withdraws its request if and only if it still
 * waits (zklock_channel_withdraw_waiting) and raises 40P01.  The search visits
 * at most DL_MAX_VERTICES backends and lasts at most the timeout (at
 * least a second); giving up is logged.
 *
 * The graph, its edges as above and its walk, is deadlock_graph.c's
 * (deadlock_int.h); this file is the search: its schedule, the cycle and
 * its victim, the victim's check in ZooKeeper, and the 40P01.
 *
 * Everything here runs in the waiting backend, in a memory context of the
 * search; shared state is read under zklock_shared->lock and changed only
 * through channel.c.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "backend_int.h"
#include "channel.h"
#include "deadlock_int.h"
#include "failpoint.h"
#include "grant_rule.h"
#include "nodedata.h"
#include "resource.h"
#include "settings.h"
#include "shmem.h"
#include "stats.h"
#include "zklock.h"

#define DL_RETRY_MS			300 /* our own wait not published yet */
#define DL_MIN_INTERVAL_MS	100 /* between two searches of one wait */
#define DL_MAX_SPACING		8	/* timeouts between two searches, at most */

/* The wait being watched: its search's schedule */
static int	cur_idx = -1;
static uint32 cur_gen = 0;
static TimestampTz cur_since = 0;
static bool cur_marked = false;
static bool cur_gave_up = false;	/* a give-up of this wait was logged */
static int	cur_searches = 0;	/* searches of this wait that read it */
static TimestampTz next_search = 0;

/*
 * A search gave up: no victim.  Logged once per wait (an outage would
 * otherwise log at every timeout of every waiter).
 */
static void
give_up(const char *why)
{
	if (cur_gave_up)
		return;
	cur_gave_up = true;
	ereport(LOG,
			(errmsg("zklock: deadlock search of process %d gave up: %s",
					MyProcPid, why),
			 errdetail("No victim is chosen by this search; it is tried again while the wait lasts.")));
}

static int
deadlock_timeout_ms(void)
{
	return zklock_deadlock_timeout < 0 ? DeadlockTimeout :
		zklock_deadlock_timeout;
}

/*
 * Read the waits and look for a cycle through (my session, MyProcPid).
 * Returns the cycle (vertex indexes, from us), or NIL; *published says
 * whether our own wait was in the publication.  *victim_me: whether we are
 * the cycle's youngest zklock request.
 */
static List *
find_cycle(DlGraph *g, bool *published, bool *victim_me)
{
	const char *why = NULL;
	char	   *text = zklock_deadlock_read_waits(g->deadline, &why);
	List	   *path = NIL;
	int			me;
	int			victim = -1;
	bool		mixed = false;
	ListCell   *lc;

	*published = false;
	*victim_me = false;
	if (text == NULL)
	{
		if (why)
			give_up(why);
		return NIL;
	}
	zklock_deadlock_add_local(g);
	zklock_deadlock_parse_waits(g, text);
	qsort(g->n, g->nn, sizeof(DlNode), zklock_deadlock_cmp_node);
	me = zklock_deadlock_vertex(g, g->my_session, MyProcPid);
	if (!g->v[me].waits)
		return NIL;
	*published = true;
	if (!zklock_deadlock_dfs(g, me, me, &path))
	{
		if (g->gave_up)
			give_up(psprintf("%d backends visited; a search visits at most %d and lasts at most zklock.deadlock_timeout (at least 1 s)",
							 g->nvisited - 1, DL_MAX_VERTICES));
		return NIL;
	}
	/*
	 * A lock-manager edge is seen on its own instance only (ours: see
	 * out_edges, deadlock_graph.c), so only our backends can find such a
	 * cycle: its victim is the youngest zklock request of this instance in
	 * it, which every backend that can find it picks alike.
	 */
	foreach(lc, path)
		if (!g->v[lfirst_int(lc)].waits)
			mixed = true;
	foreach(lc, path)
	{
		DlVertex   *v = &g->v[lfirst_int(lc)];

		if (v->waits && (!mixed || v->session == g->my_session) &&
			(victim < 0 || zklock_deadlock_younger(v, &g->v[victim])))
			victim = lfirst_int(lc);
	}
	*victim_me = victim == me;
	return path;
}

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/*
 * Does the edge from waiting vertex vi to vertex ni still stand in
 * ZooKeeper: vi's node exists, and so does one of ni's nodes of that
 * resource that vi waits for (below it, of a conflicting mode)?  One
 * getChildren of the resource, through the worker.  *unread: it could not
 * be read (no answer either way).
 */
static bool
edge_stands(DlGraph *g, int vi, int ni, bool *unread)
{
	DlVertex   *v = &g->v[vi];
	DlVertex   *next = &g->v[ni];
	const char *why = NULL;
	char	   *text;
	char	  **names;
	int			nnames = 0;
	char	   *p;

	/*
	 * A resource no zklock instance can hold (empty: the worker would take
	 * the request for a read of every publication; or too long for the
	 * request, which would list a shorter one): a forged line, no edge
	 */
	*unread = false;
	if (v->resource[0] == '\0' ||
		strlen(v->resource) > ZKLOCK_MAX_RESOURCE_LEN)
		return false;
	text = zklock_deadlock_read_children(v->resource, g->deadline, &why);
	*unread = text == NULL;
	if (text == NULL)
	{
		give_up(why ? why : "the children of a cycle's resource outgrew three reads");
		return false;
	}
	/* the names, sorted: each of the edge's nodes is looked up in them */
	names = palloc(sizeof(char *) * (strlen(text) / 2 + 1));
	for (p = text; *p; p++)
	{
		char	   *nl = strchr(p, '\n');

		names[nnames++] = p;
		if (nl == NULL)
			break;
		*nl = '\0';
		p = nl;
	}
	qsort(names, nnames, sizeof(char *), cmp_name);
	if (bsearch(&v->node, names, nnames, sizeof(char *), cmp_name) == NULL)
		return false;
	for (int i = zklock_deadlock_first_node(g, v->resource);
		 i < g->nn && g->n[i].seq < v->seq &&
		 strcmp(g->n[i].resource, v->resource) == 0; i++)
	{
		DlNode	   *n = &g->n[i];

		if (n->session == next->session && n->pid == next->pid &&
			zklock_modes_conflict(n->mode, v->mode) &&
			bsearch(&n->name, names, nnames, sizeof(char *), cmp_name))
			return true;
	}
	return false;
}

/*
 * The victim's last check before it acts: every zklock edge of the cycle
 * that rests on another instance's publication (its waiter or its holder
 * is not of this instance, whose own state is read from shared memory or
 * its worker's publication rebuilt for this read) still stands in
 * ZooKeeper.  A publication is as old as its worker's last pass: a
 * stopped worker's keeps a node deleted since (force release, another
 * client, or a withdrawal) as an edge until its session ends.  A cycle
 * with an edge gone is no cycle: no victim (logged), the next search
 * looks again.  One getChildren per such edge, only here.
 */
static bool
cycle_stands(DlGraph *g, List *cycle)
{
	ListCell   *lc;

	foreach(lc, cycle)
	{
		int			vi = lfirst_int(lc);
		int			ni = lnext(cycle, lc) ? lfirst_int(lnext(cycle, lc)) :
			linitial_int(cycle);
		bool		unread;

		if (!g->v[vi].waits ||
			(g->v[vi].session == g->my_session &&
			 g->v[ni].session == g->my_session))
			continue;
		if (!edge_stands(g, vi, ni, &unread))
		{
			if (!unread)
				ereport(LOG,
						(errmsg("zklock: deadlock found by process %d is none: a node of resource \"%s\" on its cycle is gone",
								MyProcPid, g->v[vi].resource),
						 errdetail_log("%s",
									   zklock_deadlock_describe(g, cycle,
																false))));
			return false;
		}
	}
	return true;
}

/*
 * zk_lock_stats: this request was a deadlock's victim.  Its entry, given
 * back, keeps the resource and mode its backend wrote (read under the
 * channel's lock; the stats lock is taken after it is released).
 */
static void
count_victim(int idx)
{
	ZkLockEntry *e = &zklock_shared->entries[idx];
	char		resource[sizeof(e->resource)];
	ZkLockMode	mode;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	strlcpy(resource, e->resource, sizeof(resource));
	mode = e->mode;
	LWLockRelease(zklock_shared->lock);
	zklock_stats_count(resource, mode, ZKLOCK_STAT_DEADLOCK);
}

/*
 * The search, from this backend's wait on entry idx (generation gen):
 * raises 40P01 when this backend is the victim of a deadlock.  It lasts
 * at most the timeout (at least a second), and never past the wait's own
 * deadline (wait_deadline, 0 when none).
 */
static void
search(int idx, uint32 gen, int timeout_ms, TimestampTz wait_deadline)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "zklock deadlock search",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   Max(timeout_ms, 1000));
	DlGraph    *g;
	bool		published;
	bool		victim_me;
	List	   *cycle;

	if (wait_deadline != 0 && wait_deadline < deadline)
		deadline = wait_deadline;
	g = zklock_deadlock_new_graph(deadline);
	cycle = find_cycle(g, &published, &victim_me);
	if (!published)
		next_search = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												  DL_RETRY_MS);
	else
		cur_searches++;
	if (cycle != NIL)
		ereport(LOG,
				(errmsg("zklock: deadlock found by process %d, %s",
						MyProcPid, victim_me ?
						"which is its youngest request: verifying" :
						"whose youngest request is another's: left to it"),
				 errdetail_log("%s",
							   zklock_deadlock_describe(g, cycle, false))));
	if (cycle != NIL && victim_me)
	{
		/* again, from a fresh read: a wait that ended is no edge */
		g = zklock_deadlock_new_graph(deadline);
		cycle = find_cycle(g, &published, &victim_me);
		/* and each edge another instance published still stands */
		if (cycle != NIL && victim_me && !cycle_stands(g, cycle))
			cycle = NIL;
		/* a test may grant us here: the withdrawal must then not happen */
		if (cycle != NIL && victim_me)
			(void) ZKLOCK_FAILPOINT("deadlock-before-withdraw");
		if (cycle != NIL && victim_me &&
			zklock_channel_withdraw_waiting(idx, gen))
		{
			char	   *full = zklock_deadlock_describe(g, cycle, false);
			char	   *shown = zklock_deadlock_describe(g, cycle, true);

			count_victim(idx);
			MemoryContextSwitchTo(old);
			ereport(LOG,
					(errmsg("zklock: deadlock broken: process %d's request was the youngest and is cancelled",
							MyProcPid),
					 errdetail_log("%s", full)));
			ereport(ERROR,
					(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
					 errmsg("deadlock detected"),
					 errdetail_internal("%s", shown),
					 errdetail_log("%s", full),
					 errhint("See server log for query details.")));
		}
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/*
 * Is entry idx a wait the search covers (a lock, or a semaphore of limit
 * 1: deadlock_publish.c)?
 */
static bool
searchable(int idx)
{
	ZkLockEntry *e = &zklock_shared->entries[idx];
	bool		ok;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	ok = e->kind == ZKR_ACQUIRE &&
		(e->mode != ZKLOCK_SEMAPHORE || e->max_holders == 1);
	LWLockRelease(zklock_shared->lock);
	return ok;
}

/*
 * The time from this search of the wait to its next (ms): the timeout
 * after the first, then twice as long after each, at most DL_MAX_SPACING
 * timeouts.  A cycle is closed by a new wait, whose own searches at one
 * and two timeouts find it; the spacing only bounds what an older wait's
 * searches cost (each reads every instance's long waits), so that many
 * long waits do not read them many times a timeout.
 */
static long
search_spacing_ms(int timeout_ms)
{
	long		spacing = timeout_ms;

	for (int i = 0; i < cur_searches && spacing < (long) timeout_ms * DL_MAX_SPACING; i++)
		spacing *= 2;
	return Max(Min(spacing, (long) timeout_ms * DL_MAX_SPACING),
			   DL_MIN_INTERVAL_MS);
}

/*
 * Called at each pass of a lock's wait (wait.c) for the pending request,
 * entry idx of generation gen, waited for since "since": once it has
 * waited the timeout, mark it for publication and search, and again as
 * search_spacing_ms says.  Raises 40P01 when this backend is a deadlock's victim.  The
 * wait's own deadline (0: none) bounds the search too.
 */
void
zklock_deadlock_check(int idx, uint32 gen, TimestampTz since,
					  TimestampTz wait_deadline)
{
	int			timeout_ms = deadlock_timeout_ms();
	TimestampTz now;

	if (timeout_ms <= 0)
		return;
	if (idx != cur_idx || gen != cur_gen || since != cur_since)
	{
		cur_idx = idx;
		cur_gen = gen;
		cur_since = since;
		cur_marked = false;
		cur_gave_up = false;
		cur_searches = 0;
		next_search = TimestampTzPlusMilliseconds(since, timeout_ms);
	}
	now = GetCurrentTimestamp();
	if (now < next_search)
		return;
	/* not connected: nothing can be read; try again a little later */
	if (!zklock_channel_connected())
	{
		next_search = TimestampTzPlusMilliseconds(now, DL_RETRY_MS);
		return;
	}
	next_search = TimestampTzPlusMilliseconds(now, search_spacing_ms(timeout_ms));
	if (!searchable(idx))
		return;
	if (!cur_marked)
	{
		if (!zklock_channel_mark_long_wait(idx, gen))
			return;				/* answered meanwhile */
		cur_marked = true;
	}
	search(idx, gen, timeout_ms, wait_deadline);
}

/* How long a wait begun at "since" may sleep before its next search (ms) */
long
zklock_deadlock_due_ms(TimestampTz since)
{
	int			timeout_ms = deadlock_timeout_ms();
	TimestampTz due;

	if (timeout_ms <= 0)
		return 1000;
	if (since == cur_since)
		due = next_search;
	else
	{
		/*
		 * Not checked yet: due at the timeout.  Past it, this is a wait
		 * that is never checked (a batch of try-locks, acquire.c): no cut.
		 */
		due = TimestampTzPlusMilliseconds(since, timeout_ms);
		if (due <= GetCurrentTimestamp())
			return 1000;
	}
	return Max(TimestampDifferenceMilliseconds(GetCurrentTimestamp(), due), 1);
}
