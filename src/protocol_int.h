/*-------------------------------------------------------------------------
 *
 * protocol_int.h
 *		What the worker's protocol files share, and nothing else includes:
 *		the worker's table of entries, the operations of a tag, and the
 *		entry points of the parts around the lock recipe.
 *
 * protocol.c holds the recipe and the dispatcher of replies; listing.c
 * (zk_locks), admin.c (force-release and revocation), sweep.c (expiry of
 * explicit locks) and orphan.c (nodes of explicit requests lost with a
 * session) each keep their own state, static, and are reached only
 * through the functions declared here.  All of it runs in the worker, in
 * its one thread: nothing here is shared with backends, except through
 * zklock_shared (zklock.h) and its lock.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_PROTOCOL_INT_H
#define ZKLOCK_PROTOCOL_INT_H

#include "zklock.h"
#include "shmem.h"
#include "zk_client.h"
#include "protocol.h"
#include "nodedata.h"		/* zklock_node_field */

#define ZKLOCK_MAX_PATH		(ZKLOCK_MAX_ROOT_LEN + 1 + ZKLOCK_MAX_RESOURCE_LEN)

/* Operations, as carried in a tag */
typedef enum ZkOp
{
	OP_PARENT = 1,				/* create a missing parent (container) */
	OP_CREATE,					/* create the lock node */
	OP_CHILDREN,				/* list the resource's children */
	OP_ADOPT,					/* stat a node found again by its prefix */
	OP_WAIT,					/* exists+watch on the node we wait behind */
	OP_GUARD,					/* getData+watch on our own granted node */
	OP_DELETE,					/* delete our node */
	OP_LIST_CHILDREN,			/* zk_locks: list a subtree */
	OP_LIST_DATA,				/* zk_locks: read a lock node */
	OP_ADMIN,					/* force-release or revoke another's node */
	OP_GRANT_WRITE,				/* explicit: rewrite the node we are granted */
	OP_GRANT_CHILD,				/* explicit: delete its waiter child */
	OP_WAITER,					/* explicit: create the waiter child */
	OP_WAITER_DELETE,			/* explicit: delete it before the node */
	OP_SELF,					/* explicit: exists+watch on our waiting node */
	OP_CLOCK,					/* sweep: a write that tells ZooKeeper's time */
	OP_SWEEP_WAITING,			/* sweep: read a node that is not granted */
	OP_REWRITE,					/* rewrite our granted node's data */
	OP_REWRITE_READ				/* read it first: its version is unknown */
} ZkOp;


/* Where the worker is with one entry; the worker's own memory */
typedef enum Phase
{
	PH_IDLE,					/* nothing of ours in flight */
	PH_DEFERRED,				/* not sent yet: waiting for a connection */
	PH_CHECKING,				/* listing (behind a create) or adoption in
								 * flight */
	PH_WATCHING,				/* waiting behind another node */
	PH_HELD,					/* granted */
	PH_GRANTING,				/* explicit: granted, its rewrite in flight */
	PH_DELETING,				/* delete in flight */
	PH_RECOVERING,				/* reply lost: redo when connected */
	PH_LISTING,					/* zk_locks walk in progress */
	PH_ADMIN					/* force-release or revoke in flight */
} Phase;

