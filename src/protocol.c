/*-------------------------------------------------------------------------
 *
 * protocol.c
 *		The lock protocol, as the worker runs it.  Read top to bottom.
 *
 * A resource "a/b" is the znode <root>/a/b; its parents are container
 * nodes, created when missing.  Each request of a backend is one
 * EPHEMERAL_SEQUENTIAL child of the resource node, named
 * "<prefix>LOCK-EXCLUSIVE-<seq>" or "<prefix>LOCK-SHARED-<seq>".
 *
 *	1. Create the child and, back to back on the same session, list the
 *	   resource's children.  ZooKeeper serves a session's requests in order,
 *	   so the listing already holds the new node: an uncontended acquire is
 *	   one round trip.  If the resource node is missing (NONODE), create the
 *	   parents (NODEEXISTS is success), the child and the listing again, all
 *	   pipelined.
 *
 *	2. Decide (Hive's rule, made fair): an EXCLUSIVE request is granted when
 *	   no child has a lower sequence number; a SHARED request is granted
 *	   when no EXCLUSIVE child has a lower sequence number.
 *
 *	3. Not granted: a try-lock deletes its node and reports failure.  A
 *	   waiter watches exactly one node (exists with a watch): an EXCLUSIVE
 *	   request its immediate predecessor, a SHARED request the nearest lower
 *	   EXCLUSIVE.  When that node goes (or was already gone when the watch
 *	   was set), list the children again and go to 2 -- unless it was the
 *	   only node in our way at the last listing: a later node always gets a
 *	   higher sequence number, so then its deletion alone grants us, and a
 *	   handoff costs no further round trip.  (Had someone deleted our own
 *	   waiting node meanwhile, the guard of step 4 finds it gone and the
 *	   grant turns LOST a round trip later: the commit fence refuses.)  One
 *	   release wakes one waiter: there is no herd.  A change of the watched
 *	   node's data (its holder rewriting its description) changes no
 *	   sequence number: the waiter only watches it again, without listing.
 *
 *	   An explicit request (a persistent node, Hive's LOCK TABLE) has no
 *	   guard after its grant: it always lists again, and is granted only
 *	   by a rewrite of its node's data (which fails if the node is gone and
 *	   starts its time to live, see the sweep).  While it waits, its node
 *	   has an ephemeral child "waiter" of this session and is watched, so
 *	   that a deleted node fails the request at once.
 *
 *	4. Granted: the fencing token is the node's czxid.  The worker watches
 *	   its own node (the guard), so that a node deleted by someone else
 *	   turns the lock into LOST, and a revocation written into it is acted
 *	   on.  The guard reads the data and sets the watch in one request, at
 *	   the grant and after each change, so no write falls in between.
 *
 *	5. Release or withdrawal: delete the node, retried until it succeeds or
 *	   the session ends.  The backend does not wait for it.
 *
 * Faults.  An operation whose reply was lost (CONNLOSS) may or may not have
 * happened.  Such a request waits for the connection to come back and then
 * lists the children again; its node, if the create did happen, is found by
 * its prefix, which is unique to one request of one worker incarnation, and
 * adopted only if its ephemeralOwner is this session.  When the session
 * expires every node of this instance is gone: held locks become LOST,
 * waiting requests fail, and nothing is carried into the next session.
 *
 * Every operation is tagged with (generation, operation, entry); a reply
 * whose generation no longer matches the entry is from an earlier request
 * and is ignored.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <time.h>

#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "miscadmin.h"
#include "storage/dsm.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "grant_rule.h"
#include "zklock.h"
#include "zk_client.h"
#include "protocol.h"
#include "failpoint.h"
#include "lease.h"

#define ZKLOCK_MAX_PATH		(ZKLOCK_MAX_ROOT_LEN + 1 + ZKLOCK_MAX_RESOURCE_LEN)
#define MAX_CREATE_TRIES	8

/* Operations, as carried in a tag */
typedef enum ZkOp
{
	OP_PARENT = 1,				/* create a missing parent (container) */
	OP_CREATE,					/* create the lock node */
	OP_CHILDREN,				/* list the resource's children */
	OP_ADOPT,					/* stat a node found again by its prefix */
	OP_WAIT,					/* exists+watch on the node we wait behind */
	OP_GUARD,					/* getData+watch on our own granted node */
	OP_DELETE,					/* delete our node */
	OP_LIST_CHILDREN,			/* zk_locks: list a subtree */
	OP_LIST_DATA,				/* zk_locks: read a lock node */
	OP_ADMIN,					/* force-release or revoke another's node */
	OP_GRANT_WRITE,				/* explicit: rewrite the node we are granted */
	OP_GRANT_CHILD,				/* explicit: delete its waiter child */
	OP_WAITER,					/* explicit: create the waiter child */
	OP_WAITER_DELETE,			/* explicit: delete it before the node */
	OP_SELF,					/* explicit: exists+watch on our waiting node */
	OP_CLOCK,					/* sweep: a write that tells ZooKeeper's time */
	OP_SWEEP_WAITING,			/* sweep: read a node that is not granted */
	OP_REWRITE,					/* rewrite our granted node's data */
	OP_REWRITE_READ				/* read it first: its version is unknown */
} ZkOp;


/* Where the worker is with one entry; the worker's own memory */
typedef enum Phase
{
	PH_IDLE,					/* nothing of ours in flight */
	PH_DEFERRED,				/* not sent yet: waiting for a connection */
	PH_CHECKING,				/* listing (behind a create) or adoption in
								 * flight */
	PH_WATCHING,				/* waiting behind another node */
	PH_HELD,					/* granted */
	PH_GRANTING,				/* explicit: granted, its rewrite in flight */
	PH_DELETING,				/* delete in flight */
	PH_RECOVERING,				/* reply lost: redo when connected */
	PH_LISTING,					/* zk_locks walk in progress */
	PH_ADMIN					/* force-release or revoke in flight */
} Phase;

typedef struct WorkEntry
{
	Phase		phase;
	uint32		generation;		/* of the request this state is for */
	ZkEntryKind kind;
	ZkLockMode	mode;
	ZkNamingStyle naming;		/* how to name our node */
	bool		persistent;		/* an explicit lock: outlives the session */
	bool		release;		/* backend withdrew or released */
	bool		created;		/* our node exists (we saw it) */
	bool		create_unknown; /* create sent, reply lost */
	bool		need_parents;	/* create said NONODE */
	bool		try_failed;		/* try-lock lost: deleting, then report */
	bool		counted_wait;	/* counted in n_waited */
	bool		last_blocker;	/* the watched node is our only blocker */
	bool		guard_needed;	/* held, but the guard watch is not set */
	bool		self_watched;	/* explicit: a watch on our waiting node */
	int			waiter_child;	/* explicit: 0 none, 1 create sent, 2 made */
	bool		grant_written;	/* explicit: the grant's rewrite succeeded */
	int			create_rc;		/* create's result, for CHECKING */
	int			create_zoo_rc;
	int			tries;
	/* the holder's description in the node (rewrite_data) */
	int			data_version;	/* the node's data version; -1 unknown */
	uint32		shown;			/* entry's data_version the node shows */
	uint32		writing;		/* the one a write in flight carries */
	bool		rewriting;		/* a rewrite (or its read) is in flight */
	bool		rewrite_off;	/* someone else wrote the node: leave it */
	int			revoke_seen;	/* data version of the revocation acted on
								 * (a write makes it 1 or more); 0 none */
	int64		since_us;		/* deferred since (CLOCK_BOOTTIME us) */
	int64		czxid;
	char		parent[ZKLOCK_MAX_PATH + 1];	/* the resource node */
	char		prefix[32];
	char		node[ZKLOCK_MAX_NODE_NAME_LEN + 1];
	/* zk_locks walk: its own memory, NULL when none */
	struct Listing *listing;
} WorkEntry;

