/*-------------------------------------------------------------------------
 *
 * zk_multi.c
 *		The multis of batch.c's group commit: several writes as one
 *		ZooKeeper transaction, on the worker's one session (zk_client.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>

#include "zk_client.h"
#include "zk_client_int.h"
#include "zk_events.h"

/*
 * Multis: several writes as one ZooKeeper transaction (batch.c's group
 * commit), main thread and ZooKeeper thread.
 *
 * A multi's completion runs on the ZooKeeper thread, like every other, and
 * pushes one ordinary event per member, with the member's own tag and
 * result, so that the recipes see the replies a plain create or delete
 * would have given.  A create inside a multi returns no Stat (the 3.8 C
 * client), hence no czxid: the multi carries one more op, a setData on the
 * anchor node (batch.c names it), whose Stat's mzxid is the transaction's
 * zxid, which is the czxid of every node the transaction created; each
 * create's event carries it as czxid, the value a plain create's Stat
 * gives.  batch.c never puts two creates under one parent (one resource)
 * into one multi, so the tokens of one resource still grow strictly.
 *
 * A multi fails as a whole.  Then the member whose op failed gets its own
 * error; a delete that was only rolled back is sent again alone, here, with
 * its own tag; a create that was only rolled back is delivered as a
 * connection loss would be (ZKC_CONNLOSS, zoo_rc ZRUNTIMEINCONSISTENCY):
 * its node does not exist, the listing sent behind it does not find it by
 * its prefix, and the lock recipe creates it again (create_again), as after
 * a lost reply.  A create is not sent again from here, because the listing
 * behind it has left already and would answer before such a create.  A
 * multi lost with the connection (or the session) delivers that to every
 * member.  A member marked together (the queue's move: an entry's create
 * and its pending node's delete) is never sent again alone: rolled back,
 * it is delivered as not done (ZKC_CONNLOSS, ZRUNTIMEINCONSISTENCY), so
 * that the multi stays all or nothing; its caller sends the whole again.
 *
 * anchor_lost says that a multi found the anchor node missing (someone
 * deleted it): batch.c makes a new one before the next multi.  Each anchor
 * made has a number (anchor_gen), and each multi carries the number of the
 * anchor it was sent with: a multi (or an anchor's create) answered after
 * a newer anchor was made says nothing of that one, so it is not marked
 * lost (else a second anchor would be made, and the first, alive, left to
 * the end of the session).  Nor does a create whose reply was lost with the
 * connection: it may have been made; a multi sent later finds out.
 * rolled_back holds the tags of the last ROLLED_BACK_MAX creates rolled
 * back with a failed multi: their request creates again with the same tag,
 * and batch.c sends that create alone (zkc_multi_rolled_back), so that one
 * member that fails again and again cannot hold the others back.  (A tag
 * pushed out of the ring only goes into a multi again.)  anchor_lost,
 * anchor_gen and rolled_back are guarded by anchor_mutex.
 */
typedef struct MultiContext
{
	zhandle_t  *zh;				/* the handle it was sent on */
	int			nmembers;		/* ops[nmembers] is the anchor's setData */
	zoo_op_t   *ops;
	zoo_op_result_t *results;
	struct Stat anchor_stat;
	uint64		anchor_gen;		/* the anchor it was sent with */
	struct
	{
		bool		create;
		bool		together;	/* never sent again alone */
		uint64		tag;
		char	   *path;		/* the op's path */
		char	   *created;	/* a create's result: the created path */
	}			members[FLEXIBLE_ARRAY_MEMBER];
} MultiContext;

static pthread_mutex_t anchor_mutex = PTHREAD_MUTEX_INITIALIZER;
static bool anchor_lost = false;
static uint64 anchor_gen = 0;

#define ROLLED_BACK_MAX 256
static uint64 rolled_back[ROLLED_BACK_MAX];
static int	rolled_back_next = 0;

static void multi_free(MultiContext *ctx);

/* ZooKeeper thread: a rolled-back delete, sent again alone */
static void
multi_delete_again(MultiContext *ctx, int i)
{
	if (zkc_delete_on(ctx->zh, ctx->members[i].path, ctx->members[i].tag))
		return;
	zkc_deliver(zkc_event_new(ZKEV_DELETED, ctx->members[i].tag, ZKC_CONNLOSS,
							  ZCONNECTIONLOSS, ctx->members[i].path, NULL, 0,
							  NULL, NULL, 0));
}

/* ZooKeeper thread: did the op fail by itself (not only rolled back)? */
static inline bool
op_failed(int err)
{
	return err != ZOK && err != ZRUNTIMEINCONSISTENCY;
}

