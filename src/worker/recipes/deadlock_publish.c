/*-------------------------------------------------------------------------
 *
 * deadlock_publish.c
 *		Recipe: this instance's long waits, published in one node of its
 *		own, and the reading of every instance's for a backend's deadlock
 *		search (deadlock.c).  Design: doc/deadlocks.md.
 *
 * Publication.  A backend whose zklock wait has lasted the deadlock timeout
 * marks its entry (zklock_channel_mark_long_wait).  This recipe keeps the
 * ephemeral node <root>/zklock.waits/<session id, 16 hex digits> (its
 * parent a container), whose data is, per marked entry still waiting
 * behind another node (tab-separated, one line each):
 *
 *	i <instance name>						once, first
 *	w <pid> <czxid> <E|S> <role> <resource>/<node>	the wait
 *	h <pid> <resource>/<node>				every other node of that pid
 *
 * (the role and the instance name escaped by zklock_nodedata_escape, so
 * that they hold no tab or line break; resource names hold no control
 * characters).  A semaphore's wait is published only for a limit of 1 (a
 * mutex: E, behind every lower node of its resource, all of them slots of
 * the same limit); with a higher limit any of several holders frees the
 * waiter, which a wait-for graph of single edges does not model.  The text
 * is rebuilt at the worker's passes only while the last one was not empty
 * or a new mark came (long_wait_marks), so nothing is done while nobody
 * waits past the timeout, and then at most every WAITS_REBUILD_US but at
 * a new mark or a read; it is written only when it changed (create the
 * first time, setData after, delete once empty).  A write that fails is
 * written again by the retry hook.
 *
 * Reading (ZKR_WAITS, a backend's request): the pending publication is sent
 * first, then one getChildren of <root>/zklock.waits and one getData per
 * child: a session's requests are served in order, so the answer holds
 * this instance's latest publication.  The answer goes to the backend's
 * DSM segment as "@<session hex>\n<data>\n" per instance, as zk_locks'
 * listing does (list_needed when it is too small).
 *
 * A read that names a resource (the entry's resource, not "") is the
 * victim's check of a cycle's edge (deadlock.c): one getChildren of that
 * resource's node, whose child names go to the segment one a line (none
 * when the node is gone).
 *
 * All of it runs in the worker's thread; it reads the shared entries under
 * zklock_shared->lock (shared), and long_wait_marks (atomic) without it,
 * and writes none of them.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/memutils.h"

#include "channel.h"
#include "failpoint.h"
#include "recipe.h"
#include "zklock.h"
#include "settings.h"
#include "resource.h"
#include "zk_client.h"
#include "lease.h"

/* Operations, as carried in a tag */
#define OP_PUB_PARENT	1		/* create <root>/zklock.waits (container) */
#define OP_PUB_CREATE	2		/* create our node */
#define OP_PUB_SET		3		/* setData of our node */
#define OP_PUB_DELETE	4		/* delete our node */
#define OP_READ_LIST	5		/* a read: the children */
#define OP_READ_DATA	6		/* a read: one instance's node */
#define OP_CHECK_LIST	7		/* a check: a resource's children */

/* The publication's state (the session's node) */
static int64 pub_session = 0;	/* the session our node is made for */
static bool pub_exists = false; /* our node was made (as far as we know) */
static bool pub_dirty = false;	/* a write failed: write again */
static uint64 pub_marks_seen = 0;
static char *pub_text = NULL;	/* what the node holds, "" none */
static uint32 pub_generation = 0;

/* One read per entry at most: its own memory */
typedef struct WaitsRead
{
	MemoryContext cxt;
	int			pending;		/* getData replies still due */
	StringInfoData out;
} WaitsRead;

static WaitsRead **reads = NULL;	/* nentries slots */

/*
 * The publication's size: ZooKeeper refuses a node's data past its
 * jute.maxbuffer (1 MB by default).  Waits beyond are left out, logged at
 * most once a minute.
 */
#define WAITS_MAX_TEXT		(512 * 1024)

/*
 * While long waits are published, the text is rebuilt (a scan of the whole
 * table) at most every WAITS_REBUILD_US at the passes, unless a new long
 * wait was marked or a read asks for it: many grants a second must not cost
 * a scan each.  A wait that ended stays in the node that much longer.
 */