/* The sweeper of expired explicit locks has its own tag index */
#define SWEEP_IDX			0xffffff

/*
 * Persistent nodes of explicit requests that were still waiting when the
 * session was lost do not vanish with it: the worker deletes them (found by
 * their request's prefix) once it is connected again.  Their own tag index.
 */
#define ORPHAN_IDX			0xfffffe

typedef struct Orphan
{
	char		parent[ZKLOCK_MAX_PATH + 1];
	char		prefix[32];
} Orphan;

static List *orphans = NIL;
static uint32 orphan_generation = 0;
static bool orphan_busy = false;

static uint32 sweep_generation = 0;
static int	sweep_pending = 0;
static int64 last_sweep_us = 0;	/* CLOCK_BOOTTIME, as every timer here */

static WorkEntry *work = NULL;
static int	nwork = 0;
static bool connected = false;
static bool recovery_needed = false;	/* some entry is PH_RECOVERING */
static int64 last_recovery_us = 0;

/* listings that could not read some nodes: logged at most once a minute */
#define NOAUTH_LOG_US	(INT64CONST(60) * 1000000)
static int64 last_noauth_log_us = -NOAUTH_LOG_US;
static int64 session_id = 0;
static uint32 incarnation = 0;

static void send_create(int idx, bool with_parents);
static void send_children(int idx);
static void send_delete(int idx);
static void recover(int idx);
static void decide(int idx, ZkEvent *ev);
static void grant(int idx);
static void grant_persistent(int idx);
static void rewrite_data(int idx);
static void watch_own_waiting_node(int idx);
static const char *node_field(const char *data, const char *key);
static void fail(int idx, int sqlstate, const char *fmt,...) pg_attribute_printf(3, 4);
static void finish_release(int idx);
static void list_start(int idx);
static void list_event(int idx, ZkEvent *ev);
static void list_finish(int idx, bool ok, int sqlstate, const char *why);
static void list_next(void);
static bool list_is_waiting(int idx);
static void list_disconnected(void);
static void admin_start(int idx);
static void sweep_event(ZkEvent *ev);
static void orphan_event(ZkEvent *ev);
static void start_request(int idx);
static void send_guard(int idx);

/* a reply was lost or a send failed: retry once connected */
static inline void
set_recovering(WorkEntry *w)
{
	w->phase = PH_RECOVERING;
	recovery_needed = true;
}

static inline ZkLockEntry *
entry(int idx)
{
	return &zklock_shared->entries[idx];
}

static void
node_path(char *buf, WorkEntry *w, const char *node)
{
	snprintf(buf, ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2, "%s/%s",
			 w->parent, node);
}

/*
 * Set up the worker's table, one WorkEntry per shared entry.
 */
void
zklock_protocol_init(uint32 worker_incarnation)
{
	nwork = zklock_shared->nentries;
	if (nwork > 0xffffff)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("zklock.max_locks_per_backend is too large for this many backends")));
	work = MemoryContextAllocZero(TopMemoryContext,
								  mul_size(nwork, sizeof(WorkEntry)));
	incarnation = worker_incarnation;
}

/*
 * A backend queued an entry: a new request, or the release of one.
 */
void
zklock_protocol_request(int idx)
{
	WorkEntry  *w = &work[idx];
	ZkLockEntry *e;
	ZkEntryState state;
	uint32		gen;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	e = entry(idx);
	state = e->state;
	gen = e->generation;
	if (state == ZKE_REQUESTED && w->generation != gen)
	{
		/* a new request: take what the worker needs from the entry */
		memset(w, 0, offsetof(WorkEntry, parent));
		w->generation = gen;
		w->kind = e->kind;
		w->mode = e->mode;
		snprintf(w->parent, sizeof(w->parent), "%s/%s", zklock_root,
				 e->resource);
		w->naming = zklock_naming_style(e->resource);
		w->persistent = e->persistent;
		zklock_format_node_prefix(w->prefix, sizeof(w->prefix), incarnation,
								  idx, gen, w->persistent);
		w->node[0] = '\0';
		w->since_us = zklock_boottime_us();
		if (!connected)
			w->phase = PH_DEFERRED;
	}
	LWLockRelease(zklock_shared->lock);

	if (w->generation != gen)
	{
		/* requested and withdrawn before the worker saw it */
		if (state == ZKE_RELEASING)
		{
			LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
			if (entry(idx)->state == ZKE_RELEASING &&
				entry(idx)->generation == gen)
				zklock_entry_free(idx);
			LWLockRelease(zklock_shared->lock);
		}
		return;
	}

	if (state == ZKE_REQUESTED && w->phase == PH_IDLE)
		start_request(idx);
	else if (state == ZKE_GRANTED)
		rewrite_data(idx);		/* the holder's scope changed */
	else if (state == ZKE_RELEASING && !w->release)
	{
		w->release = true;
		switch (w->phase)
		{
			case PH_IDLE:
			case PH_DEFERRED:
				/* nothing was sent: nothing to delete */
				finish_release(idx);
				break;
			case PH_LISTING:
				/* drop the walk now; its late replies find the entry idle */
				list_finish(idx, false, 0, NULL);
				break;
			case PH_WATCHING:
			case PH_HELD:
				send_delete(idx);
				break;
			case PH_CHECKING:
			case PH_GRANTING:
			case PH_RECOVERING:
			case PH_DELETING:
			case PH_ADMIN:
				/* the reply in flight (or the reconnection) sees w->release */
				break;
		}
	}
}

/* Start what a backend asked for */
static void
start_request(int idx)
{
	switch (work[idx].kind)
	{
		case ZKR_LIST:
			list_start(idx);
			break;
		case ZKR_FORCE_DELETE:
		case ZKR_REVOKE:
			admin_start(idx);
			break;
		case ZKR_ACQUIRE:
		case ZKR_TRY_ACQUIRE:
			if (zklock_root_missing_chroot() != NULL)
				fail(idx, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
					 "the ZooKeeper chroot \"%s\" of zklock.hosts does not exist (see the server log)",
					 zklock_root_missing_chroot());
			else if (zklock_root_refused())
				fail(idx, ERRCODE_INSUFFICIENT_PRIVILEGE,
					 "zklock.root \"%s\" is open to clients without zklock's ZooKeeper credentials (see the server log)",
					 zklock_root);
			else
				send_create(idx, false);
			break;
	}
}

/*
 * Step 1: create the lock node (and the parents when asked), and list the
 * children right behind it.
 */
static void
send_create(int idx, bool with_parents)
{
	WorkEntry  *w = &work[idx];
	char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];
	char		data[ZKLOCK_MAX_DATA_LEN + 1];
	char		request[48];
	bool		ok = true;

	if (with_parents)
	{
		/* every ancestor from the root down, as containers */
		for (char *p = w->parent + 1; ok; p++)
		{
			if (*p == '/' || *p == '\0')
			{
				size_t		len = p - w->parent;

				memcpy(path, w->parent, len);
				path[len] = '\0';
				ok = zkc_create(path, NULL, -1, ZKC_CONTAINER,
								TAG(w->generation, OP_PARENT, idx));
				if (*p == '\0')
					break;
			}
		}
	}

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	strlcpy(data, entry(idx)->data, sizeof(data));
	LWLockRelease(zklock_shared->lock);
	if (w->persistent)
	{
		/* name the session that waits for the node, in place */
		char	   *v = (char *) node_field(data, ZKLOCK_WAITER_FIELD);
		char		hex[17];

		snprintf(hex, sizeof(hex), "%016llx", (unsigned long long) session_id);
		if (v && strlen(v) >= 16)
			memcpy(v, hex, 16);
	}

	zklock_format_node_request(request, sizeof(request), w->prefix, w->mode,
							   w->naming);
	node_path(path, w, request);
	w->need_parents = false;
	w->create_unknown = false;
	w->create_rc = ZKC_OK;
	w->tries++;
	if (!ok ||
		!zkc_create(path, data, strlen(data),
					w->persistent ? ZKC_PERSISTENT_SEQUENTIAL : ZKC_EPHEMERAL_SEQUENTIAL,
					TAG(w->generation, OP_CREATE, idx)))
	{
		set_recovering(w);
		return;
	}
	w->create_unknown = true;	/* until its reply says otherwise */
	send_children(idx);
}

