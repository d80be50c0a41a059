/*-------------------------------------------------------------------------
 *
 * admin.c
 *		Administration of other holders' locks: a recipe (recipe.h).
 *
 * An administrator's request (zk_lock_force_release, zk_lock_revoke: an
 * entry of kind ZKR_FORCE_DELETE or ZKR_REVOKE, see backend.c) deletes
 * another holder's lock node, or writes a revocation ("revoke=cancel" or
 * "revoke=terminate") into it: one request, whose reply ends the entry.
 * recipe.c starts it and hands it its reply.  No state of its own beyond
 * the entry's phase.
 *
 * The holder's side of a revocation is the lock recipe's: the guard of a
 * granted lock reads its node's data at each change, and signals the
 * holding backend once per revocation (lock_held.c).  A lock granted alone
 * is guarded by its listing's child watch only, which a write into its data
 * does not fire; so a revocation that was written also writes the node's
 * path into the mailbox of the holder's session (its ephemeralOwner, from
 * the write's reply): <root>/zklock.sessions/<session id in hex>, whose
 * watch makes the holder's worker read the node (lock_held.c).  The
 * request is answered once that second write is answered; NONODE there (a
 * holder of zklock 1.4, or one whose mailbox could not be made: each
 * guards its own node, whose watch reads the revocation) is no error.  Any
 * other failure of it (not sent, its reply lost, refused) fails the
 * request: the revocation is written, but a holder guarded by its listing
 * alone may not hear of it before its lock is next contended, so success
 * is not reported; zk_lock_revoke may be called again (an explicit lock's
 * node, nobody's, has no mailbox: its write is the request).
 *
 * A force release (zk_lock_force_release, issue 28) is a revocation done
 * right: the holder's instance is asked first, so that no commit its
 * holder's fence let through can land after the lock is granted to
 * another.  The node is read; a zklock holder's node (ephemeral, with an
 * "instance=" and a "pid=" field) gets the request "release=requested"
 * written into its data (at the version read) and the same note to its
 * session's mailbox as a revocation.  The holder's worker marks the lock
 * lost, waits until the holding backend's commit window has closed, and
 * deletes the node itself (lock_held.c).  We wait for that deletion (an
 * exists watch) up to twice the session timeout; a node still there then
 * (its instance stopped, cut off, or of a version that does not know the
 * request: 1.6 and before ignore the field) is deleted by us, with a
 * WARNING, and the reply's token 2 makes the caller warn too: the window
 * of doc/safety.md applies to it.  Every other node (an explicit lock's,
 * nobody's session; another client's, without zklock's fields) is deleted
 * at once, as before.  The wait's state is the entry's WorkEntry
 * (admin_until_us, admin_rearm, admin_outside, admin_tries).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"

#include "channel.h"
#include "lease.h"
#include "recipe.h"
#include "zklock.h"
#include "shmem.h"
#include "zk_client.h"
#include "explicit_index.h"
#include "settings.h"
#include "failpoint.h"

/* The administrator's operations, as carried in a tag */
#define OP_ADMIN	1			/* the delete or the revocation's write */
#define OP_POST		2			/* the revocation's note to the mailbox */
#define OP_READ		3			/* force release: read the node first */
#define OP_REQUEST	4			/* force release: write the request */
#define OP_GONE		5			/* force release: exists+watch on the node */

#define FORCE_MAX_TRIES		3	/* versioned request writes that meet
								 * another write */

static bool post_revocation(int idx, ZkEvent *ev);
static void post_failed(int idx, const char *why);
static void force_delete(int idx, bool outside);

/*
 * How long a force release waits for the holder's instance to delete the
 * node: twice the session timeout.  The holder cancels a commit that
 * holds the release up after its own session timeout (lock_held.c), so an
 * instance that answers at all answers within it, when the instances'
 * session timeouts are alike.
 */
static int
force_bound_ms(void)
{
	return 2 * Max(zkc_negotiated_timeout(), zklock_session_timeout);
}

/*
 * An administrator's request: delete another holder's node, or write a
 * revocation into it.
 */
static void
admin_start(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
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
	{
		/* the bound counts from the request: a lost reply does not extend it */
		w->admin_until_us = zklock_boottime_us() +
			(int64) force_bound_ms() * 1000;
		ok = zkc_get_data(path, TAG(w->generation, OP_READ, idx));
	}
	else
		ok = zkc_set_data(path, data, strlen(data),
						  TAG(w->generation, OP_ADMIN, idx));
	if (!ok)
		zklock_recipe_fail(idx, ERRCODE_CONNECTION_FAILURE,
						   "not connected to ZooKeeper");
}

