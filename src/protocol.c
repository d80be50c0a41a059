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
 * Watches.  Each watch has an owner that drops it when it is no longer
 * wanted, so that a session holds at most one per waiting request (its
 * OP_WAIT, and an explicit request's OP_SELF) and per held lock (OP_GUARD):
 * a watch set by exists on a node that is already gone is removed at once
 * (zkc_watch_node), and a request that stops waiting otherwise (withdrawn,
 * failed, granted, or waiting behind another node) drops its OP_WAIT and
 * OP_SELF watches (drop_watches).  A held lock's guard fires when its own
 * node is deleted.  zklock_shared->n_watches shows how many are set.
 *
 * The file follows the steps: each step's requests, then the handlers of
 * their replies (on_create, on_children, on_adopt, on_wait, ...).  After
 * the steps, zklock_protocol_event() only hands each reply to the handler
 * of its operation (protocol_handlers[]); then come the faults: recovery
 * after a lost reply, the connection's changes, the session's loss, and the
 * timers.
 *
 * The rest of what the worker does with ZooKeeper is in files of its own,
 * which this file's dispatcher (zklock_protocol_event) hands their replies
 * and which share its table of entries through protocol_int.h: the
 * cluster-wide listing of zk_locks (listing.c), administrators' requests and
 * revocation (admin.c), the sweep of expired explicit locks (sweep.c), and
 * the clean-up of explicit requests' nodes lost with a session (orphan.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "protocol.h"
#include "channel.h"
#include "protocol_int.h"
#include "zklock.h"
#include "settings.h"
#include "shmem.h"
#include "resource.h"
#include "grant_rule.h"
#include "zk_client.h"
#include "lease.h"
#include "failpoint.h"
#include "election.h"		/* election */

#define MAX_CREATE_TRIES	8

static int64 last_sweep_us = PG_INT64_MIN / 2; /* CLOCK_BOOTTIME, as every
												 * timer here; the first
												 * sweep at once */

WorkEntry  *zklock_work = NULL;
static int	nwork = 0;
bool		zklock_connected = false;
static bool recovery_needed = false;	/* some entry is PH_RECOVERING */
static int64 last_recovery_us = 0;

static int64 protocol_session_id = 0;
static uint32 incarnation = 0;

static void send_create(int idx, bool with_parents);
static void send_children(int idx);
static void send_delete(int idx);
static void recover(int idx);
static void decide(int idx, ZkEvent *ev);
static bool find_own_node(int idx, ZkEvent *ev, int64 *my_seq);
static void wait_behind(int idx, const char *pred_node, int nblockers);
static void start_release(int idx);
static void guard_unreadable(int idx);
static void guard_node_gone(int idx);
static void create_again(int idx, bool with_parents);
static void grant(int idx);
static void grant_persistent(int idx);
static void rewrite_data(int idx);
static void watch_own_waiting_node(int idx);
static void fail(int idx, int sqlstate, const char *fmt,...) pg_attribute_printf(3, 4);
static void finish_release(int idx);
static void start_request(int idx);
static void send_guard(int idx);
static void drop_watches(int idx);

/* a reply was lost or a send failed: retry once connected */
static inline void
set_recovering(WorkEntry *w)
{
	w->phase = PH_RECOVERING;
	recovery_needed = true;
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
	zklock_work = MemoryContextAllocZero(TopMemoryContext,
										 mul_size(nwork, sizeof(WorkEntry)));
	incarnation = worker_incarnation;
}

/*
 * A backend queued an entry: a new request, or the release of one.
 */
void
zklock_protocol_request(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	ZkChannelRequest req;
	ZkEntryState state;
	uint32		gen;

	state = zklock_channel_take(idx, &req, &gen);
	if (state == ZKE_REQUESTED && w->generation != gen)
	{
		/* a new request: take what the worker needs from the entry */
		memset(w, 0, offsetof(WorkEntry, parent));
		w->generation = gen;
		w->kind = req.kind;
		w->mode = req.mode;
		snprintf(w->parent, sizeof(w->parent), "%s/%s", zklock_root,
				 req.resource);
		w->naming = zklock_naming_style(req.resource);
		w->persistent = req.persistent;
		zklock_format_node_prefix(w->prefix, sizeof(w->prefix), incarnation,
								  idx, gen, w->persistent);
		w->node[0] = '\0';
		w->since_us = zklock_boottime_us();
		if (!zklock_connected)
			w->phase = PH_DEFERRED;
	}

	if (w->generation != gen)
	{
		/* requested and withdrawn before the worker saw it */
		if (state == ZKE_RELEASING)
			zklock_channel_released(idx, gen);
		return;
	}

	if (state == ZKE_REQUESTED && w->phase == PH_IDLE)
		start_request(idx);
	else if (state == ZKE_GRANTED)
		rewrite_data(idx);		/* the holder's scope changed */
	else if (state == ZKE_RELEASING && !w->release)
		start_release(idx);
}

/*
 * The backend released or withdrew its request: delete what was sent, or
 * leave it to the reply in flight.
 */
static void
start_release(int idx)
{
	WorkEntry  *w = &zklock_work[idx];

	w->release = true;
	switch (w->phase)
	{
		case PH_IDLE:
			if (w->persistent && w->created)
			{
				/*
				 * An explicit lock granted while its backend gave up (a
				 * cancel, a timeout): the caller holds nothing, so its node
				 * goes rather than live on to its time to live unknown.
				 */
				send_delete(idx);
				break;
			}
			finish_release(idx);	/* nothing was sent: nothing to delete */
			break;
		case PH_DEFERRED:
			/* nothing was sent: nothing to delete */
			finish_release(idx);
			break;
		case PH_LISTING:
			/* drop the walk now; its late replies find the entry idle */
			zklock_listing_finish(idx, false, 0, NULL);
			break;
		case PH_WATCHING:
			drop_watches(idx);
			send_delete(idx);
			break;
		case PH_HELD:
			send_delete(idx);	/* the delete fires the guard */
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

/* Start what a backend asked for */
static void
start_request(int idx)
{
	switch (zklock_work[idx].kind)
	{
		case ZKR_LIST:
			zklock_listing_start(idx);
			break;
		case ZKR_FORCE_DELETE:
		case ZKR_REVOKE:
			zklock_admin_start(idx);
			break;
		case ZKR_ELECTION:		/* election */
			zklock_election_query_start(idx);	/* election */
			break;				/* election */
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
	WorkEntry  *w = &zklock_work[idx];
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
		char	   *v = (char *) zklock_node_field(data, ZKLOCK_WAITER_FIELD);
		char		hex[17];

		snprintf(hex, sizeof(hex), "%016llx",
				 (unsigned long long) protocol_session_id);
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
	WorkEntry  *w = &zklock_work[idx];

	w->phase = PH_CHECKING;
	if (!zkc_get_children(w->parent, TAG(w->generation, OP_CHILDREN, idx)))
		set_recovering(w);
}

/*
 * Our create did not happen (or its parents were missing): withdrawn
 * meanwhile, the release is done; else create again, at most
 * MAX_CREATE_TRIES times in all.
 */
static void
create_again(int idx, bool with_parents)
{
	WorkEntry  *w = &zklock_work[idx];

	if (w->release)
		finish_release(idx);
	else if (w->tries >= MAX_CREATE_TRIES)
		fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
			 "could not create lock node under \"%s\" after %d attempts",
			 w->parent, w->tries);
	else
		send_create(idx, with_parents);
}

/*
 * The create's reply: note what it says.  The listing sent right behind it
 * comes next and decides (on_children).
 */
static void
on_create(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	/*
	 * failpoint "fail": the reply of a create that succeeded is lost, as in
	 * a connection loss: the node exists, but we do not know its name; the
	 * listing behind it finds it by its prefix.
	 */
	if (ev->rc == ZKC_OK && ZKLOCK_FAILPOINT("after-create-reply"))
	{
		w->create_rc = ZKC_CONNLOSS;
		return;
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
}

/*
 * The children listing came back: a create that failed for good ends the
 * request, missing parents are created, and otherwise decide().
 */
static void
on_children(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	if (ev->rc == ZKC_CONNLOSS)
	{
		set_recovering(w);
		return;
	}
	if (ev->rc == ZKC_EXPIRED)
		return;					/* zklock_protocol_session_lost() follows */
	if (w->create_rc != ZKC_OK && w->create_rc != ZKC_NONODE &&
		w->create_rc != ZKC_CONNLOSS && !w->created)
	{
		fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
			 "could not create lock node under \"%s\": %s",
			 w->parent, zkc_result_text(w->create_zoo_rc));
		return;
	}
	if (w->need_parents)
	{
		create_again(idx, true);
		return;
	}
	decide(idx, ev);
}

/*
 * Step 2: the listing came back.  Find our node, apply Hive's rule, grant
 * or wait behind exactly one node.
 */
static void
decide(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];
	int64		my_seq = -1;
	ZkLockMode	my_mode = w->mode;
	int			pred;
	int			nblockers;

	if (!find_own_node(idx, ev, &my_seq))
		return;					/* adopting it: on_adopt() carries on */

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
		else
			create_again(idx, false);	/* the create never happened */
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

	wait_behind(idx, ev->children[pred], nblockers);
}

/*
 * Our node in a listing: known by name, or found again by prefix.  Sets
 * *my_seq to its sequence number, and leaves it alone when the node is not
 * there.  A node found by prefix after a lost reply is not known to be ours
 * yet: check whose it is first (on_adopt) and return false.
 */
static bool
find_own_node(int idx, ZkEvent *ev, int64 *my_seq)
{
	WorkEntry  *w = &zklock_work[idx];
	char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];

	for (int i = 0; i < ev->nchildren; i++)
	{
		const char *c = ev->children[i];

		if (w->node[0] ? strcmp(c, w->node) == 0 :
			zklock_node_has_prefix(c, w->prefix))
		{
			if (!zklock_parse_node_name(c, NULL, my_seq))
				continue;
			if (!w->created)
			{
				/* found after a lost reply: check whose it is first */
				strlcpy(w->node, c, sizeof(w->node));
				node_path(path, w, w->node);
				w->phase = PH_CHECKING;
				if (!zkc_exists(path, false, TAG(w->generation, OP_ADOPT, idx)))
					set_recovering(w);
				return false;
			}
			break;
		}
	}
	return true;
}

/*
 * The stat of a node found by our prefix: ours only if this session's
 * (for an explicit request's persistent node, nobody's).
 */
static void
on_adopt(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	/* a node found by our prefix: ours only if this session's */
	if (ev->rc == ZKC_OK &&
		ev->ephemeral_owner ==
		(w->persistent ? 0 : protocol_session_id))
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
}

/*
 * Step 3: not granted, and waiting: watch the one node we wait behind,
 * pred_node (exists with a watch), and an explicit request's own node too.
 */
static void
wait_behind(int idx, const char *pred_node, int nblockers)
{
	WorkEntry  *w = &zklock_work[idx];
	char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];

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
	node_path(path, w, pred_node);
	w->phase = PH_WATCHING;
	/* a watch of an earlier wait (before a lost reply) is not wanted */
	zkc_unwatch(TAG(w->generation, OP_WAIT, idx));
	/* failpoint "fail": as if the exists could not be sent */
	if (ZKLOCK_FAILPOINT("before-wait") ||
		!zkc_watch_node(path, TAG(w->generation, OP_WAIT, idx)))
		set_recovering(w);
	else if (w->persistent)
		watch_own_waiting_node(idx);
}