static void
send_children(int idx)
{
	WorkEntry  *w = &work[idx];

	w->phase = PH_CHECKING;
	if (!zkc_get_children(w->parent, TAG(w->generation, OP_CHILDREN, idx)))
		set_recovering(w);
}

static void
send_delete(int idx)
{
	WorkEntry  *w = &work[idx];
	char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];

	node_path(path, w, w->node);
	w->phase = PH_DELETING;
	if (w->persistent)
	{
		/* a waiting explicit node has a child: it goes first */
		char	   *child = psprintf("%s/%s", path, ZKLOCK_WAITER_CHILD);

		(void) zkc_delete(child, TAG(w->generation, OP_WAITER_DELETE, idx));
		pfree(child);
	}
	/* failpoint "fail": as if the delete's reply was lost */
	if (ZKLOCK_FAILPOINT("before-delete") ||
		!zkc_delete(path, TAG(w->generation, OP_DELETE, idx)))
		set_recovering(w);
}

/*
 * After a lost reply, once connected again: list the children, which finds
 * our node by its prefix if it exists, and carry on from there.
 */
static void
recover(int idx)
{
	WorkEntry  *w = &work[idx];

	if (w->phase != PH_RECOVERING)
		return;
	if (w->kind == ZKR_LIST)
	{
		list_finish(idx, false, ERRCODE_CONNECTION_FAILURE,
					"connection to ZooKeeper lost during the listing");
		return;
	}
	send_children(idx);
}

/*
 * The value of a "key=" line of node data, or NULL.  Every value is on one
 * line (backend.c's one_line), so a field starts the data or follows a
 * line break; "key=" inside another field's value is not it.
 */
static const char *
node_field(const char *data, const char *key)
{
	size_t		len = strlen(key);

	if (strncmp(data, key, len) == 0)
		return data + len;
	for (const char *p = data; (p = strchr(p, '\n')) != NULL; p++)
		if (strncmp(p + 1, key, len) == 0)
			return p + 1 + len;
	return NULL;
}

/*
 * Revocation (Curator's, done for the holder): another instance wrote
 * "revoke=cancel" or "revoke=terminate" into our granted node.  Cancel the
 * holder's statement or end its session, as the revoker chose; its
 * transaction then ends and releases the lock.
 */
static void
revoked(int idx, const char *data, int version)
{
	WorkEntry  *w = &work[idx];
	const char *r = node_field(data, "revoke=");
	bool		terminate;
	int			pid = 0;

	if (r == NULL || version == w->revoke_seen)
		return;					/* none, or this one was acted on */
	terminate = strncmp(r, "terminate", 9) == 0;
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	if (entry(idx)->state == ZKE_GRANTED)
		pid = entry(idx)->owner_pid;
	LWLockRelease(zklock_shared->lock);
	if (pid == 0)
		return;
	w->revoke_seen = version;	/* the guard and a rewrite may both read it */
	ereport(LOG,
			(errmsg("zklock: lock node \"%s/%s\" was revoked; %s backend %d",
					w->parent, w->node,
					terminate ? "terminating" : "canceling the statement of", pid)));
	if (kill(pid, terminate ? SIGTERM : SIGINT) != 0)
		ereport(LOG,
				(errmsg("zklock: could not signal backend %d: %m", pid)));
}

/*
 * An administrator's request: delete another holder's node, or write a
 * revocation into it.
 */
static void
admin_start(int idx)
{
	WorkEntry  *w = &work[idx];
	char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];
	char		node[ZKLOCK_MAX_NODE_NAME_LEN + 1];
	char		data[ZKLOCK_MAX_DATA_LEN + 1];
	bool		ok;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	strlcpy(node, entry(idx)->node, sizeof(node));
	strlcpy(data, entry(idx)->data, sizeof(data));
	LWLockRelease(zklock_shared->lock);

	node_path(path, w, node);
	w->phase = PH_ADMIN;
	if (w->kind == ZKR_FORCE_DELETE)
		ok = zkc_delete(path, TAG(w->generation, OP_ADMIN, idx));
	else
		ok = zkc_set_data(path, data, strlen(data),
						  TAG(w->generation, OP_ADMIN, idx));
	if (!ok)
		fail(idx, ERRCODE_CONNECTION_FAILURE, "not connected to ZooKeeper");
}

/*
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
 * (the create of an ephemeral node, deleted at once), whose mtime is "now"
 * by the clock of the ZooKeeper leader; a node written by zklock 1.1 carries
 * its time to live as a duration, "ttl=<ms>", counted from its mtime, which
 * the write that granted it set (the grant's rewrite of its data, see
 * grant_persistent).  A lock can so end early only by the difference between
 * the clocks of two successive ZooKeeper leaders, and late by up to one
 * sweep interval (and the walk).
 *
 *	- A node whose data has "waiter=" is a request not granted yet (or
 *	  granted, with its rewrite not yet done): it never expires.  Its
 *	  ephemeral child "waiter" lives as long as the session that waits for
 *	  it; without it, and older than twice the session timeout (time enough
 *	  for a live waiter to make it), nobody will ever take the node over:
 *	  the sweep removes it, so that it never becomes a lock with no owner.
 *	- A node that Hive's rule does not grant (among its siblings) never
 *	  expires: 1.0's waiting requests have no "waiter=".
 *	- zklock 1.0 wrote "expires=<epoch s>" and "since=<epoch s>", both by
 *	  the requester's clock: their difference (rounded up) is its time to
 *	  live, counted from the node's mtime (its creation: 1.0 counted from
 *	  the request), never by the sweeper's own clock.
 *	- An explicit node that 1.0's zk_lock_revoke rewrote without its expiry
 *	  goes a year (the longest time to live) after that rewrite.
 */
#define SWEEP_IN_FLIGHT 16

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
	snprintf(path, sizeof(path), "%s/zklock-clock-%016llx", zklock_root,
			 (unsigned long long) session_id);
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

/* A zklock explicit node's data came back: remove it if its time is up */
static void
sweep_node(ZkEvent *ev, bool granted)
{
	const char *data = ev->data;
	const char *waiter = node_field(data, ZKLOCK_WAITER_FIELD);
	const char *ttl = node_field(data, "ttl=");
	const char *expires = node_field(data, "expires=");
	const char *scope = node_field(data, "scope=");
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
		const char *since = node_field(data, "since=");
		long long	e = strtoll(expires, NULL, 10);
		long long	b;

		if (since == NULL || e <= 0)
			return;
		b = strtoll(since, NULL, 10);
		deadline = ev->mtime + Min((int64) Max(e - b, 0) * 1000, SWEEP_MAX_TTL_MS);
	}
	else if (scope && strncmp(scope, "explicit\n", 9) == 0 &&
			 node_field(data, "revoke=") != NULL)
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
		int64		min_all = -1;
		int64		min_x = -1;

		/* Hive's rule among the siblings: who is granted */
		for (int i = 0; i < ev->nchildren; i++)
		{
			ZkLockMode	m;
			int64		seq;

			if (!zklock_parse_node_name(ev->children[i], &m, &seq))
				continue;
			if (min_all < 0 || seq < min_all)
				min_all = seq;
			if (m == ZKLOCK_EXCLUSIVE && (min_x < 0 || seq < min_x))
				min_x = seq;
		}
		for (int i = 0; i < ev->nchildren; i++)
		{
			const char *c = ev->children[i];
			char	   *child = psprintf("%s/%s", ev->path, c);
			ZkLockMode	m;
			int64		seq;

			if (!zklock_parse_node_name(c, &m, &seq))
				sweep_push(child, OP_LIST_CHILDREN);	/* a resource: walk it */
			else if (sweep_all_nodes || zklock_node_has_prefix(c, "zx"))
			{
				/* an explicit lock: read it */
				bool		granted;

				if (m == ZKLOCK_EXCLUSIVE)
					granted = (seq == min_all);
				else
					granted = (min_x < 0 || seq < min_x);
				sweep_push(child, granted ? OP_LIST_DATA : OP_SWEEP_WAITING);
			}
			pfree(child);
		}
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

