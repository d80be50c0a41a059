/*-------------------------------------------------------------------------
 *
 * queue.c
 *		The backend side of the distributed queue (issue 31): puts, takes
 *		and lengths through the channel, and the items this backend holds
 *		until its transaction ends (doc/design.md "Queues").
 *
 * A put or a length is one request, collected at once (the entry freed).
 * A take is an entry the backend keeps while it holds the item, GRANTED,
 * listed in holds[] with the subtransaction that took it.  Its end:
 *	- PRE_COMMIT (zklock_queue_fence): every hold must still stand (of the
 *	  session the lease covers), else the commit fails (55P03, as for a lock); the commit
 *	  window is then opened for that session, as the lock fence does,
 *	  and the holds are looked at again once it is open (fence.c);
 *	- COMMIT, after the commit record (zklock_queue_xact_end): each entry
 *	  is given back with "consume=1" in its data, awaiting its verdict
 *	  (channel_consume.c); the worker deletes the item and its hold, and
 *	  this backend waits (interrupts held, at most a session timeout) for
 *	  each verdict, so that a COMMIT that returned has consumed, or said
 *	  with a WARNING that an item was not (or may not have been) consumed
 *	  and is delivered again; zk_queue_stats counts consumed only for
 *	  consumed.  A hold LOST by then: the same WARNING.  backend.c closes
 *	  the commit window only after this;
 *	- ABORT, ROLLBACK TO a savepoint that took it, exit: withdrawn without
 *	  consume=: the hold alone goes, the item is back in its place.
 * Nothing here raises an ERROR after the commit record.
 *
 * Below backend.c, whose callbacks call the ends here (and queue_put.c's):
 * this file never calls it.  Its entry points (backend.h) expect the
 * backend side set up: functions/queue.c calls zklock_backend_init first,
 * right before each call (where zklock_queue_request did before, so a
 * server without zklock preloaded fails at the same point);
 * zklock_queue_request raises an ERROR when it was not.  Backend-local
 * state only (holds[] in TopMemoryContext, the takes' segment kept
 * mapped: take_segment); the entries are the
 * channel's (channel.c's rules).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/dsm.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "backend.h"
#include "backend_int.h"
#include "channel.h"
#include "failpoint.h"
#include "lease.h"
#include "nodedata.h"
#include "queue_common.h"
#include "resource.h"
#include "settings.h"
#include "stats.h"
#include "wait_events.h"

typedef struct QueueHold
{
	int			idx;
	uint32		generation;
	int64		session_id;
	SubTransactionId subid;
	bool		consuming;		/* COMMIT: given to be consumed, its verdict
								 * awaited */
	char		id[ZKLOCK_MAX_NODE_NAME_LEN + 1];
	char		queue[ZKLOCK_MAX_RESOURCE_LEN + 1];
} QueueHold;

static QueueHold *holds = NULL;

static bool queue_take(const char *queue, bool wait, bool peek,
					   int timeout_ms, char **id, bytea **item,
					   int *priority);
static int	nholds = 0;
static int	maxholds = 0;

/*
 * The queue's resource, after its name's checks (22023, 42622, 22021).
 * The backend side is set up already (zklock_backend_init: by the SQL
 * function, or by the put that PRE_COMMIT writes)
 */
void
zklock_queue_request(ZkChannelRequest *req, ZkEntryKind kind,
					 const char *queue)
{
	if (zklock_local_locks == NULL)
		elog(ERROR, "zklock: a queue request before zklock_backend_init");
	zklock_check_resource(queue);
	if (strlen(ZKLOCK_QUEUE_PREFIX) + strlen(queue) > ZKLOCK_MAX_RESOURCE_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("zklock queue name \"%s\" is too long", queue),
				 errdetail("A queue's name may have at most %d bytes.",
						   ZKLOCK_MAX_RESOURCE_LEN -
						   (int) strlen(ZKLOCK_QUEUE_PREFIX))));
	zklock_request_init(req, kind);
	snprintf(req->resource, sizeof(req->resource), "%s%s",
			 ZKLOCK_QUEUE_PREFIX, queue);
}

/* Wait for the worker's answer to a request that does not wait for others */
ZkEntryState
zklock_queue_answer(int idx, uint32 gen, const char *what)
{
	ZkEntryState state = zklock_wait_for_answer(idx, gen, what, -1, -1, false);

	if (state == ZKE_FAILED)
		zklock_raise_failure(idx, gen, what);
	return state;
}

