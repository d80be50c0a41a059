/*-------------------------------------------------------------------------
 *
 * lease.h
 *		The session lease behind the commit fence (see lease.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_LEASE_H
#define ZKLOCK_LEASE_H

#include "zk_client.h"

/* both sides */
extern int64 zklock_boottime_us(void);

/* worker side */
extern void zklock_lease_session_started(int64 session_id, int64 since_us);
extern void zklock_lease_end_session(void);
extern void zklock_lease_event(ZkEvent *ev);
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