/* A force release ends: token 0 (not there), 1 (released), 2 (from outside) */
static void
force_done(int idx, int64 token)
{
	WorkEntry  *w = &zklock_work[idx];

	zkc_unwatch(TAG(w->generation, OP_GONE, idx));
	w->admin_until_us = 0;
	zklock_channel_done(idx, w->generation, token, 0);
	w->phase = PH_IDLE;
}

/* Delete the node ourselves: at once, or (outside) after the bound */
static void
force_delete(int idx, bool outside)
{
	WorkEntry  *w = &zklock_work[idx];
	char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];

	node_path(path, w, entry(idx)->node);
	zkc_unwatch(TAG(w->generation, OP_GONE, idx));
	w->admin_until_us = 0;
	w->admin_deleting = true;
	w->admin_outside = outside;
	if (outside)
		ereport(WARNING,
				(errmsg("zklock: the holder's instance did not release lock node \"%s\" within %d ms; deleting it",
						path, force_bound_ms()),
				 errdetail("The holder's instance did not answer (stopped, cut off, or a zklock version that does not know the request): a commit of the holder that passed the commit fence may still land after the lock is granted to another.")));
	if (!zkc_delete(path, TAG(w->generation, OP_ADMIN, idx)))
		zklock_recipe_fail(idx, ERRCODE_CONNECTION_FAILURE,
						   "not connected to ZooKeeper");
}

/* Watch for the node's deletion by its holder (exists with a watch) */
static void
force_watch(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];

	node_path(path, w, entry(idx)->node);
	zkc_unwatch(TAG(w->generation, OP_GONE, idx));
	w->admin_rearm = !zkc_get_data_watch(path, TAG(w->generation, OP_GONE, idx));
	if (w->admin_rearm)
		zklock_recipe_retry_soon();
}

/*
 * A read or the request's write ended in a connection loss (its reply
 * lost, the write maybe applied): read the node again once connected
 * (admin_retry), within the same bound; never delete it early for that.
 */
static void
force_reread(int idx)
{
	WorkEntry  *w = &zklock_work[idx];

	w->admin_reread = true;
	zklock_recipe_retry_soon();
}

/*
 * The node was read: a zklock holder's is asked to release (its data with
 * "release=requested", at the version read); any other is deleted now.
 */
static void
force_read_reply(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];
	char		data[ZKLOCK_MAX_DATA_LEN + 1];
	size_t		len;

	if (w->admin_deleting)
		return;
	if (ev->rc == ZKC_NONODE)
	{
		force_done(idx, w->asked ? 1 : 0);
		return;
	}
	if (ZKLOCK_FAILPOINT("force-read-reply") ||
		(ev->rc != ZKC_OK && ev->rc != ZKC_NOAUTH))
	{
		force_reread(idx);
		return;
	}
	if (w->asked && ev->rc == ZKC_OK && ev->data != NULL &&
		zklock_node_field(ev->data, "release=") != NULL)
	{
		/* asked already (a lost reply, or read again): wait for it */
		force_watch(idx);
		return;
	}
	if (!w->asked &&
		(ev->rc != ZKC_OK || ev->data == NULL || ev->ephemeral_owner == 0 ||
		 zklock_node_field(ev->data, "instance=") == NULL ||
		 zklock_node_field(ev->data, "pid=") == NULL))
	{
		/* unreadable (its ACL), an explicit lock, or another client's */
		force_delete(idx, false);
		return;
	}
	if (zklock_node_field(ev->data ? ev->data : "", "release=") != NULL)
		len = zklock_nodedata_set(data, sizeof(data), ev->data, "release=",
								  "requested");
	else
		len = zklock_nodedata_add(data, sizeof(data), ev->data ? ev->data : "",
								  "release=", "requested");
	/* cut between characters: what is cut is the query, last */
	if (len >= sizeof(data))
		len = pg_encoding_mbcliplen(PG_UTF8, data, strlen(data),
									sizeof(data) - 1);
	data[len] = '\0';

	/*
	 * At the version read, so that the holder's own rewrite of its
	 * description is not lost; after FORCE_MAX_TRIES such meetings, over
	 * it (the node is going anyway).
	 */
	if (!zkc_set_data_version(ev->path, data, len,
							  ++w->admin_tries > FORCE_MAX_TRIES ? -1 : ev->version,
							  TAG(w->generation, OP_REQUEST, idx)))
		zklock_recipe_fail(idx, ERRCODE_CONNECTION_FAILURE,
						   "not connected to ZooKeeper");
}

