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
 *	   pipelined.  This listing (not a waiter's again) sets a child watch,
 *	   step 4's guard if it grants us alone; else its one notification, at
 *	   the next change of the children, is ignored.
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
 *	4. Granted: the fencing token is the node's czxid.  The worker guards
 *	   the node: deleted by anyone else (force release, Hive's UNLOCK, a
 *	   shell), the lock turns LOST, which the commit fence refuses; a
 *	   revocation written into it is acted on.  Granted by step 1's listing
 *	   alone, that listing's child watch is the guard, and a revocation
 *	   comes through the session's mailbox: an uncontended cycle is
 *	   create, getChildren, delete.  Otherwise, and once that watch fires,
 *	   the guard is a getData with a watch on our own node (NONODE: LOST),
 *	   read and watch in one request, at the grant and after each change,
 *	   so no write falls in between.  (lock_held.c: why there is no herd.)
 *
 *	5. Release or withdrawal: delete the node, retried until it succeeds or
 *	   the session ends.  The backend does not wait for it.
 *
 * Semaphores (1.4).  A semaphore's request is named as an EXCLUSIVE one
 * with "SEMAPHORE-<limit>-" before the mark (resource.c), and decided by
 * grant_rule.c's zklock_semaphore_rule instead of Hive's: granted when
 * fewer than <limit> semaphore nodes are lower; a lower lock node, or a
 * lower semaphore node of another limit, fails it (its node deleted first).  A
 * waiter watches the <limit> nearest lower semaphore nodes, all with its
 * one OP_WAIT tag: only a deletion among them can make it eligible, and a
 * deletion notifies at most <limit> waiters.  lock_semaphore.c holds the
 * semaphore's step 2 and its wait; steps 1, 4 and 5 are the lock's.  A
 * lock request fails on a lower semaphore node.
 *
 * Faults.  An operation whose reply was lost (CONNLOSS) may or may not have
 * happened.  Such a request waits for the connection to come back and then
 * lists the children again; its node, if the create did happen, is found by
 * its prefix, which is unique to one request of one worker incarnation, and
 * adopted only if its ephemeralOwner is this session.  When the session
 * expires every node of this instance is gone: held locks become LOST,
 * waiting requests fail, and nothing is carried into the next session.
 *
 * The file follows the steps: each step's requests, then the handlers of
 * their replies (on_create, on_children, ...); lock_event() hands each
 * reply to its operation's handler (protocol_handlers[]); then the faults:
 * recovery after a lost reply, the connection's changes, the session's
 * loss, the timers, each a hook of zklock_lock_recipe (at the end) that
 * recipe.c calls.  recipe.c, below every recipe, keeps the table of
 * entries, starts a request by its kind, hands a reply to the recipe of
 * its entry, and starts the requests that waited for a connection.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "recipe.h"
#include "lock_int.h"
#include "channel.h"
#include "zklock.h"
#include "settings.h"
#include "shmem.h"
#include "resource.h"
#include "grant_rule.h"
#include "zk_client.h"
#include "lease.h"
#include "failpoint.h"
#include "batch.h"

#define MAX_CREATE_TRIES	8

static void send_create(int idx, bool with_parents);
static void send_children(int idx);
static void children_behind_create(uint64 tag);
static void wait_behind(int idx, const char *const *nodes, int nnodes,
						int nblockers, bool keep_watches);
static void recover(int idx);
static void decide(int idx, ZkEvent *ev);
static bool find_own_node(int idx, ZkEvent *ev, int64 *my_seq);
static void create_again(int idx, bool with_parents);
static void lock_release(int idx);

/*
 * Start a lock request, unless the root's check refuses every request
 * (root.c, through recipe.c).
 */
static void
lock_start(int idx)
{
	int			sqlstate;
	char		msg[ZKLOCK_MAX_ERROR_LEN + 1];

	if (zklock_recipe_refused(&sqlstate, msg, sizeof(msg)))
		fail(idx, sqlstate, "%s", msg);
	else
		send_create(idx, false);
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
	char		request[ZKLOCK_MAX_NODE_NAME_LEN + 1];
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
				ok = zklock_batch_create(path, NULL, -1, ZKC_CONTAINER,
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
				 (unsigned long long) zklock_recipe_session_id());
		if (v && strlen(v) >= 16)
			memcpy(v, hex, 16);
	}

	if (w->mode == ZKLOCK_SEMAPHORE)
		zklock_format_semaphore_request(request, sizeof(request), w->prefix,
										w->max_holders, w->naming);
	else
		zklock_format_node_request(request, sizeof(request), w->prefix,
								   w->mode, w->naming);
	node_path(path, w, request);
	w->need_parents = false;
	w->create_unknown = false;
	w->create_rc = ZKC_OK;
	w->tries++;
	/* an explicit request: its index entry first (lock_explicit.c) */
	if (!ok || (w->persistent &&
				!zklock_explicit_record(idx, request, with_parents)) ||
		!zklock_batch_create(path, data, strlen(data),
							 w->persistent ? ZKC_PERSISTENT_SEQUENTIAL : ZKC_EPHEMERAL_SEQUENTIAL,
							 TAG(w->generation, OP_CREATE, idx)))
	{
		set_recovering(w);
		return;
	}
	w->create_unknown = true;	/* until its reply says otherwise */
	/* batch.c sends the create at the end of the pass, the listing behind */
	w->phase = PH_CHECKING;
	zklock_batch_then(children_behind_create,
					  TAG(w->generation, OP_CHILDREN, idx));
}

