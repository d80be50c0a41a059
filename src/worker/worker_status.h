/*-------------------------------------------------------------------------
 *
 * worker_status.h
 *		What the worker shows of its session (worker_status.c).  Only
 *		worker.c includes it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_WORKER_STATUS_H
#define ZKLOCK_WORKER_STATUS_H

#include "zklock.h"

/* worker_status.c */
extern void zklock_status_set(ZkSessionState state, int64 session_id,
							  const char *error);
extern void zklock_status_handle_failed(const char *what, const char *err,
										int retry_ms);
extern void zklock_status_handle_made(void);
extern void zklock_outage_from_now(void);
extern void zklock_outage_restart(void);
extern int64 zklock_outage_ms(void);
extern long zklock_outage_seconds(void);
extern bool zklock_outage_report(void);
extern void zklock_outage_ended(void);
extern const char *zklock_auth_failure_hint(const char *why, bool kerberos);

#endif							/* ZKLOCK_WORKER_STATUS_H */
