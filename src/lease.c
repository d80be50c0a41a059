/*-------------------------------------------------------------------------
 *
 * lease.c
 *		The session lease: how long this instance's ZooKeeper session is
 *		proven alive, for the commit fence.
 *
 * A flag in shared memory proves nothing about the session: the worker that
 * writes it can be stopped (SIGSTOP, swap, a debugger), and a follower cut
 * from its leader goes on answering pings and reads while the leader
 * expires the session.  Only the leader expires sessions, and only a reply
 * that the leader itself gave proves that it still counted ours.  So the
 * worker sends a sync (which the connected server forwards to the leader,
 * and the leader answers only for a live session) every refresh interval,
 * and derives from the replies a time until which the session cannot have
 * expired: the lease.  Backends check the lease against their own reading
 * of the same clock; a stalled worker simply stops extending it.
 *
 * The rule.  The leader expires a session a session timeout T after it last
 * heard of it.  A follower tells the leader what it heard from its clients
 * with its answers to the leader's pings, every half tick, on the same
 * stream on which it forwards requests.  So when sync k (sent at t_k) is
 * answered, and an earlier sync j was answered at a_j with a_j + margin <=
 * t_k (margin >= half a tick), the follower received j before it forwarded
 * k and reported j to the leader in between: the leader heard of the
 * session at or after t_j, and cannot expire it before t_j + T.  (Had the
 * connection broken after j, the reconnection itself would have been
 * checked by the leader, later still; had the session expired, k would have
 * failed.)  The session's creation counts as an answer, sent when the
 * worker asked for the session.  The lease is the largest such t_j + T.
 *
 * Times are CLOCK_BOOTTIME: it keeps counting while the machine is
 * suspended and is never stepped, unlike the wall clock; CLOCK_MONOTONIC
 * stops in a suspend.  Every process of the machine reads the same clock.
 *
 * The commit fence (backend.c) passes while the lease reaches at least
 * zklock.lease_margin beyond the backend's own "now": the margin is the
 * longest pause between the fence and the commit record that cannot let
 * another holder in.  The worker refreshes every quarter of the session
 * timeout (at least margin + 100 ms apart, so that consecutive syncs prove
 * each other), and sooner when the lease runs short.
 *
 * Shared state: lease_session and lease_end in ZkLockShared, written by the
 * worker only (this file), under zklock_shared->lock.  Everything else here
 * is the worker's own memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "lease.h"
#include "settings.h"
#include "shmem.h"
#include "zk_client.h"

#define LEASE_PROOFS		8	/* answered syncs remembered */
#define LEASE_IN_FLIGHT		4	/* syncs in flight at once */
#define LEASE_MIN_REFRESH_MS 100

typedef struct LeaseProof
{
	int64		sent;			/* when the request was handed to the client */
	int64		answered;		/* when its reply was seen */
} LeaseProof;

typedef struct LeaseSync
{
	uint64		seq;			/* 0: slot free */
	int64		sent;
} LeaseSync;

static int64 lease_session_id = 0;	/* the session proofs are for */
static int64 lease_end_us = 0;		/* what was published */
static LeaseProof lease_proofs[LEASE_PROOFS];	/* oldest first */
static int	lease_nproofs = 0;
static LeaseSync lease_syncs[LEASE_IN_FLIGHT];
static uint64 lease_seq = 0;
static int64 lease_last_sent = 0;

/* Microseconds on CLOCK_BOOTTIME */
int64
zklock_boottime_us(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_BOOTTIME, &ts) != 0)
		elog(ERROR, "clock_gettime(CLOCK_BOOTTIME) failed: %m");
	return (int64) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Refresh interval in ms for a negotiated timeout */
static int
lease_refresh_ms(int timeout_ms)
{
	int			r = timeout_ms / 4;

	r = Max(r, zklock_lease_margin + LEASE_MIN_REFRESH_MS);
	r = Min(r, timeout_ms / 3);
	return Max(r, LEASE_MIN_REFRESH_MS);
}

static void
lease_publish(void)
{
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	zklock_shared->lease_session = lease_session_id;
	zklock_shared->lease_end = lease_end_us;
	LWLockRelease(zklock_shared->lock);
}

static void
lease_forget(void)
{
	lease_session_id = 0;
	lease_end_us = 0;
	lease_nproofs = 0;
	memset(lease_syncs, 0, sizeof(lease_syncs));
	lease_last_sent = 0;
}