/* The listing behind a create, once batch.c has sent the create */
static void
children_behind_create(uint64 tag)
{
	WorkEntry  *w = &zklock_work[TAG_IDX(tag)];

	if (w->generation == TAG_GEN(tag) && w->phase == PH_CHECKING)
		send_children(TAG_IDX(tag));
}

/* A waiter lists again: no child watch (it would only notify a waiter) */
static void
relist(int idx)
{
	zklock_work[idx].phase = PH_CHECKING;
	if (!zkc_get_children(zklock_work[idx].parent,
						  TAG(zklock_work[idx].generation, OP_RELIST, idx)))
		set_recovering(&zklock_work[idx]);
}

static void
send_children(int idx)
{
	WorkEntry  *w = &zklock_work[idx];

	w->phase = PH_CHECKING;
	if (w->persistent)
		relist(idx);			/* no child watch: an explicit node outlives us */
	else if (!zkc_get_children_watch(w->parent,
									 TAG(w->generation, OP_CHILDREN, idx),
									 TAG(w->generation, OP_LISTED, idx)))
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
		released_nodeless(idx);
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
		return;					/* lock_session_lost() follows */
	if (w->create_rc != ZKC_OK && w->create_rc != ZKC_NONODE &&
		w->create_rc != ZKC_CONNLOSS && !w->created)
	{
		if (w->persistent)
			zklock_explicit_unrecord(idx, 0);	/* no node: no entry */
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
	/* alone: this listing's child watch can guard our node (step 4) */
	w->listed_alone =
		(zklock_count_lock_nodes((const char *const *) ev->children,
								 ev->nchildren) == 1 &&
		 TAG_OP(ev->tag) == OP_CHILDREN && !w->persistent);

	/* a semaphore: its own rule (lock_semaphore.c) */
	if (my_mode == ZKLOCK_SEMAPHORE)
	{
		const char *nodes[ZKLOCK_MAX_SEMAPHORE_HOLDERS];
		int			nnodes;
		bool		keep;

		if (zklock_semaphore_decide(idx, ev, my_seq, nodes, &nnodes, &keep))
			wait_behind(idx, nodes, nnodes, w->sem_lower, keep);
		return;
	}
	/* a lock where semaphore requests are ahead: the resource is not a lock */
	pred = zklock_semaphore_in_way((const char *const *) ev->children,
								   ev->nchildren, my_seq);
	if (pred >= 0)
	{
		int			limit = 0;

		(void) zklock_parse_semaphore_node(ev->children[pred], &limit, NULL);
		zklock_lock_fail_deleting(idx, ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
								  "zklock resource \"%s\" is used as a semaphore (max_holders %d): it cannot be locked at the same time",
								  w->parent + strlen(zklock_root) + 1, limit);
		return;
	}

	/*
	 * Hive's rule (grant_rule.c): the node we would have to wait behind,
	 * our own node of the other mode aside (advisory locks)
	 */
	if (zklock_grant_rule_ignoring((const char *const *) ev->children,
								   ev->nchildren, my_seq, my_mode,
								   w->ignore_node[0] ? w->ignore_node : NULL,
								   &pred, &nblockers) ==
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

	wait_behind(idx, (const char *const *) &ev->children[pred], 1,
							nblockers, false);
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
		(w->persistent ? 0 : zklock_recipe_session_id()))
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
			released_nodeless(idx);
		else
			send_create(idx, false);
	}
	else
		set_recovering(w);
}

/*
 * Step 3: not granted, and waiting: watch the nodes we wait behind (exists
 * with a watch), all with the one tag of our wait: a lock's one node, a
 * semaphore's max_holders nearest lower ones (lock_semaphore.c); and an
 * explicit request's own node too.  keep_watches: a semaphore listing
 * again behind a deletion keeps the watches still set, and sets only
 * those of nodes new to its set.
 */
