/*-------------------------------------------------------------------------
 *
 * recipe.c
 *		Layer 0 of the worker's ZooKeeper work: the per-request records,
 *		the dispatch to the recipes, and the fan-out of the session's
 *		changes (see recipe.h).
 *
 * The worker (worker.c) calls only this file; this file calls the
 * recipes only through the hooks of its table, recipes[]; the recipes call
 * this file, never one another.  It owns zklock_work (each entry's
 * generic part is set up here, the rest is its recipe's), zklock_connected
 * (true once the session is connected and every gate is open), and the
 * retry timer of lost replies.  Only the worker's thread runs any of it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/dsm.h"
#include "utils/memutils.h"

#include "recipe.h"
#include "channel.h"
#include "zklock.h"
#include "settings.h"
#include "shmem.h"
#include "resource.h"
#include "zk_client.h"
#include "lease.h"

/*
 * The recipes, one line each.  Their order is the order of the fan-out:
 * the root's check gates the others' connection; the sweep and the orphans
 * hear of a connection before the lock (which resumes its requests), the
 * listing after it.
 *
 * To add a recipe: a file defining a ZkRecipe (its name, the request kinds
 * it serves or the reserved indexes it tags its walks with, and its hooks),
 * its extern in recipe.h, and its line here.  A recipe written as plain
 * functions needs no struct of its own: the election's line is
 *
 *	&(const ZkRecipe) {.name = "election",
 *		.idx_first = ELECTION_IDX_BASE, .idx_count = ELECTION_IDX_COUNT,
 *		.event = zklock_election_event,
 *		.connected = zklock_election_connected,
 *		.disconnected = zklock_election_disconnected,
 *		.session_lost = zklock_election_session_lost,
 *		.tick = zklock_election_tick},
 *
 * (its header included above), with every tag of its operations made as
 * TAG(generation, its own op, ELECTION_IDX_BASE + group).
 */
static const ZkRecipe *const recipes[] = {
	&zklock_root_recipe,
	&zklock_sweep_recipe,
	&zklock_orphan_recipe,
	&zklock_election_recipe,
	&zklock_lock_recipe,
	&zklock_listing_recipe,
	&zklock_admin_recipe,
	&zklock_waits_recipe,
	&zklock_queue_recipe,
	&zklock_queue_pending_recipe,
};

#define NRECIPES	lengthof(recipes)
#define RETRY_MS	100			/* lost replies: retried at most this often */

WorkEntry  *zklock_work = NULL;
static int	nwork = 0;
bool		zklock_connected = false;
static uint32 incarnation = 0;
static int64 session_id_now = 0;	/* since connected, until lost */

static bool retry_needed = false;	/* some recipe lost a reply */
static int64 last_retry_us = 0;
static int	gate_at = -1;		/* the recipe whose gate is shut, or -1 */

/* zklock_recipe_session_lost()'s report, while its hooks run */
static const char *loss_why = NULL;
static int *loss_pids;
static int	loss_maxpids;
static int *loss_npids;
static int	loss_nlost;

/* The recipe that serves requests of this kind */
static const ZkRecipe *
recipe_of_kind(ZkEntryKind kind)
{
	for (int i = 0; i < (int) NRECIPES; i++)
	{
		const ZkRecipe *r = recipes[i];

		if (r->kinds & RECIPE_KIND(kind))
			return r;
	}
	return NULL;
}

/* The recipe of a tag's index: its entry's, or the one that reserved it */
static const ZkRecipe *
recipe_of_index(int idx)
{
	if (idx < nwork)
		return recipe_of_kind(zklock_work[idx].kind);
	for (int i = 0; i < (int) NRECIPES; i++)
	{
		const ZkRecipe *r = recipes[i];

		if (r->idx_count > 0 && idx >= r->idx_first &&
			idx < r->idx_first + r->idx_count)
			return r;
	}
	return NULL;
}

/*
 * Set up the worker's table, one WorkEntry per shared entry.
 */
void
zklock_recipe_init(uint32 worker_incarnation)
{
	nwork = zklock_shared->nentries;
	if (nwork > RECIPE_FIRST_RESERVED_IDX)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("zklock.max_locks_per_backend is too large for this many backends")));
	zklock_work = MemoryContextAllocZero(TopMemoryContext,
										 mul_size(nwork, sizeof(WorkEntry)));
	incarnation = worker_incarnation;
	for (int i = 0; i < (int) NRECIPES; i++)
		if (recipes[i]->init)
			recipes[i]->init();
}

