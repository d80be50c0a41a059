/*-------------------------------------------------------------------------
 *
 * zk_client.c
 *		The worker's one ZooKeeper session, driven asynchronously.
 *
 * With zk_secure.c (the session's transport: TLS, SASL or plain),
 * zk_unwatch.c (the watches no longer wanted) and zk_multi.c (the multis
 * of batch.c's group commit), the only files that include zookeeper.h
 * (through zk_client_int.h): every call into the C client is in these
 * four.  Its sections: the events and watches; session management; the
 * asynchronous operations.
 * Everything here runs on the worker's main thread except the functions
 * marked "ZooKeeper thread": libzookeeper_mt calls those on its completion
 * thread.  They only copy what they were given into one malloc'd ZkEvent
 * and queue it, waking the main thread (zk_events.c, which holds the queue,
 * the wake pipe and the client library's last log line); they never call a
 * PostgreSQL function.
 * The watch contexts (zklock_watch_list) are guarded by zklock_watch_mutex;
 * zk_unwatch.c, which removes the unwanted ones, shares them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "zk_client.h"
#include "zk_client_int.h"
#include "zk_events.h"

static zhandle_t *zh = NULL;
static struct ACL_vector *node_acl = &ZOO_OPEN_ACL_UNSAFE;

/*
 * Every watch context of the handle (see the file header), its count of
 * watches set (armed) and whether a cancelled one may need a removal;
 * guarded by zklock_watch_mutex.  Shared with zk_unwatch.c (zk_client_int.h).
 */
pthread_mutex_t zklock_watch_mutex = PTHREAD_MUTEX_INITIALIZER;
OpContext  *zklock_watch_list = NULL;
uint64		zklock_watch_armed = 0;
bool		zklock_watch_upkeep_needed = false;

/* The session's handle and its nodes' ACL, for zk_multi.c (main thread) */
zhandle_t *
zkc_handle(void)
{
	return zh;
}

struct ACL_vector *
zkc_node_acl(void)
{
	return node_acl;
}

/* ZooKeeper thread: an event of a completion (zk_events.c makes it) */
static ZkEvent *
make_event(ZkEventKind kind, uint64 tag, int rc, const char *path,
		   const struct Stat *stat, const struct String_vector *children,
		   const char *data, int datalen)
{
	ZkNodeStat	st;

	if (stat)
	{
		st.czxid = stat->czxid;
		st.ephemeral_owner = stat->ephemeralOwner;
		st.mtime = stat->mtime;
		st.num_children = stat->numChildren;
		st.version = stat->version;
	}
	return zkc_event_new(kind, tag, fold_rc(rc), rc, path, stat ? &st : NULL,
						 children ? children->count : 0,
						 children ? children->data : NULL, data, datalen);
}

/* ZooKeeper thread: the session watcher */
static void
session_watcher(zhandle_t *handle, int type, int state, const char *path,
				void *ctx)
{
	ZkEvent    *ev;

	if (type != ZOO_SESSION_EVENT)
		return;
	ev = make_event(ZKEV_SESSION, 0, ZOK, NULL, NULL, NULL, NULL, 0);
	if (ev == NULL)
		return;
	if (state == ZOO_CONNECTED_STATE || state == ZOO_READONLY_STATE)
		ev->state = ZKC_STATE_CONNECTED;
	else if (state == ZOO_EXPIRED_SESSION_STATE)
		ev->state = ZKC_STATE_EXPIRED;
	else if (state == ZOO_AUTH_FAILED_STATE)
		ev->state = ZKC_STATE_AUTH_FAILED;
	else
		ev->state = ZKC_STATE_CONNECTING;
	zkc_push_event(ev);
}

/*
 * A watch context on zklock_watch_list (main thread, before its request is
 * sent).
 */
static void
watch_link(OpContext *wop, bool node_only)
{
	wop->armed = false;
	wop->node_only = node_only;
	wop->cancelled = false;
	wop->removing = false;
	wop->prev = NULL;
	pthread_mutex_lock(&zklock_watch_mutex);
	wop->next = zklock_watch_list;
	if (zklock_watch_list)
		zklock_watch_list->prev = wop;
	zklock_watch_list = wop;
	pthread_mutex_unlock(&zklock_watch_mutex);
}

