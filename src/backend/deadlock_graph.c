/*-------------------------------------------------------------------------
 *
 * deadlock_graph.c
 *		The wait-for graph of a deadlock search: built from every
 *		instance's published long waits and this instance's own state,
 *		walked depth first for a cycle, and described for the 40P01.
 *
 * deadlock.c's search makes a graph (zklock_deadlock_new_graph), adds this
 * instance's granted entries and PostgreSQL lock waits
 * (zklock_deadlock_add_local) and the published waits it read
 * (zklock_deadlock_parse_waits), and looks for a path back to itself
 * (zklock_deadlock_dfs); the victim rule's order (zklock_deadlock_younger)
 * and the cycle's DETAIL (zklock_deadlock_describe) are here too.  The
 * edges (out_edges), as doc/deadlocks.md, "The graph", states them:
 *
 *	- a published wait, node n under resource R, waits for the owner of
 *	  every node of R with a lower sequence number whose mode conflicts
 *	  (zklock_modes_conflict), as published (the waiters' own nodes) or in
 *	  this instance's shared table (its granted entries);
 *	- a backend of this instance that waits for no zklock lock waits for
 *	  the pids pg_blocking_pids() names.
 *
 * The walk visits at most DL_MAX_VERTICES backends and stops at the
 * search's deadline (g->gave_up).  Nothing here decides, withdraws or
 * logs: that is deadlock.c's, above it; this file never calls it.
 *
 * Runs in the waiting backend, in the search's memory context, where the
 * graph lives (deadlock_int.h).  The shared table is read under
 * zklock_shared->lock in shared mode (zklock_deadlock_add_local), and
 * nothing in shared memory is written.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "backend_int.h"
#include "channel.h"
#include "deadlock_int.h"
#include "grant_rule.h"
#include "nodedata.h"
#include "resource.h"
#include "settings.h"
#include "shmem.h"
#include "zklock.h"

/* The hash table of vertices: (session, pid) to an index of g->v */
typedef struct DlVertexKey
{
	int64		session;
	int			pid;
} DlVertexKey;

typedef struct DlVertexSlot
{
	DlVertexKey key;
	int			index;
} DlVertexSlot;

#define GROW(arr, n, room) \
	do { \
		if ((n) >= (room)) \
		{ \
			(room) = (room) ? (room) * 2 : 16; \
			(arr) = (arr) ? repalloc((arr), sizeof(*(arr)) * (room)) : \
				palloc(sizeof(*(arr)) * (room)); \
		} \
	} while (0)

/* A backend's vertex, made if new (a hash table finds it) */
int
zklock_deadlock_vertex(DlGraph *g, int64 session, int pid)
{
	DlVertexKey key;
	DlVertexSlot *slot;
	bool		found;

	memset(&key, 0, sizeof(key));
	key.session = session;
	key.pid = pid;
	slot = hash_search(g->vhash, &key, HASH_ENTER, &found);
	if (found)
		return slot->index;
	GROW(g->v, g->nv, g->vroom);
	memset(&g->v[g->nv], 0, sizeof(DlVertex));
	g->v[g->nv].session = session;
	g->v[g->nv].pid = pid;
	slot->index = g->nv;
	return g->nv++;
}