/* The worker reloaded the settings */
void
zklock_recipe_reload(void)
{
	for (int i = 0; i < (int) NRECIPES; i++)
		if (recipes[i]->reload)
			recipes[i]->reload();
}

int
zklock_recipe_nentries(void)
{
	return nwork;
}

/* The session the recipes work on: set once connected, 0 once lost */
int64
zklock_recipe_session_id(void)
{
	return session_id_now;
}

/*
 * A backend queued an entry: a new request, or the release of one.
 */
void
zklock_recipe_request(int idx)
{
	WorkEntry  *w = &zklock_work[idx];
	const ZkRecipe *r;
	ZkChannelRequest req;
	ZkEntryState state;
	uint32		gen;

	state = zklock_channel_take(idx, &req, &gen);
	if (state == ZKE_REQUESTED && w->generation != gen)
	{
		/* a new request: take what the worker needs from the entry */
		memset(w, 0, offsetof(WorkEntry, parent));
		w->generation = gen;
		w->kind = req.kind;
		w->mode = req.mode;
		snprintf(w->parent, sizeof(w->parent), "%s/%s", zklock_root,
				 req.resource);
		w->naming = zklock_naming_style(req.resource);
		w->persistent = req.persistent;
		strlcpy(w->ignore_node, req.ignore_node, sizeof(w->ignore_node));
		w->max_holders = req.max_holders;
		zklock_format_node_prefix(w->prefix, sizeof(w->prefix), incarnation,
								  idx, gen, w->persistent);
		w->node[0] = '\0';
		w->since_us = zklock_boottime_us();
		if (!zklock_connected)
			w->phase = PH_DEFERRED;
	}

	if (w->generation != gen)
	{
		/* requested and withdrawn before the worker saw it */
		if (state == ZKE_RELEASING)
			zklock_channel_released(idx, gen);
		return;
	}

	r = recipe_of_kind(w->kind);
	if (state == ZKE_REQUESTED && w->phase == PH_IDLE)
		zklock_recipe_start(idx);
	else if (state == ZKE_GRANTED)
	{
		if (r && r->changed)
			r->changed(idx);	/* the holder's scope changed */
	}
	else if (state == ZKE_RELEASING && !w->release)
	{
		/* delete what was sent, or leave it to the reply in flight */
		w->release = true;
		if (w->phase == PH_DEFERRED)
			zklock_recipe_released(idx);	/* nothing was sent */
		else if (r && r->release)
			r->release(idx);
		else if (w->phase == PH_IDLE)
			zklock_recipe_released(idx);
	}
}

/* Start what a backend asked for, by the recipe of its kind */
void
zklock_recipe_start(int idx)
{
	const ZkRecipe *r = recipe_of_kind(zklock_work[idx].kind);

	if (r && r->start)
		r->start(idx);
}

/*
 * A request ends in failure; the recipe has dropped what it had in flight
 * or leaves it to its replies.  Counted in zk_lock_status.failed.
 */
void
zklock_recipe_fail(int idx, int sqlstate, const char *msg)
{
	WorkEntry  *w = &zklock_work[idx];

	zklock_channel_fail(idx, w->generation, sqlstate, msg, true);
	w->phase = PH_IDLE;
}

/* A request of the recipe's ends in failure, its recipe's way */
static void
end_in_failure(int idx, int sqlstate, const char *msg)
{
	const ZkRecipe *r = recipe_of_kind(zklock_work[idx].kind);

	if (r && r->fail_request)
		r->fail_request(idx, sqlstate, msg);
	else
		zklock_recipe_fail(idx, sqlstate, msg);
}

/* The release is done (nothing of it is left): the entry can be reused */
void
zklock_recipe_released(int idx)
{
	WorkEntry  *w = &zklock_work[idx];

	zklock_channel_released(idx, w->generation);
	w->phase = PH_IDLE;
}

/*
 * A listing's rows (ZKR_LIST, ZKR_ELECTION, ZKR_WAITS) into the segment its
 * backend gave the request, and a NUL, if len + 1 fits (else nothing: the
 * backend asks again with the size zklock_channel_done tells it).  False
 * when the request is no longer REQUESTED or its segment is gone (the
 * backend gave up): the caller must not answer it as done.  The recipes
 * that list call it (listing.c, election_query.c, deadlock_publish.c),
 * then zklock_channel_done with len + 1.
 */
