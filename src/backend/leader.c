/*-------------------------------------------------------------------------
 *
 * leader.c
 *		Instance leadership in SQL: zk_is_leader, zk_leader, zk_elections,
 *		and the transaction's record of the leadership it relied on.
 *
 * zk_is_leader(group) asks no one: it is true only while the worker says
 * that this instance leads the group in session S (election.c) AND the
 * lease (lease.c) proves S alive for the commit fence's margin beyond this
 * backend's own "now", both read in one locked section.  ZooKeeper lets
 * another candidate lead only after S has expired, which the lease says
 * cannot happen before its end: so two instances never both answer true
 * (see doc/safety.md for the clocks this relies on).
 *
 * A transaction that got true remembers the group, S and the node.  At
 * commit, if it had an effect (it wrote, or has a NOTIFY pending:
 * zklock_xact_has_effects, fence.c), the leadership fence
 * (zklock_leader_fence, fence.c) treats each such group as a lock the
 * transaction holds: it must still lead in the same candidacy under a valid
 * lease, or the commit fails; passing it opens the commit window (lease.c)
 * so that the worker does not end S, or delete the group's node, while the
 * commit can still land.  PREPARE TRANSACTION is refused after a true
 * answer, as no fence can run at COMMIT PREPARED.
 *
 * zk_leader and zk_elections ask the worker (ZKR_ELECTION, one round trip,
 * election_query.c); the rows come back in a DSM segment, as zk_locks'.
 *
 * Backend-local state only (the remembered groups); the shared group
 * states are read under zklock_shared->lock (election.h).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "storage/dsm.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "backend.h"
#include "backend_int.h"
#include "channel.h"
#include "election.h"
#include "lease.h"
#include "nodedata.h"
#include "settings.h"
#include "shmem.h"

PG_FUNCTION_INFO_V1(zklock_is_leader);
PG_FUNCTION_INFO_V1(zklock_leader);
PG_FUNCTION_INFO_V1(zklock_election_list);

/* The leadership this transaction relied on (zk_is_leader said true) */
static ZkLeadership relied[2 * ZKLOCK_MAX_ELECTIONS];
static int	nrelied = 0;
static bool relied_overflow = false;	/* more than relied[] can hold */
static bool callback_registered = false;

/* The group argument: not NULL, and a valid group name */
static char *
group_arg(FunctionCallInfo fcinfo)
{
	char		names[1][ZKLOCK_MAX_GROUP_LEN + 1];
	char		why[256];
	char	   *group;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("zklock election group must not be null")));
	group = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if (strchr(group, ',') != NULL ||
		zklock_election_parse(group, names, why, sizeof(why)) != 1 ||
		strcmp(names[0], group) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid zklock election group \"%s\"", group),
				 errdetail("A group name is 1 to %d bytes of A-Z, a-z, 0-9, \"_\", \".\" and \"-\", other than \".\" and \"..\".",
						   ZKLOCK_MAX_GROUP_LEN)));
	return group;
}

/*
 * Does this instance lead the group, under a lease that covers it?  The
 * caller holds zklock_shared->lock (either mode); *out gets the candidacy
 * when it does.
 */
bool
zklock_leads_locked(const char *group, ZkLeadership *out)
{
	for (int g = 0; g < ZKLOCK_MAX_ELECTIONS; g++)
	{
		ZkElectionGroup *s = &zklock_elections_shared->groups[g];
		int64		left;

		if (s->phase == ZKEL_FREE || s->phase == ZKEL_LEAVING ||
			strcmp(s->name, group) != 0)
			continue;
		if (!s->leader || s->phase != ZKEL_LEADING ||
			!zklock_lease_covers_locked(s->session_id, &left))
			return false;
		if (out)
		{
			out->slot = g;
			out->session_id = s->session_id;
			strlcpy(out->group, s->name, sizeof(out->group));
			strlcpy(out->node, s->node, sizeof(out->node));
		}
		return true;
	}
	return false;
}

static void
leader_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			if (nrelied == 0 || !zklock_xact_has_effects())
				break;
			/* more candidacies than groups: some of them has ended */
			if (relied_overflow)
				ereport(ERROR,
						(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
						 errmsg("zklock leadership of election group \"%s\" was lost; the transaction cannot commit",
								relied[0].group),
						 errdetail("The transaction saw zk_is_leader true in more candidacies than there are groups: some of them has ended.")));
			zklock_leader_fence(relied, nrelied);
			break;
		case XACT_EVENT_PRE_PREPARE:
			if (nrelied > 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that relied on zklock leadership of election group \"%s\"",
								relied[0].group),
						 errdetail("COMMIT PREPARED is not fenced: a write could land after another instance took over.")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			nrelied = 0;
			relied_overflow = false;
			break;
		default:
			break;
	}
}

/* Remember a leadership the transaction relied on (once per candidacy) */
static void
rely_on(const ZkLeadership *l)
{
	for (int i = 0; i < nrelied; i++)
	{
		if (relied[i].slot == l->slot &&
			relied[i].session_id == l->session_id &&
			strcmp(relied[i].node, l->node) == 0)
			return;
	}
	if (!callback_registered)
	{
		RegisterXactCallback(leader_xact_callback, NULL);
		callback_registered = true;
	}
	if (nrelied < lengthof(relied))
		relied[nrelied++] = *l;
	else
		relied_overflow = true;	/* some candidacy it saw has ended */
}

