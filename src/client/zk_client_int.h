/*-------------------------------------------------------------------------
 *
 * zk_client_int.h
 *		What the files of client/ share, with ZooKeeper's headers: an
 *		operation's context, the folding of ZooKeeper's return codes, the
 *		session's handle, the watch contexts (zk_unwatch.c's), the
 *		transport (zk_secure.c).  Only zk_client.c, zk_multi.c,
 *		zk_secure.c and zk_unwatch.c include it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_ZK_CLIENT_INT_H
#define ZKLOCK_ZK_CLIENT_INT_H

#ifndef THREADED
#define THREADED				/* libzookeeper_mt: its synchronous calls too */
#endif
#include <zookeeper/zookeeper.h>
#include <pthread.h>

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
/* zk_client.c: an operation's context, malloc'd (NULL: out of memory) */
extern OpContext *zklock_new_op(ZkEventKind kind, const char *path,
								uint64 tag);

/*
 * zk_client.c: every watch context of the handle, its count of watches set
 * (armed) and whether a cancelled one may need a removal, all guarded by
 * zklock_watch_mutex (ZooKeeper's threads take it too); for zk_unwatch.c,
 * which removes the cancelled ones
 */
extern pthread_mutex_t zklock_watch_mutex;
extern OpContext *zklock_watch_list;
extern uint64 zklock_watch_armed;
extern bool zklock_watch_upkeep_needed;
extern void zklock_watch_free_locked(OpContext *wop);
extern void zklock_node_watcher(zhandle_t *handle, int type, int state,
								const char *path, void *ctx);

/* zk_secure.c: the session's transport, for zkc_connect and zkc_close */
extern bool zklock_zkc_secure_prepare(const ZkcTls *tls, const ZkcSasl *sasl,
									  char *errbuf, int errlen);
extern zhandle_t *zklock_zkc_init(const char *hosts, watcher_fn watcher,
								  int session_timeout_ms,
								  const clientid_t *cid, const ZkcTls *tls,
								  const ZkcSasl *sasl);
extern void zklock_zkc_secure_release(void);

/* zk_krb5.c (with HAVE_CYRUS_SASL_H) */
extern bool zklock_zkc_krb5_prepare(const char *keytab, const char *principal,
									char *err, int errlen);

#endif							/* ZKLOCK_ZK_CLIENT_INT_H */
