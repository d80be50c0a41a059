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
 * reset at each flush; the queue is flushed early when it is full.  Writes
 * queued under one session are never sent on another: if the session
 * changed before the flush, each is answered as lost (the session's loss
 * has already ended their requests); the calls queued behind them still
 * run, and see for themselves whether their request still wants them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "batch.h"
#include "recipe.h"
#include "resource.h"
#include "settings.h"
#include "zk_client.h"

#define BATCH_MAX_OPS		32	/* writes in one multi */
#define BATCH_MAX_QUEUED	256 /* writes or calls queued: then flush */

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
} BatchWrite;

typedef struct BatchThen
{
	ZkBatchThen fn;
	uint64		tag;
} BatchThen;

static MemoryContext batch_context = NULL;
static BatchWrite writes[BATCH_MAX_QUEUED];
static int	nwrites = 0;
static BatchThen thens[BATCH_MAX_QUEUED];
static int	nthens = 0;
static int64 batch_session = 0; /* the session they were queued under */

/* The anchor node of the multis, and the session that made it */
static char anchor_path[ZKLOCK_MAX_PATH + 1];
static int64 anchor_session = 0;

/* Queue under the current session: flush first what another queued */
static void
batch_prepare(void)
{
	int64		sid = zkc_session_id();

	if ((nwrites > 0 || nthens > 0) && batch_session != sid)
		zklock_batch_flush();
	if (nwrites >= BATCH_MAX_QUEUED || nthens >= BATCH_MAX_QUEUED)
		zklock_batch_flush();
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
	/* rolled back with a failed multi: this time alone (zk_client.c) */
	bw->alone = zkc_multi_rolled_back(tag);
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
 * The end of the multi that begins at writes[first]: at most BATCH_MAX_OPS,
 * and it stops before a second create under one parent.
 */
static int
group_end(int first)
{
	int			end = first + 1;

	if (writes[first].alone)
		return end;
	for (; end < nwrites && end - first < BATCH_MAX_OPS; end++)
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
		}
		if (zkc_multi(ops, n, anchor_path))
			return;
	}
	/* alone, or the multi could not be sent: each on its own */
	for (int i = first; i < end; i++)
		send_alone(&writes[i]);
}

/*
 * The end of the worker's pass: send what was queued, writes first (in
 * their order, grouped), then the calls queued behind them.  A call may
 * queue more; that is sent too before this returns.
 */
void
zklock_batch_flush(void)
{
	while (nwrites > 0 || nthens > 0)
	{
		BatchThen	calls[BATCH_MAX_QUEUED];
		int			ncalls = nthens;

		if (batch_session != zkc_session_id())
		{
			/* queued under a session that is gone: never on another */
			for (int i = 0; i < nwrites; i++)
				zkc_fail_locally(writes[i].create ? ZKEV_CREATED : ZKEV_DELETED,
								 writes[i].tag, writes[i].path);
		}
		else
		{
			for (int first = 0, end; first < nwrites; first = end)
			{
				end = group_end(first);
				send_group(first, end);
			}
		}
		memcpy(calls, thens, sizeof(BatchThen) * ncalls);
		nwrites = 0;
		nthens = 0;
		MemoryContextReset(batch_context);
		for (int i = 0; i < ncalls; i++)
			calls[i].fn(calls[i].tag);
	}
}