/* ZooKeeper thread: a multi's completion, one event per member */
static void
multi_completion(int rc, const void *data)
{
	MultiContext *ctx = (MultiContext *) data;
	int			n = ctx->nmembers;
	bool		per_op = false; /* the results name the op that failed */

	if (rc != ZOK && fold_rc(rc) != ZKC_CONNLOSS && fold_rc(rc) != ZKC_EXPIRED)
	{
		/*
		 * The server answered: each op's result says whether it failed or
		 * was only rolled back.  (A multi lost with the connection or the
		 * session has every result set to that; it is delivered as such.)
		 */
		for (int i = 0; i <= n; i++)
			if (op_failed(ctx->results[i].err))
				per_op = true;
		if (per_op && op_failed(ctx->results[n].err))
		{
			pthread_mutex_lock(&anchor_mutex);
			if (ctx->anchor_gen == anchor_gen)
				anchor_lost = true;
			pthread_mutex_unlock(&anchor_mutex);
		}
	}

	for (int i = 0; i < n; i++)
	{
		uint64		tag = ctx->members[i].tag;
		ZkEventKind kind = ctx->members[i].create ? ZKEV_CREATED : ZKEV_DELETED;
		int			err = per_op ? ctx->results[i].err : rc;

		if (rc == ZOK)
		{
			ZkNodeStat	st;

			memset(&st, 0, sizeof(st));
			st.czxid = ctx->anchor_stat.mzxid;	/* the transaction's zxid */
			st.mtime = ctx->anchor_stat.mtime;
			zkc_deliver(zkc_event_new(kind, tag, ZKC_OK, ZOK,
									  ctx->members[i].create ?
									  ctx->members[i].created :
									  ctx->members[i].path,
									  ctx->members[i].create ? &st : NULL,
									  0, NULL, NULL, 0));
		}
		else if (per_op && !op_failed(err) && ctx->members[i].together)
			zkc_deliver(zkc_event_new(kind, tag, ZKC_CONNLOSS,
									  ZRUNTIMEINCONSISTENCY,
									  ctx->members[i].path, NULL, 0, NULL,
									  NULL, 0));
		else if (per_op && !op_failed(err) && !ctx->members[i].create)
			multi_delete_again(ctx, i);
		else if (per_op && !op_failed(err))
		{
			/* a rolled-back create: "not made", as a lost reply says */
			pthread_mutex_lock(&anchor_mutex);
			rolled_back[rolled_back_next] = tag;
			rolled_back_next = (rolled_back_next + 1) % ROLLED_BACK_MAX;
			pthread_mutex_unlock(&anchor_mutex);
			zkc_deliver(zkc_event_new(kind, tag, ZKC_CONNLOSS,
									  ZRUNTIMEINCONSISTENCY,
									  ctx->members[i].path, NULL, 0, NULL,
									  NULL, 0));
		}
		else
			zkc_deliver(zkc_event_new(kind, tag, fold_rc(err), err,
									  ctx->members[i].path, NULL, 0, NULL,
									  NULL, 0));
	}
	multi_free(ctx);
}

/* A multi's context and everything it points to */
static void
multi_free(MultiContext *ctx)
{
	for (int i = 0; i < ctx->nmembers; i++)
	{
		free(ctx->members[i].path);
		free(ctx->members[i].created);
	}
	free(ctx->ops);
	free(ctx->results);
	free(ctx);
}

/* ZooKeeper's mode of a lock node's create flags */
static int
multi_create_mode(int flags)
{
	if (flags & ZKC_EPHEMERAL_SEQUENTIAL)
		return ZOO_EPHEMERAL_SEQUENTIAL;
	if (flags & ZKC_PERSISTENT_SEQUENTIAL)
		return ZOO_PERSISTENT_SEQUENTIAL;
	if (flags & ZKC_EPHEMERAL)
		return ZOO_EPHEMERAL;
	return 0;
}

/*
 * Send ops[0..nops-1] (creates of sequential or plain nodes and deletes,
 * no container: a multi's create knows no container mode) and a setData
 * on the anchor node as one multi.  The paths and data are copied (the
 * client serializes them at once; the result buffers live until the
 * completion).  false when it could not be sent: no completion comes.
 */
