/*-------------------------------------------------------------------------
 *
 * resource.c
 *		Names: resource paths (and the names a listing or an administrator
 *		may give, the advisory keys' too), lock modes, lock node names, and
 *		the instance's own name in node data.
 *
 * A resource "a/b/c" lives at <zklock.root>/a/b/c.  Names are checked here,
 * before anything reaches ZooKeeper, so that no name can address a znode
 * outside the root or be mistaken for a lock node.
 *
 * Lock nodes are named as Hive names them, LOCK-EXCLUSIVE-<seq> and
 * LOCK-SHARED-<seq>, behind a per-request prefix (see protocol.c), with the
 * ten-digit sequence number that ZooKeeper appends; under subtrees that
 * zklock.node_naming maps to another client's style, as that client names
 * its nodes.  Which names are lock nodes, of any client, and what mode they
 * say, is grant_rule.c's (zklock_parse_node_name).  A semaphore's request
 * (1.4) is named as an EXCLUSIVE one with "SEMAPHORE-<limit>-" between the
 * prefix and the mark (zklock_format_semaphore_request; read by
 * zklock_parse_semaphore_node).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "postmaster/postmaster.h"
#include "utils/builtins.h"

#include "resource.h"
#include "zklock.h"
#include "settings.h"
#include "grant_rule.h"

/*
 * The rule a resource name breaks, or NULL when it is a good name.  Never
 * raises, so that a GUC check hook can apply the rules too (*sqlstate, when
 * given, gets the error code the rule goes with).
 */
const char *
zklock_resource_problem(const char *resource, int *sqlstate)
{
	size_t		len = strlen(resource);
	const char *seg;

	if (sqlstate)
		*sqlstate = ERRCODE_INVALID_PARAMETER_VALUE;
	if (len == 0)
		return "A resource name must not be empty.";
	if (len > ZKLOCK_MAX_RESOURCE_LEN)
	{
		if (sqlstate)
			*sqlstate = ERRCODE_NAME_TOO_LONG;
		return "A resource name must not be longer than " CppAsString2(ZKLOCK_MAX_RESOURCE_LEN) " bytes.";
	}
	if (resource[0] == '/')
		return "A resource name must not begin with \"/\"; it is relative to zklock.root.";
	if (resource[len - 1] == '/')
		return "A resource name must not end with \"/\".";
	if (strstr(resource, "//") != NULL)
		return "A resource name must not contain an empty segment (\"//\").";

	for (const unsigned char *p = (const unsigned char *) resource; *p; p++)
	{
		if (*p < 0x20 || *p == 0x7f)
			return "A resource name must not contain control characters.";
	}

	/*
	 * ZooKeeper reads a path as UTF-8, whatever the database encoding, and
	 * its PathUtils.validatePath refuses some code points -- counted in
	 * Java's UTF-16, so a code point past U+FFFF, a surrogate pair, is
	 * refused too.  Check here so that such a name is bad input (22023),
	 * not a ZooKeeper failure.
	 */
	for (const unsigned char *p = (const unsigned char *) resource; *p;)
	{
		int			l;
		pg_wchar	cp;

		if (*p < 0x80)
		{
			p++;
			continue;
		}
		l = pg_utf_mblen(p);
		if (strnlen((const char *) p, l) < (size_t) l ||
			!pg_utf8_islegal(p, l))
			return "A resource name must be valid UTF-8: ZooKeeper reads names as UTF-8.";
		cp = utf8_to_unicode(p);
		if ((cp >= 0x80 && cp <= 0x9f) || (cp >= 0xd800 && cp <= 0xf8ff) ||
			cp >= 0xfff0)
			return "A resource name must not contain a code point ZooKeeper refuses: U+0080 to U+009F, U+D800 to U+F8FF, or U+FFF0 and above.";
		p += l;
	}

	/* names zklock keeps for itself: nobody can take them first */
	if (strncmp(resource, ZKLOCK_RESERVED_PREFIX,
				strlen(ZKLOCK_RESERVED_PREFIX)) == 0 ||
		strncmp(resource, ZKLOCK_OLD_CLOCK_PREFIX,
				strlen(ZKLOCK_OLD_CLOCK_PREFIX)) == 0)
		return "A resource name must not begin with \"" ZKLOCK_RESERVED_PREFIX "\" or \"" ZKLOCK_OLD_CLOCK_PREFIX "\": zklock names its own nodes so.";

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
			return "A resource name must not contain \".\" or \"..\" segments.";
		if (zklock_parse_node_name(segment, NULL, NULL))
			return "A resource name segment must not look like a lock node name (a lock mark such as LOCK-EXCLUSIVE- or __lock__ followed by ten digits).";
		seg = slash ? slash + 1 : NULL;
	}
	return NULL;
}

