/*-------------------------------------------------------------------------
 *
 * zk_unwatch.c
 *		The watches no longer wanted: how many the session has set, marking
 *		an operation's watches unwanted (zkc_unwatch), and removing the
 *		unwanted ones from the server and the client (zkc_watch_upkeep).
 *
 * Moved out of zk_client.c (issue 29's limit).  It calls zk_client.c (the
 * handle, an operation's context, the node watcher the client library
 * matches a local removal by); zk_client.c calls nothing here.  The watch
 * contexts (zklock_watch_list and its counts) are zk_client.c's, guarded
 * by zklock_watch_mutex, which every function here holds while it looks
 * at them.  Runs on the worker's main thread, except remove_completion
 * ("ZooKeeper thread": libzookeeper_mt's completion thread), which only
 * frees or marks watch contexts under the mutex and never calls
 * PostgreSQL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>

#include "zk_client.h"
#include "zk_client_int.h"

/* The number of watches the session has set and not seen fire or removed */
uint64
zkc_watch_count(void)
{
	uint64		n;

	pthread_mutex_lock(&zklock_watch_mutex);
	n = zklock_watch_armed;
	pthread_mutex_unlock(&zklock_watch_mutex);
	return n;
}

/*
 * The watches of an operation (by its tag) are no longer wanted: their
 * firing is not reported, and they are removed (zkc_watch_upkeep).
 */
void
zkc_unwatch(uint64 tag)
{
	pthread_mutex_lock(&zklock_watch_mutex);
	for (OpContext *w = zklock_watch_list; w; w = w->next)
	{
		if (w->tag == tag && !w->cancelled)
		{
			w->cancelled = true;
			zklock_watch_upkeep_needed = true;
		}
	}
	pthread_mutex_unlock(&zklock_watch_mutex);
}

/*
 * ZooKeeper thread: a removal of every watch of this session on a path
 * was answered.  On success the client has dropped them from its tables
 * too (all of them were cancelled: see zkc_watch_upkeep): free their
 * contexts.  A removal lost with the connection is tried again.
 */
static void
remove_completion(int rc, const void *data)
{
	OpContext  *rop = (OpContext *) data;
	OpContext  *next;

	pthread_mutex_lock(&zklock_watch_mutex);
	for (OpContext *w = zklock_watch_list; w; w = next)
	{
		next = w->next;
		if (!w->armed || w->child != rop->child ||
			strcmp(w->path, rop->path) != 0)
			continue;
		if (rc == ZOK)
			zklock_watch_free_locked(w);
		else
		{
			w->removing = false;
			if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT)
				zklock_watch_upkeep_needed = true;
		}
	}
	pthread_mutex_unlock(&zklock_watch_mutex);
	free(rop);
}

/* Every watch context of this kind on this path is cancelled (zklock_watch_mutex) */
static bool
watch_path_unwanted(const char *path, bool child)
{
	for (OpContext *w = zklock_watch_list; w; w = w->next)
		if (!w->cancelled && w->child == child && strcmp(w->path, path) == 0)
			return false;
	return true;
}

/*
 * Main thread, once connected and after events: remove from the server
 * (and then the client) the watches that are set and cancelled, one
 * removeWatches per path, once no live watch of ours shares the path.
 * ZooKeeper keeps one watch per path and session, so a live one on the
 * same path (two waiters behind one node) keeps it: the cancelled ones are
 * freed when it fires.  A watch set by a request sent before the removal
 * is removed with it; one sent after it is set after it.
 */
void
zkc_watch_upkeep(void)
{
	zhandle_t  *zh = zkc_handle();
	OpContext  *todo = NULL;	/* removals to send, chained by next */
	OpContext  *rop;

	if (zh == NULL)
		return;
	pthread_mutex_lock(&zklock_watch_mutex);
	if (zklock_watch_upkeep_needed)
	{
		OpContext  *next;

		zklock_watch_upkeep_needed = false;
		for (OpContext *w = zklock_watch_list; w; w = next)
		{
			next = w->next;
			if (!w->armed || !w->cancelled || w->removing)
				continue;
			if (!watch_path_unwanted(w->path, w->child))
			{
				/*
				 * A live watch of ours shares the path: the server's watch
				 * stays for it; drop this one from the client only (the
				 * synchronous call: with local set it sends nothing).  Not
				 * found: its firing is queued, zklock_node_watcher frees it.
				 */
				if (zoo_remove_watches(zh, w->path,
									   w->child ? ZWATCHTYPE_CHILD : ZWATCHTYPE_DATA,
									   zklock_node_watcher, w, 1) == ZOK)
					zklock_watch_free_locked(w);
				continue;
			}
			rop = zklock_new_op(ZKEV_WATCH, w->path, 0);
			if (rop == NULL)
			{
				zklock_watch_upkeep_needed = true; /* out of memory: later */
				break;
			}
			rop->child = w->child;
			for (OpContext *o = zklock_watch_list; o; o = o->next)
				if (o->armed && o->child == w->child &&
					strcmp(o->path, w->path) == 0)
					o->removing = true;
			rop->next = todo;
			todo = rop;
		}
	}
	pthread_mutex_unlock(&zklock_watch_mutex);

	while (todo)
	{
		int			rc;

		rop = todo;
		todo = rop->next;
		/*
		 * The header declares the completion a void_completion_t *; the
		 * library stores and calls it as a void_completion_t.
		 */
		rc = zoo_aremove_all_watches(zh, rop->path,
									 rop->child ? ZWATCHTYPE_CHILD : ZWATCHTYPE_DATA,
									 0,
									 (void_completion_t *) remove_completion,
									 rop);
		if (rc != ZOK)
		{
			/*
			 * ZNOWATCHER: the client holds none on the path any more (they
			 * fired meanwhile; their contexts go with that).  Otherwise try
			 * again at the next upkeep.
			 */
			remove_completion(rc == ZNOWATCHER ? ZNOWATCHER : ZCONNECTIONLOSS,
							  rop);
		}
	}
}
