/*-------------------------------------------------------------------------
 *
 * backend.c
 *		The backend side: what this backend holds, its scopes, and the
 *		request/wait handshake with the worker.
 *
 * Reentrancy and scope never cost a ZooKeeper round trip: a backend keeps
 * its locks in a local hash table keyed by (resource, mode) with a session
 * count and a stack of transaction-level holds (one per acquisition, tagged
 * with the subtransaction that took it), exactly as PostgreSQL counts
 * advisory locks.  One shared entry, hence one lock node, backs each local
 * lock however often it is taken.
 *
 * Ending a hold never raises an ERROR: after the commit record is written an
 * ERROR would be a PANIC.  Releases are handed to the worker (the entry goes
 * to RELEASING) and never waited for.  What may fail is checked earlier, at
 * XACT_EVENT_PRE_COMMIT (the commit fence: a lost lock fails the commit) and
 * XACT_EVENT_PRE_PREPARE (PREPARE with transaction locks is refused).
 *
 * A wait is interruptible: query cancel, statement_timeout, lock_timeout
 * (armed here, since core arms it only around its own waits) and the
 * caller's timeout end it, and the request is withdrawn so that the worker
 * removes the waiter's node.  A FATAL (pg_terminate_backend) skips PG_CATCH,
 * so an exit callback withdraws the pending request and releases every lock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "backend.h"
#include "channel.h"
#include "compat.h"
#include "zklock.h"
#include "settings.h"
#include "shmem.h"
#include "resource.h"
#include "grant_rule.h"
#include "lease.h"
#include "nodedata.h"

typedef struct LocalLockKey
{
	char		resource[ZKLOCK_MAX_RESOURCE_LEN + 1];
	ZkLockMode	mode;
} LocalLockKey;

/* A transaction-level hold: who took it, and whether for a child's sake */
typedef struct XactHold
{
	SubTransactionId subid;
	bool		implicit;
} XactHold;

typedef struct LocalLock
{
	LocalLockKey key;			/* hash key; must be first */
	int			idx;			/* shared entry */
	uint32		generation;		/* of that entry when granted */
	int64		token;
	int64		session_id;		/* the ZooKeeper session that holds it */
	bool		parents;		/* taken with its parents' SHARED locks */
	int			session_count;	/* session-level holds asked for */
	int			session_implicit;	/* session holds for a child's sake */
	int			nxact;			/* transaction-level holds */
	int			maxxact;
	XactHold   *xact_holds;		/* who took each of them */
	bool		shown_session;	/* what the node data says: scope=session */
	bool		shown_implicit; /* and implicit=true */
} LocalLock;

static HTAB *local_locks = NULL;
static bool backend_ready = false;

/* lost-lock bookkeeping: the shared n_lost when we last looked */
static uint64 seen_lost = 0;
static bool known_lost = false;

/* the request this backend is waiting for, for the exit callback */
static int	pending_idx = -1;
static uint32 pending_gen = 0;

/* the requests of a batch sent at once (take_at_once), likewise */
#define ZKLOCK_MAX_BATCH 64
static int	nbatch = 0;
static bool batching = false;
static int	batch_idx[ZKLOCK_MAX_BATCH];
static uint32 batch_gen[ZKLOCK_MAX_BATCH];

/* the extension object held by extension_guard_begin, if any */
static Oid	extension_guarded = InvalidOid;

static void xact_callback(XactEvent event, void *arg);
static void extension_guard_begin(void);
static void extension_guard_end(void);
static void subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							 SubTransactionId parentSubid, void *arg);
static void backend_exit(int code, Datum arg);
static bool is_lost(LocalLock *lock);
static void check_lost(int elevel);
static void commit_fence(void);
static void prove_held(LocalLock *lock, TimestampTz start, int bound_ms,
					   const char *what);

/*
 * Without shared_preload_libraries there is no worker and no shared memory:
 * every function but zk_lock_fence (plain SQL) says so.
 */
void
zklock_check_loaded(void)
{
	if (zklock_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock is not loaded"),
				 errhint("Add zklock to shared_preload_libraries and restart the server.")));
}

/*
 * First use in this backend: check that zklock can work at all, then set up
 * the local table and the callbacks.
 */
void
zklock_backend_init(void)
{
	HASHCTL		ctl;

	zklock_check_loaded();
	if (backend_ready)
		return;

	ctl.keysize = sizeof(LocalLockKey);
	ctl.entrysize = sizeof(LocalLock);
	ctl.hcxt = TopMemoryContext;
	local_locks = hash_create("zklock local locks", 16, &ctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	RegisterXactCallback(xact_callback, NULL);
	RegisterSubXactCallback(subxact_callback, NULL);
	before_shmem_exit(backend_exit, (Datum) 0);
	backend_ready = true;
}

static void
make_key(LocalLockKey *key, const char *resource, ZkLockMode mode)
{
	memset(key, 0, sizeof(*key));
	strlcpy(key->resource, resource, sizeof(key->resource));
	key->mode = mode;
}

/* Give an entry back (zklock_channel_withdraw).  Never raises an ERROR. */
static void
withdraw(int idx, uint32 generation)
{
	zklock_channel_withdraw(idx, generation);
}

/* Start a request of this kind, in the backend's own memory */
static void
request_init(ZkChannelRequest *req, ZkEntryKind kind)
{
	memset(req, 0, sizeof(*req));
	req->kind = kind;
}

/*
 * Hand a filled-in request to the worker (zklock_channel_submit) and make
 * it the pending one; returns its entry, and its generation in *gen.  A
 * worker that is (re)starting gets zklock.connect_timeout to appear.
 */
static int
submit(const ZkChannelRequest *req, uint32 *gen)
{
	int			idx;
	TimestampTz start = GetCurrentTimestamp();

	/* a batch wakes the worker once, when all are in */
	while ((idx = zklock_channel_submit(req, !batching, gen)) ==
		   ZKLOCK_CHANNEL_NO_WORKER)
	{
		if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(),
									   zklock_connect_timeout))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("zklock worker is not running"),
					 errhint("The server log says why; the worker is restarted after a second.")));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 50, ZKLOCK_WAIT_EVENT);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	if (idx == ZKLOCK_ALLOC_BACKEND_FULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("this backend has used all of its zklock lock entries"),
				 errdetail("A backend may hold or wait for %d lock nodes at once, its parents' locks included; nodes still being removed for an earlier backend in the same slot count too.",
						   zklock_max_locks_per_backend),
				 errhint("Release locks first, or increase zklock.max_locks_per_backend.")));
	if (idx < 0)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of zklock lock entries"),
				 errhint("You might need to increase zklock.max_locks (or, when it is 0, zklock.max_locks_per_backend).")));
	pending_idx = idx;
	pending_gen = *gen;
	return idx;
}

/*
 * A worker that is running but has not taken a request out of its queue
 * within zklock.connect_timeout, or has taken it and then not gone through
 * its main loop (which it does at least once a second) for that long, is
 * stuck (stopped, or looping): end the wait with an error rather than wait
 * for it without a bound.  Called with the entry still REQUESTED; the
 * caller's error path withdraws it.
 */
static void
check_worker_responds(int idx, TimestampTz since)
{
	bool		queued;
	int64		idle_ms;

	if (!TimestampDifferenceExceeds(since, GetCurrentTimestamp(),
									zklock_connect_timeout))
		return;
	queued = zklock_channel_queued(idx);
	idle_ms = (zklock_boottime_us() -
			   (int64) pg_atomic_read_u64(&zklock_shared->worker_alive_at)) / 1000;
	if (queued)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock worker is not responding"),
				 errdetail("The worker has not taken the request within zklock.connect_timeout (%d ms).",
						   zklock_connect_timeout),
				 errhint("Check the zklock worker's process (zk_lock_status.worker_pid) and the server log.")));
	if (idle_ms > zklock_connect_timeout + 1000)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("zklock worker is not responding"),
				 errdetail("The worker has not run for %lld ms, longer than zklock.connect_timeout (%d ms).",
						   (long long) idle_ms, zklock_connect_timeout),
				 errhint("Check the zklock worker's process (zk_lock_status.worker_pid) and the server log.")));
}

