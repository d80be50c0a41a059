/*-------------------------------------------------------------------------
 *
 * nodedata.c
 *		The one codec of lock node data, and of listing rows.
 *
 * A zklock lock node's data says who holds it, for zk_locks on every
 * instance, for the sweep of explicit locks and for revocation.  It is
 * UTF-8 text of "key=value" lines, at most ZKLOCK_MAX_DATA_LEN bytes;
 * every value is one line (a line break in a name is written as a space),
 * and query=, when present, is the last line, without a line break after
 * it.  Each field is converted to UTF-8 before the data is made; data
 * that would be too long loses free text only, between characters: the
 * query, then the application name (zklock_nodedata_encode_fit); when the
 * other fields alone do not fit, no data is made and the request is
 * refused (issue 20: a cut after the conversion fell through ttl=).
 *
 * The fields, who writes them, and since when:
 *
 *	v=2				the format's version (zklock 1.2, format 2).  Data
 *					without it is format 1 (zklock 1.0 and 1.1).  Written
 *					first by zklock_holder_data (holder.c; before 1.3
 *					zklock_describe_holder, backend.c) and by
 *					zk_lock_revoke (zk_lock_revoke_data, status.c).
 *	instance=		the holder's zklock.instance_name			1.0, backend.c
 *	pid=			the holder's backend pid					1.0, backend.c
 *	database=		its database								1.0, backend.c
 *	user=			the role it acts as (SET ROLE)				1.0, backend.c
 *	application=	its application_name						1.0, backend.c
 *	vxid=			its virtual transaction id					1.0, backend.c
 *	scope=			session, transaction or explicit			1.0, backend.c;
 *					rewritten in place while held (show_holds, local_locks.c)
 *	implicit=		true for a parent's lock taken for a child	1.0, as scope=
 *	since=			Unix epoch seconds, ".<6 digits>" of micros	1.0, backend.c
 *	expires=		Unix epoch seconds: an explicit lock's		1.0 only
 *					expiry by its requester's clock (1.1 stopped
 *					writing it; the sweep still reads it)
 *	ttl=			an explicit lock's time to live in ms,		1.1, backend.c
 *					counted from the node's mtime
 *	expires_at=		when that is, by the writer's clock (for	1.1, backend.c;
 *					people only, never used to expire)			rewritten at
 *																grant (protocol.c)
 *	waiter=			16 hex digits: the session waiting for an	1.1, backend.c
 *					explicit request; filled in by the worker	(zeros), protocol.c
 *					(protocol.c), removed at grant
 *	revoke=			cancel or terminate: a revocation			1.0, zk_lock_revoke
 *	revoked_by=		the role that revoked						1.0, zk_lock_revoke
 *	max_holders=	a semaphore's limit, 1 to 1000 (its node's	1.4, acquire.c
 *					name says it too: SEMAPHORE-<n>-); absent
 *					on a lock's node.  Format 2 still: a reader
 *					that does not know it has nothing to do
 *					with it (the name makes the node EXCLUSIVE
 *					to every reader of 1.3 and before)
 *	query=			the holder's statement, last, cut to fit	1.0, backend.c
 *
 * An election candidate's node (zklock 1.4, election.c) is a record of
 * another kind, marked by its second line:
 *
 *	v=2
 *	kind=candidate	an election candidate, not a lock holder	1.4
 *	instance_id=	"<system identifier>:<port>" of the instance	1.4
 *	node_name=		its zklock.node_name (or host:port)			1.4
 *	host=			its host name									1.4
 *	pid=			its postmaster's pid							1.4
 *
 * Readers of lock nodes never meet it (the groups live under the reserved
 * "zklock." prefix, which no lock may use, and zk_locks skips it).
 *
 * Readers look a field up by its key at the start of a line
 * (zklock_node_field) and ignore every line they do not know.  The readers
 * of zklock 1.0 and 1.1 (up to git revision 2e55121) do the same
 * (zklock_node_field in protocol.c, data_field in status.c: a key at
 * the start of a line or of the data), so the "v=2" line and any field
 * added later are skipped by them: during a rolling upgrade, instances of
 * every version read each other's nodes.  The rule for later versions: a
 * new field never changes the meaning of an old one; a field whose meaning
 * changes gets a new key (as expires= became ttl= and expires_at= in 1.1),
 * and "v=" goes up when what a reader must do with the data changes.  No
 * reader rejects a version it does not know.  Data may also be another
 * client's, in any form: a reader finds no field in it, never an error.
 *
 * Listing rows, from the worker to a backend (listing.c, status.c):
 * "path \t czxid \t ephemeralOwner \t data", one a line, data escaped:
 * '\' as "\\", a line break as "\n", a tab as "\t"; a NUL byte or a
 * carriage return becomes a space (they never come back).
 *
 * Pure: no allocation, no error reporting, no shared state; this file
 * links into the unit test test/unit/test_nodedata.c.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdint.h>

#include "nodedata.h"

/* Appends to a bounded buffer, counting what would be needed */
typedef struct NodeDataOut
{
	char	   *buf;
	size_t		buflen;
	size_t		len;			/* what the whole data needs */
} NodeDataOut;

