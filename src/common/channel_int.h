/*-------------------------------------------------------------------------
 *
 * channel_int.h
 *		What channel.c, channel_limits.c (the channel's free list, its
 *		limits, and the state changes that move a slot's counts: a
 *		consume's verdict too) and channel_consume.c (a consume's
 *		verdict) share.  Nothing else includes it: the rest of zklock
 *		uses the channel through channel.h.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_CHANNEL_INT_H
#define ZKLOCK_CHANNEL_INT_H

#include "zklock.h"

/* channel_limits.c: caller holds zklock_shared->lock exclusively */
extern int	zklock_channel_alloc(ZkEntryKind kind, int slot);
extern void zklock_channel_free(int idx);
extern void zklock_channel_set_releasing(int idx);
extern int	zklock_channel_slot_releasing(int slot);
extern int	zklock_channel_full_slot(int idx);
extern bool zklock_channel_verdict_locked(int idx, int verdict,
										  const char *why);

/* channel.c: caller holds the lock */
extern void zklock_channel_enqueue(int idx);

#endif							/* ZKLOCK_CHANNEL_INT_H */
