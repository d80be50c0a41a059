/*-------------------------------------------------------------------------
 *
 * queue_wait.c
 *		The queue recipe's waiting takers: per queue, this instance's
 *		waiting takes in arrival order behind one shared listing and one
 *		child watch on entries and one on taken (doc/design.md "Queues",
 *		"Waiting without a herd").
 *
 * A ZKR_QUEUE_TAKE joins its queue's group (zklock_queue_wait_join) at its
 * start, and again whenever its try found nothing to hold (an entry held
 * by another instance meanwhile, or consumed: at the front, keeping its
 * place).  A join, a watch's firing and a lost listing each ask the group
 * for a listing of entries and taken (two requests, one round trip, each
 * with a child watch when the group has none armed on that node); asked
 * while one is in flight, one more follows its reply ("again"): a change
 * notification is never dropped, whatever the waiters are doing, and a
 * waiter whose try failed always comes back through a listing made after
 * its try.  On the reply, the entries without a hold and not being tried
 * by another take of this instance go to the first waiters, one each
 * (queue.c's try_entry, the callback given to zklock_queue_wait_init, as
 * this file calls nothing above it); the others stay, behind the same
 * watches.  So a put costs one listing per instance that waits on the
 * queue, not one per taker, and this instance's takers never race each
 * other for a hold.
 *
 * The group's requests are tagged with its own reserved index
 * (QWAIT_IDX_BASE + slot, recipe.h) and generation, not with a waiter's:
 * a waiter may leave (cancelled, timed out) at any time without taking
 * the watches from the others.  The last waiter leaving frees the group:
 * its watches are dropped (zkc_unwatch) and its generation moves on, so
 * replies of the freed group are ignored.  A session lost fails every
 * waiter (queue.c), which frees every group; a connection lost loses at
 * most the listing (asked again once connected: zklock_queue_wait_retry),
 * the watches being set again by the client.
 *
 * A listing that finds no entries (or taken) node, a queue never put to,
 * sets no child watch: an exists sets a creation watch instead (one not
 * sent makes the listing lost: asked again once connected).  Here
 * too, for both files, the rule of an entry's name and a listing's names
 * (zklock_queue_entry_name, zklock_queue_names; the name's parser and the
 * order of entries, past 2^31 too, are src/common/queue_name.c's).
 *
 * Rules: only the worker's thread; groups[], wait_slot[] and try_entry
 * are this file's (TopMemoryContext; try_entry set once, at the init),
 * each group's listing in its own context.
 * Every request and watch of a group is tagged (generation, op, its
 * index): a reply of a freed group is ignored.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "channel.h"
#include "failpoint.h"
#include "queue_common.h"
#include "queue_int.h"
#include "queue_name.h"
#include "recipe.h"

/* the groups' operations (their own tags' op field) */
enum
{
	WOP_ENTRIES = 1,			/* the group's listing of entries */
	WOP_TAKEN,					/* the group's listing of taken */
	WOP_WATCH_ENTRIES,			/* its watch on entries fired (a child watch,
								 * or a creation watch: its exists) */
	WOP_WATCH_TAKEN				/* the same on taken */
};

typedef struct QWaitGroup
{
	bool		used;
	uint32		generation;		/* moves on when the group is freed */
	char		parent[ZKLOCK_MAX_PATH + 1];	/* the queue's node */
	int		   *waiters;		/* entries' idx, in arrival order */
	int			nwaiters;
	int			maxwaiters;
	bool		listing;		/* a listing in flight */
	bool		again;			/* asked again while it was in flight */
	bool		lost;			/* the listing was lost: list once connected */
	bool		watch_entries;	/* a child watch on entries is armed */
	bool		watch_taken;
	int			replies;		/* replies of the listing in flight */
	bool		failed;			/* one of them failed */
	MemoryContext cxt;			/* the listing's names */
	char	  **entries;		/* sorted */
	int			nentries;
	char	  **taken;
	int			ntaken;
} QWaitGroup;

static QWaitGroup *groups = NULL;
static int	ngroups = 0;
static int *wait_slot = NULL;	/* by idx: its group's slot + 1, or 0 */
static QueueTryEntry try_entry = NULL;	/* queue.c's, set at the init */

static void wait_list(int slot);

void
zklock_queue_wait_init(QueueTryEntry try_one)
{
	int			n = zklock_recipe_nentries();

	ngroups = Min(n, QWAIT_IDX_COUNT);
	groups = MemoryContextAllocZero(TopMemoryContext,
									sizeof(QWaitGroup) * Max(ngroups, 1));
	wait_slot = MemoryContextAllocZero(TopMemoryContext, sizeof(int) * n);
	try_entry = try_one;
}

