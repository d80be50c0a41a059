/*-------------------------------------------------------------------------
 *
 * zk_events.h
 *		What zk_client.c hands to zk_events.c: making an event and queueing
 *		it, from the client library's threads.  Only those two include it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_ZK_EVENTS_H
#define ZKLOCK_ZK_EVENTS_H

#include "zk_client.h"

/* What an event tells of a node's stat, when one came back */
typedef struct ZkNodeStat
{
	int64		czxid;
	int64		ephemeral_owner;
	int64		mtime;
	int			num_children;
	int			version;
} ZkNodeStat;

/* ZooKeeper thread */
extern ZkEvent *zkc_event_new(ZkEventKind kind, uint64 tag, int rc, int zoo_rc,
							  const char *path, const ZkNodeStat *stat,
							  int nchildren, char *const *children,
							  const char *data, int datalen);
extern void zkc_push_event(ZkEvent *ev);
extern void zkc_deliver(ZkEvent *ev);
extern void zkc_log_callback(const char *message);

#endif							/* ZKLOCK_ZK_EVENTS_H */
