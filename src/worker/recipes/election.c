/*-------------------------------------------------------------------------
 *
 * election.c
 *		Instance leadership: ZooKeeper's election recipe, as the worker runs
 *		it for each group of zklock.elections.
 *
 * A group "g" is the container node <root>/zklock.elections/g (under the
 * reserved prefix no lock may use).  Each instance that names g in
 * zklock.elections has one EPHEMERAL_SEQUENTIAL child there, on the
 * instance's one ZooKeeper session, named
 * "cand-<system id>-<port>-<session>-<seq>" (a prefix unique to the
 * instance and the session: zklock_candidate_prefix) and holding its
 * description (nodedata.c, kind=candidate).
 *
 *	1. Join: create the candidate node and, right behind it on the same
 *	   session, list the group's children.  A missing group node (NONODE):
 *	   create the parents as containers, then again.
 *	2. Decide: the lowest sequence number leads.  Not the lowest: watch the
 *	   predecessor only (exists with a watch: no herd); when it goes, list
 *	   again and decide again.
 *	3. Lowest: write the own node's data once, so that its mtime (by
 *	   ZooKeeper's clock) says since when it leads, and only when that
 *	   write succeeded, publish the leadership; then watch the own node (the
 *	   guard): deleted by someone else, the leadership ends at once and the
 *	   worker joins again.
 *
 * Faults.  A lost reply (CONNLOSS) lists again once connected: the node,
 * if the create happened, is found by its prefix and adopted only if its
 * ephemeralOwner is the current session (a node of an earlier session of
 * this instance, still alive, is an ordinary candidate ahead of us until it
 * goes).  A lost session ends every leadership at once (the lease is
 * withdrawn before, worker.c) and every group joins again in the next
 * session.
 *
 * Published leadership is only half of zk_is_leader: a backend also needs
 * the lease (lease.c) of the same session to reach beyond its "now" by the
 * commit fence's margin, so a stalled worker, or one cut from the ZooKeeper
 * leader, stops being a leader by the backends' own clock before ZooKeeper
 * can expire the session and let another candidate lead.  The worker
 * deletes its own node (a group removed from zklock.elections) only after
 * it has withdrawn the leadership and no commit that passed the leadership
 * fence for this group can still land (the commit windows, lease.c): a
 * commit under a lock, or under another group's leadership, does not hold
 * it, and one that relied on this group is waited for as a session's close
 * waits (cancelled after a session timeout, logged).
 *
 * Watches: a group holds at most one, its predecessor's (WATCHING) or its
 * own node's (LEADING); each is dropped (zkc_unwatch) when the group moves
 * on.
 *
 * Shared state: zklock_elections_shared (election.h), written here only,
 * under zklock_shared->lock in exclusive mode; the rest is worker memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "utils/timestamp.h"

#include "election.h"
#include "election_int.h"
#include "shmem.h"
#include "recipe.h"
#include "settings.h"
#include "lease.h"
#include "failpoint.h"

#define EL_RETRY_MS			5000	/* after an error ZooKeeper gave */
#define EL_RECOVER_MS		100		/* lost replies while connected */
#define EL_MAX_TRIES		8

/* A group slot, the worker's own memory */
typedef struct Candidacy
{
	ZkElectionPhase phase;
	bool		removed;		/* no longer in zklock.elections */
	bool		deleting;		/* its delete is in flight */
	bool		created;		/* our node exists (we saw it) */
	bool		create_unknown; /* create sent, reply not seen */
	bool		need_parents;	/* create said NONODE */
	bool		guard_needed;	/* leading, the guard watch not set */
	int			create_rc;
	int			create_zoo_rc;
	int			tries;
	uint32		gen;			/* bumped at each new candidacy */
	int64		retry_at_us;	/* WAITING after an error: not before */
	char		name[ZKLOCK_MAX_GROUP_LEN + 1];
	char		node[ZKLOCK_MAX_NODE_NAME_LEN + 1];
	char		watched[ZKLOCK_MAX_NODE_NAME_LEN + 1];
	char		last_why[128];	/* retry_later's last reason, logged once */
	ZkCommitWait leave_wait;	/* LEAVING: for the commits that relied on
								 * the group's leadership (lease.c) */
} Candidacy;