/*
 * The watch on the node we wait behind: it fired, or its exists came back.
 */
static void
on_wait(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	if (w->phase != PH_WATCHING)
		return;
	/*
	 * An explicit request has no guard that would notice its own node gone:
	 * it lists again, and decide() looks for it.
	 */
	if (w->last_blocker && !w->persistent &&
		((ev->kind == ZKEV_WATCH && ev->watch_type == ZKC_WATCH_DELETED) ||
		 (ev->kind == ZKEV_STAT && ev->rc == ZKC_NONODE)))
		grant(idx);				/* our last blocker is gone */
	else if (ev->kind == ZKEV_WATCH &&
			 ev->watch_type == ZKC_WATCH_CHANGED)
	{
		/*
		 * Its data changed (a holder rewriting its description, a
		 * revocation): the children, hence what we wait for, did not.  Watch
		 * the same node again, without listing, so that a holder's rewrite
		 * costs each waiter behind it one request instead of a listing of
		 * every waiter (a herd).  The exists tells if it went meanwhile.
		 */
		if (!zkc_watch_node(ev->path, TAG(w->generation, OP_WAIT, idx)))
			set_recovering(w);
	}
	else if (ev->kind == ZKEV_WATCH)
		send_children(idx);		/* the node we wait behind is gone */
	else if (ev->rc == ZKC_NONODE)
		send_children(idx);		/* gone before the watch was set */
	else if (ev->rc == ZKC_CONNLOSS)
		set_recovering(w);
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
	WorkEntry  *w = &zklock_work[idx];
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
		w->self_watched = zkc_watch_node(path,
										 TAG(w->generation, OP_SELF, idx));
}

