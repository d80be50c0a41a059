/*-------------------------------------------------------------------------
 *
 * sweep.c
 *		The sweep: removes expired explicit locks, and explicit requests
 *		nobody waits for any more.
 *
 * Explicit locks are persistent nodes; every instance's worker walks the
 * tree every zklock.sweep_interval and removes the expired ones.  Only
 * zklock's explicit nodes (their request prefix starts "zx") are read;
 * persistent nodes without an expiry (other clients') are left alone.  The
 * walk keeps at most SWEEP_IN_FLIGHT requests in flight, so that a tree of
 * many thousand locks costs ZooKeeper a steady trickle, not a burst that
 * stalls everyone's acquires.
 *
 * No machine's wall clock is compared with a time another wrote.  Expiry is
 * measured in ZooKeeper's own time: a sweep starts with a write of its own
 * (the create of an ephemeral node under a name nobody else can take,
 * deleted at once: sweep_clock_path), whose mtime is "now"
 * by the clock of the ZooKeeper leader; a node written by zklock 1.1 carries
 * its time to live as a duration, "ttl=<ms>", counted from its mtime, which
 * the write that granted it set (the grant's rewrite of its data, see
 * zklock_explicit_grant in lock_explicit.c).  A lock can so end early only
 * by the difference between the clocks of two successive ZooKeeper leaders,
 * and late by up to one sweep interval (and the walk).
 *
 *	- A node whose data has "waiter=" is a request not granted yet (or
 *	  granted, with its rewrite not yet done): it never expires.  Its
 *	  ephemeral child "waiter" lives as long as the session that waits for
 *	  it; without it, and older than twice the session timeout (time enough
 *	  for a live waiter to make it), nobody will ever take the node over:
 *	  the sweep removes it, so that it never becomes a lock with no owner.
 *	- A node that Hive's rule does not grant (among its siblings) never
 *	  expires: 1.0's waiting requests have no "waiter=".  The rule is
 *	  grant_rule.c's, applied to all siblings at once
 *	  (zklock_grant_rule_sorted); the fields are read by the codec of
 *	  nodedata.c.
 *	- zklock 1.0 wrote "expires=<epoch s>" and "since=<epoch s>", both by
 *	  the requester's clock: their difference (rounded up) is its time to
 *	  live, counted from the node's mtime (its creation: 1.0 counted from
 *	  the request), never by the sweeper's own clock.
 *	- An explicit node that 1.0's zk_lock_revoke rewrote without its expiry
 *	  goes a year (the longest time to live) after that rewrite.
 *
 * A recipe (recipe.h): its tick starts a sweep every zklock.sweep_interval
 * while connected; recipe.c hands it the replies tagged SWEEP_IDX, and
 * tells it when the connection goes, which abandons the sweep.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "recipe.h"
#include "zklock.h"
#include "settings.h"
#include "resource.h"
#include "grant_rule.h"
#include "zk_client.h"
#include "lease.h"

/* The sweep's operations, as carried in a tag */
typedef enum SweepOp
{
	OP_CLOCK = 1,				/* a write that tells ZooKeeper's time */
	OP_LIST_CHILDREN,			/* list a node of the tree */
	OP_LIST_DATA,				/* read a granted node */
	OP_SWEEP_WAITING,			/* read a node that is not granted */
	OP_DELETE					/* delete a node (its reply is not awaited) */
} SweepOp;

#define SWEEP_IN_FLIGHT 16

static int64 last_sweep_us = PG_INT64_MIN / 2; /* CLOCK_BOOTTIME; the first
												 * sweep at once */

static uint32 sweep_generation = 0;
static int	sweep_pending = 0;

typedef struct SweepItem
{
	int			op;				/* OP_LIST_CHILDREN: walk; OP_LIST_DATA: read
								 * a granted node; OP_SWEEP_WAITING: read a
								 * node that is not */
	char		path[FLEXIBLE_ARRAY_MEMBER];
} SweepItem;

static List *sweep_queue = NIL;	/* in sweep_context */
static MemoryContext sweep_context = NULL;
static int64 sweep_now = 0;		/* ZooKeeper's time at the sweep's start */
static bool sweep_walking = false;	/* the clock answered; walking */

#define SWEEP_MAX_TTL_MS	(INT64CONST(366) * SECS_PER_DAY * 1000)

/*
 * The first sweep of a worker reads every lock node: explicit locks taken
 * before their nodes were named "zx" expire too.
 */
static bool sweep_all_nodes = true;

static void
sweep_push(const char *path, int op)
{
	MemoryContext old = MemoryContextSwitchTo(sweep_context);
	SweepItem  *item = palloc(offsetof(SweepItem, path) + strlen(path) + 1);

	item->op = op;
	strcpy(item->path, path);
	sweep_queue = lappend(sweep_queue, item);
	MemoryContextSwitchTo(old);
}