static Candidacy cands[ZKLOCK_MAX_ELECTIONS];
static int64 el_session = 0;	/* the session candidacies are in */
static bool el_connected = false;
static bool el_recover = false;
static int64 el_last_recover_us = 0;
static uint32 el_gen = 0;

static void join(int g);
static void send_children(int g);
static void el_set_recovering(int g);
static void decide(int g, ZkEvent *ev);
static void watch_predecessor(int g, const char *pred);
static void take_over(int g);
static void send_guard(int g);
static void leave_listed(int g, ZkEvent *ev);
static void leave_step(int g, bool recover);
static void left(int g);
static void on_delete(int g, ZkEvent *ev);

#define EL_TAG(g, op)	TAG(cands[g].gen, (op), ELECTION_IDX(g))

/* Write group g's shared state from the worker's; leader: leads now */
static void
publish(int g, bool leader)
{
	Candidacy  *c = &cands[g];
	ZkElectionGroup *s = &zklock_elections_shared->groups[g];

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	s->phase = c->phase;
	strlcpy(s->name, c->name, sizeof(s->name));
	strlcpy(s->node, c->created ? c->node : "", sizeof(s->node));
	s->session_id = c->phase == ZKEL_FREE ? 0 : el_session;
	s->leader = leader;
	zklock_elections_shared->changes++;
	LWLockRelease(zklock_shared->lock);
}

/* Our node's path */
#define own_path(buf, len, g) \
	zklock_election_node_path((buf), (len), cands[g].name, cands[g].node)

/* ---- the recipe ---- */

/* Not the lowest any more, or never was: no leadership, no guard */
static void
stop_leading(int g)
{
	zkc_unwatch(EL_TAG(g, EOP_GUARD));
	cands[g].guard_needed = false;
	if (zklock_elections_shared->groups[g].leader)
		ereport(LOG,
				(errmsg("zklock: this instance no longer leads election group \"%s\"",
						cands[g].name)));
}

/* Step 1: create the candidate node (parents too when asked), then list */
static void
send_create(int g, bool with_parents)
{
	Candidacy  *c = &cands[g];
	char		path[EL_MAX_PATH];
	char		prefix[ZKLOCK_MAX_NODE_NAME_LEN + 1];
	char		data[EL_MAX_DATA + 1];
	int			len;
	bool		ok = true;

	zklock_election_group_path(path, sizeof(path), c->name);
	if (with_parents)
	{
		char		parent[EL_MAX_PATH];

		for (char *p = path + 1; ok; p++)
		{
			if (*p == '/' || *p == '\0')
			{
				memcpy(parent, path, p - path);
				parent[p - path] = '\0';
				ok = zkc_create(parent, NULL, -1, ZKC_CONTAINER,
								EL_TAG(g, EOP_PARENT));
				if (*p == '\0')
					break;
			}
		}
	}
	len = zklock_candidate_data(data, sizeof(data));
	zklock_candidate_prefix(prefix, sizeof(prefix), el_session);
	strlcat(path, "/", sizeof(path));
	strlcat(path, prefix, sizeof(path));
	c->phase = ZKEL_JOINING;
	c->create_unknown = true;
	c->need_parents = false;
	c->create_rc = ZKC_CONNLOSS;
	c->tries++;
	if (!ok || !zkc_create(path, data, len, ZKC_EPHEMERAL_SEQUENTIAL,
						   EL_TAG(g, EOP_CREATE)))
		el_set_recovering(g);
	else
		send_children(g);
}

static void
send_children(int g)
{
	char		path[EL_MAX_PATH];

	zklock_election_group_path(path, sizeof(path), cands[g].name);
	cands[g].retry_at_us = 0;
	if (cands[g].phase != ZKEL_LEAVING)
		cands[g].phase = ZKEL_JOINING;
	if (!zkc_get_children(path, EL_TAG(g, EOP_CHILDREN)))
		el_set_recovering(g);
}

static void
el_set_recovering(int g)
{
	if (cands[g].phase != ZKEL_LEAVING)
		cands[g].phase = ZKEL_RECOVERING;
	cands[g].deleting = false;
	el_recover = true;
}

/* The candidacy moves on: neither of its watches is wanted any more */
static void
drop_watches(int g)
{
	zkc_unwatch(EL_TAG(g, EOP_WATCH));
	zkc_unwatch(EL_TAG(g, EOP_GUARD));
}