/*
 * zklock.max_queue_items: a put into a queue that has that many items
 * (waiting and held; a transactional put counts at its call, as the items
 * are then) fails with 53400, before anything is written.  Counted with a
 * listing of entries/ at each put (one round trip more); puts at the same
 * moment may each pass before the others' entries exist: the queue can go
 * over by their number less one, and transactional puts committing later
 * are not counted at all.  -1: no limit, no listing.
 */
void
zklock_queue_check_room(const char *queue)
{
	int64		n;

	if (zklock_max_queue_items < 0)
		return;
	n = zklock_queue_length(queue);
	if (n >= zklock_max_queue_items)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("zklock queue \"%s\" is full", queue),
				 errdetail("It has " INT64_FORMAT " items; zklock.max_queue_items is %d.",
						   n, zklock_max_queue_items),
				 errhint("Take items from it, or raise zklock.max_queue_items.")));
}

char *
zklock_queue_put_now(const char *queue, const char *item, Size len,
					 int priority)
{
	ZkChannelRequest req;
	ZkChannelResult result;
	dsm_segment *seg;
	int			idx;
	uint32		gen;

	zklock_queue_request(&req, ZKR_QUEUE_PUT, queue);
	zklock_queue_check_room(queue);
	snprintf(req.node, sizeof(req.node), "%s%03d-", ZKLOCK_QUEUE_ENTRY,
			 priority);
	seg = dsm_create(Max(len, 1), 0);
	if (len > 0)
		memcpy(dsm_segment_address(seg), item, len);
	req.list_handle = dsm_segment_handle(seg);
	req.list_size = len;
	PG_TRY();
	{
		idx = zklock_submit(&req, &gen);
		(void) zklock_queue_answer(idx, gen, psprintf("put an item into queue \"%s\"",
											   queue));
	}
	PG_FINALLY();
	{
		dsm_detach(seg);
	}
	PG_END_TRY();
	zklock_channel_collect(idx, gen, &result);
	zklock_stats_queue_count(queue, ZKLOCK_QSTAT_PUT);
	return pstrdup(result.node);
}

int64
zklock_queue_length(const char *queue)
{
	ZkChannelRequest req;
	ZkChannelResult result;
	int			idx;
	uint32		gen;

	zklock_queue_request(&req, ZKR_QUEUE_LENGTH, queue);
	idx = zklock_submit(&req, &gen);
	(void) zklock_queue_answer(idx, gen, psprintf("count the items of queue \"%s\"",
										   queue));
	zklock_channel_collect(idx, gen, &result);
	return result.token;
}

/*
 * Delete the items of a queue that no one holds (administrators: the SQL
 * function is not granted to PUBLIC); held items stay with their holders.
 * The number deleted.
 */
int64
zklock_queue_purge(const char *queue)
{
	ZkChannelRequest req;
	ZkChannelResult result;
	int			idx;
	uint32		gen;

	zklock_queue_request(&req, ZKR_QUEUE_LENGTH, queue);
	snprintf(req.data, sizeof(req.data), "%spurge\n", ZKLOCK_QUEUE_OP_FIELD);
	idx = zklock_submit(&req, &gen);
	(void) zklock_queue_answer(idx, gen, psprintf("purge queue \"%s\"", queue));
	zklock_channel_collect(idx, gen, &result);
	return result.token;
}

