/*-------------------------------------------------------------------------
 *
 * zklock.h
 *		The shared state of zklock (ZooKeeper locks for PostgreSQL): limits,
 *		lock modes, the entries of the shared table and the table itself.
 *		Each module's functions are declared in its own header.
 *
 * Processes and shared state
 * --------------------------
 * One background worker per instance owns the ZooKeeper session.  Backends
 * talk to it through a table of lock entries in shared memory, one entry
 * per lock node of this instance (or per request for one).  Who owns an
 * entry when, which fields each side writes, the locking rules, the life
 * of an entry and the per-backend limits are stated in channel.c and
 * channel_limits.c (its free list), the only code that changes an entry's
 * state.  The field markers below: "lock": only those two files write it;
 * "backend": the request, copied in by channel.c at submission; "worker":
 * the worker's answer; every field is read and written under
 * ZkLockShared->lock.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_H
#define ZKLOCK_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/dsm.h"

#include "compat.h"

/* Limits on names (bytes, without the terminating zero) */
#define ZKLOCK_MAX_RESOURCE_LEN		255
#define ZKLOCK_MAX_ROOT_LEN			128
/*
 * A node name: the request's prefix (at most 30 bytes with Curator's "_c_"),
 * a semaphore's "SEMAPHORE-<n>-" (at most 15), the mode's mark (at most 15)
 * and ten digits
 */
#define ZKLOCK_MAX_NODE_NAME_LEN	95
#define ZKLOCK_MAX_DATA_LEN			511

/*
 * The line of a waiting explicit request's node data that names the
 * ZooKeeper session waiting for it: "waiter=" and 16 hex digits, filled in
 * by the worker in place.  Its node then has an ephemeral child of that
 * session, ZKLOCK_WAITER_CHILD, whose absence tells the sweep that nobody
 * waits for the node any more.
 */
#define ZKLOCK_WAITER_FIELD			"waiter="
#define ZKLOCK_WAITER_CHILD			"waiter"
#define ZKLOCK_MAX_ERROR_LEN		255
#define ZKLOCK_MAX_IDENTITY_LEN		511
#define ZKLOCK_MAX_HOSTS_LEN		255

/* Shared entries only administrative requests may use (channel_limits.c) */
#define ZKLOCK_ADMIN_RESERVE		16
/* Administrative entries a backend may have beyond its cap */
#define ZKLOCK_ADMIN_PER_BACKEND	2
/* zklock_channel_submit's answers when it has no entry to give */
#define ZKLOCK_ALLOC_TABLE_FULL		(-1)
#define ZKLOCK_ALLOC_BACKEND_FULL	(-2)
/* ... full, but some of the slot's entries are still being removed */
#define ZKLOCK_ALLOC_BACKEND_DRAINING	(-4)

typedef enum ZkLockMode
{
	ZKLOCK_EXCLUSIVE = 0,
	ZKLOCK_SHARED = 1,
	ZKLOCK_SEMAPHORE = 2		/* a counting semaphore's request (1.4): its
								 * limit is the request's max_holders */
} ZkLockMode;

/*
 * A semaphore's limit: 1 (a mutex) .. ZKLOCK_MAX_SEMAPHORE_HOLDERS.  A
 * waiter watches up to that many nodes, each an exists request and about
 * 0.5 kB of the worker's memory, and a backend waits for one request at a
 * time: the worst burst is max_connections x 64 exists (a review measured
 * 100 waiters x 1000 nodes holding up the lease past a 4 s session).
 * A node's name may say up to ZKLOCK_SEMAPHORE_NAME_MAX (any client's, or
 * a later version's): such a node is a semaphore's, of another limit.
 */
#define ZKLOCK_MAX_SEMAPHORE_HOLDERS	64
#define ZKLOCK_SEMAPHORE_NAME_MAX		1000

/* How zklock names its own lock nodes (zklock.node_naming) */
typedef enum ZkNamingStyle
{
	ZKLOCK_NAMING_HIVE = 0,		/* LOCK-EXCLUSIVE- / LOCK-SHARED- */
	ZKLOCK_NAMING_CURATOR,		/* __WRIT__ / __READ__ */
	ZKLOCK_NAMING_CURATOR_MUTEX,	/* lock- (exclusive only) */
	ZKLOCK_NAMING_KAZOO,		/* __lock__ / __rlock__ */
	ZKLOCK_NAMING_RECIPE		/* write- / read- */
} ZkNamingStyle;

