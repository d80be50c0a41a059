/*-------------------------------------------------------------------------
 *
 * resource.c
 *		Names: resource paths, lock modes and lock node names.
 *
 * A resource "a/b/c" lives at <zklock.root>/a/b/c.  Names are checked here,
 * before anything reaches ZooKeeper, so that no name can address a znode
 * outside the root or be mistaken for a lock node.
 *
 * Lock nodes are named as Hive names them, LOCK-EXCLUSIVE-<seq> and
 * LOCK-SHARED-<seq>, behind a per-request prefix (see protocol.c), with the
 * ten-digit sequence number that ZooKeeper appends.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "zklock.h"

static void
bad_resource(const char *resource, const char *rule)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid zklock resource name \"%s\"", resource),
			 errdetail("%s", rule)));
}

/*
 * Check a resource name, or raise an ERROR that names the broken rule.
 */
void
zklock_check_resource(const char *resource)
{
	size_t		len = strlen(resource);
	const char *seg;

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("zklock resource name must not be empty")));
	if (len > ZKLOCK_MAX_RESOURCE_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("zklock resource name is too long"),
				 errdetail("The name is %zu bytes; the limit is %d bytes.",
						   len, ZKLOCK_MAX_RESOURCE_LEN)));
	if (resource[0] == '/')
		bad_resource(resource, "A resource name must not begin with \"/\"; it is relative to zklock.root.");
	if (resource[len - 1] == '/')
		bad_resource(resource, "A resource name must not end with \"/\".");
	if (strstr(resource, "//") != NULL)
		bad_resource(resource, "A resource name must not contain an empty segment (\"//\").");

	for (const unsigned char *p = (const unsigned char *) resource; *p; p++)
	{
		if (*p < 0x20 || *p == 0x7f)
			bad_resource(resource, "A resource name must not contain control characters.");
	}

	/* segment by segment */
	seg = resource;
	while (seg && *seg)
	{
		const char *slash = strchr(seg, '/');
		size_t		seglen = slash ? (size_t) (slash - seg) : strlen(seg);
		char		segment[ZKLOCK_MAX_RESOURCE_LEN + 1];

		memcpy(segment, seg, seglen);
		segment[seglen] = '\0';
		if (strcmp(segment, ".") == 0 || strcmp(segment, "..") == 0)
			bad_resource(resource, "A resource name must not contain \".\" or \"..\" segments.");
		if (zklock_parse_node_name(segment, NULL, NULL))
			bad_resource(resource, "A resource name segment must not look like a lock node name (LOCK-EXCLUSIVE-<n> or LOCK-SHARED-<n>).");
		seg = slash ? slash + 1 : NULL;
	}
}

ZkLockMode
zklock_parse_mode(const char *mode)
{
	if (pg_strcasecmp(mode, "exclusive") == 0)
		return ZKLOCK_EXCLUSIVE;
	if (pg_strcasecmp(mode, "shared") == 0)
		return ZKLOCK_SHARED;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid zklock lock mode \"%s\"", mode),
			 errhint("The mode is 'exclusive' or 'shared'.")));
	return ZKLOCK_EXCLUSIVE;	/* keep the compiler quiet */
}

const char *
zklock_mode_name(ZkLockMode mode)
{
	return mode == ZKLOCK_SHARED ? "shared" : "exclusive";
}

/*
 * Lock node names.  ZooKeeper appends a ten-digit sequence number to the
 * name a sequential create asks for.
 */
#define EXCLUSIVE_MARK	"LOCK-EXCLUSIVE-"
#define SHARED_MARK		"LOCK-SHARED-"
#define SEQ_DIGITS		10

bool
zklock_parse_node_name(const char *name, ZkLockMode *mode, int64 *seq)
{
	size_t		len = strlen(name);
	const char *digits;
	size_t		marklen;
	ZkLockMode	m;
	int64		s = 0;

	if (len < SEQ_DIGITS + strlen(SHARED_MARK))
		return false;
	digits = name + len - SEQ_DIGITS;
	for (const char *p = digits; *p; p++)
	{
		if (*p < '0' || *p > '9')
			return false;
		s = s * 10 + (*p - '0');
	}

	marklen = strlen(EXCLUSIVE_MARK);
	if (digits - name >= (ptrdiff_t) marklen &&
		strncmp(digits - marklen, EXCLUSIVE_MARK, marklen) == 0)
		m = ZKLOCK_EXCLUSIVE;
	else if (strncmp(digits - strlen(SHARED_MARK), SHARED_MARK,
					 strlen(SHARED_MARK)) == 0)
		m = ZKLOCK_SHARED;
	else
		return false;

	if (mode)
		*mode = m;
	if (seq)
		*seq = s;
	return true;
}

/*
 * The name a create asks for: the request's prefix and Hive's mark.  The
 * prefix ("zk<incarnation>.<entry>.<generation>-") is unique to one request
 * of one worker incarnation, so the worker can find the node again after
 * a lost reply.
 */
void
zklock_format_node_prefix(char *buf, size_t buflen, uint32 incarnation,
						  int idx, uint32 generation)
{
	snprintf(buf, buflen, "zk%08x.%x.%x-", incarnation, idx, generation);
}

void
zklock_format_node_request(char *buf, size_t buflen, const char *prefix,
						   ZkLockMode mode)
{
	snprintf(buf, buflen, "%s%s", prefix,
			 mode == ZKLOCK_SHARED ? SHARED_MARK : EXCLUSIVE_MARK);
}