/* Is idx waiting in a group? */
bool
zklock_queue_waiting(int idx)
{
	return wait_slot != NULL && wait_slot[idx] != 0;
}

static int
group_of(const char *parent, bool make)
{
	int			free_slot = -1;

	for (int i = 0; i < ngroups; i++)
	{
		if (groups[i].used && strcmp(groups[i].parent, parent) == 0)
			return i;
		if (!groups[i].used && free_slot < 0)
			free_slot = i;
	}
	if (!make || free_slot < 0)
		return -1;
	groups[free_slot].used = true;
	groups[free_slot].generation++;
	strlcpy(groups[free_slot].parent, parent, sizeof(groups[free_slot].parent));
	return free_slot;
}

static void
group_free(int slot)
{
	QWaitGroup *g = &groups[slot];
	uint32		gen = g->generation;
	int			maxw = g->maxwaiters;
	int		   *waiters = g->waiters;

	zkc_unwatch(TAG(gen, WOP_WATCH_ENTRIES, QWAIT_IDX_BASE + slot));
	zkc_unwatch(TAG(gen, WOP_WATCH_TAKEN, QWAIT_IDX_BASE + slot));
	if (g->cxt)
		MemoryContextDelete(g->cxt);
	memset(g, 0, sizeof(QWaitGroup));
	g->generation = gen + 1;	/* its replies and watches are ignored */
	g->waiters = waiters;		/* kept for the slot's next group */
	g->maxwaiters = maxw;
}

/*
 * A take waits in its queue's group: last, or first (it had a place: its
 * try failed).  Asks the group for a listing.
 */
void
zklock_queue_wait_join(int idx, bool first)
{
	WorkEntry  *w = &zklock_work[idx];
	int			slot = wait_slot[idx] - 1;
	QWaitGroup *g;

	if (slot < 0)
		slot = group_of(w->parent, true);
	if (slot < 0)
	{
		zklock_queue_fail(idx, ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
						  "too many queues waited on by this instance at once");
		return;
	}
	g = &groups[slot];
	w->phase = PH_WATCHING;
	w->node[0] = '\0';
	if (wait_slot[idx] == 0)
	{
		if (g->nwaiters == g->maxwaiters)
		{
			g->maxwaiters = Max(8, g->maxwaiters * 2);
			g->waiters = g->waiters ?
				repalloc(g->waiters, sizeof(int) * g->maxwaiters) :
				MemoryContextAlloc(TopMemoryContext, sizeof(int) * g->maxwaiters);
		}
		if (first)
		{
			memmove(g->waiters + 1, g->waiters, sizeof(int) * g->nwaiters);
			g->waiters[0] = idx;
		}
		else
			g->waiters[g->nwaiters] = idx;
		g->nwaiters++;
		wait_slot[idx] = slot + 1;
	}
	wait_list(slot);
}

/* A take leaves its group (handed an entry, released, failed) */
void
zklock_queue_wait_leave(int idx)
{
	int			slot;
	QWaitGroup *g;

	if (!zklock_queue_waiting(idx))
		return;
	slot = wait_slot[idx] - 1;
	g = &groups[slot];
	wait_slot[idx] = 0;
	for (int i = 0; i < g->nwaiters; i++)
		if (g->waiters[i] == idx)
		{
			memmove(g->waiters + i, g->waiters + i + 1,
					sizeof(int) * (g->nwaiters - i - 1));
			g->nwaiters--;
			break;
		}
	if (g->nwaiters == 0)
		group_free(slot);
}