/* Delete the next orphaned persistent node, if any; when connected */
static void
orphan_next(void)
{
	Orphan	   *o;

	if (orphans == NIL || orphan_busy)
		return;
	o = linitial(orphans);
	orphan_generation++;
	orphan_busy = zkc_get_children(o->parent,
								   TAG(orphan_generation, OP_CHILDREN, ORPHAN_IDX));
}

static void
orphan_event(ZkEvent *ev)
{
	Orphan	   *o;

	if (ev->kind != ZKEV_CHILDREN || TAG_GEN(ev->tag) != orphan_generation ||
		orphans == NIL)
		return;
	orphan_busy = false;
	if (ev->rc != ZKC_OK && ev->rc != ZKC_NONODE)
		return;					/* try again later */
	o = linitial(orphans);
	for (int i = 0; i < ev->nchildren; i++)
	{
		if (zklock_node_has_prefix(ev->children[i], o->prefix))
		{
			char	   *path = psprintf("%s/%s", o->parent, ev->children[i]);

			char	   *child = psprintf("%s/%s", path, ZKLOCK_WAITER_CHILD);

			ereport(LOG,
					(errmsg("zklock: removing the node of an explicit lock request lost with the session: \"%s\"",
							path)));
			/* its waiter child went with the session; if not, it goes first */
			(void) zkc_delete(child, TAG(orphan_generation, OP_DELETE, ORPHAN_IDX));
			(void) zkc_delete(path, TAG(orphan_generation, OP_DELETE, ORPHAN_IDX));
			pfree(child);
			pfree(path);
		}
	}
	orphans = list_delete_first(orphans);
	pfree(o);
	orphan_next();
}

/*
 * A reply or a watch for a request entry.
 */
