/*-------------------------------------------------------------------------
 *
 * root.c
 *		With credentials (zklock.auth_file, SASL, or the x509 identity of
 *		TLS's client certificate), make sure nobody else can create or
 *		delete nodes under zklock.root.
 *
 * zklock creates its nodes with an ACL that only zklock's ZooKeeper credentials
 * pass.  That protects a lock node only if its parent, the resource node,
 * is zklock's too: ZooKeeper checks the right to delete a node on its
 * parent, so a resource node that someone else created first, with
 * world:anyone, lets anyone delete zklock's lock nodes under it.  Resource
 * nodes are safe when nobody else can create nodes under the root, so
 * before the first request of each session the worker makes sure that
 *
 *	- the root exists, as a persistent node (its ancestors too);
 *	- it has a persistent child, zklock.anchor, so that it is never empty
 *	  and therefore can never be deleted (and re-created by someone else)
 *	  even though its parent may be open to everyone;
 *	- its ACL gives no right beyond READ to anyone but these credentials.
 *	  The credentials' identities, as ZooKeeper records them (one for each
 *	  scheme the session authenticated with: x509 and digest over TLS with
 *	  zklock.auth_file), are read from the ACL of a probe node the worker
 *	  creates (and deletes).  A root open to
 *	  others is restricted with setACL when ZooKeeper allows it (and the
 *	  log says so); otherwise every lock request fails with 42501 until an
 *	  operator fixes the root.
 *	- every node that others could have made under the root while it was
 *	  open is restricted too: a walk of the tree, a few requests in flight
 *	  at a time, after which the anchor's data says so.  A walk cut short
 *	  (connection lost, worker restarted) is therefore done again at the
 *	  next check, although the root itself is restricted by then.  The
 *	  anchor is restricted before the walk, so nobody else can write that
 *	  mark.  A node whose ACL cannot be changed makes every lock request
 *	  fail, as above, naming it in the log.
 *
 * Once the root is the credentials' alone, nobody else can create a node
 * under it, so every resource node is zklock's and stays so.  Requests wait,
 * as for a connection, until the check is done.
 *
 * A recipe (recipe.h) with a gate: at each connection recipe.c asks it
 * (root_gate) whether a check is due; if so, the other recipes hear of the
 * connection only once the check is over (zklock_recipe_gate_done).  Its
 * verdict reaches the lock recipe through recipe.c (root_refuses).
 *
 * With a chroot in zklock.hosts ("zk1:2181/pgzk"), with or without
 * credentials, the check first makes sure the chroot exists: the C client
 * sends every path with the chroot in front, "/" being the chroot itself,
 * and cannot create the chroot (nor its parents).  zklock does not create
 * it either: a chroot is the ZooKeeper administrator's namespace, and one
 * misspelt on one instance would otherwise silently split the locks into
 * two namespaces.  A missing chroot makes every lock request fail at once
 * (55000) naming it, says so in the log and in zk_lock_status.last_error,
 * and is watched: once someone creates it, the check runs again and locks
 * work, without a restart.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/pg_list.h"
#include "utils/memutils.h"

#include "recipe.h"
#include "zklock.h"
#include "settings.h"
#include "credentials.h"
#include "shmem.h"
#include "grant_rule.h"
#include "zk_client.h"
#include "failpoint.h"

#define ROOT_ANCHOR		"zklock.anchor"
#define ROOT_PROBE		"zklock.probe-"

typedef enum RootStep
{
	RS_CHROOT = 1,				/* does the chroot exist? (with a watch) */
	RS_CREATE,					/* the root, its ancestors, the anchor */
	RS_PROBE,					/* the probe node */
	RS_PROBE_ACL,				/* the probe's ACL: who we are */
	RS_PROBE_DELETE,
	RS_ROOT_ACL,				/* the root's ACL */
	RS_SET_ACL,					/* restrict the root */
	RS_ANCHOR_DATA,				/* has a walk been completed? */
	RS_ANCHOR_ACL,				/* restrict the anchor, before a walk */
	RS_WALK,					/* list a node under the root */
	RS_WALK_SET,				/* restrict it */
	RS_ANCHOR_MARK				/* a walk is complete: say so */
} RootStep;

/* The anchor's data once a walk has restricted everything under the root */
#define ROOT_WALKED		"zklock: every node under the root restricted"

#define ROOT_WALK_IN_FLIGHT 16

