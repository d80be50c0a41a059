/*-------------------------------------------------------------------------
 *
 * orphan.c
 *		Nodes of explicit requests lost with the session, or with the
 *		worker.
 *
 * Persistent nodes of explicit requests that were still waiting when the
 * session was lost do not vanish with it: the worker deletes them (found by
 * their request's prefix, unique to one request of one worker incarnation)
 * once it is connected again.
 *
 * A recipe (recipe.h).  At the session's loss it notes every waiting
 * explicit request whose node exists or may (its session_lost hook runs
 * before the lock recipe's, which fails them); once connected it starts the
 * deletions, and recipe.c hands it the replies tagged ORPHAN_IDX.  One listing of a parent is in
 * flight at a time; the list of orphans is in TopMemoryContext, each freed
 * when its parent has been listed.  A listing lost with the connection is
 * tried again at the next one; one that fails otherwise (NOAUTH under
 * another client's ACL) sends its orphan to the tail, so that it does not
 * hold up the others, to be tried again at the next connection, and given
 * up (with a LOG line) after ORPHAN_MAX_TRIES failures.
 *
 * The worker itself can go (SIGTERM, an ERROR, a shutdown) while explicit
 * requests wait, or while the write that grants one is in flight: its exit
 * (zklock_channel_worker_gone) fails every pending request, and closes the
 * session, which takes the waiter children but not the persistent nodes.
 * Left alone, such a node waits for a sweep (twice the session timeout at
 * least, and a sweep interval) and meanwhile is, by Hive's rule, a granted
 * lock of nobody's; a grant already written lasts its time to live, while
 * its requester was told that it failed.  So at its exit (orphan_at_exit,
 * a before_shmem_exit callback that runs before the worker's own, which
 * fails the requests) the worker writes the (parent, prefix) of every
 * explicit request not yet answered, and of every orphan it had not yet
 * deleted, to ORPHAN_FILE; the next worker of the instance reads the file
 * once, at its first connection (its session starts only after the old one
 * is closed, so nothing of the old one can still be created), and deletes
 * those nodes at once, which makes "failed" true.  The file stays until
 * every orphan read from it is done with, so that a crash of the instance
 * meanwhile (the exit callbacks do not run) leaves it to the worker after
 * (before, it went as soon as read, and a granted node of the list then
 * lasted its time to live).  Nothing is written when the worker is killed
 * (SIGKILL: the instance restarts, and so do the requesters, who are told
 * nothing); their nodes are the sweep's, and so are the orphans added since
 * the file was read.  Only the worker touches the file and these lists.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "nodes/pg_list.h"
#include "pgstat.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "utils/memutils.h"

#include "failpoint.h"
#include "recipe.h"
#include "zklock.h"
#include "resource.h"
#include "zk_client.h"

/* Orphan clean-up's operations, as carried in a tag */
typedef enum OrphanOp
{
	OP_CHILDREN = 1,			/* list an orphan's parent */
	OP_DELETE					/* delete its node (reply not awaited) */
} OrphanOp;

typedef struct Orphan
{
	char		parent[ZKLOCK_MAX_PATH + 1];
	char		prefix[32];
	bool		from_file;		/* read from ORPHAN_FILE, still in it */
	int			tries;			/* listings that failed */
	uint32		failed_epoch;	/* connection of the last failure, or 0 */
} Orphan;

/* A listing that fails this many times (connections) gives the orphan up */
#define ORPHAN_MAX_TRIES	5

#define ORPHAN_FILE			PG_STAT_TMP_DIR "/zklock.orphans"
#define ORPHAN_FILE_TMP		PG_STAT_TMP_DIR "/zklock.orphans.tmp"

static List *orphans = NIL;
static uint32 orphan_generation = 0;
static bool orphan_busy = false;
static bool orphan_started = false;	/* file read, exit callback set */
static int	orphan_file_left = 0;	/* entries from_file still listed */
static uint32 orphan_epoch = 1; /* connections: one more at each loss */

static void orphan_at_exit(int code, Datum arg);
static void orphan_add(const char *parent, const char *prefix);
static void orphan_next(void);

