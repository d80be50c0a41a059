/*-------------------------------------------------------------------------
 *
 * explicit_index.c
 *		The index of explicit locks: its names, and the writes that keep
 *		it (1.5).
 *
 * Every explicit lock request (a persistent node, which outlives its
 * session) is also recorded by one persistent entry under one node,
 * <root>/zklock.explicit, so that the sweep (sweep.c) lists that one node
 * and reads the explicit nodes it names, instead of listing every resource
 * node of the tree: an idle instance's cost no longer grows with the locks
 * held.  An entry is named
 *
 *		<resource, escaped into one segment>%<request name>
 *
 * where the request name is the name the node's create asked for, its
 * sequence number not yet appended ("zx<incarnation>.<entry>.<gen>-" and
 * the naming style's mark, e.g. "LOCK-EXCLUSIVE-"): unique to one request
 * of one worker incarnation, known before the node exists, and matching
 * exactly the names of the nodes that create can make (the name and ten
 * digits).  The resource has "%" written "%25" and "/" written "%2F", so
 * the last "%" of an entry's name separates the two; a request name never
 * contains "%" or "/" (zklock's own; a walk that finds another name
 * records none).  An entry's name never ends in a sequence number, so no
 * reader takes it for a lock node.  Entries carry no data.
 *
 * The rules of order, which make a multi unnecessary:
 *
 *	- An entry is created before its node, on the same session, pipelined
 *	  (ZooKeeper applies one session's requests in order): no node of this
 *	  version exists without its entry (lock_explicit.c).  A create tried
 *	  again (after a lost reply, or with its parents) first rewrites the
 *	  entry (setData), which moves its mtime and version: see the sweep's
 *	  removal below.
 *	- An entry is deleted only after its node: by the lock recipe once its
 *	  delete of the node was answered (lock_explicit.c); by
 *	  zk_lock_release_explicit and zk_lock_force_release once theirs was
 *	  (admin.c), only if the entry was never rewritten (version 0: no
 *	  create of the same request can be under way); by the sweep once its
 *	  removal of an expired node was answered.
 *	- An entry whose node the sweep does not find, and whose mtime is more
 *	  than twice the session timeout before the sweep's clock write
 *	  (ZooKeeper's own time on both sides), is deleted by the sweep with
 *	  the version it read: a create tried again in between moved both.
 *	  Deletes that were never sent (a worker that died between its node's
 *	  delete and its entry's, a node deleted by zklock 1.4 or by hand, a
 *	  request failed with its node lost with the session) end this way.
 *
 * Pure functions of names, except zklock_explicit_index_forget, which
 * sends one delete; no state.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "explicit_index.h"
#include "settings.h"
#include "zk_client.h"

/* <root>/zklock.explicit */
void
zklock_explicit_index_dir(char *buf, size_t size)
{
	snprintf(buf, size, "%s/" ZKLOCK_EXPLICIT_INDEX_NODE, zklock_root);
}

/*
 * The entry of a request: parent is the resource node's path (under the
 * root), request the name its create asks for.  false if it does not fit,
 * or the names are not what an entry can carry.
 */
bool
zklock_explicit_index_path(char *buf, size_t size, const char *parent,
						   const char *request)
{
	size_t		rootlen = strlen(zklock_root);
	size_t		len;

	if (strncmp(parent, zklock_root, rootlen) != 0 || parent[rootlen] != '/' ||
		request[0] == '\0' || strpbrk(request, "%/") != NULL)
		return false;
	zklock_explicit_index_dir(buf, size);
	len = strlen(buf);
	if (len + 1 >= size)
		return false;
	buf[len++] = '/';
	for (const char *p = parent + rootlen + 1; *p; p++)
	{
		if (len + 4 >= size)
			return false;
		if (*p == '%' || *p == '/')
			len += snprintf(buf + len, size - len, "%%%02X", (unsigned char) *p);
		else
			buf[len++] = *p;
	}
	buf[len] = '\0';
	return snprintf(buf + len, size - len, "%%%s", request) < (int) (size - len);
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/*
 * An entry's name (the child of the index node) into the resource node's
 * path and the request name; false for a name that is not an entry.
 */
bool
zklock_explicit_index_parse(const char *name, char *parent, size_t psize,
							char *request, size_t rsize)
{
	const char *sep = strrchr(name, '%');
	size_t		len;

	if (sep == NULL || sep == name || sep[1] == '\0' ||
		strlen(sep + 1) >= rsize || strchr(sep + 1, '/') != NULL)
		return false;
	strlcpy(request, sep + 1, rsize);
	len = snprintf(parent, psize, "%s/", zklock_root);
	for (const char *p = name; p < sep; p++)
	{
		char		c = *p;

		if (c == '%')
		{
			int			hi = p + 2 < sep ? hexval(p[1]) : -1;
			int			lo = hi >= 0 ? hexval(p[2]) : -1;

			if (lo < 0)
				return false;
			c = (char) (hi * 16 + lo);
			p += 2;
		}
		if (c == '\0' || len + 1 >= psize)
			return false;
		parent[len++] = c;
	}
	parent[len] = '\0';
	return true;
}

/*
 * The request name of a lock node: its name without the ten digits of its
 * sequence number.  false for a name that does not end in them, or that
 * an entry cannot carry.
 */
bool
zklock_explicit_index_request_of(const char *node, char *buf, size_t size)
{
	size_t		len = strlen(node);

	if (len <= 10 || len - 10 >= size || strpbrk(node, "%/") != NULL)
		return false;
	for (size_t i = len - 10; i < len; i++)
		if (node[i] < '0' || node[i] > '9')
			return false;
	memcpy(buf, node, len - 10);
	buf[len - 10] = '\0';
	return true;
}

/*
 * A zklock explicit node was deleted (its delete answered): delete its
 * entry, if version is -1 whatever it is, else only at that version.  Its
 * reply is the caller's to ignore.  Nodes of other names have no entry of
 * this form (a walk records zklock's "zx" nodes and older ones by the same
 * rule; the latter's entries go by the sweep's own rule).  false when
 * nothing was sent.
 */
bool
zklock_explicit_index_forget(const char *node_path, int version, uint64 tag)
{
	const char *slash = strrchr(node_path, '/');
	const char *name;
	char		parent[ZKLOCK_EXPLICIT_INDEX_MAX_PATH];
	char		request[ZKLOCK_MAX_NODE_NAME_LEN + 1];
	char		path[ZKLOCK_EXPLICIT_INDEX_MAX_PATH];

	if (slash == NULL || slash == node_path ||
		(size_t) (slash - node_path) >= sizeof(parent))
		return false;
	name = slash + 1;
	if (strncmp(name, "_c_", 3) == 0 ? strncmp(name + 3, "zx", 2) != 0 :
		strncmp(name, "zx", 2) != 0)
		return false;
	memcpy(parent, node_path, slash - node_path);
	parent[slash - node_path] = '\0';
	if (!zklock_explicit_index_request_of(name, request, sizeof(request)) ||
		!zklock_explicit_index_path(path, sizeof(path), parent, request))
		return false;
	return zkc_delete_version(path, version, tag);
}
