/*-------------------------------------------------------------------------
 *
 * lock_held.c
 *		The lock recipe, steps 4 and 5: a lock we hold, and the end of a
 *		request.  Part of the lock recipe (protocol.c), below the rest of
 *		it: protocol.c and lock_explicit.c call it; it calls neither.
 *
 * The end of a request: the grant, which tells the backend
 * (zklock_lock_grant); the delete of our node (zklock_lock_send_delete),
 * whose reply protocol.c handles; a failure (zklock_lock_fail), which
 * first drops the watches of the request's wait (zklock_lock_drop_watches);
 * a release with no node of ours (zklock_lock_released_nodeless).
 *
 * Three things about a granted node of ours, each started here or by
 * protocol.c and driven here by its replies:
 *
 *	- the guard, so that its deletion by someone else turns the lock LOST,
 *	  and a revocation written into it is read, never missed.  Granted by a
 *	  listing that showed our node alone, the listing's own child watch
 *	  guards it (guard_listing: no request); else, and as soon as that
 *	  child watch fires, a getData with a watch on our own node
 *	  (zklock_held_guard).  See protocol.c's step 4;
 *	- revocation (Curator's, done for the holder): "revoke=cancel" or
 *	  "revoke=terminate" written into our node by an administrator of any
 *	  instance (admin.c writes it) makes us signal the holding backend, once
 *	  per revocation (revoked);
 *	- the holder's description in the node's data, rewritten when the
 *	  backend changes it, never over another's write (zklock_held_rewrite);
 *	- a force release (issue 28): "release=requested" written into our node
 *	  by an administrator's instance (admin.c), which then waits for the
 *	  node to go.  We mark the lock lost (under zklock_shared->lock in
 *	  exclusive mode: no fence passes for it from then on, fence.c looks
 *	  again after opening its commit window), wait until the holding
 *	  backend's commit window (lease.c) is closed, if it is open for our
 *	  session, and then delete the node ourselves (release_requested,
 *	  zklock_held_tick).  A commit that holds it up for a session timeout
 *	  is cancelled (SIGINT), as on the session-close path; logged after a
 *	  second.  The node outlives every commit that passed the fence.
 *
 * The state is the entry's WorkEntry (guard_needed, guard_listing,
 * revoke_posted, data_version, shown, writing, rewriting, rewrite_off,
 * revoke_seen, release_*), the worker's own memory.
 *
 * The mailbox (issue 18): a holder guarded by its listing's child watch
 * alone does not see a write into its node's data, so a revoker (admin.c)
 * also writes the node's path into the holder's session's mailbox,
 * <root>/zklock.sessions/<session id in hex>: an ephemeral node this file
 * creates once per session and watches with getData (one watch per
 * session, not per lock).  Its watch fires at each write; the read that
 * sets it again names the node, whose guard is then set (it reads the
 * revocation).  The data's version counts the writes: a read that finds
 * more than one new write (two revocations within one round trip) missed
 * a name, so every lock guarded by its listing alone is guarded by its own
 * node then.  (The mailbox's parent is a container; an ephemeral node has
 * no children, hence a data mailbox rather than a node per message.)
 * Until the mailbox is ours and watched (mailbox_ready), and if it cannot
 * be (someone else's node in the way, refused), every grant is guarded by
 * its own node, as before.  Its state is this file's statics below, the
 * worker's own memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "storage/proc.h"

#include "channel.h"
#include "lease.h"
#include "recipe.h"
#include "lock_int.h"
#include "zklock.h"
#include "shmem.h"
#include "zk_client.h"
#include "failpoint.h"
#include "batch.h"
#include "settings.h"

static void guard_unreadable(int idx);
static void guard_node_gone(int idx);
static void revoked(int idx, const char *data, int version);
static void release_requested(int idx, int version);
static void mailbox_setup(void);

/* The mailbox's operations (tag index MAILBOX_IDX) */
#define OP_MB_PARENT	1		/* create <root>/zklock.sessions and its
								 * ancestors (containers) */
#define OP_MB_CREATE	2		/* create our mailbox (ephemeral) */
#define OP_MB_READ		3		/* getData+watch on it */

