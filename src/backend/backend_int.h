/*-------------------------------------------------------------------------
 *
 * backend_int.h
 *		What the files of the backend side share: the local lock table
 *		(local_locks.c), the request and its wait (wait.c), the DROP
 *		EXTENSION guard (guard.c), the commit fence (fence.c) and the
 *		deadlock search (deadlock.c, deadlock_read.c), and an acquisition's
 *		steps (acquire.c, acquire_batch.c).  Only those files, backend.c,
 *		request.c, holder.c and leader.c include it; the rest of zklock calls the
 *		backend side through backend.h.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_BACKEND_INT_H
#define ZKLOCK_BACKEND_INT_H

#include "datatype/timestamp.h"
#include "utils/hsearch.h"

#include "channel.h"
#include "zklock.h"

typedef struct LocalLockKey
{
	char		resource[ZKLOCK_MAX_RESOURCE_LEN + 1];
	ZkLockMode	mode;
} LocalLockKey;

/* A transaction-level hold: who took it, and whether for a child's sake */
typedef struct XactHold
{
	SubTransactionId subid;
	bool		implicit;
} XactHold;

typedef struct LocalLock
{
	LocalLockKey key;			/* hash key; must be first */
	int			idx;			/* shared entry */
	uint32		generation;		/* of that entry when granted */
	int64		token;
	int64		session_id;		/* the ZooKeeper session that holds it */
	bool		parents;		/* taken with its parents' SHARED locks */
	int			max_holders;	/* a semaphore's limit (mode SEMAPHORE) */
	int			session_count;	/* session-level holds asked for */
	int			session_implicit;	/* session holds for a child's sake */
	int			nxact;			/* transaction-level holds */
	int			maxxact;
	XactHold   *xact_holds;		/* who took each of them */
	bool		shown_session;	/* what the node data says: scope=session */
	bool		shown_implicit; /* and implicit=true */
	TimestampTz granted_at;		/* when it was entered: held time (stats.c) */
} LocalLock;

/*
 * acquire.c, acquire_batch.c: one step of an acquisition: a resource, the
 * mode to take it in, and whether it is taken for a child's sake (a
 * parent's implicit SHARED lock).
 */
typedef struct LockStep
{
	char		resource[ZKLOCK_MAX_RESOURCE_LEN + 1];
	ZkLockMode	mode;
	int			max_holders;	/* mode SEMAPHORE: its limit */
	bool		implicit;
	bool		parents;		/* the step's own parents come with it */
	bool		advisory;		/* an advisory key: both modes may be held */
	int			input;			/* position in the caller's list, or -1 */
	const char *child;			/* for an implicit step: whose parent it is */
	LocalLock  *lock;			/* filled once taken */
} LockStep;

/* acquire_batch.c: the steps' nodes asked for at once, as try-locks */
extern int	zklock_take_at_once(LockStep *steps, int nsteps,
								LocalLockKey *made, bool session, bool wait,
								TimestampTz deadline, int timeout_total);

/* local_locks.c: the local lock table (NULL until zklock_backend_init) */
extern HTAB *zklock_local_locks;
extern void zklock_local_locks_init(void);
extern LocalLock *zklock_held_lock(const char *resource, ZkLockMode *mode);
extern LocalLock *zklock_held_lock_in(const char *resource, ZkLockMode mode);
extern char *zklock_held_hint(LocalLock *lock);
extern LocalLock *zklock_enter_lock(const char *resource, ZkLockMode mode,
									bool parents, int idx, uint32 generation,
									TimestampTz asked_at);
extern void zklock_add_hold(LocalLock *lock, bool session, bool implicit);
extern void zklock_drop_hold(LocalLock *lock, bool session, bool implicit);
extern void zklock_forget(LocalLock *lock);

