/*-------------------------------------------------------------------------
 *
 * queue_int.h
 *		What the queue recipe's files share, from the top down: queue.c
 *		(takes, releases, the dispatch), queue_write.c (puts and the moves
 *		and drops of transactional puts), queue_release.c (a held take's
 *		guard and consume), queue_wait.c (the waiting takers) and
 *		queue_util.c (what they all call).  A file calls only the files
 *		below it; what a lower file must reach above goes through the
 *		callbacks queue.c registers at the recipe's init.  Only the
 *		worker's thread.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_QUEUE_INT_H
#define ZKLOCK_QUEUE_INT_H

#include "storage/dsm.h"

#include "recipe.h"

/* operations (tags' op field) */
enum
{
	QOP_PARENT = 1,				/* a node of the queue's path made */
	QOP_PUT,					/* the entry's create */
	QOP_ENTRIES,				/* listing of entries */
	QOP_TAKEN,					/* listing of taken */
	QOP_HOLD,					/* the hold's create */
	QOP_FIND,					/* reading our hold after a lost reply */
	QOP_READ,					/* the entry's data */
	QOP_SKIP,					/* delete of a hold whose entry went */
	QOP_CONSUME,				/* delete of the entry at commit */
	QOP_UNHOLD,					/* delete of the hold at release */
	QOP_LENGTH,					/* listing of entries for a length */
	QOP_WATCH,					/* unused (a waiter's watch: queue_wait.c) */
	QOP_MOVED,					/* a move's delete of its pending node */
	QOP_GUARD,					/* a held hold's exists and its watch */
	QOP_DROP,					/* the delete of a pending node at abort */
	QOP_PURGE,					/* a purge's delete of an entry not held */
	QOP_CONSUMED				/* the hold's delete in the consume's multi */
};

/* what a ZKR_QUEUE_PUT does (its data's "qop=" line, queue_common.h) */
typedef enum QPutMode
{
	QPUT_NOW,					/* entries/entry-PPP-, at once */
	QPUT_PEND,					/* pending/<key>, persistent, at PRE_COMMIT */
	QPUT_MOVE,					/* one multi: the entry, minus pending/<key> */
	QPUT_DROP					/* delete pending/<key> (aborted) */
} QPutMode;

#define Q_MAX_PATH	(ZKLOCK_MAX_PATH + ZKLOCK_MAX_NODE_NAME_LEN + 16)

/* a request's end, before its failure (queue.c's take_end) */
typedef void (*QueueEndHook) (int idx);

/* a waiting take handed a free entry (queue.c's try_entry) */
typedef void (*QueueTryEntry) (int idx, const char *name);

/* queue_util.c: each put's mode, by idx (queue.c sets it at the start) */
extern char *zklock_queue_put_modes;

extern void zklock_queue_util_init(QueueEndHook on_end);
extern void zklock_queue_sub_path(char *buf, WorkEntry *w, const char *dir,
								  const char *name);
extern const char *zklock_queue_rc_text(ZkEvent *ev);
extern void zklock_queue_fail(int idx, int sqlstate, const char *msg);
extern dsm_segment *zklock_queue_segment(int idx, Size *size);

/* queue_wait.c: the waiting takers, per queue */
extern bool zklock_queue_entry_name(const char *name);
extern char **zklock_queue_names(MemoryContext cxt, ZkEvent *ev, bool sorted,
								 int *n);
extern void zklock_queue_wait_init(QueueTryEntry try_entry);
extern bool zklock_queue_waiting(int idx);
extern void zklock_queue_wait_join(int idx, bool first);
extern void zklock_queue_wait_leave(int idx);
extern void zklock_queue_wait_event(ZkEvent *ev);
extern void zklock_queue_wait_retry(void);

/* queue_release.c: the hold's guard, the consume */
extern void zklock_queue_send_guard(int idx);
extern void zklock_queue_on_guard(int idx, ZkEvent *ev);
extern void zklock_queue_send_consume(int idx);
extern void zklock_queue_on_consume(int idx, ZkEvent *ev);
extern bool zklock_queue_consuming(int idx);
extern void zklock_queue_consume_end(int idx, int verdict, const char *why);

/* queue_write.c */
extern void zklock_queue_send_put(int idx, bool with_parents);
extern void zklock_queue_on_put(int idx, ZkEvent *ev);
extern void zklock_queue_on_drop(int idx, ZkEvent *ev);

/* queue_pending.c: a move failed; a walk is owed (backing off) */
extern void zklock_queue_pending_retry(void);

#endif							/* ZKLOCK_QUEUE_INT_H */