/*
 * The session was lost while an explicit request waited: its node, if it
 * was made, outlives the session; delete it once connected again.
 */
static void
orphan_add(const char *parent, const char *prefix)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	Orphan	   *o = palloc(sizeof(Orphan));

	strlcpy(o->parent, parent, sizeof(o->parent));
	strlcpy(o->prefix, prefix, sizeof(o->prefix));
	o->from_file = false;
	o->tries = 0;
	o->failed_epoch = 0;
	orphans = lappend(orphans, o);
	MemoryContextSwitchTo(old);
}

/*
 * The head orphan is done with (its nodes' deletes sent, or given up):
 * free it; once every orphan read from ORPHAN_FILE is, the file goes.
 */
static void
orphan_drop_head(void)
{
	Orphan	   *o = linitial(orphans);

	orphans = list_delete_first(orphans);
	if (o->from_file && --orphan_file_left == 0)
		(void) unlink(ORPHAN_FILE);
	pfree(o);
}

/*
 * The orphans an earlier worker of this instance left in ORPHAN_FILE, one
 * "parent \t prefix" a line.  The file stays until every one of them is
 * done with (orphan_drop_head): a crash of the instance before that (no
 * exit callback runs) leaves it for the next worker, which reads it again.
 * At this worker's exit, orphan_at_exit replaces it with what is left of
 * it and the orphans added since.  Deleting an orphan's nodes twice is
 * harmless (its prefix belongs to one request of a worker that is gone).
 */
static void
orphan_load(void)
{
	FILE	   *f = AllocateFile(ORPHAN_FILE, "r");
	char		line[ZKLOCK_MAX_PATH + 64];
	int			n = 0;

	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL)
	{
		char	   *tab = strchr(line, '\t');

		line[strcspn(line, "\n")] = '\0';
		if (tab == NULL || tab == line || tab[1] == '\0' ||
			strlen(tab + 1) >= sizeof(((Orphan *) NULL)->prefix))
			continue;
		*tab = '\0';
		orphan_add(line, tab + 1);
		((Orphan *) llast(orphans))->from_file = true;
		n++;
	}
	FreeFile(f);
	orphan_file_left = n;
	if (n == 0)
		(void) unlink(ORPHAN_FILE);
	else
		ereport(LOG,
				(errmsg("zklock: removing the nodes of %d explicit lock request(s) that the previous worker left unanswered",
						n)));
}

/*
 * Delete the next orphaned persistent node, if any; when connected.  The
 * first call of a worker (its first connection) also reads what the
 * previous worker left, and sets the exit callback that leaves this one's.
 */
static void
orphan_next(void)
{
	Orphan	   *o;

	if (!orphan_started)
	{
		orphan_started = true;
		orphan_load();
		before_shmem_exit(orphan_at_exit, (Datum) 0);
		/* pause: the file is read, no node of it deleted yet */
		(void) ZKLOCK_FAILPOINT("orphans-loaded");
	}
	if (orphans == NIL || orphan_busy)
		return;
	o = linitial(orphans);
	if (o->failed_epoch == orphan_epoch)
		return;					/* all failed on this connection: the next */
	orphan_generation++;
	orphan_busy = zkc_get_children(o->parent,
								   TAG(orphan_generation, OP_CHILDREN, ORPHAN_IDX));
}

/*
 * The listing of the head orphan's parent failed, not for the connection
 * (NOAUTH under another client's ACL, say): the others must not wait
 * behind it.  It goes to the tail, to be listed again at the next
 * connection (orphan_next stops at an orphan that failed on this
 * one); after ORPHAN_MAX_TRIES failures it is given up, and its nodes left
 * to the sweep (a granted one lasts its time to live).
 */