/*
 * Is the client still there?  A wait for a lock may last as long as its
 * holder keeps it, and the node of a waiter whose client is gone would keep
 * its place in the queue all that time (and be granted, to nobody).  Core
 * notices a lost client only every client_connection_check_interval, which
 * is off by default; a zklock wait looks itself, at most once a second
 * (pq_check_connection: a poll of the socket, no wait), and ends as core
 * would, with FATAL "connection to client lost": the exit callback then
 * withdraws the request and releases everything held.
 *
 * pq_check_connection() may reset our latch: called after ResetLatch(),
 * before the caller looks at its entry's state again, that loses nothing.
 */
#define ZKLOCK_CLIENT_CHECK_MS 1000

/*
 * From libpq/libpq.h, which cannot be included here: it pulls in
 * libpq-be.h and with it the GSSAPI headers, which a server built with
 * GSSAPI needs but an extension's build machine need not have.
 */
extern bool pq_check_connection(void);

static void
check_client(void)
{
	static TimestampTz last_check = 0;
	TimestampTz now;

	if (MyProcPort == NULL || whereToSendOutput != DestRemote ||
		!WaitEventSetCanReportClosed())
		return;
	now = GetCurrentTimestamp();
	if (!TimestampDifferenceExceeds(last_check, now, ZKLOCK_CLIENT_CHECK_MS))
		return;
	last_check = now;
	if (!pq_check_connection())
	{
		/* CHECK_FOR_INTERRUPTS raises core's FATAL for it */
		ClientConnectionLost = true;
		InterruptPending = true;
	}
}

/*
 * Was the session connected at the start of the current wait
 * (wait_connected), and how often had it become connected by then
 * (wait_n_connected)?  A wait that ends by its timeout while ZooKeeper
 * could not be reached at any moment since is a connection failure, not
 * a lock that someone else holds: the request never got to ZooKeeper.
 */
static bool wait_connected;
static uint64 wait_n_connected;

static void
note_wait_start(void)
{
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	wait_connected = zklock_shared->session_state == ZKS_CONNECTED;
	wait_n_connected = zklock_shared->n_connected;
	LWLockRelease(zklock_shared->lock);
}

static bool
unreachable_throughout_wait(void)
{
	bool		unreachable;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	unreachable = !wait_connected &&
		zklock_shared->session_state != ZKS_CONNECTED &&
		zklock_shared->n_connected == wait_n_connected;
	LWLockRelease(zklock_shared->lock);
	return unreachable;
}

/*
 * The error for a request that ZooKeeper's unavailability ended, as the
 * README's errors table has it: the connection failure as the message,
 * what was asked in DETAIL.
 */
static void
raise_unreachable(const char *msg, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("%s", msg),
			 errdetail("zklock was asked to %s.", what),
			 errhint("Check that ZooKeeper is running at zklock.hosts = '%s'; zk_lock_status shows the worker's view.",
					 zklock_hosts)));
}

/*
 * A wait for a lock on <what> ended by its timeout (of ms) with ZooKeeper
 * unreachable all along: 08006, whether the timeout is shorter than
 * zklock.connect_timeout or not.
 */
static void
raise_wait_unreachable(const char *what, int ms)
{
	raise_unreachable(psprintf("could not connect to ZooKeeper at \"%s\" within %d ms",
							   zklock_hosts, ms),
					  psprintf("acquire zklock lock on %s", what));
}

/*
 * One pass of a wait for the worker's answer to entry idx (still
 * REQUESTED): end it if the worker does not respond or the deadline (0:
 * none) has passed -- raising 55P03 "... on <what> within <shown_ms> ms",
 * or 08006 if ZooKeeper could not be reached at any moment of the wait --
 * else sleep until the latch is set, at most a second, and serve
 * interrupts (cancel, statement_timeout, lock_timeout, terminate, and a
 * lost client: check_client).
 */
static void
wait_a_while(int idx, TimestampTz since, TimestampTz deadline,
			 const char *what, int shown_ms)
{
	long		sleep_ms = 1000;

	check_worker_responds(idx, since);
	if (deadline != 0)
	{
		TimestampTz now = GetCurrentTimestamp();

		if (now >= deadline)
		{
			if (unreachable_throughout_wait())
				raise_wait_unreachable(what, shown_ms);
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("could not obtain zklock lock on %s within %d ms",
							what, shown_ms)));
		}
		sleep_ms = Min(sleep_ms,
					   TimestampDifferenceMilliseconds(now, deadline) + 1);
	}
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 sleep_ms, ZKLOCK_WAIT_EVENT);
	ResetLatch(MyLatch);
	check_client();

	/*
	 * lock_timeout, with ZooKeeper unreachable all along: report it as
	 * ProcessInterrupts would report the timeout, with our error instead.
	 */
	if (get_timeout_indicator(LOCK_TIMEOUT, false) &&
		unreachable_throughout_wait())
	{
		(void) get_timeout_indicator(LOCK_TIMEOUT, true);
		QueryCancelPending = false;
		raise_wait_unreachable(what, LockTimeout);
	}
	CHECK_FOR_INTERRUPTS();
}

/*
 * Wait until the worker has answered the pending request (entry idx of
 * generation gen, just submitted), or until timeout_ms (-1: no limit) has
 * passed: then withdraw it and raise 55P03 (saying shown_ms, the caller's
 * whole timeout).  An ERROR or FATAL raised while waiting withdraws it too
 * (a FATAL through pending_idx, in the exit callback).
 */
static ZkEntryState
wait_for_answer(int idx, uint32 gen, const char *what, int timeout_ms,
				int shown_ms, bool lock_timeout)
{
	TimestampTz deadline = 0;
	TimestampTz since = GetCurrentTimestamp();
	ZkEntryState state;

	extension_guard_end();		/* the request is visible to a DROP now */
	if (timeout_ms >= 0)
		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											   timeout_ms);
	note_wait_start();
	PG_TRY();
	{
		if (lock_timeout && LockTimeout > 0)
			enable_timeout_after(LOCK_TIMEOUT, LockTimeout);
		for (;;)
		{
			state = zklock_channel_state(idx, gen);
			if (state != ZKE_REQUESTED)
				break;
			wait_a_while(idx, since, deadline, what, shown_ms);
		}
		if (lock_timeout && LockTimeout > 0)
			disable_timeout(LOCK_TIMEOUT, false);
	}
	PG_CATCH();
	{
		if (lock_timeout && LockTimeout > 0)
			disable_timeout(LOCK_TIMEOUT, false);
		withdraw(idx, gen);
		pending_idx = -1;
		PG_RE_THROW();
	}
	PG_END_TRY();
	pending_idx = -1;
	return state;
}

/* Raise the worker's error for a FAILED entry, after freeing it */
static void
raise_failure(int idx, uint32 gen, const char *what)
{
	ZkChannelResult result;
	const char *msg = result.error;
	int			sqlstate;

	zklock_channel_collect(idx, gen, &result);
	sqlstate = result.sqlstate;

	/*
	 * A connection failure is the same whatever was asked: its message is
	 * the worker's ("could not connect to ZooKeeper at ... within N ms", as
	 * the README's errors table has it), and what was asked goes in DETAIL.
	 */
	if (sqlstate == ERRCODE_CONNECTION_FAILURE)
		raise_unreachable(msg, what);

	/* the worker stopped or restarted: nothing to do with ZooKeeper */
	if (sqlstate == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE &&
		strncmp(msg, ZKLOCK_WORKER_GONE, strlen(ZKLOCK_WORKER_GONE)) == 0)
		ereport(ERROR,
				(errcode(sqlstate),
				 errmsg("could not %s: %s", what, msg),
				 errhint("Unless the server is shutting down, the zklock worker starts again by itself (zk_lock_status.worker_pid); the server log says why it stopped.")));
	ereport(ERROR,
			(errcode(sqlstate ? sqlstate : ERRCODE_INTERNAL_ERROR),
			 errmsg("could not %s: %s", what, msg)));
}

