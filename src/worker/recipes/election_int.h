/*-------------------------------------------------------------------------
 *
 * election_int.h
 *		What the worker's election files share, and nothing else includes:
 *		the operations of their tags, candidate node names, and the entry
 *		points of the backends' queries (election_query.c).
 *
 * common/election_common.c includes it too, and defines the candidate
 * names declared here beside the instance's name that both sides use: the
 * one edge from common/ up into worker/recipes/ (names, no calls back).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_ELECTION_INT_H
#define ZKLOCK_ELECTION_INT_H

#include "election.h"
#include "zk_client.h"

#define EL_MAX_PATH \
	(ZKLOCK_MAX_ROOT_LEN + sizeof(ZKLOCK_ELECTIONS_NODE) + \
	 ZKLOCK_MAX_GROUP_LEN + ZKLOCK_MAX_NODE_NAME_LEN + 4)

/* A candidate node's data (nodedata.c): what is written, and read back */
#define EL_MAX_DATA		1024

/* A candidate node: this, then see zklock_candidate_prefix, 10 digits */
#define ZKLOCK_CANDIDATE_PREFIX		"cand-"

/* Operations, as carried in a tag (ELECTION_OP_FIRST on: no other recipe's) */
typedef enum ElectionOp
{
	EOP_PARENT = ELECTION_OP_FIRST, /* create a missing parent (container) */
	EOP_CREATE,					/* create the candidate node */
	EOP_CHILDREN,				/* list the group */
	EOP_ADOPT,					/* stat a node found again by its prefix */
	EOP_WATCH,					/* exists+watch on the predecessor */
	EOP_LEAD,					/* write our node: we lead from now */
	EOP_GUARD,					/* exists+watch on our own node, leading */
	EOP_DELETE,					/* delete our node: the group was removed */
	EOP_Q_CHILDREN,				/* a backend's query: list the group */
	EOP_Q_DATA					/* a backend's query: read a candidate */
} ElectionOp;

/* election_common.c */
extern int	zklock_candidate_data(char *buf, size_t len);
extern void zklock_candidate_prefix(char *buf, size_t len, int64 session_id);
extern int64 zklock_candidate_instance(const char *name, char *id,
									   size_t idlen);
extern void zklock_election_node_path(char *buf, size_t len,
									  const char *group, const char *node);

/* election_query.c */
extern void zklock_election_query_event(int idx, ZkEvent *ev);
extern void zklock_election_queries_lost(const char *why);

extern void zklock_election_group_path(char *buf, size_t len,
									   const char *group);

#endif							/* ZKLOCK_ELECTION_INT_H */
