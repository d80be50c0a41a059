/*-------------------------------------------------------------------------
 *
 * request.c
 *		The backend's requests that are not locks it holds: explicit locks
 *		(persistent nodes this backend does not track), the listing behind
 *		zk_locks, and administrators' actions on other holders' nodes.
 *
 * Each is one request through the channel (wait.c): submitted, waited
 * for, and collected (zklock_channel_collect), which frees the entry; none
 * of them enters the local lock table.  A listing's rows come back in a
 * DSM segment the backend creates and detaches, whatever the outcome.  An
 * administrator never removes this backend's own nodes (own_node), which
 * it releases itself.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "storage/dsm.h"
#include "utils/hsearch.h"

#include "backend.h"
#include "backend_int.h"
#include "channel.h"
#include "zklock.h"
#include "settings.h"
#include "shmem.h"
#include "resource.h"
#include "grant_rule.h"

/*
 * zk_locks: ask the worker to list every lock node under the root.  The
 * rows come back in a DSM segment; if it was too small, try once more with
 * the size the worker asked for.
 */
char *
zklock_list_nodes(const char *subtree, Size *len)
{
	Size		size = 64 * 1024;

	zklock_backend_init();
	for (int attempt = 0; attempt < 4; attempt++)
	{
		dsm_segment *seg = dsm_create(size, 0);
		int			idx;
		uint32		gen;
		ZkChannelRequest req;
		ZkChannelResult done;
		ZkEntryState state;
		Size		needed;
		char	   *result = NULL;

		zklock_request_init(&req, ZKR_LIST);
		strlcpy(req.resource, subtree ? subtree : "", sizeof(req.resource));
		req.list_handle = dsm_segment_handle(seg);
		req.list_size = size;
		idx = zklock_submit(&req, &gen);

		state = zklock_wait_for_answer(idx, gen, "the listing", -1, -1, false);
		if (state == ZKE_FAILED)
		{
			dsm_detach(seg);
			zklock_raise_failure(idx, gen, "list zklock lock nodes");
		}

		zklock_channel_collect(idx, gen, &done);
		needed = done.list_needed;

		if (needed <= size)
		{
			result = palloc(needed);
			memcpy(result, dsm_segment_address(seg), needed);
			result[needed - 1] = '\0';
			*len = needed - 1;
		}
		dsm_detach(seg);
		if (result)
			return result;
		size = needed + needed / 4;
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("could not list zklock lock nodes: the set kept growing")));
	return NULL;
}

/*
 * Is node (of resource) one that this backend holds?  An administrator
 * removing "other holders' nodes" releases its own instead.
 */
static bool
own_node(const char *resource, const char *node)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;
	bool		own = false;

	if (zklock_local_locks == NULL)
		return false;
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	hash_seq_init(&seq, zklock_local_locks);
	while ((lock = hash_seq_search(&seq)) != NULL)
	{
		ZkLockEntry *e = &zklock_shared->entries[lock->idx];

		if (!own && e->generation == lock->generation &&
			strcmp(lock->key.resource, resource) == 0 &&
			strcmp(e->node, node) == 0)
			own = true;
	}
	LWLockRelease(zklock_shared->lock);
	return own;
}

/*
 * An administrator's action on another holder's node: delete it
 * (ZKR_FORCE_DELETE) or write data asking the holder to give it up
 * (ZKR_REVOKE).  Returns false when the node no longer exists.
 */
