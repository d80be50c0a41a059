/*-------------------------------------------------------------------------
 *
 * lock_int.h
 *		Inside the lock recipe: its operations, and what its files call in
 *		one another: protocol.c (the protocol) calls lock_explicit.c
 *		(explicit requests), lock_semaphore.c (a semaphore's rule and
 *		wait) and lock_held.c (the grant, a lock we hold, the end of a
 *		request); lock_explicit.c and lock_semaphore.c call lock_held.c;
 *		none calls protocol.c back.  No file outside the lock recipe
 *		includes it.
 *
 * Every operation is tagged with (generation, operation, entry); a reply
 * whose generation no longer matches the entry is from an earlier request
 * and is ignored (recipe.c drops it).
 *
 * Watches.  Each watch has an owner that drops it when it is no longer
 * wanted, so that a session holds at most one per waiting request (its
 * OP_WAIT, and an explicit request's OP_SELF), per held lock (OP_GUARD),
 * per step 1 listing (OP_LISTED: our node's deletion fires it, a request
 * ending without a node drops it), and the mailbox's: a watch set by
 * exists on a node already gone is removed at once (zkc_watch_node); a
 * request that stops waiting otherwise (withdrawn, failed, granted, or
 * waiting behind another node) drops its OP_WAIT and OP_SELF watches
 * (drop_watches); a guard fires when its node is deleted.
 * zklock_shared->n_watches shows how many are set.
 *
 * The lock is one recipe of the worker (recipe.h): protocol.c, and three
 * files of its own below it, which it calls and which never call it:
 * lock_semaphore.c holds a semaphore's steps 2 and 3 as verdicts (granted
 * or failed there; otherwise which nodes to watch, or whether to list
 * again, which protocol.c does).
 * lock_explicit.c holds what an explicit request's persistent node needs
 * beyond an ephemeral one (its waiter child and watch in step 3, its
 * grant by a rewrite in step 4); lock_held.c the grant (step 4), the
 * guard, revocation and the holder's description of a lock we hold, the
 * delete (step 5) and failing a request.  The steps call those by their
 * short names (grant, send_delete, fail, grant_persistent, ...: lock_int.h).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_LOCK_INT_H
#define ZKLOCK_LOCK_INT_H

#include "recipe.h"

/* The lock recipe's operations, as carried in a tag */
typedef enum LockOp
{
	OP_PARENT = 1,				/* create a missing parent (container) */
	OP_CREATE,					/* create the lock node */
	OP_CHILDREN,				/* list the resource's children */
	OP_ADOPT,					/* stat a node found again by its prefix */
	OP_WAIT,					/* exists+watch on the node we wait behind */
	OP_GUARD,					/* getData+watch on our own granted node */
	OP_DELETE,					/* delete our node */
	OP_GRANT_WRITE,				/* explicit: rewrite the node we are granted */
	OP_GRANT_CHILD,				/* explicit: delete its waiter child */
	OP_WAITER,					/* explicit: create the waiter child */
	OP_WAITER_DELETE,			/* explicit: delete it before the node */
	OP_SELF,					/* explicit: exists+watch on our waiting node */
	OP_REWRITE,					/* rewrite our granted node's data */
	OP_REWRITE_READ,			/* read it first: its version is unknown */
	OP_INDEX,					/* explicit: its entry in the index */
	OP_LISTED,					/* the child watch our listing set */
	OP_RELIST,					/* a waiter lists again (no watch) */
	OP_RELEASE_DELETE			/* delete our node, force-released */
} LockOp;

/* lock_held.c: the end of a request */
extern void zklock_lock_grant(int idx);
extern void zklock_lock_send_delete(int idx);
extern void zklock_lock_fail(int idx, int sqlstate, const char *fmt,...) pg_attribute_printf(3, 4);
extern void zklock_lock_fail_msg(int idx, int sqlstate, const char *msg);
extern void zklock_lock_drop_watches(int idx);
extern void zklock_lock_released_nodeless(int idx);
extern void zklock_lock_fail_deleting(int idx, int sqlstate, const char *fmt,...) pg_attribute_printf(3, 4);

/*
 * lock_semaphore.c: a semaphore's steps 2 and 3, as verdicts; protocol.c
 * watches or lists again as they say
 */
extern bool zklock_semaphore_decide(int idx, ZkEvent *ev, int64 my_seq,
									const char **nodes, int *nnodes,
									bool *keep_watches);
extern bool zklock_semaphore_on_wait(int idx, ZkEvent *ev);

/* lock_held.c: a lock we hold */
extern void zklock_held_guard(int idx);
extern void zklock_held_guard_event(int idx, ZkEvent *ev);
extern void zklock_held_rewrite(int idx);
extern void zklock_held_rewrite_event(int idx, ZkEvent *ev);
extern void zklock_held_rewrite_read_event(int idx, ZkEvent *ev);
extern void zklock_held_listing_event(int idx, ZkEvent *ev);
extern void zklock_held_reload(void);
extern void zklock_held_release_deleted(int idx, ZkEvent *ev);
extern long zklock_held_tick(void);

/* lock_held.c: this session's revocation mailbox (index MAILBOX_IDX) */
extern void zklock_held_mailbox_connected(int64 session_id);
extern void zklock_held_mailbox_lost(void);
extern void zklock_held_mailbox_event(ZkEvent *ev);

/* lock_explicit.c */
extern void zklock_explicit_grant(int idx);
extern void zklock_explicit_watch_own(int idx);
extern void zklock_explicit_waiter_event(int idx, ZkEvent *ev);
extern void zklock_explicit_self_event(int idx, ZkEvent *ev);
extern void zklock_explicit_grant_write_event(int idx, ZkEvent *ev);
extern void zklock_explicit_grant_child_event(int idx, ZkEvent *ev);
extern bool zklock_explicit_record(int idx, const char *request,
								   bool with_parents);
extern void zklock_explicit_unrecord(int idx, int version);
extern void zklock_explicit_record_event(int idx, ZkEvent *ev);

/*
 * The steps of the recipe call these by the names they had when all of it
 * was protocol.c (so that the steps read as the protocol does)
 */
#define grant(idx)					zklock_lock_grant(idx)
#define send_delete(idx)			zklock_lock_send_delete(idx)
#define fail(...)					zklock_lock_fail(__VA_ARGS__)
#define drop_watches(idx)			zklock_lock_drop_watches(idx)
#define released_nodeless(idx)		zklock_lock_released_nodeless(idx)
#define grant_persistent(idx)		zklock_explicit_grant(idx)
#define watch_own_waiting_node(idx) zklock_explicit_watch_own(idx)

#endif							/* ZKLOCK_LOCK_INT_H */