static uint32 root_generation = 0;
static int64 root_checked_session = 0;	/* the session it was done for */
static int64 root_checking_session = 0;
static bool root_refused_flag = false;
static char root_self[2048];	/* "scheme:id\n" of each of our identities */
static List *root_walk = NIL;	/* paths still to list, in root_walk_cxt */
static MemoryContext root_walk_cxt = NULL;
static int	root_walk_pending = 0;
static bool root_chroot_missing = false;	/* refused: no such chroot */
static bool root_rechecking = false;	/* again, after the chroot's watch */
static bool root_recheck_pending = false;	/* the watch fired mid-check */

/*
 * The chroot of zklock.hosts, as the C client reads it (from the first '/';
 * "/" alone is none), or NULL
 */
static const char *
root_chroot(void)
{
	const char *c = zklock_hosts ? strchr(zklock_hosts, '/') : NULL;

	return (c == NULL || c[1] == '\0') ? NULL : c;
}

static const char *
root_missing_chroot(void)
{
	return root_refused_flag && root_chroot_missing ? root_chroot() : NULL;
}

/*
 * Does the session authenticate (digest credentials, SASL, or TLS, whose
 * client certificate ZooKeeper's x509 provider takes for x509:<subject>),
 * so that its nodes are its identities' alone and the root must be too?
 */
static bool
root_authenticated(void)
{
	return zklock_credentials() != NULL || zklock_ssl ||
		(zklock_sasl_mechanism != NULL && zklock_sasl_mechanism[0] != '\0');
}

/* zk_lock_status.last_error */
static void
root_set_last_error(const char *error)
{
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	strlcpy(zklock_shared->last_error, error,
			sizeof(zklock_shared->last_error));
	LWLockRelease(zklock_shared->lock);
}

/* Is a check due for this session (not done, not under way)? */
static bool
root_needs_check(int64 session_id)
{
	if (!root_authenticated() && root_chroot() == NULL)
	{
		/* nothing to check (zklock.hosts may have lost its chroot) */
		root_refused_flag = false;
		root_chroot_missing = false;
		return false;
	}
	return root_checked_session != session_id;
}

/*
 * Does the check refuse every lock request now: a missing chroot (55000),
 * or a root open to others (42501)?
 */
static bool
root_refuses(int *sqlstate, char *msg, size_t size)
{
	if (root_missing_chroot() != NULL)
	{
		*sqlstate = ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
		snprintf(msg, size,
				 "the ZooKeeper chroot \"%s\" of zklock.hosts does not exist (see the server log)",
				 root_missing_chroot());
		return true;
	}
	if (root_refused_flag)
	{
		*sqlstate = ERRCODE_INSUFFICIENT_PRIVILEGE;
		snprintf(msg, size,
				 "zklock.root \"%s\" is open to clients without zklock's ZooKeeper credentials (see the server log)",
				 zklock_root);
		return true;
	}
	return false;
}

static void root_acl_check_start(void);

/* Start the check: first the chroot, if any; then the credentials' part */
static void
root_check_begin(int64 session_id)
{
	++root_generation;
	root_checking_session = session_id;
	if (root_chroot() != NULL)
		(void) zkc_exists("/", true,
						  TAG(root_generation, RS_CHROOT, ROOT_IDX));
	else
		root_acl_check_start();
	/* a send that failed ends in a connection loss: checked again then */
}

static void
root_check_start(int64 session_id)
{
	root_rechecking = false;
	root_recheck_pending = false;
	if (root_chroot_missing)
	{
		/* a new session, maybe with another chroot: said again if so */
		root_chroot_missing = false;
		root_set_last_error("");
	}
	root_check_begin(session_id);
}