#define WAITS_REBUILD_US	INT64CONST(20000)
static int64 last_build_us = 0;
#define WAITS_CUT_LOG_US	(INT64CONST(60) * 1000000)
static int64 last_cut_log_us = -WAITS_CUT_LOG_US;

static void
waits_dir(char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s", zklock_root, ZKLOCK_WAITS_NODE);
}

static void
waits_path(char *buf, size_t size, int64 session_id)
{
	snprintf(buf, size, "%s/%s/%016llx", zklock_root, ZKLOCK_WAITS_NODE,
			 (unsigned long long) session_id);
}

static void
waits_init(void)
{
	reads = MemoryContextAllocZero(TopMemoryContext,
								   mul_size(zklock_recipe_nentries(),
											sizeof(WaitsRead *)));
	pub_text = MemoryContextStrdup(TopMemoryContext, "");
}

/* Is entry i a long wait to publish?  Caller holds the lock. */
static bool
is_long_wait(int i)
{
	ZkLockEntry *e = entry(i);
	WorkEntry  *w = &zklock_work[i];

	return e->long_wait && e->state == ZKE_REQUESTED &&
		e->kind == ZKR_ACQUIRE &&
		(e->mode != ZKLOCK_SEMAPHORE || e->max_holders == 1) &&
		w->generation == e->generation && w->node[0] != '\0' &&
		(w->phase == PH_WATCHING || w->phase == PH_CHECKING);
}

/*
 * Is entry j a node of ours that its backend owns (held or awaited)?  A
 * LOST entry's node is gone: its backend holds nothing (deadlock.c's
 * add_local says the same); a RELEASING one's is being deleted by the
 * worker, whatever its backend does.
 */
static bool
is_owned_node(int j)
{
	ZkLockEntry *e = entry(j);
	WorkEntry  *w = &zklock_work[j];

	return !e->persistent &&
		(e->state == ZKE_GRANTED || e->state == ZKE_REQUESTED) &&
		(e->kind == ZKR_ACQUIRE || e->kind == ZKR_TRY_ACQUIRE) &&
		w->generation == e->generation && w->node[0] != '\0';
}

/* Text as one field: no tab, no line break (zklock_nodedata_escape) */
static void
add_escaped(StringInfo s, const char *src, size_t len)
{
	enlargeStringInfo(s, 2 * len + 1);
	s->len += zklock_nodedata_escape(s->data + s->len, src, len);
}

/* The role written in an entry's node data ("" when none), escaped */
static void
add_role(StringInfo s, const char *data)
{
	const char *role = zklock_node_field(data, "user=");

	if (role)
		add_escaped(s, role, zklock_node_field_len(role));
}

static int
cmp_pid(const void *a, const void *b)
{
	int			x = *(const int *) a;
	int			y = *(const int *) b;

	return (x > y) - (x < y);
}

/*
 * The text of this instance's long waits, now, in the current memory
 * context ("" when none): a "w" line per long wait, then an "h" line per
 * other node of those waits' backends.  Two passes over the table, the
 * second looking each owner up among the waiting pids (sorted): linear in
 * the table, whatever the number of waits.  The "h" lines of each waiting
 * backend get an equal share of what room is left: one backend's many
 * nodes (a role's, to hide others' deadlocks) cannot push another's out.
 */
