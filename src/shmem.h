/*-------------------------------------------------------------------------
 *
 * shmem.h
 *		The shared table of lock entries: its setup, its free list and
 *		work queue, and waking its two sides (see shmem.c; the types and
 *		the locking rules are in zklock.h).
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
extern int	zklock_entry_alloc(ZkEntryKind kind, int slot);
extern void zklock_entry_free(int idx);
extern void zklock_enqueue(int idx);
extern int	zklock_dequeue(void);
extern void zklock_wake_worker(void);
extern void zklock_wake_owner(ZkLockEntry *entry);
extern const char *zklock_session_state_name(ZkSessionState state);
extern const char *zklock_instance_name(void);

#endif							/* ZKLOCK_SHMEM_H */