/* Send queued walk requests while fewer than SWEEP_IN_FLIGHT are out */
static void
sweep_issue(void)
{
	while (sweep_queue != NIL && sweep_pending < SWEEP_IN_FLIGHT)
	{
		SweepItem  *item = llast(sweep_queue);
		bool		sent;

		/* depth first: the queue stays short, and a pop costs nothing */
		sweep_queue = list_delete_last(sweep_queue);
		sent = item->op == OP_LIST_CHILDREN ?
			zkc_get_children(item->path, TAG(sweep_generation, OP_LIST_CHILDREN, SWEEP_IDX)) :
			zkc_get_data(item->path, TAG(sweep_generation, item->op, SWEEP_IDX));
		if (sent)
			sweep_pending++;
		pfree(item);
	}
	if (sweep_pending == 0 && sweep_queue == NIL)
		MemoryContextReset(sweep_context);
}

/*
 * The sweep's clock node: "<root>/zklock.clock-<16 random hex digits>",
 * ephemeral, created and deleted back to back.  Its first segment is one
 * resource names may not take (zklock_resource_problem reserves "zklock."),
 * and its random part is drawn again for each sweep, so nobody can have
 * made the node before us: not a role of a newer instance (the name is
 * refused), nor of an older one (it cannot know the name).  Before 1.3 the
 * node was "zklock-clock-<session id>", a name anyone could lock first
 * (from SQL, with a public session id) to switch the sweep off; such nodes,
 * an older instance's own during a rolling upgrade included, are ordinary
 * resource nodes to this sweep.
 */
static void
sweep_clock_path(char *path, size_t size)
{
	uint64		r;

	if (!pg_strong_random(&r, sizeof(r)))
		r = (uint64) GetCurrentTimestamp() ^ ((uint64) MyProcPid << 32);
	snprintf(path, size, "%s/" ZKLOCK_CLOCK_PREFIX "%016llx", zklock_root,
			 (unsigned long long) r);
}

static void
sweep_start(void)
{
	char		path[ZKLOCK_MAX_PATH + 1];

	if (sweep_pending > 0 || sweep_queue != NIL)
		return;					/* the last one is still going */
	if (sweep_context == NULL)
		sweep_context = AllocSetContextCreate(TopMemoryContext,
											  "zklock sweep",
											  ALLOCSET_DEFAULT_SIZES);
	sweep_generation++;
	sweep_walking = false;

	/* first ZooKeeper's time: a write of our own, undone right behind it */
	sweep_clock_path(path, sizeof(path));
	if (!zkc_create(path, NULL, -1, ZKC_EPHEMERAL,
					TAG(sweep_generation, OP_CLOCK, SWEEP_IDX)))
		return;
	sweep_pending = 1;
	(void) zkc_delete(path, TAG(sweep_generation, OP_DELETE, SWEEP_IDX));
}

/* Forget a walk in progress (its replies will not come) */
static void
sweep_abandon(void)
{
	sweep_pending = 0;
	sweep_queue = NIL;
	sweep_walking = false;
	if (sweep_context)
		MemoryContextReset(sweep_context);
}

/* How long a waiting node may go without its waiter child */
static int64
sweep_orphan_grace(void)
{
	return Max(2 * (int64) zkc_negotiated_timeout(), 10000);
}

/* A lock node among a resource's children, in sequence order */
typedef struct SweepChild
{
	ZkGrantNode node;
	const char *child;			/* its name, in the event */
} SweepChild;

static int
sweep_child_cmp(const void *a, const void *b)
{
	int64		sa = ((const SweepChild *) a)->node.seq;
	int64		sb = ((const SweepChild *) b)->node.seq;

	return sa < sb ? -1 : sa > sb ? 1 : 0;
}

