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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "channel.h"
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

static bool post_revocation(int idx, ZkEvent *ev);
static void post_failed(int idx, const char *why);

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
		ok = zkc_delete(path, TAG(w->generation, OP_ADMIN, idx));
	else
		ok = zkc_set_data(path, data, strlen(data),
						  TAG(w->generation, OP_ADMIN, idx));
	if (!ok)
		zklock_recipe_fail(idx, ERRCODE_CONNECTION_FAILURE,
						   "not connected to ZooKeeper");
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
		/* token: found it */
		zklock_channel_done(idx, w->generation, ev->rc == ZKC_OK, 0);
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

const ZkRecipe zklock_admin_recipe = {
	.name = "admin",
	.kinds = RECIPE_KIND(ZKR_FORCE_DELETE) | RECIPE_KIND(ZKR_REVOKE),
	.start = admin_start,
	.event = admin_event,
	.session_lost = admin_session_lost,
};
