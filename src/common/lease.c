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
 * The commit window.  A fence that passed vouches for a commit record
 * that is written later: PreCommit_Notify may wait for a lock, a slow
 * disk may stall the write.  So zklock never ends a session itself (a
 * worker restart, a reload of zklock.hosts, a shutdown, an ERROR in the
 * worker, the postmaster's death) while such a commit can still land.  A
 * backend whose fence passed marks its slot with the session the fence
 * trusted, in the same locked section as its last look at the lease
 * (zklock_lease_enter_commit), and clears it when its transaction has
 * ended or it exits (zklock_lease_leave_commit).  The worker withdraws the
 * lease under the lock in exclusive mode before it ends a session, so no
 * mark for that session appears after that; it then waits until none is
 * left (zklock_lease_commits_pending) before it closes the session.  The
 * mark is cleared at XACT_EVENT_COMMIT, which comes after a synchronous
 * replication wait: the session is kept through that wait too.
 *
 * A leadership fence (fence.c) also records in its slot, with the mark,
 * which election groups it vouched for (commit_groups, a bit per group
 * slot).  A group that is left waits only for the windows that name it
 * (election.c): a commit under a lock, or under another group's
 * leadership, keeps the session but not the group's node.  A bit can
 * only be set while its group slot leads (the fence sees it lead in the
 * same locked section); a bit left by an earlier candidacy of the same
 * slot, in a window still open, makes a later leave wait for it too:
 * longer than needed, never shorter, and bounded as below.
 *
 * Each wait (a session's close, a group's leave: ZkCommitWait) is logged
 * after a second, and after a session timeout cancels the backends it
 * waits for, once (lease_cancel_windows).  The cancel takes the lock in
 * exclusive mode and signals only a slot whose mark it sees there: a
 * backend clears its mark under the lock in shared mode, before it exits
 * too, so the backend signalled is still in that window (its PID cannot
 * belong to a later backend of the slot or to another process).
 *
 * Shared state: lease_session and lease_end in ZkLockShared, written by the
 * worker only (this file), under zklock_shared->lock; commit_session[slot]
 * and commit_groups[slot], written by the backend of that slot only (this
 * file), set and cleared under the lock in shared mode, read by the
 * worker (the groups under the lock).  Everything else here is the
 * worker's own memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include <signal.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/proc.h"

#include "compat.h"
#include "failpoint.h"
#include "wait_events.h"
#include "lease.h"
#include "zklock.h"
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

/*
 * Backend side: is session_id the session the lease is for, i.e. one the
 * worker has not begun to end (it withdraws the lease first, before it
 * marks the locks lost and closes the session), whether the lease covers
 * it now or not?  The caller holds zklock_shared->lock (either mode).
 */
bool
zklock_lease_session_live_locked(int64 session_id)
{
	return session_id != 0 && zklock_shared->lease_session == session_id;
}

/*
 * Backend side, at the end of a commit fence that passed: mark this
 * backend's commit window with session_id, if the lease still covers it,
 * in one locked section with that look at the lease.  False: it does not
 * (any more); the fence must prove the locks held again.
 */
bool
zklock_lease_enter_commit(int64 session_id)
{
	int64		left;
	bool		covered;

	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	covered = zklock_lease_covers_locked(session_id, &left);
	if (covered)
		pg_atomic_write_u64(&zklock_shared->commit_session[ZKLOCK_MY_PROCNO],
							(uint64) session_id);
	LWLockRelease(zklock_shared->lock);
	return covered;
}

/*
 * Backend side: open the commit window for session_id, for a fence that
 * has just looked at the lease (and at what it covers) in the locked
 * section the caller holds (the leadership fence, fence.c); groups: the
 * election group slots (a bit each) it saw lead there.  The groups are
 * added before the mark is written, so that a worker that sees the mark
 * sees them.
 */
void
zklock_lease_mark_commit_locked(int64 session_id, uint32 groups)
{
	zklock_shared->commit_groups[ZKLOCK_MY_PROCNO] |= groups;
	pg_write_barrier();
	pg_atomic_write_u64(&zklock_shared->commit_session[ZKLOCK_MY_PROCNO],
						(uint64) session_id);
}

/*
 * Backend side: this backend's transaction has ended (committed, its
 * record written, or aborted), or the backend exits: no commit of it can
 * land any more.  Never fails; cheap when the window is not open.
 */
void
zklock_lease_leave_commit(void)
{
	pg_atomic_uint64 *mine;
	bool		locked;

	if (zklock_shared == NULL || MyProc == NULL)
		return;
	mine = &zklock_shared->commit_session[ZKLOCK_MY_PROCNO];
	if (pg_atomic_read_u64(mine) == 0)
		return;
	/* under the lock: the worker's cancel must not signal a later use */
	locked = !LWLockHeldByMe(zklock_shared->lock);
	if (locked)
		LWLockAcquire(zklock_shared->lock, LW_SHARED);
	pg_atomic_write_u64(mine, 0);
	pg_write_barrier();
	zklock_shared->commit_groups[ZKLOCK_MY_PROCNO] = 0;
	if (locked)
		LWLockRelease(zklock_shared->lock);
}

/*
 * Is slot i's window open for session_id and, when groups is not 0, does
 * it vouch for one of those group slots?  The mark is read before the
 * groups (they are written in the other order).
 */
static bool
lease_window_matches(int i, int64 session_id, uint32 groups)
{
	if (pg_atomic_read_u64(&zklock_shared->commit_session[i]) !=
		(uint64) session_id)
		return false;
	pg_read_barrier();
	return groups == 0 || (zklock_shared->commit_groups[i] & groups) != 0;
}

/*
 * Worker side, after the lease (or a group's leadership) was withdrawn:
 * how many backends may still write a commit record that a fence passed
 * under session_id, vouching for one of the group slots in groups (0:
 * any fence).  Their PIDs go to pids[] (at most maxpids of them).
 */
int
zklock_lease_commits_pending(int64 session_id, uint32 groups, int *pids,
							 int maxpids)
{
	int			n = 0;

	if (session_id == 0)
		return 0;
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	for (int i = 0; i < zklock_shared->nslots; i++)
	{
		if (!lease_window_matches(i, session_id, groups))
			continue;
		if (n < maxpids)
			pids[n] = ProcGlobal->allProcs[i].pid;
		n++;
	}
	LWLockRelease(zklock_shared->lock);
	return n;
}

/*
 * Worker side: is the commit window of the backend in slot procno open for
 * session_id (a fence that passed under it vouches for a commit that may
 * still land)?  Read after the caller marked that backend's lock lost
 * under zklock_shared->lock (exclusive): a fence that opens the window
 * after that sees the lock lost (fence.c looks again after opening it).
 */
bool
zklock_lease_window_open(int procno, int64 session_id)
{
	if (session_id == 0 || procno < 0 || procno >= zklock_shared->nslots)
		return false;
	return pg_atomic_read_u64(&zklock_shared->commit_session[procno]) ==
		(uint64) session_id;
}

/*
 * Worker side: cancel (SIGINT) the backend of slot procno if its commit
 * window is still open for session_id and the slot is still pid's.  The
 * look and the signal are made under the lock in exclusive mode, as
 * lease_cancel_windows does: a backend closes its window under the lock
 * (also before it exits), so the backend signalled is still in it.
 */
void
zklock_lease_cancel_window(int procno, int pid, int64 session_id)
{
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (zklock_lease_window_open(procno, session_id) &&
		ProcGlobal->allProcs[procno].pid == pid && pid != 0)
		(void) kill(pid, SIGINT);
	LWLockRelease(zklock_shared->lock);
}

/*
 * Worker side: CLOCK_BOOTTIME us of the last answer that proved the
 * session alive (its creation, or a sync), 0 when none.
 */
int64
zklock_lease_last_answer(void)
{
	return lease_nproofs > 0 ? lease_proofs[lease_nproofs - 1].answered : 0;
}

/* "pid, pid, ..." of the backends a wait waits for */
static char *
lease_window_pids(ZkCommitWait *w, int *n)
{
	int		   *pids = palloc(sizeof(int) * zklock_shared->nslots);
	StringInfoData list;

	*n = zklock_lease_commits_pending(w->session_id, w->groups, pids,
									  zklock_shared->nslots);
	initStringInfo(&list);
	for (int i = 0; i < Min(*n, zklock_shared->nslots); i++)
		appendStringInfo(&list, "%s%d", i > 0 ? ", " : "", pids[i]);
	pfree(pids);
	return list.data;
}

/*
 * Cancel (SIGINT, as pg_cancel_backend) the backends whose window a wait
 * still waits for.  A commit waiting before its record (for a lock, a
 * remote server) then fails; one waiting after it (for a synchronous
 * standby) completes locally.  Either way its window closes.  Under the
 * lock in exclusive mode, so that no backend can close its window (and
 * go on to other work, or exit and leave its slot and PID to another
 * process) between the look at its mark and the signal: only a backend
 * still in the window is signalled.
 */
static void
lease_cancel_windows(ZkCommitWait *w)
{
	/*
	 * failpoint "sleep" or "pause": the windows were counted, the cancel
	 * not sent; a backend may leave its window meanwhile, and must not be
	 * signalled then
	 */
	(void) ZKLOCK_FAILPOINT("before-commit-cancel");
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < zklock_shared->nslots; i++)
	{
		int			pid = ProcGlobal->allProcs[i].pid;

		if (lease_window_matches(i, w->session_id, w->groups) && pid != 0)
		{
			/*
			 * failpoint "sleep" only (the lock is held): the window was
			 * seen open, the signal not sent; its backend cannot close it
			 * meanwhile
			 */
			(void) ZKLOCK_FAILPOINT("commit-cancel-locked");
			(void) kill(pid, SIGINT);
		}
	}
	LWLockRelease(zklock_shared->lock);
}