#define MAILBOX_MAX_SETUPS	3	/* in a row, when its create finds no parent */

static int64 mb_session = 0;	/* the session the mailbox is set up for */
static uint32 mb_generation = 0;	/* of its requests: one per setup */
static bool mb_ready = false;	/* ours and watched: grants may rely on it */
static bool mb_read_lost = false;	/* its read's reply was lost */
static int	mb_version = -1;	/* its data version at our last read */
static int	mb_setups = 0;		/* setups since the last good read */

static inline bool
is_lock_entry(WorkEntry *w)
{
	return w->kind == ZKR_ACQUIRE || w->kind == ZKR_TRY_ACQUIRE;
}

/*
 * Step 4: granted.  Tell the backend, then guard the node.
 */
void
zklock_lock_grant(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	bool		withdrawn;

	drop_watches(idx);			/* of its wait, if any is left */
	withdrawn = !zklock_channel_grant(idx, w->generation, w->czxid,
									  w->persistent ? 0 :
									  zklock_recipe_session_id(),
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
	/*
	 * Granted by a listing where our node was alone: that listing's child
	 * watch guards it (any deletion of our node changes the children, our
	 * own delete too), and our mailbox tells of a revocation: no request.
	 * Failpoint "before-guard" at the same point as the guard's own; fail:
	 * the guard's own request is made instead, and "lost".  Not with
	 * zklock.guard_by_listing off (a rolling upgrade from 1.4, whose
	 * revocations post no note); turned off by a reload, the locks guarded
	 * so are guarded by their own node then (zklock_held_reload).
	 */
	if (w->listed_alone && !w->revoke_posted && mb_ready &&
		zklock_guard_by_listing)
	{
		if (ZKLOCK_FAILPOINT("before-guard"))
		{
			w->guard_needed = true;
			zklock_recipe_retry_soon();
		}
		else
			w->guard_listing = true;
		return;
	}
	zklock_held_guard(idx);
}

/* Step 5: delete our node (its waiter child first, for an explicit one) */
void
zklock_lock_send_delete(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];

	node_path(path, w, w->node);
	/*
	 * A semaphore's waiter keeps the watches of its set while it lists
	 * again, or after a lost reply: withdrawn or failed then (decide(),
	 * resume()), they go with its node, not when their holders release.
	 */
	if (w->mode == ZKLOCK_SEMAPHORE && w->phase != PH_HELD)
		zklock_lock_drop_watches(idx);
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
		!zklock_batch_delete(path, TAG(w->generation, OP_DELETE, idx)))
		set_recovering(w);
}

/*
 * A request ends in failure; any node of ours is gone or being deleted.
 */
void
zklock_lock_fail(int idx, int sqlstate, const char *fmt,...)
{
	char		msg[ZKLOCK_MAX_ERROR_LEN + 1];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	zklock_lock_fail_msg(idx, sqlstate, msg);
}

/*
 * A request that must fail while its node exists (a semaphore's rule said
 * no): delete the node first, then fail it (on_delete), so that no node is
 * left behind.
 */
void
zklock_lock_fail_deleting(int idx, int sqlstate, const char *fmt,...)
{
	WorkEntry  *w = &zklock_work[idx];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(w->fail_msg, sizeof(w->fail_msg), fmt, ap);
	va_end(ap);
	w->fail_sqlstate = sqlstate;
	drop_watches(idx);
	send_delete(idx);
}

/* fail(), with its message made: also recipe.c's, for its deadlines */
void
zklock_lock_fail_msg(int idx, int sqlstate, const char *msg)
{
	drop_watches(idx);
	/* a listing's child watch, which no deletion of our node may fire now */
	zkc_unwatch(TAG(zklock_work[idx].generation, OP_LISTED, idx));
	zklock_recipe_fail(idx, sqlstate, msg);
}

/*
 * The request no longer waits: the watches of its wait (the node it waited
 * behind, an explicit request's own node) are not wanted any more.  Its
 * guard is not dropped here: the deletion of its node fires it.
 */