/* Off zklock_watch_list and freed; the caller holds zklock_watch_mutex */
void
zklock_watch_free_locked(OpContext *wop)
{
	if (wop->prev)
		wop->prev->next = wop->next;
	else
		zklock_watch_list = wop->next;
	if (wop->next)
		wop->next->prev = wop->prev;
	if (wop->armed)
		zklock_watch_armed--;
	free(wop);
}

static void
watch_free(OpContext *wop)
{
	pthread_mutex_lock(&zklock_watch_mutex);
	zklock_watch_free_locked(wop);
	pthread_mutex_unlock(&zklock_watch_mutex);
}

/*
 * ZooKeeper thread: a read that asked for a watch was answered; "set" says
 * whether the answer set it.  A watch on a node that is not there (exists
 * found no node: a creation watch), when it was asked for the node only,
 * is cancelled at once: the lock nodes watched are never created again.
 */
static void
watch_answered(OpContext *wop, bool set, bool no_node)
{
	pthread_mutex_lock(&zklock_watch_mutex);
	if (!set)
		zklock_watch_free_locked(wop);
	else
	{
		wop->armed = true;
		zklock_watch_armed++;
		if (no_node && wop->node_only)
			wop->cancelled = true;
		if (wop->cancelled)
			zklock_watch_upkeep_needed = true;
	}
	pthread_mutex_unlock(&zklock_watch_mutex);
}

/* ZooKeeper thread: a node watch fired (one-shot) */
void
zklock_node_watcher(zhandle_t *handle, int type, int state,
					const char *path, void *ctx)
{
	OpContext  *op = ctx;
	ZkEvent    *ev = NULL;
	bool		cancelled;

	/* session events reach every watcher; session_watcher handles them */
	/*
	 * They come with a copy of the client's table, made in its IO thread:
	 * op may be gone already (dropped locally, zkc_watch_upkeep), so it is
	 * not touched.  An expired session's contexts go in zkc_close().
	 */
	if (type == ZOO_SESSION_EVENT)
		return;
	pthread_mutex_lock(&zklock_watch_mutex);
	cancelled = op->cancelled;
	pthread_mutex_unlock(&zklock_watch_mutex);
	if (!cancelled)
	{
		/* nobody waits for a cancelled one: not reported */
		ev = make_event(ZKEV_WATCH, op->tag, ZOK, op->path, NULL, NULL,
						NULL, 0);
		if (ev)
			ev->watch_type = (type == ZOO_DELETED_EVENT) ? ZKC_WATCH_DELETED :
				(type == ZOO_CHANGED_EVENT) ? ZKC_WATCH_CHANGED : ZKC_WATCH_OTHER;
		zkc_deliver(ev);
	}
	watch_free(op);
}

/* ZooKeeper thread: completions */
static void
created_completion(int rc, const char *name, const struct Stat *stat,
				   const void *data)
{
	OpContext  *op = (OpContext *) data;

	zkc_deliver(make_event(ZKEV_CREATED, op->tag, rc,
					   rc == ZOK ? name : op->path,
					   rc == ZOK ? stat : NULL, NULL, NULL, 0));
	free(op);
}

static void
children_completion(int rc, const struct String_vector *strings,
					const void *data)
{
	OpContext  *op = (OpContext *) data;

	if (op->watch)				/* set only when it listed the node */
		watch_answered(op->watch, rc == ZOK, false);
	zkc_deliver(make_event(ZKEV_CHILDREN, op->tag, rc, op->path, NULL,
					   rc == ZOK ? strings : NULL, NULL, 0));
	free(op);
}

static void
stat_completion(int rc, const struct Stat *stat, const void *data)
{
	OpContext  *op = (OpContext *) data;

	/* exists sets its watch on a node there (ZOK) or not (ZNONODE) */
	if (op->watch)
		watch_answered(op->watch, rc == ZOK || rc == ZNONODE, rc == ZNONODE);
	zkc_deliver(make_event(ZKEV_STAT, op->tag, rc, op->path,
					   rc == ZOK ? stat : NULL, NULL, NULL, 0));
	free(op);
}

