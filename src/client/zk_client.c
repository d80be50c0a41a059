/*-------------------------------------------------------------------------
 *
 * zk_client.c
 *		The worker's one ZooKeeper session, driven asynchronously.
 *
 * With zk_multi.c (the multis of batch.c's group commit), the only files
 * that include zookeeper.h (through zk_client_int.h): every call into the
 * C client is in these two.  Its sections: the events and watches; session
 * management; the asynchronous operations; the watches no longer wanted.
 * Everything here runs on the worker's main thread except the functions
 * marked "ZooKeeper thread": libzookeeper_mt calls those on its completion
 * thread.  They only copy what they were given into one malloc'd ZkEvent
 * and queue it, waking the main thread (zk_events.c, which holds the queue,
 * the wake pipe and the client library's last log line); they never call a
 * PostgreSQL function.
 * The watch contexts (watch_list) are guarded by watch_mutex.
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

/* the Makefile defines both, or neither (make ZK_CLIENT=...) */
#if defined(ZKLOCK_SECURE_CLIENT) != defined(HAVE_OPENSSL_H)
#error "ZKLOCK_SECURE_CLIENT and HAVE_OPENSSL_H: both or neither"
#endif

static zhandle_t *zh = NULL;
#ifdef HAVE_CYRUS_SASL_H
static sasl_callback_t *sasl_callbacks = NULL;	/* the handle's: freed after it */
#endif
static struct ACL_vector *node_acl = &ZOO_OPEN_ACL_UNSAFE;

/*
 * Every watch context of the handle (see the file header), its count of
 * watches set (armed) and whether a cancelled one may need a removal;
 * guarded by watch_mutex.
 */
static pthread_mutex_t watch_mutex = PTHREAD_MUTEX_INITIALIZER;
static OpContext *watch_list = NULL;
static uint64 watch_armed = 0;
static bool watch_upkeep_needed = false;

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
 * A watch context on watch_list (main thread, before its request is sent).
 */
static void
watch_link(OpContext *wop, bool node_only)
{
	wop->armed = false;
	wop->node_only = node_only;
	wop->cancelled = false;
	wop->removing = false;
	wop->prev = NULL;
	pthread_mutex_lock(&watch_mutex);
	wop->next = watch_list;
	if (watch_list)
		watch_list->prev = wop;
	watch_list = wop;
	pthread_mutex_unlock(&watch_mutex);
}

/* Off watch_list and freed; the caller holds watch_mutex */
static void
watch_free_locked(OpContext *wop)
{
	if (wop->prev)
		wop->prev->next = wop->next;
	else
		watch_list = wop->next;
	if (wop->next)
		wop->next->prev = wop->prev;
	if (wop->armed)
		watch_armed--;
	free(wop);
}

static void
watch_free(OpContext *wop)
{
	pthread_mutex_lock(&watch_mutex);
	watch_free_locked(wop);
	pthread_mutex_unlock(&watch_mutex);
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
	pthread_mutex_lock(&watch_mutex);
	if (!set)
		watch_free_locked(wop);
	else
	{
		wop->armed = true;
		watch_armed++;
		if (no_node && wop->node_only)
			wop->cancelled = true;
		if (wop->cancelled)
			watch_upkeep_needed = true;
	}
	pthread_mutex_unlock(&watch_mutex);
}

/* ZooKeeper thread: a node watch fired (one-shot) */
static void
node_watcher(zhandle_t *handle, int type, int state, const char *path,
			 void *ctx)
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
	pthread_mutex_lock(&watch_mutex);
	cancelled = op->cancelled;
	pthread_mutex_unlock(&watch_mutex);
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

/* Whether this build's client speaks TLS (make ZK_CLIENT=...) */
bool
zkc_has_tls(void)
{
#ifdef HAVE_OPENSSL_H
	return true;
#else
	return false;
#endif
}

/* Whether this build's client authenticates with SASL (make ZK_CLIENT=...) */
bool
zkc_has_sasl(void)
{
#ifdef HAVE_CYRUS_SASL_H
	return true;
#else
	return false;
#endif
}

