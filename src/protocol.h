/*-------------------------------------------------------------------------
 *
 * protocol.h
 *		The lock protocol's entry points, called by the worker's main loop.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_PROTOCOL_H
#define ZKLOCK_PROTOCOL_H

#include "zk_client.h"

/*
 * Every operation is tagged with (generation, operation, index); the index
 * is an entry's, or one of the reserved ones below for the worker's own
 * walks.
 */
#define TAG(gen, op, idx) \
	(((uint64) (gen) << 32) | ((uint64) (op) << 24) | (uint64) (idx))
#define TAG_GEN(tag)	((uint32) ((tag) >> 32))
#define TAG_OP(tag)		((int) (((tag) >> 24) & 0xff))
#define TAG_IDX(tag)	((int) ((tag) & 0xffffff))

#define ROOT_IDX		0xfffffd	/* root.c's check of zklock.root */

/* root.c */
extern bool zklock_root_needs_check(int64 session_id);
extern void zklock_root_check_start(int64 session_id);
extern bool zklock_root_event(ZkEvent *ev);
extern bool zklock_root_refused(void);
extern const char *zklock_root_missing_chroot(void);

extern void zklock_protocol_init(uint32 worker_incarnation);
extern void zklock_protocol_request(int idx);
extern void zklock_protocol_event(ZkEvent *ev);
extern void zklock_protocol_connected(int64 session_id);
extern void zklock_protocol_disconnected(void);
extern int	zklock_protocol_session_lost(const char *why, int *pids,
										 int maxpids, int *npids);
extern long zklock_protocol_tick(void);

#endif							/* ZKLOCK_PROTOCOL_H */
