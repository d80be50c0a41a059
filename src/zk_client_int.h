/*-------------------------------------------------------------------------
 *
 * zk_client_int.h
 *		What zk_client.c shares with zk_multi.c, the other file of the
 *		client: the only two files that include it (and zookeeper.h).
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

/* zk_client.c: the handle (NULL when closed), our nodes' ACL, rc folding */
extern zhandle_t *zkc_handle(void);
extern struct ACL_vector *zkc_node_acl(void);
extern int	zkc_fold_rc(int rc);
/* a delete on handle h, its reply an ordinary event; false if not sent */
extern bool zkc_delete_on(zhandle_t *h, const char *path, uint64 tag);

#endif							/* ZKLOCK_ZK_CLIENT_INT_H */