/*
 * A handle on the session (a new one, or old_session_id's), over TLS when
 * tls is given.  The client library reads tls's files at each connection
 * it makes (a new key and certificate in the same files take effect at the
 * next one) and checks the server's certificate chain against ca_file (and
 * OpenSSL's default trust store); it checks no host name.
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
#ifndef HAVE_OPENSSL_H
	if (tls)
	{
		strlcpy(errbuf, "zklock.ssl is on, but this zklock is built with a ZooKeeper client without TLS (Debian's libzookeeper-mt); build it with make ZK_CLIENT=$(scripts/build-zkclient.sh)",
				errlen);
		return false;
	}
#endif
#ifndef HAVE_CYRUS_SASL_H
	if (sasl)
	{
		strlcpy(errbuf, "zklock.sasl_mechanism is set, but this zklock is built with a ZooKeeper client without SASL (Debian's libzookeeper-mt); build it with make ZK_CLIENT=$(scripts/build-zkclient.sh)",
				errlen);
		return false;
	}
#else
	if (sasl)
	{
		static bool sasl_ready = false;
		int			r;

		/* ZooKeeper's C client 3.8 has no call that takes both */
		if (tls)
		{
			strlcpy(errbuf, "zklock.ssl and zklock.sasl_mechanism together: ZooKeeper's C client cannot do SASL over TLS",
					errlen);
			return false;
		}
		if (!sasl_ready)
		{
			r = sasl_client_init(NULL);
			if (r != SASL_OK)
			{
				snprintf(errbuf, errlen, "could not initialize Cyrus SASL: %s",
						 sasl_errstring(r, NULL, NULL));
				return false;
			}
			sasl_ready = true;
		}
		Assert(sasl_callbacks == NULL);
		if (sasl->keytab)
		{
			/*
			 * Kerberos: MIT's GSSAPI takes the client's credentials from
			 * the client keytab (its first principal), into a credential
			 * cache of this process alone.
			 */
			setenv("KRB5_CLIENT_KTNAME", sasl->keytab, 1);
			setenv("KRB5CCNAME", "MEMORY:zklock", 1);
		}
		sasl_callbacks = zoo_sasl_make_basic_callbacks(sasl->user, NULL,
													   sasl->password_file);
		if (sasl_callbacks == NULL)
		{
			strlcpy(errbuf, "out of memory", errlen);
			return false;
		}
	}
#endif
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
#ifdef HAVE_OPENSSL_H
	if (tls)
	{
		/*
		 * "ca,cert,key": the client splits it at the commas (zklock.c
		 * refuses paths with one).  zookeeper_init_ssl takes no log
		 * callback: set just after, so a line logged in between goes to
		 * stderr (the server's log) instead of last_error.
		 */
		char		certs[3 * MAXPGPATH + 3];

		snprintf(certs, sizeof(certs), "%s,%s,%s", tls->ca_file,
				 tls->cert_file, tls->key_file);
		zh = zookeeper_init_ssl(hosts, certs, session_watcher,
								session_timeout_ms,
								old_session_id ? &cid : NULL, NULL, 0);
		if (zh)
			zoo_set_log_callback(zh, zkc_log_callback);
	}
	else
#endif
#ifdef HAVE_CYRUS_SASL_H
	if (sasl)
	{
		zoo_sasl_params_t params;

		params.service = sasl->service;
		params.host = sasl->host;
		params.mechlist = sasl->mechanism;
		params.callbacks = sasl_callbacks;
		zh = zookeeper_init_sasl(hosts, session_watcher, session_timeout_ms,
								 old_session_id ? &cid : NULL, NULL, 0,
								 zkc_log_callback, &params);
	}
	else
