/*-------------------------------------------------------------------------
 *
 * sweep.c
 *		The sweep: removes expired explicit locks, and explicit requests
 *		nobody waits for any more.  One instance sweeps for all.
 *
 * Explicit locks are persistent nodes.  Since 1.5 the sweep finds them
 * through their index (explicit_index.c): every explicit request's node is
 * also recorded by an entry under <root>/zklock.explicit, created before
 * the node and deleted after it.  A sweep lists that one node, lists the
 * resource node each entry names (once per resource) and reads only the
 * nodes the entries name: its cost grows with the explicit locks, not with
 * the session and transaction locks held (before, it listed every resource
 * node of the tree, one request each, on every instance).  An entry whose
 * node is not there and whose mtime is more than twice the session timeout
 * before the sweep's clock is deleted, at the version read (see
 * explicit_index.c for why a create tried again cannot lose its entry so).
 * At most SWEEP_IN_FLIGHT requests are in flight: a trickle, not a burst.
 *
 * One sweeper at a time.  Every zklock.sweep_interval each instance's
 * worker reads <root>/zklock.sweeper (getData, no watch), an ephemeral node
 * of the sweeping instance's session whose data names that session:
 * nobody's, it creates it (NODEEXISTS: someone was first) and reads it
 * again, right behind the create; its own, it sweeps (at once when it has
 * just become the sweeper); another's, it does not.  A node of that name
 * that is not a sweeper's (persistent, not naming its session, or not
 * readable: another client's, since no resource may begin with "zklock.")
 * switches the
 * election off with a WARNING: every instance sweeps, as before 1.5, and
 * nobody's node can stop the sweep.  Likewise an index that cannot be read
 * (NOAUTH) makes that sweep walk the tree.  So when the sweeper's instance dies or its session ends, the
 * node goes with the session (at once when the worker closes it, at most a
 * session timeout after), and another instance takes over within one sweep
 * interval after that.  A waiting request whose waiter is gone keeps its
 * bound: its waiter child goes when its session ends, and if that session
 * was the sweeper's, so does the sweeper's node, at the same moment.
 * Polling instead of a watch costs each other instance one read per
 * interval, and leaves no watch per instance (watches stay bounded by what
 * is held and waited for) and nothing to set again after a connection.  A
 * worker that is not connected does not sweep (a sweeper cut off does not
 * sweep beside the one that took over).  The sweeper also rewrites its
 * node at every tick (its beat, one write per interval), so that a
 * sweeper whose loop stalls while its session lives is taken over too
 * (see SWEEP_STALE_INTERVALS).
 *
 * The first sweep of each worker is a walk of the whole tree, whether or
 * not it sweeps for all: it lists every resource node and reads every lock
 * node, as every sweep did before 1.5 (not <root>/zklock.queues, where no
 * lock lives and every queue item is a node: sweep_queues_node).  It removes what has expired, and
 * records in the index every explicit node it keeps that has none.  This
 * is the rolling upgrade's argument: zklock 1.4 records nothing in the
 * index, but it sweeps the whole tree itself, on every instance, so while
 * any 1.4 instance runs, its nodes (and everyone's) expire; an instance
 * upgraded from 1.4 starts a new worker, whose first walk finds every
 * explicit node that instance made unrecorded (it makes none after its
 * old worker stopped) and records it, after which the sweeper expires it.
 * Not covered: a 1.4 instance removed for good without an upgrade, while
 * no 1.4 instance remains: its unexpired explicit locks are recorded by the
 * next worker start of any instance (a restart, a reload does not), and
 * until then outlive their time to live.  Node data is what 1.4 writes
 * and reads.
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
 * and late by up to one sweep interval and the sweep (plus, when the
 * sweeper has just gone, the session timeout before its node goes).
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
 * A recipe (recipe.h): its tick reads the sweeper's node and starts a sweep
 * every zklock.sweep_interval while connected; recipe.c hands it the
 * replies tagged SWEEP_IDX, and tells it when the connection goes, which
 * abandons the sweep.  All of it is the worker's own memory: a sweep's in
 * sweep_context, reset when it ends.
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
#include "explicit_index.h"
#include "queue_common.h"

/* The sweep's operations, as carried in a tag */
typedef enum SweepOp
{
	OP_CLOCK = 1,				/* a write that tells ZooKeeper's time */
	OP_LIST_CHILDREN,			/* the walk: list a node of the tree */
	OP_LIST_DATA,				/* read a granted node */
	OP_SWEEP_WAITING,			/* read a node that is not granted */
	OP_DELETE,					/* delete a node: then its index entry */
	OP_CLOCK_DELETE,			/* delete the clock node (not awaited) */
	OP_INDEX_LIST,				/* list the index */
	OP_ENTRY_PARENT,			/* list the resource node entries name */
	OP_ENTRY_STAT,				/* stat an entry whose node was not found */
	OP_ENTRY_WRITE,				/* create or delete an entry (not awaited) */
	OP_CLAIM,					/* create the sweeper's node (not awaited) */
	OP_CLAIM_CHECK,				/* read whose the sweeper's node is */
	OP_CLAIM_RECHECK,			/* the same, right behind our create */
	OP_CLAIM_BEAT,				/* rewrite our sweeper's node (not awaited) */
	OP_CLAIM_TAKE				/* delete a stalled sweeper's (not awaited) */
} SweepOp;