/* The create of an explicit request's waiter child came back */
static void
on_waiter(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	if (ev->rc == ZKC_OK || ev->rc == ZKC_NODEEXISTS)
		w->waiter_child = 2;
	else
	{
		/* NONODE: our node is gone, which OP_SELF reports */
		w->waiter_child = 0;
		if (ev->rc == ZKC_CONNLOSS && w->phase == PH_WATCHING)
			set_recovering(w);	/* make it again */
	}
}

/*
 * The watch on a waiting explicit request's own node: deleted by someone
 * else, the request fails; otherwise the watch is set again.
 */
static void
on_self(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

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
}

/*
 * Step 4: granted.  Tell the backend, then guard the node.
 */
static void
grant(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	bool		withdrawn;

	drop_watches(idx);			/* of its wait, if any is left */
	withdrawn = !zklock_channel_grant(idx, w->generation, w->czxid,
									  w->persistent ? 0 : protocol_session_id,
									  w->node);

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
	WorkEntry  *w = &zklock_work[idx];
	char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];

	node_path(path, w, w->node);
	w->guard_needed = ZKLOCK_FAILPOINT("before-guard") ||
		!zkc_get_data_watch(path, TAG(w->generation, OP_GUARD, idx));
	if (w->guard_needed)
		recovery_needed = true;
}