/*
 * Wait and join again later (an error ZooKeeper gave, not a lost reply);
 * while our node may exist, list again later (no second node of ours)
 */
static void
retry_later(int g, const char *why)
{
	Candidacy  *c = &cands[g];

	if (strncmp(c->last_why, why, sizeof(c->last_why) - 1) != 0)
		ereport(LOG,
				(errmsg("zklock: could not join election group \"%s\": %s",
						c->name, why),
				 errdetail("The worker tries again every %d ms; this is logged again only if the reason changes.",
						   EL_RETRY_MS)));
	strlcpy(c->last_why, why, sizeof(c->last_why));
	c->retry_at_us = zklock_boottime_us() + EL_RETRY_MS * INT64CONST(1000);
	if (c->created || c->create_unknown)
	{
		c->phase = ZKEL_RECOVERING;
		return;
	}
	drop_watches(g);
	c->phase = ZKEL_WAITING;
	c->gen = ++el_gen;			/* replies still in flight are ignored */
	publish(g, false);
}

/* A new candidacy in the current session */
static void
join(int g)
{
	Candidacy  *c = &cands[g];
	int			sqlstate;
	char		why[ZKLOCK_MAX_ERROR_LEN + 1];

	drop_watches(g);
	c->gen = ++el_gen;
	c->created = false;
	c->create_unknown = false;
	c->node[0] = '\0';
	c->watched[0] = '\0';
	c->tries = 0;
	c->retry_at_us = 0;
	if (zklock_recipe_refused(&sqlstate, why, sizeof(why)))
	{
		retry_later(g, "zklock.root is not safe to use (see the server log)");
		return;
	}
	send_create(g, false);
	publish(g, false);
}

static void
on_create(int g, ZkEvent *ev)
{
	Candidacy  *c = &cands[g];

	/*
	 * failpoint "fail": the reply of a create that succeeded is lost; the
	 * listing behind it finds the node by its prefix (decide, on_adopt)
	 */
	if (ev->rc == ZKC_OK && ZKLOCK_FAILPOINT("election-after-create-reply"))
		return;
	c->create_rc = ev->rc;
	c->create_zoo_rc = ev->zoo_rc;
	if (ev->rc == ZKC_OK)
	{
		const char *slash = strrchr(ev->path, '/');

		strlcpy(c->node, slash ? slash + 1 : ev->path, sizeof(c->node));
		c->created = true;
		c->create_unknown = false;
	}
	else if (ev->rc == ZKC_NONODE)
	{
		c->need_parents = true;
		c->create_unknown = false;
	}
	else if (ev->rc != ZKC_CONNLOSS)
		c->create_unknown = false;
	/* the listing behind it decides */
}

/* The listing came back: a failed create, missing parents, or decide() */
static void
on_children(int g, ZkEvent *ev)
{
	Candidacy  *c = &cands[g];

	if (ev->rc == ZKC_CONNLOSS)
		el_set_recovering(g);
	else if (ev->rc == ZKC_EXPIRED)
		return;					/* zklock_election_session_lost() follows */
	else if (c->phase == ZKEL_LEAVING)
		leave_listed(g, ev);
	else if (c->need_parents || ev->rc == ZKC_NONODE)
	{
		if (ev->rc == ZKC_NONODE)	/* no group node, so no node of ours */
			c->created = c->create_unknown = false;
		if (c->tries >= EL_MAX_TRIES)
			retry_later(g, "the group node kept disappearing");
		else
			send_create(g, true);
	}
	else if (ev->rc != ZKC_OK)
		retry_later(g, zkc_result_text(ev->zoo_rc));
	else if (!c->created && !c->create_unknown && c->create_rc != ZKC_OK &&
			 c->create_rc != ZKC_CONNLOSS)
		retry_later(g, zkc_result_text(c->create_zoo_rc));
	else
		decide(g, ev);
}

/*
 * Step 2: find our node in the listing (by name, or by prefix after a
 * lost reply: then check its owner first), then lead or watch the
 * predecessor.
 */
