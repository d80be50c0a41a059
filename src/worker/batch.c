/*-------------------------------------------------------------------------
 *
 * batch.c
 *		Group commit: the lock recipe's creates and deletes of one pass of
 *		the worker's loop, sent at its end as few ZooKeeper transactions.
 *
 * Every backend of an instance shares the worker's one session, so the
 * writes that reach the worker together can go to ZooKeeper as one
 * multi: one write transaction instead of one each.  A lock "m/r" and its
 * implicit SHARED parent "m" are two requests that acquire.c submits
 * together and that COMMIT withdraws together, so their creates share a
 * multi, and so do their deletes.
 *
 * During a pass (worker.c: events, backends' requests, timers) the lock
 * recipe queues here its creates (zklock_batch_create), its deletes
 * (zklock_batch_delete) and what must follow them on the session
 * (zklock_batch_then: the listing behind a create, which must see the new
 * node: ZooKeeper serves a session's requests in order).  At the end of
 * the pass worker.c calls zklock_batch_flush(), which sends the writes in
 * their order, then the queued calls in theirs:
 *
 *	- a write alone goes as before (a plain create, whose Stat gives the
 *	  czxid; a plain delete): no added latency, and no waiting to fill a
 *	  batch (the pass ends as soon as its work is done);
 *	- consecutive writes go as one multi (zkc_multi) of at most
 *	  BATCH_MAX_OPS, each member's reply an ordinary event with its own
 *	  tag (zk_client.c says how a failed multi is answered: no member
 *	  fails for another's fault; a create rolled back with a failed multi
 *	  is sent alone the next time);
 *	- a create rolled back with a failed multi keeps its place among this
 *	  instance's requests (issue 28): a create under a parent with a create
 *	  in a multi not answered yet is held in the queue (with the calls
 *	  queued behind it) until that multi's answer and the listings behind
 *	  it are taken, which a mark sent behind them says (zkc_send_mark; the
 *	  client library answers a mark, with a connection loss if need be,
 *	  within 2/3 of the session timeout: hold_max_us() is only a safety
 *	  net), and
 *	  until the rolled-back create, queued again, was sent; so a request
 *	  made here while the multi was in flight lands behind it (across
 *	  instances no place can be kept: doc/design.md, "Group commit");
 *	- never two creates under one parent (one resource) in one multi: the
 *	  czxid of a create in a multi is the transaction's zxid, so two such
 *	  creates would share a fencing token.  Each goes to the next multi,
 *	  sent after it: the tokens of one resource grow strictly with every
 *	  grant, as with plain creates.
 *
 * The multi's zxid is read from a setData on the anchor,
 * "<root>/zklock.zxid-<16 random hex digits>": an ephemeral node of the
 * session (it goes with the session; nothing is left behind), created
 * before the first multi of each session and again when a multi found it
 * missing.  Its first segment is one no resource may take, and its random
 * part cannot be guessed, so nobody makes it before us.
 *
 * Only the worker's thread runs this.  The queue lives in batch_context,
 * reset at each flush that leaves nothing held; the queue is flushed early,
 * holding nothing, when it is full.  flights[] (the creates sent in multis,
 * a ring: past BATCH_MAX_FLIGHTS in flight the oldest hold no longer) is
 * forgotten when the session changes.  Writes
 * queued under one session are never sent on another: if the session
 * changed before the flush, each is answered as lost (the session's loss
 * has already ended their requests); the calls queued behind them still
 * run, and see for themselves whether their request still wants them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "common/hashfn.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "batch.h"
#include "lease.h"
#include "recipe.h"
#include "resource.h"
#include "settings.h"
#include "zk_client.h"

#define BATCH_MAX_OPS		32	/* writes in one multi */
#define BATCH_MAX_QUEUED	256 /* writes or calls queued: then flush */
#define BATCH_MAX_FLIGHTS	256 /* creates in multis in flight, tracked */