static void
orphan_failed(Orphan *o, int rc)
{
	MemoryContext old;

	o->tries++;
	o->failed_epoch = orphan_epoch;
	if (o->tries >= ORPHAN_MAX_TRIES)
	{
		ereport(LOG,
				(errmsg("zklock: giving up removing the nodes of a lost explicit lock request under \"%s\" (prefix %s)",
						o->parent, o->prefix),
				 errdetail("Listing its parent failed %d times, the last with ZooKeeper error %d.",
						   o->tries, rc)));
		orphan_drop_head();
		return;
	}
	old = MemoryContextSwitchTo(TopMemoryContext);	/* the list may be new */
	orphans = list_delete_first(orphans);
	orphans = lappend(orphans, o);
	MemoryContextSwitchTo(old);
}

static void
orphan_event(ZkEvent *ev)
{
	Orphan	   *o;

	if (ev->kind != ZKEV_CHILDREN || TAG_GEN(ev->tag) != orphan_generation ||
		orphans == NIL)
		return;
	orphan_busy = false;
	o = linitial(orphans);
	if (ev->rc == ZKC_CONNLOSS || ev->rc == ZKC_EXPIRED)
		return;					/* again at the next connection */
	if (ev->rc != ZKC_OK && ev->rc != ZKC_NONODE)
	{
		orphan_failed(o, ev->zoo_rc);
		orphan_next();
		return;
	}
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
	orphan_drop_head();
	orphan_next();
}

/* The connection is gone: a listing in flight will not be answered */
static void
orphan_disconnected(void)
{
	orphan_busy = false;
	orphan_epoch++;
}

/*
 * The worker is leaving: every explicit request that has a node (or may
 * have one) and has not been answered is failed right after this
 * (zklock_channel_worker_gone, in the worker's own exit callback, which
 * runs after this one); a request whose grant was being written included.
 * Write their (parent, prefix), and the orphans not deleted yet, for the
 * next worker.  Never raises: a file that cannot be written leaves the
 * nodes to the sweep, as before.
 */
static void
orphan_at_exit(int code, Datum arg)
{
	FILE	   *f;
	ListCell   *lc;
	int			n = 0;

	for (int i = 0; zklock_work != NULL && i < zklock_recipe_nentries(); i++)
	{
		WorkEntry  *w = &zklock_work[i];

		if (w->persistent && w->phase != PH_IDLE &&
			w->phase != PH_DEFERRED &&
			(w->created || w->create_unknown || w->node[0] != '\0'))
			orphan_add(w->parent, w->prefix);
	}
	if (orphans == NIL)
	{
		(void) unlink(ORPHAN_FILE);
		return;
	}
	f = AllocateFile(ORPHAN_FILE_TMP, "w");
	if (f == NULL)
		return;
	foreach(lc, orphans)
	{
		Orphan	   *o = lfirst(lc);

		fprintf(f, "%s\t%s\n", o->parent, o->prefix);
		n++;
	}
	if (FreeFile(f) != 0 || rename(ORPHAN_FILE_TMP, ORPHAN_FILE) != 0)
		return;
	ereport(LOG,
			(errmsg("zklock: %d explicit lock request(s) left unanswered; the next worker removes their nodes",
					n)));
}

/*
 * The session is lost: the nodes of explicit requests that were still
 * waiting (made, or maybe made) outlive it; delete them once connected
 * again.  Runs before the lock recipe fails those requests.
 */
static void
orphan_session_lost(void)
{
	orphan_disconnected();
	for (int i = 0; i < zklock_recipe_nentries(); i++)
	{
		WorkEntry  *w = &zklock_work[i];

		switch (w->phase)
		{
			case PH_IDLE:
			case PH_DEFERRED:
			case PH_HELD:
			case PH_LISTING:
				break;
			default:
				if (w->persistent && (w->created || w->create_unknown))
					orphan_add(w->parent, w->prefix);
				break;
		}
	}
}

/* Connected: delete the next orphan's nodes */
static void
orphan_connected(int64 session_id)
{
	orphan_next();
}

const ZkRecipe zklock_orphan_recipe = {
	.name = "orphan",
	.idx_first = ORPHAN_IDX,
	.idx_count = 1,
	.event = orphan_event,
	.connected = orphan_connected,
	.disconnected = orphan_disconnected,
	.session_lost = orphan_session_lost,
};