static void
data_completion(int rc, const char *value, int value_len,
				const struct Stat *stat, const void *data)
{
	OpContext  *op = (OpContext *) data;

	/* getData sets its watch only when it read the node */
	if (op->watch)
		watch_answered(op->watch, rc == ZOK, false);
	zkc_deliver(make_event(ZKEV_DATA, op->tag, rc, op->path,
					   rc == ZOK ? stat : NULL, NULL,
					   rc == ZOK ? value : NULL, value_len));
	free(op);
}

static void
set_completion(int rc, const struct Stat *stat, const void *data)
{
	OpContext  *op = (OpContext *) data;

	zkc_deliver(make_event(ZKEV_STAT, op->tag, rc, op->path,
					   rc == ZOK ? stat : NULL, NULL, NULL, 0));
	free(op);
}

static void
void_completion(int rc, const void *data)
{
	OpContext  *op = (OpContext *) data;

	zkc_deliver(make_event(ZKEV_DELETED, op->tag, rc, op->path, NULL, NULL,
					   NULL, 0));
	free(op);
}

static void
sync_completion(int rc, const char *value, const void *data)
{
	OpContext  *op = (OpContext *) data;

	zkc_deliver(make_event(ZKEV_SYNCED, op->tag, rc, op->path, NULL, NULL,
					   NULL, 0));
	free(op);
}

/* ZooKeeper thread: each ACL entry becomes "<perms> <scheme>:<id>" */
static void
acl_completion(int rc, struct ACL_vector *acl, struct Stat *stat,
			   const void *data)
{
	OpContext  *op = (OpContext *) data;
	struct String_vector entries = {0, NULL};
	int			n = (rc == ZOK && acl) ? acl->count : 0;

	if (n > 0 && (entries.data = calloc(n, sizeof(char *))) != NULL)
	{
		for (int i = 0; i < n; i++)
		{
			struct ACL *a = &acl->data[i];
			size_t		len = 16 + strlen(a->id.scheme) + strlen(a->id.id);

			if ((entries.data[i] = malloc(len)) == NULL)
				break;
			snprintf(entries.data[i], len, "%d %s:%s", (int) a->perms,
					 a->id.scheme, a->id.id);
			entries.count++;
		}
	}
	if (n > 0 && entries.count < n)
		rc = ZSYSTEMERROR;		/* out of memory: no partial answer */
	zkc_deliver(make_event(ZKEV_ACL, op->tag, rc, op->path, NULL,
					   rc == ZOK ? &entries : NULL, NULL, 0));
	for (int i = 0; i < entries.count; i++)
		free(entries.data[i]);
	free(entries.data);
	free(op);
}

static void
acl_set_completion(int rc, const void *data)
{
	OpContext  *op = (OpContext *) data;

	zkc_deliver(make_event(ZKEV_ACL_SET, op->tag, rc, op->path, NULL, NULL,
					   NULL, 0));
	free(op);
}

/*
 * Session management, main thread.
 */

/*
 * A handle on the session (a new one, or old_session_id's), over TLS when
 * tls is given.  The client library reads tls's files at each connection
 * it makes (a new key and certificate in the same files take effect at the
 * next one) and checks the server's certificate chain against ca_file, and
 * the server's name or address against its certificate unless
 * tls->verify_host is off (scripts/zkclient/04-tls-host-check.patch).
 */