/*
 * Check a resource name, or raise an ERROR that names the broken rule.
 */
void
zklock_check_resource(const char *resource)
{
	int			sqlstate;
	const char *rule = zklock_resource_problem(resource, &sqlstate);

	if (rule == NULL)
		return;
	if (sqlstate == ERRCODE_NAME_TOO_LONG)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("zklock resource name is too long"),
				 errdetail("The name is %zu bytes; the limit is %d bytes.",
						   strlen(resource), ZKLOCK_MAX_RESOURCE_LEN)));
	ereport(ERROR,
			(errcode(sqlstate),
			 errmsg("invalid zklock resource name \"%s\"", resource),
			 errdetail("%s", rule)));
}

/*
 * A resource as a listing (zk_locks(subtree)) or an administrator
 * (zk_lock_force_release, zk_lock_revoke) names it: a user's resource, or
 * the advisory keys' subtree or one of its resources, which users cannot
 * lock by name but may list, and superusers free.  Raises what
 * zklock_check_resource raises for anything else.
 */
void
zklock_check_named_resource(const char *resource)
{
	const char *top = ZKLOCK_ADVISORY_PREFIX;
	size_t		toplen = strlen(top) - 1;	/* without its '/' */

	/* past the reserved "zklock.", the rules of any resource name */
	if (strncmp(resource, top, toplen) == 0 &&
		(resource[toplen] == '\0' || resource[toplen] == '/') &&
		strlen(resource) <= ZKLOCK_MAX_RESOURCE_LEN &&
		zklock_resource_problem(resource + strlen(ZKLOCK_RESERVED_PREFIX),
								NULL) == NULL)
		return;
	zklock_check_resource(resource);
}

static bool allowed_item_is_name(const char *item, size_t len,
								 const char **why);

/*
 * zk_lock_check_resource(resource text) (1.3): the error any zklock
 * function raises for a bad resource name, for SQL that takes names
 * without locking them (zk_lock_fence).  Needs no shared memory, so it
 * works without shared_preload_libraries, as zk_lock_fence does.  Names
 * are checked in UTF-8, as ZooKeeper reads them.
 */
PG_FUNCTION_INFO_V1(zklock_check_resource_name);

Datum
zklock_check_resource_name(PG_FUNCTION_ARGS)
{
	char	   *name;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("zklock resource name must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	zklock_check_resource((const char *) pg_server_to_any(name, strlen(name),
														  PG_UTF8));
	PG_RETURN_VOID();
}

/*
 * zklock.allowed_subtrees: "*", or a comma-separated list of resource
 * names, each allowing itself and everything below it.  Walk it: *allowed
 * says whether an item allows resource (NULL: only check the setting).
 * Returns false when the setting is malformed (then *why says how).
 */
static bool
walk_allowed(const char *setting, const char *resource, bool *allowed,
			 const char **why, bool strict)
{
	const char *p = setting ? setting : "";

	*allowed = false;
	while (*p)
	{
		const char *end = strchr(p, ',');
		size_t		len;

		while (*p == ' ')
			p++;
		len = end ? (size_t) (end - p) : strlen(p);
		while (len > 0 && p[len - 1] == ' ')
			len--;
		if (len == 0)
		{
			*why = "an item is empty";
			return false;
		}
		if (len == 1 && p[0] == '*')
			*allowed = true;
		else
		{
			if (len > ZKLOCK_MAX_RESOURCE_LEN)
			{
				*why = "an item is too long";
				return false;
			}
			if (p[0] == '/' || p[len - 1] == '/')
			{
				*why = "an item begins or ends with \"/\"";
				return false;
			}
			if (memchr(p, '*', len) != NULL)
			{
				*why = "\"*\" stands alone";
				return false;
			}
			if (strict && !allowed_item_is_name(p, len, why))
				return false;
			if (resource && strncmp(resource, p, len) == 0 &&
				(resource[len] == '\0' || resource[len] == '/'))
				*allowed = true;
		}
		if (end == NULL)
			break;
		p = end + 1;
	}
	return true;
}