#define SWEEP_IN_FLIGHT 16
#define SWEEPER_NODE	ZKLOCK_RESERVED_PREFIX "sweeper"

static int64 last_sweep_us = PG_INT64_MIN / 2; /* CLOCK_BOOTTIME; the first
												 * sweep at once */

static uint32 sweep_generation = 0;
static int	sweep_pending = 0;

typedef struct SweepItem
{
	int			op;				/* what to send: OP_LIST_CHILDREN and
								 * OP_ENTRY_PARENT list, OP_LIST_DATA and
								 * OP_SWEEP_WAITING read, OP_ENTRY_STAT stats */
	char		path[FLEXIBLE_ARRAY_MEMBER];
} SweepItem;

/* An entry of the index, as a sweep read it */
typedef struct SweepEntry
{
	char	   *parent;			/* the resource node's path */
	char	   *request;		/* the request name it records */
	char	   *name;			/* its own name, under the index */
} SweepEntry;

static List *sweep_queue = NIL;	/* in sweep_context */
static MemoryContext sweep_context = NULL;
static int64 sweep_now = 0;		/* ZooKeeper's time at the sweep's start */
static bool sweep_walking = false;	/* the clock answered; sweeping */
static bool sweep_is_walk = false;	/* this sweep walks the whole tree */
static SweepEntry *sweep_entries = NULL;	/* sorted by parent; in
											 * sweep_context */
static int	sweep_nentries = 0;

#define SWEEP_MAX_TTL_MS	(INT64CONST(366) * SECS_PER_DAY * 1000)

/*
 * The first sweep of a worker walks the tree and reads every lock node:
 * explicit locks taken before their nodes were named "zx" expire too, and
 * explicit nodes without an index entry (zklock 1.4's) get one.
 */
static bool sweep_all_nodes = true;

/* Who sweeps: what the last read of the sweeper's node said */
typedef enum ClaimState
{
	CLAIM_UNKNOWN,				/* not read yet, or the read failed */
	CLAIM_OTHER,				/* another session's */
	CLAIM_OURS,					/* this session's: we sweep */
	CLAIM_SQUATTED				/* not a sweeper's: every instance sweeps */
} ClaimState;

static ClaimState claim_state = CLAIM_UNKNOWN;
static uint32 claim_generation = 0;