bool
zkc_multi(const ZkcMultiOp *ops, int nops, const char *anchor)
{
	zhandle_t  *zh = zkc_handle();
	MultiContext *ctx;
	bool		ok = true;
	int			rc;

	if (zh == NULL || nops <= 0)
		return false;
	ctx = calloc(1, offsetof(MultiContext, members) +
				 sizeof(ctx->members[0]) * nops);
	if (ctx == NULL)
		return false;
	ctx->zh = zh;
	ctx->nmembers = nops;
	ctx->ops = calloc(nops + 1, sizeof(zoo_op_t));
	ctx->results = calloc(nops + 1, sizeof(zoo_op_result_t));
	ok = ctx->ops != NULL && ctx->results != NULL;
	for (int i = 0; ok && i < nops; i++)
	{
		size_t		len = strlen(ops[i].path) + 1;

		Assert(!(ops[i].flags & ZKC_CONTAINER));
		ctx->members[i].create = ops[i].create;
		ctx->members[i].together = ops[i].together;
		ctx->members[i].tag = ops[i].tag;
		ctx->members[i].path = strdup(ops[i].path);
		ok = ctx->members[i].path != NULL;
		if (ok && ops[i].create)
		{
			/* room for the sequence number a sequential node gets */
			ctx->members[i].created = calloc(1, len + 16);
			ok = ctx->members[i].created != NULL;
			if (ok)
				zoo_create_op_init(&ctx->ops[i], ctx->members[i].path,
								   ops[i].data, ops[i].datalen, zkc_node_acl(),
								   multi_create_mode(ops[i].flags),
								   ctx->members[i].created, len + 16);
		}
		else if (ok)
			zoo_delete_op_init(&ctx->ops[i], ctx->members[i].path, -1);
	}
	if (!ok)
	{
		multi_free(ctx);
		return false;
	}
	zoo_set_op_init(&ctx->ops[nops], anchor, NULL, -1, -1, &ctx->anchor_stat);
	pthread_mutex_lock(&anchor_mutex);
	ctx->anchor_gen = anchor_gen;
	pthread_mutex_unlock(&anchor_mutex);
	rc = zoo_amulti(zh, nops + 1, ctx->ops, ctx->results, multi_completion,
					ctx);
	if (rc != ZOK)
	{
		multi_free(ctx);
		return false;
	}
	return true;
}

/* ZooKeeper thread: the anchor's create was answered */
static void
anchor_completion(int rc, const char *name, const void *data)
{
	uint64		gen = (uint64) (uintptr_t) data;

	if (rc != ZOK && rc != ZNODEEXISTS && fold_rc(rc) != ZKC_CONNLOSS)
	{
		pthread_mutex_lock(&anchor_mutex);
		if (gen == anchor_gen)
			anchor_lost = true;
		pthread_mutex_unlock(&anchor_mutex);
	}
}

/*
 * Create the anchor node of the multis (batch.c names it): an ephemeral
 * node of this session, so that it goes with the session.  The multis sent
 * after it on the session find it there.  false when it could not be sent.
 */
bool
zkc_create_anchor(const char *path)
{
	zhandle_t  *zh = zkc_handle();
	uint64		gen;

	if (zh == NULL)
		return false;
	pthread_mutex_lock(&anchor_mutex);
	anchor_lost = false;
	gen = ++anchor_gen;
	pthread_mutex_unlock(&anchor_mutex);
	return zoo_acreate(zh, path, NULL, -1, zkc_node_acl(), ZOO_EPHEMERAL,
					   anchor_completion, (const void *) (uintptr_t) gen) == ZOK;
}

/* Did a multi, or the anchor's create, find no anchor node? */
bool
zkc_multi_anchor_lost(void)
{
	bool		lost;

	pthread_mutex_lock(&anchor_mutex);
	lost = anchor_lost;
	pthread_mutex_unlock(&anchor_mutex);
	return lost;
}

/*
 * Was the create of this tag rolled back with a failed multi?  Then its
 * next create goes alone: true once, and the tag is forgotten.
 */
bool
zkc_multi_rolled_back(uint64 tag)
{
	bool		found = false;

	pthread_mutex_lock(&anchor_mutex);
	for (int i = 0; i < ROLLED_BACK_MAX && !found; i++)
	{
		if (rolled_back[i] == tag && tag != 0)
		{
			rolled_back[i] = 0;
			found = true;
		}
	}
	pthread_mutex_unlock(&anchor_mutex);
	return found;
}

/*
 * An operation that could not be sent (batch.c sends at the end of the
 * worker's pass, after its caller was told it was queued): its reply is a
 * connection loss, as if it had been sent and lost.
 */
void
zkc_fail_locally(ZkEventKind kind, uint64 tag, const char *path)
{
	zkc_deliver(zkc_event_new(kind, tag, ZKC_CONNLOSS, ZCONNECTIONLOSS, path,
							  NULL, 0, NULL, NULL, 0));
}

/*
 * A mark (batch.c): a read sent on the session behind what was sent before
 * it, whose answer comes after theirs.  Its event is not handed out:
 * zkc_next_event notes its serial (zkc_mark_seen) when it takes it, so
 * once the serial is seen, every reply sent before it was taken (and
 * handled) by the main thread.  Every answer counts, a lost connection's
 * too.  false when it could not be sent.
 */
static void
mark_completion(int rc, const struct Stat *stat, const void *data)
{
	zkc_deliver(zkc_event_new(ZKEV_MARK, (uint64) (uintptr_t) data, ZKC_OK,
							  rc, NULL, NULL, 0, NULL, NULL, 0));
}

bool
zkc_send_mark(uint64 serial)
{
	zhandle_t  *h = zkc_handle();

	if (h == NULL)
		return false;
	return zoo_aexists(h, "/", 0, mark_completion,
					   (const void *) (uintptr_t) serial) == ZOK;
}
