/*-------------------------------------------------------------------------
 *
 * listing.c
 *		The cluster-wide listing behind zk_locks, as the worker runs it.
 *
 * zk_locks: walk the tree under the root, read every lock node, and hand
 * the rows to the backend through its DSM segment.  A row is
 * "path \t czxid \t ephemeralOwner \t data", with data escaped.  A backend
 * asks with an entry of kind ZKR_LIST (backend.c).  A recipe (recipe.h):
 * recipe.c starts the listing, hands it the replies tagged with its entry,
 * and tells it when the backend withdraws, the connection comes or goes,
 * or the session is lost; it ends a listing that found no connection in
 * time (its tick).
 *
 * Any role may list, as often and as many at once as it likes, so a listing
 * must not be able to hurt the worker or ZooKeeper:
 *
 *	- Each listing owns its memory: a context of its own, holding its queue
 *	  of paths still to read and its rows, deleted when the listing ends,
 *	  whichever way it ends (done, failed, session lost, no connection in
 *	  time, or withdrawn by its backend).  Replies that arrive after that
 *	  carry the entry's old generation, or find it idle: they are dropped
 *	  without touching anything of the listing.
 *	- A listing keeps at most LIST_IN_FLIGHT requests in flight, walking
 *	  depth first as the sweep does, so a big tree is a trickle, not a burst;
 *	  at most LIST_MAX_ACTIVE listings walk at once, the others wait for a
 *	  slot in arrival order.
 *	- Rows beyond the size of the backend's segment are counted, not kept:
 *	  the backend asks again with the size needed.
 *
 * A listing asked for with "persistent" set (the count of a role's explicit
 * locks, request.c) reads and returns only zklock's explicit lock nodes
 * (prefix "zx"), as the sweep does: one getChildren per resource node and
 * one getData per explicit node.
 *
 * Queues (1.9, worker/recipes/queue.c) live under <root>/zklock.queues:
 * no lock listing walks there (the root's listing skips it; a subtree
 * under it cannot be named).  The queues' listing (zk_queue_items, asked
 * with the subtree "zklock.queues") is its own mode: an entry is a row by
 * its name alone (its data, the item, up to 1 MB, is not read), a hold
 * is read (its holder's data); pending/ is not walked.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "utils/memutils.h"

#include "channel.h"
#include "recipe.h"
#include "zklock.h"
#include "settings.h"
#include "shmem.h"
#include "grant_rule.h"
#include "resource.h"
#include "zk_client.h"
#include "lease.h"
#include "queue_common.h"

/* The listing's operations, as carried in a tag */
typedef enum ListOp
{
	OP_LIST_CHILDREN = 1,		/* list a subtree */
	OP_LIST_DATA				/* read a lock node */
} ListOp;

#define LIST_IN_FLIGHT		32
#define LIST_MAX_ACTIVE		4

/* listings that could not read some nodes: logged at most once a minute */
#define NOAUTH_LOG_US	(INT64CONST(60) * 1000000)
static int64 last_noauth_log_us = -NOAUTH_LOG_US;

typedef struct ListItem
{
	bool		data;			/* read the node's data, or list its children */
	char		path[FLEXIBLE_ARRAY_MEMBER];
} ListItem;

typedef struct Listing
{
	MemoryContext cxt;			/* owns this struct and all below */
	bool		active;			/* walking; else waiting for a slot */
	int			pending;		/* requests in flight */
	List	   *queue;			/* ListItems not sent yet */
	Size		room;			/* the backend's segment size */
	Size		needed;			/* bytes of all rows so far */
	bool		overflow;		/* rows no longer kept, only counted */
	int			noauth;			/* nodes ZooKeeper would not show us */
	bool		queues;			/* the queues' listing (below) */
	StringInfoData rows;
} Listing;

static MemoryContext listings_context = NULL;	/* parent of each listing's */
static int	list_active = 0;	/* listings walking */
static List *list_waiting = NIL;	/* entries waiting for a slot, in order */
static bool list_starting = false;	/* inside list_next() */

static void list_activate(int idx);
static void list_drop(int idx);
static bool list_issue(int idx);
static void list_finish(int idx, bool ok, int sqlstate, const char *why);
static void list_next(void);
static void list_row(Listing *l, ZkEvent *ev);

static void
list_push(Listing *l, const char *dir, const char *name, bool data)
{
	MemoryContext old = MemoryContextSwitchTo(l->cxt);
	ListItem   *item;
	Size		len = strlen(dir) + (name ? 1 + strlen(name) : 0);

	item = palloc(offsetof(ListItem, path) + len + 1);
	item->data = data;
	if (name)
		snprintf(item->path, len + 1, "%s/%s", dir, name);
	else
		strcpy(item->path, dir);
	l->queue = lappend(l->queue, item);
	MemoryContextSwitchTo(old);
}