static char *
build_text(void)
{
	StringInfoData s;
	int		   *pids;
	int		   *used;			/* bytes of "h" lines per pid of pids[] */
	int			npids = 0;
	int			share;			/* the most each may use */
	bool		cut = false;

	initStringInfo(&s);
	appendStringInfoString(&s, "i\t");
	add_escaped(&s, zklock_instance_name(), strlen(zklock_instance_name()));
	appendStringInfoChar(&s, '\n');
	pids = palloc(sizeof(int) * zklock_recipe_nentries());
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	for (int i = 0; i < zklock_recipe_nentries(); i++)
	{
		ZkLockEntry *e = entry(i);

		if (s.len > WAITS_MAX_TEXT)
		{
			cut = true;
			break;
		}
		if (!is_long_wait(i))
			continue;
		/* a test's ERROR (as an out of memory) while the lock is held */
		(void) ZKLOCK_FAILPOINT("waits-rebuild-locked");
		appendStringInfo(&s, "w\t%d\t%lld\t%c\t", e->owner_pid,
						 (long long) zklock_work[i].czxid,
						 e->mode == ZKLOCK_SHARED ? 'S' : 'E');
		add_role(&s, e->data);
		appendStringInfo(&s, "\t%s/%s\n", e->resource, zklock_work[i].node);
		pids[npids++] = e->owner_pid;
	}
	qsort(pids, npids, sizeof(int), cmp_pid);
	share = npids > 0 ? (WAITS_MAX_TEXT - Min(s.len, WAITS_MAX_TEXT)) / npids : 0;
	used = palloc0(sizeof(int) * Max(npids, 1));
	for (int j = 0; npids > 0 && j < zklock_recipe_nentries(); j++)
	{
		ZkLockEntry *e = entry(j);
		int		   *k;
		int			len;

		if (is_long_wait(j) || !is_owned_node(j) ||
			(k = bsearch(&e->owner_pid, pids, npids, sizeof(int),
						 cmp_pid)) == NULL)
			continue;
		len = strlen(e->resource) + strlen(zklock_work[j].node) + 16;
		if (used[k - pids] + len > share)
		{
			cut = true;			/* this backend's share is full */
			continue;
		}
		used[k - pids] += len;
		appendStringInfo(&s, "h\t%d\t%s/%s\n", e->owner_pid, e->resource,
						 zklock_work[j].node);
	}
	LWLockRelease(zklock_shared->lock);
	pfree(pids);
	pfree(used);
	if (cut && zklock_boottime_us() - last_cut_log_us >= WAITS_CUT_LOG_US)
	{
		last_cut_log_us = zklock_boottime_us();
		ereport(LOG,
				(errmsg("zklock: this instance's long waits take more than %d bytes: the rest of their nodes are not published",
						WAITS_MAX_TEXT),
				 errdetail("Deadlocks through the nodes left out are not found. (Said at most once a minute.)")));
	}
	if (npids > 0)
		return s.data;
	pfree(s.data);
	return "";
}

/* Make our node (its parent first), holding text */
static void
send_create(const char *text)
{
	char		path[ZKLOCK_MAX_PATH + 1];

	waits_dir(path, sizeof(path));
	(void) zkc_create(path, NULL, -1, ZKC_CONTAINER,
					  TAG(pub_generation, OP_PUB_PARENT, WAITS_IDX));
	waits_path(path, sizeof(path), pub_session);
	(void) zkc_create(path, text, strlen(text), ZKC_EPHEMERAL,
					  TAG(pub_generation, OP_PUB_CREATE, WAITS_IDX));
}

/*
 * Write what this instance's long waits are now, if it changed (or a
 * write failed).  Only while connected.
 */
static void
publish_now(void)
{
	int64		sid = zklock_recipe_session_id();
	uint64		marks;
	char		path[ZKLOCK_MAX_PATH + 1];
	MemoryContext old;
	char	   *text;

	if (!zklock_connected || sid == 0)
		return;
	if (sid != pub_session)
	{
		/* a new session: nothing of ours is there */
		pub_session = sid;
		pub_exists = false;
		pub_text[0] = '\0';
	}
	marks = pg_atomic_read_u64(&zklock_shared->long_wait_marks);
	if (marks == pub_marks_seen && pub_text[0] == '\0' && !pub_dirty)
		return;					/* nobody waits past the timeout */
	pub_marks_seen = marks;

	old = MemoryContextSwitchTo(TopMemoryContext);
	last_build_us = zklock_boottime_us();
	text = build_text();
	if (strcmp(text, pub_text) == 0 && !pub_dirty)
	{
		if (text[0] != '\0')
			pfree(text);
		MemoryContextSwitchTo(old);
		return;
	}
	pfree(pub_text);
	pub_text = text[0] ? text : pstrdup("");
	MemoryContextSwitchTo(old);
	pub_dirty = false;

	waits_path(path, sizeof(path), pub_session);
	if (pub_text[0] == '\0')
	{
		if (pub_exists)
			(void) zkc_delete(path, TAG(pub_generation, OP_PUB_DELETE,
										WAITS_IDX));
		pub_exists = false;
	}
	else if (!pub_exists)
	{
		send_create(pub_text);
		pub_exists = true;
	}
	else
		(void) zkc_set_data(path, pub_text, strlen(pub_text),
							TAG(pub_generation, OP_PUB_SET, WAITS_IDX));
}