/* The credentials' part: create what must exist, and the probe, pipelined */
static void
root_acl_check_start(void)
{
	char		path[ZKLOCK_MAX_ROOT_LEN + 64];
	uint32		gen = root_generation;

	(void) ZKLOCK_FAILPOINT("root-acl-check");
	root_self[0] = '\0';
	root_walk = NIL;
	root_walk_pending = 0;
	if (root_walk_cxt == NULL)
		root_walk_cxt = AllocSetContextCreate(TopMemoryContext,
											  "zklock root walk",
											  ALLOCSET_SMALL_SIZES);
	MemoryContextReset(root_walk_cxt);
	for (const char *p = zklock_root + 1;; p++)
	{
		if (*p == '/' || *p == '\0')
		{
			memcpy(path, zklock_root, p - zklock_root);
			path[p - zklock_root] = '\0';
			(void) zkc_create(path, NULL, -1, 0, TAG(gen, RS_CREATE, ROOT_IDX));
			if (*p == '\0')
				break;
		}
	}
	snprintf(path, sizeof(path), "%s/%s", zklock_root, ROOT_ANCHOR);
	(void) zkc_create(path, NULL, -1, 0, TAG(gen, RS_CREATE, ROOT_IDX));
	snprintf(path, sizeof(path), "%s/%s", zklock_root, ROOT_PROBE);
	(void) zkc_create(path, NULL, -1, ZKC_EPHEMERAL_SEQUENTIAL,
					  TAG(gen, RS_PROBE, ROOT_IDX));
	/* a send that failed ends in a connection loss: checked again then */
}

/* The check is over, for better or worse */
static bool
root_done(bool refused, const char *why)
{
	bool		go;

	root_refused_flag = refused;
	root_checked_session = root_checking_session;
	if (refused && root_chroot_missing)
		;						/* said already */
	else if (refused)
		ereport(LOG,
				(errmsg("zklock: refusing to take locks under zklock.root \"%s\": %s",
						zklock_root, why),
				 errhint("Give \"%s\" an ACL that grants only zklock's ZooKeeper credentials more than READ, or choose another zklock.root.",
						 zklock_root)));
	/* after a recheck, requests are going already */
	go = !root_rechecking;
	if (root_recheck_pending && root_checking_session == zkc_session_id())
	{
		/* the chroot changed during the check: check again, watch anew */
		root_recheck_pending = false;
		root_rechecking = true;
		root_checked_session = 0;	/* its replies count again */
		root_check_begin(root_checking_session);
	}
	return go;
}

/* The chroot's existence, or a change of it (its watch) */
static bool
root_chroot_event(ZkEvent *ev)
{
	const char *chroot = root_chroot();
	char		msg[ZKLOCK_MAX_ERROR_LEN + 1];

	if (chroot == NULL)
		return false;
	if (ev->kind == ZKEV_WATCH)
	{
		/* created or deleted: check again, now or once this check is over */
		if (root_checking_session != zkc_session_id())
			return false;
		if (root_checked_session == root_checking_session)
		{
			root_rechecking = true;
			root_checked_session = 0;	/* its replies count again */
			root_check_begin(root_checking_session);
		}
		else
			root_recheck_pending = true;	/* root_done starts it */
		return false;
	}
	if (ev->rc == ZKC_NONODE)
	{
		if (!root_chroot_missing)
		{
			snprintf(msg, sizeof(msg),
					 "the ZooKeeper chroot \"%s\" of zklock.hosts does not exist",
					 chroot);
			ereport(LOG,
					(errmsg("zklock: %s; every lock request fails until it is created",
							msg),
					 errhint("Create it in ZooKeeper (zkCli.sh create %s), or take the chroot out of zklock.hosts.",
							 chroot)));
			root_set_last_error(msg);
			root_chroot_missing = true;
		}
		return root_done(true, NULL);
	}
	if (ev->rc != ZKC_OK)
		return root_done(true, "could not tell whether the chroot of zklock.hosts exists");
	if (root_chroot_missing)
	{
		ereport(LOG,
				(errmsg("zklock: the ZooKeeper chroot \"%s\" now exists; taking locks",
						chroot)));
		root_set_last_error("");
		root_chroot_missing = false;
	}
	if (!root_authenticated())
		return root_done(false, NULL);
	root_acl_check_start();
	return false;
}

/* List queued nodes while fewer than ROOT_WALK_IN_FLIGHT are out */
static void
root_anchor_path(char *path, size_t size)
{
	snprintf(path, size, "%s/%s", zklock_root, ROOT_ANCHOR);
}

static bool
root_walk_issue(void)
{
	char		path[ZKLOCK_MAX_ROOT_LEN + 64];

	while (root_walk != NIL && root_walk_pending < ROOT_WALK_IN_FLIGHT)
	{
		char	   *path = llast(root_walk);

		root_walk = list_delete_last(root_walk);
		if (zkc_get_children(path, TAG(root_generation, RS_WALK, ROOT_IDX)))
			root_walk_pending++;
		pfree(path);
	}
	if (root_walk_pending > 0)
		return false;
	MemoryContextReset(root_walk_cxt);
	root_walk = NIL;
	/* everything is restricted: mark it on the anchor */
	root_anchor_path(path, sizeof(path));
	(void) zkc_set_data(path, ROOT_WALKED, strlen(ROOT_WALKED),
						TAG(root_generation, RS_ANCHOR_MARK, ROOT_IDX));
	return false;
}

