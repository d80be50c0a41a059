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

/* both sides */
extern int64 zklock_boottime_us(void);

/* worker side */
extern void zklock_lease_session_started(int64 session_id, int64 since_us);
extern void zklock_lease_end_session(void);
extern void zklock_lease_event(struct ZkEvent *ev);
extern long zklock_lease_tick(bool connected);
extern int	zklock_lease_commits_pending(int64 session_id, int *pids,
										 int maxpids);
extern int64 zklock_lease_last_answer(void);
extern void zklock_lease_wait_for_commits(int64 session_id,
										  void (*serve) (void));

/* backend side */
extern bool zklock_lease_covers(int64 session_id, int64 *remaining_ms);
extern bool zklock_lease_covers_locked(int64 session_id, int64 *remaining_ms);
extern bool zklock_lease_enter_commit(int64 session_id);
extern void zklock_lease_leave_commit(void);
extern void zklock_lease_mark_commit_locked(int64 session_id);

#endif							/* ZKLOCK_LEASE_H */