/* The take's wait: the worker's answer, or the caller's timeout (-1: none) */
static ZkEntryState
take_wait(int idx, uint32 gen, int timeout_ms)
{
	TimestampTz deadline = timeout_ms < 0 ? 0 :
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	TimestampTz since = GetCurrentTimestamp();
	ZkEntryState state;

	zklock_note_wait_start();
	PG_TRY();
	{
		while ((state = zklock_channel_state(idx, gen)) == ZKE_REQUESTED)
		{
			if (deadline && GetCurrentTimestamp() >= deadline)
				break;
			zklock_wait_pass(idx, since, deadline);
		}
	}
	PG_CATCH();
	{
		zklock_channel_withdraw(idx, gen);
		zklock_set_pending(-1, 0);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return state;
}

/* Room in holds[] for one more, made before the take is asked for */
static void
hold_reserve(void)
{
	if (nholds == maxholds)
	{
		int			more = Max(8, maxholds * 2);

		holds = holds ? repalloc(holds, sizeof(QueueHold) * more) :
			MemoryContextAlloc(TopMemoryContext, sizeof(QueueHold) * more);
		maxholds = more;
	}
}

/* Remember a hold, for the end of its transaction (room reserved: no ERROR) */
static void
hold_add(int idx, uint32 gen, ZkChannelResult *r, const char *queue)
{
	QueueHold  *h;

	Assert(nholds < maxholds);
	h = &holds[nholds++];
	h->idx = idx;
	h->generation = gen;
	h->session_id = r->session_id;
	h->subid = GetCurrentSubTransactionId();
	h->consuming = false;
	strlcpy(h->id, r->node, sizeof(h->id));
	strlcpy(h->queue, queue, sizeof(h->queue));
}

/*
 * Take the first item no one holds (waiting up to timeout_ms, -1 without
 * limit, when wait): true, with its id, bytes and priority, held by the
 * transaction; false when there is none.  The request stays the pending
 * one (withdrawn by an ERROR or FATAL) until it is in holds[].
 */
bool
zklock_queue_take(const char *queue, bool wait, int timeout_ms, char **id,
				  bytea **item, int *priority)
{
	return queue_take(queue, wait, false, timeout_ms, id, item, priority);
}

/*
 * The first item no one holds, read and not held (a try-take the worker
 * answers without a hold, withdrawn at once); false when there is none.
 */
bool
zklock_queue_peek(const char *queue, char **id, bytea **item, int *priority)
{
	return queue_take(queue, false, true, -1, id, item, priority);
}

/*
 * The segment a take's item comes in: one per backend, made at its first
 * take and kept mapped to its exit.  Made per take it cost 0.37 ms (1 MB
 * allocated and zeroed by posix_fallocate, mapped, unmapped, unlinked) of
 * a 3 to 4 ms cycle.  One take at a time per backend; the worker writes
 * only the segment of a request it still sees asked for, and its writes
 * come one after another, so a late write for a withdrawn take lands
 * before the next take's item, which is read only once granted.
 */
static dsm_segment *
take_segment(void)
{
	static dsm_segment *seg = NULL;

	if (seg == NULL)
	{
		seg = dsm_create(ZKLOCK_QUEUE_SEGMENT, 0);
		dsm_pin_mapping(seg);
	}
	return seg;
}

/*
 * Granted, and lost before this backend looked (its hold deleted by
 * another client, or the worker's session ended): not taken; the item
 * stays in the queue.  Given back, then 55P03.
 */
static void
take_lost(int idx, uint32 gen, const char *queue)
{
	zklock_channel_withdraw(idx, gen);
	zklock_set_pending(-1, 0);
	ereport(ERROR,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 errmsg("could not take an item from zklock queue \"%s\": its hold was lost as it was granted",
					queue),
			 errdetail("The hold was deleted by another client, or the ZooKeeper session that held it ended; the item stays in the queue."),
			 errhint("Take again.")));
}

static bool
queue_take(const char *queue, bool wait, bool peek, int timeout_ms,
		   char **id, bytea **item, int *priority)
{
	ZkChannelRequest req;
	ZkChannelResult result;
	dsm_segment *seg;
	ZkEntryState state;
	int			idx;
	uint32		gen;
	uint32		len;
	TimestampTz asked_at;
	char		data[ZKLOCK_MAX_DATA_LEN + 1];
	const char *what = psprintf("take an item from queue \"%s\"", queue);

	zklock_queue_request(&req, wait ? ZKR_QUEUE_TAKE : ZKR_QUEUE_TRY_TAKE, queue);
	zklock_holder_data(data, sizeof(data), "transaction", false, 0);
	if (peek)
		zklock_nodedata_add(req.data, sizeof(req.data), data,
							ZKLOCK_QUEUE_OP_FIELD, "peek");
	else
		strlcpy(req.data, data, sizeof(req.data));
	seg = take_segment();
	req.list_handle = dsm_segment_handle(seg);
	req.list_size = ZKLOCK_QUEUE_SEGMENT;
	*item = NULL;
	hold_reserve();
	asked_at = GetCurrentTimestamp();
	idx = zklock_submit(&req, &gen);
	state = take_wait(idx, gen, wait ? timeout_ms : -1);
	if (state == ZKE_REQUESTED || state == ZKE_NOT_GRANTED)
	{
		zklock_channel_withdraw(idx, gen);	/* frees it, or gives it back */
		zklock_set_pending(-1, 0);
		if (!peek)
			zklock_stats_queue_take(queue, false, wait,
									zklock_stats_ms_since(asked_at));
		return false;
	}
	if (state == ZKE_LOST)
		take_lost(idx, gen, queue);
	if (state != ZKE_GRANTED)
	{
		zklock_set_pending(-1, 0);
		zklock_raise_failure(idx, gen, what);
	}

	/*
	 * Held (in holds[], given back by an abort) or, a peek, withdrawn,
	 * before anything that may raise: the copy of up to 1 MB.  The worker
	 * no longer writes the segment of a request it answered.
	 */
	zklock_channel_result(idx, gen, &result);
	if (peek)
		zklock_channel_withdraw(idx, gen);	/* nothing held: freed */
	else
	{
		hold_add(idx, gen, &result, queue);
		zklock_stats_queue_take(queue, true, result.waited,
								zklock_stats_ms_since(asked_at));
	}
	zklock_set_pending(-1, 0);
	memcpy(&len, dsm_segment_address(seg), sizeof(uint32));
	*item = palloc(VARHDRSZ + len);
	SET_VARSIZE(*item, VARHDRSZ + len);
	memcpy(VARDATA(*item),
		   (char *) dsm_segment_address(seg) + sizeof(uint32), len);
	*id = pstrdup(result.node);
	*priority = atoi(result.node + strlen(ZKLOCK_QUEUE_ENTRY));
	return true;
}