void
zklock_protocol_event(ZkEvent *ev)
{
	int			idx = TAG_IDX(ev->tag);
	int			op = TAG_OP(ev->tag);
	WorkEntry  *w;

	if (idx == SWEEP_IDX)
	{
		sweep_event(ev);
		return;
	}
	if (idx == ORPHAN_IDX)
	{
		orphan_event(ev);
		return;
	}
	if (idx >= nwork)
		return;
	w = &work[idx];
	if (TAG_GEN(ev->tag) != w->generation || w->phase == PH_IDLE)
		return;					/* a reply for an earlier request */

	if (op == OP_LIST_CHILDREN || op == OP_LIST_DATA)
	{
		list_event(idx, ev);
		return;
	}
	if (op == OP_ADMIN)
	{
		if (w->phase != PH_ADMIN)
			return;
		if (ev->rc == ZKC_OK || ev->rc == ZKC_NONODE)
		{
			LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
			if (entry(idx)->state == ZKE_REQUESTED)
			{
				entry(idx)->state = ZKE_DONE;
				entry(idx)->token = (ev->rc == ZKC_OK);	/* found it */
				zklock_wake_owner(entry(idx));
			}
			else if (entry(idx)->state == ZKE_RELEASING)
				zklock_entry_free(idx);
			LWLockRelease(zklock_shared->lock);
			w->phase = PH_IDLE;
		}
		else
			fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
				 "could not change lock node \"%s\": %s", ev->path,
				 zkc_result_text(ev->zoo_rc));
		return;
	}

	switch (op)
	{
		case OP_PARENT:
			/* the create behind it tells whether the parents are there */
			break;

		case OP_CREATE:

			/*
			 * failpoint "fail": the reply of a create that succeeded is
			 * lost, as in a connection loss: the node exists, but we do not
			 * know its name; the listing behind it finds it by its prefix.
			 */
			if (ev->rc == ZKC_OK && ZKLOCK_FAILPOINT("after-create-reply"))
			{
				w->create_rc = ZKC_CONNLOSS;
				break;
			}
			w->create_rc = ev->rc;
			w->create_zoo_rc = ev->zoo_rc;
			if (ev->rc == ZKC_OK)
			{
				const char *slash = strrchr(ev->path, '/');

				strlcpy(w->node, slash ? slash + 1 : ev->path, sizeof(w->node));
				w->czxid = ev->czxid;
				w->created = true;
				w->create_unknown = false;
			}
			else if (ev->rc == ZKC_NONODE)
			{
				w->need_parents = true;
				w->create_unknown = false;
			}
			else if (ev->rc != ZKC_CONNLOSS)
				w->create_unknown = false;
			/* the listing behind it comes next and decides */
			break;

		case OP_CHILDREN:
			if (ev->rc == ZKC_CONNLOSS)
			{
				set_recovering(w);
				break;
			}
			if (ev->rc == ZKC_EXPIRED)
				break;			/* zklock_protocol_session_lost() follows */
			if (w->create_rc != ZKC_OK && w->create_rc != ZKC_NONODE &&
				w->create_rc != ZKC_CONNLOSS && !w->created)
			{
				fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
					 "could not create lock node under \"%s\": %s",
					 w->parent, zkc_result_text(w->create_zoo_rc));
				break;
			}
			if (w->need_parents)
			{
				if (w->release)
					finish_release(idx);
				else if (w->tries >= MAX_CREATE_TRIES)
					fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
						 "could not create lock node under \"%s\" after %d attempts",
						 w->parent, w->tries);
				else
					send_create(idx, true);
				break;
			}
			decide(idx, ev);
			break;

		case OP_ADOPT:
			/* a node found by our prefix: ours only if this session's */
			if (ev->rc == ZKC_OK &&
				ev->ephemeral_owner == (w->persistent ? 0 : session_id))
			{
				ereport(LOG,
						(errmsg("zklock: adopted lock node \"%s/%s\" after its create's reply was lost",
								w->parent, w->node)));
				w->created = true;
				w->czxid = ev->czxid;
				send_children(idx);
			}
			else if (ev->rc == ZKC_OK || ev->rc == ZKC_NONODE)
			{
				/* not ours, or gone: as if the create never happened */
				w->node[0] = '\0';
				if (w->release)
					finish_release(idx);
				else
					send_create(idx, false);
			}
			else
				set_recovering(w);
			break;

		case OP_WAIT:
			if (w->phase != PH_WATCHING)
				break;
			/*
			 * An explicit request has no guard that would notice its own
			 * node gone: it lists again, and decide() looks for it.
			 */
			if (w->last_blocker && !w->persistent &&
				((ev->kind == ZKEV_WATCH && ev->watch_type == ZKC_WATCH_DELETED) ||
				 (ev->kind == ZKEV_STAT && ev->rc == ZKC_NONODE)))
				grant(idx);		/* our last blocker is gone */
			else if (ev->kind == ZKEV_WATCH &&
					 ev->watch_type == ZKC_WATCH_CHANGED)
			{
				/*
				 * Its data changed (a holder rewriting its description, a
				 * revocation): the children, hence what we wait for, did
				 * not.  Watch the same node again, without listing, so that
				 * a holder's rewrite costs each waiter behind it one request
				 * instead of a listing of every waiter (a herd).  The
				 * exists tells if it went meanwhile.
				 */
				if (!zkc_exists(ev->path, true, TAG(w->generation, OP_WAIT, idx)))
					set_recovering(w);
			}
			else if (ev->kind == ZKEV_WATCH)
				send_children(idx); /* the node we wait behind is gone */
			else if (ev->rc == ZKC_NONODE)
				send_children(idx); /* gone before the watch was set */
			else if (ev->rc == ZKC_CONNLOSS)
				set_recovering(w);
			break;

		case OP_GUARD:
			if (w->phase != PH_HELD)
				break;
			if (ev->kind == ZKEV_WATCH && ev->watch_type != ZKC_WATCH_DELETED)
			{
				/*
				 * Someone changed our node's data (our own rewrite, or a
				 * revocation): read it and watch it again, in one request.
				 */
				send_guard(idx);
				break;
			}
			if (ev->kind == ZKEV_DATA && ev->rc == ZKC_OK)
			{
				/* the watch is set; a write after this read fires it */
				revoked(idx, ev->data, ev->version);
				break;
			}
			if (ev->kind == ZKEV_DATA && ev->rc == ZKC_NOAUTH)
			{
				/*
				 * Our node's ACL was changed to refuse us READ: we cannot
				 * see a revocation, but still notice the deletion.
				 */
				char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];

				node_path(path, w, w->node);
				ereport(LOG,
						(errmsg("zklock: lock node \"%s\" no longer lets zklock read it; a revocation of it cannot be seen",
								path),
						 errdetail("Someone changed its ACL. Its deletion is still noticed.")));
				if (!zkc_exists(path, true, TAG(w->generation, OP_GUARD, idx)))
				{
					w->guard_needed = true;
					recovery_needed = true;
				}
				break;
			}
			if ((ev->kind == ZKEV_DATA || ev->kind == ZKEV_STAT) &&
				ev->rc != ZKC_OK && ev->rc != ZKC_NONODE)
			{
				/*
				 * The watch was not set (connection lost): read and set it
				 * again once connected (resume), so that a revocation
				 * written meanwhile is read then.
				 */
				w->guard_needed = true;
				recovery_needed = true;
				break;
			}
			if ((ev->kind == ZKEV_WATCH && ev->watch_type == ZKC_WATCH_DELETED) ||
				ev->rc == ZKC_NONODE)
			{
				/* our granted node is gone and we did not delete it */
				LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
				if (entry(idx)->state == ZKE_GRANTED)
				{
					entry(idx)->state = ZKE_LOST;
					zklock_shared->n_lost++;
					zklock_wake_owner(entry(idx));
				}
				LWLockRelease(zklock_shared->lock);
				ereport(LOG,
						(errmsg("zklock: lock node \"%s/%s\" was deleted while held",
								w->parent, w->node)));
				/* keep the entry until the backend lets it go */
				w->created = false;
			}
			break;

		case OP_REWRITE:
			w->rewriting = false;
			if (w->phase != PH_HELD)
				break;
			if (ev->rc == ZKC_OK)
			{
				w->data_version = ev->version;
				w->shown = w->writing;
				rewrite_data(idx);	/* a change made meanwhile */
			}
			else if (ev->rc == ZKC_BADVERSION)
			{
				/* written by someone else: read it, then decide */
				w->data_version = -1;
				rewrite_data(idx);
			}
			else if (ev->rc == ZKC_CONNLOSS)
				w->data_version = -1;	/* written or not: read it again
										 * once connected (resume) */
			else if (ev->rc != ZKC_NONODE && ev->rc != ZKC_EXPIRED)
			{
				/* the guard handles a node gone, the session its loss */
				w->rewrite_off = true;
				ereport(LOG,
						(errmsg("zklock: could not update lock node \"%s/%s\": %s",
								w->parent, w->node, zkc_result_text(ev->zoo_rc))));
			}
			break;

		case OP_REWRITE_READ:
			w->rewriting = false;
			if (w->phase != PH_HELD || ev->rc != ZKC_OK)
				break;			/* connection loss: resume reads again */
			if (node_field(ev->data, "revoke=") != NULL)
			{
				/*
				 * A revocation: never overwrite it, and act on it if the
				 * guard has not (revoked() signals once per revocation).
				 */
				w->rewrite_off = true;
				revoked(idx, ev->data, ev->version);
			}
			else
			{
				w->data_version = ev->version;
				rewrite_data(idx);
			}
			break;

		case OP_GRANT_WRITE:
			if (w->phase != PH_GRANTING)
				break;
			if (ev->rc == ZKC_OK)
				w->grant_written = true;
			else if (ev->rc == ZKC_NONODE)
			{
				w->created = false;
				fail(idx, ERRCODE_LOCK_NOT_AVAILABLE,
					 "explicit lock node \"%s/%s\" was deleted while the request waited",
					 w->parent, w->node);
			}
			else if (ev->rc == ZKC_CONNLOSS)
				set_recovering(w);	/* list again, and write again */
			else if (ev->rc != ZKC_EXPIRED)
				fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
					 "could not write explicit lock node \"%s/%s\": %s",
					 w->parent, w->node, zkc_result_text(ev->zoo_rc));
			break;

		case OP_GRANT_CHILD:
			/* sent right behind the rewrite: its reply comes after it */
			if (w->phase != PH_GRANTING || !w->grant_written)
				break;
			if (ev->rc == ZKC_CONNLOSS)
				set_recovering(w);
			else if (ev->rc != ZKC_EXPIRED)
				grant(idx);		/* a child left over goes with our session */
			break;

		case OP_WAITER:
			if (ev->rc == ZKC_OK || ev->rc == ZKC_NODEEXISTS)
				w->waiter_child = 2;
			else
			{
				/* NONODE: our node is gone, which OP_SELF reports */
				w->waiter_child = 0;
				if (ev->rc == ZKC_CONNLOSS && w->phase == PH_WATCHING)
					set_recovering(w);	/* make it again */
			}
			break;

		case OP_SELF:
			if ((ev->kind == ZKEV_WATCH && ev->watch_type == ZKC_WATCH_DELETED) ||
				(ev->kind == ZKEV_STAT && ev->rc == ZKC_NONODE))
			{
				w->self_watched = false;
				if (w->phase == PH_WATCHING)
				{
					/* someone deleted the node we wait with */
					w->created = false;
					ereport(LOG,
							(errmsg("zklock: explicit lock node \"%s/%s\" was deleted while its request waited",
									w->parent, w->node)));
					fail(idx, ERRCODE_LOCK_NOT_AVAILABLE,
						 "explicit lock node \"%s/%s\" was deleted while the request waited",
						 w->parent, w->node);
				}
				/* listing or rewrite in flight: its reply finds it gone */
			}
			else if (ev->kind == ZKEV_WATCH)
			{
				/* one-shot: set it again while we wait */
				w->self_watched = false;
				if (w->phase == PH_WATCHING)
					watch_own_waiting_node(idx);
			}
			break;

		case OP_WAITER_DELETE:
			/* the node's delete behind it tells */
			break;

		case OP_DELETE:
			if (ev->rc == ZKC_OK || ev->rc == ZKC_NONODE ||
				ev->rc == ZKC_EXPIRED)
			{
				w->created = false;
				if (w->try_failed && !w->release)
				{
					LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
					if (entry(idx)->state == ZKE_REQUESTED)
					{
						entry(idx)->state = ZKE_NOT_GRANTED;
						zklock_shared->n_not_granted++;
						zklock_wake_owner(entry(idx));
					}
					LWLockRelease(zklock_shared->lock);
					w->phase = PH_IDLE;
				}
				else
					finish_release(idx);
			}
			else
				set_recovering(w);	/* delete again when connected */
			break;
	}
}