/*
 * The guard's read came back, or its watch fired: read again after a
 * change, act on a revocation, and turn the lock LOST if the node is gone.
 */
static void
on_guard(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	if (w->phase != PH_HELD)
		return;
	if (ev->kind == ZKEV_WATCH && ev->watch_type != ZKC_WATCH_DELETED)
	{
		/*
		 * Someone changed our node's data (our own rewrite, or a
		 * revocation): read it and watch it again, in one request.
		 */
		send_guard(idx);
		return;
	}
	if (ev->kind == ZKEV_DATA && ev->rc == ZKC_OK)
	{
		/* the watch is set; a write after this read fires it */
		zklock_admin_revoked(idx, ev->data, ev->version);
		return;
	}
	if (ev->kind == ZKEV_DATA && ev->rc == ZKC_NOAUTH)
	{
		guard_unreadable(idx);
		return;
	}
	if ((ev->kind == ZKEV_DATA || ev->kind == ZKEV_STAT) &&
		ev->rc != ZKC_OK && ev->rc != ZKC_NONODE)
	{
		/*
		 * The watch was not set (connection lost): read and set it again
		 * once connected (resume), so that a revocation written meanwhile is
		 * read then.
		 */
		w->guard_needed = true;
		recovery_needed = true;
		return;
	}
	if ((ev->kind == ZKEV_WATCH && ev->watch_type == ZKC_WATCH_DELETED) ||
		ev->rc == ZKC_NONODE)
		guard_node_gone(idx);
}

/*
 * Our node's ACL was changed to refuse us READ: we cannot see a
 * revocation, but still notice the deletion.
 */
static void
guard_unreadable(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];

	node_path(path, w, w->node);
	ereport(LOG,
			(errmsg("zklock: lock node \"%s\" no longer lets zklock read it; a revocation of it cannot be seen",
					path),
			 errdetail("Someone changed its ACL. Its deletion is still noticed.")));
	if (!zkc_watch_node(path, TAG(w->generation, OP_GUARD, idx)))
	{
		w->guard_needed = true;
		recovery_needed = true;
	}
}