bool
zklock_recipe_put_rows(int idx, const char *rows, Size len)
{
	ZkLockEntry *e = entry(idx);
	Size		size;
	bool		ok;
	dsm_segment *seg = NULL;

	/*
	 * Attached under the lock, while the entry is REQUESTED, as
	 * zklock_queue_segment (queue_util.c): a backend that gives up leaves
	 * REQUESTED under the lock before it detaches, so the handle read here
	 * cannot meanwhile name another backend's new segment.
	 */
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	size = e->list_size;
	ok = e->generation == zklock_work[idx].generation &&
		e->state == ZKE_REQUESTED;
	if (ok && len + 1 <= size)
		seg = dsm_attach(e->list_handle);
	LWLockRelease(zklock_shared->lock);
	if (!ok || len + 1 > size)
		return ok;
	if (seg == NULL)
		return false;			/* the backend gave up meanwhile */
	if (len > 0)
		memcpy(dsm_segment_address(seg), rows, len);
	((char *) dsm_segment_address(seg))[len] = '\0';
	dsm_detach(seg);
	return true;
}

/* Does some recipe refuse new requests now (the root's check)? */
bool
zklock_recipe_refused(int *sqlstate, char *msg, size_t size)
{
	for (int i = 0; i < (int) NRECIPES; i++)
	{
		const ZkRecipe *r = recipes[i];

		if (r->refuses && r->refuses(sqlstate, msg, size))
			return true;
	}
	return false;
}

/* A reply was lost or a send failed: the retry hooks run once connected */
void
zklock_recipe_retry_soon(void)
{
	retry_needed = true;
}

/*
 * A reply or a watch: to the recipe of its index, unless it is for an
 * earlier request of the entry, or the entry is idle.
 */
void
zklock_recipe_event(ZkEvent *ev)
{
	int			idx = TAG_IDX(ev->tag);
	const ZkRecipe *r;

	/*
	 * An exists that found no node: remove the watch it left before the
	 * handler sends anything (a guard, a listing), so that the session
	 * never holds that watch and the next one at once.
	 */
	if (ev->kind == ZKEV_STAT && ev->rc == ZKC_NONODE && zklock_connected)
		zkc_watch_upkeep();
	/* every node watch notification, for zk_lock_status.notifications */
	if (ev->kind == ZKEV_WATCH)
	{
		LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
		zklock_shared->n_notifications++;
		LWLockRelease(zklock_shared->lock);
	}
	if (idx < nwork)
	{
		WorkEntry  *w = &zklock_work[idx];

		if (TAG_GEN(ev->tag) != w->generation || w->phase == PH_IDLE)
			return;				/* a reply for an earlier request */
	}
	r = recipe_of_index(idx);
	if (r && r->event)
		r->event(ev);
}

/*
 * The session is connected: the first recipe from "from" on whose gate
 * holds the others back (root.c's check) has it; once every gate is open,
 * every recipe hears of the connection, and requests that waited for it
 * start.
 */
static void
open_gates(int from, int64 session_id)
{
	for (int i = from; i < (int) NRECIPES; i++)
	{
		if (recipes[i]->gate && recipes[i]->gate(session_id))
		{
			gate_at = i;
			return;
		}
	}
	gate_at = -1;
	zklock_connected = true;
	session_id_now = session_id;
	retry_needed = false;
	for (int i = 0; i < (int) NRECIPES; i++)
	{
		const ZkRecipe *r = recipes[i];

		if (r->connected)
			r->connected(session_id);
	}
	for (int i = 0; i < nwork; i++)
	{
		if (zklock_work[i].phase == PH_DEFERRED)
		{
			zklock_work[i].phase = PH_IDLE;
			zklock_recipe_start(i);
		}
	}
}

void
zklock_recipe_connected(int64 session_id)
{
	open_gates(0, session_id);
}

/* The recipe whose gate was shut is done with its check */
void
zklock_recipe_gate_done(void)
{
	open_gates(gate_at + 1, zkc_session_id());
}

void
zklock_recipe_disconnected(void)
{
	zklock_connected = false;
	for (int i = 0; i < (int) NRECIPES; i++)
	{
		const ZkRecipe *r = recipes[i];

		if (r->disconnected)
			r->disconnected();
	}
}

/*
 * The session is gone (expired or closed): so is every node it created.
 * Returns how many held locks were marked lost, and the PIDs of their
 * backends in pids[] (each once, at most maxpids of them; *npids says how
 * many): each recipe reports them with zklock_recipe_lost_lock().
 */
