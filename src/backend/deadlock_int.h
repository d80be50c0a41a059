/*-------------------------------------------------------------------------
 *
 * deadlock_int.h
 *		The wait-for graph of a deadlock search (deadlock_graph.c), as the
 *		search (deadlock.c) uses it.  Only those two files include it.
 *
 * A graph lives in one search's memory context, in the waiting backend;
 * nothing in it is in shared memory.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_DEADLOCK_INT_H
#define ZKLOCK_DEADLOCK_INT_H

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"
#include "utils/hsearch.h"

#include "zklock.h"

#define DL_MAX_VERTICES		1000

/* A lock node in the graph, and the backend that owns it */
typedef struct DlNode
{
	int64		session;
	int			pid;
	ZkLockMode	mode;
	int64		seq;
	int			sem_limit;		/* a semaphore's node: its limit; else 0 */
	const char *resource;
	const char *name;			/* the node's name under resource */
} DlNode;

/* A backend */
typedef struct DlVertex
{
	int64		session;
	int			pid;
	bool		waits;			/* a published zklock wait: */
	int64		czxid;			/* its node's */
	ZkLockMode	mode;
	int64		seq;
	int			sem_limit;		/* waits for a semaphore of this limit; 0: a lock */
	const char *resource;
	const char *node;			/* its node's name under resource */
	const char *role;			/* NULL unknown */
	bool		visited;
	uint32		edge_mark;		/* out_edges: already an edge of this call */
} DlVertex;

/* Instance names by session */
typedef struct DlInstance
{
	int64		session;
	const char *name;
} DlInstance;

typedef struct DlGraph
{
	int64		my_session;
	HTAB	   *vhash;			/* vertices by (session, pid) */
	DlVertex   *v;
	int			nv,
				vroom;
	DlNode	   *n;
	int			nn,
				nroom;
	DlInstance *inst;
	int			ninst,
				iroom;
	TimestampTz deadline;
	int			nvisited;		/* backends the search went through */
	bool		gave_up;
	uint32		edge_marks;		/* out_edges' calls so far */
} DlGraph;


/* deadlock_graph.c: made, filled, walked, described */
extern DlGraph *zklock_deadlock_new_graph(TimestampTz deadline);
extern int	zklock_deadlock_vertex(DlGraph *g, int64 session, int pid);
extern int	zklock_deadlock_cmp_node(const void *a, const void *b);
extern int	zklock_deadlock_first_node(DlGraph *g, const char *r);
extern void zklock_deadlock_parse_waits(DlGraph *g, char *text);
extern void zklock_deadlock_add_local(DlGraph *g);
extern bool zklock_deadlock_dfs(DlGraph *g, int vi, int start, List **path);
extern char *zklock_deadlock_describe(DlGraph *g, List *cycle, bool mask);
extern bool zklock_deadlock_younger(const DlVertex *a, const DlVertex *b);

#endif							/* ZKLOCK_DEADLOCK_INT_H */