/* The guard saw our node deleted, by someone else: the lock is LOST */
static void
guard_node_gone(int idx)
{
	WorkEntry  *w = &zklock_work[idx];

	/* our granted node is gone and we did not delete it */
	(void) zklock_channel_lost(idx, w->generation, NULL);
	ereport(LOG,
			(errmsg("zklock: lock node \"%s/%s\" was deleted while held",
					w->parent, w->node)));
	/* keep the entry until the backend lets it go */
	w->created = false;
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
	WorkEntry  *w = &zklock_work[idx];
	char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];
	char		data[ZKLOCK_MAX_DATA_LEN + 1];
	uint32		version;
	bool		granted;
	bool		ok;

	if (w->phase != PH_HELD || w->persistent || w->rewriting ||
		w->rewrite_off || !zklock_connected)
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

/* The reply of rewrite_data()'s setData */
static void
on_rewrite(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	w->rewriting = false;
	if (w->phase != PH_HELD)
		return;
	if (ev->rc == ZKC_OK)
	{
		w->data_version = ev->version;
		w->shown = w->writing;
		rewrite_data(idx);		/* a change made meanwhile */
	}
	else if (ev->rc == ZKC_BADVERSION)
	{
		/* written by someone else: read it, then decide */
		w->data_version = -1;
		rewrite_data(idx);
	}
	else if (ev->rc == ZKC_CONNLOSS)
		w->data_version = -1;	/* written or not: read it again once
								 * connected (resume) */
	else if (ev->rc != ZKC_NONODE && ev->rc != ZKC_EXPIRED)
	{
		/* the guard handles a node gone, the session its loss */
		w->rewrite_off = true;
		ereport(LOG,
				(errmsg("zklock: could not update lock node \"%s/%s\": %s",
						w->parent, w->node, zkc_result_text(ev->zoo_rc))));
	}
}

/* The read rewrite_data() makes first when the node's version is unknown */
static void
on_rewrite_read(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	w->rewriting = false;
	if (w->phase != PH_HELD || ev->rc != ZKC_OK)
		return;					/* connection loss: resume reads again */
	if (zklock_node_field(ev->data, "revoke=") != NULL)
	{
		/*
		 * A revocation: never overwrite it, and act on it if the guard has
		 * not (zklock_admin_revoked() signals once per revocation).
		 */
		w->rewrite_off = true;
		zklock_admin_revoked(idx, ev->data, ev->version);
	}
	else
	{
		w->data_version = ev->version;
		rewrite_data(idx);
	}
}

/*
 * The data of a granted explicit node: the request's, without the waiter=
 * line, and with expires_at= (for people only) counted from now.
 */
static void
granted_data(char *data, size_t size)
{
	const char *ttl = zklock_node_field(data, "ttl=");
	int64		ttl_ms = ttl ? strtoll(ttl, NULL, 10) : 0;
	char		waiting[ZKLOCK_MAX_DATA_LEN + 1];
	char		at[32];

	/* Unix epoch microseconds, as backend.c writes it */
	zklock_nodedata_epoch(at, sizeof(at),
						  GetCurrentTimestamp() + ttl_ms * 1000 +
						  (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) *
						  SECS_PER_DAY * USECS_PER_SEC);
	zklock_nodedata_set(waiting, sizeof(waiting), data, ZKLOCK_WAITER_FIELD,
						NULL);
	zklock_nodedata_set(data, size, waiting, "expires_at=", at);
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
	WorkEntry  *w = &zklock_work[idx];
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
	/* "exit": the worker goes while the grant's write is in flight */
	(void) ZKLOCK_FAILPOINT("explicit-grant-sent");
}

/* The reply of the setData that grants an explicit request its node */
static void
on_grant_write(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	if (w->phase != PH_GRANTING)
		return;
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
		set_recovering(w);		/* list again, and write again */
	else if (ev->rc != ZKC_EXPIRED)
		fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION,
			 "could not write explicit lock node \"%s/%s\": %s",
			 w->parent, w->node, zkc_result_text(ev->zoo_rc));
}

/*
 * The delete of its waiter child, sent right behind the grant's write: its
 * reply comes after it, and completes the grant.
 */
static void
on_grant_child(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	/* sent right behind the rewrite: its reply comes after it */
	if (w->phase != PH_GRANTING || !w->grant_written)
		return;
	if (ev->rc == ZKC_CONNLOSS)
		set_recovering(w);
	else if (ev->rc != ZKC_EXPIRED)
		grant(idx);				/* a child left over goes with our session */
}