int
zklock_recipe_session_lost(const char *why, int *pids, int maxpids,
						   int *npids)
{
	*npids = 0;
	zklock_connected = false;
	session_id_now = 0;
	loss_why = why;
	loss_pids = pids;
	loss_maxpids = maxpids;
	loss_npids = npids;
	loss_nlost = 0;
	for (int i = 0; i < (int) NRECIPES; i++)
	{
		const ZkRecipe *r = recipes[i];

		if (r->session_lost)
			r->session_lost();
	}
	loss_why = NULL;
	return loss_nlost;
}

/* Why the session was lost, while the session_lost hooks run */
const char *
zklock_recipe_loss_why(void)
{
	return loss_why ? loss_why : "";
}

/* A lock held by this backend was lost with the session */
void
zklock_recipe_lost_lock(int pid)
{
	int			k;

	loss_nlost++;
	for (k = 0; k < *loss_npids && loss_pids[k] != pid; k++)
		;
	if (k == *loss_npids && *loss_npids < loss_maxpids)
		loss_pids[(*loss_npids)++] = pid;
}

/*
 * Remove the watches no longer wanted, and show how many the session has
 * set (zk_lock_status); at every pass of the worker's loop.  A new session
 * starts with none (zkc_close() frees the previous handle's).
 */
static void
watches_upkeep(void)
{
	static uint64 shown = PG_UINT64_MAX;	/* what n_watches says */
	uint64		n;

	if (zklock_connected)
		zkc_watch_upkeep();
	n = zkc_watch_count();
	if (n != shown)
	{
		LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
		zklock_shared->n_watches = n;
		LWLockRelease(zklock_shared->lock);
		shown = n;
	}
}

/*
 * zklock.connect_timeout for a request that waits for a connection since
 * w->since_us: true when it has passed; otherwise *next_ms (-1: none) is
 * lowered to the milliseconds left.
 */
bool
zklock_recipe_deadline_passed(WorkEntry *w, int64 now_us, long *next_ms)
{
	int64		deadline_us = w->since_us +
		zklock_connect_timeout * INT64CONST(1000);
	long		ms;

	if (now_us >= deadline_us)
		return true;
	ms = (long) ((deadline_us - now_us + 999) / 1000);
	if (*next_ms < 0 || ms < *next_ms)
		*next_ms = ms;
	return false;
}

/*
 * Fail the requests that have waited for a connection longer than
 * zklock.connect_timeout.  Returns the milliseconds until the next such
 * deadline, or -1 when none is pending.
 */
static long
deferred_deadlines(int64 now_us)
{
	long		next = -1;

	for (int i = 0; i < nwork; i++)
	{
		WorkEntry  *w = &zklock_work[i];

		if (w->phase != PH_DEFERRED)
			continue;
		if (zklock_recipe_deadline_passed(w, now_us, &next))
		{
			char		msg[ZKLOCK_MAX_ERROR_LEN + 1];

			snprintf(msg, sizeof(msg),
					 "could not connect to ZooKeeper at \"%s\" within %d ms",
					 zklock_hosts, zklock_connect_timeout);
			end_in_failure(i, ERRCODE_CONNECTION_FAILURE, msg);
		}
	}
	return next;
}

static long
min_ms(long a, long b)
{
	return (a < 0 || (b >= 0 && b < a)) ? b : a;
}

/*
 * The timers, at every pass of the worker's loop: the recipes' own, the
 * retry of lost replies (once connected, at most every RETRY_MS), and the
 * deadline of requests that wait for a connection.  Returns the
 * milliseconds until the next one is due, or -1 when none is.
 */
long
zklock_recipe_tick(void)
{
	int64		now_us = zklock_boottime_us();
	long		next = -1;

	watches_upkeep();
	for (int i = 0; i < (int) NRECIPES; i++)
	{
		const ZkRecipe *r = recipes[i];

		if (r->tick)
			next = min_ms(next, r->tick());
	}
	if (zklock_connected)
	{
		if (retry_needed && now_us - last_retry_us >= RETRY_MS * INT64CONST(1000))
		{
			retry_needed = false;
			last_retry_us = now_us;
			for (int i = 0; i < (int) NRECIPES; i++)
			{
				const ZkRecipe *r = recipes[i];

				if (r->retry)
					r->retry();
			}
		}
		return min_ms(next, retry_needed ? RETRY_MS : -1);
	}
	return min_ms(next, deferred_deadlines(now_us));
}
