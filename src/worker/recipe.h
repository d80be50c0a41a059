/*-------------------------------------------------------------------------
 *
 * recipe.h
 *		Layer 0 of the worker's ZooKeeper work: what every recipe shares,
 *		and the worker's entry points into the recipes.
 *
 * The worker runs several recipes on its one session: the lock
 * (protocol.c, with lock_held.c), zk_locks' listing (listing.c),
 * administrators' requests (admin.c), the sweep of expired explicit locks
 * (sweep.c), the clean-up of nodes lost with a session (orphan.c) and the
 * check of zklock.root (root.c).  Each is a file that includes this header
 * and no other recipe's; recipe.c, below them all, holds what they share:
 *
 *	- the request tag carried by every operation, (generation, op, index);
 *	- the per-request record, one WorkEntry per shared entry (zklock_work);
 *	- failing and releasing a request (zklock_recipe_fail, _released);
 *	- the dispatch of a backend's request to the recipe of its kind, and of
 *	  a reply or watch to the recipe of its tag's index: an entry's index
 *	  belongs to the recipe of the entry's request kind (a reply of an
 *	  earlier request of the entry, another generation, is dropped), a
 *	  reserved index to the recipe that reserved it.  So each recipe numbers
 *	  its operations as it likes, in its own file;
 *	- the fan-out of the session's changes (connected, disconnected, lost)
 *	  and of the timer to every recipe, in the order of recipe.c's table.
 *
 * A recipe is a ZkRecipe: its hooks, any of which may be NULL.  A new
 * recipe is a new file defining one, plus its line in recipe.c's table.
 *
 * All of it runs in the worker, in its one thread: nothing here is shared
 * with backends, except through zklock_shared (zklock.h) and its lock.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_RECIPE_H
#define ZKLOCK_RECIPE_H

#include "zklock.h"
#include "shmem.h"
#include "zk_client.h"
#include "nodedata.h"			/* zklock_node_field */

#define ZKLOCK_MAX_PATH		(ZKLOCK_MAX_ROOT_LEN + 1 + ZKLOCK_MAX_RESOURCE_LEN)

/*
 * Every operation is tagged with (generation, operation, index).  The index
 * is an entry's, or one of the reserved ones below; the operation is the
 * recipe's own (each recipe numbers its operations in its own file).
 */
#define TAG(gen, op, idx) \
	(((uint64) (gen) << 32) | ((uint64) (op) << 24) | (uint64) (idx))
#define TAG_GEN(tag)	((uint32) ((tag) >> 32))
#define TAG_OP(tag)		((int) (((tag) >> 24) & 0xff))
#define TAG_IDX(tag)	((int) ((tag) & 0xffffff))

/*
 * Reserved indexes, for the worker's own walks: not an entry's.  Each
 * belongs to the recipe whose ZkRecipe names it (idx_first, idx_count).
 */
#define SWEEP_IDX			0xffffff	/* sweep.c: expired explicit locks */
#define ORPHAN_IDX			0xfffffe	/* orphan.c: nodes lost with a session */
#define ROOT_IDX			0xfffffd	/* root.c: the check of zklock.root */

/*
 * Room for the election recipe: one index per election group, at most
 * ELECTION_IDX_COUNT groups, ELECTION_IDX_BASE .. ROOT_IDX - 1.
 */
#define ELECTION_IDX_COUNT	64
#define ELECTION_IDX_BASE	(ROOT_IDX - ELECTION_IDX_COUNT)

/*
 * lock_held.c: this session's mailbox for revocations (the lock recipe),
 * the ephemeral node <root>/ZKLOCK_MAILBOX_NODE/<session id, 16 hex
 * digits>, which admin.c writes after a revocation
 */
#define MAILBOX_IDX			(ELECTION_IDX_BASE - 1)
#define ZKLOCK_MAILBOX_NODE	"zklock.sessions"

/*
 * deadlock_publish.c: this session's node of long waits,
 * <root>/ZKLOCK_WAITS_NODE/<session id, 16 hex digits>
 */
#define WAITS_IDX			(MAILBOX_IDX - 1)
#define ZKLOCK_WAITS_NODE	"zklock.waits"