/* The request was written: note it in the holder's mailbox */
static void
force_request_reply(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	if (w->admin_deleting)
		return;
	if (ev->rc == ZKC_NONODE)
		force_done(idx, w->asked ? 1 : 0);
	else if (ev->rc == ZKC_BADVERSION)
	{
		/* the holder rewrote its description meanwhile: read it again */
		if (!zkc_get_data(ev->path, TAG(w->generation, OP_READ, idx)))
			force_reread(idx);
	}
	else if (ev->rc == ZKC_NOAUTH && !w->asked)
		force_delete(idx, false);	/* refused (its ACL): as before */
	else if (ev->rc != ZKC_OK)
		force_reread(idx);		/* its reply lost: applied or not? */
	else
	{
		w->asked = true;
		/* a holder guarded by its own node reads it without the note */
		if (!post_revocation(idx, ev))
			ereport(LOG,
					(errmsg("zklock: could not notify the holder's instance of the release of \"%s\"",
							ev->path)));
		force_watch(idx);
	}
}

/* The watch on a node whose holder was asked to release it */
static void
force_gone_event(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	if (w->admin_until_us == 0 || w->admin_deleting)
		return;
	if ((ev->kind == ZKEV_WATCH && ev->watch_type == ZKC_WATCH_DELETED) ||
		(ev->kind == ZKEV_DATA && ev->rc == ZKC_NONODE))
		force_done(idx, 1);
	else if (ev->kind == ZKEV_DATA && ev->rc == ZKC_OK &&
			 (ev->data == NULL ||
			  zklock_node_field(ev->data, "release=") == NULL))
	{
		/*
		 * Our request was written over (zk_lock_revoke writes the whole
		 * data, unversioned) before the holder read it: write it again,
		 * at the version just read, keeping what is there.
		 */
		w->admin_tries = 0;
		force_read_reply(idx, ev);
	}
	else if (ev->kind == ZKEV_WATCH ||
			 (ev->kind == ZKEV_DATA && ev->rc != ZKC_OK))
	{
		/* its data changed, or the watch was not set: set it again */
		zkc_unwatch(TAG(w->generation, OP_GONE, idx));
		w->admin_rearm = true;
		zklock_recipe_retry_soon();
	}
}

/*
 * The reply to an administrator's request: the node is gone or rewritten
 * (or was not there), or the request fails.
 *
 * A delete that finds children (NOTEMPTY) met a waiting explicit request:
 * its node keeps its "waiter" child until the grant's rewrite is done, and
 * Hive's rule may already grant it in the caller's listing (its blocker
 * just went) before that.  It is not a lock yet and is left alone, as a
 * waiting request is: not removed, not an error.
 */
static void
admin_event(ZkEvent *ev)
{
	int			idx = TAG_IDX(ev->tag);
	WorkEntry  *w = &zklock_work[idx];

	if (w->phase != PH_ADMIN)
		return;
	switch (TAG_OP(ev->tag))
	{
		case OP_READ:
			force_read_reply(idx, ev);
			return;
		case OP_REQUEST:
			force_request_reply(idx, ev);
			return;
		case OP_GONE:
			force_gone_event(idx, ev);
			return;
		case OP_POST:
			if (w->kind == ZKR_FORCE_DELETE)
				return;			/* the watch on the node tells */
			break;
	}
	if (TAG_OP(ev->tag) == OP_POST)
	{
		if (ev->rc != ZKC_OK && ev->rc != ZKC_NONODE)
			post_failed(idx, zkc_result_text(ev->zoo_rc));
		else
		{
			zklock_channel_done(idx, w->generation, true, 0);
			w->phase = PH_IDLE;
		}
		return;
	}
	if (ev->rc == ZKC_OK && w->kind == ZKR_REVOKE && ev->ephemeral_owner != 0)
	{
		if (!post_revocation(idx, ev))
			post_failed(idx, "not sent");
		return;					/* answered with the post's reply */
	}
	if (ev->rc == ZKC_OK || ev->rc == ZKC_NONODE ||
		(ev->rc == ZKC_NOTEMPTY && w->kind == ZKR_FORCE_DELETE))
	{
		/* an explicit node deleted: its index entry after it */
		if (ev->rc == ZKC_OK && w->kind == ZKR_FORCE_DELETE)
			(void) zklock_explicit_index_forget(ev->path, 0,
												TAG(w->generation, OP_ADMIN, idx));
		/*
		 * token: found it (2: deleted after its holder did not answer; 1
		 * too when its holder, asked, deleted it just before our delete)
		 */
		zklock_channel_done(idx, w->generation,
							ev->rc == ZKC_OK ? (w->admin_outside ? 2 : 1) :
							(ev->rc == ZKC_NONODE && w->asked) ? 1 : 0, 0);
		w->phase = PH_IDLE;
	}
	else
	{
		char		msg[ZKLOCK_MAX_ERROR_LEN + 1];

		snprintf(msg, sizeof(msg), "could not change lock node \"%s\": %s",
				 ev->path, zkc_result_text(ev->zoo_rc));
		zklock_recipe_fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION, msg);
	}
}