/*
 * An item of zklock.allowed_subtrees follows the rules of a resource name
 * (zklock_resource_problem): "a/../b" or "./x" could never match a
 * resource, and would only look as if they allowed something.
 */
static bool
allowed_item_is_name(const char *item, size_t len, const char **why)
{
	char		name[ZKLOCK_MAX_RESOURCE_LEN + 1];
	const char *rule;

	memcpy(name, item, len);
	name[len] = '\0';
	rule = zklock_resource_problem(name, NULL);
	if (rule)
		*why = rule;
	return rule == NULL;
}

/*
 * Check the setting.  strict: every item must also be a good resource name
 * (a value being set); otherwise only the form is checked (a value stored
 * before that rule, applied at login: refusing it would fall back to the
 * default, "*").
 */
bool
zklock_check_allowed_subtrees(const char *setting, const char **why,
							  bool strict)
{
	bool		allowed;

	return walk_allowed(setting, NULL, &allowed, why, strict);
}

/*
 * Does setting (zklock.allowed_subtrees' syntax: "*" or names, each
 * allowing itself and everything below it) allow name?  A malformed
 * setting allows nothing.  zklock.allowed_queues shares it (queue.c).
 */
bool
zklock_allowed_by(const char *setting, const char *name)
{
	bool		allowed;
	const char *why = NULL;

	return walk_allowed(setting, name, &allowed, &why, false) && allowed;
}

/*
 * May the current role lock this resource?  Asked of every resource a
 * caller names (the parents taken for its sake come with it).  42501 if
 * not.
 */
void
zklock_check_allowed(const char *resource)
{
	if (zklock_allowed_by(zklock_allowed_subtrees, resource))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("not allowed to lock zklock resource \"%s\"", resource),
			 errdetail("zklock.allowed_subtrees is \"%s\".",
					   zklock_allowed_subtrees ? zklock_allowed_subtrees : ""),
			 errhint("A superuser can allow it with ALTER ROLE ... SET zklock.allowed_subtrees.")));
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
	switch (mode)
	{
		case ZKLOCK_SHARED:
			return "shared";
		case ZKLOCK_SEMAPHORE:
			return "semaphore";
		case ZKLOCK_EXCLUSIVE:
			break;
	}
	return "exclusive";
}

/*
 * How zklock names its own nodes under a resource: zklock.node_naming maps
 * resource subtrees to a style, so that another client locking the same
 * znodes recognises zklock's nodes (Curator's mutex, for one, counts only
 * nodes named like its own).  The longest matching subtree wins; the
 * default is Hive's naming.
 */
static const char *const style_names[] = {
	[ZKLOCK_NAMING_HIVE] = "hive",
	[ZKLOCK_NAMING_CURATOR] = "curator",
	[ZKLOCK_NAMING_CURATOR_MUTEX] = "curator-mutex",
	[ZKLOCK_NAMING_KAZOO] = "kazoo",
	[ZKLOCK_NAMING_RECIPE] = "recipe",
};

/*
 * Parse one "subtree=style" item (spaces around it already cut off).
 * Returns NULL, or (when why_wanted) what is wrong with it.
 */