typedef struct WorkEntry
{
	Phase		phase;
	uint32		generation;		/* of the request this state is for */
	ZkEntryKind kind;
	ZkLockMode	mode;
	ZkNamingStyle naming;		/* how to name our node */
	bool		persistent;		/* an explicit lock: outlives the session */
	bool		release;		/* backend withdrew or released */
	bool		created;		/* our node exists (we saw it) */
	bool		create_unknown; /* create sent, reply lost */
	bool		need_parents;	/* create said NONODE */
	bool		try_failed;		/* try-lock lost: deleting, then report */
	bool		counted_wait;	/* counted in n_waited */
	bool		last_blocker;	/* the watched node is our only blocker */
	bool		guard_needed;	/* held, but the guard watch is not set */
	bool		self_watched;	/* explicit: a watch on our waiting node */
	int			waiter_child;	/* explicit: 0 none, 1 create sent, 2 made */
	bool		grant_written;	/* explicit: the grant's rewrite succeeded */
	int			create_rc;		/* create's result, for CHECKING */
	int			create_zoo_rc;
	int			tries;
	/* the holder's description in the node (rewrite_data) */
	int			data_version;	/* the node's data version; -1 unknown */
	uint32		shown;			/* entry's data_version the node shows */
	uint32		writing;		/* the one a write in flight carries */
	bool		rewriting;		/* a rewrite (or its read) is in flight */
	bool		rewrite_off;	/* someone else wrote the node: leave it */
	int			revoke_seen;	/* data version of the revocation acted on
								 * (a write makes it 1 or more); 0 none */
	int64		since_us;		/* deferred since (CLOCK_BOOTTIME us) */
	/* a semaphore's request (mode ZKLOCK_SEMAPHORE, 1.4) */
	int			max_holders;	/* its limit */
	int			sem_lower;		/* lower semaphore nodes at the last listing */
	int			sem_gone;		/* deletions of watched ones seen since */
	bool		sem_relist;		/* listing again behind a deletion: the
								 * watches still set stay (semaphore_decide) */
	int			fail_sqlstate;	/* failing once our node is deleted, or 0 */
	char		fail_msg[ZKLOCK_MAX_ERROR_LEN + 1];
	int64		czxid;
	char		parent[ZKLOCK_MAX_PATH + 1];	/* the resource node */
	char		prefix[32];
	char		node[ZKLOCK_MAX_NODE_NAME_LEN + 1];
	/* zk_locks walk: its own memory, NULL when none */
	struct Listing *listing;
	/*
	 * A waiting semaphore's request: the sequence numbers of the nodes it
	 * watches and has not seen go, sem_nwatched of them; room for
	 * sem_room, allocated at its first semaphore wait and kept for the
	 * entry's later requests (not cleared with the rest)
	 */
	int64	   *sem_watched;
	int			sem_nwatched;
	int			sem_room;
} WorkEntry;

/* The sweeper of expired explicit locks has its own tag index */
#define SWEEP_IDX			0xffffff

/*
 * Persistent nodes of explicit requests that were still waiting when the
 * session was lost do not vanish with it: the worker deletes them (found by
 * their request's prefix) once it is connected again.  Their own tag index.
 */
#define ORPHAN_IDX			0xfffffe

/* protocol.c: the worker's table, one WorkEntry per shared entry */
extern WorkEntry *zklock_work;
extern bool zklock_connected;

static inline ZkLockEntry *
entry(int idx)
{
	return &zklock_shared->entries[idx];
}

static inline void
node_path(char *buf, WorkEntry *w, const char *node)
{
	snprintf(buf, ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 2, "%s/%s",
			 w->parent, node);
}

/* protocol.c: a request ends in failure */
extern void zklock_protocol_fail(int idx, int sqlstate, const char *msg);

/* listing.c: zk_locks */
extern void zklock_listing_start(int idx);
extern void zklock_listing_event(int idx, ZkEvent *ev);
extern void zklock_listing_finish(int idx, bool ok, int sqlstate,
								  const char *why);
extern void zklock_listing_next(void);
extern bool zklock_listing_is_waiting(int idx);
extern void zklock_listing_disconnected(void);

/* admin.c: force-release, revocation */
extern void zklock_admin_start(int idx);
extern void zklock_admin_event(int idx, ZkEvent *ev);
extern void zklock_admin_revoked(int idx, const char *data, int version);

/* sweep.c: expired explicit locks */
extern void zklock_sweep_start(int64 session_id);
extern void zklock_sweep_event(ZkEvent *ev);
extern void zklock_sweep_abandon(void);

/* orphan.c: explicit requests' nodes lost with the session */
extern void zklock_orphan_add(const char *parent, const char *prefix);
extern void zklock_orphan_next(void);
extern void zklock_orphan_event(ZkEvent *ev);
extern void zklock_orphan_disconnected(void);

#endif							/* ZKLOCK_PROTOCOL_INT_H */