bool
zkc_connect(const char *hosts, int session_timeout_ms,
			const int64 *old_session_id, const char *old_passwd,
			const char *digest, const ZkcTls *tls, const ZkcSasl *sasl,
			char *errbuf, int errlen)
{
	clientid_t	cid;
	sigset_t	all,
				saved;

	Assert(zh == NULL);
	if (!zklock_zkc_secure_prepare(tls, sasl, errbuf, errlen))
		return false;
	if (zkc_wake_fd() < 0)
	{
		strlcpy(errbuf, "could not create the wake pipe", errlen);
		return false;
	}
	if (old_session_id)
	{
		memset(&cid, 0, sizeof(cid));
		cid.client_id = *old_session_id;
		memcpy(cid.passwd, old_passwd, sizeof(cid.passwd));
	}

	/* ZooKeeper's threads must never receive PostgreSQL's signals */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	errno = 0;
	zh = zklock_zkc_init(hosts, session_watcher, session_timeout_ms,
						 old_session_id ? &cid : NULL, tls, sasl);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);

	if (zh == NULL)
	{
		strlcpy(errbuf, errno ? strerror(errno) : "zookeeper_init failed",
				errlen);
		zklock_zkc_secure_release();
		return false;
	}

	/*
	 * By default the client resolves the host names again on every pass of
	 * its I/O loop (a netlink round trip each time, about half of an
	 * uncontended acquire on loopback); once every ten seconds is plenty,
	 * and a lost connection still resolves them at once.
	 */
	(void) zoo_set_servers_resolution_delay(zh, 10000);

	/*
	 * Credentials are sent now and again after every reconnection.  With
	 * digest credentials, SASL or TLS, nodes are the authenticated
	 * identities' alone (ZooKeeper records the creator's ids: digest:user:hash,
	 * sasl:user, x509:<subject>: zklock always presents a certificate,
	 * which ZooKeeper's x509 provider authenticates, doc/security.md).
	 */
	node_acl = (sasl || tls) ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE;
	if (digest && digest[0])
	{
		if (zoo_add_auth(zh, "digest", digest, strlen(digest), NULL, NULL) != ZOK)
		{
			strlcpy(errbuf, "could not add the digest credentials", errlen);
			zkc_close();
			return false;
		}
		node_acl = &ZOO_CREATOR_ALL_ACL;
	}
	return true;
}

/*
 * Close the handle.  Once zookeeper_close() has returned, no thread of the
 * client calls us any more: the watch contexts still on zklock_watch_list
 * (of watches set and never fired nor removed) are freed here.
 */
void
zkc_close(void)
{
	if (zh)
		zookeeper_close(zh);
	zh = NULL;
	zklock_zkc_secure_release();	/* after the handle: it used them */
	pthread_mutex_lock(&zklock_watch_mutex);
	while (zklock_watch_list)
		zklock_watch_free_locked(zklock_watch_list);
	Assert(zklock_watch_armed == 0);
	zklock_watch_armed = 0;
	zklock_watch_upkeep_needed = false;
	pthread_mutex_unlock(&zklock_watch_mutex);
}

bool
zkc_is_open(void)
{
	return zh != NULL;
}

int64
zkc_session_id(void)
{
	const clientid_t *cid = zh ? zoo_client_id(zh) : NULL;

	return cid ? cid->client_id : 0;
}

int
zkc_session_passwd(char *buf, int buflen)
{
	const clientid_t *cid = zh ? zoo_client_id(zh) : NULL;

	if (cid == NULL || buflen < (int) sizeof(cid->passwd))
		return 0;
	memcpy(buf, cid->passwd, sizeof(cid->passwd));
	return sizeof(cid->passwd);
}

int
zkc_negotiated_timeout(void)
{
	return zh ? zoo_recv_timeout(zh) : 0;
}

const char *
zkc_result_text(int zoo_rc)
{
	return zerror(zoo_rc);
}

void
zkc_set_log_level(int level)
{
	/* 0 error, 1 warn, 2 info, 3 debug: ZooKeeper's numbering, from 1 */
	zoo_set_debug_level((ZooLogLevel) (level + 1));
}

/*
 * Asynchronous operations, main thread.
 */
OpContext *
zklock_new_op(ZkEventKind kind, const char *path, uint64 tag)
{
	size_t		len = strlen(path) + 1;
	OpContext  *op = malloc(offsetof(OpContext, path) + len);

	if (op == NULL)
		return NULL;
	op->kind = kind;
	op->tag = tag;
	op->watch = NULL;
	op->child = false;
	memcpy(op->path, path, len);
	return op;
}

/* a send that failed at once: its completion will never come */
static bool
sent(int rc, OpContext *op)
{
	if (rc == ZOK)
		return true;
	free(op);
	return false;
}

