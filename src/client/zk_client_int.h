/*-------------------------------------------------------------------------
 *
 * zk_client_int.h
 *		What zk_client.c and zk_multi.c share, with ZooKeeper's headers:
 *		an operation's context, the folding of ZooKeeper's return codes,
 *		the session's handle.  Only those two include it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_ZK_CLIENT_INT_H
#define ZKLOCK_ZK_CLIENT_INT_H

#ifndef THREADED
#define THREADED				/* libzookeeper_mt: its synchronous calls too */
#endif
#include <zookeeper/zookeeper.h>

#include "zk_client.h"

/* Per-operation context handed to ZooKeeper and back (malloc'd) */
typedef struct OpContext
{
	ZkEventKind kind;
	uint64		tag;
	struct OpContext *watch;	/* a read's watch context: freed by the
								 * completion when the watch was not set */
	/* a watch context only: on watch_list, watch_mutex */
	struct OpContext *prev;
	struct OpContext *next;
	bool		armed;			/* its read's reply set it */
	bool		node_only;		/* not wanted on a node that is not there */
	bool		cancelled;		/* its owner no longer wants it */
	bool		removing;		/* a removal of its path is in flight */
	bool		child;			/* a child watch, not a data watch */
	char		path[FLEXIBLE_ARRAY_MEMBER];
} OpContext;

/* ZooKeeper thread: fold ZooKeeper's return codes */
static inline int
fold_rc(int rc)
{
	switch (rc)
	{
		case ZOK:
			return ZKC_OK;
		case ZNONODE:
			return ZKC_NONODE;
		case ZNODEEXISTS:
			return ZKC_NODEEXISTS;
		case ZNOTEMPTY:
			return ZKC_NOTEMPTY;
		case ZCONNECTIONLOSS:
		case ZOPERATIONTIMEOUT:
			return ZKC_CONNLOSS;
		case ZSESSIONEXPIRED:
		case ZCLOSING:
		case ZINVALIDSTATE:
			return ZKC_EXPIRED;
		case ZNOAUTH:
		case ZAUTHFAILED:
			return ZKC_NOAUTH;
		case ZBADVERSION:
			return ZKC_BADVERSION;
		default:
			return ZKC_ERROR;
	}
}

/* zk_client.c: the handle (NULL when closed) and the ACL of zklock's nodes */
extern zhandle_t *zkc_handle(void);
extern struct ACL_vector *zkc_node_acl(void);
extern bool zkc_delete_on(zhandle_t *h, const char *path, uint64 tag);

#endif							/* ZKLOCK_ZK_CLIENT_INT_H */