void
zklock_lock_drop_watches(int idx)
{
	WorkEntry  *w = &zklock_work[idx];

	zkc_unwatch(TAG(w->generation, OP_WAIT, idx));
	if (w->persistent)
	{
		zkc_unwatch(TAG(w->generation, OP_SELF, idx));
		w->self_watched = false;
	}
}

/* Released with no node of ours: a listing's child watch goes too */
void
zklock_lock_released_nodeless(int idx)
{
	zkc_unwatch(TAG(zklock_work[idx].generation, OP_LISTED, idx));
	zklock_recipe_released(idx);
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
void
zklock_held_guard(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];

	w->guard_listing = false;	/* its own watch guards it from now on */
	node_path(path, w, w->node);
	w->guard_needed = ZKLOCK_FAILPOINT("before-guard") ||
		!zkc_get_data_watch(path, TAG(w->generation, OP_GUARD, idx));
	if (w->guard_needed)
		zklock_recipe_retry_soon();
}

/*
 * The guard's read came back, or its watch fired: read again after a
 * change, act on a revocation, and turn the lock LOST if the node is gone.
 */
void
zklock_held_guard_event(int idx, ZkEvent *ev)
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
		zklock_held_guard(idx);
		return;
	}
	if (ev->kind == ZKEV_DATA && ev->rc == ZKC_OK)
	{
		/* the watch is set; a write after this read fires it */
		revoked(idx, ev->data, ev->version);
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
		zklock_recipe_retry_soon();
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
		zklock_recipe_retry_soon();
	}
}

/* The guard saw our node deleted, by someone else: the lock is LOST */
static void
guard_node_gone(int idx)
{
	WorkEntry  *w = &zklock_work[idx];

	w->created = false;
	if (w->release_since_us != 0)
		return;					/* our own delete, on request: said so */
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
 * whether it is held only for a child's sake, see local_locks.c's
 * show_holds): write it into the node, where zk_locks on every instance
 * reads it.  One setData, checked against the version of the node's data
 * we know (our own earlier write, or 0 from the create), so that it never
 * overwrites what another wrote meanwhile (a revocation): when the version
 * is unknown or was not ours, read the node first, and leave a revoked
 * node alone.  Nothing waits for it; a change made while a write is in
 * flight goes when that write is answered.
 */
void
zklock_held_rewrite(int idx)
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
		zklock_recipe_retry_soon();
	}
}