/*
 * Who holds the node: key=value lines (the format, every field and its
 * version: nodedata.c), read back by zk_locks.  user= is the
 * role the caller acts as (SET ROLE, also inside a SECURITY DEFINER
 * function): zk_locks shows a user its own locks by it, and
 * zk_lock_release_explicit lets a user remove its own explicit locks by it.
 *
 * An explicit lock's node (ttl_ms > 0) also carries:
 *	ttl=<ms>			its time to live; it counts from the node's mtime of
 *						the write that granted it (ZooKeeper's own time)
 *	expires_at=<s.us>	for people: when that is, by this machine's clock
 *						(never used to expire anything)
 *	waiter=<16 hex>		while the request waits: the worker fills in its
 *						session id, and removes the line when it is granted
 * 1.0 wrote "expires=<epoch seconds>" instead, which 1.0's sweep compares
 * with its own wall clock: 1.1's nodes leave it out, so that a 1.0
 * instance (in a rolling upgrade) never removes them.
 */
static void
describe_holder(char *buf, size_t buflen, const char *scope, bool implicit,
				int64 ttl_ms)
{
	ZkNodeData f = {0};
	char	   *dbname = get_database_name(MyDatabaseId);
	char		pid[16];
	char		vxid[32];
	char		since_text[32];
	char		ttl_text[32];
	char		expires_at[32];
	char		local[ZKLOCK_MAX_DATA_LEN + 1];
	int64		since;
	char	   *utf8;
	int			len;

	/* since: Unix epoch seconds, readable whatever anyone's DateStyle */
	since = GetCurrentTimestamp() +
		(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * USECS_PER_SEC;
	snprintf(pid, sizeof(pid), "%d", MyProcPid);
	snprintf(vxid, sizeof(vxid), "%d/%u", MyProc->backendId, MyProc->lxid);
	zklock_nodedata_epoch(since_text, sizeof(since_text), since);
	f.instance = zklock_instance_name();
	f.pid = pid;
	f.database = dbname ? dbname : "";
	f.user = GetUserNameFromId(GetOuterUserId(), false);
	f.application = application_name ? application_name : "";
	f.vxid = vxid;
	f.scope = scope;
	f.implicit = implicit ? "true" : "false";
	f.since = since_text;
	if (ttl_ms > 0)
	{
		snprintf(ttl_text, sizeof(ttl_text), INT64_FORMAT, ttl_ms);
		zklock_nodedata_epoch(expires_at, sizeof(expires_at),
							  since + ttl_ms * 1000);
		f.ttl = ttl_text;
		f.expires_at = expires_at;
		f.waiter = "0000000000000000";	/* the worker fills it in */
	}
	f.query = debug_query_string ? debug_query_string : "";

	/* in the database encoding, cut on a character boundary */
	zklock_nodedata_encode(local, sizeof(local), &f);
	local[pg_mbcliplen(local, strlen(local), strlen(local))] = '\0';

	/*
	 * Node data is UTF-8, as ZooKeeper's own text; cut again if it grew.  A
	 * SQL_ASCII database's bytes have no known encoding: they go as they
	 * are, and readers replace what is not UTF-8.
	 */
	utf8 = GetDatabaseEncoding() == PG_SQL_ASCII ? local :
		(char *) pg_server_to_any(local, strlen(local), PG_UTF8);
	len = strlen(utf8);
	if (len > (int) buflen - 1)
		len = pg_encoding_mbcliplen(PG_UTF8, utf8, len, buflen - 1);
	memcpy(buf, utf8, len);
	buf[len] = '\0';
}

/*
 * One step of an acquisition: a resource, the mode to take it in, and
 * whether it is taken for a child's sake (a parent's implicit SHARED lock).
 */
typedef struct LockStep
{
	char		resource[ZKLOCK_MAX_RESOURCE_LEN + 1];
	ZkLockMode	mode;
	bool		implicit;
	bool		parents;		/* the step's own parents come with it */
	int			input;			/* position in the caller's list, or -1 */
	const char *child;			/* for an implicit step: whose parent it is */
	LocalLock  *lock;			/* filled once taken */
} LockStep;

/* The lock this backend already holds on a resource, in either mode */
static LocalLock *
held_lock(const char *resource, ZkLockMode *mode)
{
	LocalLockKey key;
	LocalLock  *lock;

	make_key(&key, resource, ZKLOCK_EXCLUSIVE);
	lock = hash_search(local_locks, &key, HASH_FIND, NULL);
	if (lock == NULL)
	{
		make_key(&key, resource, ZKLOCK_SHARED);
		lock = hash_search(local_locks, &key, HASH_FIND, NULL);
	}
	if (lock && mode)
		*mode = lock->key.mode;
	return lock;
}

/*
 * What zk_locks shows of a lock, on every instance, is in its node's data:
 * scope= and implicit= (describe_holder).  When the holds change, so does
 * what they should say: "session" while any session-level hold remains
 * (session wins over transaction), else "transaction"; implicit only while
 * every hold is for a child's sake.  Rewrite the entry's data and hand it
 * to the worker, which writes it into the node (protocol.c, rewrite_data)
 * without anyone waiting.  Only the two values change, in place, so a 1.0
 * or 1.1 instance reads the node as before.  Called also at transaction
 * end: nothing here may raise.
 */
static void
show_holds(LocalLock *lock)
{
	bool		session = lock->session_count + lock->session_implicit > 0;
	bool		implicit = lock->session_count == 0;
	ZkChannelResult held;
	char		data[ZKLOCK_MAX_DATA_LEN + 1];
	int			len = 0;

	for (int i = 0; i < lock->nxact && implicit; i++)
		if (!lock->xact_holds[i].implicit)
			implicit = false;
	if (!session && lock->nxact == 0)
		return;					/* going */
	if (session == lock->shown_session && implicit == lock->shown_implicit)
		return;

	/*
	 * The data is this backend's to change while the lock is GRANTED: read,
	 * rewrite, and hand back (zklock_channel_set_data checks the state
	 * again).
	 */
	zklock_channel_result(lock->idx, lock->generation, &held);
	if (held.state == ZKE_GRANTED)
	{
		const char *p = held.data;

		/* line by line; the query (last) is cut if the data grew too long */
		while (*p)
		{
			const char *nl = strchr(p, '\n');
			int			linelen = nl ? (int) (nl - p) + 1 : (int) strlen(p);
			char		line[64];
			const char *add = p;
			int			addlen = linelen;

			if (strncmp(p, "scope=", 6) == 0)
			{
				snprintf(line, sizeof(line), "scope=%s\n",
						 session ? "session" : "transaction");
				add = line;
				addlen = strlen(line);
			}
			else if (strncmp(p, "implicit=", 9) == 0)
			{
				snprintf(line, sizeof(line), "implicit=%s\n",
						 implicit ? "true" : "false");
				add = line;
				addlen = strlen(line);
			}
			if (len + addlen > ZKLOCK_MAX_DATA_LEN)
			{
				addlen = pg_encoding_mbcliplen(PG_UTF8, add, addlen,
											   ZKLOCK_MAX_DATA_LEN - len);
				memcpy(data + len, add, addlen);
				len += addlen;
				break;
			}
			memcpy(data + len, add, addlen);
			len += addlen;
			p += linelen;
		}
		data[len] = '\0';
		zklock_channel_set_data(lock->idx, lock->generation, data);
	}
	lock->shown_session = session;
	lock->shown_implicit = implicit;
}

/* Record one hold of a lock in a scope */
static void
add_hold(LocalLock *lock, bool session, bool implicit)
{
	if (session)
	{
		if (implicit)
			lock->session_implicit++;
		else
			lock->session_count++;
		show_holds(lock);
		return;
	}
	if (lock->nxact >= lock->maxxact)
	{
		int			newmax = Max(4, lock->maxxact * 2);

		lock->xact_holds = lock->xact_holds ?
			repalloc(lock->xact_holds, newmax * sizeof(XactHold)) :
			MemoryContextAlloc(TopMemoryContext, newmax * sizeof(XactHold));
		lock->maxxact = newmax;
	}
	lock->xact_holds[lock->nxact].subid = GetCurrentSubTransactionId();
	lock->xact_holds[lock->nxact].implicit = implicit;
	lock->nxact++;
	show_holds(lock);
}

static void forget(LocalLock *lock);
static void release_session_hold(LocalLock *lock);

/* Undo one hold (the last one of its kind); the lock goes at zero */
static void
drop_hold(LocalLock *lock, bool session, bool implicit)
{
	if (session)
	{
		if (implicit && lock->session_implicit > 0)
			lock->session_implicit--;
		else if (!implicit && lock->session_count > 0)
			lock->session_count--;
	}
	else if (lock->nxact > 0)
		lock->nxact--;
	if (lock->session_count == 0 && lock->session_implicit == 0 &&
		lock->nxact == 0)
		forget(lock);
	else
		show_holds(lock);
}

/* Enter a lock just granted into the local table, with no holds yet */
static LocalLock *
enter_lock(LockStep *step, int idx, uint32 generation)
{
	LocalLockKey key;
	LocalLock  *lock;
	bool		found;
	ZkChannelResult granted;

	zklock_channel_result(idx, generation, &granted);
	make_key(&key, step->resource, step->mode);
	lock = hash_search(local_locks, &key, HASH_ENTER, &found);
	Assert(!found);
	lock->idx = idx;
	lock->generation = generation;
	lock->token = granted.token;
	lock->session_id = granted.session_id;
	lock->parents = !step->implicit && step->parents;
	lock->session_count = 0;
	lock->session_implicit = 0;
	lock->nxact = 0;
	lock->maxxact = 0;
	lock->xact_holds = NULL;
	/* what describe_holder wrote into the node */
	lock->shown_session =
		strstr(granted.data, "\nscope=session\n") != NULL;
	lock->shown_implicit =
		strstr(granted.data, "\nimplicit=true\n") != NULL;
	return lock;
}

/*
 * What to do about a lock this backend holds that is in the way.  A
 * parent's implicit holds (for a child's sake) cannot be released by
 * themselves: name a child lock whose release gives them back.  Only
 * session-level holds are released by zk_lock_release; a transaction's
 * holds go at its end.
 */
static char *
held_hint(LocalLock *lock)
{
	const char *resource = lock->key.resource;
	const char *mode = zklock_mode_name(lock->key.mode);
	size_t		len = strlen(resource);
	HASH_SEQ_STATUS seq;
	LocalLock  *c;
	LocalLock  *child = NULL;

	/* a lock below it, taken with its parents; one held for the session first */
	hash_seq_init(&seq, local_locks);
	while ((c = hash_seq_search(&seq)) != NULL)
	{
		if (c == lock || !c->parents ||
			strncmp(c->key.resource, resource, len) != 0 ||
			c->key.resource[len] != '/')
			continue;
		if (child == NULL || (child->session_count == 0 && c->session_count > 0))
			child = c;
	}
	if (child == NULL)
		return lock->session_count > 0 ?
			psprintf("Release the %s lock first.", mode) :
			psprintf("The %s lock is held until the transaction ends.", mode);
	if (child->session_count == 0)
		return psprintf("The %s lock on \"%s\" is held for the locks on its children, such as \"%s\", until the transaction ends.",
						mode, resource, child->key.resource);
	if (lock->session_count > 0)
		return psprintf("Release the %s lock and the locks on its children, such as \"%s\", first.",
						mode, child->key.resource);
	return psprintf("The %s lock on \"%s\" is held for the locks on its children: release those first, such as \"%s\".",
					mode, resource, child->key.resource);
}

/*
 * Take one step: stack onto a lock this backend holds, or ask the worker
 * for a node and wait.  Returns the local lock, or NULL when a try-lock
 * was not granted.
 */
static LocalLock *
take_step(LockStep *step, bool session, bool wait, TimestampTz deadline,
		  int timeout_total)
{
	LocalLock  *lock;
	ZkLockMode	held_mode;
	int			idx;
	uint32		gen;
	ZkChannelRequest req;
	ZkEntryState state;
	char		data[ZKLOCK_MAX_DATA_LEN + 1];
	int			timeout_ms = -1;
	char	   *what;

	lock = held_lock(step->resource, &held_mode);
	if (lock)
	{
		/* a parent's SHARED lock is covered by an EXCLUSIVE one we hold */
		if (held_mode != step->mode &&
			!(step->implicit && held_mode == ZKLOCK_EXCLUSIVE))
		{
			char	   *hint = held_hint(lock);

			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("zklock resource \"%s\" is already held in %s mode by this session",
							step->resource, zklock_mode_name(held_mode)),
					 errdetail("Taking it in %s mode too would wait for this session itself.",
							   zklock_mode_name(step->mode)),
					 errhint("%s", hint)));
		}
		/*
		 * A session-level release takes the parents' holds along when the
		 * lock was taken with them: its session holds must agree on that.
		 */
		if (session && !step->implicit)
		{
			if (lock->session_count > 0 && lock->parents != step->parents)
				ereport(ERROR,
						(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
						 errmsg("zklock resource \"%s\" is already held %s its parents' locks by this session",
								step->resource, lock->parents ? "with" : "without"),
						 errhint("Take it the same way, or release it first.")));
			lock->parents = step->parents;
		}
		/* reported as held again: it must be held */
		prove_held(lock, GetCurrentTimestamp(),
				   zklock_session_timeout + zklock_connect_timeout,
				   "it is not taken again");
		add_hold(lock, session, step->implicit);
		return lock;
	}

	if (step->mode == ZKLOCK_SHARED &&
		zklock_naming_style(step->resource) == ZKLOCK_NAMING_CURATOR_MUTEX)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("zklock resource \"%s\" cannot be locked in shared mode",
						step->resource),
				 errdetail("zklock.node_naming names its nodes as Curator's InterProcessMutex does, which has no shared mode.")));

	describe_holder(data, sizeof(data), session ? "session" : "transaction",
					step->implicit, 0);

	/* a waiting request with no time left is a try that raises */
	if (wait && deadline != 0)
	{
		TimestampTz now = GetCurrentTimestamp();

		timeout_ms = now >= deadline ? 0 :
			(int) Min(TimestampDifferenceMilliseconds(now, deadline), INT_MAX);
	}

	/* ask the worker */
	request_init(&req, (wait && timeout_ms != 0) ? ZKR_ACQUIRE : ZKR_TRY_ACQUIRE);
	req.mode = step->mode;
	strlcpy(req.resource, step->resource, sizeof(req.resource));
	strlcpy(req.data, data, sizeof(req.data));
	idx = submit(&req, &gen);

	what = step->child ?
		psprintf("resource \"%s\" (a parent of \"%s\")", step->resource, step->child) :
		psprintf("resource \"%s\"", step->resource);
	/* a try answers at once; only a real wait gets the deadline */
	state = wait_for_answer(idx, gen, what, timeout_ms == 0 ? -1 : timeout_ms,
							timeout_total, wait && timeout_ms != 0);

	if (state == ZKE_NOT_GRANTED)
	{
		withdraw(idx, gen);
		if (wait)				/* no time was left to wait */
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("could not obtain zklock lock on %s within %d ms",
							what, timeout_total)));
		return NULL;
	}
	if (state == ZKE_FAILED)
		raise_failure(idx, gen, psprintf("acquire zklock lock on %s", what));

	lock = enter_lock(step, idx, gen);
	add_hold(lock, session, step->implicit);
	return lock;
}

