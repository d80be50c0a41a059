/*-------------------------------------------------------------------------
 *
 * lease.h
 *		The session lease behind the commit fence (see lease.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_LEASE_H
#define ZKLOCK_LEASE_H

/*
 * The lease is common/'s one edge up to client/: its worker half
 * (zklock_lease_event, zklock_lease_tick, in lease.c) sends the sync whose
 * answer, from ZooKeeper's leader, is the only proof that the session is
 * alive, and reads the session's negotiated timeout; so lease.c includes
 * client/zk_client.h.  This header names the answer, ZkEvent, as an
 * incomplete type, so that the backends that read the lease include nothing
 * of the client.
 */
struct ZkEvent;

/*
 * The worker's wait for commit windows: a session's close, or a group's
 * leave (see "The commit window" in lease.c)
 */
typedef struct ZkCommitWait
{
	int64		session_id;
	uint32		groups;			/* group slots' bits; 0: every window */
	const char *group;			/* the group left, for the log; NULL: the
								 * session is closed */
	int64		since;			/* CLOCK_BOOTTIME us */
	int64		next_log_ms;	/* after since */
	bool		cancelled;		/* the backends were cancelled */
} ZkCommitWait;

/* both sides */
extern int64 zklock_boottime_us(void);

/* worker side */
extern void zklock_lease_session_started(int64 session_id, int64 since_us);
extern void zklock_lease_end_session(void);
extern void zklock_lease_event(struct ZkEvent *ev);
extern long zklock_lease_tick(bool connected);
extern int	zklock_lease_commits_pending(int64 session_id, uint32 groups,
										 int *pids, int maxpids);
extern void zklock_commit_wait_init(ZkCommitWait *w, int64 session_id,
									uint32 groups, const char *group);
extern int	zklock_commit_wait_poll(ZkCommitWait *w);
extern int64 zklock_lease_last_answer(void);
extern bool zklock_lease_window_open(int procno, int64 session_id);
extern void zklock_lease_cancel_window(int procno, int pid,
									   int64 session_id);
extern void zklock_lease_wait_for_commits(int64 session_id,
										  void (*serve) (void));

/* backend side */
extern bool zklock_lease_covers(int64 session_id, int64 *remaining_ms);
extern bool zklock_lease_covers_locked(int64 session_id, int64 *remaining_ms);
extern bool zklock_lease_session_live_locked(int64 session_id);
extern bool zklock_lease_enter_commit(int64 session_id);
extern void zklock_lease_leave_commit(void);
extern void zklock_lease_mark_commit_locked(int64 session_id, uint32 groups);

#endif							/* ZKLOCK_LEASE_H */