/*
 * The hold still stands (GRANTED, of a session the worker has not begun to
 * end), and the lease covers its session: waiting for the lease until
 * bound_ms after start, as the lock fence does (fence.c).  Else 55P03.
 */
static void
prove_hold(QueueHold *h, TimestampTz start, int bound_ms)
{
	bool		proven;

	while (zklock_channel_grant_stands(h->idx, h->generation, &proven) &&
		   !proven)
	{
		if (TimestampDifferenceExceeds(start, GetCurrentTimestamp(), bound_ms))
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 50, zklock_wait_event(ZKLOCK_WAIT_LEASE));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	if (!proven)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("item \"%s\" of zklock queue \"%s\" is no longer held; the transaction cannot commit",
						h->id, h->queue),
				 errdetail("The ZooKeeper session that held it ended, or could not be proven alive within %d ms: the item goes to another taker.",
						   bound_ms),
				 errhint("Take it again in a new transaction.")));
}

/*
 * PRE_COMMIT: every item held must still be held, by the session the
 * lease covers (else 55P03, as a lock lost); then the commit window opens for it (lease.c), so that
 * zklock does not end that session before the consumption.  The window
 * may already be open for the lock fence's session: it is the same one.
 */
void
zklock_queue_fence(void)
{
	int64		session_id = 0;
	TimestampTz start = GetCurrentTimestamp();
	int			bound_ms = zklock_session_timeout + zklock_connect_timeout;

	for (int i = 0; i < nholds; i++)
	{
		session_id = holds[i].session_id;
		prove_hold(&holds[i], start, bound_ms);
	}
	/* the window, in one look at the lease; withdrawn meanwhile: again */
	while (session_id != 0 && !zklock_lease_enter_commit(session_id))
		for (int i = 0; i < nholds; i++)
			prove_hold(&holds[i], start, bound_ms);
	(void) ZKLOCK_FAILPOINT("queue-fence-window");

	/*
	 * A second look, as the lock fence's (fence.c): a hold whose guard
	 * fired after prove_hold and before the window opened is LOST now, and
	 * fails the commit (the abort gives it back); one lost after this look
	 * is the COMMIT's (give_back: a WARNING).
	 */
	for (int i = 0; i < nholds; i++)
	{
		bool		proven;

		if (!zklock_channel_grant_stands(holds[i].idx, holds[i].generation,
										 &proven))
		{
			zklock_lease_leave_commit();
			prove_hold(&holds[i], start, bound_ms);
		}
	}
}