/* Nodes by resource, then sequence number: out_edges finds a resource's */
int
zklock_deadlock_cmp_node(const void *a, const void *b)
{
	const DlNode *x = a;
	const DlNode *y = b;
	int			c = strcmp(x->resource, y->resource);

	if (c != 0)
		return c;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* The first node of resource r in the sorted g->n, or g->nn */
int
zklock_deadlock_first_node(DlGraph *g, const char *r)
{
	int			lo = 0,
				hi = g->nn;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (strcmp(g->n[mid].resource, r) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* A node "<resource>/<node name>" of (session, pid); false if not a lock node's */
static bool
add_node(DlGraph *g, int64 session, int pid, char *path, DlNode **out)
{
	char	   *slash = strrchr(path, '/');
	DlNode	   *n;

	if (slash == NULL)
		return false;
	*slash = '\0';
	GROW(g->n, g->nn, g->nroom);
	n = &g->n[g->nn];
	if (!zklock_parse_node_name(slash + 1, &n->mode, &n->seq) ||
		n->mode == ZKLOCK_SEMAPHORE)
		return false;
	/* a semaphore's node is an EXCLUSIVE one, its limit in its name */
	if (!zklock_parse_semaphore_node(slash + 1, &n->sem_limit, NULL))
		n->sem_limit = 0;
	n->session = session;
	n->pid = pid;
	n->resource = path;
	n->name = slash + 1;
	g->nn++;
	if (out)
		*out = n;
	return true;
}

static void
add_instance(DlGraph *g, int64 session, const char *name)
{
	GROW(g->inst, g->ninst, g->iroom);
	g->inst[g->ninst].session = session;
	g->inst[g->ninst].name = name;
	g->ninst++;
}

static const char *
instance_of(DlGraph *g, int64 session)
{
	for (int i = 0; i < g->ninst; i++)
		if (g->inst[i].session == session)
			return g->inst[i].name;
	return session == g->my_session ? zklock_instance_name() : "?";
}

/* One published line of instance "session" (tab-separated fields) */
static void
parse_line(DlGraph *g, int64 session, char *line)
{
	char	   *f[6];
	int			nf = 0;
	char	   *p = line;

	while (nf < 6)
	{
		f[nf++] = p;
		if (nf == (line[0] == 'w' ? 6 : line[0] == 'h' ? 3 : 2))
			break;
		p = strchr(p, '\t');
		if (p == NULL)
			return;
		*p++ = '\0';
	}
	if (strcmp(f[0], "i") == 0 && nf == 2)
		add_instance(g, session, zklock_nodedata_unescape(f[1]));
	else if (strcmp(f[0], "h") == 0 && nf == 3)
		(void) add_node(g, session, atoi(f[1]), f[2], NULL);
	else if (strcmp(f[0], "w") == 0 && nf == 6)
	{
		DlNode	   *n;
		int			pid = atoi(f[1]);

		if (add_node(g, session, pid, f[5], &n))
		{
			int			vi = zklock_deadlock_vertex(g, session, pid);	/* may move g->v */
			DlVertex   *v = &g->v[vi];

			v->waits = true;
			v->czxid = strtoll(f[2], NULL, 10);
			v->mode = n->mode;
			v->seq = n->seq;
			v->sem_limit = n->sem_limit;
			v->resource = n->resource;
			v->node = n->name;
			v->role = zklock_nodedata_unescape(f[4]);
		}
	}
}

/* The worker's answer: "@<session hex>\n<lines>\n" per instance */
void
zklock_deadlock_parse_waits(DlGraph *g, char *text)
{
	int64		session = 0;
	char	   *line = text;

	while (line && *line)
	{
		char	   *nl = strchr(line, '\n');

		if (nl)
			*nl = '\0';
		if (line[0] == '@')
			session = (int64) strtoull(line + 1, NULL, 16);
		else if (session != 0)
			parse_line(g, session, line);
		line = nl ? nl + 1 : NULL;
	}
}

/*
 * This instance's granted nodes (a local holder need not wait for a zklock
 * lock to be on a cycle: it may wait for a row lock), and the roles of its
 * backends.  Only GRANTED entries of the current session stand for a node
 * that exists and that its backend must let go: a LOST one's node is gone
 * (deleted by someone else, or with its session), so its backend holds
 * nothing whoever waits (doc/deadlocks.md); RELEASING, FAILED and
 * NOT_GRANTED entries have no node their backend keeps.
 */
void
zklock_deadlock_add_local(DlGraph *g)
{
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	g->my_session = zklock_shared->session_id;
	for (int i = 0; i < zklock_shared->nentries; i++)
	{
		ZkLockEntry *e = &zklock_shared->entries[i];
		const char *role;

		if (e->state != ZKE_GRANTED ||
			e->persistent || e->node[0] == '\0' ||
			(e->kind != ZKR_ACQUIRE && e->kind != ZKR_TRY_ACQUIRE) ||
			e->session_id != g->my_session)
			continue;
		if (add_node(g, g->my_session, e->owner_pid,
					 psprintf("%s/%s", e->resource, e->node), NULL))
		{
			int			vi = zklock_deadlock_vertex(g, g->my_session, e->owner_pid);
			DlVertex   *v = &g->v[vi];

			role = zklock_node_field(e->data, "user=");
			if (v->role == NULL && role)
				v->role = pnstrdup(role, zklock_node_field_len(role));
		}
	}
	LWLockRelease(zklock_shared->lock);
}

/* The pids a backend of this instance waits for in the lock manager */
static ArrayType *
blocking_pids(int pid)
{
	return DatumGetArrayTypeP(DirectFunctionCall1(pg_blocking_pids,
												  Int32GetDatum(pid)));
}

/*
 * Add vertex u to the out-edges being gathered (once: edge_marks tells,
 * linear in the edges where list_append_unique_int was quadratic)
 */
static List *
add_edge(DlGraph *g, List *out, int u)
{
	if (g->v[u].edge_mark == g->edge_marks)
		return out;
	g->v[u].edge_mark = g->edge_marks;
	return lappend_int(out, u);
}

/* Vertex v's out-edges, as vertex indexes (g->v may move) */
static List *
out_edges(DlGraph *g, int vi)
{
	List	   *out = NIL;
	DlVertex	v = g->v[vi];

	g->edge_marks++;			/* a new vertex's mark is 0: never equal */
	if (v.waits)
	{
		/* the nodes of its resource below its own, in g->n's order */
		for (int i = zklock_deadlock_first_node(g, v.resource);
			 i < g->nn && g->n[i].seq < v.seq &&
			 strcmp(g->n[i].resource, v.resource) == 0; i++)
		{
			DlNode	   *n = &g->n[i];

			if (zklock_modes_conflict(n->mode, v.mode) &&
				!(n->session == v.session && n->pid == v.pid))
				out = add_edge(g, out, zklock_deadlock_vertex(g, n->session, n->pid));
		}
	}
	else if (v.session == g->my_session)
	{
		ArrayType  *a = blocking_pids(v.pid);
		Datum	   *elems;
		bool	   *nulls;
		int			nelems;

		deconstruct_array(a, INT4OID, 4, true, TYPALIGN_INT, &elems, &nulls,
						  &nelems);
		for (int i = 0; i < nelems; i++)
			if (!nulls[i] && DatumGetInt32(elems[i]) != v.pid)
				out = add_edge(g, out, zklock_deadlock_vertex(g, g->my_session,
											  DatumGetInt32(elems[i])));
	}
	return out;
}

/*
 * Depth first from vertex vi for an edge back to start; the path so far in
 * *path (vertex indexes).  Bounded by DL_MAX_VERTICES and the deadline.
 */
bool
zklock_deadlock_dfs(DlGraph *g, int vi, int start, List **path)
{
	List	   *out;
	ListCell   *lc;

	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	if (++g->nvisited > DL_MAX_VERTICES || GetCurrentTimestamp() > g->deadline)
	{
		g->gave_up = true;
		return false;
	}
	g->v[vi].visited = true;
	*path = lappend_int(*path, vi);
	out = out_edges(g, vi);
	foreach(lc, out)
		if (lfirst_int(lc) == start)
			return true;
	foreach(lc, out)
	{
		int			w = lfirst_int(lc);

		if (!g->v[w].visited && zklock_deadlock_dfs(g, w, start, path))
			return true;
		if (g->gave_up)
			return false;
	}
	*path = list_delete_last(*path);
	return false;
}

/* May this role see a backend of that role's pid?  As zk_locks says. */
static bool
can_see(const char *role)
{
	Oid			roleid;

	if (superuser() || has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS))
		return true;
	if (role == NULL)
		return false;
	roleid = get_role_oid(role, true);
	return OidIsValid(roleid) && has_privs_of_role(GetUserId(), roleid);
}

static void
append_who(StringInfo s, DlGraph *g, DlVertex *v, bool mask)
{
	if (mask && !can_see(v->role))
		appendStringInfo(s, "%s:?", instance_of(g, v->session));
	else
		appendStringInfo(s, "%s:%d", instance_of(g, v->session), v->pid);
}

/*
 * The cycle, one sentence per edge, as PostgreSQL's DETAIL has it; a
 * semaphore (of limit 1: deadlock_publish.c) is named as one, with its
 * limit, as zklock's other messages name semaphores
 */
char *
zklock_deadlock_describe(DlGraph *g, List *cycle, bool mask)
{
	StringInfoData s;
	ListCell   *lc;

	initStringInfo(&s);
	foreach(lc, cycle)
	{
		DlVertex   *v = &g->v[lfirst_int(lc)];
		DlVertex   *next = &g->v[lnext(cycle, lc) ?
								 lfirst_int(lnext(cycle, lc)) :
								 linitial_int(cycle)];

		if (s.len > 0)
			appendStringInfoChar(&s, '\n');
		append_who(&s, g, v, mask);
		if (v->waits && v->sem_limit > 0)
			appendStringInfo(&s, " waits for semaphore \"%s\" (limit %d)",
							 v->resource, v->sem_limit);
		else if (v->waits)
			appendStringInfo(&s, " waits for %s lock on resource \"%s\"",
							 v->mode == ZKLOCK_SHARED ? "SHARED" : "EXCLUSIVE",
							 v->resource);
		else
			appendStringInfoString(&s, " waits for a PostgreSQL lock");
		appendStringInfoString(&s, " held by ");
		append_who(&s, g, next, mask);
		appendStringInfoChar(&s, '.');
	}
	return s.data;
}

/*
 * Is request a younger than b?  By czxid, then (for requests created in one
 * multi of batch.c, which share its zxid) by session and pid: a total
 * order, the same on every instance, so that a cycle has one victim.
 */
bool
zklock_deadlock_younger(const DlVertex *a, const DlVertex *b)
{
	if (a->czxid != b->czxid)
		return a->czxid > b->czxid;
	if (a->session != b->session)
		return a->session > b->session;
	return a->pid > b->pid;
}

DlGraph *
zklock_deadlock_new_graph(TimestampTz deadline)
{
	DlGraph    *g = palloc0(sizeof(DlGraph));
	HASHCTL		ctl;

	ctl.keysize = sizeof(DlVertexKey);
	ctl.entrysize = sizeof(DlVertexSlot);
	ctl.hcxt = CurrentMemoryContext;
	g->vhash = hash_create("zklock deadlock vertices", 64, &ctl,
						   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	g->deadline = deadline;
	return g;
}