/*
 * Is path (its first len bytes, or all when 0) <root>/zklock.queues, the
 * home of the queues?
 */
static bool
queues_path(const char *path, size_t len)
{
	/* e.g. "/zklock" and "zklock.queues/": "/zklock/zklock.queues" */
	size_t		rootlen = strlen(zklock_root);
	size_t		qlen = strlen(ZKLOCK_QUEUE_PREFIX) - 1;	/* no '/' */

	if (len == 0)
		len = strlen(path);
	while (rootlen > 1 && zklock_root[rootlen - 1] == '/')
		rootlen--;
	return len == rootlen + 1 + qlen &&
		strncmp(path, zklock_root, rootlen) == 0 && path[rootlen] == '/' &&
		strncmp(path + rootlen + 1, ZKLOCK_QUEUE_PREFIX, qlen) == 0;
}

/* A row by a node's name alone (a queue's entry: its data is the item) */
static void
list_name_row(Listing *l, const char *dir, const char *name)
{
	ZkEvent		ev;
	char	   *path = psprintf("%s/%s", dir, name);

	memset(&ev, 0, sizeof(ev));
	ev.path = path;
	list_row(l, &ev);
	pfree(path);
}

/*
 * The children of a path in the queues' listing: entries are rows, holds
 * are read, pending puts skipped, anything else walked.
 */
static void
list_queue_children(Listing *l, ZkEvent *ev)
{
	const char *base = strrchr(ev->path, '/');

	base = base ? base + 1 : ev->path;
	if (strcmp(base, ZKLOCK_QUEUE_PENDING) == 0)
		return;
	for (int i = 0; i < ev->nchildren; i++)
	{
		const char *c = ev->children[i];
		bool		entry = strncmp(c, ZKLOCK_QUEUE_ENTRY,
									strlen(ZKLOCK_QUEUE_ENTRY)) == 0;

		if (entry && strcmp(base, ZKLOCK_QUEUE_ENTRIES) == 0)
			list_name_row(l, ev->path, c);
		else if (entry && strcmp(base, ZKLOCK_QUEUE_TAKEN) == 0)
			list_push(l, ev->path, c, true);
		else
			list_push(l, ev->path, c, false);
	}
}

/* A backend asks for a listing: start it, or queue it for a slot */
static void
listing_start(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	Listing    *l;
	MemoryContext cxt;
	size_t		len;

	if (listings_context == NULL)
		listings_context = AllocSetContextCreate(TopMemoryContext,
												 "zklock listings",
												 ALLOCSET_SMALL_SIZES);
	if (w->listing != NULL)
		list_drop(idx);			/* cannot happen; never leak it */

	cxt = AllocSetContextCreate(listings_context, "zklock listing",
								ALLOCSET_DEFAULT_SIZES);
	l = MemoryContextAllocZero(cxt, sizeof(Listing));
	l->cxt = cxt;
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	l->room = entry(idx)->list_size;
	LWLockRelease(zklock_shared->lock);
	w->listing = l;
	l->queues = queues_path(w->parent, 0);
	w->phase = PH_LISTING;

	/* w->parent is the root, or the subtree asked for, "<root>/<subtree>" */
	len = strlen(w->parent);
	if (len > 1 && w->parent[len - 1] == '/')
		w->parent[len - 1] = '\0';

	if (list_active >= LIST_MAX_ACTIVE || list_waiting != NIL || !zklock_connected)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		list_waiting = lappend_int(list_waiting, idx);
		MemoryContextSwitchTo(old);
		w->since_us = zklock_boottime_us();
		return;
	}
	list_activate(idx);
}

/* A listing gets a slot: start walking */
static void
list_activate(int idx)
{
	Listing    *l = zklock_work[idx].listing;

	l->active = true;
	list_active++;
	list_push(l, zklock_work[idx].parent, NULL, false);
	(void) list_issue(idx);
}

/*
 * Send queued requests while fewer than LIST_IN_FLIGHT are out; end the
 * listing when nothing is left.  Returns false when the listing ended.
 */
static bool
list_issue(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	Listing    *l = w->listing;

	while (l->queue != NIL && l->pending < LIST_IN_FLIGHT)
	{
		ListItem   *item = llast(l->queue);
		bool		sent;

		/* depth first: the queue stays short, and a pop costs nothing */
		l->queue = list_delete_last(l->queue);
		sent = item->data ?
			zkc_get_data(item->path, TAG(w->generation, OP_LIST_DATA, idx)) :
			zkc_get_children(item->path, TAG(w->generation, OP_LIST_CHILDREN, idx));
		pfree(item);
		if (!sent)
		{
			list_finish(idx, false, ERRCODE_CONNECTION_FAILURE,
								  "not connected to ZooKeeper");
			return false;
		}
		l->pending++;
	}
	if (l->pending == 0 && l->queue == NIL)
	{
		list_finish(idx, true, 0, NULL);
		return false;
	}
	return true;
}