static void
nodedata_put_n(NodeDataOut *out, const char *s, size_t max, bool one_line)
{
	for (; *s && max > 0; s++, max--)
	{
		char		c = *s;

		if (one_line && (c == '\n' || c == '\r'))
			c = ' ';
		if (out->len + 1 < out->buflen)
			out->buf[out->len] = c;
		out->len++;
	}
}

static void
nodedata_put(NodeDataOut *out, const char *s, bool one_line)
{
	nodedata_put_n(out, s, SIZE_MAX, one_line);
}

/* A "key=value" line, with at most max bytes of the value */
static void
nodedata_field_n(NodeDataOut *out, const char *key, const char *value,
				 size_t max, bool last)
{
	if (value == NULL)
		return;
	nodedata_put(out, key, false);
	nodedata_put(out, "=", false);
	nodedata_put_n(out, value, max, true);
	if (!last)
		nodedata_put(out, "\n", false);
}

static void
nodedata_field(NodeDataOut *out, const char *key, const char *value,
			   bool last)
{
	nodedata_field_n(out, key, value, SIZE_MAX, last);
}

/*
 * The data, with at most app_max bytes of the application name and
 * query_max of the query (the free text, which may be cut)
 */
static size_t
nodedata_encode_n(char *buf, size_t buflen, const ZkNodeData *f,
				  size_t app_max, size_t query_max)
{
	NodeDataOut out = {buf, buflen, 0};

	nodedata_field(&out, "v", CppAsString2(ZKLOCK_NODEDATA_VERSION), false);
	nodedata_field(&out, "instance", f->instance, false);
	nodedata_field(&out, "pid", f->pid, false);
	nodedata_field(&out, "database", f->database, false);
	nodedata_field(&out, "user", f->user, false);
	nodedata_field_n(&out, "application", f->application, app_max, false);
	nodedata_field(&out, "vxid", f->vxid, false);
	nodedata_field(&out, "scope", f->scope, false);
	nodedata_field(&out, "implicit", f->implicit, false);
	nodedata_field(&out, "since", f->since, false);
	nodedata_field(&out, "ttl", f->ttl, false);
	nodedata_field(&out, "expires_at", f->expires_at, false);
	nodedata_field(&out, "waiter", f->waiter, false);
	nodedata_field(&out, "revoke", f->revoke, false);
	nodedata_field(&out, "revoked_by", f->revoked_by, false);
	nodedata_field(&out, "max_holders", f->max_holders, false);
	nodedata_field_n(&out, "query", f->query, query_max, true);
	if (buflen > 0)
		buf[Min(out.len, buflen - 1)] = '\0';
	return out.len;
}

/*
 * The data of an election candidate's node (see above); returns the
 * length the whole data needs, as snprintf does
 */