static void
lease_add_proof(int64 sent, int64 answered)
{
	if (lease_nproofs == LEASE_PROOFS)
	{
		memmove(&lease_proofs[0], &lease_proofs[1],
				sizeof(LeaseProof) * (LEASE_PROOFS - 1));
		lease_nproofs--;
	}
	lease_proofs[lease_nproofs].sent = sent;
	lease_proofs[lease_nproofs].answered = answered;
	lease_nproofs++;
}

/*
 * A new session: its creation is the first proof, "sent" when the worker
 * asked for the session (the leader created it later than that).
 */
void
zklock_lease_session_started(int64 session_id, int64 since_us)
{
	lease_forget();
	lease_session_id = session_id;
	lease_add_proof(since_us, zklock_boottime_us());
	lease_publish();
}

/*
 * The session is over, or about to be closed: nothing is proven any more.
 * Called before the handle is closed, so that no backend trusts a session
 * that is going away.
 */
void
zklock_lease_end_session(void)
{
	lease_forget();
	lease_publish();
}

/* A sync came back */
void
zklock_lease_event(ZkEvent *ev)
{
	LeaseSync  *s = &lease_syncs[ev->tag % LEASE_IN_FLIGHT];
	int64		now = zklock_boottime_us();
	int64		sent;
	int64		margin_us = (int64) zklock_lease_margin * 1000;
	int64		best = 0;

	if (s->seq != ev->tag || lease_session_id == 0)
		return;					/* forgotten: an earlier session's */
	sent = s->sent;
	s->seq = 0;
	if (ev->rc != ZKC_OK)
		return;					/* proves nothing; the next one may */

	/* the latest earlier answer that this sync proves was reported */
	for (int i = 0; i < lease_nproofs; i++)
		if (lease_proofs[i].answered + margin_us <= sent)
			best = Max(best, lease_proofs[i].sent);
	lease_add_proof(sent, now);
	if (best == 0)
		return;
	best += (int64) zkc_negotiated_timeout() * 1000;
	if (best > lease_end_us)
	{
		lease_end_us = best;
		lease_publish();
	}
}

/*
 * Send a sync when one is due: every refresh interval, or, when the lease
 * runs short, as soon as the last answer is a margin old.  Returns the ms
 * until the next one is due, or -1 when not connected.
 */
long
zklock_lease_tick(bool connected)
{
	int64		now;
	int			timeout_ms = zkc_negotiated_timeout();
	int			refresh_ms;
	int64		due;
	int64		last_answer = 0;
	LeaseSync  *s;

	if (!connected || lease_session_id == 0 || timeout_ms <= 0)
		return -1;
	now = zklock_boottime_us();
	refresh_ms = lease_refresh_ms(timeout_ms);
	due = lease_last_sent + (int64) refresh_ms * 1000;
	if (lease_nproofs > 0)
		last_answer = lease_proofs[lease_nproofs - 1].answered;
	if (lease_end_us - now < (int64) (zklock_lease_margin + refresh_ms) * 1000)
	{
		/* short: as soon as the last answer can be proven by a new sync */
		int64		soon = Max(last_answer + (int64) zklock_lease_margin * 1000,
							   lease_last_sent + LEASE_MIN_REFRESH_MS * 1000);

		due = Min(due, soon);
	}
	if (now < due)
		return (long) ((due - now) / 1000) + 1;

	lease_seq++;
	s = &lease_syncs[lease_seq % LEASE_IN_FLIGHT];
	s->seq = lease_seq;
	s->sent = now;
	lease_last_sent = now;
	if (!zkc_sync("/", lease_seq))
		s->seq = 0;				/* not even sent; try again next time */
	return refresh_ms;
}

/*
 * Backend side: is the session that created a node proven alive for at
 * least zklock.lease_margin more?  *remaining_ms gets what is left beyond
 * the margin (negative when not covered).  The caller holds
 * zklock_shared->lock (either mode).
 */
bool
zklock_lease_covers_locked(int64 session_id, int64 *remaining_ms)
{
	int64		left;

	if (session_id == 0 || zklock_shared->lease_session != session_id)
	{
		*remaining_ms = -1;
		return false;
	}
	left = (zklock_shared->lease_end - zklock_boottime_us()) / 1000 -
		zklock_lease_margin;
	*remaining_ms = left;
	return left >= 0;
}

/* The same, taking the lock */
bool
zklock_lease_covers(int64 session_id, int64 *remaining_ms)
{
	bool		covered;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	covered = zklock_lease_covers_locked(session_id, remaining_ms);
	LWLockRelease(zklock_shared->lock);
	return covered;
}