/* The group's listing, or one more after the one in flight */
static void
wait_list(int slot)
{
	QWaitGroup *g = &groups[slot];
	char		path[Q_MAX_PATH];
	uint64		tag;
	bool		ok;

	if (g->listing)
	{
		g->again = true;
		return;
	}
	g->listing = true;
	g->again = false;
	g->lost = false;
	g->replies = 0;
	g->failed = false;
	snprintf(path, sizeof(path), "%s/%s", g->parent, ZKLOCK_QUEUE_ENTRIES);
	tag = TAG(g->generation, WOP_ENTRIES, QWAIT_IDX_BASE + slot);
	ok = g->watch_entries ? zkc_get_children(path, tag) :
		zkc_get_children_watch(path, tag, TAG(g->generation, WOP_WATCH_ENTRIES,
											  QWAIT_IDX_BASE + slot));
	g->watch_entries = true;
	snprintf(path, sizeof(path), "%s/%s", g->parent, ZKLOCK_QUEUE_TAKEN);
	tag = TAG(g->generation, WOP_TAKEN, QWAIT_IDX_BASE + slot);
	ok = ok && (g->watch_taken ? zkc_get_children(path, tag) :
				zkc_get_children_watch(path, tag, TAG(g->generation, WOP_WATCH_TAKEN,
													  QWAIT_IDX_BASE + slot)));
	g->watch_taken = true;
	if (!ok)
	{
		/* not connected: every reply of it is a connection loss */
		g->listing = false;
		g->lost = true;
		g->watch_entries = g->watch_taken = false;
		zklock_recipe_retry_soon();
	}
}

/*
 * Is name an entry's (entry-<digits>-<seq>)?  <seq> may be negative: the
 * entries' cversion past 2^31 (queue_name.c)
 */
bool
zklock_queue_entry_name(const char *name)
{
	int			priority;
	int32		seq;

	return zklock_queue_parse_entry(name, &priority, &seq);
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

static int
entry_cmp(const void *a, const void *b)
{
	return zklock_queue_entry_cmp(*(char *const *) a, *(char *const *) b);
}

/*
 * A listing's entry names, in cxt (if sorted, in the order they are taken:
 * priority, then arrival, across the wrap too): none when it failed
 */
char	  **
zklock_queue_names(MemoryContext cxt, ZkEvent *ev, bool sorted, int *n)
{
	char	  **names = MemoryContextAllocZero(cxt, sizeof(char *) *
											   Max(ev->nchildren, 1));

	*n = 0;
	for (int i = 0; ev->rc == ZKC_OK && i < ev->nchildren; i++)
		if (zklock_queue_entry_name(ev->children[i]))
			names[(*n)++] = MemoryContextStrdup(cxt, ev->children[i]);
	if (sorted)
		qsort(names, *n, sizeof(char *), entry_cmp);
	return names;
}

/* A reply's entry names into the group's listing */
static void
keep_names(QWaitGroup *g, ZkEvent *ev, bool entries)
{
	if (g->cxt == NULL)
		g->cxt = AllocSetContextCreate(TopMemoryContext, "zklock queue waiters",
									   ALLOCSET_SMALL_SIZES);
	if (entries)
		g->entries = zklock_queue_names(g->cxt, ev, true, &g->nentries);
	else
	{
		/* as strings: for busy()'s bsearch, a plain total order */
		g->taken = zklock_queue_names(g->cxt, ev, false, &g->ntaken);
		qsort(g->taken, g->ntaken, sizeof(char *), name_cmp);
	}
}

/* Is the entry held (the listing says), or being tried or held by a take of ours? */
static bool
busy(QWaitGroup *g, const char *name)
{
	/* taken is sorted: one search, not a scan per entry (many holds) */
	if (g->ntaken > 0 &&
		bsearch(&name, g->taken, g->ntaken, sizeof(char *), name_cmp) != NULL)
		return true;
	for (int idx = 0; idx < zklock_recipe_nentries(); idx++)
	{
		WorkEntry  *w = &zklock_work[idx];

		if ((w->kind == ZKR_QUEUE_TAKE || w->kind == ZKR_QUEUE_TRY_TAKE) &&
			w->phase != PH_IDLE && w->phase != PH_WATCHING &&
			w->node[0] != '\0' && strcmp(w->node, name) == 0 &&
			strcmp(w->parent, g->parent) == 0)
			return true;
	}
	return false;
}

/*
 * The waiters a listing left waiting had to wait (zk_queue_stats' waits):
 * each entry's queue_waited, set once, under the channel's lock, while
 * the entry is still the take's.  A listing per change of the queue;
 * nothing is asked of ZooKeeper.
 */
static void
mark_waited(QWaitGroup *g)
{
	bool		any = false;

	for (int i = 0; i < g->nwaiters && !any; i++)
		any = !zklock_work[g->waiters[i]].queue_waited;
	if (!any)
		return;
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < g->nwaiters; i++)
	{
		int			idx = g->waiters[i];
		ZkLockEntry *e = entry(idx);

		if (e->generation == zklock_work[idx].generation &&
			e->state == ZKE_REQUESTED)
			e->queue_waited = true;
		zklock_work[idx].queue_waited = true;
	}
	LWLockRelease(zklock_shared->lock);
}