/*
 * Locks take_at_once made that no step took a hold of: give them back.
 * (Looked up by key: a lock whose holds were dropped is gone already.)
 */
static void
forget_unheld(LocalLockKey *made, int nmade)
{
	for (int i = 0; i < nmade; i++)
	{
		LocalLock  *lock = hash_search(local_locks, &made[i], HASH_FIND, NULL);

		if (lock && lock->session_count == 0 && lock->session_implicit == 0 &&
			lock->nxact == 0)
			forget(lock);
	}
}

/*
 * The fast path for several steps (a resource with its parents, a lock
 * set): ask for every node this backend does not hold yet at once, as
 * try-locks, so that the worker pipelines them and an uncontended request
 * costs one round trip, not one per step.  If all are granted, the local
 * locks are entered with no holds yet (take_steps adds them) and made[]
 * gets their keys; otherwise every node is given back and the caller takes the
 * steps one by one, waiting in order -- queueing for several nodes at once
 * could deadlock, trying them cannot.  Returns the number of locks made (0
 * when the fast path does not apply), or -1 when some step could not be
 * granted now.
 */
static int
take_at_once(LockStep *steps, int nsteps, LocalLockKey *made, bool session,
			 bool wait, TimestampTz deadline, int timeout_total)
{
	int			n = 0;
	int			step_of[ZKLOCK_MAX_BATCH];
	bool		all_granted = true;
	int			failed = -1;
	int			nmade = 0;
	bool		connected;
	TimestampTz since;
	char	   *what;

	/*
	 * A zero timeout makes every step a try (see take_step): the batch,
	 * tries already, waits for its answers as a try does, without the
	 * deadline that has passed by now.
	 */
	if (timeout_total == 0)
	{
		deadline = 0;
		wait = false;			/* for lock_timeout: not a real wait */
	}

	for (int i = 0; i < nsteps; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (held_lock(steps[i].resource, NULL))
			continue;

		/*
		 * The steps of one resource are adjacent (a set's are sorted; one
		 * resource's parents are all different), so a resource asked for
		 * twice shows right after itself.
		 */
		if (i > 0 && strcmp(steps[i - 1].resource, steps[i].resource) == 0)
			continue;			/* stacks onto the earlier step's lock */
		if (steps[i].mode == ZKLOCK_SHARED &&
			zklock_naming_style(steps[i].resource) == ZKLOCK_NAMING_CURATOR_MUTEX)
			return 0;			/* take_step says why */
		if (n == ZKLOCK_MAX_BATCH)
			return 0;
		step_of[n++] = i;
	}
	if (n < 2)
		return 0;				/* nothing to gain */

	/*
	 * Only while connected: then every answer comes within a round trip.
	 * Otherwise the requests would wait for the connection without the
	 * caller's timeout; the step-by-step path applies it.
	 */
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	connected = zklock_shared->session_state == ZKS_CONNECTED;
	LWLockRelease(zklock_shared->lock);
	if (!connected)
		return 0;

	/* a batch cut short by an error while entering its locks */
	for (int k = 0; k < nbatch; k++)
		withdraw(batch_idx[k], batch_gen[k]);
	nbatch = 0;
	PG_TRY();
	{
		batching = true;
		for (int k = 0; k < n; k++)
		{
			LockStep   *step = &steps[step_of[k]];
			char		data[ZKLOCK_MAX_DATA_LEN + 1];
			ZkChannelRequest req;
			uint32		gen;
			int			idx;

			describe_holder(data, sizeof(data),
							session ? "session" : "transaction",
							step->implicit, 0);
			request_init(&req, ZKR_TRY_ACQUIRE);
			req.mode = step->mode;
			strlcpy(req.resource, step->resource, sizeof(req.resource));
			strlcpy(req.data, data, sizeof(req.data));
			idx = submit(&req, &gen);
			batch_idx[nbatch] = idx;
			batch_gen[nbatch] = gen;
			nbatch++;
			pending_idx = -1;
		}
		batching = false;
		zklock_channel_wake_worker();
		extension_guard_end();

		/*
		 * Connected, every answer comes within a round trip; but the
		 * connection may go meanwhile, so the caller's timeout and
		 * lock_timeout apply here as they do to a wait.
		 */
		since = GetCurrentTimestamp();
		note_wait_start();
		what = psprintf("resource \"%s\"", steps[nsteps - 1].resource);
		if (wait && LockTimeout > 0)
			enable_timeout_after(LOCK_TIMEOUT, LockTimeout);
		for (;;)
		{
			int			waiting = -1;

			for (int k = 0; k < n; k++)
				if (zklock_channel_state(batch_idx[k], batch_gen[k]) ==
					ZKE_REQUESTED)
					waiting = k;
			if (waiting < 0)
				break;
			wait_a_while(batch_idx[waiting], since, deadline, what,
						 timeout_total);
		}
		if (wait && LockTimeout > 0)
			disable_timeout(LOCK_TIMEOUT, false);
	}
	PG_CATCH();
	{
		if (wait && LockTimeout > 0)
			disable_timeout(LOCK_TIMEOUT, false);
		batching = false;
		for (int k = 0; k < nbatch; k++)
			withdraw(batch_idx[k], batch_gen[k]);
		nbatch = 0;
		PG_RE_THROW();
	}
	PG_END_TRY();

	for (int k = 0; k < n; k++)
	{
		ZkEntryState state = zklock_channel_state(batch_idx[k], batch_gen[k]);

		if (state != ZKE_GRANTED)
			all_granted = false;
		if (state == ZKE_FAILED && failed < 0)
			failed = k;
	}

	if (!all_granted)
	{
		/* give every node back; a failure (no connection, ...) is raised */
		for (int k = 0; k < n; k++)
			if (k != failed)
				withdraw(batch_idx[k], batch_gen[k]);
		nbatch = 0;
		if (failed >= 0)
			raise_failure(batch_idx[failed], batch_gen[failed],
						  psprintf("acquire zklock lock on resource \"%s\"",
								   steps[step_of[failed]].resource));
		return -1;
	}

	for (int k = 0; k < n; k++)
	{
		made[nmade++] = enter_lock(&steps[step_of[k]], batch_idx[k],
								   batch_gen[k])->key;
	}
	nbatch = 0;
	return nmade;
}