typedef enum ZkEntryKind
{
	ZKR_ACQUIRE,				/* wait until granted */
	ZKR_TRY_ACQUIRE,			/* grant now or remove the node */
	ZKR_LIST,					/* list every lock node under the root */
	ZKR_FORCE_DELETE,			/* delete another holder's node */
	ZKR_REVOKE,					/* ask another holder to give a lock up */
	ZKR_ELECTION,				/* list an election group (election_query.c) */
	ZKR_WAITS,					/* read every instance's published long waits
								 * (deadlock_publish.c) */
	/* the distributed queue (1.9: worker/recipes/queue.c) */
	ZKR_QUEUE_PUT,				/* put an item now; answered as GRANTED */
	ZKR_QUEUE_TAKE,				/* hold the first free item, waiting */
	ZKR_QUEUE_TRY_TAKE,			/* the same, or NOT_GRANTED at once */
	ZKR_QUEUE_LENGTH			/* count the items: DONE, token the count */
} ZkEntryKind;

typedef enum ZkEntryState
{
	ZKE_FREE = 0,
	ZKE_REQUESTED,				/* backend asked; worker is working on it */
	ZKE_GRANTED,				/* node created and first in line */
	ZKE_NOT_GRANTED,			/* try-lock failed; node already removed */
	ZKE_FAILED,					/* error; no node left; see error text */
	ZKE_DONE,					/* a LIST request finished */
	ZKE_RELEASING,				/* backend is done; worker deletes the node */
	ZKE_LOST					/* granted, but the node is gone */
} ZkEntryState;

typedef enum ZkSessionState
{
	ZKS_STOPPED = 0,			/* no worker */
	ZKS_CONNECTING,
	ZKS_CONNECTED,
	ZKS_EXPIRED,
	ZKS_AUTH_FAILED
} ZkSessionState;

typedef struct ZkLockEntry
{
	ZkEntryState state;			/* lock */
	bool		queued;			/* lock: in the work queue */
	bool		long_wait;		/* lock: the request has waited past the
								 * deadlock timeout (deadlock.c), for the
								 * worker to publish (deadlock_publish.c) */
	bool		queue_waited;	/* lock: a queue's take had to wait (the
								 * worker; cleared at submission): what
								 * the verdict's waited says of a take */
	uint32		generation;		/* lock: bumped at each allocation */
	int			next_free;		/* lock: free-list link */
	int			count_slot;		/* lock: the backend slot it counts
								 * against, -1 for none */
	bool		awaits_verdict; /* lock: a queue take's COMMIT waits for its
								 * consume's verdict (channel_consume.c):
								 * set by the owner with the withdrawal,
								 * cleared by it when it gives up waiting;
								 * the worker's end of it is then DONE */

	/*
	 * request: copied from the backend's ZkChannelRequest at submission;
	 * later only data and data_version change, by the owning backend, on a
	 * GRANTED entry (see channel.c)
	 */
	ZkEntryKind kind;			/* backend */
	ZkLockMode	mode;			/* backend */
	bool		persistent;		/* backend: an explicit lock's node */
	int			max_holders;	/* backend: a semaphore's limit, else 0 */
	int			owner_procno;	/* backend: pgprocno, for its latch */
	int			owner_pid;		/* backend */
	char		resource[ZKLOCK_MAX_RESOURCE_LEN + 1];	/* backend */
	char		data[ZKLOCK_MAX_DATA_LEN + 1];	/* backend: node data */
	uint32		data_version;	/* backend: bumped at each change of data
								 * after the grant (the worker writes it to
								 * the node) */
	dsm_handle	list_handle;	/* backend: LIST result segment */
	Size		list_size;		/* backend: its size */
	/* backend: an advisory lock's own node of the other mode (no blocker) */
	char		ignore_node[ZKLOCK_MAX_NODE_NAME_LEN + 1];	/* backend */

	/* result, written by the worker while REQUESTED (its verdict) */
	int64		token;			/* worker: czxid of the node */
	int64		session_id;		/* worker: the session that created it */
	TimestampTz granted_at;		/* worker */
	Size		list_needed;	/* worker: LIST result size */
	int			sqlstate;		/* worker: for FAILED */
	char		node[ZKLOCK_MAX_NODE_NAME_LEN + 1]; /* worker: node name;
													 * backend for an
													 * admin request */
	char		error[ZKLOCK_MAX_ERROR_LEN + 1];	/* worker: for FAILED */

	/*
	 * A request waiting behind another node (1.6, zk_lock_waits), written
	 * by the worker while REQUESTED, each time it watches a node ahead:
	 * its own node, the node it watches, and since when it waits (0: it
	 * has not waited, which the backend reads with its verdict: granted at
	 * once or after a wait).  Cleared at submission.
	 */
	TimestampTz waiting_since;	/* worker */
	char		wait_node[ZKLOCK_MAX_NODE_NAME_LEN + 1];	/* worker */
	char		waits_behind[ZKLOCK_MAX_NODE_NAME_LEN + 1]; /* worker */
} ZkLockEntry;

