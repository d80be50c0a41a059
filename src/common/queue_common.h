/*-------------------------------------------------------------------------
 *
 * queue_common.h
 *		What both sides of the distributed queue (issue 31) agree on: where
 *		queues live, the names of their nodes, the size of an item and how
 *		an item travels between a backend and the worker.
 *
 * Layout (Kazoo's LockingQueue, doc/design.md "Queues"):
 *	<root>/zklock.queues/<queue>/entries/entry-PPP-<seq>	the items
 *	<root>/zklock.queues/<queue>/taken/entry-PPP-<seq>		their holds
 *	<root>/zklock.queues/<queue>/pending/<sysid>-<xid>-<n>	puts of
 *		transactions committing (zklock only; Kazoo never reads it)
 * A request's resource is ZKLOCK_QUEUE_PREFIX "<queue>".
 *
 * An item travels in a DSM segment the backend creates: a put's holds
 * the item alone (its size the segment's), a take's is
 * ZKLOCK_QUEUE_SEGMENT bytes, which the worker fills with the item's
 * length (a uint32) and its bytes.  No lock: the segment belongs to the
 * request, and the backend reads it only after the worker's verdict.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_QUEUE_COMMON_H
#define ZKLOCK_QUEUE_COMMON_H

#define ZKLOCK_QUEUE_PREFIX		"zklock.queues/"
#define ZKLOCK_QUEUE_ENTRIES	"entries"
#define ZKLOCK_QUEUE_TAKEN		"taken"
#define ZKLOCK_QUEUE_ENTRY		"entry-"
#define ZKLOCK_QUEUE_PENDING	"pending"

/*
 * A ZKR_QUEUE_PUT's data line saying what it does (worker/recipes/queue.c):
 * none, a put at once; "pend", pending/<node> made (PRE_COMMIT); "move",
 * entries/<node> made and pending/<ignore_node> deleted in one multi
 * (after the commit record); "drop", pending/<node> deleted (aborted)
 */
#define ZKLOCK_QUEUE_OP_FIELD	"qop="

/* the largest item zklock puts (ZooKeeper's jute.maxbuffer is 1 MB) */
#define ZKLOCK_QUEUE_MAX_ITEM	1000000
/* a take's segment: any item another client can have put, and its length */
#define ZKLOCK_QUEUE_SEGMENT	(1048576 + sizeof(uint32))

/* priorities, as Kazoo's: three digits, lower first */
#define ZKLOCK_QUEUE_MAX_PRIORITY	999
#define ZKLOCK_QUEUE_DEFAULT_PRIORITY	100

/*
 * The line of a hold's data naming the request that made it, so that the
 * worker finds its own hold after a lost reply: "req=<idx>.<generation>"
 */
#define ZKLOCK_QUEUE_REQ_FIELD	"req="

#endif							/* ZKLOCK_QUEUE_COMMON_H */