/*
 * Take the steps in order, all or none: if one is not granted (try) or
 * raises (timeout, cancel, error), every hold taken so far by this call is
 * undone.  Returns false for a try that was not granted.
 */
static bool
take_steps(LockStep *steps, int nsteps, bool session, bool wait,
		   int timeout_ms)
{
	TimestampTz deadline = 0;
	volatile int ntaken = 0;
	bool		granted = true;
	LocalLockKey made[ZKLOCK_MAX_BATCH];
	volatile int nmade;

	if (timeout_ms >= 0)
		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											   timeout_ms);
	nmade = take_at_once(steps, nsteps, made, session, wait, deadline,
						 timeout_ms);
	if (nmade < 0)
	{
		if (!wait)
			return false;		/* a try: something is taken now */
		nmade = 0;				/* wait for each in order */
		/* the batch was given back: nothing a DROP would count now */
		if (session)
			extension_guard_begin();
	}

	PG_TRY();
	{
		for (int i = 0; i < nsteps; i++)
		{
			CHECK_FOR_INTERRUPTS();
			steps[i].lock = take_step(&steps[i], session, wait, deadline,
									  timeout_ms);
			if (steps[i].lock == NULL)
			{
				granted = false;
				break;
			}
			ntaken = i + 1;
		}
	}
	PG_CATCH();
	{
		for (int i = ntaken - 1; i >= 0; i--)
			drop_hold(steps[i].lock, session, steps[i].implicit);
		forget_unheld(made, nmade);
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (!granted)
		for (int i = ntaken - 1; i >= 0; i--)
			drop_hold(steps[i].lock, session, steps[i].implicit);
	forget_unheld(made, nmade);
	return granted;
}

/*
 * Append the steps for one requested resource: its parents' SHARED locks
 * first (top down), when asked, then the resource itself.
 */
static int
add_steps(LockStep *steps, int n, const char *resource, ZkLockMode mode,
		  bool parents, int input)
{
	if (parents)
	{
		for (const char *p = resource; (p = strchr(p, '/')) != NULL; p++)
		{
			memcpy(steps[n].resource, resource, p - resource);
			steps[n].resource[p - resource] = '\0';
			/* Curator's mutex cannot express a SHARED parent lock */
			if (zklock_naming_style(steps[n].resource) ==
				ZKLOCK_NAMING_CURATOR_MUTEX)
				continue;
			steps[n].mode = ZKLOCK_SHARED;
			steps[n].implicit = true;
			steps[n].parents = false;
			steps[n].input = -1;
			steps[n].child = resource;
			n++;
		}
	}
	strlcpy(steps[n].resource, resource, sizeof(steps[n].resource));
	steps[n].mode = mode;
	steps[n].implicit = false;
	steps[n].parents = parents && strchr(resource, '/') != NULL;
	steps[n].input = input;
	steps[n].child = NULL;
	return n + 1;
}