typedef struct ZkLockShared
{
	LWLock	   *lock;

	/* worker and session, written by the worker */
	int			worker_pid;		/* lock; 0 when no worker runs */
	int			worker_procno;	/* lock */
	ZkSessionState session_state;	/* lock */
	int64		session_id;		/* lock */
	int			negotiated_timeout; /* lock: ms */
	TimestampTz state_since;	/* lock */
	TimestampTz disconnected_since; /* lock: 0 while connected; else when
									 * the outage (or the worker) began */
	uint64		n_connected;	/* lock: how often the state became
								 * connected (a backend's wait compares it) */
	char		last_error[ZKLOCK_MAX_ERROR_LEN + 1];	/* lock */

	/*
	 * The transport and identity of the session the worker asked for last
	 * (1.8, zk_lock_status), written by the worker under the lock each time
	 * it asks for one (secure.c): "tcp" or "tls" ("" before the first);
	 * "digest:<user>", "sasl:<user or principal>", "x509:<subject>", or ""
	 * for none; the client certificate's notAfter, 0 without one.
	 */
	char		transport[8];	/* lock */
	char		identity[ZKLOCK_MAX_IDENTITY_LEN + 1];	/* lock */
	TimestampTz tls_expires;	/* lock */

	/*
	 * The lease (lease.c), written by the worker: session lease_session is
	 * proven alive on the ZooKeeper leader until lease_end, a time on
	 * CLOCK_BOOTTIME in microseconds (the same clock in every process of
	 * this machine).  lease_session is 0 when nothing is proven.
	 */
	int64		lease_session;	/* lock */
	int64		lease_end;		/* lock */

	/*
	 * CLOCK_BOOTTIME us of the worker's last pass through its main loop
	 * (at least once a second).  Written by the worker without the lock;
	 * a stalled worker cannot make it advance, so its age is evidence.
	 */
	pg_atomic_uint64 worker_alive_at;

	/*
	 * The commit windows (lease.c): per backend slot (PGPROC number), the
	 * session whose lease a commit fence of that backend trusted, from the
	 * fence until its transaction has ended; 0 outside.  Only the backend
	 * of the slot writes it, setting and clearing it under the lock in
	 * shared mode; the worker reads it before it ends a session or leaves
	 * an election group, and under the lock in exclusive mode before it
	 * signals the slot's backend (lease.c).
	 */
	pg_atomic_uint64 *commit_session;	/* array of nslots */

	/*
	 * Per backend slot, with commit_session: the election group slots
	 * (bit g: zklock_elections_shared->groups[g]) whose leadership the
	 * leadership fence of the open window vouched for; 0 when it vouched
	 * for none (a lock fence only).  Written by the slot's backend only,
	 * under the lock in shared mode, in the locked section where the
	 * fence saw the groups lead; cleared with commit_session.  Read by
	 * the worker under the lock, when it leaves a group (election.c).
	 */
	uint32	   *commit_groups;	/* array of nslots */

	/* counters, lock */
	uint64		n_granted;
	uint64		n_not_granted;
	uint64		n_failed;
	uint64		n_waited;
	uint64		n_lost;
	uint64		n_watches;		/* lock: watches this session has set and not yet seen fire or removed (protocol.c) */
	uint64		n_notifications;	/* lock: node watch notifications the
									 * worker received (protocol.c) */

	/*
	 * Bumped (under the lock) at each entry newly marked long_wait; the
	 * worker reads it without the lock at each pass, so that its
	 * publication of long waits (deadlock_publish.c) costs one atomic read
	 * while nobody waits past the deadlock timeout.  A mark read late is
	 * read at the next pass (the marking backend sets the worker's latch).
	 */
	pg_atomic_uint64 long_wait_marks;

	/* free list and work queue, lock */
	int			free_head;
	int			nfree;			/* entries on the free list */
	int			queue_head;		/* next to dequeue */
	int			queue_count;
	int		   *queue;			/* ring of nentries entry indexes */

	/*
	 * Non-free entries per backend slot (PGPROC number), lock: see
	 * "Limits" in channel_limits.c.  nslots is fixed at startup.
	 */
	int			nslots;
	int		   *slot_entries;	/* array of nslots */
	int		   *slot_releasing;	/* array of nslots: of slot_entries, those
									 * RELEASING */

	int			nentries;		/* fixed at startup */
	ZkLockEntry entries[FLEXIBLE_ARRAY_MEMBER];
} ZkLockShared;

/*
 * The start of the error of a request that the worker failed because it
 * stopped or restarted (55000): the backend's message then hints at the
 * worker, not at ZooKeeper.
 */
#define ZKLOCK_WORKER_GONE	"the zklock worker "

#endif							/* ZKLOCK_H */