static void
wait_behind(int idx, const char *const *nodes, int nnodes, int nblockers,
			bool keep_watches)
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
	 * (A semaphore counts its own way.)
	 */
	w->last_blocker = (nblockers == 1 && w->mode != ZKLOCK_SEMAPHORE);
	w->listed_alone = false;	/* a handoff grants without listing */
	/* what zk_lock_waits shows: our node, and the (first) node ahead */
	if (nnodes > 0)
		zklock_channel_waiting(idx, w->generation, w->node, nodes[0]);
	w->phase = PH_WATCHING;
	/* a watch of an earlier wait (before a lost reply) is not wanted */
	if (!keep_watches)
		zkc_unwatch(TAG(w->generation, OP_WAIT, idx));
	/* failpoint "fail": as if the exists could not be sent */
	if (ZKLOCK_FAILPOINT("before-wait"))
	{
		set_recovering(w);
		return;
	}
	for (int i = 0; i < nnodes; i++)
	{
		node_path(path, w, nodes[i]);
		if (!zkc_watch_node(path, TAG(w->generation, OP_WAIT, idx)))
		{
			set_recovering(w);	/* list again, and watch again */
			return;
		}
	}
	if (w->persistent)
		watch_own_waiting_node(idx);
}

/*
 * The watch on the node we wait behind: it fired, or its exists came back.
 */
static void
on_wait(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	if (w->mode == ZKLOCK_SEMAPHORE)
	{
		/* also while it lists again */
		if (zklock_semaphore_on_wait(idx, ev))
			relist(idx);
		return;
	}
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
		relist(idx);			/* the node we wait behind is gone */
	else if (ev->rc == ZKC_NONODE)
		relist(idx);			/* gone before the watch was set */
	else if (ev->rc == ZKC_CONNLOSS)
		set_recovering(w);
}

/*
 * Step 5: the backend released or withdrew its request (recipe.c set
 * w->release, and released it itself if nothing was sent yet): delete what
 * was sent, or leave it to the reply in flight.
 */
static void
lock_release(int idx)
{
	WorkEntry  *w = &zklock_work[idx];

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
			zklock_recipe_released(idx);	/* nothing was sent: nothing to
											 * delete */
			break;
		case PH_WATCHING:
			drop_watches(idx);
			send_delete(idx);
			break;
		case PH_HELD:
			send_delete(idx);	/* the delete fires the guard */
			break;
		default:
			/* the reply in flight (or the reconnection) sees w->release */
			break;
	}
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
		if (w->persistent && ev->rc != ZKC_EXPIRED)
			zklock_explicit_unrecord(idx, -1);	/* its index entry, after it */
		if (w->try_failed && !w->release)
		{
			zklock_channel_not_granted(idx, w->generation);
			w->phase = PH_IDLE;
		}
		else if (w->fail_sqlstate != 0 && !w->release)
			zklock_lock_fail_msg(idx, w->fail_sqlstate, w->fail_msg);
		else
			zklock_recipe_released(idx);
	}
	else
		set_recovering(w);		/* delete again when connected */
}

/*
 * Who handles the reply (or the watch) of each operation of a lock
 * request.  No handler: OP_PARENT (the create behind it tells whether the
 * parents are there) and OP_WAITER_DELETE (the node's delete behind it
 * tells).
 */
typedef void (*ProtocolHandler) (int idx, ZkEvent *ev);

static const ProtocolHandler protocol_handlers[] = {
	[OP_CREATE] = on_create,
	[OP_CHILDREN] = on_children,
	[OP_RELIST] = on_children,
	[OP_ADOPT] = on_adopt,
	[OP_WAIT] = on_wait,
	[OP_WAITER] = zklock_explicit_waiter_event,
	[OP_SELF] = zklock_explicit_self_event,
	[OP_GUARD] = zklock_held_guard_event,
	[OP_REWRITE] = zklock_held_rewrite_event,
	[OP_REWRITE_READ] = zklock_held_rewrite_read_event,
	[OP_LISTED] = zklock_held_listing_event,
	[OP_GRANT_WRITE] = zklock_explicit_grant_write_event,
	[OP_GRANT_CHILD] = zklock_explicit_grant_child_event,
	[OP_DELETE] = on_delete,
	[OP_INDEX] = zklock_explicit_record_event,
	[OP_RELEASE_DELETE] = zklock_held_release_deleted,
};

/*
 * A reply or a watch for a request of ours (recipe.c dropped those of
 * earlier requests): to the handler of its operation.
 */
