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
 * It also holds the request of one step of an acquisition
 * (zklock_step_request: acquire.c and its batch, acquire_batch.c, fill in
 * their requests with it); the node data it writes is holder.c's.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/dsm.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "backend.h"
#include "backend_int.h"
#include "channel.h"
#include "zklock.h"
#include "settings.h"
#include "stats.h"
#include "shmem.h"
#include "resource.h"
#include "grant_rule.h"
#include "nodedata.h"

/*
 * Fill in a step's request and its node data; a semaphore's data says its
 * limit too (max_holders=, nodedata.c: room is kept for it).
 */
void
zklock_step_request(ZkChannelRequest *req, LockStep *step, bool session)
{
	char		data[ZKLOCK_MAX_DATA_LEN + 1];
	char		limit[16];

	zklock_holder_data(data, sizeof(data) - (step->max_holders ? 20 : 0),
					   session ? "session" : "transaction", step->implicit, 0);
	snprintf(limit, sizeof(limit), "%d", step->max_holders);
	if (step->max_holders)
		zklock_nodedata_add(req->data, sizeof(req->data), data,
							"max_holders=", limit);
	else
		strlcpy(req->data, data, sizeof(req->data));
	req->mode = step->mode;
	req->max_holders = step->max_holders;
	strlcpy(req->resource, step->resource, sizeof(req->resource));
}

/*
 * zk_locks: ask the worker to list every lock node under the root.  The
 * rows come back in a DSM segment; if it was too small, try once more with
 * the size the worker asked for.
 */
static char *
list_nodes(const char *subtree, bool explicit_only, Size *len)
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
		char	   *result;

		zklock_request_init(&req, ZKR_LIST);
		strlcpy(req.resource, subtree ? subtree : "", sizeof(req.resource));
		req.persistent = explicit_only;
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
		result = zklock_channel_take_rows(seg, &size, done.list_needed);
		if (result)
		{
			*len = done.list_needed - 1;
			return result;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("could not list zklock lock nodes: the set kept growing")));
	return NULL;
}

char *
zklock_list_nodes(const char *subtree, Size *len)
{
	return list_nodes(subtree, false, len);
}

/*
 * zklock.max_explicit_locks_per_role: a role may hold or wait for this
 * many explicit locks at once.  An explicit lock is a persistent node that
 * outlives its session (up to a year), and no backend or table limit
 * counts it once granted: without this, any LOGIN role could fill
 * ZooKeeper with nodes that every sweep and zk_locks then pay for.
 *
 * What it counts: every zklock explicit lock node under zklock.root, of
 * every instance, granted or waiting (expired ones not swept yet too),
 * whose user= is the role the caller acts as (zk_lock_outer_role(), by
 * name, as zk_lock_release_explicit matches it; the name's bytes when they
 * are UTF-8, whatever the database encoding: zklock_catalog_name_utf8).  Counted
 * exactly from a listing of the explicit nodes at each explicit acquire
 * (one getChildren per resource node, one getData per explicit node):
 * explicit locks are taken seldom, and a count kept anywhere else
 * (shared memory, one instance) would miss those taken, released or
 * expired on other instances.  Acquires of one role running at the same
 * moment may each pass before the others' nodes exist: the count can then
 * go over by their number less one.  Superusers are not limited (they
 * can change the setting); -1 turns it off.  Over the limit: 53400.
 */
static void
check_explicit_quota(void)
{
	Oid			role = GetOuterUserId();
	const char *name;
	char	   *rows;
	char	   *line;
	Size		len;
	int			count = 0;

	if (zklock_max_explicit_locks_per_role < 0 || superuser_arg(role))
		return;
	name = zklock_catalog_name_utf8(GetUserNameFromId(role, false));
	rows = list_nodes(NULL, true, &len);
	for (line = rows; line && *line;)
	{
		char	   *eol = strchr(line, '\n');
		char	   *owner;
		char	   *data;
		const char *user;

		CHECK_FOR_INTERRUPTS();
		if (eol)
			*eol = '\0';
		/* "path \t czxid \t ephemeralOwner \t data", data escaped */
		owner = strchr(line, '\t');
		owner = owner ? strchr(owner + 1, '\t') : NULL;
		data = owner ? strchr(owner + 1, '\t') : NULL;
		if (data && strncmp(owner + 1, "0\t", 2) == 0)
		{
			zklock_nodedata_unescape(++data);
			user = zklock_node_field(data, "user=");
			if (user && zklock_node_field_len(user) == strlen(name) &&
				strncmp(user, name, strlen(name)) == 0)
				count++;
		}
		line = eol ? eol + 1 : NULL;
	}
	pfree(rows);
	if (count >= zklock_max_explicit_locks_per_role)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("role \"%s\" holds too many explicit zklock locks",
						GetUserNameFromId(role, false)),
				 errdetail("It holds or waits for %d explicit locks, on all instances; zklock.max_explicit_locks_per_role is %d.",
						   count, zklock_max_explicit_locks_per_role),
				 errhint("Release some with zk_lock_release_explicit(), or ask a superuser to raise zklock.max_explicit_locks_per_role.")));
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
	zklock_check_named_resource(resource);	/* advisory keys too */
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
	if (done.token == 2)
		ereport(WARNING,
				(errmsg("zklock lock node \"%s\" on resource \"%s\" was deleted without its holder's instance",
						node, resource),
				 errdetail("The holder's instance did not release it within twice the session timeout (stopped, cut off, or a zklock version that does not know the request)."),
				 errhint("A commit of the holder that passed the commit fence may still land after another is granted the lock; see \"Force release\" in doc/safety.md.")));
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
	TimestampTz asked_at;

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

	check_explicit_quota();
	zklock_holder_data(data, sizeof(data), "explicit", false, ttl_ms);

	zklock_request_init(&req, timeout_ms == 0 ? ZKR_TRY_ACQUIRE : ZKR_ACQUIRE);
	req.mode = mode;
	req.persistent = true;
	strlcpy(req.resource, resource, sizeof(req.resource));
	strlcpy(req.data, data, sizeof(req.data));
	asked_at = GetCurrentTimestamp();
	idx = zklock_submit(&req, &gen);

	what = psprintf("resource \"%s\"", resource);
	/* counted in zk_lock_stats as any lock: a wait that an error ends too */
	state = timeout_ms == 0 ?
		zklock_wait_for_answer(idx, gen, what, -1, timeout_ms, false) :
		zklock_wait_counted(idx, gen, what, timeout_ms, timeout_ms, resource,
							mode, asked_at);
	if (state == ZKE_FAILED)
		zklock_raise_failure(idx, gen, psprintf("acquire explicit zklock lock on resource \"%s\"",
									resource));
	if (state == ZKE_NOT_GRANTED)
	{
		zklock_channel_withdraw(idx, gen);
		zklock_stats_count(resource, mode, ZKLOCK_STAT_NOT_GRANTED);
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("could not obtain zklock lock on %s within 0 ms", what)));
	}

	/*
	 * granted: the node is on its own; the entry is done.  Counted as an
	 * acquisition; its held time is nobody's (it lives until released or
	 * expired, whoever does it).
	 */
	zklock_channel_collect(idx, gen, &granted);
	zklock_stats_granted(resource, mode, granted.waited,
						 granted.waited ? zklock_stats_ms_since(asked_at) : 0);
	return granted.token;
}