static void
decide(int g, ZkEvent *ev)
{
	Candidacy  *c = &cands[g];
	char		prefix[ZKLOCK_MAX_NODE_NAME_LEN + 1];
	char		path[EL_MAX_PATH];
	int64		my_seq = -1;
	int64		pred_seq = -1;
	int			pred = -1;

	zklock_candidate_prefix(prefix, sizeof(prefix), el_session);
	for (int i = 0; i < ev->nchildren; i++)
	{
		const char *n = ev->children[i];

		if (c->created ? strcmp(n, c->node) != 0 :
			strncmp(n, prefix, strlen(prefix)) != 0)
			continue;
		if (!c->created)
		{
			/* found after a lost reply: ours only if this session's */
			strlcpy(c->node, n, sizeof(c->node));
			own_path(path, sizeof(path), g);
			c->phase = ZKEL_JOINING;
			if (!zkc_exists(path, false, EL_TAG(g, EOP_ADOPT)))
				el_set_recovering(g);
			return;
		}
		my_seq = zklock_candidate_instance(n, NULL, 0);
	}
	if (my_seq < 0)
	{
		/* our node is gone (deleted by someone), or was never made */
		if (c->created)
			ereport(LOG,
					(errmsg("zklock: candidate node \"%s\" of election group \"%s\" was deleted; joining again",
							c->node, c->name)));
		stop_leading(g);
		join(g);
		return;
	}
	for (int i = 0; i < ev->nchildren; i++)
	{
		int64		s = zklock_candidate_instance(ev->children[i], NULL, 0);

		if (s < 0)
			continue;
		if (s < my_seq && s > pred_seq)
		{
			pred_seq = s;
			pred = i;
		}
	}
	if (pred < 0)
		take_over(g);
	else
	{
		stop_leading(g);
		watch_predecessor(g, ev->children[pred]);
	}
}

/* A node found by our prefix: adopt it only if this session's */
static void
on_adopt(int g, ZkEvent *ev)
{
	Candidacy  *c = &cands[g];

	if (ev->rc == ZKC_OK && ev->ephemeral_owner == el_session)
	{
		ereport(LOG,
				(errmsg("zklock: adopted candidate node \"%s\" of election group \"%s\" after its create's reply was lost",
						c->node, c->name)));
		c->created = true;
		c->create_unknown = false;
		send_children(g);
	}
	else if (ev->rc == ZKC_OK || ev->rc == ZKC_NONODE)
	{
		/* an earlier session's, or gone: as if the create never happened */
		c->node[0] = '\0';
		c->create_unknown = false;
		if (c->phase == ZKEL_LEAVING)
			left(g);
		else
			send_create(g, false);
	}
	else
		el_set_recovering(g);
}

/* Step 2, not the lowest: watch the predecessor, and nothing else */
static void
watch_predecessor(int g, const char *pred)
{
	Candidacy  *c = &cands[g];
	char		parent[EL_MAX_PATH];
	char		path[EL_MAX_PATH];

	zklock_election_group_path(parent, sizeof(parent), c->name);
	snprintf(path, sizeof(path), "%s/%s", parent, pred);
	zkc_unwatch(EL_TAG(g, EOP_WATCH));
	strlcpy(c->watched, pred, sizeof(c->watched));
	c->phase = ZKEL_WATCHING;
	publish(g, false);
	if (!zkc_watch_node(path, EL_TAG(g, EOP_WATCH)))
		el_set_recovering(g);
}

static void
on_watch(int g, ZkEvent *ev)
{
	Candidacy  *c = &cands[g];

	if (c->phase != ZKEL_WATCHING)
		return;
	if (ev->kind == ZKEV_WATCH && ev->watch_type == ZKC_WATCH_CHANGED)
	{
		/* the predecessor took over (its write): still ahead of us */
		if (!zkc_watch_node(ev->path, EL_TAG(g, EOP_WATCH)))
			el_set_recovering(g);
	}
	else if (ev->kind == ZKEV_WATCH ||
			 (ev->kind == ZKEV_STAT && ev->rc == ZKC_NONODE))
		send_children(g);		/* the predecessor is gone: list again */
	else if (ev->rc == ZKC_CONNLOSS)
		el_set_recovering(g);
}

