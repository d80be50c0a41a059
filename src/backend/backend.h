/*-------------------------------------------------------------------------
 *
 * backend.h
 *		The backend side, as the SQL functions and _PG_init call it: a
 *		backend's first use and session-level releases (backend.c),
 *		taking locks and lock sets (acquire.c), explicit locks, listings
 *		and administrators' requests (request.c), the DROP EXTENSION count
 *		(guard.c).  What those files share among themselves is in
 *		backend_int.h.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_BACKEND_H
#define ZKLOCK_BACKEND_H

#include "zklock.h"

extern void zklock_check_loaded(void);
extern void zklock_backend_init(void);
extern int	zklock_database_locks(Oid dbid, int *first_pid);
extern int64 zklock_lock(const char *resource, ZkLockMode mode,
						 bool session, bool wait, int timeout_ms,
						 bool parents, bool *acquired);
extern int64 zklock_semaphore_lock(const char *resource, int max_holders,
								   bool session, bool wait, int timeout_ms,
								   bool *acquired);
extern bool zklock_lock_set(int n, char **resources, ZkLockMode *modes,
							bool session, bool wait, int timeout_ms,
							int64 *tokens);
extern bool zklock_unlock(const char *resource, ZkLockMode mode);
extern int	zklock_unlock_all(void);
extern char *zklock_list_nodes(const char *subtree, Size *len);
extern int64 zklock_lock_explicit(const char *resource, ZkLockMode mode,
								  int64 ttl_ms, int timeout_ms);
extern bool zklock_admin_node(const char *resource, const char *node,
							  ZkEntryKind kind, const char *data);

/*
 * advisory keys (under ZKLOCK_ADVISORY_PREFIX, resource.h) for advisory.c:
 * taken by acquire.c, released by backend.c; the namespace's checks are
 * advisory.c's
 */
extern bool zklock_lock_advisory(const char *resource, ZkLockMode mode,
								 bool session, bool wait);
extern bool zklock_unlock_advisory(const char *resource, ZkLockMode mode);
extern void zklock_unlock_all_advisory(void);
extern const char *zklock_advisory_namespace_form(const char *value);
extern const char *zklock_advisory_namespace_problem(const char *value);

/* queue.c: the distributed queue (1.9) */
extern char *zklock_queue_put_now(const char *queue, const char *item,
								  Size len, int priority);
extern int64 zklock_queue_length(const char *queue);
extern int64 zklock_queue_purge(const char *queue);
extern void zklock_queue_check_room(const char *queue);
extern bool zklock_queue_peek(const char *queue, char **id, bytea **item,
							  int *priority);
extern bool zklock_queue_take(const char *queue, bool wait, int timeout_ms,
							  char **id, bytea **item, int *priority);
extern void zklock_queue_fence(void);
extern void zklock_queue_prepare_check(void);
extern void zklock_queue_xact_end(bool commit);
extern void zklock_queue_subxact_end(bool commit, SubTransactionId mySubid,
									 SubTransactionId parentSubid);
extern void zklock_queue_at_exit(void);

/* queue_put.c: the transactional put */
extern char *zklock_queue_put(const char *queue, const char *item, Size len,
							  int priority);
extern void zklock_queue_puts_pend(void);
extern void zklock_queue_puts_prepare_check(void);
extern void zklock_queue_puts_end(bool commit);
extern void zklock_queue_puts_subxact_end(bool commit,
										  SubTransactionId mySubid,
										  SubTransactionId parentSubid);

#endif							/* ZKLOCK_BACKEND_H */
