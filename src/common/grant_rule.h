/*-------------------------------------------------------------------------
 *
 * grant_rule.h
 *		Lock node names and Hive's grant rule, as pure functions.
 *
 * Nothing here allocates, raises or touches shared state: src/common/grant_rule.c
 * links into the standalone unit test (test/unit/test_grant_rule.c) as it
 * is into the extension.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_GRANT_RULE_H
#define ZKLOCK_GRANT_RULE_H

#include "zklock.h"				/* ZkLockMode */

/* What the rule says about our node among its siblings */
typedef enum ZkGrantVerdict
{
	ZKLOCK_VERDICT_GRANTED = 0, /* no lower node conflicts: ours */
	ZKLOCK_VERDICT_WAIT			/* watch *watch_index, then list again */
} ZkGrantVerdict;

/* A lock node's mode and sequence number from its name, whoever wrote it */
extern bool zklock_parse_node_name(const char *name, ZkLockMode *mode,
								   int64 *seq);

/* How many of the children are lock nodes (of any client) */
extern int	zklock_count_lock_nodes(const char *const *children, int nchildren);

/* Whether a node in mode "held" keeps a request in mode "wanted" waiting */
extern bool zklock_modes_conflict(ZkLockMode held, ZkLockMode wanted);

extern ZkGrantVerdict zklock_grant_rule(const char *const *children,
										int nchildren, int64 my_seq,
										ZkLockMode my_mode, int *watch_index,
										int *nblockers);
extern ZkGrantVerdict zklock_grant_rule_ignoring(const char *const *children,
												 int nchildren, int64 my_seq,
												 ZkLockMode my_mode,
												 const char *ignore_node,
												 int *watch_index,
												 int *nblockers);

/* One node of a resource, for the rule applied to all of them at once */
typedef struct ZkGrantNode
{
	ZkLockMode	mode;
	int64		seq;
	int			blocker;		/* out: the index of the node it waits
								 * behind, or -1 when granted */
} ZkGrantNode;

extern void zklock_grant_rule_sorted(ZkGrantNode *nodes, int n);

/* Semaphores (zklock 1.4): node names and the rule, see grant_rule.c */
typedef enum ZkSemaphoreVerdict
{
	ZKLOCK_SEM_GRANTED = 0,		/* fewer than max_holders lower: ours */
	ZKLOCK_SEM_WAIT,			/* watch the max_holders nearest lower */
	ZKLOCK_SEM_USED_AS_LOCK,	/* a lower lock node: the resource is a lock */
	ZKLOCK_SEM_OTHER_LIMIT		/* a semaphore node of another limit */
} ZkSemaphoreVerdict;

extern bool zklock_parse_semaphore_node(const char *name, int *limit,
										int64 *seq);
extern ZkSemaphoreVerdict zklock_semaphore_rule(const char *const *children,
												int nchildren, int64 my_seq,
												int max_holders, int *watch,
												int64 *watch_seq, int *nwatch,
												int *nlower, int *conflict);
extern int	zklock_semaphore_in_way(const char *const *children,
									int nchildren, int64 my_seq);

#endif							/* ZKLOCK_GRANT_RULE_H */