/* Step 3: the lowest; write our node once, then lead */
static void
take_over(int g)
{
	Candidacy  *c = &cands[g];
	char		path[EL_MAX_PATH];
	char		data[EL_MAX_DATA + 1];
	int			len;

	zkc_unwatch(EL_TAG(g, EOP_WATCH));
	c->watched[0] = '\0';
	if (zklock_elections_shared->groups[g].leader)
	{
		/* listed again (a lost reply): still the lowest, still leading */
		c->phase = ZKEL_LEADING;
		if (c->guard_needed)
			send_guard(g);
		return;
	}
	c->phase = ZKEL_TAKING_OVER;
	own_path(path, sizeof(path), g);
	len = zklock_candidate_data(data, sizeof(data));
	if (!zkc_set_data(path, data, len, EL_TAG(g, EOP_LEAD)))
		el_set_recovering(g);
}

static void
on_lead(int g, ZkEvent *ev)
{
	Candidacy  *c = &cands[g];

	if (c->phase != ZKEL_TAKING_OVER)
		return;
	if (ev->rc == ZKC_OK)
	{
		c->phase = ZKEL_LEADING;
		c->last_why[0] = '\0';
		publish(g, true);
		ereport(LOG,
				(errmsg("zklock: this instance leads election group \"%s\" (node \"%s\", session 0x%llx)",
						c->name, c->node, (unsigned long long) el_session)));
		send_guard(g);
	}
	else if (ev->rc == ZKC_NONODE)
		join(g);				/* our node was deleted meanwhile */
	else if (ev->rc != ZKC_EXPIRED)
		el_set_recovering(g);		/* list again: still the lowest? */
}

/* The guard: a watch on our own node while leading */
static void
send_guard(int g)
{
	char		path[EL_MAX_PATH];

	own_path(path, sizeof(path), g);
	cands[g].guard_needed = !zkc_watch_node(path, EL_TAG(g, EOP_GUARD));
	if (cands[g].guard_needed)
		el_recover = true;
}

static void
on_guard(int g, ZkEvent *ev)
{
	Candidacy  *c = &cands[g];

	if (c->phase != ZKEL_LEADING)
		return;
	if ((ev->kind == ZKEV_WATCH && ev->watch_type == ZKC_WATCH_DELETED) ||
		(ev->kind == ZKEV_STAT && ev->rc == ZKC_NONODE))
	{
		/* someone deleted our node: another candidate may lead now */
		c->phase = ZKEL_JOINING;
		c->created = false;
		publish(g, false);
		ereport(LOG,
				(errmsg("zklock: candidate node \"%s\" of election group \"%s\" was deleted while it led; joining again",
						c->node, c->name)));
		stop_leading(g);
		join(g);
	}
	else if (ev->kind == ZKEV_WATCH)
		send_guard(g);
	else if (ev->rc == ZKC_CONNLOSS)
	{
		c->guard_needed = true;
		el_recover = true;
	}
}

/* ---- the entry points ---- */

/* The handler of each operation of a group, from EOP_CREATE on */
static void (*const handlers[]) (int g, ZkEvent *ev) = {
	on_create, on_children, on_adopt, on_watch, on_lead, on_guard, on_delete
};
StaticAssertDecl(lengthof(handlers) == EOP_DELETE - EOP_CREATE + 1,
				 "one handler for each operation from EOP_CREATE to EOP_DELETE");

void
zklock_election_event(ZkEvent *ev)
{
	int			idx = TAG_IDX(ev->tag);
	int			op = TAG_OP(ev->tag);
	int			g = ELECTION_IDX(0) - idx;

	if (!ELECTION_IS_IDX(idx))
	{
		zklock_election_query_event(idx, ev);
		return;
	}
	if (TAG_GEN(ev->tag) != cands[g].gen || cands[g].phase == ZKEL_FREE)
		return;					/* an earlier candidacy's */
	if (op >= EOP_CREATE && op <= EOP_DELETE)
		handlers[op - EOP_CREATE] (g, ev);
	/* EOP_PARENT has none: the create behind it tells */
}

/* Worker start: no group leads; take the setting */
void
zklock_election_init(void)
{
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	memset(zklock_elections_shared->groups, 0,
		   sizeof(zklock_elections_shared->groups));
	zklock_elections_shared->changes++;
	LWLockRelease(zklock_shared->lock);
	memset(cands, 0, sizeof(cands));
	zklock_election_reload();
}

