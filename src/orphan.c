/*-------------------------------------------------------------------------
 *
 * orphan.c
 *		Nodes of explicit requests lost with the session.
 *
 * Persistent nodes of explicit requests that were still waiting when the
 * session was lost do not vanish with it: the worker deletes them (found by
 * their request's prefix) once it is connected again.
 *
 * protocol.c adds one when it fails such a request at the session's loss
 * (zklock_protocol_session_lost), starts the deletions once connected, and
 * hands them the replies tagged ORPHAN_IDX.  One listing of a parent is in
 * flight at a time; the list of orphans is in TopMemoryContext, each freed
 * when its parent has been listed (a failed listing is tried again at the
 * next connection).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/memutils.h"

#include "protocol_int.h"
#include "zklock.h"
#include "resource.h"
#include "zk_client.h"
#include "protocol.h"

typedef struct Orphan
{
	char		parent[ZKLOCK_MAX_PATH + 1];
	char		prefix[32];
} Orphan;

static List *orphans = NIL;
static uint32 orphan_generation = 0;
static bool orphan_busy = false;

/*
 * The session was lost while an explicit request waited: its node, if it
 * was made, outlives the session; delete it once connected again.
 */
void
zklock_orphan_add(const char *parent, const char *prefix)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	Orphan	   *o = palloc(sizeof(Orphan));

	strlcpy(o->parent, parent, sizeof(o->parent));
	strlcpy(o->prefix, prefix, sizeof(o->prefix));
	orphans = lappend(orphans, o);
	MemoryContextSwitchTo(old);
}

/* Delete the next orphaned persistent node, if any; when connected */
void
zklock_orphan_next(void)
{
	Orphan	   *o;

	if (orphans == NIL || orphan_busy)
		return;
	o = linitial(orphans);
	orphan_generation++;
	orphan_busy = zkc_get_children(o->parent,
								   TAG(orphan_generation, OP_CHILDREN, ORPHAN_IDX));
}

void
zklock_orphan_event(ZkEvent *ev)
{
	Orphan	   *o;

	if (ev->kind != ZKEV_CHILDREN || TAG_GEN(ev->tag) != orphan_generation ||
		orphans == NIL)
		return;
	orphan_busy = false;
	if (ev->rc != ZKC_OK && ev->rc != ZKC_NONODE)
		return;					/* try again later */
	o = linitial(orphans);
	for (int i = 0; i < ev->nchildren; i++)
	{
		if (zklock_node_has_prefix(ev->children[i], o->prefix))
		{
			char	   *path = psprintf("%s/%s", o->parent, ev->children[i]);

			char	   *child = psprintf("%s/%s", path, ZKLOCK_WAITER_CHILD);

			ereport(LOG,
					(errmsg("zklock: removing the node of an explicit lock request lost with the session: \"%s\"",
							path)));
			/* its waiter child went with the session; if not, it goes first */
			(void) zkc_delete(child, TAG(orphan_generation, OP_DELETE, ORPHAN_IDX));
			(void) zkc_delete(path, TAG(orphan_generation, OP_DELETE, ORPHAN_IDX));
			pfree(child);
			pfree(path);
		}
	}
	orphans = list_delete_first(orphans);
	pfree(o);
	zklock_orphan_next();
}

/* The connection is gone: a listing in flight will not be answered */
void
zklock_orphan_disconnected(void)
{
	orphan_busy = false;
}