/* A write of our node came back */
static void
publish_reply(ZkEvent *ev)
{
	int			op = TAG_OP(ev->tag);

	if (TAG_GEN(ev->tag) != pub_generation || pub_session == 0)
		return;
	if (op == OP_PUB_PARENT || ev->rc == ZKC_OK)
		return;					/* the create behind it tells */
	if (op == OP_PUB_CREATE && ev->rc == ZKC_NODEEXISTS)
	{
		char		path[ZKLOCK_MAX_PATH + 1];

		/* ours from before a lost reply: write it */
		waits_path(path, sizeof(path), pub_session);
		(void) zkc_set_data(path, pub_text, strlen(pub_text),
							TAG(pub_generation, OP_PUB_SET, WAITS_IDX));
		return;
	}
	if (op == OP_PUB_DELETE && ev->rc == ZKC_NONODE)
		return;
	if (ev->rc == ZKC_NONODE)
		pub_exists = false;		/* deleted by someone: make it again */
	else
	{
		/* a delete that failed: the node may be there, stale; again */
		if (op == OP_PUB_DELETE)
			pub_exists = true;
		if (ev->rc != ZKC_CONNLOSS && ev->rc != ZKC_EXPIRED)
			ereport(LOG,
					(errmsg("zklock: could not publish this instance's long waits at \"%s\": %s",
							ev->path ? ev->path : "", zkc_result_text(ev->zoo_rc)),
					 errdetail("Deadlocks through this instance's waits are not found until it is written.")));
	}
	if (ev->rc != ZKC_EXPIRED)
	{
		pub_dirty = true;
		zklock_recipe_retry_soon();
	}
}

/* ---- reads for a backend's search ---- */

static void
read_drop(int idx)
{
	if (reads[idx])
	{
		MemoryContextDelete(reads[idx]->cxt);
		reads[idx] = NULL;
	}
}

/*
 * End a read: its rows to the backend's segment (or the size needed), or
 * a failure.  A withdrawn request is freed by either (channel.c).
 */
static void
read_finish(int idx, bool ok, int sqlstate, const char *why)
{
	WorkEntry  *w = &zklock_work[idx];
	WaitsRead  *r = reads[idx];
	Size		needed = (r ? r->out.len : 0) + 1;

	if (ok)
		ok = zklock_recipe_put_rows(idx, r ? r->out.data : NULL, needed - 1);
	if (ok)
		zklock_channel_done(idx, w->generation, 0, needed);
	else
		zklock_channel_fail(idx, w->generation,
							sqlstate ? sqlstate : ERRCODE_CONNECTION_FAILURE,
							why ? why : "reading the long waits failed", false);
	read_drop(idx);
	w->phase = PH_IDLE;
}

/*
 * A backend asks for every instance's long waits, or (a resource named)
 * for one resource's children
 */
static void
read_start(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	char		path[ZKLOCK_MAX_PATH + 1];
	WaitsRead  *r;
	MemoryContext cxt;
	bool		check;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	check = entry(idx)->resource[0] != '\0';
	LWLockRelease(zklock_shared->lock);
	if (!check)
		publish_now();			/* ours first, on the same session */
	read_drop(idx);
	cxt = AllocSetContextCreate(TopMemoryContext, "zklock waits read",
								ALLOCSET_SMALL_SIZES);
	r = MemoryContextAllocZero(cxt, sizeof(WaitsRead));
	r->cxt = cxt;
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);

		initStringInfo(&r->out);
		MemoryContextSwitchTo(old);
	}
	reads[idx] = r;
	w->phase = PH_LISTING;
	if (check)
		strlcpy(path, w->parent, sizeof(path)); /* <root>/<resource> */
	else
		waits_dir(path, sizeof(path));
	if (!zkc_get_children(path, TAG(w->generation,
									check ? OP_CHECK_LIST : OP_READ_LIST, idx)))
		read_finish(idx, false, ERRCODE_CONNECTION_FAILURE,
					"could not send the request to ZooKeeper");
}