/*
 * A revocation was written into an ephemeral node: write its path into the
 * mailbox of its owner's session.  false when it could not be sent.
 */
static bool
post_revocation(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];
	char		mailbox[ZKLOCK_MAX_PATH + 1];

	snprintf(mailbox, sizeof(mailbox), "%s/%s/%016llx", zklock_root,
			 ZKLOCK_MAILBOX_NODE, (unsigned long long) ev->ephemeral_owner);
	/* failpoint "before-revoke-post" (fail): as if it could not be sent */
	if (ZKLOCK_FAILPOINT("before-revoke-post"))
		return false;
	return zkc_set_data(mailbox, ev->path, strlen(ev->path),
						TAG(w->generation, OP_POST, idx));
}

/*
 * The revocation is written but its note to the holder's mailbox was not
 * (why): the request fails, rather than report a revocation its holder
 * may not hear of while its lock is not contended.  Its SQLSTATE is a
 * failed write's (38000), not 08006, which says the worker is gone.
 */
static void
post_failed(int idx, const char *why)
{
	char		msg[ZKLOCK_MAX_ERROR_LEN + 1];

	snprintf(msg, sizeof(msg),
			 "revocation written, but its holder's instance could not be notified (%s); call zk_lock_revoke again",
			 why);
	zklock_recipe_fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION, msg);
}

/*
 * The session is gone: a request in flight fails (or, withdrawn, is
 * released), as a lock request does.
 */
static void
admin_session_lost(void)
{
	for (int i = 0; i < zklock_recipe_nentries(); i++)
	{
		WorkEntry  *w = &zklock_work[i];
		char		msg[ZKLOCK_MAX_ERROR_LEN + 1];

		if (w->phase != PH_ADMIN)
			continue;
		if (w->release)
		{
			zklock_recipe_released(i);
			continue;
		}
		snprintf(msg, sizeof(msg),
				 "ZooKeeper session lost while acquiring the lock: %s",
				 zklock_recipe_loss_why());
		zklock_recipe_fail(i, ERRCODE_CONNECTION_FAILURE, msg);
	}
}

/*
 * The bound of a force release's wait passed: delete the node ourselves.
 * Returns the milliseconds until the next such bound, or -1.
 */
static long
admin_tick(void)
{
	int64		now_us = zklock_boottime_us();
	long		next = -1;

	for (int i = 0; i < zklock_recipe_nentries(); i++)
	{
		WorkEntry  *w = &zklock_work[i];
		long		left_ms;

		if (w->kind != ZKR_FORCE_DELETE || w->phase != PH_ADMIN ||
			w->admin_until_us == 0 || w->admin_deleting || !zklock_connected)
			continue;
		left_ms = (long) ((w->admin_until_us - now_us) / 1000);
		if (left_ms <= 0)
			force_delete(i, true);
		else if (next < 0 || left_ms < next)
			next = left_ms;
	}
	return next;
}

/* Set again the watches that could not be set (connected again) */
static void
admin_retry(void)
{
	for (int i = 0; i < zklock_recipe_nentries(); i++)
	{
		WorkEntry  *w = &zklock_work[i];

		char		path[ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2];

		if (w->kind != ZKR_FORCE_DELETE || w->phase != PH_ADMIN ||
			w->admin_until_us == 0 || w->admin_deleting || !zklock_connected)
			continue;
		if (w->admin_reread)
		{
			node_path(path, w, entry(i)->node);
			w->admin_reread = !zkc_get_data(path, TAG(w->generation, OP_READ, i));
			if (w->admin_reread)
				zklock_recipe_retry_soon();
		}
		else if (w->admin_rearm)
			force_watch(i);
	}
}

/*
 * The caller gave up (cancelled) while we wait for the holder: stop
 * waiting; the holder, asked already, still releases the node.
 */
static void
admin_release(int idx)
{
	WorkEntry  *w = &zklock_work[idx];

	if (w->kind == ZKR_FORCE_DELETE && w->phase == PH_ADMIN &&
		w->admin_until_us != 0)
		force_done(idx, 0);
}

const ZkRecipe zklock_admin_recipe = {
	.name = "admin",
	.kinds = RECIPE_KIND(ZKR_FORCE_DELETE) | RECIPE_KIND(ZKR_REVOKE),
	.start = admin_start,
	.event = admin_event,
	.session_lost = admin_session_lost,
	.retry = admin_retry,
	.tick = admin_tick,
	.release = admin_release,
};
