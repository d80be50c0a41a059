/*-------------------------------------------------------------------------
 *
 * shmem.h
 *		The shared table of lock entries: its setup (shmem.c; the types
 *		are in zklock.h, the free list, the work queue and the locking
 *		rules in channel.c).
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_SHMEM_H
#define ZKLOCK_SHMEM_H

#include "zklock.h"

extern ZkLockShared *zklock_shared;
extern void zklock_shmem_request(void);
extern void zklock_shmem_startup(void);
extern const char *zklock_session_state_name(ZkSessionState state);

#endif							/* ZKLOCK_SHMEM_H */
