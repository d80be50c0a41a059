/*-------------------------------------------------------------------------
 *
 * lock_explicit.c
 *		The lock recipe's explicit requests (Hive's LOCK TABLE): what a
 *		persistent lock node needs beyond an ephemeral one.  Part of the
 *		lock recipe: protocol.c calls it; it calls lock_held.c only.
 *
 * An explicit request's node outlives the session.  While it waits, the
 * node has an ephemeral child "waiter" of this session (so the sweep knows
 * someone waits for it) and a watch (so that a node deleted by someone
 * else fails the request at once): zklock_explicit_watch_own.  Hive's
 * rule grants it by a rewrite of its data, which proves the node is still
 * there and starts its time to live, followed by the delete of the waiter
 * child; the backend is told once both are answered
 * (zklock_explicit_grant).  The state is the entry's WorkEntry
 * (waiter_child, self_watched, grant_written), the worker's own memory.
 *
 * The index (explicit_index.c, 1.5): before its node, each create of an
 * explicit request creates the request's entry under <root>/zklock.explicit
 * (and that node, persistent, if missing), pipelined on the same session,
 * so that ZooKeeper applies it first; a create tried again rewrites the
 * entry first (zklock_explicit_record).  Once the delete of the node is
 * answered, or its create failed for good (with the version it was made
 * with: no retry rewrote it), the entry goes (zklock_explicit_unrecord).
 * Nothing waits for these replies: one that fails is logged, and the sweep
 * removes an entry left without its node (explicit_index.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/timestamp.h"

#include "channel.h"
#include "recipe.h"
#include "lock_int.h"
#include "zklock.h"
#include "shmem.h"
#include "zk_client.h"
#include "failpoint.h"
#include "explicit_index.h"
#include "resource.h"

static void granted_data(char *data, size_t size);

/*
 * A waiting explicit request: its persistent node gets an ephemeral child
 * of this session (while it exists, the sweep knows someone waits for the
 * node), and a watch, so that the node deleted by someone else ends the
 * wait with an error instead of a wait for ever.
 */
void
zklock_explicit_watch_own(int idx)
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
void
zklock_explicit_waiter_event(int idx, ZkEvent *ev)
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
void
zklock_explicit_self_event(int idx, ZkEvent *ev)
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
			zklock_explicit_watch_own(idx);
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
void
zklock_explicit_grant(int idx)
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
void
zklock_explicit_grant_write_event(int idx, ZkEvent *ev)
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
void
zklock_explicit_grant_child_event(int idx, ZkEvent *ev)
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


/*
 * Before each create of an explicit request's node: its index entry, and
 * the index node, both persistent (NODEEXISTS is success).  A create tried
 * again after a lost reply (w->tries > 1, and not the create with the
 * parents, which follows a NONODE by one round trip) rewrites the entry
 * first, so that a sweep that read it before (an entry old and without
 * its node) cannot delete it: its version and mtime moved
 * (explicit_index.c).  false when something could not be sent.
 */
bool
zklock_explicit_record(int idx, const char *request, bool with_parents)
{
	WorkEntry  *w = &zklock_work[idx];
	char		dir[ZKLOCK_EXPLICIT_INDEX_MAX_PATH];
	char		path[ZKLOCK_EXPLICIT_INDEX_MAX_PATH];
	uint64		tag = TAG(w->generation, OP_INDEX, idx);

	if (!zklock_explicit_index_path(path, sizeof(path), w->parent, request))
	{
		/* cannot happen: the resource and the request fit */
		ereport(LOG,
				(errmsg("zklock: explicit lock request \"%s/%s\" has no index entry",
						w->parent, request)));
		return true;
	}
	zklock_explicit_index_dir(dir, sizeof(dir));
	return zkc_create(dir, NULL, -1, 0, tag) &&
		(w->tries <= 1 || with_parents ||
		 zkc_set_data(path, NULL, -1, tag)) &&
		zkc_create(path, NULL, -1, 0, tag);
}

/*
 * The node of an explicit request is gone (its delete answered), or its
 * create failed for good: so goes its index entry.  The request ends with
 * this; no create of it follows.  version is -1 (whatever it is) after the
 * node's delete; 0 after a create that failed for good, so that the entry
 * goes only if no create of the request was tried again after an unknown
 * outcome (which rewrote it: a node may exist, and the sweep decides).
 */
void
zklock_explicit_unrecord(int idx, int version)
{
	WorkEntry  *w = &zklock_work[idx];
	char		request[ZKLOCK_MAX_NODE_NAME_LEN + 1];
	char		path[ZKLOCK_EXPLICIT_INDEX_MAX_PATH];

	zklock_format_node_request(request, sizeof(request), w->prefix,
							   w->mode, w->naming);
	if (zklock_explicit_index_path(path, sizeof(path), w->parent, request))
		(void) zkc_delete_version(path, version,
								  TAG(w->generation, OP_INDEX, idx));
}

/*
 * A reply about the index: only a create refused for another reason than
 * the node being there (or the connection, after which the create is tried
 * again with its entry) is worth a line: its node may then have no entry,
 * and only a worker's first walk finds it.
 */
void
zklock_explicit_record_event(int idx, ZkEvent *ev)
{
	if (ev->kind != ZKEV_CREATED || ev->rc == ZKC_OK ||
		ev->rc == ZKC_NODEEXISTS || ev->rc == ZKC_CONNLOSS ||
		ev->rc == ZKC_EXPIRED || ev->rc == ZKC_NONODE)
		return;
	ereport(LOG,
			(errmsg("zklock: could not record an explicit lock request in \"%s\": %s",
					ev->path, zkc_result_text(ev->zoo_rc))));
}