/* One row, escaped; kept while it fits the backend's segment */
static void
list_row(Listing *l, ZkEvent *ev)
{
	MemoryContext old = MemoryContextSwitchTo(l->cxt);
	StringInfo	buf = &l->rows;
	int			start;

	if (buf->data == NULL)
		initStringInfo(buf);
	start = buf->len;
	appendStringInfo(buf, "%s\t" INT64_FORMAT "\t" INT64_FORMAT "\t",
					 ev->path, ev->czxid, ev->ephemeral_owner);
	if (ev->datalen > 0)
	{
		enlargeStringInfo(buf, 2 * ev->datalen + 1);
		buf->len += zklock_nodedata_escape(buf->data + buf->len, ev->data,
										   ev->datalen);
	}
	appendStringInfoChar(buf, '\n');
	l->needed += buf->len - start;
	if (l->overflow || (Size) buf->len + 1 > l->room)
	{
		/* too big for the segment: the backend asks again, bigger */
		l->overflow = true;
		buf->len = start;
		buf->data[start] = '\0';
	}
	MemoryContextSwitchTo(old);
}

/* A reply of the walk */
static void
listing_event(ZkEvent *ev)
{
	int			idx = TAG_IDX(ev->tag);
	WorkEntry  *w = &zklock_work[idx];
	Listing    *l = w->listing;

	if (w->phase != PH_LISTING || l == NULL || !l->active || l->pending <= 0)
		return;
	l->pending--;
	if (ev->rc == ZKC_NOAUTH && strcmp(ev->path, w->parent) != 0)
	{
		/*
		 * A node of another client whose ACL refuses us READ: not ours (our
		 * nodes and the resource nodes we make are readable by our
		 * identity).  A lock node is still listed, by name and without
		 * data: its name gives its mode and place in the queue, which
		 * decide who of the others is granted.  Below any other such node
		 * nothing can be listed.  Counted in one LOG line at the end; the
		 * subtree asked for itself fails below.
		 */
		if (TAG_OP(ev->tag) == OP_LIST_DATA)
		{
			ev->datalen = 0;
			ev->czxid = 0;
			ev->ephemeral_owner = 0;
			list_row(l, ev);
		}
		l->noauth++;
		(void) list_issue(idx);
		return;
	}
	if (ev->rc == ZKC_CONNLOSS || ev->rc == ZKC_EXPIRED)
	{
		list_finish(idx, false, ERRCODE_CONNECTION_FAILURE,
							  zkc_result_text(ev->zoo_rc));
		return;
	}
	if (ev->rc != ZKC_OK && ev->rc != ZKC_NONODE)
	{
		/* refused for another reason: not a connection failure */
		char		why[ZKLOCK_MAX_ERROR_LEN + 1];

		snprintf(why, sizeof(why), "ZooKeeper refused to read \"%s\": %s",
				 ev->path, zkc_result_text(ev->zoo_rc));
		list_finish(idx, false, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION, why);
		return;
	}

	if (ev->rc == ZKC_OK && TAG_OP(ev->tag) == OP_LIST_CHILDREN && l->queues)
		list_queue_children(l, ev);
	else if (ev->rc == ZKC_OK && TAG_OP(ev->tag) == OP_LIST_CHILDREN)
	{
		for (int i = 0; i < ev->nchildren; i++)
		{
			const char *c = ev->children[i];

			bool		lock = zklock_parse_node_name(c, NULL, NULL);

			/* the queues are no locks: not walked (queue_common.h) */
			if (strcmp(c, "zklock.queues") == 0)
			{
				char		path[ZKLOCK_MAX_PATH + 32];

				snprintf(path, sizeof(path), "%s/%s", ev->path, c);
				if (queues_path(path, 0))
					continue;
			}

			/* an explicit nodes' listing reads zklock's explicit ones only */
			if (lock && w->persistent && !zklock_node_has_prefix(c, "zx"))
				continue;
			list_push(l, ev->path, c, lock);
		}
	}
	else if (ev->rc == ZKC_OK)
		list_row(l, ev);

	(void) list_issue(idx);
}

/*
 * The listing ends: hand the rows (ok) or the error to the backend, or free
 * the entry if the backend withdrew it; then drop everything the listing
 * had, and give its slot to the next one waiting.
 */