typedef struct BatchWrite
{
	bool		create;
	bool		alone;			/* never in a multi */
	int			flags;
	uint64		tag;
	char	   *path;
	char	   *data;
	int			datalen;
	int			parent_len;		/* a create's: its path up to the last '/' */
	bool		again;			/* a create rolled back with a failed multi */
} BatchWrite;

typedef struct BatchThen
{
	ZkBatchThen fn;
	uint64		tag;
	int			after;			/* the writes queued before it */
} BatchThen;

/* A create sent in a multi whose answer is not taken yet */
typedef struct BatchFlight
{
	uint64		mark;			/* the mark sent behind it */
	uint32		parent;			/* hash of its parent's path */
	int64		sent_us;		/* when (zklock_boottime_us: monotonic) */
} BatchFlight;

static MemoryContext batch_context = NULL;
static BatchWrite writes[BATCH_MAX_QUEUED];
static int	nwrites = 0;
static BatchThen thens[BATCH_MAX_QUEUED];
static int	nthens = 0;
static int64 batch_session = 0; /* the session they were queued under */

/* Creates in multis not answered yet (a ring), and the marks behind them */
static BatchFlight flights[BATCH_MAX_FLIGHTS];
static int	nflights = 0;
static int	flight_next = 0;
static uint64 mark_serial = 0;
static bool flush_mark = false; /* this flush sent a create in a multi */
static uint64 cap_logged = 0;	/* the last mark whose cap was logged */

/* The anchor node of the multis, and the session that made it */
static char anchor_path[ZKLOCK_MAX_PATH + 1];
static int64 anchor_session = 0;

static void batch_flush(bool hold);

/* Forget the creates in flight: none will hold another */
static void
flights_clear(void)
{
	nflights = 0;
	flight_next = 0;
}

/* Queue under the current session: flush first what another queued */
static void
batch_prepare(void)
{
	int64		sid = zkc_session_id();

	if ((nwrites > 0 || nthens > 0) && batch_session != sid)
		zklock_batch_flush();
	if (batch_session != sid)
		flights_clear();		/* a multi of another session says nothing */
	/* full: send everything, held or not */
	if (nwrites >= BATCH_MAX_QUEUED || nthens >= BATCH_MAX_QUEUED)
		batch_flush(false);
	if (batch_context == NULL)
		batch_context = AllocSetContextCreate(TopMemoryContext,
											  "zklock batch",
											  ALLOCSET_SMALL_SIZES);
	batch_session = sid;
}

/*
 * Queue a create (sent at the end of the pass).  Always queued: a create
 * that cannot be sent then is answered as lost (ZKC_CONNLOSS), as one sent
 * and lost would be.
 */
bool
zklock_batch_create(const char *path, const char *data, int datalen,
					int flags, uint64 tag)
{
	BatchWrite *bw;
	const char *slash = strrchr(path, '/');

	batch_prepare();
	bw = &writes[nwrites++];
	bw->create = true;
	/*
	 * Rolled back with a failed multi (zk_client.c): this time alone, and
	 * ahead of the creates under its parent held behind that multi, asked
	 * for after it (batch_held)
	 */
	bw->again = zkc_multi_rolled_back(tag);
	bw->alone = bw->again;
	/* a container (a missing parent) is made alone: a multi knows none */
	if (!(flags & (ZKC_EPHEMERAL_SEQUENTIAL | ZKC_PERSISTENT_SEQUENTIAL)))
		bw->alone = true;
	bw->flags = flags;
	bw->tag = tag;
	bw->path = MemoryContextStrdup(batch_context, path);
	bw->datalen = Max(datalen, 0);
	bw->data = MemoryContextAlloc(batch_context, bw->datalen + 1);
	if (datalen > 0)
		memcpy(bw->data, data, datalen);
	bw->data[bw->datalen] = '\0';
	if (datalen < 0)
		bw->datalen = -1;
	bw->parent_len = slash ? slash - path : 0;
	return true;
}