static void
lock_event(ZkEvent *ev)
{
	int			idx = TAG_IDX(ev->tag);
	int			op = TAG_OP(ev->tag);

	if (idx == MAILBOX_IDX)
		zklock_held_mailbox_event(ev);	/* the session's mailbox */
	else if (op >= 0 && op < lengthof(protocol_handlers) &&
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
	send_children(idx);
}

/*
 * Retry what lost its reply, once connected.  (What waited for a
 * connection, PH_DEFERRED, recipe.c starts.)
 */
static void
resume(int i)
{
	WorkEntry  *w = &zklock_work[i];

	if (w->phase == PH_HELD && w->guard_needed)
		zklock_held_guard(i);
	else if (w->phase == PH_RECOVERING)
	{
		if (w->release && !w->created && !w->create_unknown &&
			w->node[0] == '\0')
			released_nodeless(i);
		else if ((w->release || w->try_failed || w->fail_sqlstate != 0) &&
				 w->created)
			send_delete(i);
		else
			recover(i);
	}
	if (w->phase == PH_HELD)
		zklock_held_rewrite(i); /* a change that waited for a connection */
}

/*
 * Is entry i a lock's (or a slot's)?  The hooks below walk the whole table,
 * where other recipes' requests are too (an election query is CHECKING).
 */
static inline bool
lock_entry(int i)
{
	return zklock_work[i].kind == ZKR_ACQUIRE ||
		zklock_work[i].kind == ZKR_TRY_ACQUIRE;
}

/*
 * The session is (again) connected: retry what lost its reply.
 */
static void
lock_connected(int64 session_id)
{
	zklock_held_mailbox_connected(session_id);
	for (int i = 0; i < zklock_recipe_nentries(); i++)
		if (lock_entry(i))
			resume(i);
}

/*
 * The session is gone (expired or closed): so is every node it created.
 * Held locks are lost (recipe.c counts them); waiting requests fail;
 * requests not yet sent wait for the next session.  (orphan.c, before
 * this, noted the explicit requests' nodes that outlive the session.)
 */
static void
lock_session_lost(void)
{
	const char *why = zklock_recipe_loss_why();
	int			pid;			/* the owner of a lock lost */

	zklock_held_mailbox_lost();

	for (int i = 0; i < zklock_recipe_nentries(); i++)
	{
		WorkEntry  *w = &zklock_work[i];

		if (!lock_entry(i))
			continue;
		switch (w->phase)
		{
			case PH_IDLE:
			case PH_DEFERRED:
			case PH_LISTING:
			case PH_ADMIN:
				break;			/* nothing sent, or not a lock's */
			case PH_HELD:
				if (zklock_channel_session_lost(i, w->generation, &pid))
					zklock_recipe_lost_lock(pid);
				w->phase = PH_IDLE;
				break;
			default:
				if (w->release)
					zklock_recipe_released(i);
				else
					fail(i, ERRCODE_CONNECTION_FAILURE,
						 "ZooKeeper session lost while acquiring the lock: %s",
						 why);
				break;
		}
		w->created = false;
	}
}

/* Lost replies while connected: retry (recipe.c's timer) */
static void
lock_retry(void)
{
	for (int i = 0; i < zklock_recipe_nentries(); i++)
		if (lock_entry(i) &&
			(zklock_work[i].phase == PH_RECOVERING ||
			(zklock_work[i].phase == PH_HELD &&
			 (zklock_work[i].guard_needed ||
			  zklock_work[i].data_version < 0))))
			resume(i);
}

/*
 * Not connected: fail the requests that lost a reply and have waited for a
 * connection longer than zklock.connect_timeout (unless their node may
 * exist).  Returns the milliseconds until the next such deadline, or -1.
 */
static long
lock_tick(void)
{
	int64		now_us = zklock_boottime_us();
	long		next = zklock_held_tick();	/* force-released locks */

	if (zklock_connected)
		return next;
	for (int i = 0; i < zklock_recipe_nentries(); i++)
	{
		WorkEntry  *w = &zklock_work[i];

		if (!lock_entry(i) || w->phase != PH_RECOVERING || w->created ||
			w->release)
			continue;			/* a held or released node: keep trying */
		if (zklock_recipe_deadline_passed(w, now_us, &next))
		{
			if (w->create_unknown)
				continue;		/* may exist: find it once connected */
			fail(i, ERRCODE_CONNECTION_FAILURE,
				 "could not connect to ZooKeeper at \"%s\" within %d ms",
				 zklock_hosts, zklock_connect_timeout);
		}
	}
	return next;
}

const ZkRecipe zklock_lock_recipe = {
	.name = "lock",
	.kinds = RECIPE_KIND(ZKR_ACQUIRE) | RECIPE_KIND(ZKR_TRY_ACQUIRE),
	.idx_first = MAILBOX_IDX,
	.idx_count = 1,
	.start = lock_start,
	.reload = zklock_held_reload,
	.release = lock_release,
	.changed = zklock_held_rewrite,
	.fail_request = zklock_lock_fail_msg,
	.event = lock_event,
	.connected = lock_connected,
	.session_lost = lock_session_lost,
	.retry = lock_retry,
	.tick = lock_tick,
};