/*
 * The sweeper's beat.  When a tick's read says the sweeper's node is its
 * session's (which only that session can make), the sweeper rewrites it
 * at once, from the loop that sweeps, at the version read: a write after a
 * takeover fails, unless another instance made the node again within that
 * round trip at the same version; that instance then reads its own node
 * with another's data, and its own beat writes it whole again.  Its
 * session lives as long as the client library's own thread answers
 * ZooKeeper's pings, which a stalled main loop (a blocked write, a
 * debugger) does not stop.  Another instance notes, by its own clock
 * (CLOCK_BOOTTIME), since when the node's owner and version have not
 * changed; past SWEEP_STALE_INTERVALS of its own intervals and the
 * session timeout, it deletes the node at the version it read (a beat in
 * between makes the delete fail) and claims it at its next tick.  The
 * stalled sweeper, if it resumes, finds its beat refused and the node
 * another's: it stops.  Instances with very different sweep intervals may
 * so take the node from each other; each sweep is still right.
 */
#define SWEEP_STALE_INTERVALS 3
static int64 other_owner = 0;	/* the other sweeper's session, as read */
static int	other_version = -1; /* and its node's version */
static int64 other_since_us = 0;	/* CLOCK_BOOTTIME: when it last changed */

static void sweep_start(bool walk);

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

