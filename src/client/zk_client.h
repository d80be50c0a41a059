/*-------------------------------------------------------------------------
 *
 * zk_client.h
 *		The worker's asynchronous ZooKeeper client, without ZooKeeper's
 *		headers.
 *
 * zk_client.c, zk_secure.c, zk_unwatch.c and zk_multi.c are the only
 * files that include zookeeper.h.  They issue asynchronous operations on the worker's one session; their
 * completions and watch notifications arrive on libzookeeper_mt's own
 * threads, which copy them into malloc'd ZkEvents on a mutex-protected
 * queue and write a byte to a pipe (zk_events.c holds both).  The worker
 * waits for that pipe in its WaitEventSet and takes the events with
 * zkc_next_event() on its main thread, so ZooKeeper's threads never call
 * into PostgreSQL.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_ZK_CLIENT_H
#define ZKLOCK_ZK_CLIENT_H

/* Results of operations, ZooKeeper's codes folded to what zklock acts on */
typedef enum ZkResult
{
	ZKC_OK = 0,
	ZKC_NONODE,					/* node does not exist */
	ZKC_NODEEXISTS,				/* node exists already */
	ZKC_NOTEMPTY,				/* node has children */
	ZKC_CONNLOSS,				/* outcome unknown: connection lost */
	ZKC_EXPIRED,				/* session expired or closing */
	ZKC_NOAUTH,					/* ACL refused it */
	ZKC_BADVERSION,				/* a versioned write found another version */
	ZKC_ERROR					/* anything else; see zkc_result_text */
} ZkResult;

typedef enum ZkEventKind
{
	ZKEV_SESSION,				/* session state changed */
	ZKEV_CREATED,				/* create finished */
	ZKEV_CHILDREN,				/* getChildren finished */
	ZKEV_STAT,					/* exists finished */
	ZKEV_DATA,					/* getData finished */
	ZKEV_DELETED,				/* delete finished */
	ZKEV_SYNCED,				/* sync finished: the leader answered */
	ZKEV_ACL,					/* getACL finished: entries in children[] */
	ZKEV_ACL_SET,				/* setACL finished */
	ZKEV_WATCH,					/* a watched node changed or vanished */
	ZKEV_MARK					/* zkc_send_mark's: never handed out */
} ZkEventKind;

typedef enum ZkClientState
{
	ZKC_STATE_CONNECTING,
	ZKC_STATE_CONNECTED,
	ZKC_STATE_EXPIRED,
	ZKC_STATE_AUTH_FAILED
} ZkClientState;

/* What a watch saw */
#define ZKC_WATCH_OTHER		0
#define ZKC_WATCH_DELETED	1
#define ZKC_WATCH_CHANGED	2

/*
 * A getACL reply lists each entry as "<perms> <scheme>:<id>" in children[];
 * perms are ZooKeeper's bits, of which READ is this one
 */
#define ZKC_PERM_READ	1

/* Node creation flags (none: a persistent node) */
#define ZKC_EPHEMERAL_SEQUENTIAL	1
#define ZKC_CONTAINER				2
#define ZKC_PERSISTENT_SEQUENTIAL	4
#define ZKC_EPHEMERAL				8

typedef struct ZkEvent
{
	struct ZkEvent *next;
	ZkEventKind kind;
	uint64		tag;			/* the caller's tag for the operation */
	int			rc;				/* ZkResult */
	int			zoo_rc;			/* ZooKeeper's own code, for messages */
	ZkClientState state;		/* for ZKEV_SESSION */
	int			watch_type;		/* for ZKEV_WATCH: ZKC_WATCH_* */
	char	   *path;			/* path of the operation, or created path */
	int64		czxid;			/* stat of the node, when one came back */
	int64		ephemeral_owner;
	int64		mtime;			/* ms since the epoch, by the clock of the
								 * ZooKeeper leader that made the last write */
	int			num_children;	/* the stat's numChildren */
	int			version;		/* the stat's data version */
	int			nchildren;		/* ZKEV_CHILDREN */
	char	  **children;
	char	   *data;			/* ZKEV_DATA, zero-terminated */
	int			datalen;
} ZkEvent;

/* Session */
extern int	zkc_wake_fd(void);
/*
 * TLS to ZooKeeper's secureClientPort: PEM files (zklock.ssl_*_file), read
 * by the client library at each connection it makes.
 */