static char *
parse_naming_item(const char *item, size_t len, char *subtree,
				  ZkNamingStyle *style, bool why_wanted)
{
	const char *eq = memchr(item, '=', len);
	const char *name;
	size_t		sublen;
	size_t		namelen;
	const char *rule;

	if (eq == NULL)
		return why_wanted ? psprintf("Item \"%.*s\" is not resource=style.",
									 (int) len, item) : "";
	if (memchr(eq + 1, '=', len - (eq + 1 - item)) != NULL)
		return why_wanted ? psprintf("Item \"%.*s\" has more than one \"=\".",
									 (int) len, item) : "";
	sublen = eq - item;
	name = eq + 1;
	namelen = len - sublen - 1;
	if ((sublen > 0 && eq[-1] == ' ') || (namelen > 0 && name[0] == ' '))
		return why_wanted ? psprintf("Item \"%.*s\" has a space next to \"=\"; spaces are allowed only around the commas.",
									 (int) len, item) : "";
	if (sublen > ZKLOCK_MAX_RESOURCE_LEN)
		return why_wanted ? psprintf("Item \"%.*s\": a resource name must not be longer than %d bytes.",
									 (int) len, item, ZKLOCK_MAX_RESOURCE_LEN) : "";
	memcpy(subtree, item, sublen);
	subtree[sublen] = '\0';
	rule = zklock_resource_problem(subtree, NULL);
	if (rule)
		return why_wanted ? psprintf("Subtree \"%s\" in item \"%.*s\": %s",
									 subtree, (int) len, item, rule) : "";
	for (int i = 0; i < lengthof(style_names); i++)
	{
		if (strlen(style_names[i]) == namelen &&
			pg_strncasecmp(name, style_names[i], namelen) == 0)
		{
			*style = (ZkNamingStyle) i;
			return NULL;
		}
	}
	return why_wanted ? psprintf("Item \"%.*s\": \"%.*s\" is not a style; the styles are hive, curator, curator-mutex, kazoo and recipe.",
								 (int) len, item, (int) namelen, name) : "";
}