/* A reply of a read: the children, or one instance's node */
static void
read_reply(ZkEvent *ev)
{
	int			idx = TAG_IDX(ev->tag);
	WorkEntry  *w = &zklock_work[idx];
	WaitsRead  *r = reads[idx];
	char		msg[ZKLOCK_MAX_ERROR_LEN + 1];

	if (r == NULL || w->phase != PH_LISTING)
		return;
	if (ev->rc != ZKC_OK && ev->rc != ZKC_NONODE)
	{
		snprintf(msg, sizeof(msg), "could not read the long waits at \"%s\": %s",
				 ev->path ? ev->path : "", zkc_result_text(ev->zoo_rc));
		read_finish(idx, false, ERRCODE_CONNECTION_FAILURE, msg);
		return;
	}
	if (TAG_OP(ev->tag) == OP_CHECK_LIST)
	{
		MemoryContext old = MemoryContextSwitchTo(r->cxt);

		for (int k = 0; ev->rc == ZKC_OK && k < ev->nchildren; k++)
			appendStringInfo(&r->out, "%s\n", ev->children[k]);
		MemoryContextSwitchTo(old);
	}
	else if (TAG_OP(ev->tag) == OP_READ_LIST)
	{
		char		dir[ZKLOCK_MAX_PATH + 1];
		char		path[ZKLOCK_MAX_PATH + 2 + 32];

		waits_dir(dir, sizeof(dir));
		for (int k = 0; ev->rc == ZKC_OK && k < ev->nchildren; k++)
		{
			snprintf(path, sizeof(path), "%s/%s", dir, ev->children[k]);
			if (zkc_get_data(path, TAG(w->generation, OP_READ_DATA, idx)))
				r->pending++;
		}
	}
	else
	{
		const char *slash = ev->path ? strrchr(ev->path, '/') : NULL;

		r->pending--;
		if (ev->rc == ZKC_OK && slash && ev->data && ev->data[0])
		{
			MemoryContext old = MemoryContextSwitchTo(r->cxt);

			appendStringInfo(&r->out, "@%s\n%s\n", slash + 1, ev->data);
			MemoryContextSwitchTo(old);
		}
	}
	if (r->pending == 0)
		read_finish(idx, true, 0, NULL);
}

static void
waits_event(ZkEvent *ev)
{
	if (TAG_IDX(ev->tag) == WAITS_IDX)
		publish_reply(ev);
	else if (ev->kind == ZKEV_CHILDREN || ev->kind == ZKEV_DATA)
		read_reply(ev);
}

/* The backend withdrew its read: drop it (late replies find it idle) */
static void
waits_release(int idx)
{
	if (zklock_work[idx].phase == PH_LISTING)
		read_finish(idx, false, 0, NULL);
	else if (zklock_work[idx].phase == PH_IDLE)
		zklock_recipe_released(idx);
}

static void
waits_fail(int idx, int sqlstate, const char *msg)
{
	read_finish(idx, false, sqlstate, msg);
}

/* The session is gone, and our node with it; reads under way fail */
static void
waits_session_lost(void)
{
	pub_generation++;
	pub_session = 0;
	pub_exists = false;
	pub_dirty = false;
	if (pub_text)
		pub_text[0] = '\0';
	for (int i = 0; i < zklock_recipe_nentries(); i++)
		if (reads[i] && zklock_work[i].phase == PH_LISTING)
			read_finish(i, false, ERRCODE_CONNECTION_FAILURE,
						zklock_recipe_loss_why());
}

/*
 * At every pass: publish what changed; with long waits published and no new
 * mark, at most every WAITS_REBUILD_US (the pass is then due again in time)
 */
static long
waits_tick(void)
{
	int64		since;

	if (pub_dirty)
		return -1;				/* waits_retry writes it */
	since = zklock_boottime_us() - last_build_us;
	if (pub_text[0] != '\0' && since >= 0 && since < WAITS_REBUILD_US &&
		pg_atomic_read_u64(&zklock_shared->long_wait_marks) == pub_marks_seen)
		return (long) ((WAITS_REBUILD_US - since + 999) / 1000);
	publish_now();
	return -1;
}

/* A write failed: again, once connected */
static void
waits_retry(void)
{
	if (pub_dirty)
		publish_now();
}

const ZkRecipe zklock_waits_recipe = {
	.name = "waits",
	.kinds = RECIPE_KIND(ZKR_WAITS),
	.idx_first = WAITS_IDX,
	.idx_count = 1,
	.init = waits_init,
	.start = read_start,
	.release = waits_release,
	.fail_request = waits_fail,
	.event = waits_event,
	.session_lost = waits_session_lost,
	.tick = waits_tick,
	.retry = waits_retry,
};