/* The listing answered: its free entries to the first waiters, one each */
static void
hand_out(int slot)
{
	QWaitGroup *g = &groups[slot];
	int			e = 0;

	while (g->used && g->nwaiters > 0)
	{
		int			idx;
		char		name[ZKLOCK_MAX_NODE_NAME_LEN + 1];

		while (e < g->nentries && busy(g, g->entries[e]))
			e++;
		if (e >= g->nentries)
			break;
		idx = g->waiters[0];
		strlcpy(name, g->entries[e++], sizeof(name));
		zklock_queue_wait_leave(idx);	/* may free the group */
		try_entry(idx, name);	/* queue.c's */
	}
	if (g->used)
		mark_waited(g);
	if (g->used && g->cxt)
	{
		MemoryContextDelete(g->cxt);
		g->cxt = NULL;
		g->entries = g->taken = NULL;
		g->nentries = g->ntaken = 0;
	}
}

/*
 * The node (entries or taken) is not there (a queue never put to): a
 * creation watch instead of the child watch, so that its first put wakes
 * the group
 */
static void
watch_creation(int slot, bool entries)
{
	QWaitGroup *g = &groups[slot];
	char		path[Q_MAX_PATH];
	int			op = entries ? WOP_WATCH_ENTRIES : WOP_WATCH_TAKEN;

	snprintf(path, sizeof(path), "%s/%s", g->parent,
			 entries ? ZKLOCK_QUEUE_ENTRIES : ZKLOCK_QUEUE_TAKEN);
	if (!ZKLOCK_FAILPOINT("queue-wait-before-exists") &&
		zkc_exists(path, true, TAG(g->generation, op, QWAIT_IDX_BASE + slot)))
	{
		if (entries)
			g->watch_entries = true;
		else
			g->watch_taken = true;
	}
	else
	{
		/*
		 * Not sent (the connection just lost): no watch is armed on the
		 * node, so nothing would wake the group; the listing counts as
		 * lost, asked again once connected (on_listing).
		 */
		g->failed = true;
	}
}

static void
on_listing(int slot, ZkEvent *ev, bool entries)
{
	QWaitGroup *g = &groups[slot];

	if (!g->listing)
		return;
	if (ev->rc == ZKC_OK || ev->rc == ZKC_NONODE)
		keep_names(g, ev, entries);
	if (ev->rc != ZKC_OK)
	{
		/* no child watch set: set one at the next listing */
		if (entries)
			g->watch_entries = false;
		else
			g->watch_taken = false;
	}
	if (ev->rc == ZKC_NONODE)
		watch_creation(slot, entries);
	if (ev->rc != ZKC_OK && ev->rc != ZKC_NONODE)
		g->failed = true;
	if (++g->replies < 2)
		return;
	g->listing = false;
	if (g->failed)
	{
		/* lost with the connection: once connected, list again */
		g->lost = true;
		zklock_recipe_retry_soon();
		return;
	}
	hand_out(slot);
	if (g->used && g->again)
		wait_list(slot);
}

/* A shared watch fired: the waiters' listing, now or after the one in flight */
static void
on_watch(int slot, bool entries)
{
	QWaitGroup *g = &groups[slot];

	if (entries)
		g->watch_entries = false;
	else
		g->watch_taken = false;
	wait_list(slot);
}

/* A reply or a watch tagged with a group's index */
void
zklock_queue_wait_event(ZkEvent *ev)
{
	int			slot = TAG_IDX(ev->tag) - QWAIT_IDX_BASE;

	if (slot < 0 || slot >= ngroups || !groups[slot].used ||
		groups[slot].generation != TAG_GEN(ev->tag))
		return;					/* a freed group's */
	switch (TAG_OP(ev->tag))
	{
		case WOP_ENTRIES:
		case WOP_TAKEN:
			on_listing(slot, ev, TAG_OP(ev->tag) == WOP_ENTRIES);
			break;
		case WOP_WATCH_ENTRIES:
		case WOP_WATCH_TAKEN:
			/* a firing, or a creation watch's exists answered: there now */
			if (ev->kind == ZKEV_WATCH || ev->rc != ZKC_NONODE)
				on_watch(slot, TAG_OP(ev->tag) == WOP_WATCH_ENTRIES);
			break;
		default:
			break;
	}
}

/* Once connected again: the listings lost with the connection */
void
zklock_queue_wait_retry(void)
{
	for (int slot = 0; slot < ngroups; slot++)
		if (groups[slot].used && groups[slot].lost)
			wait_list(slot);
}