static int
compare_subtrees(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/*
 * Is a subtree of zklock.node_naming named twice?  seen[] holds them all,
 * and is sorted here; *why (when why is not NULL) says which.
 */
static bool
naming_duplicate(char **seen, int nseen, char **why)
{
	if (nseen > 1)
	{
		qsort(seen, nseen, sizeof(char *), compare_subtrees);
		for (int i = 1; i < nseen; i++)
		{
			if (strcmp(seen[i - 1], seen[i]) == 0)
			{
				if (why)
					*why = psprintf("Subtree \"%s\" is named more than once.",
									seen[i]);
				return true;
			}
		}
	}
	return false;
}

/*
 * Walk zklock.node_naming: a comma-separated list of subtree=style items,
 * with spaces allowed around the commas and at either end (as in
 * search_path), not next to "=".  Each subtree follows the rules of a
 * resource name, and may be named once.  With resource NULL, only check
 * it: returns false and sets *why to what is wrong when malformed.
 * Otherwise *result gets the style of the longest subtree that contains
 * resource.
 */
static bool
walk_naming(const char *setting, const char *resource, ZkNamingStyle *result,
			char **why)
{
	const char *p = setting ? setting : "";
	size_t		best = 0;
	char	  **seen = NULL;
	int			nseen = 0;
	int			maxseen = 0;

	*result = ZKLOCK_NAMING_HIVE;
	while (*p == ' ')
		p++;
	if (*p == '\0')
		return true;			/* empty: Hive's naming everywhere */
	for (;;)
	{
		const char *end = strchr(p, ',');
		size_t		len;
		char		subtree[ZKLOCK_MAX_RESOURCE_LEN + 1];
		ZkNamingStyle style = ZKLOCK_NAMING_HIVE;
		char	   *bad;

		while (*p == ' ')
			p++;
		len = end ? (size_t) (end - p) : strlen(p);
		while (len > 0 && p[len - 1] == ' ')
			len--;
		if (len == 0)
		{
			if (why)
				*why = pstrdup("An item is empty: two commas in a row, or a comma at either end.");
			return false;
		}
		bad = parse_naming_item(p, len, subtree, &style, why != NULL);
		if (bad)
		{
			if (why)
				*why = bad;
			return false;
		}
		if (resource)
		{
			size_t		sublen = strlen(subtree);

			if (sublen > best &&
				strncmp(resource, subtree, sublen) == 0 &&
				(resource[sublen] == '\0' || resource[sublen] == '/'))
			{
				best = sublen;
				*result = style;
			}
		}
		else
		{
			/* remember the subtrees, to find one named twice */
			if (nseen >= maxseen)
			{
				maxseen = Max(8, maxseen * 2);
				seen = seen ? repalloc(seen, maxseen * sizeof(char *)) :
					palloc(maxseen * sizeof(char *));
			}
			seen[nseen++] = pstrdup(subtree);
		}
		if (end == NULL)
			break;
		p = end + 1;
	}

	return !naming_duplicate(seen, nseen, why);
}

/*
 * The GUC check hook's part: NULL when the setting is good, else what is
 * wrong with it (palloc'd).
 */
char *
zklock_check_node_naming(const char *setting)
{
	ZkNamingStyle style;
	char	   *why = NULL;

	if (walk_naming(setting, NULL, &style, &why))
		return NULL;
	return why;
}

ZkNamingStyle
zklock_naming_style(const char *resource)
{
	ZkNamingStyle style;

	if (!walk_naming(zklock_node_naming, resource, &style, NULL))
		return ZKLOCK_NAMING_HIVE;
	return style;
}

/*
 * The prefix of a request ("zk<incarnation>.<entry>.<generation>-") is
 * unique to one request of one worker incarnation, so the worker can find
 * the node again after a lost reply.
 */
void
zklock_format_node_prefix(char *buf, size_t buflen, uint32 incarnation,
						  int idx, uint32 generation, bool persistent)
{
	/* "zx": an explicit lock, the only nodes the expiry sweep reads */
	snprintf(buf, buflen, "%s%08x.%x.%x-", persistent ? "zx" : "zk",
			 incarnation, idx, generation);
}

/*
 * Is this child node one of ours, made by the request with this prefix?
 * Curator's naming puts "_c_" before the prefix (its protected-mode mark).
 */
bool
zklock_node_has_prefix(const char *name, const char *prefix)
{
	if (strncmp(name, "_c_", 3) == 0)
		name += 3;
	return strncmp(name, prefix, strlen(prefix)) == 0;
}

/* The name a create asks for: prefix and the style's mark for the mode */
void
zklock_format_node_request(char *buf, size_t buflen, const char *prefix,
						   ZkLockMode mode, ZkNamingStyle style)
{
	const char *mark;
	bool		shared = (mode == ZKLOCK_SHARED);

	switch (style)
	{
		case ZKLOCK_NAMING_CURATOR:
			/* Curator's own nodes are "_c_<uuid>-__WRIT__<seq>" */
			snprintf(buf, buflen, "_c_%s%s", prefix,
					 shared ? "__READ__" : "__WRIT__");
			return;
		case ZKLOCK_NAMING_CURATOR_MUTEX:
			snprintf(buf, buflen, "_c_%slock-", prefix);
			return;
		case ZKLOCK_NAMING_KAZOO:
			mark = shared ? "__rlock__" : "__lock__";
			break;
		case ZKLOCK_NAMING_RECIPE:
			mark = shared ? "read-" : "write-";
			break;
		case ZKLOCK_NAMING_HIVE:
		default:
			mark = shared ? "LOCK-SHARED-" : "LOCK-EXCLUSIVE-";
			break;
	}
	snprintf(buf, buflen, "%s%s", prefix, mark);
}

/*
 * The name a semaphore's create asks for: "SEMAPHORE-<limit>-" behind the
 * prefix, then the style's EXCLUSIVE mark, so that clients that know no
 * semaphores see an EXCLUSIVE lock node (grant_rule.c).
 */
void
zklock_format_semaphore_request(char *buf, size_t buflen, const char *prefix,
								int max_holders, ZkNamingStyle style)
{
	char		sem_prefix[64];

	snprintf(sem_prefix, sizeof(sem_prefix), "%sSEMAPHORE-%d-", prefix,
			 max_holders);
	zklock_format_node_request(buf, buflen, sem_prefix, ZKLOCK_EXCLUSIVE,
							   style);
}

/*
 * The name this instance gives itself in lock node data: zklock.node_name,
 * or host name and port.
 */
const char *
zklock_instance_name(void)
{
	static char name[128];

	if (zklock_node_name && zklock_node_name[0])
		return zklock_node_name;
	if (name[0] == '\0')
	{
		char		host[64];

		if (gethostname(host, sizeof(host)) != 0)
			strlcpy(host, "localhost", sizeof(host));
		host[sizeof(host) - 1] = '\0';
		snprintf(name, sizeof(name), "%s:%d", host, PostPortNumber);
	}
	return name;
}

/* How many '/' a resource has: its number of parents (acquire.c) */
int
zklock_resource_depth(const char *resource)
{
	int			n = 0;

	for (const char *p = resource; *p; p++)
		n += (*p == '/');
	return n;
}
