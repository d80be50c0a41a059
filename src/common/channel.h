/*-------------------------------------------------------------------------
 *
 * channel.h
 *		The request channel between backends and the worker: the only code
 *		that changes an entry's state or frees an entry (see channel.c for
 *		the ownership and locking rules, channel_limits.c for the free list
 *		and the per-backend limits, channel_consume.c for a queue consume's
 *		verdict).
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_CHANNEL_H
#define ZKLOCK_CHANNEL_H

#include "zklock.h"

/* zklock_channel_submit's answer when no worker runs */
#define ZKLOCK_CHANNEL_NO_WORKER	(-3)

/*
 * A request as the backend fills it in, in its own memory, before
 * submitting it; and the copy the worker takes of it.
 */
typedef struct ZkChannelRequest
{
	ZkEntryKind kind;
	ZkLockMode	mode;
	bool		persistent;		/* an explicit lock's node */
	int			max_holders;	/* ZKLOCK_SEMAPHORE: its limit; else 0 */
	char		resource[ZKLOCK_MAX_RESOURCE_LEN + 1];
	char		data[ZKLOCK_MAX_DATA_LEN + 1];	/* node data */
	char		node[ZKLOCK_MAX_NODE_NAME_LEN + 1]; /* admin: the node */
	/* advisory: our own node of the other mode (no blocker), or "" */
	char		ignore_node[ZKLOCK_MAX_NODE_NAME_LEN + 1];
	dsm_handle	list_handle;	/* LIST: result segment */
	Size		list_size;		/* and its size */
} ZkChannelRequest;

/* What the backend reads of an entry once the worker has answered */
typedef struct ZkChannelResult
{
	ZkEntryState state;
	int64		token;
	int64		session_id;
	Size		list_needed;
	int			sqlstate;
	int			max_holders;	/* the request's (a semaphore's limit) */
	char		error[ZKLOCK_MAX_ERROR_LEN + 1];
	char		data[ZKLOCK_MAX_DATA_LEN + 1];
	char		node[ZKLOCK_MAX_NODE_NAME_LEN + 1]; /* the granted node */
	bool		waited;			/* it waited behind another node first */
} ZkChannelResult;

/*
 * A committed queue take's consume, as the worker ended it: the token of
 * the DONE entry its COMMIT collects (channel_consume.c)
 */
typedef enum ZkConsumeVerdict
{
	ZKLOCK_CONSUMED = 0,		/* ZooKeeper deleted the entry */
	ZKLOCK_NOT_CONSUMED,		/* the entry stays: delivered again */
	ZKLOCK_CONSUME_UNKNOWN		/* sent, no answer: either */
} ZkConsumeVerdict;

/* setup: shmem.c, on a zeroed table */
extern void zklock_channel_init(void);

/* backend side */
extern int	zklock_channel_submit(const ZkChannelRequest *req, bool wake,
								  uint32 *generation);
extern void zklock_channel_wake_worker(void);
extern int	zklock_channel_my_releasing(void);
extern ZkEntryState zklock_channel_state(int idx, uint32 generation);
extern bool zklock_channel_queued(int idx);
extern bool zklock_channel_connected(void);
extern bool zklock_channel_grant_stands(int idx, uint32 generation,
										bool *proven);
extern void zklock_channel_result(int idx, uint32 generation,
								  ZkChannelResult *result);
extern void zklock_channel_collect(int idx, uint32 generation,
								   ZkChannelResult *result);
extern char *zklock_channel_take_rows(dsm_segment *seg, Size *size,
									  Size list_needed);
extern void zklock_channel_set_data(int idx, uint32 generation,
									const char *data);
extern void zklock_channel_withdraw(int idx, uint32 generation);
extern bool zklock_channel_mark_long_wait(int idx, uint32 generation);
extern bool zklock_channel_withdraw_waiting(int idx, uint32 generation);
extern void zklock_channel_hold_wakes(void);
extern void zklock_channel_release_wakes(void);
extern ZkEntryState zklock_channel_consume(int idx, uint32 generation,
										  const char *data);
extern int	zklock_channel_take_verdict(int idx, uint32 generation,
										bool give_up, char *why, Size whylen);

/* worker side */
extern int	zklock_channel_dequeue(void);
extern ZkEntryState zklock_channel_take(int idx, ZkChannelRequest *req,
										uint32 *generation);
extern bool zklock_channel_grant(int idx, uint32 generation, int64 token,
								 int64 session_id, const char *node);
extern void zklock_channel_waiting(int idx, uint32 generation,
								   const char *node, const char *behind);
extern void zklock_channel_not_granted(int idx, uint32 generation);
extern void zklock_channel_fail(int idx, uint32 generation, int sqlstate,
								const char *msg, bool counted);
extern void zklock_channel_done(int idx, uint32 generation, int64 token,
								Size list_needed);
extern bool zklock_channel_lost(int idx, uint32 generation, int *owner_pid);
extern bool zklock_channel_session_lost(int idx, uint32 generation,
										int *owner_pid);
extern void zklock_channel_released(int idx, uint32 generation);
extern void zklock_channel_consume_end(int idx, uint32 generation,
									  int verdict, const char *why);
extern void zklock_channel_worker_gone(const char *why);
extern void zklock_channel_clear_queue(void);

#endif							/* ZKLOCK_CHANNEL_H */