#endif
		zh = zookeeper_init2(hosts, session_watcher, session_timeout_ms,
							 old_session_id ? &cid : NULL, NULL, 0,
							 zkc_log_callback);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);

	if (zh == NULL)
	{
		strlcpy(errbuf, errno ? strerror(errno) : "zookeeper_init failed",
				errlen);
#ifdef HAVE_CYRUS_SASL_H
		free(sasl_callbacks);
		sasl_callbacks = NULL;
#endif
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
	 * digest credentials or SASL, nodes are the authenticated identity's
	 * alone (ZooKeeper records the creator's ids: digest:user:hash,
	 * sasl:user).
	 */
	node_acl = sasl ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE;
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
 * client calls us any more: the watch contexts still on watch_list (of
 * watches set and never fired nor removed) are freed here.
 */
void
zkc_close(void)
{
	if (zh)
		zookeeper_close(zh);
	zh = NULL;
#ifdef HAVE_CYRUS_SASL_H
	free(sasl_callbacks);		/* after the handle: it used them */
	sasl_callbacks = NULL;
#endif
	pthread_mutex_lock(&watch_mutex);
	while (watch_list)
		watch_free_locked(watch_list);
	Assert(watch_armed == 0);
	watch_armed = 0;
	watch_upkeep_needed = false;
	pthread_mutex_unlock(&watch_mutex);
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
static OpContext *
new_op(ZkEventKind kind, const char *path, uint64 tag)
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

	if (zh == NULL || (op = new_op(ZKEV_CREATED, path, tag)) == NULL)
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

	if (zh == NULL || (op = new_op(ZKEV_CHILDREN, path, tag)) == NULL)
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

	if (zh == NULL || (op = new_op(ZKEV_CHILDREN, path, tag)) == NULL ||
		(wop = new_op(ZKEV_WATCH, path, watch_tag)) == NULL)
	{
		free(op);
		return false;
	}
	op->watch = wop;
	wop->child = true;
	watch_link(wop, false);
	rc = zoo_awget_children(zh, path, node_watcher, wop, children_completion,
							op);
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

	if (zh == NULL || (op = new_op(ZKEV_STAT, path, tag)) == NULL)
		return false;
	if (watch && (wop = new_op(ZKEV_WATCH, path, tag)) == NULL)
	{
		free(op);
		return false;
	}
	op->watch = wop;
	if (wop)
		watch_link(wop, node_only);
	rc = zoo_awexists(zh, path, watch ? node_watcher : NULL, wop,
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

	if (zh == NULL || (op = new_op(ZKEV_DATA, path, tag)) == NULL)
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

	if (zh == NULL || (op = new_op(ZKEV_DATA, path, tag)) == NULL)
		return false;
	if ((wop = new_op(ZKEV_WATCH, path, tag)) == NULL)
	{
		free(op);
		return false;
	}
	op->watch = wop;
	watch_link(wop, true);
	rc = zoo_awget(zh, path, node_watcher, wop, data_completion, op);
	if (rc != ZOK)
		watch_free(wop);
	return sent(rc, op);
}

bool
zkc_delete(const char *path, uint64 tag)
{
	OpContext  *op;

	if (zh == NULL || (op = new_op(ZKEV_DELETED, path, tag)) == NULL)
		return false;
	return sent(zoo_adelete(zh, path, -1, void_completion, op), op);
}

/* delete only if the node's data version is still "version" (-1: any) */
bool
zkc_delete_version(const char *path, int version, uint64 tag)
{
	OpContext  *op;

	if (zh == NULL || (op = new_op(ZKEV_DELETED, path, tag)) == NULL)
		return false;
	return sent(zoo_adelete(zh, path, version, void_completion, op), op);
}

/* setData only if the node's data version is still "version" */
bool
zkc_set_data_version(const char *path, const char *data, int datalen,
					 int version, uint64 tag)
{
	OpContext  *op;

	if (zh == NULL || (op = new_op(ZKEV_STAT, path, tag)) == NULL)
		return false;
	return sent(zoo_aset(zh, path, data, datalen, version, set_completion, op),
				op);
}

bool
zkc_set_data(const char *path, const char *data, int datalen, uint64 tag)
{
	OpContext  *op;

	if (zh == NULL || (op = new_op(ZKEV_STAT, path, tag)) == NULL)
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

	if (zh == NULL || (op = new_op(ZKEV_SYNCED, path, tag)) == NULL)
		return false;
	return sent(zoo_async(zh, path, sync_completion, op), op);
}

bool
zkc_get_acl(const char *path, uint64 tag)
{
	OpContext  *op;

	if (zh == NULL || (op = new_op(ZKEV_ACL, path, tag)) == NULL)
		return false;
	return sent(zoo_aget_acl(zh, path, acl_completion, op), op);
}

/* Give a node the ACL of zklock's own nodes (the credentials' only) */
bool
zkc_set_acl_private(const char *path, uint64 tag)
{
	OpContext  *op;

	if (zh == NULL || (op = new_op(ZKEV_ACL_SET, path, tag)) == NULL)
		return false;
	return sent(zoo_aset_acl(zh, path, -1, node_acl, acl_set_completion, op),
				op);
}

/*
 * Watches no longer wanted.
 */

/* The number of watches the session has set and not seen fire or removed */
uint64
zkc_watch_count(void)
{
	uint64		n;

	pthread_mutex_lock(&watch_mutex);
	n = watch_armed;
	pthread_mutex_unlock(&watch_mutex);
	return n;
}

/*
 * The watches of an operation (by its tag) are no longer wanted: their
 * firing is not reported, and they are removed (zkc_watch_upkeep).
 */
void
zkc_unwatch(uint64 tag)
{
	pthread_mutex_lock(&watch_mutex);
	for (OpContext *w = watch_list; w; w = w->next)
	{
		if (w->tag == tag && !w->cancelled)
		{
			w->cancelled = true;
			watch_upkeep_needed = true;
		}
	}
	pthread_mutex_unlock(&watch_mutex);
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

	pthread_mutex_lock(&watch_mutex);
	for (OpContext *w = watch_list; w; w = next)
	{
		next = w->next;
		if (!w->armed || w->child != rop->child ||
			strcmp(w->path, rop->path) != 0)
			continue;
		if (rc == ZOK)
			watch_free_locked(w);
		else
		{
			w->removing = false;
			if (rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT)
				watch_upkeep_needed = true;
		}
	}
	pthread_mutex_unlock(&watch_mutex);
	free(rop);
}

/* Every watch context of this kind on this path is cancelled (watch_mutex) */
static bool
watch_path_unwanted(const char *path, bool child)
{
	for (OpContext *w = watch_list; w; w = w->next)
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
	OpContext  *todo = NULL;	/* removals to send, chained by next */
	OpContext  *rop;

	if (zh == NULL)
		return;
	pthread_mutex_lock(&watch_mutex);
	if (watch_upkeep_needed)
	{
		OpContext  *next;

		watch_upkeep_needed = false;
		for (OpContext *w = watch_list; w; w = next)
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
				 * found: its firing is queued, node_watcher frees it.
				 */
				if (zoo_remove_watches(zh, w->path,
									   w->child ? ZWATCHTYPE_CHILD : ZWATCHTYPE_DATA,
									   node_watcher, w, 1) == ZOK)
					watch_free_locked(w);
				continue;
			}
			rop = new_op(ZKEV_WATCH, w->path, 0);
			if (rop == NULL)
			{
				watch_upkeep_needed = true; /* out of memory: later */
				break;
			}
			rop->child = w->child;
			for (OpContext *o = watch_list; o; o = o->next)
				if (o->armed && o->child == w->child &&
					strcmp(o->path, w->path) == 0)
					o->removing = true;
			rop->next = todo;
			todo = rop;
		}
	}
	pthread_mutex_unlock(&watch_mutex);

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

/*
 * (ZooKeeper thread too) a delete on handle h; false when not sent
 * (zk_multi.c: a delete rolled back with its multi, sent again alone)
 */
bool
zkc_delete_on(zhandle_t *h, const char *path, uint64 tag)
{
	OpContext  *op = new_op(ZKEV_DELETED, path, tag);

	if (op == NULL)
		return false;
	return sent(zoo_adelete(h, path, -1, void_completion, op), op);
}