/*
 * A session lock outlives the statement that takes it, and only the
 * extension's functions release it.  DROP EXTENSION is refused while this
 * instance's backends hold or wait for locks in the database (zklock.c):
 * it takes the extension object in AccessExclusiveLock, then counts the
 * shared entries.  A session-level acquire takes that object in
 * AccessShareLock before its first request exists and keeps it only until
 * that request is visible to such a count (extension_guard_end, once
 * submitted): a DROP then either counts it, or came first, and the acquire
 * fails before any node is made.  A DROP in progress is not waited for
 * (its transaction may stay open for as long as it likes): 55006 at once.
 * The object is not kept during the wait, so a DROP never waits for a
 * waiter; when the pipelined try of several nodes (take_at_once) gives them
 * back to wait for them one by one, the object is taken again until the
 * first of those requests is visible.
 */
static void
extension_gone_error(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("extension \"zklock\" does not exist in this database"),
			 errdetail("It was dropped while this session lock was asked for; no lock was taken.")));
}

static void
extension_guard_begin(void)
{
	Oid			ext;

	if (OidIsValid(extension_guarded))
		return;					/* held already */
	ext = get_extension_oid("zklock", true);
	if (!OidIsValid(ext))
		extension_gone_error();
	if (!ConditionalLockDatabaseObject(ExtensionRelationId, ext, 0,
									   AccessShareLock))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("extension \"zklock\" is being dropped or altered"),
				 errdetail("Another transaction holds or waits for the extension in ACCESS EXCLUSIVE mode (DROP EXTENSION, or ALTER EXTENSION); a session lock taken now might not be releasable once it commits. No lock was taken."),
				 errhint("Try again once that transaction has ended.")));
	/* dropped, and committed, between the look-up and the lock? */
	if (get_extension_oid("zklock", true) != ext)
	{
		UnlockDatabaseObject(ExtensionRelationId, ext, 0, AccessShareLock);
		extension_gone_error();
	}
	extension_guarded = ext;
}

/* Our request is visible to a DROP's count now, or was never needed */
static void
extension_guard_end(void)
{
	if (!OidIsValid(extension_guarded))
		return;
	UnlockDatabaseObject(ExtensionRelationId, extension_guarded, 0,
						 AccessShareLock);
	extension_guarded = InvalidOid;
}

/* How many '/' a resource has: its number of parents */
static int
depth(const char *resource)
{
	int			n = 0;

	for (const char *p = resource; *p; p++)
		n += (*p == '/');
	return n;
}

/*
 * Take a lock, with its parents' SHARED locks when parents is true (Hive's
 * semantics: "db/table/part" in any mode takes "db" and "db/table" SHARED).
 * Returns the fencing token; *acquired is false only when wait is false and
 * the lock is held elsewhere (try-lock).
 */
int64
zklock_lock(const char *resource, ZkLockMode mode, bool session, bool wait,
			int timeout_ms, bool parents, bool *acquired)
{
	LockStep   *steps;
	int			nsteps;

	zklock_backend_init();
	zklock_check_resource(resource);
	zklock_check_allowed(resource);
	*acquired = false;
	check_lost(ERROR);

	steps = palloc0(sizeof(LockStep) * (depth(resource) + 1));
	nsteps = add_steps(steps, 0, resource, mode, parents, 0);
	if (session)
		extension_guard_begin();
	*acquired = take_steps(steps, nsteps, session, wait, timeout_ms);
	extension_guard_end();
	if (!*acquired)
		return 0;
	return steps[nsteps - 1].lock->token;
}

static int
step_cmp(const void *a, const void *b)
{
	const LockStep *x = a;
	const LockStep *y = b;
	int			c = strcmp(x->resource, y->resource);

	if (c != 0)
		return c;
	/* of one resource, the explicit step first: it absorbs the others */
	return (int) x->implicit - (int) y->implicit;
}

/* Order a set's input positions by resource name, then by position */
static int
input_cmp(const void *a, const void *b, void *arg)
{
	char	  **resources = (char **) arg;
	int			x = *(const int *) a;
	int			y = *(const int *) b;
	int			c = strcmp(resources[x], resources[y]);

	if (c != 0)
		return c;
	return (x > y) - (x < y);
}

/* bsearch over a set's distinct resources (sorted by name) */
typedef struct NameKey
{
	const char *name;
	char	  **resources;
} NameKey;

static int
name_key_cmp(const void *key, const void *member)
{
	const NameKey *k = key;

	return strcmp(k->name, k->resources[*(const int *) member]);
}

/*
 * The new entries a lock set needs: its distinct resources (order[0 ..
 * ndistinct), sorted by name) and their parents, each once, less those this
 * backend holds already; Curator-mutex parents are not taken (add_steps).
 * A parent "a/b" is counted at the first resource below it: the names
 * beginning with "a/b/" are adjacent in sorted order, so that is the one
 * whose predecessor does not begin with "a/b/".  Linear in the names'
 * length, with a binary search per parent, and no allocation: the set may
 * be huge.
 */
static int
set_entries_needed(char **resources, int *order, int ndistinct)
{
	int			nneeded = 0;
	const char *prev = NULL;

	for (int d = 0; d < ndistinct; d++)
	{
		const char *r = resources[order[d]];
		size_t		common = 0;

		CHECK_FOR_INTERRUPTS();
		if (!held_lock(r, NULL))
			nneeded++;
		if (prev)
			while (prev[common] && prev[common] == r[common])
				common++;
		/* a parent shared with prev ends inside the common part: skipped */
		for (const char *p = r + common; (p = strchr(p, '/')) != NULL; p++)
		{
			char		parent[ZKLOCK_MAX_RESOURCE_LEN + 1];
			NameKey		key;

			memcpy(parent, r, p - r);
			parent[p - r] = '\0';
			key.name = parent;
			key.resources = resources;
			if (bsearch(&key, order, ndistinct, sizeof(int), name_key_cmp))
				continue;		/* named in the set: counted as such */
			if (zklock_naming_style(parent) == ZKLOCK_NAMING_CURATOR_MUTEX)
				continue;		/* not taken */
			if (!held_lock(parent, NULL))
				nneeded++;
		}
		prev = r;
	}
	return nneeded;
}

/*
 * Take a set of locks, all or none, under one timeout.  The steps (with the
 * parents' locks) are put in one canonical order, sorted by resource, so
 * two sets can never deadlock each other; a resource asked for twice, or
 * both directly and as a parent, is taken once in the strongest mode.
 * tokens[i] gets the token of resources[i].  Returns false for a try that
 * was not granted (and then nothing is held).
 *
 * The set is the user's input, of any size: every pass over it is
 * O(n log n) at most (sorted, never compared pair by pair) and serves
 * interrupts.
 */