/*
 * A wait for the commit windows of session_id (those vouching for one of
 * groups, when not 0); group names the election group left (NULL: the
 * session is closed), for the log.
 */
void
zklock_commit_wait_init(ZkCommitWait *w, int64 session_id, uint32 groups,
						const char *group)
{
	w->session_id = session_id;
	w->groups = groups;
	w->group = group;
	w->since = zklock_boottime_us();
	w->next_log_ms = 1000;
	w->cancelled = false;
}

/* The wait's LOG line: what is kept, for how many, whether cancelled now */
static void
lease_wait_log(ZkCommitWait *w, bool cancel)
{
	int			n;
	char	   *pids = lease_window_pids(w, &n);
	const char *note = cancel ?
		" They have waited for a session timeout and are cancelled now." : "";

	if (w->group == NULL)
		ereport(LOG,
				(errmsg_plural("zklock: keeping ZooKeeper session 0x%llx open until %d commit that passed the commit fence has ended",
							   "zklock: keeping ZooKeeper session 0x%llx open until %d commits that passed the commit fence have ended",
							   n, (unsigned long long) w->session_id, n),
				 errdetail("Backends (PID): %s.%s", pids, note)));
	else
		ereport(LOG,
				(errmsg_plural("zklock: keeping the candidate node of election group \"%s\" until %d commit that relied on its leadership has ended",
							   "zklock: keeping the candidate node of election group \"%s\" until %d commits that relied on its leadership have ended",
							   n, w->group, n),
				 errdetail("Backends (PID): %s.%s", pids, note)));
	pfree(pids);
}