/* zk_is_leader(group text) RETURNS boolean */
Datum
zklock_is_leader(PG_FUNCTION_ARGS)
{
	char	   *group = group_arg(fcinfo);
	ZkLeadership l;
	bool		leads;

	zklock_backend_init();		/* errors out unless preloaded */
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	leads = zklock_leads_locked(group, &l);
	LWLockRelease(zklock_shared->lock);
	if (leads && IsTransactionState())
		rely_on(&l);
	PG_RETURN_BOOL(leads);
}

/*
 * The candidates of a group, as the worker lists them: "node \t mtime \t
 * data" rows in sequence order (election_query.c), NUL-terminated.
 */
static char *
query_group(const char *group)
{
	Size		size = 16 * 1024;

	for (int attempt = 0; attempt < 4; attempt++)
	{
		dsm_segment *seg = dsm_create(size, 0);
		ZkChannelRequest req;
		ZkChannelResult done;
		uint32		gen;
		int			idx;
		char	   *result;

		zklock_request_init(&req, ZKR_ELECTION);
		snprintf(req.resource, sizeof(req.resource), "%s/%s",
				 ZKLOCK_ELECTIONS_NODE, group);
		req.list_handle = dsm_segment_handle(seg);
		req.list_size = size;
		idx = zklock_submit(&req, &gen);
		if (zklock_wait_for_answer(idx, gen, "the election query",
								   zklock_session_timeout + zklock_connect_timeout,
								   -1, false) == ZKE_FAILED)
		{
			dsm_detach(seg);
			zklock_raise_failure(idx, gen, "list zklock election candidates");
		}
		zklock_channel_collect(idx, gen, &done);
		result = zklock_channel_take_rows(seg, &size, done.list_needed);
		if (result)
			return result;
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("could not list the candidates of zklock election group \"%s\": the set kept growing",
					group)));
	return NULL;
}

/* A field of a candidate's escaped data, palloc'd; NULL when absent */
static char *
candidate_field(const char *data, const char *key)
{
	const char *v = zklock_node_field(data, key);

	return v ? pnstrdup(v, zklock_node_field_len(v)) : NULL;
}

/*
 * One row: "node_name (instance id) on host" into *who, the node's mtime
 * into *since.  False for a line that is not a row.
 */
static bool
candidate_row(char *line, char **who, TimestampTz *since)
{
	char	   *tab1 = strchr(line, '\t');
	char	   *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
	char	   *data;
	char	   *name;
	char	   *id;
	char	   *host;

	if (tab2 == NULL)
		return false;
	*tab1 = '\0';
	*tab2 = '\0';
	data = zklock_nodedata_unescape(tab2 + 1);
	*since = (TimestampTz) (strtoll(tab1 + 1, NULL, 10) * 1000 -
							((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) *
							 USECS_PER_DAY));
	name = candidate_field(data, "node_name=");
	id = candidate_field(data, "instance_id=");
	host = candidate_field(data, "host=");
	if (id == NULL)
		id = line;				/* the node's name, if nothing else */
	if (name && host)
		*who = psprintf("%s (%s) on %s", name, id, host);
	else
		*who = pstrdup(id);
	return true;
}

/* zk_leader(group text) RETURNS text: the first candidate, or NULL */
Datum
zklock_leader(PG_FUNCTION_ARGS)
{
	char	   *group = group_arg(fcinfo);
	char	   *rows;
	char	   *next;
	char	   *who;
	TimestampTz since;

	zklock_backend_init();
	rows = query_group(group);
	for (char *line = rows; *line; line = next)
	{
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		else
			next = line + strlen(line);
		if (candidate_row(line, &who, &since))
			PG_RETURN_TEXT_P(cstring_to_text(who));
	}
	PG_RETURN_NULL();
}

/* One row of zk_elections for a group */
static void
elections_row(ReturnSetInfo *rsinfo, const char *group)
{
	Datum		values[5];
	bool		nulls[5] = {false, false, true, true, false};
	char	   *rows = query_group(group);
	char	   *next;
	char	   *who;
	TimestampTz since;
	ArrayBuildState *astate = initArrayResult(TEXTOID, CurrentMemoryContext,
											  false);

	for (char *line = rows; *line; line = next)
	{
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		else
			next = line + strlen(line);
		if (!candidate_row(line, &who, &since))
			continue;
		if (nulls[2])
		{
			values[2] = CStringGetTextDatum(who);
			values[3] = TimestampTzGetDatum(since);
			nulls[2] = nulls[3] = false;
		}
		astate = accumArrayResult(astate, CStringGetTextDatum(who), false,
								  TEXTOID, CurrentMemoryContext);
	}
	values[0] = CStringGetTextDatum(group);
	values[1] = makeArrayResult(astate, CurrentMemoryContext);
	LWLockAcquire(zklock_shared->lock, LW_SHARED);
	values[4] = BoolGetDatum(zklock_leads_locked(group, NULL));
	LWLockRelease(zklock_shared->lock);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/*
 * zk_elections(): for each group of zklock.elections, its candidates in
 * order, the leader, since when it leads (its node's mtime, ZooKeeper's
 * clock), and whether this instance leads it (as zk_is_leader, without
 * making the transaction rely on it).
 */
Datum
zklock_election_list(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char		names[ZKLOCK_MAX_ELECTIONS][ZKLOCK_MAX_GROUP_LEN + 1];
	char		why[256];
	int			n;

	zklock_backend_init();
	InitMaterializedSRF(fcinfo, 0);
	n = zklock_election_parse(zklock_elections, names, why, sizeof(why));
	for (int i = 0; i < n; i++)
		elections_row(rsinfo, names[i]);
	return (Datum) 0;
}
