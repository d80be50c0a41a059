/*-------------------------------------------------------------------------
 *
 * election_common.c
 *		What both sides of instance leadership use: the shared state's
 *		setup, the value of zklock.elections, and the names of instances
 *		and candidate nodes.  No ZooKeeper here; the recipe is election.c.
 *
 * Shared state (election.h): zklock_elections_shared, written by the
 * worker only (election.c), under zklock_shared->lock in exclusive mode.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/xlog.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "storage/shmem.h"

#include "election.h"
#include "election_int.h"
#include "nodedata.h"
#include "settings.h"
#include "shmem.h"
#include "resource.h"

ZkElectionShared *zklock_elections_shared = NULL;

Size
zklock_election_shmem_size(void)
{
	return sizeof(ZkElectionShared);
}

/* At startup (shmem.c), under AddinShmemInitLock */
void
zklock_election_shmem_init(void)
{
	bool		found;

	zklock_elections_shared = ShmemInitStruct("zklock elections",
											  sizeof(ZkElectionShared),
											  &found);
	if (!found)
		memset(zklock_elections_shared, 0, sizeof(ZkElectionShared));
}

/* "<system identifier>:<port>": unique to the instance */
const char *
zklock_instance_id(void)
{
	static char id[ZKLOCK_INSTANCE_ID_LEN + 1];

	if (id[0] == '\0')
		snprintf(id, sizeof(id), UINT64_FORMAT ":%d",
				 GetSystemIdentifier(), PostPortNumber);
	return id;
}

/*
 * The node name prefix of this instance's candidates in a session:
 * "cand-<system identifier>-<port>-<session, 16 hex digits>-".  Unique to
 * the instance, so that two instances never take each other's nodes; and
 * to the session, so that a node found by its prefix after a lost reply is
 * this session's (a node of an earlier session of the instance that still
 * lives, after zklock.hosts changed, is then an ordinary candidate ahead,
 * never mistaken for the one whose reply was lost).
 */
void
zklock_candidate_prefix(char *buf, size_t len, int64 session_id)
{
	snprintf(buf, len, ZKLOCK_CANDIDATE_PREFIX UINT64_FORMAT "-%d-%016llx-",
			 GetSystemIdentifier(), PostPortNumber,
			 (unsigned long long) session_id);
}

/* digits (hex or decimal) from *p up to stop; false when none or others */
static bool
skip_digits(const char **p, char stop, bool hex, int exactly)
{
	int			n = 0;

	for (; **p && **p != stop; (*p)++, n++)
	{
		char		c = **p;

		if (!((c >= '0' && c <= '9') || (hex && c >= 'a' && c <= 'f')))
			return false;
	}
	return n > 0 && (exactly == 0 || n == exactly) && **p == stop;
}

/*
 * A candidate node's sequence number, -1 when the name is not a
 * candidate's; its instance id ("<system identifier>:<port>") into id,
 * when asked.
 */
int64
zklock_candidate_instance(const char *name, char *id, size_t idlen)
{
	const char *start = name + strlen(ZKLOCK_CANDIDATE_PREFIX);
	const char *p = start;
	const char *port;
	const char *end;
	int64		seq = 0;

	if (strncmp(name, ZKLOCK_CANDIDATE_PREFIX,
				strlen(ZKLOCK_CANDIDATE_PREFIX)) != 0 ||
		!skip_digits(&p, '-', false, 0))
		return -1;
	port = ++p;
	if (!skip_digits(&p, '-', false, 0))
		return -1;
	end = p++;
	if (!skip_digits(&p, '-', true, 16))
		return -1;
	p++;
	for (int i = 0; i < 10; i++, p++)
	{
		if (*p < '0' || *p > '9')
			return -1;
		seq = seq * 10 + (*p - '0');
	}
	if (*p != '\0')
		return -1;
	if (id)
		snprintf(id, idlen, "%.*s:%.*s", (int) (port - 1 - start), start,
				 (int) (end - port), port);
	return seq;
}