/*
 * Step 2: the listing came back.  Find our node, apply Hive's rule, grant
 * or wait behind exactly one node.
 */
static void
decide(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &work[idx];
	int64		my_seq = -1;
	ZkLockMode	my_mode = w->mode;
	int			pred;
	int			nblockers;
	char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];

	/* our node: known by name, or found again by prefix */
	for (int i = 0; i < ev->nchildren; i++)
	{
		const char *c = ev->children[i];

		if (w->node[0] ? strcmp(c, w->node) == 0 :
			zklock_node_has_prefix(c, w->prefix))
		{
			if (!zklock_parse_node_name(c, NULL, &my_seq))
				continue;
			if (!w->created)
			{
				/* found after a lost reply: check whose it is first */
				strlcpy(w->node, c, sizeof(w->node));
				node_path(path, w, w->node);
				w->phase = PH_CHECKING;
				if (!zkc_exists(path, false, TAG(w->generation, OP_ADOPT, idx)))
					set_recovering(w);
				return;
			}
			break;
		}
	}

	if (my_seq < 0)
	{
		/* our node is not there */
		if (w->created)
		{
			/* deleted by someone else while we waited */
			w->created = false;
			fail(idx, ERRCODE_LOCK_NOT_AVAILABLE,
				 "lock node under \"%s\" was deleted while waiting",
				 w->parent);
		}
		else if (w->release)
			finish_release(idx);
		else if (w->tries >= MAX_CREATE_TRIES)
			fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
				 "could not create lock node under \"%s\" after %d attempts",
				 w->parent, w->tries);
		else
			send_create(idx, false);	/* the create never happened */
		return;
	}

	if (w->release)
	{
		/* withdrawn while the create was in flight */
		send_delete(idx);
		return;
	}

	/* Hive's rule (grant_rule.c): the node we would have to wait behind */
	if (zklock_grant_rule((const char *const *) ev->children, ev->nchildren,
						  my_seq, my_mode, &pred, &nblockers) ==
		ZKLOCK_VERDICT_GRANTED)
	{
		if (w->persistent)
			grant_persistent(idx);
		else
			grant(idx);
		return;
	}

	/* Step 3: not granted */
	if (w->kind == ZKR_TRY_ACQUIRE)
	{
		w->try_failed = true;
		send_delete(idx);
		return;
	}

	if (!w->counted_wait)
	{
		w->counted_wait = true;
		LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
		zklock_shared->n_waited++;
		LWLockRelease(zklock_shared->lock);
	}
	/*
	 * A node created later always has a higher sequence number, so when the
	 * node we watch is the only blocker left, its deletion alone grants us:
	 * no need to list the children again (the handoff costs one hop less).
	 */
	w->last_blocker = (nblockers == 1);
	node_path(path, w, ev->children[pred]);
	w->phase = PH_WATCHING;
	if (!zkc_exists(path, true, TAG(w->generation, OP_WAIT, idx)))
		set_recovering(w);
	else if (w->persistent)
		watch_own_waiting_node(idx);
}

/*
 * A waiting explicit request: its persistent node gets an ephemeral child
 * of this session (while it exists, the sweep knows someone waits for the
 * node), and a watch, so that the node deleted by someone else ends the
 * wait with an error instead of a wait for ever.
 */
static void
watch_own_waiting_node(int idx)
{
	WorkEntry  *w = &work[idx];
	char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];

	node_path(path, w, w->node);
	if (w->waiter_child == 0)
	{
		char	   *child = psprintf("%s/%s", path, ZKLOCK_WAITER_CHILD);

		if (zkc_create(child, NULL, -1, ZKC_EPHEMERAL,
					   TAG(w->generation, OP_WAITER, idx)))
			w->waiter_child = 1;
		pfree(child);
	}
	if (!w->self_watched)
		w->self_watched = zkc_exists(path, true,
									 TAG(w->generation, OP_SELF, idx));
}

/*
 * The data of a granted explicit node: the request's, without the waiter=
 * line, and with expires_at= (for people only) counted from now.
 */
static void
granted_data(char *data, size_t size)
{
	StringInfoData s;
	const char *ttl = node_field(data, "ttl=");
	int64		ttl_ms = ttl ? strtoll(ttl, NULL, 10) : 0;
	const char *p = data;

	initStringInfo(&s);
	while (*p)
	{
		const char *eol = strchr(p, '\n');
		size_t		len = eol ? (size_t) (eol - p + 1) : strlen(p);

		if (strncmp(p, ZKLOCK_WAITER_FIELD, strlen(ZKLOCK_WAITER_FIELD)) == 0)
		{
			/* nobody waits any more: the line goes */
		}
		else if (strncmp(p, "expires_at=", 11) == 0 && eol)
		{
			/* Unix epoch microseconds, as backend.c writes it */
			int64		at = GetCurrentTimestamp() + ttl_ms * 1000 +
				(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * USECS_PER_SEC;

			appendStringInfo(&s, "expires_at=" INT64_FORMAT ".%06d\n",
							 at / USECS_PER_SEC, (int) (at % USECS_PER_SEC));
		}
		else
			appendBinaryStringInfo(&s, p, len);
		p += len;
	}
	strlcpy(data, s.data, size);
	pfree(s.data);
}

/*
 * Step 4 of an explicit request: Hive's rule grants our node.  Rewrite its
 * data (setData): the write proves that the node still exists, and sets its
 * mtime to the time of the grant by ZooKeeper's clock, from which its time
 * to live counts.  Then delete its waiter child, and tell the backend once
 * both are done (ZooKeeper answers them in order).
 */
static void
grant_persistent(int idx)
{
	WorkEntry  *w = &work[idx];
	char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];
	char		data[ZKLOCK_MAX_DATA_LEN + 1];
	char	   *child;
	bool		ok;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	strlcpy(data, entry(idx)->data, sizeof(data));
	LWLockRelease(zklock_shared->lock);
	granted_data(data, sizeof(data));

	node_path(path, w, w->node);
	child = psprintf("%s/%s", path, ZKLOCK_WAITER_CHILD);
	w->phase = PH_GRANTING;
	w->grant_written = false;
	ok = zkc_set_data(path, data, strlen(data),
					  TAG(w->generation, OP_GRANT_WRITE, idx)) &&
		zkc_delete(child, TAG(w->generation, OP_GRANT_CHILD, idx));
	pfree(child);
	if (!ok)
		set_recovering(w);
}

/*
 * The backend changed the description of a lock it holds (its scope, or
 * whether it is held only for a child's sake, see backend.c's
 * show_holds): write it into the node, where zk_locks on every instance
 * reads it.  One setData, checked against the version of the node's data
 * we know (our own earlier write, or 0 from the create), so that it never
 * overwrites what another wrote meanwhile (a revocation): when the version
 * is unknown or was not ours, read the node first, and leave a revoked
 * node alone.  Nothing waits for it; a change made while a write is in
 * flight goes when that write is answered.
 */