/* A node under the root was listed: restrict and walk its children */
static bool
root_walk_event(ZkEvent *ev)
{
	root_walk_pending--;
	for (int i = 0; i < ev->nchildren; i++)
	{
		const char *c = ev->children[i];
		MemoryContext old;
		char	   *path;

		if (zklock_parse_node_name(c, NULL, NULL))
			continue;			/* a lock node: nothing can be under it */
		old = MemoryContextSwitchTo(root_walk_cxt);
		path = psprintf("%s/%s", ev->path, c);
		root_walk = lappend(root_walk, path);
		MemoryContextSwitchTo(old);
		root_walk_pending++;
		if (!zkc_set_acl_private(path, TAG(root_generation, RS_WALK_SET, ROOT_IDX)))
			root_walk_pending--;
	}
	return root_walk_issue();
}

/* Restrict the anchor first, then walk (RS_ANCHOR_ACL goes on) */
static void
root_walk_start(void)
{
	char		path[ZKLOCK_MAX_ROOT_LEN + 64];

	root_anchor_path(path, sizeof(path));
	(void) zkc_set_acl_private(path, TAG(root_generation, RS_ANCHOR_ACL, ROOT_IDX));
}

/* Does an ACL entry "<perms> <scheme>:<id>" give anyone else a right? */
static bool
root_entry_foreign(const char *entry)
{
	int			perms = atoi(entry);
	const char *who = strchr(entry, ' ');

	char		line[sizeof(root_self)];

	if ((perms & ~ZKC_PERM_READ) == 0)
		return false;
	if (who == NULL)
		return true;
	snprintf(line, sizeof(line), "%s\n", who + 1);
	for (const char *p = root_self; (p = strstr(p, line)) != NULL; p++)
		if (p == root_self || p[-1] == '\n')
			return false;
	return true;
}

/*
 * The probe node's ACL: it names the credentials' identities, as ZooKeeper
 * records them (creator-only: one entry per authenticated scheme).  Then
 * read the root's ACL.
 */
static bool
root_probe_acl_event(ZkEvent *ev)
{
	root_self[0] = '\0';
	for (int i = 0; ev->rc == ZKC_OK && i < ev->nchildren; i++)
	{
		const char *who = strchr(ev->children[i], ' ');

		if (who == NULL ||
			strlen(root_self) + strlen(who) + 1 >= sizeof(root_self))
			break;
		strlcat(root_self, who + 1, sizeof(root_self));
		strlcat(root_self, "\n", sizeof(root_self));
	}
	if (ev->rc != ZKC_OK || ev->nchildren < 1 || root_self[0] == '\0')
		return root_done(true, "could not tell the credentials' identity from a probe node");
	(void) zkc_get_acl(zklock_root, TAG(root_generation, RS_ROOT_ACL, ROOT_IDX));
	return false;
}

/*
 * The root's ACL: restrict it if it is open to others; otherwise see if the
 * tree under it was walked.
 */
static bool
root_acl_event(ZkEvent *ev)
{
	bool		foreign = false;

	if (ev->rc != ZKC_OK)
		return root_done(true, "could not read its ACL");
	for (int i = 0; i < ev->nchildren; i++)
		foreign |= root_entry_foreign(ev->children[i]);
	if (foreign)
		(void) zkc_set_acl_private(zklock_root,
								   TAG(root_generation, RS_SET_ACL, ROOT_IDX));
	else
	{
		/* the root is ours: was the tree under it walked? */
		char		path[ZKLOCK_MAX_ROOT_LEN + 64];

		root_anchor_path(path, sizeof(path));
		(void) zkc_get_data(path, TAG(root_generation, RS_ANCHOR_DATA, ROOT_IDX));
	}
	return false;
}