size_t
zklock_nodedata_encode_candidate(char *buf, size_t buflen,
								 const ZkCandidateData *f)
{
	NodeDataOut out = {buf, buflen, 0};

	nodedata_field(&out, "v", CppAsString2(ZKLOCK_NODEDATA_VERSION), false);
	nodedata_field(&out, "kind", ZKLOCK_CANDIDATE_KIND, false);
	nodedata_field(&out, "instance_id", f->instance_id, false);
	nodedata_field(&out, "node_name", f->node_name, false);
	nodedata_field(&out, "host", f->host, false);
	nodedata_field(&out, "pid", f->pid, true);
	if (buflen > 0)
		buf[Min(out.len, buflen - 1)] = '\0';
	return out.len;
}

/*
 * The data of a holder, in buf (NUL-terminated, cut to buflen - 1 bytes:
 * see zklock_nodedata_encode_fit for a cut that spares the fields).
 * Returns the length of the whole data, as snprintf does.
 */
size_t
zklock_nodedata_encode(char *buf, size_t buflen, const ZkNodeData *f)
{
	return nodedata_encode_n(buf, buflen, f, SIZE_MAX, SIZE_MAX);
}

/*
 * How many bytes of UTF-8 text s to keep within room bytes: all of it, or
 * as much as ends where a character ends (never half a character).
 */
static size_t
nodedata_utf8_cliplen(const char *s, size_t room)
{
	size_t		n = strnlen(s, room + 1);

	if (n <= room)
		return n;
	n = room;
	while (n > 0 && ((unsigned char) s[n] & 0xC0) == 0x80)
		n--;					/* s[n] continues a character: cut before it */
	return n;
}

/*
 * The data of a holder, made to fit buflen - 1 bytes by cutting its free
 * text alone: the query, and when the query is gone, the application name
 * (both only ever shown).  The other fields are what readers act on
 * (ttl=, waiter=, user=, scope=, ...) or name the holder: they are whole,
 * or the data is not made at all.  The fields are UTF-8 already (the
 * caller converts each one: a cut after the conversion could fall in any
 * field).  A cut ends where a character ends; "query=" and "application="
 * stay, maybe empty.  Returns the length of the data in buf, or -1 (and
 * buf empty) when the other fields alone do not fit: the request must then
 * be refused, never sent with a field cut.
 */
int
zklock_nodedata_encode_fit(char *buf, size_t buflen, const ZkNodeData *f)
{
	size_t		need;
	size_t		room;
	size_t		app_len = 0;
	size_t		query_len = 0;

	if (buflen == 0)
		return -1;
	need = zklock_nodedata_encode(buf, buflen, f);
	if (need < buflen)
		return (int) need;

	/* too long: first everything but the free text */
	need = nodedata_encode_n(buf, buflen, f, 0, 0);
	if (need >= buflen)
	{
		buf[0] = '\0';
		return -1;
	}
	room = buflen - 1 - need;
	if (f->application)
		app_len = nodedata_utf8_cliplen(f->application, room);
	room -= app_len;
	if (f->query)
		query_len = nodedata_utf8_cliplen(f->query, room);
	return (int) nodedata_encode_n(buf, buflen, f, app_len, query_len);
}

/*
 * Unix epoch microseconds (not negative) as since= has them,
 * "<seconds>.<6 digits>", in buf (at least 28 bytes).  Done by hand: this
 * file links without libpgport.
 */
void
zklock_nodedata_epoch(char *buf, size_t buflen, int64 unix_us)
{
	char		digits[32];
	int			n = 0;
	uint64		v = unix_us < 0 ? 0 : (uint64) unix_us;
	size_t		len = 0;

	/* the digits backwards: six of micros, the point, at least one more */
	for (int i = 0; i < 6; i++, v /= 10)
		digits[n++] = '0' + (int) (v % 10);
	digits[n++] = '.';
	do
	{
		digits[n++] = '0' + (int) (v % 10);
		v /= 10;
	} while (v > 0);
	while (n > 0 && len + 1 < buflen)
		buf[len++] = digits[--n];
	if (buflen > 0)
		buf[len] = '\0';
}