bool
zklock_lock_set(int n, char **resources, ZkLockMode *modes, bool session,
				bool wait, int timeout_ms, int64 *tokens)
{
	LockStep   *steps;
	int		   *order;
	int		   *first;
	int			nsteps = 0;
	Size		total = 0;
	int			kept = 0;
	int			ndistinct = 0;
	int			nneeded = 0;
	bool		granted;

	zklock_backend_init();
	check_lost(ERROR);
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		zklock_check_resource(resources[i]);
		zklock_check_allowed(resources[i]);
	}

	/*
	 * A resource listed twice is one lock, in the strongest mode asked (and
	 * one set of parent holds, which its release gives back): sort the
	 * positions by name; first[i] is the first position of resources[i].
	 */
	order = palloc(sizeof(int) * n);
	first = palloc(sizeof(int) * n);
	for (int i = 0; i < n; i++)
		order[i] = i;
	qsort_arg(order, n, sizeof(int), input_cmp, resources);
	for (int k = 0; k < n;)
	{
		int			rep = order[k];
		int			j = k;

		CHECK_FOR_INTERRUPTS();
		while (j < n && strcmp(resources[order[j]], resources[rep]) == 0)
		{
			first[order[j]] = rep;
			if (modes[order[j]] == ZKLOCK_EXCLUSIVE)
				modes[rep] = ZKLOCK_EXCLUSIVE;
			j++;
		}
		order[ndistinct++] = rep;	/* distinct resources, reusing the array */
		total += depth(resources[rep]) + 1;
		k = j;
	}

	/*
	 * Each resource not held yet needs a shared entry, and so does each of
	 * their parents not held yet, counted once: a set that cannot fit into
	 * this backend's share fails now, before any of it is taken.
	 */
	nneeded = set_entries_needed(resources, order, ndistinct);
	if (nneeded > zklock_max_locks_per_backend)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("a zklock lock set needing %d new lock entries exceeds this backend's share",
						nneeded),
				 errdetail("A backend may hold or wait for %d lock nodes at once, its parents' locks included.",
						   zklock_max_locks_per_backend),
				 errhint("Take fewer locks at once, or increase zklock.max_locks_per_backend.")));

	steps = MemoryContextAllocExtended(CurrentMemoryContext,
									   mul_size(sizeof(LockStep), Max(total, 1)),
									   MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	for (int d = 0; d < ndistinct; d++)
	{
		int			rep = order[d];

		CHECK_FOR_INTERRUPTS();
		nsteps = add_steps(steps, nsteps, resources[rep], modes[rep], true,
						   rep);
	}
	qsort(steps, nsteps, sizeof(LockStep), step_cmp);

	/*
	 * Of one resource, the explicit step (one per resource now) sorts
	 * first.  A parent's implicit steps stay: each stacks one implicit hold
	 * onto the lock taken before it, so that releasing one member, or the
	 * parent itself, leaves the other members' parent locks in place.
	 */
	for (int i = 0; i < nsteps; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (kept > 0 && !steps[i].implicit && !steps[kept - 1].implicit &&
			strcmp(steps[kept - 1].resource, steps[i].resource) == 0)
		{
			if (steps[i].mode == ZKLOCK_EXCLUSIVE)
				steps[kept - 1].mode = ZKLOCK_EXCLUSIVE;
			continue;
		}
		steps[kept++] = steps[i];
	}
	nsteps = kept;

	if (session)
		extension_guard_begin();
	granted = take_steps(steps, nsteps, session, wait, timeout_ms);
	extension_guard_end();
	if (!granted)
		return false;
	for (int i = 0; i < nsteps; i++)
		if (steps[i].input >= 0)
			tokens[steps[i].input] = steps[i].lock->token;
	/* a resource listed twice shares its token */
	for (int i = 0; i < n; i++)
		tokens[i] = tokens[first[i]];
	return true;
}

/* Drop a local lock whose counts reached zero, and its node */
static void
forget(LocalLock *lock)
{
	withdraw(lock->idx, lock->generation);
	if (lock->xact_holds)
		pfree(lock->xact_holds);
	hash_search(local_locks, &lock->key, HASH_REMOVE, NULL);
}

static bool
is_lost(LocalLock *lock)
{
	return zklock_channel_state(lock->idx, lock->generation) == ZKE_LOST;
}

/*
 * Tell the user about locks of this backend that were lost: an ERROR on
 * the next acquire, a WARNING on a release.  Cheap when nothing was lost:
 * one look at the shared counter.
 */
static void
check_lost(int elevel)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;
	LocalLock  *first = NULL;
	int			n = 0;
	uint64		nlost;

	if (hash_get_num_entries(local_locks) == 0)
		return;
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	nlost = zklock_shared->n_lost;
	LWLockRelease(zklock_shared->lock);
	if (nlost == seen_lost && !known_lost)
		return;
	seen_lost = nlost;

	hash_seq_init(&seq, local_locks);
	while ((lock = hash_seq_search(&seq)) != NULL)
	{
		if (is_lost(lock))
		{
			/* name the most specific one: a child, not its parent */
			if (first == NULL ||
				strlen(lock->key.resource) > strlen(first->key.resource))
				first = lock;
			n++;
		}
	}
	known_lost = (n > 0);
	if (first)
		ereport(elevel,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("zklock lock on resource \"%s\" (%s) was lost",
						first->key.resource, zklock_mode_name(first->key.mode)),
				 errdetail_plural("%d lock of this session was lost: the ZooKeeper session expired, the worker restarted, or the node was deleted.",
								  "%d locks of this session were lost: the ZooKeeper session expired, the worker restarted, or the node was deleted.",
								  n, n),
				 errhint("Release lost session locks with zk_lock_release() or zk_lock_release_all(); a transaction holding a lost lock cannot commit.")));
}

/*
 * Is a lock held by a session that the lease proves alive for at least
 * zklock.lease_margin more (lease.c)?  A state flag written by a worker
 * that may be stalled, or a follower cut from its leader, proves nothing.
 * Raises 55P03 when the lock is lost; when the lease does not cover it,
 * waits for the worker to renew the lease (it does so by itself when the
 * lease runs short) until bound_ms after start, then raises 55P03.
 */
static void
prove_held(LocalLock *lock, TimestampTz start, int bound_ms, const char *what)
{
	int64		left;

	for (;;)
	{
		if (is_lost(lock))
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("zklock lock on resource \"%s\" was lost; %s",
							lock->key.resource, what),
					 errdetail("Another holder may have been granted the lock since.")));
		if (zklock_lease_covers(lock->session_id, &left))
			return;
		if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(), bound_ms))
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("zklock lock on resource \"%s\" is not proven held; %s",
							lock->key.resource, what),
					 errdetail("For %d ms, no answer of the ZooKeeper leader has proven that this instance's session is alive for zklock.lease_margin (%d ms) more.",
							   bound_ms, zklock_lease_margin),
					 errhint("Another holder may have been granted the lock. zk_lock_status shows the worker's session and lease.")));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 50, ZKLOCK_WAIT_EVENT);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * The commit fence, run before the commit record is written: every lock
 * that guards the transaction must be proven held (prove_held), within one
 * bound of the session timeout plus zklock.connect_timeout.  A lost lock
 * fails at once, naming the most specific one (a child, not its parent).
 *
 * The locks that guard a transaction are its transaction-level locks and,
 * when it wrote anything (has an xid), the backend's session-level locks
 * too: an ETL step run under a session lock does not commit its writes once
 * that lock is lost.  A read-only transaction is not held up by a lost
 * session lock (zk_lock_release says so instead).
 */
static void
commit_fence(void)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;
	LocalLock  *lost = NULL;
	bool		wrote = TransactionIdIsValid(GetTopTransactionIdIfAny());
	TimestampTz start = GetCurrentTimestamp();
	int			bound_ms = zklock_session_timeout + zklock_connect_timeout;

#define GUARDS(l) ((l)->nxact > 0 || \
				   (wrote && (l)->session_count + (l)->session_implicit > 0))

	hash_seq_init(&seq, local_locks);
	while ((lock = hash_seq_search(&seq)) != NULL)
	{
		if (GUARDS(lock) && is_lost(lock) &&
			(lost == NULL ||
			 strlen(lock->key.resource) > strlen(lost->key.resource)))
			lost = lock;
	}
	if (lost)
		prove_held(lost, start, bound_ms, "the transaction cannot commit");

	hash_seq_init(&seq, local_locks);
	while ((lock = hash_seq_search(&seq)) != NULL)
	{
		if (GUARDS(lock))
			prove_held(lock, start, bound_ms, "the transaction cannot commit");
	}
#undef GUARDS
}

/* Release one session hold of a lock, and its parents' implicit holds */
static void
release_session_hold(LocalLock *lock)
{
	char		resource[ZKLOCK_MAX_RESOURCE_LEN + 1];
	bool		parents = lock->parents;

	strlcpy(resource, lock->key.resource, sizeof(resource));
	drop_hold(lock, true, false);	/* may free lock */
	if (!parents)
		return;
	for (char *p = resource + strlen(resource); p > resource; p--)
	{
		if (*p == '/')
		{
			LocalLock  *parent;

			*p = '\0';
			parent = held_lock(resource, NULL);
			if (parent)
				drop_hold(parent, true, true);
		}
	}
}

/*
 * Release one session-level hold, like pg_advisory_unlock.
 */
bool
zklock_unlock(const char *resource, ZkLockMode mode)
{
	LocalLockKey key;
	LocalLock  *lock;

	zklock_backend_init();
	zklock_check_resource(resource);
	check_lost(WARNING);
	make_key(&key, resource, mode);
	lock = hash_search(local_locks, &key, HASH_FIND, NULL);
	if (lock == NULL || lock->session_count == 0)
	{
		ereport(WARNING,
				(errmsg("you don't own a session-level zklock lock on resource \"%s\" in %s mode",
						resource, zklock_mode_name(mode))));
		return false;
	}
	release_session_hold(lock);
	return true;
}

/*
 * Release every session-level hold, like pg_advisory_unlock_all.  Returns
 * the number of locks whose session-level holds were released.
 */