/* Queue a delete (sent at the end of the pass); as a create, always queued */
bool
zklock_batch_delete(const char *path, uint64 tag)
{
	BatchWrite *bw;

	batch_prepare();
	bw = &writes[nwrites++];
	memset(bw, 0, sizeof(BatchWrite));
	bw->create = false;
	bw->tag = tag;
	bw->path = MemoryContextStrdup(batch_context, path);
	return true;
}

/*
 * Call fn(tag) once the writes queued so far are sent (the listing behind a
 * create).  fn checks that its request still wants it: it is called at the
 * end of the pass, unless the session changed meanwhile.
 */
void
zklock_batch_then(ZkBatchThen fn, uint64 tag)
{
	batch_prepare();
	thens[nthens].fn = fn;
	thens[nthens].tag = tag;
	thens[nthens].after = nwrites;
	nthens++;
}

/* writes[i] and writes[j] are creates under one parent */
static bool
same_parent(int i, int j)
{
	return writes[i].create && writes[j].create &&
		writes[i].parent_len == writes[j].parent_len &&
		strncmp(writes[i].path, writes[j].path, writes[i].parent_len) == 0;
}

/*
 * The end of the multi that begins at writes[first] (of the nsend to send):
 * at most BATCH_MAX_OPS, and it stops before a second create under one
 * parent.
 */
static int
group_end(int first, int nsend)
{
	int			end = first + 1;

	if (writes[first].alone)
		return end;
	for (; end < nsend && end - first < BATCH_MAX_OPS; end++)
	{
		if (writes[end].alone)
			return end;
		for (int k = first; k < end; k++)
			if (same_parent(k, end))
				return end;
	}
	return end;
}

/* The anchor exists (or its create is sent ahead of the multi) */
static bool
anchor_ready(void)
{
	int64		sid = zkc_session_id();
	uint64		r;

	if (anchor_session == sid && !zkc_multi_anchor_lost())
		return true;
	if (!pg_strong_random(&r, sizeof(r)))
		r = (uint64) GetCurrentTimestamp() ^ ((uint64) MyProcPid << 32);
	snprintf(anchor_path, sizeof(anchor_path),
			 "%s/" ZKLOCK_RESERVED_PREFIX "zxid-%016llx", zklock_root,
			 (unsigned long long) r);
	if (!zkc_create_anchor(anchor_path))
		return false;
	anchor_session = sid;
	return true;
}

/* One write on its own, as before batching */
static void
send_alone(BatchWrite *bw)
{
	bool		ok;

	if (bw->create)
		ok = zkc_create(bw->path, bw->data, bw->datalen, bw->flags, bw->tag);
	else
		ok = zkc_delete(bw->path, bw->tag);
	if (!ok)
		zkc_fail_locally(bw->create ? ZKEV_CREATED : ZKEV_DELETED, bw->tag,
						 bw->path);
}

/* A create's parent path, hashed */
static uint32
parent_hash(const BatchWrite *bw)
{
	return hash_bytes((const unsigned char *) bw->path, bw->parent_len);
}

/* A create went out in a multi: answered once the next mark is taken */
static void
flight_add(const BatchWrite *bw)
{
	BatchFlight *f = &flights[flight_next];

	f->mark = mark_serial + 1;
	f->parent = parent_hash(bw);
	f->sent_us = zklock_boottime_us();
	flight_next = (flight_next + 1) % BATCH_MAX_FLIGHTS;
	nflights = Min(nflights + 1, BATCH_MAX_FLIGHTS);
	flush_mark = true;
}

/*
 * How long a mark may be waited for.  A stalled server answers nothing
 * sent after the multi either (one session's requests are answered in
 * order), so sending a held create earlier gains nothing and loses the
 * rolled-back create's place; the client library answers every request
 * in flight with a connection loss after 2/3 of the negotiated timeout
 * without data.  So the session timeout is never reached while the library
 * works: a safety net, not a schedule.
 */