static const char *const phase_names[] = {
	[ZKEL_FREE] = "free",
	[ZKEL_WAITING] = "waiting",
	[ZKEL_JOINING] = "joining",
	[ZKEL_WATCHING] = "candidate",
	[ZKEL_TAKING_OVER] = "taking over",
	[ZKEL_LEADING] = "leading",
	[ZKEL_RECOVERING] = "recovering",
	[ZKEL_LEAVING] = "leaving",
};

const char *
zklock_election_phase_name(ZkElectionPhase phase)
{
	return phase < lengthof(phase_names) ? phase_names[phase] : "unknown";
}

/*
 * Parse a value of zklock.elections into names[] (room for
 * ZKLOCK_MAX_ELECTIONS): the number of groups, or -1 with the problem in
 * why.  Items are separated by commas, spaces around them ignored.  No
 * allocation, no error: the check hook calls it.
 */
int
zklock_election_parse(const char *value, char names[][ZKLOCK_MAX_GROUP_LEN + 1],
					  char *why, size_t whylen)
{
	int			n = 0;
	const char *p = value ? value : "";

	for (;;)
	{
		const char *start;
		size_t		len;

		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0' && n == 0)
			return 0;
		start = p;
		while (*p && *p != ',')
			p++;
		len = p - start;
		while (len > 0 && (start[len - 1] == ' ' || start[len - 1] == '\t'))
			len--;
		if (len == 0)
		{
			snprintf(why, whylen, "A group name must not be empty.");
			return -1;
		}
		if (len > ZKLOCK_MAX_GROUP_LEN)
		{
			snprintf(why, whylen, "A group name must not be longer than %d bytes.",
					 ZKLOCK_MAX_GROUP_LEN);
			return -1;
		}
		for (size_t i = 0; i < len; i++)
		{
			char		ch = start[i];

			if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
				  (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' ||
				  ch == '-'))
			{
				snprintf(why, whylen, "Group \"%.*s\" has a character other than A-Z, a-z, 0-9, \"_\", \".\" and \"-\".",
						 (int) len, start);
				return -1;
			}
		}
		if ((len == 1 && start[0] == '.') ||
			(len == 2 && start[0] == '.' && start[1] == '.'))
		{
			snprintf(why, whylen, "A group must not be named \".\" or \"..\".");
			return -1;
		}
		if (n == ZKLOCK_MAX_ELECTIONS)
		{
			snprintf(why, whylen, "At most %d groups can be named.",
					 ZKLOCK_MAX_ELECTIONS);
			return -1;
		}
		memcpy(names[n], start, len);
		names[n][len] = '\0';
		for (int i = 0; i < n; i++)
		{
			if (strcmp(names[i], names[n]) == 0)
			{
				snprintf(why, whylen, "Group \"%s\" is named twice.", names[n]);
				return -1;
			}
		}
		n++;
		if (*p == '\0')
			return n;
		p++;					/* the comma */
	}
}


/* This instance's description, as the candidate node's data */
int
zklock_candidate_data(char *buf, size_t len)
{
	char		host[64];
	char		pid[16];
	ZkCandidateData d;

	if (gethostname(host, sizeof(host)) != 0)
		strlcpy(host, "localhost", sizeof(host));
	host[sizeof(host) - 1] = '\0';
	snprintf(pid, sizeof(pid), "%d", (int) PostmasterPid);
	d.instance_id = zklock_instance_id();
	d.node_name = zklock_instance_name();
	d.host = host;
	d.pid = pid;
	return (int) Min(zklock_nodedata_encode_candidate(buf, len, &d), len - 1);
}

/* A group's node: <root>/zklock.elections/<group> */
void
zklock_election_group_path(char *buf, size_t len, const char *group)
{
	snprintf(buf, len, "%s/%s/%s", zklock_root, ZKLOCK_ELECTIONS_NODE, group);
}

/* A candidate node's path */
void
zklock_election_node_path(char *buf, size_t len, const char *group,
						  const char *node)
{
	snprintf(buf, len, "%s/%s/%s/%s", zklock_root, ZKLOCK_ELECTIONS_NODE,
			 group, node);
}