static void
rewrite_data(int idx)
{
	WorkEntry  *w = &work[idx];
	char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];
	char		data[ZKLOCK_MAX_DATA_LEN + 1];
	uint32		version;
	bool		granted;
	bool		ok;

	if (w->phase != PH_HELD || w->persistent || w->rewriting ||
		w->rewrite_off || !connected)
		return;
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	granted = entry(idx)->state == ZKE_GRANTED &&
		entry(idx)->generation == w->generation;
	version = entry(idx)->data_version;
	if (granted && version != w->shown)
		strlcpy(data, entry(idx)->data, sizeof(data));
	LWLockRelease(zklock_shared->lock);
	if (!granted || version == w->shown)
		return;

	node_path(path, w, w->node);
	w->rewriting = true;
	if (w->data_version < 0)
		ok = zkc_get_data(path, TAG(w->generation, OP_REWRITE_READ, idx));
	else
	{
		w->writing = version;
		ok = zkc_set_data_version(path, data, strlen(data), w->data_version,
								  TAG(w->generation, OP_REWRITE, idx));
	}
	if (!ok)
	{
		/* not sent: read and write again (resume) */
		w->rewriting = false;
		w->data_version = -1;
		recovery_needed = true;
	}
}

/*
 * Step 4: granted.  Tell the backend, then guard the node.
 */
static void
grant(int idx)
{
	WorkEntry  *w = &work[idx];
	ZkLockEntry *e;
	bool		withdrawn = false;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	e = entry(idx);
	if (e->state == ZKE_REQUESTED)
	{
		e->state = ZKE_GRANTED;
		e->token = w->czxid;
		e->session_id = w->persistent ? 0 : session_id;
		e->granted_at = GetCurrentTimestamp();
		strlcpy(e->node, w->node, sizeof(e->node));
		zklock_shared->n_granted++;
		zklock_wake_owner(e);
	}
	else
		withdrawn = true;
	LWLockRelease(zklock_shared->lock);

	if (withdrawn)
	{
		send_delete(idx);
		return;
	}
	if (w->persistent)
	{
		/* an explicit lock: the node is on its own now, until it expires */
		w->phase = PH_IDLE;
		return;
	}
	w->phase = PH_HELD;
	send_guard(idx);
}

/*
 * Watch our own granted node, so that its deletion by someone else (an
 * administrator, a revocation) turns the lock LOST, and a revocation
 * written into it is acted on.  The read and the watch are one request
 * (getData with a watch): a write applied after the read fires the watch,
 * so a revocation written before the guard is set, or between a change and
 * the guard set again after it (each rewrite of our own data fires it), is
 * read, never missed.  Not waited for; a guard that could not be set (not
 * sent, or its reply lost with the connection) is set again, reading
 * again, once connected (resume).  Failpoint "fail": as if the reply was
 * lost; "pause": a write made meanwhile must still be seen.
 */
static void
send_guard(int idx)
{
	WorkEntry  *w = &work[idx];
	char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];

	node_path(path, w, w->node);
	w->guard_needed = ZKLOCK_FAILPOINT("before-guard") ||
		!zkc_get_data_watch(path, TAG(w->generation, OP_GUARD, idx));
	if (w->guard_needed)
		recovery_needed = true;
}

/*
 * A request ends in failure; any node of ours is gone or being deleted.
 */
static void
fail(int idx, int sqlstate, const char *fmt,...)
{
	WorkEntry  *w = &work[idx];
	char		msg[ZKLOCK_MAX_ERROR_LEN + 1];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (entry(idx)->state == ZKE_REQUESTED)
	{
		entry(idx)->state = ZKE_FAILED;
		entry(idx)->sqlstate = sqlstate;
		strlcpy(entry(idx)->error, msg, sizeof(entry(idx)->error));
		zklock_shared->n_failed++;
		zklock_wake_owner(entry(idx));
	}
	else if (entry(idx)->state == ZKE_RELEASING)
		zklock_entry_free(idx);
	LWLockRelease(zklock_shared->lock);
	w->phase = PH_IDLE;
}

/* Step 5 done: the node is gone; the entry can be reused */
static void
finish_release(int idx)
{
	WorkEntry  *w = &work[idx];

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (entry(idx)->state == ZKE_RELEASING)
		zklock_entry_free(idx);
	LWLockRelease(zklock_shared->lock);
	w->phase = PH_IDLE;
}

/*
 * Send what waited for a connection, and retry what lost its reply.
 */
static void
resume(int i)
{
	WorkEntry  *w = &work[i];

	if (w->phase == PH_DEFERRED)
	{
		w->phase = PH_IDLE;
		start_request(i);
	}
	else if (w->phase == PH_HELD && w->guard_needed)
		send_guard(i);
	else if (w->phase == PH_RECOVERING)
	{
		if (w->release && !w->created && !w->create_unknown &&
			w->node[0] == '\0')
			finish_release(i);
		else if ((w->release || w->try_failed) && w->created)
			send_delete(i);
		else
			recover(i);
	}
	if (w->phase == PH_HELD)
		rewrite_data(i);		/* a change that waited for a connection */
}

/*
 * The session is (again) connected.
 */
void
zklock_protocol_connected(int64 new_session_id)
{
	connected = true;
	session_id = new_session_id;
	recovery_needed = false;
	orphan_next();
	for (int i = 0; i < nwork; i++)
		resume(i);
	list_next();				/* listings that waited for a slot */
}

void
zklock_protocol_disconnected(void)
{
	connected = false;
	sweep_abandon();			/* its replies fail; sweep again later */
	orphan_busy = false;
	list_disconnected();
}

/*
 * The session is gone (expired or closed): so is every node it created.
 * Held locks are lost; waiting requests fail; requests not yet sent wait
 * for the next session.  Returns how many held locks were marked lost, and
 * the PIDs of their backends in pids[] (each once, at most maxpids of them;
 * *npids says how many).
 */
int
zklock_protocol_session_lost(const char *why, int *pids, int maxpids,
							 int *npids)
{
	int			nlost = 0;

	*npids = 0;
	connected = false;
	session_id = 0;
	sweep_abandon();
	orphan_busy = false;
	for (int i = 0; i < nwork; i++)
	{
		WorkEntry  *w = &work[i];

		switch (w->phase)
		{
			case PH_IDLE:
			case PH_DEFERRED:
				break;
			case PH_HELD:
				LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
				if (entry(i)->state == ZKE_GRANTED)
				{
					int			pid = entry(i)->owner_pid;
					int			k;

					entry(i)->state = ZKE_LOST;
					zklock_shared->n_lost++;
					zklock_wake_owner(entry(i));
					nlost++;
					for (k = 0; k < *npids && pids[k] != pid; k++)
						;
					if (k == *npids && *npids < maxpids)
						pids[(*npids)++] = pid;
				}
				else if (entry(i)->state == ZKE_RELEASING)
					zklock_entry_free(i);
				LWLockRelease(zklock_shared->lock);
				w->phase = PH_IDLE;
				break;
			case PH_LISTING:
				list_finish(i, false, ERRCODE_CONNECTION_FAILURE, why);
				break;
			default:
				if (w->persistent && (w->created || w->create_unknown))
				{
					/* a waiting explicit request's node outlives the session */
					MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
					Orphan	   *o = palloc(sizeof(Orphan));

					strlcpy(o->parent, w->parent, sizeof(o->parent));
					strlcpy(o->prefix, w->prefix, sizeof(o->prefix));
					orphans = lappend(orphans, o);
					MemoryContextSwitchTo(old);
				}
				if (w->release)
					finish_release(i);
				else
					fail(i, ERRCODE_CONNECTION_FAILURE,
						 "ZooKeeper session lost while acquiring the lock: %s",
						 why);
				break;
		}
		w->created = false;
	}
	return nlost;
}

/*
 * Fail the requests that have waited for a connection longer than
 * zklock.connect_timeout.  Returns the milliseconds until the next such
 * deadline, or -1 when none is pending.
 */
