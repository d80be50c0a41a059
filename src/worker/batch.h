/*-------------------------------------------------------------------------
 *
 * batch.h
 *		Group commit: the lock recipe's creates and deletes of one pass of
 *		the worker, sent at its end as few ZooKeeper transactions (batch.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_BATCH_H
#define ZKLOCK_BATCH_H

/* What runs once the writes queued before it are sent (a listing) */
typedef void (*ZkBatchThen) (uint64 tag);

extern bool zklock_batch_create(const char *path, const char *data,
								int datalen, int flags, uint64 tag);
extern bool zklock_batch_delete(const char *path, uint64 tag);
extern void zklock_batch_then(ZkBatchThen fn, uint64 tag);
extern void zklock_batch_flush(void);

#endif							/* ZKLOCK_BATCH_H */