/* The session is (again) connected: join, or retry what lost its reply */
void
zklock_election_connected(int64 session_id)
{
	el_connected = true;
	if (session_id != el_session)
	{
		el_session = session_id;
		for (int g = 0; g < ZKLOCK_MAX_ELECTIONS; g++)
			if (cands[g].phase != ZKEL_FREE && !cands[g].removed)
				cands[g].phase = ZKEL_WAITING;
	}
	el_recover = true;
	el_last_recover_us = 0;
	(void) zklock_election_tick();
}

void
zklock_election_disconnected(void)
{
	el_connected = false;
}

/*
 * The session is gone, and with it every candidate node: no group leads
 * (the lease was withdrawn before this), each joins again in the next
 * session; a removed group is done.
 */
void
zklock_election_session_lost(void)
{
	el_connected = false;
	el_session = 0;
	zklock_election_queries_lost("the ZooKeeper session was lost");
	for (int g = 0; g < ZKLOCK_MAX_ELECTIONS; g++)
	{
		Candidacy  *c = &cands[g];

		if (c->phase == ZKEL_FREE)
			continue;
		stop_leading(g);
		c->gen = ++el_gen;
		c->created = false;
		c->create_unknown = false;
		c->node[0] = '\0';
		c->deleting = false;
		if (c->removed)
			left(g);
		else
		{
			c->phase = ZKEL_WAITING;
			publish(g, false);
		}
	}
}

/* Run what is due; the ms until something is due again, -1 none */
long
zklock_election_tick(void)
{
	int64		now = zklock_boottime_us();
	long		next = -1;
	bool		recover = el_recover &&
		now - el_last_recover_us >= EL_RECOVER_MS * INT64CONST(1000);

	if (!el_connected)
		return -1;
	if (recover)
	{
		el_recover = false;
		el_last_recover_us = now;
	}
	for (int g = 0; g < ZKLOCK_MAX_ELECTIONS; g++)
	{
		Candidacy  *c = &cands[g];

		if (c->phase == ZKEL_WAITING && now >= c->retry_at_us)
			join(g);
		else if ((c->phase == ZKEL_WAITING || c->phase == ZKEL_RECOVERING) &&
				 now < c->retry_at_us)
		{
			long		ms = (long) ((c->retry_at_us - now) / 1000) + 1;

			next = (next < 0 || ms < next) ? ms : next;
		}
		else if (c->phase == ZKEL_RECOVERING && (recover || c->retry_at_us))
			send_children(g);
		else if (c->phase == ZKEL_LEADING && c->guard_needed && recover)
			send_guard(g);
		else if (c->phase == ZKEL_LEAVING)
			leave_step(g, recover);
	}
	if (el_recover)
		next = (next < 0 || next > EL_RECOVER_MS) ? EL_RECOVER_MS : next;
	return next;
}

/* ---- leaving a group, and zklock.elections changing ---- */

/*
 * A group removed from zklock.elections: the leadership ends now (under
 * the lock, so no commit fence trusts it from here on); the node goes once
 * no commit whose leadership fence vouched for this group slot can still
 * land (leave_step), since its deletion lets another candidate lead.  A
 * candidate that did not lead has no such commit and leaves at once.
 */
static void
start_leaving(int g)
{
	Candidacy  *c = &cands[g];

	c->removed = true;
	stop_leading(g);
	zkc_unwatch(EL_TAG(g, EOP_WATCH));
	if (!c->created && !c->create_unknown)
	{
		left(g);
		return;
	}
	c->phase = ZKEL_LEAVING;
	publish(g, false);
	/* from here on, no fence can vouch for g: the wait starts */
	zklock_commit_wait_init(&c->leave_wait, el_session, UINT32_C(1) << g,
							c->name);
}

/* Leaving, at each tick while connected: delete the node when it is safe */
static void
leave_step(int g, bool recover)
{
	Candidacy  *c = &cands[g];
	char		path[EL_MAX_PATH];

	if (c->deleting)
		return;
	if (!c->created)
	{
		if (recover)
			send_children(g);	/* find the node of a lost create's reply */
		return;
	}
	if (zklock_commit_wait_poll(&c->leave_wait) > 0)
	{
		el_recover = true;		/* look again soon */
		return;
	}
	own_path(path, sizeof(path), g);
	c->deleting = true;
	if (!zkc_delete(path, EL_TAG(g, EOP_DELETE)))
		el_set_recovering(g);
}