/*
 * The value of a "key=" line of node data, or NULL.  Every value is on one
 * line, so a field starts the data or follows a line break; "key=" inside
 * another field's value is not it.
 */
const char *
zklock_node_field(const char *data, const char *key)
{
	size_t		len = strlen(key);

	if (strncmp(data, key, len) == 0)
		return data + len;
	for (const char *p = data; (p = strchr(p, '\n')) != NULL; p++)
		if (strncmp(p + 1, key, len) == 0)
			return p + 1 + len;
	return NULL;
}

/*
 * Node data with one field's value changed in place (key includes the '='):
 * every line whose key it is gets the new value, or goes when value is
 * NULL; a field that is absent is not added, and every other line stays as
 * it was, in its place, so that readers of every version read the rest as
 * before.  The result is in buf, cut to buflen - 1 bytes (the caller cuts
 * again on a character boundary; the query, last, is what is cut).
 * Returns the length of the whole result, as snprintf does.  buf and data
 * must not overlap.
 */
size_t
zklock_nodedata_set(char *buf, size_t buflen, const char *data,
					const char *key, const char *value)
{
	NodeDataOut out = {buf, buflen, 0};
	size_t		keylen = strlen(key);
	const char *p = data;

	while (*p)
	{
		const char *eol = strchr(p, '\n');
		size_t		len = eol ? (size_t) (eol - p) : strlen(p);

		if (len >= keylen && strncmp(p, key, keylen) == 0)
		{
			if (value != NULL)
			{
				nodedata_put(&out, key, false);
				nodedata_put(&out, value, true);
				if (eol)
					nodedata_put(&out, "\n", false);
			}
		}
		else
		{
			for (size_t i = 0; i < len + (eol ? 1 : 0); i++)
			{
				if (out.len + 1 < out.buflen)
					out.buf[out.len] = p[i];
				out.len++;
			}
		}
		p += len + (eol ? 1 : 0);
	}
	if (buflen > 0)
		buf[Min(out.len, buflen - 1)] = '\0';
	return out.len;
}

/*
 * Node data with a field added (key includes the '='), before the query=
 * line, which stays last, or at the end when there is none; every other
 * line stays as it was.  A field already there is left as it is (use
 * zklock_nodedata_set).  The result is in buf, cut to buflen - 1 bytes;
 * returns the length of the whole result, as snprintf does.  buf and data
 * must not overlap.
 */
size_t
zklock_nodedata_add(char *buf, size_t buflen, const char *data,
					const char *key, const char *value)
{
	NodeDataOut out = {buf, buflen, 0};
	const char *query = zklock_node_field(data, "query=");
	size_t		head;

	if (zklock_node_field(data, key) != NULL)
	{
		nodedata_put(&out, data, false);
		if (buflen > 0)
			buf[Min(out.len, buflen - 1)] = '\0';
		return out.len;
	}
	/* the lines before the query (all of them when there is none) */
	head = query ? (size_t) (query - strlen("query=") - data) : strlen(data);
	nodedata_put_n(&out, data, head, false);
	if (head > 0 && data[head - 1] != '\n')
		nodedata_put(&out, "\n", false);
	nodedata_put(&out, key, false);
	nodedata_put(&out, value, true);
	if (query)
	{
		nodedata_put(&out, "\n", false);
		nodedata_put(&out, data + head, false);
	}
	if (buflen > 0)
		buf[Min(out.len, buflen - 1)] = '\0';
	return out.len;
}

/* The length of a value zklock_node_field returned */
size_t
zklock_node_field_len(const char *value)
{
	return strcspn(value, "\n");
}