/* local_locks.c: the ends of holds (none raises an ERROR) */
extern void zklock_release_session_hold(LocalLock *lock);
extern int	zklock_drop_session_holds(void);
extern void zklock_drop_advisory_session_holds(void);
extern void zklock_end_xact_holds(void);
extern void zklock_end_subxact_holds(bool commit, SubTransactionId mySubid,
									 SubTransactionId parentSubid);
extern void zklock_forget_all_at_exit(void);

/* local_locks.c: a lock held, asked for again as a semaphore or a lock */
extern void zklock_check_semaphore_stack(LocalLock *lock, ZkLockMode held_mode,
										 ZkLockMode mode, int max_holders,
										 const char *child);

/* wait.c: a request, its wait, its failure */
extern void zklock_request_init(ZkChannelRequest *req, ZkEntryKind kind);
extern int	zklock_submit(const ZkChannelRequest *req, uint32 *gen);
extern int	zklock_submit_batched(const ZkChannelRequest *req, uint32 *gen);
/*
 * wait.c: the requests of a batch submitted at once (acquire.c), at most
 * ZKLOCK_MAX_BATCH, which the exit callback withdraws until the caller has
 * taken them over
 */
#define ZKLOCK_MAX_BATCH 64
extern void zklock_withdraw_batch(void);
extern void zklock_forget_batch(void);
extern void zklock_note_wait_start(void);
extern void zklock_wait_a_while(int idx, TimestampTz since,
								TimestampTz deadline, const char *what,
								int shown_ms, bool for_lock);
extern void zklock_wait_pass(int idx, TimestampTz since, TimestampTz deadline);
extern ZkEntryState zklock_wait_for_answer(int idx, uint32 gen,
										   const char *what, int timeout_ms,
										   int shown_ms, bool lock_timeout);
extern ZkEntryState zklock_wait_counted(int idx, uint32 gen, const char *what,
										int timeout_ms, int shown_ms,
										const char *resource, ZkLockMode mode,
										TimestampTz asked_at);
extern void zklock_raise_failure(int idx, uint32 gen, const char *what);
extern void zklock_withdraw_pending(void);
extern void zklock_set_pending(int idx, uint32 gen);

/* deadlock.c: the search for a deadlock through a long wait */
extern void zklock_deadlock_check(int idx, uint32 gen, TimestampTz since,
								  TimestampTz wait_deadline);
extern long zklock_deadlock_due_ms(TimestampTz since);

/*
 * deadlock_read.c: the search's read of the published long waits, and of
 * one resource's children (the victim's check of a cycle's remote edges)
 */
extern char *zklock_deadlock_read_waits(TimestampTz deadline,
										const char **why);
extern char *zklock_deadlock_read_children(const char *resource,
										   TimestampTz deadline,
										   const char **why);
extern void zklock_deadlock_withdraw_read(void);

/* holder.c: a lock node's data, a shared catalog's name in it */
extern void zklock_holder_data(char *buf, size_t buflen, const char *scope,
							   bool implicit, int64 ttl_ms);
extern const char *zklock_catalog_name_utf8(const char *name);
/* request.c: a step's request (acquire.c, acquire_batch.c) */
extern void zklock_step_request(ZkChannelRequest *req, LockStep *step,
								bool session);

/* guard.c */
extern void zklock_extension_guard_begin(void);
extern void zklock_extension_guard_end(void);
extern void zklock_extension_guard_reset(void);

/* fence.c */
extern void zklock_check_lost(int elevel);
extern void zklock_prove_held(LocalLock *lock, TimestampTz start,
							  int bound_ms, const char *asked,
							  const char *what);
extern bool zklock_xact_has_effects(void);
extern void zklock_commit_fence(void);
extern void zklock_prepare_check(void);

/* queue.c, for queue_put.c */
extern void zklock_queue_request(ZkChannelRequest *req, ZkEntryKind kind,
								 const char *queue);
extern ZkEntryState zklock_queue_answer(int idx, uint32 gen, const char *what);

#endif							/* ZKLOCK_BACKEND_INT_H */