/* Send queued requests while fewer than SWEEP_IN_FLIGHT are out */
static void
sweep_issue(void)
{
	while (sweep_queue != NIL && sweep_pending < SWEEP_IN_FLIGHT)
	{
		SweepItem  *item = llast(sweep_queue);
		uint64		tag = TAG(sweep_generation, item->op, SWEEP_IDX);
		bool		sent;

		/* depth first: the queue stays short, and a pop costs nothing */
		sweep_queue = list_delete_last(sweep_queue);
		if (item->op == OP_LIST_CHILDREN || item->op == OP_ENTRY_PARENT)
			sent = zkc_get_children(item->path, tag);
		else if (item->op == OP_ENTRY_STAT)
			sent = zkc_exists(item->path, false, tag);
		else
			sent = zkc_get_data(item->path, tag);
		if (sent)
			sweep_pending++;
		pfree(item);
	}
	if (sweep_pending == 0 && sweep_queue == NIL)
	{
		sweep_entries = NULL;
		sweep_nentries = 0;
		MemoryContextReset(sweep_context);
	}
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

/*
 * A sweep: first ZooKeeper's time, a write of our own undone right behind
 * it; then the walk of the tree (walk), or the index's listing, sent right
 * behind the clock (its reply comes after the clock's).
 */
static void
sweep_start(bool walk)
{
	char		path[ZKLOCK_EXPLICIT_INDEX_MAX_PATH];

	if (sweep_pending > 0 || sweep_queue != NIL)
		return;					/* the last one is still going */
	if (sweep_context == NULL)
		sweep_context = AllocSetContextCreate(TopMemoryContext,
											  "zklock sweep",
											  ALLOCSET_DEFAULT_SIZES);
	sweep_generation++;
	sweep_walking = false;
	sweep_is_walk = walk;

	sweep_clock_path(path, sizeof(path));
	if (!zkc_create(path, NULL, -1, ZKC_EPHEMERAL,
					TAG(sweep_generation, OP_CLOCK, SWEEP_IDX)))
		return;
	sweep_pending = 1;
	(void) zkc_delete(path, TAG(sweep_generation, OP_CLOCK_DELETE, SWEEP_IDX));
	zklock_explicit_index_dir(path, sizeof(path));
	if (walk)
		(void) zkc_create(path, NULL, -1, 0,	/* where the walk records */
						  TAG(sweep_generation, OP_ENTRY_WRITE, SWEEP_IDX));
	else if (zkc_get_children(path, TAG(sweep_generation, OP_INDEX_LIST,
										SWEEP_IDX)))
		sweep_pending++;
}

/* Forget a sweep in progress (its replies will not come) */
static void
sweep_abandon(void)
{
	sweep_pending = 0;
	sweep_queue = NIL;
	sweep_walking = false;
	sweep_entries = NULL;
	sweep_nentries = 0;
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

/*
 * Is a child of the root zklock.queues, the home of the queues (issue 31)?
 * No lock lives there ("zklock." names are no resource's), and a queue has
 * a node per item, per hold and per pending put: the walk skips it, as the
 * lock listing does (listing.c), or it would cost a request per item.
 */
static bool
sweep_queues_node(const char *child)
{
	size_t		len = strlen(ZKLOCK_QUEUE_PREFIX) - 1;	/* no '/' */

	return strncmp(child, ZKLOCK_QUEUE_PREFIX, len) == 0 && child[len] == '\0';
}

/*
 * The lock nodes of a listing, in sequence order, each with Hive's verdict
 * among its siblings (grant_rule.c): node.blocker < 0 when granted.  The
 * walk walks the other children (resource nodes), except, at the root, the
 * index, the sweeper's node and the queues.
 */
static SweepChild *
sweep_children(ZkEvent *ev, int *nkids)
{
	SweepChild *kids = palloc(sizeof(SweepChild) * Max(ev->nchildren, 1));
	ZkGrantNode *nodes = palloc(sizeof(ZkGrantNode) * Max(ev->nchildren, 1));
	bool		at_root = strcmp(ev->path, zklock_root) == 0;
	int			n = 0;

	for (int i = 0; i < ev->nchildren; i++)
	{
		const char *c = ev->children[i];

		if (zklock_parse_node_name(c, &kids[n].node.mode, &kids[n].node.seq))
			kids[n++].child = c;
		else if (TAG_OP(ev->tag) == OP_LIST_CHILDREN &&
				 !(at_root && (strcmp(c, ZKLOCK_EXPLICIT_INDEX_NODE) == 0 ||
							   strcmp(c, SWEEPER_NODE) == 0 ||
							   sweep_queues_node(c))))
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
		kids[i].node = nodes[i];
	pfree(nodes);
	*nkids = n;
	return kids;
}

/* The walk listed a resource node: read its explicit lock nodes */
static void
sweep_walk_children(ZkEvent *ev)
{
	int			n;
	SweepChild *kids = sweep_children(ev, &n);

	for (int i = 0; i < n; i++)
	{
		if (sweep_all_nodes || zklock_node_has_prefix(kids[i].child, "zx"))
		{
			char	   *child = psprintf("%s/%s", ev->path, kids[i].child);

			sweep_push(child, kids[i].node.blocker < 0 ? OP_LIST_DATA : OP_SWEEP_WAITING);
			pfree(child);
		}
	}
	pfree(kids);
}

/*
 * The walk keeps an explicit node that a later sweep must see: record it
 * in the index (NODEEXISTS: it was).  Its entry is made after the node, so
 * the node may be gone meanwhile: the entry then goes by the sweep's rule.
 */
static void
sweep_record(const char *node_path)
{
	const char *slash = strrchr(node_path, '/');
	char		parent[ZKLOCK_MAX_PATH + 1];
	char		request[ZKLOCK_MAX_NODE_NAME_LEN + 1];
	char		path[ZKLOCK_EXPLICIT_INDEX_MAX_PATH];

	if (slash == NULL || (size_t) (slash - node_path) >= sizeof(parent))
		return;
	memcpy(parent, node_path, slash - node_path);
	parent[slash - node_path] = '\0';
	if (zklock_explicit_index_request_of(slash + 1, request, sizeof(request)) &&
		zklock_explicit_index_path(path, sizeof(path), parent, request))
		(void) zkc_create(path, NULL, -1, 0,
						  TAG(sweep_generation, OP_ENTRY_WRITE, SWEEP_IDX));
}

/* Remove a node whose time is up; its index entry goes once it is gone */
static void
sweep_remove(const char *path)
{
	(void) zkc_delete(path, TAG(sweep_generation, OP_DELETE, SWEEP_IDX));
}

/*
 * A zklock explicit node's data came back: remove it if its time is up.
 * Returns true when the node stays and a later sweep must read it again
 * (it expires later, or someone waits for it).
 */
static bool
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
			return true;		/* someone waits for it, or may yet */
		ereport(LOG,
				(errmsg("zklock: removing the node of an explicit lock request whose waiter is gone: \"%s\"",
						ev->path),
				 errdetail("Its waiting session was %.16s.", waiter)));
		sweep_remove(ev->path);
		return false;
	}

	if (ttl)
	{
		int64		ms = strtoll(ttl, NULL, 10);

		if (ms <= 0)
			return false;
		deadline = ev->mtime + Min(ms, SWEEP_MAX_TTL_MS);
	}
	else if (expires)
	{
		/* zklock 1.0: two times by the requester's clock, and its mtime */
		const char *since = zklock_node_field(data, "since=");
		long long	e = strtoll(expires, NULL, 10);
		long long	b;

		if (since == NULL || e <= 0)
			return false;
		b = strtoll(since, NULL, 10);
		deadline = ev->mtime + Min((int64) Max(e - b, 0) * 1000, SWEEP_MAX_TTL_MS);
	}
	else if (scope && strncmp(scope, "explicit\n", 9) == 0 &&
			 zklock_node_field(data, "revoke=") != NULL)
		deadline = ev->mtime + SWEEP_MAX_TTL_MS;	/* stripped by 1.0 */
	else
		return false;

	if (!granted || sweep_now < deadline)
		return true;			/* a waiting request never expires */
	ereport(LOG,
			(errmsg("zklock: removing expired explicit lock node \"%s\"",
					ev->path)));
	sweep_remove(ev->path);
	return false;
}

static int
sweep_entry_cmp(const void *a, const void *b)
{
	return strcmp(((const SweepEntry *) a)->parent,
				  ((const SweepEntry *) b)->parent);
}

/*
 * The index's listing came back: its entries, sorted by resource node, and
 * one listing of each resource node they name.
 */
static void
sweep_index_listed(ZkEvent *ev)
{
	MemoryContext old = MemoryContextSwitchTo(sweep_context);
	char		parent[ZKLOCK_EXPLICIT_INDEX_MAX_PATH];
	char		request[ZKLOCK_MAX_NODE_NAME_LEN + 1];
	int			n = 0;

	sweep_entries = palloc(sizeof(SweepEntry) * Max(ev->nchildren, 1));
	for (int i = 0; i < ev->nchildren; i++)
	{
		if (!zklock_explicit_index_parse(ev->children[i], parent,
										 sizeof(parent), request,
										 sizeof(request)) ||
			strlen(parent) > ZKLOCK_MAX_PATH)
			continue;			/* not an entry: someone else's node */
		sweep_entries[n].parent = pstrdup(parent);
		sweep_entries[n].request = pstrdup(request);
		sweep_entries[n].name = pstrdup(ev->children[i]);
		n++;
	}
	sweep_nentries = n;
	qsort(sweep_entries, n, sizeof(SweepEntry), sweep_entry_cmp);
	MemoryContextSwitchTo(old);
	for (int i = 0; i < n; i++)
		if (i == 0 || strcmp(sweep_entries[i].parent,
							 sweep_entries[i - 1].parent) != 0)
			sweep_push(sweep_entries[i].parent, OP_ENTRY_PARENT);
}

/* Is child a node the create of request made (request and ten digits)? */
static bool
sweep_made_by(const char *child, const char *request)
{
	size_t		len = strlen(request);

	return strncmp(child, request, len) == 0 && strlen(child) == len + 10;
}

/*
 * A resource node that index entries name was listed: read the nodes they
 * name (Hive's rule among all its lock nodes says which are granted), and
 * look at the entries of nodes not there.  A resource node that zklock may
 * not list (another client's ACL) counts as one without their nodes: the
 * sweep could never expire them, and their entries (left by creates that
 * ZooKeeper refused there) would otherwise stay for good, listed by every
 * sweep, whatever any quota says.
 */
static void
sweep_entries_listed(ZkEvent *ev)
{
	SweepEntry	key = {.parent = ev->path};
	SweepEntry *e = bsearch(&key, sweep_entries, sweep_nentries,
							sizeof(SweepEntry), sweep_entry_cmp);
	SweepChild *kids = NULL;
	int			n = 0;
	char		path[ZKLOCK_EXPLICIT_INDEX_MAX_PATH];

	if (e == NULL || (ev->rc != ZKC_OK && ev->rc != ZKC_NONODE &&
					  ev->rc != ZKC_NOAUTH))
		return;					/* failed: at the next sweep */
	while (e > sweep_entries && strcmp(e[-1].parent, ev->path) == 0)
		e--;
	if (ev->rc == ZKC_OK)
		kids = sweep_children(ev, &n);
	zklock_explicit_index_dir(path, sizeof(path));
	for (; e < sweep_entries + sweep_nentries &&
		 strcmp(e->parent, ev->path) == 0; e++)
	{
		bool		found = false;

		for (int i = 0; i < n; i++)
		{
			if (sweep_made_by(kids[i].child, e->request))
			{
				char	   *child = psprintf("%s/%s", ev->path, kids[i].child);

				sweep_push(child, kids[i].node.blocker < 0 ? OP_LIST_DATA : OP_SWEEP_WAITING);
				pfree(child);
				found = true;
			}
		}
		if (!found)
		{
			char	   *entry = psprintf("%s/%s", path, e->name);

			sweep_push(entry, OP_ENTRY_STAT);
			pfree(entry);
		}
	}
	if (kids)
		pfree(kids);
}

/*
 * The stat of an entry whose node was not there: older than twice the
 * session timeout by ZooKeeper's time, it goes, at the version read (a
 * create of its request tried again since moved it: explicit_index.c).
 */
static void
sweep_entry_stat(ZkEvent *ev)
{
	if (ev->rc != ZKC_OK || sweep_now - ev->mtime < sweep_orphan_grace())
		return;
	ereport(DEBUG1,
			(errmsg("zklock: removing index entry \"%s\", whose node is gone",
					ev->path)));
	(void) zkc_delete_version(ev->path, ev->version,
							  TAG(sweep_generation, OP_ENTRY_WRITE, SWEEP_IDX));
}

/* The clock write's reply: ZooKeeper's time, and the sweep begins */
static void
sweep_clock(ZkEvent *ev)
{
	/* NONODE: no root, nothing to sweep; else try at the next interval */
	if (ev->rc != ZKC_OK || ev->mtime <= 0)
		return;
	sweep_now = ev->mtime;
	sweep_walking = true;
	if (sweep_is_walk)
		sweep_push(zklock_root, OP_LIST_CHILDREN);
}

/* The sweeper's node's data: the session that sweeps, who it is */
static void
sweeper_data(char *data, size_t size)
{
	snprintf(data, size, "session=%016llx\nnode=%s\npid=%d\n",
			 (unsigned long long) zklock_recipe_session_id(),
			 zklock_node_name ? zklock_node_name : "", MyProcPid);
}

/*
 * Another instance's sweeper node was read: if neither its owner nor its
 * version changed for longer than that sweeper would take to rewrite it
 * (by our own clock), its sweeper's loop is stalled: delete the node at
 * the version read, so that we claim it at our next tick.
 */
static void
sweep_other_read(ZkEvent *ev)
{
	int64		now_us = zklock_boottime_us();
	int64		stale_us = (SWEEP_STALE_INTERVALS * (int64) zklock_sweep_interval +
							(int64) zkc_negotiated_timeout()) * 1000;

	if (ev->ephemeral_owner != other_owner || ev->version != other_version)
	{
		other_owner = ev->ephemeral_owner;
		other_version = ev->version;
		other_since_us = now_us;
		return;
	}
	if (now_us - other_since_us < stale_us)
		return;
	ereport(LOG,
			(errmsg("zklock: the sweeper's node \"%s\" was not rewritten for %lld ms; this instance takes over the sweep",
					ev->path, (long long) ((now_us - other_since_us) / 1000))));
	other_since_us = now_us;	/* once per bound */
	(void) zkc_delete_version(ev->path, ev->version,
							  TAG(claim_generation, OP_CLAIM_TAKE, SWEEP_IDX));
}

/*
 * Whose is the sweeper's node?  Ours: we sweep, at once if we just took it
 * (a sweep of ours is then due: the tick did not start one).  Nobody's:
 * create it, and read it again right behind the create.
 */
static void
sweep_claim_checked(ZkEvent *ev)
{
	ClaimState was = claim_state;
	char		path[ZKLOCK_MAX_PATH + 1];

	if (ev->rc == ZKC_OK && ev->kind == ZKEV_DATA)
	{
		char		mark[32];

		/* a sweeper's: ephemeral, and its data names its session */
		snprintf(mark, sizeof(mark), "session=%016llx",
				 (unsigned long long) ev->ephemeral_owner);
		if (ev->ephemeral_owner != 0 &&
			ev->ephemeral_owner == zklock_recipe_session_id())
		{
			/* ours (only our session makes it so): the beat, at its version */
			char		data[128];

			claim_state = CLAIM_OURS;
			sweeper_data(data, sizeof(data));
			if (TAG_OP(ev->tag) == OP_CLAIM_CHECK)
				(void) zkc_set_data_version(ev->path, data, strlen(data),
											ev->version,
											TAG(claim_generation, OP_CLAIM_BEAT,
												SWEEP_IDX));
		}
		else if (ev->ephemeral_owner == 0 || ev->data == NULL ||
				 strstr(ev->data, mark) == NULL)
			claim_state = CLAIM_SQUATTED;
		else
		{
			claim_state = CLAIM_OTHER;
			sweep_other_read(ev);
		}
	}
	else if (ev->rc == ZKC_NONODE || ev->rc == ZKC_CONNLOSS ||
			 ev->rc == ZKC_EXPIRED)
		claim_state = CLAIM_UNKNOWN;
	else
		claim_state = CLAIM_SQUATTED;	/* unreadable: someone else's */
	if (claim_state == CLAIM_SQUATTED && was != CLAIM_SQUATTED)
		ereport(WARNING,
				(errmsg("zklock: \"%s\" is not the node of a zklock sweeper; every instance sweeps expired explicit locks",
						ev->path),
				 errhint("Remove that node: zklock names its own nodes \"zklock.*\".")));
	if (was == CLAIM_OURS && claim_state != CLAIM_OURS)
		ereport(LOG,
				(errmsg("zklock: this instance no longer sweeps expired explicit locks")));
	else if (was != CLAIM_OURS && claim_state == CLAIM_OURS)
	{
		ereport(LOG,
				(errmsg("zklock: this instance sweeps expired explicit locks for every instance now")));
		if (!sweep_all_nodes)
		{
			last_sweep_us = zklock_boottime_us();
			sweep_start(false);
		}
	}
	/* (not again behind our own create: no root, nothing to sweep) */
	if (ev->rc == ZKC_NONODE && TAG_OP(ev->tag) == OP_CLAIM_CHECK)
	{
		char		data[128];

		/* nobody's: ours if we are first */
		claim_generation++;
		snprintf(path, sizeof(path), "%s/" SWEEPER_NODE, zklock_root);
		sweeper_data(data, sizeof(data));
		if (zkc_create(path, data, strlen(data), ZKC_EPHEMERAL,
					   TAG(claim_generation, OP_CLAIM, SWEEP_IDX)))
			(void) zkc_get_data(path,
								TAG(claim_generation, OP_CLAIM_RECHECK, SWEEP_IDX));
	}
}

static void
sweep_event(ZkEvent *ev)
{
	int			op = TAG_OP(ev->tag);

	if (op == OP_DELETE)
	{
		/* a node we removed is gone: so goes its index entry */
		if (ev->rc == ZKC_OK || ev->rc == ZKC_NONODE)
			(void) zklock_explicit_index_forget(ev->path, -1,
												TAG(0, OP_ENTRY_WRITE, SWEEP_IDX));
		return;
	}
	if (op == OP_CLAIM_CHECK || op == OP_CLAIM_RECHECK)
	{
		if (TAG_GEN(ev->tag) == claim_generation)
			sweep_claim_checked(ev);
		return;
	}
	if (TAG_GEN(ev->tag) != sweep_generation || sweep_pending <= 0 ||
		op == OP_CLOCK_DELETE || op == OP_ENTRY_WRITE || op == OP_CLAIM ||
		op == OP_CLAIM_BEAT || op == OP_CLAIM_TAKE)
		return;					/* replies that were never counted */
	sweep_pending--;
	if (op == OP_CLOCK)
		sweep_clock(ev);
	else if (!sweep_walking)
		;						/* the clock failed: this sweep is over */
	else if (op == OP_INDEX_LIST && ev->rc == ZKC_OK)
		sweep_index_listed(ev);
	else if (op == OP_INDEX_LIST && ev->rc != ZKC_NONODE)
	{
		/* the index cannot be read (someone's ACL): walk the tree */
		sweep_is_walk = true;
		sweep_push(zklock_root, OP_LIST_CHILDREN);
	}
	else if (op == OP_ENTRY_PARENT)
		sweep_entries_listed(ev);
	else if (op == OP_ENTRY_STAT)
		sweep_entry_stat(ev);
	else if (op == OP_LIST_CHILDREN && ev->rc == ZKC_OK)
		sweep_walk_children(ev);
	else if ((op == OP_LIST_DATA || op == OP_SWEEP_WAITING) &&
			 ev->rc == ZKC_OK && ev->kind == ZKEV_DATA &&
			 ev->ephemeral_owner == 0)
	{
		if (sweep_node(ev, op == OP_LIST_DATA) && sweep_is_walk)
			sweep_record(ev->path);
	}
	sweep_issue();
	if (sweep_walking && sweep_pending == 0 && sweep_queue == NIL)
	{
		if (sweep_is_walk)
			sweep_all_nodes = false;	/* a whole walk is done */
		sweep_walking = false;
	}
}

/*
 * Every zklock.sweep_interval, while connected: read whose the sweeper's
 * node is, and sweep if ours (what the read says decides the next one:
 * sweep_claim_checked); the first sweep of a worker walks the tree,
 * whoever sweeps.
 */
static long
sweep_tick(void)
{
	int64		now_us = zklock_boottime_us();
	char		path[ZKLOCK_MAX_PATH + 1];

	int64		left_us = last_sweep_us +
		zklock_sweep_interval * INT64CONST(1000) - now_us;

	if (!zklock_connected)
		return -1;
	if (left_us > 0)
		return (long) Min(left_us / 1000 + 1, 1000);	/* wake then */
	last_sweep_us = now_us;
	snprintf(path, sizeof(path), "%s/" SWEEPER_NODE, zklock_root);
	claim_generation++;
	(void) zkc_get_data(path, TAG(claim_generation, OP_CLAIM_CHECK, SWEEP_IDX));
	if (sweep_all_nodes || claim_state == CLAIM_OURS ||
		claim_state == CLAIM_SQUATTED)
		sweep_start(sweep_all_nodes);
	return zklock_sweep_interval;
}

/* The connection went: the sweep's replies fail; whose is unknown */
static void
sweep_disconnected(void)
{
	sweep_abandon();
	claim_generation++;
}

/* The session is gone, and with it the sweeper's node if it was ours */
static void
sweep_session_lost(void)
{
	if (claim_state == CLAIM_OURS)
		ereport(LOG,
				(errmsg("zklock: this instance no longer sweeps expired explicit locks")));
	claim_state = CLAIM_UNKNOWN;
	sweep_disconnected();
}

const ZkRecipe zklock_sweep_recipe = {
	.name = "sweep",
	.idx_first = SWEEP_IDX,
	.idx_count = 1,
	.event = sweep_event,
	.disconnected = sweep_disconnected,	/* its replies fail; again later */
	.session_lost = sweep_session_lost,
	.tick = sweep_tick,
};