/* A zklock explicit node's data came back: remove it if its time is up */
static void
sweep_node(ZkEvent *ev, bool granted)
{
	const char *data = ev->data;
	const char *waiter = zklock_node_field(data, ZKLOCK_WAITER_FIELD);
	const char *ttl = zklock_node_field(data, "ttl=");
	const char *expires = zklock_node_field(data, "expires=");
	const char *scope = zklock_node_field(data, "scope=");
	int64		deadline;

	if (waiter)
	{
		if (ev->num_children > 0 ||
			sweep_now - ev->mtime < sweep_orphan_grace())
			return;				/* someone waits for it, or may yet */
		ereport(LOG,
				(errmsg("zklock: removing the node of an explicit lock request whose waiter is gone: \"%s\"",
						ev->path),
				 errdetail("Its waiting session was %.16s.", waiter)));
		(void) zkc_delete(ev->path, TAG(sweep_generation, OP_DELETE, SWEEP_IDX));
		return;
	}
	if (!granted)
		return;					/* a waiting request never expires */

	if (ttl)
	{
		int64		ms = strtoll(ttl, NULL, 10);

		if (ms <= 0)
			return;
		deadline = ev->mtime + Min(ms, SWEEP_MAX_TTL_MS);
	}
	else if (expires)
	{
		/* zklock 1.0: two times by the requester's clock, and its mtime */
		const char *since = zklock_node_field(data, "since=");
		long long	e = strtoll(expires, NULL, 10);
		long long	b;

		if (since == NULL || e <= 0)
			return;
		b = strtoll(since, NULL, 10);
		deadline = ev->mtime + Min((int64) Max(e - b, 0) * 1000, SWEEP_MAX_TTL_MS);
	}
	else if (scope && strncmp(scope, "explicit\n", 9) == 0 &&
			 zklock_node_field(data, "revoke=") != NULL)
		deadline = ev->mtime + SWEEP_MAX_TTL_MS;	/* stripped by 1.0 */
	else
		return;

	if (sweep_now < deadline)
		return;
	ereport(LOG,
			(errmsg("zklock: removing expired explicit lock node \"%s\"",
					ev->path)));
	(void) zkc_delete(ev->path, TAG(sweep_generation, OP_DELETE, SWEEP_IDX));
}

static void
sweep_event(ZkEvent *ev)
{
	int			op = TAG_OP(ev->tag);

	if (TAG_GEN(ev->tag) != sweep_generation || op == OP_DELETE ||
		sweep_pending <= 0)
		return;					/* a delete's reply was never counted */
	sweep_pending--;
	if (op == OP_CLOCK)
	{
		/* NONODE: no root, nothing to sweep; else try at the next interval */
		if (ev->rc == ZKC_OK && ev->mtime > 0)
		{
			sweep_now = ev->mtime;
			sweep_walking = true;
			sweep_push(zklock_root, OP_LIST_CHILDREN);
		}
	}
	else if (ev->rc == ZKC_OK && ev->kind == ZKEV_CHILDREN)
	{
		SweepChild *kids = palloc(sizeof(SweepChild) * Max(ev->nchildren, 1));
		ZkGrantNode *nodes = palloc(sizeof(ZkGrantNode) * Max(ev->nchildren, 1));
		int			n = 0;

		/* Hive's rule among the siblings (grant_rule.c): who is granted */
		for (int i = 0; i < ev->nchildren; i++)
		{
			const char *c = ev->children[i];

			if (zklock_parse_node_name(c, &kids[n].node.mode, &kids[n].node.seq))
				kids[n++].child = c;
			else
			{
				char	   *child = psprintf("%s/%s", ev->path, c);

				sweep_push(child, OP_LIST_CHILDREN);	/* a resource: walk it */
				pfree(child);
			}
		}
		qsort(kids, n, sizeof(SweepChild), sweep_child_cmp);
		for (int i = 0; i < n; i++)
			nodes[i] = kids[i].node;
		zklock_grant_rule_sorted(nodes, n);
		for (int i = 0; i < n; i++)
		{
			if (sweep_all_nodes || zklock_node_has_prefix(kids[i].child, "zx"))
			{
				/* an explicit lock: read it */
				char	   *child = psprintf("%s/%s", ev->path, kids[i].child);

				sweep_push(child, nodes[i].blocker < 0 ? OP_LIST_DATA : OP_SWEEP_WAITING);
				pfree(child);
			}
		}
		pfree(kids);
		pfree(nodes);
	}
	else if (ev->rc == ZKC_OK && ev->kind == ZKEV_DATA && ev->ephemeral_owner == 0)
		sweep_node(ev, op == OP_LIST_DATA);
	sweep_issue();
	if (sweep_walking && sweep_pending == 0 && sweep_queue == NIL)
	{
		sweep_all_nodes = false;	/* a whole sweep is done */
		sweep_walking = false;
	}
}

/* Every zklock.sweep_interval, while connected: a sweep */
static long
sweep_tick(void)
{
	int64		now_us = zklock_boottime_us();

	if (zklock_connected &&
		now_us - last_sweep_us >= zklock_sweep_interval * INT64CONST(1000))
	{
		last_sweep_us = now_us;
		sweep_start();
	}
	return -1;
}

const ZkRecipe zklock_sweep_recipe = {
	.name = "sweep",
	.idx_first = SWEEP_IDX,
	.idx_count = 1,
	.event = sweep_event,
	.disconnected = sweep_abandon,	/* its replies fail; sweep again later */
	.session_lost = sweep_abandon,
	.tick = sweep_tick,
};
