/*-------------------------------------------------------------------------
 *
 * admin.c
 *		Administration of other holders' locks, and revocation of our own.
 *
 * An administrator's request (zk_lock_force_release, zk_lock_revoke: an
 * entry of kind ZKR_FORCE_DELETE or ZKR_REVOKE, see backend.c) deletes
 * another holder's lock node, or writes a revocation ("revoke=cancel" or
 * "revoke=terminate") into it: one request, whose reply ends the entry.
 * protocol.c starts it and hands it its reply.
 *
 * The holder's side: the guard of a granted lock (protocol.c, step 4)
 * reads its node's data at each change, and hands it to
 * zklock_admin_revoked(), which signals the holding backend once per
 * revocation.  No state of its own beyond the entry's revoke_seen.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "channel.h"
#include "protocol_int.h"
#include "zklock.h"
#include "shmem.h"
#include "zk_client.h"
#include "protocol.h"

/*
 * Revocation (Curator's, done for the holder): another instance wrote
 * "revoke=cancel" or "revoke=terminate" into our granted node.  Cancel the
 * holder's statement or end its session, as the revoker chose; its
 * transaction then ends and releases the lock.
 */
void
zklock_admin_revoked(int idx, const char *data, int version)
{
	WorkEntry  *w = &zklock_work[idx];
	const char *r = zklock_node_field(data, "revoke=");
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
void
zklock_admin_start(int idx)
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
		zklock_protocol_fail(idx, ERRCODE_CONNECTION_FAILURE,
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
void
zklock_admin_event(int idx, ZkEvent *ev)
{
	WorkEntry  *w = &zklock_work[idx];

	if (w->phase != PH_ADMIN)
		return;
	if (ev->rc == ZKC_OK || ev->rc == ZKC_NONODE ||
		(ev->rc == ZKC_NOTEMPTY && w->kind == ZKR_FORCE_DELETE))
	{
		/* token: found it */
		zklock_channel_done(idx, w->generation, ev->rc == ZKC_OK, 0);
		w->phase = PH_IDLE;
	}
	else
	{
		char		msg[ZKLOCK_MAX_ERROR_LEN + 1];

		snprintf(msg, sizeof(msg), "could not change lock node \"%s\": %s",
				 ev->path, zkc_result_text(ev->zoo_rc));
		zklock_protocol_fail(idx, ERRCODE_EXTERNAL_ROUTINE_EXCEPTION, msg);
	}
}