int
zklock_unlock_all(void)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;
	int			n = 0;

	zklock_backend_init();
	check_lost(WARNING);
	hash_seq_init(&seq, local_locks);
	while ((lock = hash_seq_search(&seq)) != NULL)
	{
		if (lock->session_count == 0 && lock->session_implicit == 0)
			continue;
		if (lock->session_count > 0)
			n++;
		lock->session_count = 0;
		lock->session_implicit = 0;
		if (lock->nxact == 0)
			forget(lock);
		else
			show_holds(lock);
	}
	return n;
}

/*
 * Transaction end: every transaction-level hold goes.  Before the commit,
 * the fence: a lost lock fails the commit.
 */
static void
xact_callback(XactEvent event, void *arg)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;

	/* an error between extension_guard_begin and _end: the abort released it */
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		extension_guarded = InvalidOid;
	if (local_locks == NULL || hash_get_num_entries(local_locks) == 0)
		return;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			commit_fence();
			break;

		case XACT_EVENT_PRE_PREPARE:
			hash_seq_init(&seq, local_locks);
			while ((lock = hash_seq_search(&seq)) != NULL)
			{
				if (lock->nxact > 0)
				{
					hash_seq_term(&seq);
					ereport(ERROR,
							(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							 errmsg("cannot PREPARE a transaction that holds zklock transaction-level locks")));
				}
			}
			/*
			 * Nor while this backend holds session-level locks: COMMIT
			 * PREPARED comes later, from any session, and no fence can run
			 * then, so a write could land after the lock was lost and
			 * granted to another holder.  (PREPARE assigns a transaction
			 * id before this callback, so a writing transaction cannot be
			 * told from a read-only one here: both are refused.)
			 */
			hash_seq_init(&seq, local_locks);
			while ((lock = hash_seq_search(&seq)) != NULL)
			{
				if (lock->session_count + lock->session_implicit > 0)
				{
					hash_seq_term(&seq);
					ereport(ERROR,
							(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							 errmsg("cannot PREPARE a transaction while this session holds zklock locks"),
							 errdetail("COMMIT PREPARED is not fenced: a write could land after the lock was lost."),
							 errhint("Release the session-level locks with zk_lock_release_all() first, or commit without two-phase commit.")));
				}
			}
			break;

		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			hash_seq_init(&seq, local_locks);
			while ((lock = hash_seq_search(&seq)) != NULL)
			{
				lock->nxact = 0;
				if (lock->session_count == 0 && lock->session_implicit == 0)
					forget(lock);
				else
					show_holds(lock);
			}
			break;

		default:
			break;
	}
}

/*
 * Subtransactions: ROLLBACK TO releases what the subtransaction took;
 * RELEASE hands its holds to the parent.
 */
static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;

	if (event == SUBXACT_EVENT_ABORT_SUB)
		extension_guarded = InvalidOid; /* as in xact_callback */
	if (local_locks == NULL)
		return;
	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;

	hash_seq_init(&seq, local_locks);
	while ((lock = hash_seq_search(&seq)) != NULL)
	{
		int			kept = 0;

		for (int i = 0; i < lock->nxact; i++)
		{
			if (lock->xact_holds[i].subid != mySubid)
				lock->xact_holds[kept++] = lock->xact_holds[i];
			else if (event == SUBXACT_EVENT_COMMIT_SUB)
			{
				lock->xact_holds[i].subid = parentSubid;
				lock->xact_holds[kept++] = lock->xact_holds[i];
			}
		}
		lock->nxact = kept;
		if (lock->nxact == 0 && lock->session_count == 0 &&
			lock->session_implicit == 0)
			forget(lock);
		else
			show_holds(lock);
	}
}

/*
 * Backend exit, FATAL included: withdraw the pending request and release
 * everything held.
 */
static void
backend_exit(int code, Datum arg)
{
	HASH_SEQ_STATUS seq;
	LocalLock  *lock;

	if (pending_idx >= 0)
		withdraw(pending_idx, pending_gen);
	pending_idx = -1;
	for (int i = 0; i < nbatch; i++)
		withdraw(batch_idx[i], batch_gen[i]);
	nbatch = 0;
	if (local_locks == NULL)
		return;
	hash_seq_init(&seq, local_locks);
	while ((lock = hash_seq_search(&seq)) != NULL)
		withdraw(lock->idx, lock->generation);
}

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

		request_init(&req, ZKR_LIST);
		strlcpy(req.resource, subtree ? subtree : "", sizeof(req.resource));
		req.list_handle = dsm_segment_handle(seg);
		req.list_size = size;
		idx = submit(&req, &gen);

		state = wait_for_answer(idx, gen, "the listing", -1, -1, false);
		if (state == ZKE_FAILED)
		{
			dsm_detach(seg);
			raise_failure(idx, gen, "list zklock lock nodes");
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
 * How many lock entries backends of this instance connected to database
 * dbid hold or wait for (sets *first_pid to one of those backends): what a
 * DROP EXTENSION would leave with no function to release it (zklock.c).
 * Entries being released, finished requests, listings and administrative
 * requests do not count.
 */
int
zklock_database_locks(Oid dbid, int *first_pid)
{
	int			n = 0;

	*first_pid = 0;
	if (zklock_shared == NULL)
		return 0;
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	for (int i = 0; i < zklock_shared->nentries; i++)
	{
		ZkLockEntry *e = &zklock_shared->entries[i];
		PGPROC	   *proc;

		if ((e->kind != ZKR_ACQUIRE && e->kind != ZKR_TRY_ACQUIRE) ||
			(e->state != ZKE_REQUESTED && e->state != ZKE_GRANTED &&
			 e->state != ZKE_LOST) ||
			e->owner_procno < 0 ||
			e->owner_procno >= (int) ProcGlobal->allProcCount)
			continue;
		proc = &ProcGlobal->allProcs[e->owner_procno];
		if (proc->pid != e->owner_pid || proc->databaseId != dbid)
			continue;
		if (n++ == 0)
			*first_pid = e->owner_pid;
	}
	LWLockRelease(zklock_shared->lock);
	return n;
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

	if (local_locks == NULL)
		return false;
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	hash_seq_init(&seq, local_locks);
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

	request_init(&req, kind);
	strlcpy(req.resource, resource, sizeof(req.resource));
	strlcpy(req.node, node, sizeof(req.node));
	memcpy(req.data, data ? data : "", datalen);
	req.data[datalen] = '\0';
	idx = submit(&req, &gen);

	state = wait_for_answer(idx, gen, "the lock node", -1, -1, false);
	if (state == ZKE_FAILED)
		raise_failure(idx, gen, "change zklock lock node");
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
	if (held_lock(resource, &held_mode) != NULL &&
		(mode == ZKLOCK_EXCLUSIVE || held_mode == ZKLOCK_EXCLUSIVE))
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("zklock resource \"%s\" is already held in %s mode by this session",
						resource, zklock_mode_name(held_mode)),
				 errdetail("An explicit lock in %s mode would wait for this session itself.",
						   zklock_mode_name(mode)),
				 errhint("Release the session's lock first (or end its transaction), then take the explicit lock.")));

	describe_holder(data, sizeof(data), "explicit", false, ttl_ms);

	request_init(&req, timeout_ms == 0 ? ZKR_TRY_ACQUIRE : ZKR_ACQUIRE);
	req.mode = mode;
	req.persistent = true;
	strlcpy(req.resource, resource, sizeof(req.resource));
	strlcpy(req.data, data, sizeof(req.data));
	idx = submit(&req, &gen);

	what = psprintf("resource \"%s\"", resource);
	state = wait_for_answer(idx, gen, what, timeout_ms == 0 ? -1 : timeout_ms,
							timeout_ms, timeout_ms != 0);
	if (state == ZKE_FAILED)
		raise_failure(idx, gen, psprintf("acquire explicit zklock lock on resource \"%s\"",
									resource));
	if (state == ZKE_NOT_GRANTED)
	{
		withdraw(idx, gen);
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("could not obtain zklock lock on %s within 0 ms", what)));
	}

	/* granted: the node is on its own; the entry is done */
	zklock_channel_collect(idx, gen, &granted);
	return granted.token;
}