/* queue_pending.c: the walk of this instance's pending queue items */
#define QPENDING_IDX		(WAITS_IDX - 1)

/*
 * queue_wait.c: one index per queue this instance's takers wait on (its
 * shared listing and child watches), QWAIT_IDX_BASE .. QPENDING_IDX - 1
 */
#define QWAIT_IDX_COUNT		4096
#define QWAIT_IDX_BASE		(QPENDING_IDX - QWAIT_IDX_COUNT)

/* Entries' indexes are below every reserved one */
#define RECIPE_FIRST_RESERVED_IDX	QWAIT_IDX_BASE


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

/*
 * The worker's record of one request: set up by recipe.c from the entry
 * when a backend asks (generation to since_us, parent, prefix), the rest
 * the recipe's own.  Only the worker's thread touches it.
 */
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
	bool		listed_alone;	/* the last listing showed our node alone */
	bool		guard_listing;	/* held, guarded by that listing's child
								 * watch only (lock_held.c) */
	bool		revoke_posted;	/* our mailbox named our node before the
								 * grant: guard it by its own watch */
	bool		self_watched;	/* explicit: a watch on our waiting node */
	bool		queue_waited;	/* a take: marked in its entry (queue_wait.c) */
	int			waiter_child;	/* explicit: 0 none, 1 create sent, 2 made */
	bool		grant_written;	/* explicit: the grant's rewrite succeeded */
	int			create_rc;		/* create's result, for CHECKING */
	int			create_zoo_rc;
	int			tries;
	/* the holder's description in the node (lock_held.c) */
	int			data_version;	/* the node's data version; -1 unknown */
	uint32		shown;			/* entry's data_version the node shows */
	uint32		writing;		/* the one a write in flight carries */
	bool		rewriting;		/* a rewrite (or its read) is in flight */
	bool		rewrite_off;	/* someone else wrote the node: leave it */
	int			revoke_seen;	/* data version of the revocation acted on
								 * (a write makes it 1 or more); 0 none */
	int64		since_us;		/* deferred since (CLOCK_BOOTTIME us) */
	/* a semaphore's request (mode ZKLOCK_SEMAPHORE, 1.4: lock_semaphore.c) */
	int			max_holders;	/* its limit */
	int			sem_lower;		/* lower semaphore nodes at the last listing */
	int			sem_gone;		/* deletions of watched ones seen since */
	bool		sem_relist;		/* listing again behind a deletion: the
								 * watches still set stay */
	/* a force release asked of us, the holder (lock_held.c) */
	int64		release_since_us;	/* asked at (CLOCK_BOOTTIME us); 0 none */
	int			release_procno; /* the holding backend's slot and pid */
	int			release_pid;
	bool		release_logged; /* the wait for its commit was logged */
	bool		release_cancelled;	/* and it was cancelled after a bound */
	bool		release_deleting;	/* our delete of the node is in flight */
	/* a force release we ask of a holder's instance (admin.c) */
	int64		admin_until_us; /* wait for its deletion until; 0 none */
	bool		admin_rearm;	/* the watch on it is to be set again */
	bool		admin_outside;	/* deleted by us after that bound */
	int			admin_tries;	/* request writes that met another write */
	bool		asked;			/* our request was written (its reply seen) */
	bool		admin_reread;	/* read the node again once connected */
	bool		admin_deleting; /* our own delete is in flight */
	int			fail_sqlstate;	/* failing once our node is deleted, or 0 */
	char		fail_msg[ZKLOCK_MAX_ERROR_LEN + 1];
	int64		czxid;
	/* advisory: our own node of the other mode, no blocker; "" none */
	char		ignore_node[ZKLOCK_MAX_NODE_NAME_LEN + 1];
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

/*
 * A recipe: its hooks, each optional (NULL).  Those that take an entry's
 * index are called for entries of the recipe's kinds only; event for the
 * replies and watches of its entries (of their current request, not idle)
 * and of its reserved indexes.  The fan-out hooks are called in the order
 * of recipe.c's table.
 */