int
zklock_nodedata_version(const char *data)
{
	const char *v = zklock_node_field(data, "v=");
	int			version = 0;

	if (v == NULL)
		return 1;
	for (; *v >= '0' && *v <= '9' && version < 100000; v++)
		version = version * 10 + (*v - '0');
	return version;
}

size_t
zklock_nodedata_escape(char *dst, const char *src, size_t srclen)
{
	char	   *w = dst;

	for (size_t i = 0; i < srclen; i++)
	{
		char		c = src[i];

		if (c == '\\' || c == '\n' || c == '\t')
		{
			*w++ = '\\';
			*w++ = c == '\n' ? 'n' : c == '\t' ? 't' : '\\';
		}
		else if (c == '\0' || c == '\r')
			*w++ = ' ';
		else
			*w++ = c;
	}
	*w = '\0';
	return w - dst;
}

/* Undo zklock_nodedata_escape, in place */
char *
zklock_nodedata_unescape(char *s)
{
	char	   *r = s,
			   *w = s;

	while (*r)
	{
		if (r[0] == '\\' && r[1])
		{
			*w++ = r[1] == 'n' ? '\n' : r[1] == 't' ? '\t' : r[1];
			r += 2;
		}
		else
			*w++ = *r++;
	}
	*w = '\0';
	return s;
}

/*
 * Shown text: node data and names are UTF-8; a database in another
 * encoding shows a character it cannot hold as "\uXXXX" ("\UXXXXXXXX" past
 * U+FFFF), as an E'' literal would, and so a backslash as "\\" (else the
 * literal text "\u3042" would look like the escape).  The escape is made
 * where the text is converted (status.c); here is its inverse, for text
 * shown that is written back (zk_lock_revoke writes a holder's details
 * back into its node): "\\" is a backslash, "\u" with four hex digits
 * and "\U" with eight are the code point in UTF-8; anything else stays as
 * it is.  In place: the result is never longer.
 */
static int
nodedata_hex(const char *s, int n, unsigned long *value)
{
	unsigned long v = 0;

	for (int i = 0; i < n; i++)
	{
		char		c = s[i];
		int			d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return 0;
		v = v * 16 + d;
	}
	*value = v;
	return 1;
}

/* A code point as UTF-8 into w; returns its length, 0 if not one */
static int
nodedata_put_utf8(char *w, unsigned long cp)
{
	if (cp < 0x80)
	{
		w[0] = (char) cp;
		return cp == 0 ? 0 : 1;
	}
	if (cp < 0x800)
	{
		w[0] = (char) (0xC0 | (cp >> 6));
		w[1] = (char) (0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp >= 0xD800 && cp <= 0xDFFF)
		return 0;				/* a surrogate is no character */
	if (cp < 0x10000)
	{
		w[0] = (char) (0xE0 | (cp >> 12));
		w[1] = (char) (0x80 | ((cp >> 6) & 0x3F));
		w[2] = (char) (0x80 | (cp & 0x3F));
		return 3;
	}
	if (cp <= 0x10FFFF)
	{
		w[0] = (char) (0xF0 | (cp >> 18));
		w[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
		w[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
		w[3] = (char) (0x80 | (cp & 0x3F));
		return 4;
	}
	return 0;
}

char *
zklock_shown_unescape(char *s)
{
	char	   *r = s,
			   *w = s;

	while (*r)
	{
		unsigned long cp;
		int			digits = 0;
		int			len;

		if (r[0] == '\\' && (r[1] == 'u' || r[1] == 'U'))
			digits = r[1] == 'u' ? 4 : 8;

		if (r[0] == '\\' && r[1] == '\\')
		{
			*w++ = '\\';
			r += 2;
		}
		else if (digits > 0 && strnlen(r + 2, digits) == (size_t) digits &&
				 nodedata_hex(r + 2, digits, &cp) &&
				 (len = nodedata_put_utf8(w, cp)) > 0)
		{
			w += len;
			r += 2 + digits;
		}
		else
			*w++ = *r++;
	}
	*w = '\0';
	return s;
}
