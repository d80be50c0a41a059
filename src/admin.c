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
 * holding backend once per revocation (lock_held.c).
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

/* The administrator's one operation, as carried in a tag */
#define OP_ADMIN	1

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