bool
zkc_create(const char *path, const char *data, int datalen, int flags,
		   uint64 tag)
{
	OpContext  *op;
	int			mode = 0;

	if (zh == NULL || (op = zklock_new_op(ZKEV_CREATED, path, tag)) == NULL)
		return false;
	if (flags & ZKC_EPHEMERAL_SEQUENTIAL)
		mode = ZOO_EPHEMERAL_SEQUENTIAL;
	else if (flags & ZKC_CONTAINER)
		mode = ZOO_CONTAINER;
	else if (flags & ZKC_PERSISTENT_SEQUENTIAL)
		mode = ZOO_PERSISTENT_SEQUENTIAL;
	else if (flags & ZKC_EPHEMERAL)
		mode = ZOO_EPHEMERAL;
	return sent(zoo_acreate2(zh, path, data, datalen, node_acl,
							 mode, created_completion, op), op);
}

bool
zkc_get_children(const char *path, uint64 tag)
{
	OpContext  *op;

	if (zh == NULL || (op = zklock_new_op(ZKEV_CHILDREN, path, tag)) == NULL)
		return false;
	return sent(zoo_aget_children(zh, path, 0, children_completion, op), op);
}

/*
 * --- issue 18, the listing's guard: getChildren with a child watch ---
 * The children come back tagged "tag"; the next change of the children
 * (or the node's deletion) fires one ZKEV_WATCH tagged "watch_tag".  Set
 * only when the listing succeeds; counted and dropped (zkc_unwatch) as a
 * data watch is, removed as ZWATCHTYPE_CHILD.
 */
bool
zkc_get_children_watch(const char *path, uint64 tag, uint64 watch_tag)
{
	OpContext  *op = NULL;
	OpContext  *wop = NULL;
	int			rc;

	if (zh == NULL || (op = zklock_new_op(ZKEV_CHILDREN, path, tag)) == NULL ||
		(wop = zklock_new_op(ZKEV_WATCH, path, watch_tag)) == NULL)
	{
		free(op);
		return false;
	}
	op->watch = wop;
	wop->child = true;
	watch_link(wop, false);
	rc = zoo_awget_children(zh, path, zklock_node_watcher, wop,
							children_completion, op);
	if (rc != ZOK)
		watch_free(wop);
	return sent(rc, op);
}						/* --- end of issue 18's listing guard --- */

/* exists, with a watch if asked (node_only: see zkc_watch_node) */
static bool
send_exists(const char *path, bool watch, bool node_only, uint64 tag)
{
	OpContext  *op;
	OpContext  *wop = NULL;
	int			rc;

	if (zh == NULL || (op = zklock_new_op(ZKEV_STAT, path, tag)) == NULL)
		return false;
	if (watch && (wop = zklock_new_op(ZKEV_WATCH, path, tag)) == NULL)
	{
		free(op);
		return false;
	}
	op->watch = wop;
	if (wop)
		watch_link(wop, node_only);
	rc = zoo_awexists(zh, path, watch ? zklock_node_watcher : NULL, wop,
					  stat_completion, op);
	if (rc != ZOK && wop)
		watch_free(wop);
	return sent(rc, op);
}

/*
 * exists, with a watch if asked.  A watch set on a node that is not there
 * (NONODE) is a creation watch, kept until the node is created.
 */
bool
zkc_exists(const char *path, bool watch, uint64 tag)
{
	return send_exists(path, watch, false, tag);
}

/*
 * exists with a watch on the node while it exists: its deletion or a
 * change of its data fires a ZKEV_WATCH with the same tag.  When the reply
 * is NONODE, the creation watch ZooKeeper set instead is removed (nobody
 * waits for a lock node to be created: their names are never reused).
 */
bool
zkc_watch_node(const char *path, uint64 tag)
{
	return send_exists(path, true, true, tag);
}

bool
zkc_get_data(const char *path, uint64 tag)
{
	OpContext  *op;

	if (zh == NULL || (op = zklock_new_op(ZKEV_DATA, path, tag)) == NULL)
		return false;
	return sent(zoo_aget(zh, path, 0, data_completion, op), op);
}