/* Leaving, a listing came back: is our node there? */
static void
leave_listed(int g, ZkEvent *ev)
{
	Candidacy  *c = &cands[g];
	char		prefix[ZKLOCK_MAX_NODE_NAME_LEN + 1];
	char		path[EL_MAX_PATH];

	if (ev->rc != ZKC_OK && ev->rc != ZKC_NONODE)
	{
		el_set_recovering(g);
		return;
	}
	zklock_candidate_prefix(prefix, sizeof(prefix), el_session);
	for (int i = 0; i < ev->nchildren; i++)
	{
		const char *n = ev->children[i];

		if (c->created ? strcmp(n, c->node) == 0 :
			strncmp(n, prefix, strlen(prefix)) == 0)
		{
			if (c->created)
				return;			/* the next tick deletes it */
			strlcpy(c->node, n, sizeof(c->node));
			own_path(path, sizeof(path), g);
			if (!zkc_exists(path, false, EL_TAG(g, EOP_ADOPT)))
				el_set_recovering(g);
			return;
		}
	}
	if (!c->create_unknown || c->create_rc != ZKC_CONNLOSS || c->created)
		left(g);				/* not there: nothing to delete */
	else
		el_recover = true;		/* its create's reply may still come */
}

static void
on_delete(int g, ZkEvent *ev)
{
	if (ev->rc == ZKC_OK || ev->rc == ZKC_NONODE)
		left(g);
	else if (ev->rc != ZKC_EXPIRED)
		el_set_recovering(g);
}

/* The group's node is gone: the slot is free */
static void
left(int g)
{
	ereport(LOG,
			(errmsg("zklock: left election group \"%s\"", cands[g].name)));
	drop_watches(g);
	memset(&cands[g], 0, sizeof(Candidacy));
	publish(g, false);
	zklock_election_reload();	/* a group that waited for a slot */
}

/*
 * zklock.elections was read again (and at the worker's start): leave the
 * groups no longer named, join the new ones.  A new group waits for a slot
 * that a removed one still occupies (left() calls this again).
 */
void
zklock_election_reload(void)
{
	char		names[ZKLOCK_MAX_ELECTIONS][ZKLOCK_MAX_GROUP_LEN + 1];
	char		why[256];
	int			n = zklock_election_parse(zklock_elections, names, why,
										  sizeof(why));

	if (n < 0)
	{
		ereport(LOG,
				(errmsg("zklock: zklock.elections is not valid; the election groups stay as they are"),
				 errdetail("%s", why)));
		return;
	}
	for (int g = 0; g < ZKLOCK_MAX_ELECTIONS; g++)
	{
		bool		named = false;

		if (cands[g].phase == ZKEL_FREE || cands[g].removed)
			continue;
		for (int i = 0; i < n; i++)
			named = named || strcmp(names[i], cands[g].name) == 0;
		if (!named)
			start_leaving(g);
	}
	for (int i = 0; i < n; i++)
	{
		int			slot = -1;
		bool		have = false;

		for (int g = 0; g < ZKLOCK_MAX_ELECTIONS; g++)
		{
			if (cands[g].phase == ZKEL_FREE)
				slot = slot < 0 ? g : slot;
			else if (!cands[g].removed && strcmp(cands[g].name, names[i]) == 0)
				have = true;
		}
		if (have || slot < 0)
			continue;			/* joined already, or no slot yet */
		strlcpy(cands[slot].name, names[i], sizeof(cands[slot].name));
		cands[slot].phase = ZKEL_WAITING;
		cands[slot].gen = ++el_gen;
		publish(slot, false);
		ereport(LOG,
				(errmsg("zklock: joining election group \"%s\"", names[i])));
	}
}

/* The election as a recipe of the worker (recipe.c's table) */
const ZkRecipe zklock_election_recipe = {
	.name = "election",
	.kinds = RECIPE_KIND(ZKR_ELECTION),
	.idx_first = ELECTION_IDX_LAST,
	.idx_count = ZKLOCK_MAX_ELECTIONS,
	.init = zklock_election_init,
	.reload = zklock_election_reload,
	.start = zklock_election_query_start,
	.event = zklock_election_event,
	.connected = zklock_election_connected,
	.disconnected = zklock_election_disconnected,
	.session_lost = zklock_election_session_lost,
	.tick = zklock_election_tick,
};