typedef struct ZkcTls
{
	const char *ca_file;		/* the servers' CA(s) */
	const char *cert_file;		/* our certificate (chain) */
	const char *key_file;		/* its key, unencrypted */
	bool		verify_host;	/* the server's name against its certificate */
} ZkcTls;

/*
 * SASL authentication (zklock.sasl_*): DIGEST-MD5 with a user and a file
 * holding the password, read by Cyrus SASL at each authentication.
 */
typedef struct ZkcSasl
{
	const char *mechanism;		/* "DIGEST-MD5" */
	const char *service;		/* "zookeeper" */
	const char *host;			/* the server's name in the exchange */
	const char *user;			/* DIGEST-MD5 */
	const char *password_file;	/* DIGEST-MD5 */
	const char *keytab;			/* GSSAPI: the client keytab */
	const char *principal;		/* GSSAPI: its principal, "" = the first */
} ZkcSasl;

extern bool zkc_has_tls(void);
extern bool zkc_cert_identity(const char *path, char *subject, int len,
							  int64 *not_after);
extern bool zkc_has_sasl(void);
extern bool zkc_connect(const char *hosts, int session_timeout_ms,
						const int64 *old_session_id, const char *old_passwd,
						const char *digest, const ZkcTls *tls,
						const ZkcSasl *sasl, char *errbuf, int errlen);
extern void zkc_close(void);
extern bool zkc_is_open(void);
extern int64 zkc_session_id(void);
extern int	zkc_session_passwd(char *buf, int buflen);
extern int	zkc_negotiated_timeout(void);
extern const char *zkc_result_text(int zoo_rc);
extern void zkc_set_log_level(int level);
extern bool zkc_last_error(char *buf, int buflen);

/* Events */
extern ZkEvent *zkc_next_event(void);
extern void zkc_free_event(ZkEvent *ev);
extern void zkc_drain_wake_fd(void);

/* Asynchronous operations; false when it could not even be sent */
extern bool zkc_create(const char *path, const char *data, int datalen,
					   int flags, uint64 tag);
extern bool zkc_get_children(const char *path, uint64 tag);
extern bool zkc_get_children_watch(const char *path, uint64 tag,
								   uint64 watch_tag);
extern bool zkc_exists(const char *path, bool watch, uint64 tag);
extern bool zkc_get_data(const char *path, uint64 tag);
extern bool zkc_get_data_watch(const char *path, uint64 tag);
extern bool zkc_watch_node(const char *path, uint64 tag);
extern bool zkc_delete(const char *path, uint64 tag);
extern bool zkc_delete_version(const char *path, int version, uint64 tag);
extern bool zkc_set_data_version(const char *path, const char *data,
								 int datalen, int version, uint64 tag);
extern bool zkc_set_data(const char *path, const char *data, int datalen,
						 uint64 tag);
extern bool zkc_sync(const char *path, uint64 tag);
extern bool zkc_get_acl(const char *path, uint64 tag);
extern bool zkc_set_acl_private(const char *path, uint64 tag);

/* Watches: how many are set, and dropping those no longer wanted */
extern uint64 zkc_watch_count(void);
extern void zkc_unwatch(uint64 tag);
extern void zkc_watch_upkeep(void);

/*
 * Several writes as one transaction (a multi), for batch.c: each member's
 * reply is an ordinary event with its own tag (see zk_client.c); a
 * create's czxid is the transaction's zxid, read from a setData on the
 * anchor node that every multi carries
 */
typedef struct ZkcMultiOp
{
	bool		create;			/* a create, else a delete */
	const char *path;
	const char *data;			/* a create's */
	int			datalen;
	int			flags;			/* a create's ZKC_* flags (no container) */
	uint64		tag;
	bool		together;		/* never sent again alone (zk_multi.c) */
} ZkcMultiOp;

extern bool zkc_multi(const ZkcMultiOp *ops, int nops, const char *anchor);
extern bool zkc_create_anchor(const char *path);
extern bool zkc_multi_anchor_lost(void);
extern bool zkc_multi_rolled_back(uint64 tag);
extern void zkc_fail_locally(ZkEventKind kind, uint64 tag, const char *path);
extern bool zkc_send_mark(uint64 serial);
extern uint64 zkc_mark_seen(void);

#endif							/* ZKLOCK_ZK_CLIENT_H */