/* The root, open to others, was restricted: walk the tree under it */
static bool
root_set_acl_event(ZkEvent *ev)
{
	if (ev->rc != ZKC_OK)
		return root_done(true, "clients without zklock's ZooKeeper credentials may create or delete nodes under it, and its ACL cannot be changed");
	ereport(LOG,
			(errmsg("zklock: zklock.root \"%s\" was open to clients without zklock's ZooKeeper credentials; its ACL, and that of every node under it, now grants zklock's ZooKeeper credentials alone",
					zklock_root)));
	root_walk_start();
	return false;
}

/* The anchor was restricted: list the root, which starts the walk */
static bool
root_anchor_acl_event(ZkEvent *ev)
{
	if (ev->rc != ZKC_OK)
		return root_done(true, "its child " ROOT_ANCHOR " cannot be restricted to zklock's ZooKeeper credentials");
	/* a send that fails ends in a connection loss: done again then */
	root_walk_pending = 1;		/* the listing of the root itself */
	(void) zkc_get_children(zklock_root,
							TAG(root_generation, RS_WALK, ROOT_IDX));
	return false;
}

/* A node of the walk was restricted (or could not be): walk on */
static bool
root_walk_set_event(ZkEvent *ev)
{
	root_walk_pending--;
	if (ev->rc != ZKC_OK && ev->rc != ZKC_NONODE)
	{
		ereport(LOG,
				(errmsg("zklock: could not restrict the ACL of \"%s\": %s",
						ev->path, zkc_result_text(ev->zoo_rc))));
		return root_done(true, "a node under it cannot be restricted to zklock's ZooKeeper credentials");
	}
	return root_walk_issue();
}

/*
 * A reply of the check.  Returns true when the check is over, so that the
 * other recipes can go.
 */
static bool
root_step_event(ZkEvent *ev)
{
	if (TAG_OP(ev->tag) == RS_CHROOT && ev->kind == ZKEV_WATCH)
		return TAG_GEN(ev->tag) == root_generation && root_chroot_event(ev);
	if (TAG_GEN(ev->tag) != root_generation ||
		root_checked_session == root_checking_session)
		return false;
	if (ev->rc == ZKC_CONNLOSS || ev->rc == ZKC_EXPIRED)
		return false;			/* done again at the next connection */
	switch ((RootStep) TAG_OP(ev->tag))
	{
		case RS_CHROOT:
			return root_chroot_event(ev);
		case RS_WALK:
			if (ev->rc != ZKC_OK && ev->rc != ZKC_NONODE)
				return root_done(true, "could not list the nodes under it");
			return root_walk_event(ev);
		case RS_WALK_SET:
			return root_walk_set_event(ev);
		case RS_CREATE:
		case RS_PROBE_DELETE:
			return false;		/* NODEEXISTS is fine; the probe tells */
		case RS_PROBE:
			if (ev->rc != ZKC_OK)
				return root_done(true, "cannot create nodes under it with zklock's ZooKeeper credentials");
			(void) zkc_get_acl(ev->path, TAG(root_generation, RS_PROBE_ACL, ROOT_IDX));
			(void) zkc_delete(ev->path, TAG(root_generation, RS_PROBE_DELETE, ROOT_IDX));
			return false;
		case RS_PROBE_ACL:
			return root_probe_acl_event(ev);
		case RS_ROOT_ACL:
			return root_acl_event(ev);
		case RS_ANCHOR_DATA:
			if (ev->rc == ZKC_OK && strcmp(ev->data, ROOT_WALKED) == 0)
				return root_done(false, NULL);
			root_walk_start();
			return false;
		case RS_ANCHOR_ACL:
			return root_anchor_acl_event(ev);
		case RS_ANCHOR_MARK:
			if (ev->rc != ZKC_OK)
				return root_done(true, "could not mark its anchor node once every node under it was restricted");
			return root_done(false, NULL);
		case RS_SET_ACL:
			return root_set_acl_event(ev);
	}
	return false;
}

/* A reply of the check: once it is over, the other recipes go */
static void
root_event(ZkEvent *ev)
{
	if (root_step_event(ev))
		zklock_recipe_gate_done();
}

/* Connected: start the check when one is due, holding the others back */
static bool
root_gate(int64 session_id)
{
	if (!root_needs_check(session_id))
		return false;
	root_check_start(session_id);
	return true;
}

const ZkRecipe zklock_root_recipe = {
	.name = "root",
	.idx_first = ROOT_IDX,
	.idx_count = 1,
	.event = root_event,
	.gate = root_gate,
	.refuses = root_refuses,
};