static void
send_delete(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
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
 * The delete's reply: a try-lock that was not granted reports it; a
 * release is done.
 */
static void
on_delete(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	if (ev->rc == ZKC_OK || ev->rc == ZKC_NONODE ||
		ev->rc == ZKC_EXPIRED)
	{
		w->created = false;
		if (w->try_failed && !w->release)
		{
			zklock_channel_not_granted(idx, w->generation);
			w->phase = PH_IDLE;
		}
		else
			finish_release(idx);
	}
	else
		set_recovering(w);		/* delete again when connected */
}

/* Step 5 done: the node is gone; the entry can be reused */
static void
finish_release(int idx)
{
	WorkEntry  *w = &zklock_work[idx];

	zklock_channel_released(idx, w->generation);
	w->phase = PH_IDLE;
}

/*
 * A request ends in failure; any node of ours is gone or being deleted.
 */
static void
fail(int idx, int sqlstate, const char *fmt,...)
{
	char		msg[ZKLOCK_MAX_ERROR_LEN + 1];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	zklock_protocol_fail(idx, sqlstate, msg);
}

/* fail(), with its message made: for the files around the recipe too */
void
zklock_protocol_fail(int idx, int sqlstate, const char *msg)
{
	WorkEntry  *w = &zklock_work[idx];

	drop_watches(idx);
	zklock_channel_fail(idx, w->generation, sqlstate, msg, true);
	w->phase = PH_IDLE;
}

/*
 * The request no longer waits: the watches of its wait (the node it waited
 * behind, an explicit request's own node) are not wanted any more.  Its
 * guard is not dropped here: the deletion of its node fires it.
 */
static void
drop_watches(int idx)
{
	WorkEntry  *w = &zklock_work[idx];

	zkc_unwatch(TAG(w->generation, OP_WAIT, idx));
	if (w->persistent)
	{
		zkc_unwatch(TAG(w->generation, OP_SELF, idx));
		w->self_watched = false;
	}
}

/*
 * Remove the watches no longer wanted, and show how many the session has
 * set (zk_lock_status); at every pass of the worker's loop.  A new session
 * starts with none (zkc_close() frees the previous handle's).
 */
static void
watches_upkeep(void)
{
	static uint64 shown = PG_UINT64_MAX;	/* what n_watches says */
	uint64		n;

	if (zklock_connected)
		zkc_watch_upkeep();
	n = zkc_watch_count();
	if (n != shown)
	{
		LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
		zklock_shared->n_watches = n;
		LWLockRelease(zklock_shared->lock);
		shown = n;
	}
}

/*
 * Who handles the reply (or the watch) of each operation of a request
 * entry.  No handler: OP_PARENT (the create behind it tells whether the
 * parents are there), OP_WAITER_DELETE (the node's delete behind it tells),
 * and the sweep's own operations, which carry no entry's index.
 */
typedef void (*ProtocolHandler) (int idx, ZkEvent *ev);

static const ProtocolHandler protocol_handlers[] = {
	[OP_CREATE] = on_create,
	[OP_CHILDREN] = on_children,
	[OP_ADOPT] = on_adopt,
	[OP_WAIT] = on_wait,
	[OP_WAITER] = on_waiter,
	[OP_SELF] = on_self,
	[OP_GUARD] = on_guard,
	[OP_REWRITE] = on_rewrite,
	[OP_REWRITE_READ] = on_rewrite_read,
	[OP_GRANT_WRITE] = on_grant_write,
	[OP_GRANT_CHILD] = on_grant_child,
	[OP_DELETE] = on_delete,
	[OP_LIST_CHILDREN] = zklock_listing_event,
	[OP_LIST_DATA] = zklock_listing_event,
	[OP_ADMIN] = zklock_admin_event,
};

/*
 * A reply or a watch for a request entry: to the sweep, the orphans, or the
 * handler of its operation, unless it is for an earlier request.
 */
void
zklock_protocol_event(ZkEvent *ev)
{
	int			idx = TAG_IDX(ev->tag);
	int			op = TAG_OP(ev->tag);
	WorkEntry  *w;

	/*
	 * An exists that found no node: remove the watch it left before the
	 * handler sends anything (a guard, a listing), so that the session
	 * never holds that watch and the next one at once.
	 */
	if (ev->kind == ZKEV_STAT && ev->rc == ZKC_NONODE && zklock_connected)
		zkc_watch_upkeep();
	if (idx == SWEEP_IDX)
	{
		zklock_sweep_event(ev);
		return;
	}
	if (idx == ORPHAN_IDX)
	{
		zklock_orphan_event(ev);
		return;
	}
	if (zklock_election_owns(idx, op))	/* election */
	{										/* election */
		zklock_election_event(ev);	/* election */
		return;						/* election */
	}								/* election */
	if (idx >= nwork)
		return;
	w = &zklock_work[idx];
	if (TAG_GEN(ev->tag) != w->generation || w->phase == PH_IDLE)
		return;					/* a reply for an earlier request */

	if (op >= 0 && op < lengthof(protocol_handlers) &&
		protocol_handlers[op] != NULL)
		protocol_handlers[op] (idx, ev);
}

/*
 * After a lost reply, once connected again: list the children, which finds
 * our node by its prefix if it exists, and carry on from there.
 */
static void
recover(int idx)
{
	WorkEntry  *w = &zklock_work[idx];

	if (w->phase != PH_RECOVERING)
		return;
	if (w->kind == ZKR_LIST)
	{
		zklock_listing_finish(idx, false, ERRCODE_CONNECTION_FAILURE,
							  "connection to ZooKeeper lost during the listing");
		return;
	}
	send_children(idx);
}

/*
 * Send what waited for a connection, and retry what lost its reply.
 */
static void
resume(int i)
{
	WorkEntry  *w = &zklock_work[i];

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
	zklock_connected = true;
	protocol_session_id = new_session_id;
	recovery_needed = false;
	zklock_orphan_next();
	for (int i = 0; i < nwork; i++)
		resume(i);
	zklock_listing_next();		/* listings that waited for a slot */
	zklock_election_connected(new_session_id);	/* election */
}

void
zklock_protocol_disconnected(void)
{
	zklock_connected = false;
	zklock_sweep_abandon();		/* its replies fail; sweep again later */
	zklock_orphan_disconnected();
	zklock_listing_disconnected();
	zklock_election_disconnected(); /* election */
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
	int			pid;			/* the owner of a lock lost */

	*npids = 0;
	zklock_connected = false;
	protocol_session_id = 0;
	zklock_sweep_abandon();
	zklock_orphan_disconnected();
	for (int i = 0; i < nwork; i++)
	{
		WorkEntry  *w = &zklock_work[i];

		switch (w->phase)
		{
			case PH_IDLE:
			case PH_DEFERRED:
				break;
			case PH_HELD:
				if (zklock_channel_session_lost(i, w->generation, &pid))
				{
					int			k;

					nlost++;
					for (k = 0; k < *npids && pids[k] != pid; k++)
						;
					if (k == *npids && *npids < maxpids)
						pids[(*npids)++] = pid;
				}
				w->phase = PH_IDLE;
				break;
			case PH_LISTING:
				zklock_listing_finish(i, false, ERRCODE_CONNECTION_FAILURE, why);
				break;
			default:
				if (w->persistent && (w->created || w->create_unknown))
				{
					/* a waiting explicit request's node outlives the session */
					zklock_orphan_add(w->parent, w->prefix);
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

	watches_upkeep();
	if (zklock_connected &&
		now_us - last_sweep_us >= zklock_sweep_interval * INT64CONST(1000))
	{
		last_sweep_us = now_us;
		zklock_sweep_start(protocol_session_id);
	}
	if (zklock_connected)
	{
		/* lost replies while connected: retry, at most every 100 ms */
		if (recovery_needed &&
			now_us - last_recovery_us >= 100 * INT64CONST(1000))
		{
			recovery_needed = false;
			last_recovery_us = now_us;
			for (int i = 0; i < nwork; i++)
				if (zklock_work[i].phase == PH_RECOVERING ||
					(zklock_work[i].phase == PH_HELD &&
					 (zklock_work[i].guard_needed ||
					  zklock_work[i].data_version < 0)))
					resume(i);
		}
		return recovery_needed ? 100 : -1;
	}
	for (int i = 0; i < nwork; i++)
	{
		WorkEntry  *w = &zklock_work[i];
		int64		deadline_us;

		if (w->phase != PH_DEFERRED && w->phase != PH_RECOVERING &&
			!zklock_listing_is_waiting(i))
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
				zklock_listing_finish(i, false, ERRCODE_CONNECTION_FAILURE, why);
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