static int64
hold_max_us(void)
{
	return (int64) Max(zkc_negotiated_timeout(), zklock_session_timeout) *
		INT64CONST(1000);
}

/*
 * Is a create under this parent in a multi whose answer is not taken yet?
 * (A mark that never comes holds for hold_max_us() at most, on the
 * monotonic clock; its end is logged, once.)
 */
static bool
flight_under(uint32 parent, uint64 seen, int64 now_us)
{
	bool		under = false;

	for (int i = 0; i < nflights; i++)
	{
		BatchFlight *f = &flights[i];

		if (f->mark <= seen || f->parent != parent)
			continue;
		if (now_us - f->sent_us < hold_max_us())
			under = true;
		else if (f->mark > cap_logged)
		{
			cap_logged = f->mark;	/* once for a mark (a flush's multis) */
			ereport(LOG,
					(errmsg("zklock: a multi sent %d ms ago is not answered yet; creates under its resource are sent without waiting for it",
							(int) (hold_max_us() / 1000))));
		}
	}
	return under;
}

/* Is any create in a multi whose answer is not taken yet? */
static bool
flights_unseen(uint64 seen)
{
	for (int i = 0; i < nflights; i++)
		if (flights[i].mark > seen)
			return true;
	return false;
}

/* The mark behind this flush's multis and the listings behind them */
static void
flight_mark(void)
{
	if (!flush_mark)
		return;
	flush_mark = false;
	mark_serial++;
	if (!zkc_send_mark(mark_serial))
		flights_clear();		/* nothing to wait for: hold nothing */
}

/* writes[first..end-1]: one alone, more as one multi */
static void
send_group(int first, int end)
{
	ZkcMultiOp	ops[BATCH_MAX_OPS];
	int			n = end - first;

	if (n > 1 && anchor_ready())
	{
		for (int i = 0; i < n; i++)
		{
			BatchWrite *bw = &writes[first + i];

			ops[i].create = bw->create;
			ops[i].path = bw->path;
			ops[i].data = bw->data;
			ops[i].datalen = bw->datalen;
			ops[i].flags = bw->flags;
			ops[i].tag = bw->tag;
			ops[i].together = false;
		}
		if (zkc_multi(ops, n, anchor_path))
		{
			for (int i = first; i < end; i++)
				if (writes[i].create)
					flight_add(&writes[i]);
			return;
		}
	}
	/* alone, or the multi could not be sent: each on its own */
	for (int i = first; i < end; i++)
		send_alone(&writes[i]);
}

/* Is a create rolled back under writes[i]'s parent queued after it? */
static bool
again_after(int i)
{
	for (int j = i + 1; j < nwrites; j++)
		if (writes[j].again && same_parent(i, j))
			return true;
	return false;
}

/*
 * Which queued writes wait (held[i]): a create under a parent with a create
 * in a multi not answered yet, or with a create rolled back with a failed
 * multi queued after it (that one goes first; this one in a later flush),
 * unless it is itself one rolled back.  Returns how many.
 */
static int
batch_held(bool hold, bool *held)
{
	uint64		seen = zkc_mark_seen();
	int64		now_us = zklock_boottime_us();
	bool		any_again = false;
	bool		any_flight;
	int			n = 0;

	memset(held, 0, sizeof(bool) * nwrites);
	if (!hold)
		return 0;
	/* the common case, no multi unanswered and none rolled back: at once */
	for (int i = 0; i < nwrites && !any_again; i++)
		any_again = writes[i].again;
	any_flight = flights_unseen(seen);
	if (!any_again && !any_flight)
		return 0;
	for (int i = 0; i < nwrites; i++)
	{
		held[i] = writes[i].create && !writes[i].again &&
			((any_flight &&
			  flight_under(parent_hash(&writes[i]), seen, now_us)) ||
			 (any_again && again_after(i)));
		n += held[i];
	}
	return n;
}