/*
 * getData that also sets a watch on the node, in the same request: the
 * data comes back as a ZKEV_DATA, and any later change or deletion fires a
 * ZKEV_WATCH with the same tag.  A write applied after this read always
 * fires the watch, so nothing falls between the read and the watch.  The
 * watch is set only when the read succeeds (not on ZNONODE, nor when the
 * reply is lost).
 */
bool
zkc_get_data_watch(const char *path, uint64 tag)
{
	OpContext  *op;
	OpContext  *wop;
	int			rc;

	if (zh == NULL || (op = zklock_new_op(ZKEV_DATA, path, tag)) == NULL)
		return false;
	if ((wop = zklock_new_op(ZKEV_WATCH, path, tag)) == NULL)
	{
		free(op);
		return false;
	}
	op->watch = wop;
	watch_link(wop, true);
	rc = zoo_awget(zh, path, zklock_node_watcher, wop, data_completion, op);
	if (rc != ZOK)
		watch_free(wop);
	return sent(rc, op);
}

bool
zkc_delete(const char *path, uint64 tag)
{
	OpContext  *op;

	if (zh == NULL || (op = zklock_new_op(ZKEV_DELETED, path, tag)) == NULL)
		return false;
	return sent(zoo_adelete(zh, path, -1, void_completion, op), op);
}

/* delete only if the node's data version is still "version" (-1: any) */
bool
zkc_delete_version(const char *path, int version, uint64 tag)
{
	OpContext  *op;

	if (zh == NULL || (op = zklock_new_op(ZKEV_DELETED, path, tag)) == NULL)
		return false;
	return sent(zoo_adelete(zh, path, version, void_completion, op), op);
}

/* setData only if the node's data version is still "version" */
bool
zkc_set_data_version(const char *path, const char *data, int datalen,
					 int version, uint64 tag)
{
	OpContext  *op;

	if (zh == NULL || (op = zklock_new_op(ZKEV_STAT, path, tag)) == NULL)
		return false;
	return sent(zoo_aset(zh, path, data, datalen, version, set_completion, op),
				op);
}

bool
zkc_set_data(const char *path, const char *data, int datalen, uint64 tag)
{
	OpContext  *op;

	if (zh == NULL || (op = zklock_new_op(ZKEV_STAT, path, tag)) == NULL)
		return false;
	return sent(zoo_aset(zh, path, data, datalen, -1, set_completion, op), op);
}

/*
 * A sync: the server the session is connected to forwards it to the leader,
 * which checks that the session is still alive before answering.  A reply
 * is therefore the leader's word, which a read or a ping is not (a follower
 * cut from the leader answers those from its own copy).
 */
bool
zkc_sync(const char *path, uint64 tag)
{
	OpContext  *op;

	if (zh == NULL || (op = zklock_new_op(ZKEV_SYNCED, path, tag)) == NULL)
		return false;
	return sent(zoo_async(zh, path, sync_completion, op), op);
}

bool
zkc_get_acl(const char *path, uint64 tag)
{
	OpContext  *op;

	if (zh == NULL || (op = zklock_new_op(ZKEV_ACL, path, tag)) == NULL)
		return false;
	return sent(zoo_aget_acl(zh, path, acl_completion, op), op);
}

/* Give a node the ACL of zklock's own nodes (the credentials' only) */
bool
zkc_set_acl_private(const char *path, uint64 tag)
{
	OpContext  *op;

	if (zh == NULL || (op = zklock_new_op(ZKEV_ACL_SET, path, tag)) == NULL)
		return false;
	return sent(zoo_aset_acl(zh, path, -1, node_acl, acl_set_completion, op),
				op);
}

/*
 * (ZooKeeper thread too) a delete on handle h; false when not sent
 * (zk_multi.c: a delete rolled back with its multi, sent again alone)
 */
bool
zkc_delete_on(zhandle_t *h, const char *path, uint64 tag)
{
	OpContext  *op = zklock_new_op(ZKEV_DELETED, path, tag);

	if (op == NULL)
		return false;
	return sent(zoo_adelete(h, path, -1, void_completion, op), op);
}