long
zklock_protocol_tick(void)
{
	int64		now_us = zklock_boottime_us();
	long		next = -1;

	if (connected &&
		now_us - last_sweep_us >= zklock_sweep_interval * INT64CONST(1000))
	{
		last_sweep_us = now_us;
		sweep_start();
	}
	if (connected)
	{
		/* lost replies while connected: retry, at most every 100 ms */
		if (recovery_needed &&
			now_us - last_recovery_us >= 100 * INT64CONST(1000))
		{
			recovery_needed = false;
			last_recovery_us = now_us;
			for (int i = 0; i < nwork; i++)
				if (work[i].phase == PH_RECOVERING ||
					(work[i].phase == PH_HELD &&
					 (work[i].guard_needed || work[i].data_version < 0)))
					resume(i);
		}
		return recovery_needed ? 100 : -1;
	}
	for (int i = 0; i < nwork; i++)
	{
		WorkEntry  *w = &work[i];
		int64		deadline_us;

		if (w->phase != PH_DEFERRED && w->phase != PH_RECOVERING &&
			!list_is_waiting(i))
			continue;
		if (w->phase == PH_RECOVERING && (w->created || w->release))
			continue;			/* a held or released node: keep trying */
		deadline_us = w->since_us + zklock_connect_timeout * INT64CONST(1000);
		if (now_us >= deadline_us)
		{
			if (w->phase == PH_RECOVERING && w->create_unknown)
				continue;		/* may exist: find it once connected */
			if (w->kind == ZKR_LIST)
			{
				char		why[ZKLOCK_MAX_ERROR_LEN + 1];

				snprintf(why, sizeof(why),
						 "could not connect to ZooKeeper at \"%s\" within %d ms",
						 zklock_hosts, zklock_connect_timeout);
				list_finish(i, false, ERRCODE_CONNECTION_FAILURE, why);
			}
			else
				fail(i, ERRCODE_CONNECTION_FAILURE,
					 "could not connect to ZooKeeper at \"%s\" within %d ms",
					 zklock_hosts, zklock_connect_timeout);
		}
		else
		{
			long		ms = (long) ((deadline_us - now_us + 999) / 1000);

			if (next < 0 || ms < next)
				next = ms;
		}
	}
	return next;
}

/*
 * zk_locks: walk the tree under the root, read every lock node, and hand
 * the rows to the backend through its DSM segment.  A row is
 * "path \t czxid \t ephemeralOwner \t data", with data escaped.
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
 */
#define LIST_IN_FLIGHT		32
#define LIST_MAX_ACTIVE		4

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
	StringInfoData rows;
} Listing;

static MemoryContext listings_context = NULL;	/* parent of each listing's */
static int	list_active = 0;	/* listings walking */
static List *list_waiting = NIL;	/* entries waiting for a slot, in order */
static bool list_starting = false;	/* inside list_next() */

static void list_activate(int idx);
static void list_drop(int idx);
static bool list_issue(int idx);

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

static void
list_start(int idx)
{
	WorkEntry  *w = &work[idx];
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
	w->phase = PH_LISTING;

	/* w->parent is the root, or the subtree asked for, "<root>/<subtree>" */
	len = strlen(w->parent);
	if (len > 1 && w->parent[len - 1] == '/')
		w->parent[len - 1] = '\0';

	if (list_active >= LIST_MAX_ACTIVE || list_waiting != NIL || !connected)
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
	Listing    *l = work[idx].listing;

	l->active = true;
	list_active++;
	list_push(l, work[idx].parent, NULL, false);
	(void) list_issue(idx);
}

/*
 * Send queued requests while fewer than LIST_IN_FLIGHT are out; end the
 * listing when nothing is left.  Returns false when the listing ended.
 */
static bool
list_issue(int idx)
{
	WorkEntry  *w = &work[idx];
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
	for (int i = 0; i < ev->datalen; i++)
	{
		char		c = ev->data[i];

		if (c == '\\')
			appendStringInfoString(buf, "\\\\");
		else if (c == '\n')
			appendStringInfoString(buf, "\\n");
		else if (c == '\t')
			appendStringInfoString(buf, "\\t");
		else if (c == '\0' || c == '\r')
			appendStringInfoChar(buf, ' ');
		else
			appendStringInfoChar(buf, c);
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

static void
list_event(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &work[idx];
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

	if (ev->rc == ZKC_OK && TAG_OP(ev->tag) == OP_LIST_CHILDREN)
	{
		for (int i = 0; i < ev->nchildren; i++)
		{
			const char *c = ev->children[i];

			list_push(l, ev->path, c, zklock_parse_node_name(c, NULL, NULL));
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
	WorkEntry  *w = &work[idx];
	Listing    *l = w->listing;
	ZkLockEntry *e;
	dsm_handle	handle;
	Size		size;
	Size		needed = (l ? l->needed : 0) + 1;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	e = entry(idx);
	handle = e->list_handle;
	size = e->list_size;
	ok = ok && e->state == ZKE_REQUESTED;
	LWLockRelease(zklock_shared->lock);

	if (l && l->noauth > 0 &&
		zklock_boottime_us() - last_noauth_log_us >= NOAUTH_LOG_US)
	{
		last_noauth_log_us = zklock_boottime_us();
		ereport(LOG,
				(errmsg("zklock: a listing of \"%s\" could not read %d node(s): ZooKeeper does not let zklock read them",
						w->parent, l->noauth),
				 errdetail("Another client made them with an ACL that refuses READ to zklock's identity. Lock nodes among them are listed by name, without their holder's details; nothing below the others is listed. (Said at most once a minute.)")));
	}

	if (ok && needed <= size)
	{
		dsm_segment *seg = dsm_attach(handle);

		if (seg == NULL)
			ok = false;			/* the backend gave up meanwhile */
		else
		{
			char	   *dst = dsm_segment_address(seg);

			Assert(l == NULL || !l->overflow);
			if (l && l->rows.data)
				memcpy(dst, l->rows.data, l->rows.len);
			dst[needed - 1] = '\0';
			dsm_detach(seg);
		}
	}

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	e = entry(idx);
	if (e->state == ZKE_REQUESTED)
	{
		if (ok)
		{
			e->state = ZKE_DONE;
			e->list_needed = needed;
		}
		else
		{
			e->state = ZKE_FAILED;
			e->sqlstate = sqlstate ? sqlstate : ERRCODE_CONNECTION_FAILURE;
			strlcpy(e->error, why ? why : "listing failed", sizeof(e->error));
		}
		zklock_wake_owner(e);
	}
	else if (e->state == ZKE_RELEASING)
		zklock_entry_free(idx);
	LWLockRelease(zklock_shared->lock);

	list_drop(idx);
	w->phase = PH_IDLE;
	list_next();
}

/* Free what a listing had, and its slot or its place in the line */
static void
list_drop(int idx)
{
	Listing    *l = work[idx].listing;

	if (l == NULL)
		return;
	if (l->active)
		list_active--;
	else
		list_waiting = list_delete_int(list_waiting, idx);
	work[idx].listing = NULL;
	MemoryContextDelete(l->cxt);
}

/* A listing waiting for a slot (or for the connection)? */
static bool
list_is_waiting(int idx)
{
	return work[idx].phase == PH_LISTING && work[idx].listing != NULL &&
		!work[idx].listing->active;
}

/*
 * Disconnected: listings waiting for a slot now wait for the connection,
 * up to zklock.connect_timeout from now (zklock_protocol_tick).
 */
static void
list_disconnected(void)
{
	ListCell   *lc;
	int64		now_us = zklock_boottime_us();

	foreach(lc, list_waiting)
		work[lfirst_int(lc)].since_us = now_us;
}

/* Give free slots to the listings waiting for one, in arrival order */
static void
list_next(void)
{
	if (list_starting)
		return;					/* the caller's loop goes on */
	list_starting = true;
	while (connected && list_active < LIST_MAX_ACTIVE && list_waiting != NIL)
	{
		int			idx = linitial_int(list_waiting);

		list_waiting = list_delete_first(list_waiting);
		list_activate(idx);
	}
	list_starting = false;
}
