/*-------------------------------------------------------------------------
 *
 * election.h
 *		Instance leadership: ZooKeeper's election recipe, held by the
 *		worker for each group of zklock.elections (election.c), and the
 *		shared state of the groups that backends read (leader.c, fence.c).
 *
 * Shared state: one ZkElectionShared in a segment of its own ("zklock
 * elections"), set up at startup.  Every field of it is written by the
 * worker only (election.c), under zklock_shared->lock in exclusive mode,
 * and read by backends under the same lock (either mode): the same lock as
 * the lease's, so that one locked section sees a group's leadership and
 * the lease that covers it together (zk_is_leader, the commit fence).
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_ELECTION_H
#define ZKLOCK_ELECTION_H

#include "zklock.h"

/*
 * The worker's side below takes ZooKeeper's answers (client/zk_client.h's
 * ZkEvent); named here as an incomplete type, so that the backends that
 * read the groups' state include nothing of the client.
 */
struct ZkEvent;

#define ZKLOCK_MAX_ELECTIONS		16	/* groups in zklock.elections */
#define ZKLOCK_MAX_GROUP_LEN		63	/* bytes of a group's name */
#define ZKLOCK_INSTANCE_ID_LEN		47	/* "<system id>:<port>" */

/* The reserved resource name under which the groups live */
#define ZKLOCK_ELECTIONS_NODE		"zklock.elections"

/*
 * Tags: a group's operations carry a reserved entry index of their own
 * (below the root check's, the orphans' and the sweep's); the query of a
 * backend (ZKR_ELECTION) carries its entry's index and op numbers from
 * ELECTION_OP_FIRST on, which no other recipe uses.
 */
#define ELECTION_IDX(g)			(0xfffffc - (g))
#define ELECTION_IDX_LAST		ELECTION_IDX(ZKLOCK_MAX_ELECTIONS - 1)
#define ELECTION_IS_IDX(idx) \
	((idx) <= ELECTION_IDX(0) && (idx) >= ELECTION_IDX_LAST)
#define ELECTION_OP_FIRST		0x40

/* Where a group is; the worker writes it, zk_elections shows it */
typedef enum ZkElectionPhase
{
	ZKEL_FREE = 0,				/* slot unused */
	ZKEL_WAITING,				/* to join once connected */
	ZKEL_JOINING,				/* create and listing in flight */
	ZKEL_WATCHING,				/* a candidate, watching its predecessor */
	ZKEL_TAKING_OVER,			/* lowest: its write in flight */
	ZKEL_LEADING,				/* leads */
	ZKEL_RECOVERING,			/* a reply was lost: list again */
	ZKEL_LEAVING				/* removed: deleting its node */
} ZkElectionPhase;

typedef struct ZkElectionGroup
{
	ZkElectionPhase phase;
	char		name[ZKLOCK_MAX_GROUP_LEN + 1];
	char		node[ZKLOCK_MAX_NODE_NAME_LEN + 1];	/* own node, "" none */
	int64		session_id;		/* of the candidacy; 0 none */
	bool		leader;			/* leads in session_id */
} ZkElectionGroup;

typedef struct ZkElectionShared
{
	uint64		changes;		/* bumped at each change */
	ZkElectionGroup groups[ZKLOCK_MAX_ELECTIONS];
} ZkElectionShared;

extern ZkElectionShared *zklock_elections_shared;

/* A candidacy a transaction relied on (leader.c, fence.c) */
typedef struct ZkLeadership
{
	int			slot;
	int64		session_id;
	char		group[ZKLOCK_MAX_GROUP_LEN + 1];
	char		node[ZKLOCK_MAX_NODE_NAME_LEN + 1];
} ZkLeadership;

/* setup (shmem.c) */
extern Size zklock_election_shmem_size(void);
extern void zklock_election_shmem_init(void);

/* both sides */
extern int	zklock_election_parse(const char *value,
								  char names[][ZKLOCK_MAX_GROUP_LEN + 1],
								  char *why, size_t whylen);
extern const char *zklock_instance_id(void);
extern const char *zklock_election_phase_name(ZkElectionPhase phase);

/* backend side: leader.c (callers hold zklock_shared->lock), fence.c */
extern bool zklock_leads_locked(const char *group, ZkLeadership *out);
extern void zklock_leader_fence(const ZkLeadership *relied_on, int n);

/* worker side: the recipe's entry points */
extern void zklock_election_init(void);
extern void zklock_election_event(struct ZkEvent *ev);
extern void zklock_election_connected(int64 session_id);
extern void zklock_election_disconnected(void);
extern void zklock_election_session_lost(void);
extern long zklock_election_tick(void);
extern void zklock_election_reload(void);
extern void zklock_election_query_start(int idx);

#endif							/* ZKLOCK_ELECTION_H */