static void
list_finish(int idx, bool ok, int sqlstate, const char *why)
{
	WorkEntry  *w = &zklock_work[idx];
	Listing    *l = w->listing;
	Size		needed = (l ? l->needed : 0) + 1;

	if (l && l->noauth > 0 &&
		zklock_boottime_us() - last_noauth_log_us >= NOAUTH_LOG_US)
	{
		last_noauth_log_us = zklock_boottime_us();
		ereport(LOG,
				(errmsg("zklock: a listing of \"%s\" could not read %d node(s): ZooKeeper does not let zklock read them",
						w->parent, l->noauth),
				 errdetail("Another client made them with an ACL that refuses READ to zklock's identity. Lock nodes among them are listed by name, without their holder's details; nothing below the others is listed. (Said at most once a minute.)")));
	}

	/* rows that fit the segment were all kept (list_row) */
	Assert(l == NULL || l->overflow || (Size) l->rows.len == l->needed);
	if (ok)
		ok = zklock_recipe_put_rows(idx, l ? l->rows.data : NULL, needed - 1);
	if (ok)
		zklock_channel_done(idx, w->generation, 0, needed);
	else
		zklock_channel_fail(idx, w->generation,
							sqlstate ? sqlstate : ERRCODE_CONNECTION_FAILURE,
							why ? why : "listing failed", false);

	list_drop(idx);
	w->phase = PH_IDLE;
	list_next();
}

/* Free what a listing had, and its slot or its place in the line */
static void
list_drop(int idx)
{
	Listing    *l = zklock_work[idx].listing;

	if (l == NULL)
		return;
	if (l->active)
		list_active--;
	else
		list_waiting = list_delete_int(list_waiting, idx);
	zklock_work[idx].listing = NULL;
	MemoryContextDelete(l->cxt);
}

/* A listing waiting for a slot (or for the connection)? */
static bool
list_is_waiting(int idx)
{
	return zklock_work[idx].phase == PH_LISTING && zklock_work[idx].listing != NULL &&
		!zklock_work[idx].listing->active;
}

/*
 * Disconnected: listings waiting for a slot now wait for the connection,
 * up to zklock.connect_timeout from now (listing_tick).
 */
static void
listing_disconnected(void)
{
	ListCell   *lc;
	int64		now_us = zklock_boottime_us();

	foreach(lc, list_waiting)
		zklock_work[lfirst_int(lc)].since_us = now_us;
}

/* Give free slots to the listings waiting for one, in arrival order */
static void
list_next(void)
{
	if (list_starting)
		return;					/* the caller's loop goes on */
	list_starting = true;
	while (zklock_connected && list_active < LIST_MAX_ACTIVE && list_waiting != NIL)
	{
		int			idx = linitial_int(list_waiting);

		list_waiting = list_delete_first(list_waiting);
		list_activate(idx);
	}
	list_starting = false;
}

/* Connected: listings that waited for a slot (or the connection) go */
static void
listing_connected(int64 session_id)
{
	list_next();
}

/* The backend withdrew its listing: drop the walk now */
static void
listing_release(int idx)
{
	if (zklock_work[idx].phase == PH_LISTING)
	{
		/* its late replies find the entry idle */
		list_finish(idx, false, 0, NULL);
	}
	else if (zklock_work[idx].phase == PH_IDLE)
		zklock_recipe_released(idx);
}

/* A listing fails (recipe.c's deadline of a listing that waited to start) */
static void
listing_fail(int idx, int sqlstate, const char *msg)
{
	list_finish(idx, false, sqlstate, msg);
}

/* The session is gone: every listing under way fails */
static void
listing_session_lost(void)
{
	for (int i = 0; i < zklock_recipe_nentries(); i++)
		if (zklock_work[i].phase == PH_LISTING)
			list_finish(i, false, ERRCODE_CONNECTION_FAILURE,
						zklock_recipe_loss_why());
}

/*
 * Not connected: fail the listings that have waited for a slot (or the
 * connection) longer than zklock.connect_timeout.  Returns the
 * milliseconds until the next such deadline, or -1 when none is pending.
 */
static long
listing_tick(void)
{
	int64		now_us = zklock_boottime_us();
	long		next = -1;

	if (zklock_connected)
		return -1;
	for (int i = 0; i < zklock_recipe_nentries(); i++)
	{
		WorkEntry  *w = &zklock_work[i];

		if (!list_is_waiting(i))
			continue;
		if (zklock_recipe_deadline_passed(w, now_us, &next))
		{
			char		why[ZKLOCK_MAX_ERROR_LEN + 1];

			snprintf(why, sizeof(why),
					 "could not connect to ZooKeeper at \"%s\" within %d ms",
					 zklock_hosts, zklock_connect_timeout);
			list_finish(i, false, ERRCODE_CONNECTION_FAILURE, why);
		}
	}
	return next;
}

const ZkRecipe zklock_listing_recipe = {
	.name = "listing",
	.kinds = RECIPE_KIND(ZKR_LIST),
	.start = listing_start,
	.release = listing_release,
	.fail_request = listing_fail,
	.event = listing_event,
	.connected = listing_connected,
	.disconnected = listing_disconnected,
	.session_lost = listing_session_lost,
	.tick = listing_tick,
};