/* PRE_PREPARE: a prepared transaction would outlive the holds */
void
zklock_queue_prepare_check(void)
{
	if (nholds > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that holds zklock queue items")));
}

/*
 * COMMIT, a hold not consumed (verdict ZKLOCK_NOT_CONSUMED, or _UNKNOWN:
 * ZooKeeper's answer never came): said, as the header promises
 */
static void
warn_not_consumed(QueueHold *h, int verdict, const char *why)
{
	/* a detail is a sentence: the reasons are written as clauses */
	char		first = pg_toupper((unsigned char) why[0]);

	Assert(why[0] != '\0');
	if (verdict == ZKLOCK_NOT_CONSUMED)
		ereport(WARNING,
				(errcode(ERRCODE_WARNING),
				 errmsg("zklock queue item \"%s\" of queue \"%s\" was not consumed by this commit",
						h->id, h->queue),
				 errdetail("%c%s.", first, why + 1),
				 errhint("The item stays in the queue and is delivered again.")));
	else
		ereport(WARNING,
				(errcode(ERRCODE_WARNING),
				 errmsg("zklock queue item \"%s\" of queue \"%s\" may not have been consumed by this commit",
						h->id, h->queue),
				 errdetail("%c%s.", first, why + 1),
				 errhint("If it was not, the item stays in the queue and is delivered again.")));
}

/*
 * Wait for each consume's verdict (channel_consume.c) of holds[from..],
 * at most a session timeout in all; a hold the COMMIT could not give to
 * be consumed (LOST: not consuming) has had its WARNING.  Counted in
 * zk_queue_stats: consumed only when ZooKeeper deleted the entry; given
 * back when it stays.  This runs after the commit record, where an ERROR
 * is a PANIC: interrupts are held (CommitTransaction holds them too); a
 * cancel or a termination meanwhile (the worker's cancel of an open
 * commit window after a session timeout) waits until the COMMIT is done.
 */
static void
wait_consumed(int from)
{
	TimestampTz deadline =
		TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
									zklock_session_timeout);
	char		why[ZKLOCK_MAX_ERROR_LEN + 1];

	HOLD_INTERRUPTS();
	for (int i = from; i < nholds; i++)
	{
		QueueHold  *h = &holds[i];
		int			verdict;

		if (!h->consuming)
			continue;
		while ((verdict = zklock_channel_take_verdict(h->idx, h->generation,
													  false, why,
													  sizeof(why))) < 0)
		{
			if (GetCurrentTimestamp() >= deadline)
			{
				verdict = zklock_channel_take_verdict(h->idx, h->generation,
													  true, why, sizeof(why));
				if (verdict == ZKLOCK_CONSUME_UNKNOWN && why[0] == '\0')
					snprintf(why, sizeof(why),
							 "ZooKeeper had not answered its consume within %d ms of the commit; it is consumed once it answers, or given again to a taker if this instance's session ends first",
							 zklock_session_timeout);
				break;
			}
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 10, zklock_wait_event(ZKLOCK_WAIT_WORKER));
			ResetLatch(MyLatch);
		}
		if (verdict != ZKLOCK_CONSUMED)
			warn_not_consumed(h, verdict, why[0] ? why : "no verdict came");
		if (verdict != ZKLOCK_CONSUME_UNKNOWN)
			zklock_stats_queue_count(h->queue, verdict == ZKLOCK_CONSUMED ?
									 ZKLOCK_QSTAT_CONSUMED :
									 ZKLOCK_QSTAT_GIVEN_BACK);
	}
	RESUME_INTERRUPTS();
}

/*
 * Give back holds[from..]: consumed (the transaction committed) or not.
 * A hold found LOST at COMMIT (its guard fired after the fence) cannot be
 * consumed: WARNING, given back.
 */
static void
give_back(int from, bool consume)
{
	if (from >= nholds)
		return;
	if (!consume)
	{
		zklock_channel_hold_wakes();
		for (int i = from; i < nholds; i++)
		{
			zklock_channel_withdraw(holds[i].idx, holds[i].generation);
			zklock_stats_queue_count(holds[i].queue, ZKLOCK_QSTAT_GIVEN_BACK);
		}
		zklock_channel_release_wakes();
		nholds = from;
		return;
	}
	for (int i = from; i < nholds; i++)
	{
		QueueHold  *h = &holds[i];

		h->consuming = zklock_channel_consume(h->idx, h->generation,
											  "consume=1\n") == ZKE_GRANTED;
		if (h->consuming)
			continue;
		zklock_channel_withdraw(h->idx, h->generation);
		warn_not_consumed(h, ZKLOCK_NOT_CONSUMED,
						  "its hold was lost before the commit (deleted by another client, or the ZooKeeper session that held it ended)");
		zklock_stats_queue_count(h->queue, ZKLOCK_QSTAT_GIVEN_BACK);
	}
	wait_consumed(from);
	nholds = from;
}

/* The transaction ended: COMMIT consumes, ABORT gives the items back */
void
zklock_queue_xact_end(bool commit)
{
	give_back(0, commit);
}

/* ROLLBACK TO: what the subtransaction took goes back; RELEASE: the parent's */
void
zklock_queue_subxact_end(bool commit, SubTransactionId mySubid,
						 SubTransactionId parentSubid)
{
	int			kept = 0;

	for (int i = 0; i < nholds; i++)
	{
		QueueHold	h = holds[i];

		if (h.subid == mySubid)
		{
			if (commit)
				h.subid = parentSubid;
			else
			{
				zklock_channel_withdraw(h.idx, h.generation);
				zklock_stats_queue_count(h.queue, ZKLOCK_QSTAT_GIVEN_BACK);
				continue;
			}
		}
		holds[kept++] = h;
	}
	nholds = kept;
}

/* Backend exit: everything held goes back */
void
zklock_queue_at_exit(void)
{
	give_back(0, false);
}