typedef struct ZkRecipe
{
	const char *name;
	uint32		kinds;			/* RECIPE_KIND() of the requests it serves */
	int			idx_first;		/* its reserved indexes, if idx_count > 0 */
	int			idx_count;

	/* the worker starts (its table is set up); the settings were reloaded */
	void		(*init) (void);
	void		(*reload) (void);

	/* a backend's request: start it (phase PH_IDLE; connected) */
	void		(*start) (int idx);
	/* the backend released or withdrew it (w->release is set); not called
	 * for a request still PH_DEFERRED (recipe.c releases it), and when
	 * NULL a PH_IDLE request is released */
	void		(*release) (int idx);
	/* the backend changed its granted entry */
	void		(*changed) (int idx);
	/* end a request in failure (deadlines); NULL: zklock_recipe_fail */
	void		(*fail_request) (int idx, int sqlstate, const char *msg);
	/* a reply or a watch */
	void		(*event) (ZkEvent *ev);

	/*
	 * Connected: may this recipe hold the others back until a check of its
	 * own is done?  true when it started one; it then calls
	 * zklock_recipe_gate_done().
	 */
	bool		(*gate) (int64 session_id);
	/* does it refuse new requests now, and why (root.c's verdict) */
	bool		(*refuses) (int *sqlstate, char *msg, size_t size);

	void		(*connected) (int64 session_id);
	void		(*disconnected) (void);
	/* the session is gone; zklock_recipe_loss_why() says why */
	void		(*session_lost) (void);
	/* what lost its reply, again (after zklock_recipe_retry_soon) */
	void		(*retry) (void);
	/* at every pass of the worker's loop: ms until its next deadline, or -1 */
	long		(*tick) (void);
} ZkRecipe;

#define RECIPE_KIND(k)		(1u << (k))

/* The recipes (recipe.c's table lists them) */
extern const ZkRecipe zklock_lock_recipe;	/* protocol.c */
extern const ZkRecipe zklock_listing_recipe;	/* listing.c */
extern const ZkRecipe zklock_admin_recipe;	/* admin.c */
extern const ZkRecipe zklock_sweep_recipe;	/* sweep.c */
extern const ZkRecipe zklock_orphan_recipe; /* orphan.c */
extern const ZkRecipe zklock_root_recipe;	/* root.c */
extern const ZkRecipe zklock_election_recipe;	/* election.c */
extern const ZkRecipe zklock_waits_recipe;	/* deadlock_publish.c */
extern const ZkRecipe zklock_queue_recipe;	/* queue.c */
extern const ZkRecipe zklock_queue_pending_recipe;	/* queue_pending.c */

/* recipe.c: the worker's table, one WorkEntry per shared entry */
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

/* recipe.c: for the recipes */
extern int	zklock_recipe_nentries(void);
extern int64 zklock_recipe_session_id(void);
extern void zklock_recipe_start(int idx);
extern void zklock_recipe_fail(int idx, int sqlstate, const char *msg);
extern void zklock_recipe_released(int idx);
extern bool zklock_recipe_put_rows(int idx, const char *rows, Size len);
extern bool zklock_recipe_refused(int *sqlstate, char *msg, size_t size);
extern void zklock_recipe_gate_done(void);
extern void zklock_recipe_retry_soon(void);
extern bool zklock_recipe_deadline_passed(WorkEntry *w, int64 now_us,
										  long *next_ms);
extern const char *zklock_recipe_loss_why(void);
extern void zklock_recipe_lost_lock(int pid);

/* a reply was lost or a send failed: retry once connected */
static inline void
set_recovering(WorkEntry *w)
{
	w->phase = PH_RECOVERING;
	zklock_recipe_retry_soon();
}

/* recipe.c: the worker's entry points (worker.c) */
extern void zklock_recipe_init(uint32 worker_incarnation);
extern void zklock_recipe_request(int idx);
extern void zklock_recipe_event(ZkEvent *ev);
extern void zklock_recipe_connected(int64 session_id);
extern void zklock_recipe_disconnected(void);
extern int	zklock_recipe_session_lost(const char *why, int *pids,
									   int maxpids, int *npids);
extern long zklock_recipe_tick(void);
extern void zklock_recipe_reload(void);

#endif							/* ZKLOCK_RECIPE_H */