/* The reply of rewrite_data()'s setData */
void
zklock_held_rewrite_event(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	w->rewriting = false;
	if (w->phase != PH_HELD)
		return;
	if (ev->rc == ZKC_OK)
	{
		w->data_version = ev->version;
		w->shown = w->writing;
		zklock_held_rewrite(idx);		/* a change made meanwhile */
	}
	else if (ev->rc == ZKC_BADVERSION)
	{
		/* written by someone else: read it, then decide */
		w->data_version = -1;
		zklock_held_rewrite(idx);
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
void
zklock_held_rewrite_read_event(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	w->rewriting = false;
	if (w->phase != PH_HELD || ev->rc != ZKC_OK)
		return;					/* connection loss: resume reads again */
	if (zklock_node_field(ev->data, "revoke=") != NULL ||
		zklock_node_field(ev->data, "release=") != NULL)
	{
		/*
		 * A revocation: never overwrite it, and act on it if the guard has
		 * not (revoked() signals once per revocation).
		 */
		w->rewrite_off = true;
		revoked(idx, ev->data, ev->version);
	}
	else
	{
		w->data_version = ev->version;
		zklock_held_rewrite(idx);
	}
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
	WorkEntry  *w = &zklock_work[idx];
	const char *r = zklock_node_field(data, "revoke=");
	bool		terminate;
	int			pid = 0;

	if (version == w->revoke_seen)
		return;					/* this one was acted on */
	if (zklock_node_field(data, "release=") != NULL)
	{
		release_requested(idx, version);
		return;
	}
	if (r == NULL)
		return;					/* none */
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
 * A force release was asked of us (see the header): mark the lock lost,
 * then delete the node once the holding backend's commit window is closed.
 */
static void
release_requested(int idx, int version)
{
	WorkEntry  *w = &zklock_work[idx];
	int			pid = 0;

	w->revoke_seen = version;
	w->rewrite_off = true;		/* never write over the request */
	if (w->release_since_us != 0 ||
		!zklock_channel_lost(idx, w->generation, &pid))
		return;					/* asked before, or released meanwhile */
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	w->release_procno = entry(idx)->owner_procno;
	LWLockRelease(zklock_shared->lock);
	w->release_pid = pid;
	w->release_since_us = zklock_boottime_us();
	ereport(LOG,
			(errmsg("zklock: lock node \"%s/%s\" was force-released by an administrator; the lock of backend %d is lost, and the node goes when no commit of it can land any more",
					w->parent, w->node, pid)));
	(void) zklock_held_tick();
}

/* Is the backend's commit window still open for our session? */
static bool
release_window_open(WorkEntry *w)
{
	/* a backend that exited closed its window; its slot may be another's */
	if (ProcGlobal->allProcs[w->release_procno].pid != w->release_pid)
		return false;
	return zklock_lease_window_open(w->release_procno,
									zklock_recipe_session_id());
}

/* Delete our force-released node ourselves (its reply: release_deleted) */
static void
release_delete(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];
	int64		waited_ms = (zklock_boottime_us() - w->release_since_us) / 1000;

	node_path(path, w, w->node);
	if (w->release_logged)
		ereport(LOG,
				(errmsg("zklock: the commit of backend %d has ended after %ld ms; deleting force-released lock node \"%s\"",
						w->release_pid, (long) waited_ms, path)));
	w->release_deleting = zkc_delete(path, TAG(w->generation,
												OP_RELEASE_DELETE, idx));
	if (!w->release_deleting)
		zklock_recipe_retry_soon();
}

/* The reply of release_delete() */
void
zklock_held_release_deleted(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	w->release_deleting = false;
	if (w->phase != PH_HELD)
		return;
	if (ev->rc == ZKC_OK || ev->rc == ZKC_NONODE || ev->rc == ZKC_EXPIRED)
		w->created = false;		/* the backend's release ends the entry */
	else
		zklock_recipe_retry_soon(); /* again, at the next tick */
}

/*
 * Force-released locks (release_requested): delete the node of each whose
 * backend's commit window is closed; cancel, once, a commit that has held
 * it up for a session timeout.  Returns the ms until the next look, or -1.
 */
long
zklock_held_tick(void)
{
	long		next = -1;
	int64		cancel_ms = Max(zkc_negotiated_timeout(), zklock_session_timeout);

	for (int i = 0; i < zklock_recipe_nentries(); i++)
	{
		WorkEntry  *w = &zklock_work[i];
		int64		waited_ms;

		if (!is_lock_entry(w) || w->phase != PH_HELD ||
			w->release_since_us == 0 || !w->created || w->release_deleting ||
			!zklock_connected)
			continue;
		if (!release_window_open(w))
		{
			release_delete(i);
			continue;
		}
		waited_ms = (zklock_boottime_us() - w->release_since_us) / 1000;
		if (waited_ms >= 1000 && !w->release_logged)
		{
			w->release_logged = true;
			ereport(LOG,
					(errmsg("zklock: keeping force-released lock node \"%s/%s\" until the commit of backend %d, which passed the commit fence, has ended",
							w->parent, w->node, w->release_pid)));
		}
		if (waited_ms >= cancel_ms && !w->release_cancelled)
		{
			w->release_cancelled = true;
			ereport(LOG,
					(errmsg("zklock: canceling backend %d, whose commit has held force-released lock node \"%s/%s\" for %ld ms",
							w->release_pid, w->parent, w->node, (long) waited_ms)));
			zklock_lease_cancel_window(w->release_procno, w->release_pid,
									   zklock_recipe_session_id());
		}
		next = 10;
	}
	return next;
}

/*
 * No herd: two nodes alone at their listings never coexist (each was
 * created before its own listing), so at most one lock of a resource is
 * guarded by a child watch at a time.  A change of a resource's children
 * costs at most that one getData, and one notification to each session
 * whose step 1 listing of the resource came since its previous change
 * (ZooKeeper keeps one child watch per path and session): at most one per
 * instance, not one per holder of a SHARED lock.  A waiter listing again
 * sets none (protocol.c's relist).
 *
 * The child watch of a listing of ours fired (a child of the resource was
 * created or deleted, or the resource node itself).  A lock that it
 * guards (granted alone by that listing) is guarded by its own node from
 * now on: one getData with a watch, which also tells whether our node is
 * still there (NONODE: LOST) and reads a revocation.  The child watch is
 * not set again, so each listing causes at most one notification.  A
 * waiter's listing, or a lock guarded by its own node: nothing to do.
 */
void
zklock_held_listing_event(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	if (ev->kind != ZKEV_WATCH || w->phase != PH_HELD || !w->guard_listing)
		return;
	zklock_held_guard(idx);
}

/*
 * The mailbox (see the header).
 */
static void
mailbox_path(char *buf, size_t size, int64 session_id)
{
	snprintf(buf, size, "%s/%s/%016llx", zklock_root, ZKLOCK_MAILBOX_NODE,
			 (unsigned long long) session_id);
}

/*
 * The settings were reloaded (the worker's SIGHUP): with
 * zklock.guard_by_listing off now, a lock guarded by its listing alone is
 * guarded by its own node from now on, as one granted while it is off is,
 * so that a revocation written without a note to the mailbox (zklock 1.4's,
 * during a rolling upgrade) is read at once.  A request not granted yet
 * reads the setting at its grant.  Turned on, a lock keeps its own node's
 * watch.
 */
void
zklock_held_reload(void)
{
	if (zklock_guard_by_listing)
		return;
	for (int i = 0; i < zklock_recipe_nentries(); i++)
	{
		WorkEntry  *w = &zklock_work[i];

		if (is_lock_entry(w) && w->phase == PH_HELD && w->guard_listing)
			zklock_held_guard(i);
	}
}

/*
 * The mailbox named "path" (a revocation written into it), or, when path
 * is NULL, it may have missed names: a lock guarded by its listing alone
 * is guarded by its own node now (which reads the revocation); a request
 * not granted yet will be at its grant.  A node is known by its name (the
 * last part of the path): its prefix is unique to one request of this
 * worker, whose session the mailbox is (and a chroot in zklock.hosts may
 * differ between the revoker and us).
 */
static void
mailbox_deliver(const char *path)
{
	const char *name = path ? strrchr(path, '/') : NULL;

	if (path != NULL)
		name = name ? name + 1 : path;
	for (int i = 0; i < zklock_recipe_nentries(); i++)
	{
		WorkEntry  *w = &zklock_work[i];

		if (!is_lock_entry(w) || w->phase == PH_IDLE || w->persistent)
			continue;
		if (name != NULL && strcmp(w->node, name) != 0)
			continue;
		if (w->phase != PH_HELD)
			w->revoke_posted = true;
		else if (w->guard_listing)
			zklock_held_guard(i);
	}
}

/* Read the mailbox and watch it, in one request */
static void
mailbox_read(void)
{
	char		path[ZKLOCK_MAX_PATH + 1];

	mailbox_path(path, sizeof(path), mb_session);
	mb_read_lost = !zkc_get_data_watch(path, TAG(mb_generation, OP_MB_READ,
												 MAILBOX_IDX));
	if (mb_read_lost)
	{
		/* not watched: rely on it no more, until read again */
		mb_ready = false;
		mailbox_deliver(NULL);
	}
}

/*
 * Create the mailbox's parents (containers; NODEEXISTS is success) and
 * the mailbox, and read it with a watch, pipelined: the read's stat tells
 * whether the node is ours (its ephemeralOwner).
 */
static void
mailbox_setup(void)
{
	char		path[ZKLOCK_MAX_PATH + 1];

	mb_generation++;
	mb_ready = false;
	mb_version = -1;
	/* every ancestor from the root down (it may not exist yet) */
	snprintf(path, sizeof(path), "%s/%s", zklock_root, ZKLOCK_MAILBOX_NODE);
	for (char *p = path + 1;; p++)
	{
		if (*p == '/' || *p == '\0')
		{
			char		c = *p;

			*p = '\0';
			(void) zkc_create(path, NULL, -1, ZKC_CONTAINER,
							  TAG(mb_generation, OP_MB_PARENT, MAILBOX_IDX));
			*p = c;
			if (c == '\0')
				break;
		}
	}
	mailbox_path(path, sizeof(path), mb_session);
	(void) zkc_create(path, "", 0, ZKC_EPHEMERAL,
					  TAG(mb_generation, OP_MB_CREATE, MAILBOX_IDX));
	mailbox_read();
}

/* Connected: set the mailbox up once per session, or read it again */
void
zklock_held_mailbox_connected(int64 session_id)
{
	if (mb_session != session_id)
	{
		mb_session = session_id;
		mb_setups = 1;
		mailbox_setup();
	}
	else if (mb_read_lost)
		mailbox_read();
}

/* The session is gone, and its mailbox with it */
void
zklock_held_mailbox_lost(void)
{
	mb_session = 0;
	mb_ready = false;
	mb_read_lost = false;
	mb_generation++;
}

/* The mailbox's read came back: ours?  what does it name? */
static void
mailbox_read_reply(ZkEvent *ev)
{
	if (ev->rc == ZKC_CONNLOSS)
	{
		mb_read_lost = true;	/* read again once connected */
		mb_ready = false;
		mailbox_deliver(NULL);
		return;
	}
	mb_read_lost = false;
	if (ev->rc == ZKC_NONODE && mb_setups < MAILBOX_MAX_SETUPS)
	{
		mb_setups++;			/* its parent went meanwhile: again */
		mailbox_setup();
		return;
	}
	if (ev->rc != ZKC_OK || ev->ephemeral_owner != mb_session)
	{
		if (ev->rc == ZKC_OK)
			zkc_unwatch(ev->tag);	/* someone else's node */
		if (ev->rc != ZKC_EXPIRED)
			ereport(LOG,
					(errmsg("zklock: no revocation mailbox for this session at \"%s\": %s",
							ev->path,
							ev->rc == ZKC_OK ? "another session's node is in the way" :
							zkc_result_text(ev->zoo_rc)),
					 errdetail("Every lock is guarded by a watch on its own node.")));
		mb_ready = false;
		mailbox_deliver(NULL);
		return;
	}
	/* each write bumps the version: more than one new write, names missed */
	if (ev->version > mb_version + 1)
		mailbox_deliver(NULL);
	else if (ev->version == mb_version + 1 && mb_version >= 0)
		mailbox_deliver(ev->data);
	mb_version = ev->version;
	mb_setups = 0;
	mb_ready = true;
}

/* A reply or the watch of the mailbox's requests */
void
zklock_held_mailbox_event(ZkEvent *ev)
{
	if (TAG_GEN(ev->tag) != mb_generation || mb_session == 0)
		return;					/* an earlier setup's, or session's */
	if (TAG_OP(ev->tag) == OP_MB_CREATE && ev->rc != ZKC_OK &&
		ev->rc != ZKC_NODEEXISTS && ev->rc != ZKC_NONODE &&
		ev->rc != ZKC_CONNLOSS && ev->rc != ZKC_EXPIRED)
		ereport(LOG,
				(errmsg("zklock: could not create the revocation mailbox \"%s\": %s",
						ev->path, zkc_result_text(ev->zoo_rc))));
	if (TAG_OP(ev->tag) != OP_MB_READ)
		return;					/* the read behind them tells */
	if (ev->kind == ZKEV_DATA)
		mailbox_read_reply(ev);
	else if (ev->kind == ZKEV_WATCH && ev->watch_type == ZKC_WATCH_DELETED)
	{
		/* someone deleted it: rely on it no more, and make it again */
		mailbox_deliver(NULL);
		mb_setups = 1;
		mailbox_setup();
	}
	else if (ev->kind == ZKEV_WATCH)
		mailbox_read();			/* written: read it, and watch again */
}