bool
zklock_admin_node(const char *resource, const char *node, ZkEntryKind kind,
				  const char *data)
{
	int			idx;
	uint32		gen;
	ZkChannelRequest req;
	ZkChannelResult done;
	ZkEntryState state;
	int			datalen;

	zklock_backend_init();
	zklock_check_resource(resource);
	if (!zklock_parse_node_name(node, NULL, NULL) || strchr(node, '/') ||
		strlen(node) > ZKLOCK_MAX_NODE_NAME_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" is not a lock node name", node)));

	/* zk_lock_force_release removes others' nodes: this backend's it keeps */
	if (kind == ZKR_FORCE_DELETE && own_node(resource, node))
	{
		ereport(WARNING,
				(errmsg("not removing this session's own zklock lock node on resource \"%s\"",
						resource),
				 errhint("Release it with zk_lock_release(), or end the transaction that holds it.")));
		return false;
	}

	/* node data is UTF-8 (the caller converted it): cut between characters */
	datalen = data ? pg_encoding_mbcliplen(PG_UTF8, data, strlen(data),
										   ZKLOCK_MAX_DATA_LEN) : 0;

	zklock_request_init(&req, kind);
	strlcpy(req.resource, resource, sizeof(req.resource));
	strlcpy(req.node, node, sizeof(req.node));
	memcpy(req.data, data ? data : "", datalen);
	req.data[datalen] = '\0';
	idx = zklock_submit(&req, &gen);

	state = zklock_wait_for_answer(idx, gen, "the lock node", -1, -1, false);
	if (state == ZKE_FAILED)
		zklock_raise_failure(idx, gen, "change zklock lock node");
	zklock_channel_collect(idx, gen, &done);
	return done.token != 0;
}

/*
 * An explicit lock (Hive's LOCK TABLE): a persistent node that outlives
 * this session and a restart, and expires after ttl_ms; every instance's
 * worker removes expired ones.  It takes no parent locks and is not
 * tracked by this backend: zk_lock_release_explicit removes it.  Waits up
 * to timeout_ms (-1: no limit).  Returns the token.
 */
int64
zklock_lock_explicit(const char *resource, ZkLockMode mode, int64 ttl_ms,
					 int timeout_ms)
{
	char		data[ZKLOCK_MAX_DATA_LEN + 1];
	int			idx;
	uint32		gen;
	ZkChannelRequest req;
	ZkChannelResult granted;
	ZkEntryState state;
	char	   *what;
	ZkLockMode	held_mode;

	zklock_backend_init();
	zklock_check_resource(resource);
	zklock_check_allowed(resource);
	if (ttl_ms <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("an explicit zklock lock needs a positive time to live")));

	/*
	 * An explicit lock is a node of its own: on a resource this session
	 * holds in a conflicting mode (itself, or as a parent of what it holds)
	 * it would wait behind this session's own node for ever.
	 */
	if (zklock_held_lock(resource, &held_mode) != NULL &&
		zklock_modes_conflict(held_mode, mode))
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("zklock resource \"%s\" is already held in %s mode by this session",
						resource, zklock_mode_name(held_mode)),
				 errdetail("An explicit lock in %s mode would wait for this session itself.",
						   zklock_mode_name(mode)),
				 errhint("Release the session's lock first (or end its transaction), then take the explicit lock.")));

	zklock_describe_holder(data, sizeof(data), "explicit", false, ttl_ms);

	zklock_request_init(&req, timeout_ms == 0 ? ZKR_TRY_ACQUIRE : ZKR_ACQUIRE);
	req.mode = mode;
	req.persistent = true;
	strlcpy(req.resource, resource, sizeof(req.resource));
	strlcpy(req.data, data, sizeof(req.data));
	idx = zklock_submit(&req, &gen);

	what = psprintf("resource \"%s\"", resource);
	state = zklock_wait_for_answer(idx, gen, what, timeout_ms == 0 ? -1 : timeout_ms,
							timeout_ms, timeout_ms != 0);
	if (state == ZKE_FAILED)
		zklock_raise_failure(idx, gen, psprintf("acquire explicit zklock lock on resource \"%s\"",
									resource));
	if (state == ZKE_NOT_GRANTED)
	{
		zklock_channel_withdraw(idx, gen);
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("could not obtain zklock lock on %s within 0 ms", what)));
	}

	/* granted: the node is on its own; the entry is done */
	zklock_channel_collect(idx, gen, &granted);
	return granted.token;
}