/*
 * The writes still queued (the held ones) move to a fresh batch_context and
 * the old one, with what was sent, is freed: else, with something held at
 * the end of every pass (steady contention), it would never be reset.
 */
static void
keep_held_only(void)
{
	MemoryContext fresh = AllocSetContextCreate(TopMemoryContext,
												"zklock batch",
												ALLOCSET_SMALL_SIZES);

	for (int i = 0; i < nwrites; i++)
	{
		BatchWrite *bw = &writes[i];

		bw->path = MemoryContextStrdup(fresh, bw->path);
		if (bw->data != NULL)
		{
			char	   *data = MemoryContextAlloc(fresh, Max(bw->datalen, 0) + 1);

			memcpy(data, bw->data, Max(bw->datalen, 0) + 1);
			bw->data = data;
		}
	}
	MemoryContextDelete(batch_context);
	batch_context = fresh;
}

/*
 * Send the writes not held (in their order, grouped), keep the held ones
 * and the calls behind them queued, and return the other calls in calls[].
 */
static int
batch_send(bool hold, BatchThen *calls)
{
	bool		held[BATCH_MAX_QUEUED];
	BatchWrite	kept[BATCH_MAX_QUEUED];
	int			before[BATCH_MAX_QUEUED + 1];	/* held among writes[0..i-1] */
	int			nheld = batch_held(hold, held);
	int			nsend = 0,
				nkept = 0,
				ncalls = 0,
				nthens_kept = 0;

	before[0] = 0;
	for (int i = 0; i < nwrites; i++)
	{
		before[i + 1] = before[i] + held[i];
		if (held[i])
			kept[nkept++] = writes[i];
		else
			writes[nsend++] = writes[i];
	}
	for (int first = 0, end; first < nsend; first = end)
	{
		end = group_end(first, nsend);
		send_group(first, end);
	}
	/* a call waits while a write queued before it waits */
	for (int i = 0; i < nthens; i++)
	{
		if (before[thens[i].after] > 0)
		{
			thens[nthens_kept] = thens[i];
			thens[nthens_kept++].after = before[thens[i].after];
		}
		else
			calls[ncalls++] = thens[i];
	}
	memcpy(writes, kept, sizeof(BatchWrite) * nheld);
	nwrites = nheld;
	nthens = nthens_kept;
	if (nheld > 0 && nsend > 0)
		keep_held_only();
	return ncalls;
}

/*
 * The end of the worker's pass: send what was queued, writes first (in
 * their order, grouped), then the calls queued behind them.  A call may
 * queue more; that is sent too before this returns.  What is held (a
 * create behind a multi in flight, see batch_held) stays queued for a
 * later pass; so do the calls behind it.  hold false: nothing is held.
 */
static void
batch_flush(bool hold)
{
	int			ncalls;

	do
	{
		BatchThen	calls[BATCH_MAX_QUEUED];

		ncalls = 0;
		if (batch_session != zkc_session_id())
		{
			/* queued under a session that is gone: never on another */
			for (int i = 0; i < nwrites; i++)
				zkc_fail_locally(writes[i].create ? ZKEV_CREATED : ZKEV_DELETED,
								 writes[i].tag, writes[i].path);
			memcpy(calls, thens, sizeof(BatchThen) * nthens);
			ncalls = nthens;
			nwrites = 0;
			nthens = 0;
			flights_clear();
		}
		else
			ncalls = batch_send(hold, calls);
		if (nwrites == 0 && batch_context != NULL)
			MemoryContextReset(batch_context);
		for (int i = 0; i < ncalls; i++)
			calls[i].fn(calls[i].tag);
	} while (ncalls > 0);
	flight_mark();
}

void
zklock_batch_flush(void)
{
	batch_flush(true);
}