/*
 * One look: how many windows the wait still waits for.  Logs after a
 * second and then every minute, naming the backends; after a session
 * timeout cancels them, once; the wait goes on until their windows are
 * closed.  Once none is left, logs the end when it took a second or more.
 */
int
zklock_commit_wait_poll(ZkCommitWait *w)
{
	int64		waited_ms = (zklock_boottime_us() - w->since) / 1000;
	int64		cancel_ms = Max(zkc_negotiated_timeout(), zklock_session_timeout);
	int			n = zklock_lease_commits_pending(w->session_id, w->groups,
												 NULL, 0);
	bool		cancel = !w->cancelled && waited_ms >= cancel_ms;

	if (n == 0)
	{
		if (waited_ms >= 1000 && w->group == NULL)
			ereport(LOG,
					(errmsg("zklock: the commits that passed the commit fence under ZooKeeper session 0x%llx have ended after %ld ms; closing it",
							(unsigned long long) w->session_id, (long) waited_ms)));
		else if (waited_ms >= 1000)
			ereport(LOG,
					(errmsg("zklock: the commits that relied on the leadership of election group \"%s\" have ended after %ld ms; deleting its candidate node",
							w->group, (long) waited_ms)));
		return 0;
	}
	if (waited_ms >= w->next_log_ms || cancel)
	{
		lease_wait_log(w, cancel);
		if (cancel)
		{
			lease_cancel_windows(w);
			w->cancelled = true;
		}
		if (waited_ms >= w->next_log_ms)
			w->next_log_ms = (waited_ms / 60000 + 1) * 60000;
	}
	return n;
}

/*
 * Worker side, before it ends a session that may still be alive (see "The
 * commit window" above): wait until no window is open for session_id.  A
 * commit is normally through in microseconds; one that waits keeps the
 * session, and every lock node of this instance, until it has ended,
 * logged and cancelled as zklock_commit_wait_poll says, so that nobody (a
 * synchronous standby that is down, a remote server that hangs) holds the
 * worker's restart, reload or new session without a bound.  serve, when
 * not NULL, is called every 10 ms meanwhile (the main loop's work);
 * without it, the worker sleeps.  The postmaster's death does not end the
 * wait: its orphaned backends may still commit.
 */
void
zklock_lease_wait_for_commits(int64 session_id, void (*serve) (void))
{
	ZkCommitWait w;

	zklock_commit_wait_init(&w, session_id, 0, NULL);
	while (zklock_commit_wait_poll(&w) > 0)
	{
		if (serve)
		{
			int			rc = WaitLatch(MyLatch,
									   WL_LATCH_SET | WL_TIMEOUT | WL_POSTMASTER_DEATH,
									   10, ZKLOCK_WORKER_WAIT_EVENT);

			ResetLatch(MyLatch);
			if (rc & WL_POSTMASTER_DEATH)
				serve = NULL;
			else
				serve();
		}
		else
			pg_usleep(10000L);
	}
}
