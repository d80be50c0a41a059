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

extern void zklock_protocol_init(uint32 worker_incarnation);
extern void zklock_protocol_request(int idx);
extern void zklock_protocol_event(ZkEvent *ev);
extern void zklock_protocol_connected(int64 session_id);
extern void zklock_protocol_disconnected(void);
extern void zklock_protocol_session_lost(const char *why);
extern long zklock_protocol_tick(void);

#endif							/* ZKLOCK_PROTOCOL_H */
