/*-------------------------------------------------------------------------
 *
 * test_nodedata.c
 *		Test of the node data codec (src/common/nodedata.c) and of Hive's rule
 *		applied to a whole resource at once (zklock_grant_rule_sorted,
 *		src/common/grant_rule.c), without ZooKeeper or a server.
 *
 * Encode/decode round trips, values with line breaks, unknown fields, data
 * in the format zklock 1.0 and 1.1 wrote (no "v=" line), data cut to
 * ZKLOCK_MAX_DATA_LEN, the escaping of listing rows; and, for many
 * resources' children, that the one-pass rule agrees with zklock_grant_rule
 * node by node.  The output is TAP; the exit status is 1 when a case
 * fails.  Built and run by `make zklock-unit`.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "grant_rule.h"
#include "nodedata.h"
#include "zklock.h"

/* libc's printf: this binary links no libpgport */
#undef printf
#undef snprintf

#define NCASES 50

static int	failures = 0;
static int	tests = 0;

static void
report(bool ok, const char *name)
{
	tests++;
	printf("%s %d - %s\n", ok ? "ok" : "not ok", tests, name);
	if (!ok)
		failures++;
}

/* the value of key= as a string (in a static buffer), or NULL */
static const char *
value(const char *data, const char *key)
{
	static char buf[ZKLOCK_MAX_DATA_LEN + 1];
	const char *v = zklock_node_field(data, key);
	size_t		len;

	if (v == NULL)
		return NULL;
	len = zklock_node_field_len(v);
	memcpy(buf, v, len);
	buf[len] = '\0';
	return buf;
}

static bool
value_is(const char *data, const char *key, const char *expected)
{
	const char *v = value(data, key);

	if (v == NULL || strcmp(v, expected) != 0)
	{
		printf("#   %s: got %s, expected \"%s\"\n", key,
			   v ? v : "(none)", expected);
		return false;
	}
	return true;
}

static const ZkNodeData holder = {
	.instance = "node-a",
	.pid = "4242",
	.database = "postgres",
	.user = "alice",
	.application = "psql",
	.vxid = "3/17",
	.scope = "transaction",
	.implicit = "false",
	.since = "1795000000.123456",
	.query = "SELECT zk_lock_acquire('a/b')",
};

/* exactly what describe_holder wrote up to git revision 2e55121 */
static const char *const format1 =
"instance=node-a\npid=4242\ndatabase=postgres\nuser=alice\n"
"application=psql\nvxid=3/17\nscope=transaction\nimplicit=false\n"
"since=1795000000.123456\nquery=SELECT zk_lock_acquire('a/b')";

static void
test_codec(void)
{
	char		buf[ZKLOCK_MAX_DATA_LEN + 1];
	char		big[4 * ZKLOCK_MAX_DATA_LEN];
	char		all[5 * ZKLOCK_MAX_DATA_LEN];
	char		esc[2 * 64 + 1];
	size_t		n;
	ZkNodeData	f;

	/* 1-2: a round trip of every field, version first */
	n = zklock_nodedata_encode(buf, sizeof(buf), &holder);
	report(n == strlen(buf) && strncmp(buf, "v=2\n", 4) == 0 &&
		   zklock_nodedata_version(buf) == ZKLOCK_NODEDATA_VERSION,
		   "encode: the data starts with v=2, and is not cut");
	report(value_is(buf, "instance=", "node-a") && value_is(buf, "pid=", "4242") &&
		   value_is(buf, "database=", "postgres") && value_is(buf, "user=", "alice") &&
		   value_is(buf, "application=", "psql") && value_is(buf, "vxid=", "3/17") &&
		   value_is(buf, "scope=", "transaction") && value_is(buf, "implicit=", "false") &&
		   value_is(buf, "since=", "1795000000.123456") &&
		   value_is(buf, "query=", "SELECT zk_lock_acquire('a/b')"),
		   "decode: every field round trips");

	/* 3: format 2 is format 1 with a first line: old readers see the same */
	report(strcmp(buf + 4, format1) == 0,
		   "encode: after v=2, byte for byte what 2e55121 wrote");

	/* 4: fields left out are absent; a prefix of a key is not the key */
	report(value(buf, "ttl=") == NULL && value(buf, "expires=") == NULL &&
		   value(buf, "revoke=") == NULL && value(buf, "waiter=") == NULL,
		   "decode: fields not written are absent");

	/* 5-6: explicit lock fields, in order, query still last */
	f = holder;
	f.scope = "explicit";
	f.ttl = "60000";
	f.expires_at = "1795000060.123456";
	f.waiter = "0000000000000000";
	zklock_nodedata_encode(buf, sizeof(buf), &f);
	report(value_is(buf, "ttl=", "60000") &&
		   value_is(buf, "expires_at=", "1795000060.123456") &&
		   value_is(buf, "waiter=", "0000000000000000") &&
		   value(buf, "expires=") == NULL,
		   "explicit: ttl, expires_at, waiter round trip; expires= is not expires_at=");
	report(strstr(buf, "since=1795000000.123456\nttl=60000\nexpires_at=1795000060.123456\nwaiter=0000000000000000\nquery=") != NULL,
		   "explicit: fields in the order 1.1 wrote them");

	/* 7: the revocation, as 1.0's zk_lock_revoke wrote it, after v=2 */
	memset(&f, 0, sizeof(f));
	f.instance = "node-a";
	f.pid = "4242";
	f.database = "postgres";
	f.user = "alice";
	f.application = "psql";
	f.scope = "session";
	f.implicit = "false";
	f.revoke = "terminate";
	f.revoked_by = "admin";
	f.query = "SELECT 1";
	zklock_nodedata_encode(buf, sizeof(buf), &f);
	report(strcmp(buf, "v=2\ninstance=node-a\npid=4242\ndatabase=postgres\nuser=alice\n"
				  "application=psql\nscope=session\nimplicit=false\nrevoke=terminate\n"
				  "revoked_by=admin\nquery=SELECT 1") == 0,
		   "revocation: zk_lock_revoke's format, after v=2");

	/* 8-9: a line break in a value is a space; key= inside a value is not a field */
	f = holder;
	f.user = "evil\nrevoke=terminate";
	f.application = "a\r\nb";
	f.query = "SELECT 1\nscope=session\r\n";
	zklock_nodedata_encode(buf, sizeof(buf), &f);
	report(value_is(buf, "user=", "evil revoke=terminate") &&
		   value_is(buf, "application=", "a  b") &&
		   value_is(buf, "query=", "SELECT 1 scope=session  "),
		   "encode: line breaks in values become spaces");
	report(value(buf, "revoke=") == NULL && value_is(buf, "scope=", "transaction"),
		   "decode: a key inside another field's value is not that field");

	/* 10-11: old format (1.0/1.1): version 1, fields as before */
	report(zklock_nodedata_version(format1) == 1 &&
		   value_is(format1, "instance=", "node-a") &&
		   value_is(format1, "since=", "1795000000.123456"),
		   "old format: version 1, fields read");
	report(value_is("instance=old\npid=1\ndatabase=postgres\nuser=postgres\n"
					"application=\nscope=explicit\nimplicit=false\n"
					"since=1700000000.000000\nexpires=1700000060\nquery=LOCK",
					"expires=", "1700000060") &&
		   value_is("instance=old\napplication=\nquery=LOCK", "application=", ""),
		   "old format: 1.0's expires= and an empty value");

	/* 12-13: unknown fields are skipped, anywhere, also a higher version */
	report(value_is("v=7\nshiny=new\ninstance=future\nsparkle=\npid=9\nquery=Q",
					"instance=", "future") &&
		   value_is("v=7\nshiny=new\ninstance=future\nsparkle=\npid=9\nquery=Q",
					"pid=", "9") &&
		   zklock_nodedata_version("v=7\nshiny=new\ninstance=future") == 7,
		   "unknown fields and a later version: known fields still read");
	report(value("v=2\ninstancex=1\nxpid=2", "instance=") == NULL &&
		   value("v=2\ninstancex=1\nxpid=2", "pid=") == NULL,
		   "a field is found by its whole key only");

	/* 14: other clients' data: no field, no error */
	report(value("", "instance=") == NULL &&
		   value("\x01\x02binary", "pid=") == NULL &&
		   zklock_nodedata_version("") == 1 &&
		   zklock_nodedata_version("v=x") == 0,
		   "foreign data: no field; an unreadable version is not 2");

	/* 15-17: over-long: cut at the bound, query last, length needed returned */
	memset(big, 'q', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	f = holder;
	f.query = big;
	n = zklock_nodedata_encode(buf, sizeof(buf), &f);
	report(strlen(buf) == ZKLOCK_MAX_DATA_LEN && n > ZKLOCK_MAX_DATA_LEN,
		   "over-long: cut to ZKLOCK_MAX_DATA_LEN, the whole length returned");
	report(value_is(buf, "since=", "1795000000.123456") &&
		   value(buf, "query=") != NULL &&
		   strlen(value(buf, "query=")) == ZKLOCK_MAX_DATA_LEN - (strlen(buf) - strlen(value(buf, "query="))),
		   "over-long: every field intact, the query cut");
	n = zklock_nodedata_encode(all, sizeof(all), &f);
	report(n == strlen(all) && n == 4 + strlen(format1) - strlen("SELECT zk_lock_acquire('a/b')") +
		   sizeof(big) - 1,
		   "encode: a big enough buffer holds all");

	/* 18: since= as describe_holder writes it */
	{
		char		e[32];
		char		z[32];

		zklock_nodedata_epoch(e, sizeof(e), INT64CONST(1795000000123456));
		zklock_nodedata_epoch(z, sizeof(z), 42);
		report(strcmp(e, "1795000000.123456") == 0 && strcmp(z, "0.000042") == 0,
			   "epoch: seconds and six digits of micros");
	}

	/* a tiny buffer */
	n = zklock_nodedata_encode(buf, 3, &holder);
	report(strcmp(buf, "v=") == 0 && n > 3, "encode: a 3-byte buffer holds \"v=\"");

	/* 19-21: listing rows: escape and unescape */
	n = zklock_nodedata_escape(esc, "a\\b\nc\td", 7);
	report(n == strlen(esc) && strcmp(esc, "a\\\\b\\nc\\td") == 0 &&
		   strpbrk(esc, "\n\t") == NULL,
		   "escape: backslash, line break, tab");
	report(strcmp(zklock_nodedata_unescape(esc), "a\\b\nc\td") == 0,
		   "unescape: the round trip");
	n = zklock_nodedata_escape(esc, "x\0y\rz", 5);
	report(n == 5 && strcmp(esc, "x y z") == 0 &&
		   strcmp(zklock_nodedata_unescape(esc), "x y z") == 0,
		   "escape: NUL and carriage return become spaces");

	/* 22: a whole node's data through a listing row */
	zklock_nodedata_encode(buf, sizeof(buf), &holder);
	{
		char		row[2 * (ZKLOCK_MAX_DATA_LEN + 1) + 1];

		zklock_nodedata_escape(row, buf, strlen(buf));
		report(strchr(row, '\n') == NULL &&
			   strcmp(zklock_nodedata_unescape(row), buf) == 0,
			   "listing row: node data round trips, on one line");
	}
	/* 23: a trailing lone backslash is kept */
	strcpy(esc, "end\\");
	report(strcmp(zklock_nodedata_unescape(esc), "end\\") == 0,
		   "unescape: a trailing backslash stays");
}

/* 63 characters of "é" (2 bytes each in UTF-8): a long non-ASCII name */
static void
long_name(char *buf, const char *prefix)
{
	strcpy(buf, prefix);
	for (int i = (int) strlen(prefix); i < 63; i++)
		strcat(buf, "\xc3\xa9");
}

/*
 * zklock_nodedata_encode_fit: only the query is cut, on a character
 * boundary; data whose other fields do not fit is not made (issue 20,
 * finding 2: ttl= was cut to "ttl=3")
 */
static void
test_fit(void)
{
	char		buf[ZKLOCK_MAX_DATA_LEN + 1];
	char		plain[ZKLOCK_MAX_DATA_LEN + 1];
	char		query[3 * ZKLOCK_MAX_DATA_LEN];
	char		inst[256],
				db[256],
				user[256];
	ZkNodeData	f = holder;
	int			n;
	const char *q;
	bool		whole;

	/* data that fits: as zklock_nodedata_encode makes it */
	n = zklock_nodedata_encode_fit(buf, sizeof(buf), &f);
	zklock_nodedata_encode(plain, sizeof(plain), &f);
	report(n == (int) strlen(buf) && strcmp(buf, plain) == 0,
		   "fit: data that fits is left as it is");

	/* a long query of two-byte characters: cut whole characters only */
	strcpy(query, "SELECT '");
	while (strlen(query) < sizeof(query) - 8)
		strcat(query, "\xc3\xa9");
	strcat(query, "\n'");
	f.scope = "explicit";
	f.ttl = "31536000000";
	f.expires_at = "1826536000.123456";
	f.waiter = "0000000000000000";
	f.query = query;
	n = zklock_nodedata_encode_fit(buf, sizeof(buf), &f);
	q = value(buf, "query=");
	whole = q != NULL;
	for (const char *p = q; whole && *p; p++)
		if ((unsigned char) *p == 0xc3 && (unsigned char) p[1] != 0xa9)
			whole = false;
	report(n == (int) strlen(buf) && n <= ZKLOCK_MAX_DATA_LEN &&
		   n > ZKLOCK_MAX_DATA_LEN - 2 && whole,
		   "fit: a long query is cut to the limit, between characters");
	report(value_is(buf, "ttl=", "31536000000") &&
		   value_is(buf, "expires_at=", "1826536000.123456") &&
		   value_is(buf, "waiter=", "0000000000000000") &&
		   value_is(buf, "user=", "alice"),
		   "fit: every field before the query is whole");

	/* a line break in the cut query is a space, as ever */
	f.query = "";
	n = (int) zklock_nodedata_encode(plain, sizeof(plain), &f);
	f.query = "abc\ndefgh";
	n = zklock_nodedata_encode_fit(buf, n + 1 + 5, &f);
	report(n > 0 && value_is(buf, "query=", "abc d"),
		   "fit: a cut query stays on one line");

	/*
	 * The finding: a 63-character non-ASCII instance, database and role
	 * (126 bytes each in UTF-8) with an explicit lock's fields do not fit:
	 * refused, never "ttl=3"
	 */
	long_name(inst, "n");
	long_name(db, "d");
	long_name(user, "u");
	f.instance = inst;
	f.database = db;
	f.user = user;
	f.application = "application1";
	f.query = "SELECT 1";
	n = zklock_nodedata_encode_fit(buf, sizeof(buf), &f);
	report(n == -1 && buf[0] == '\0',
		   "fit: fields that do not fit even without the query: -1, no data");
	zklock_nodedata_encode(plain, sizeof(plain), &f);
	report(value(plain, "waiter=") == NULL,
		   "fit: (the plain cut loses waiter= there)");

	/* a session lock's data with the same names: the application is cut */
	f.scope = "session";
	f.ttl = f.expires_at = f.waiter = NULL;
	f.application = "application-name-of-some-length-to-be-cut-in-the-data";
	n = zklock_nodedata_encode_fit(buf, sizeof(buf), &f);
	q = value(buf, "application=");
	report(n > 0 && n <= ZKLOCK_MAX_DATA_LEN && value_is(buf, "query=", "") &&
		   q != NULL && strlen(q) < strlen(f.application) &&
		   strncmp(q, f.application, strlen(q)) == 0 &&
		   value_is(buf, "user=", user) && value_is(buf, "scope=", "session"),
		   "fit: without the query, the application name is cut, the rest whole");

	/* exactly at the limit with no free text: made; one byte less: not */
	f = holder;
	f.query = "";
	f.application = "";
	n = (int) zklock_nodedata_encode(plain, sizeof(plain), &f);
	f.query = "xyz";
	f.application = "app";
	report(zklock_nodedata_encode_fit(buf, n + 1, &f) == n &&
		   value_is(buf, "query=", "") && value_is(buf, "application=", "") &&
		   zklock_nodedata_encode_fit(buf, n, &f) == -1,
		   "fit: the fields alone at the limit fit with no free text");
}

/* zklock_shown_unescape: shown text back to UTF-8, a round trip */
static void
test_shown(void)
{
	char		s[64];

	strcpy(s, "jp/\\u3042 \\U0001f600 \\u00e9x");
	report(strcmp(zklock_shown_unescape(s),
				  "jp/\xe3\x81\x82 \xf0\x9f\x98\x80 \xc3\xa9x") == 0,
		   "shown: \\u and \\U escapes are their characters in UTF-8");
	strcpy(s, "a\\\\u3042 b\\\\\\u3042");
	report(strcmp(zklock_shown_unescape(s), "a\\u3042 b\\\xe3\x81\x82") == 0,
		   "shown: an escaped backslash is one, and no escape after it");
	strcpy(s, "\\uZZZZ \\ud800 \\u12 \\x end\\");
	report(strcmp(zklock_shown_unescape(s), "\\uZZZZ \\ud800 \\u12 \\x end\\") == 0,
		   "shown: what is not an escape stays as it is");
}

/* zklock_nodedata_set: one field changed in place, the rest as it was */
static void
test_set(void)
{
	char		buf[ZKLOCK_MAX_DATA_LEN + 1];
	char		small[40];
	size_t		n;
	static const char *const explicit_waiting =
	"v=2\ninstance=node-a\nscope=explicit\nttl=60000\n"
	"expires_at=1795000060.123456\nwaiter=00000000000000ab\nquery=SELECT 1";

	/* a value changed in the middle; every other byte the same */
	n = zklock_nodedata_set(buf, sizeof(buf), format1, "scope=", "session");
	report(n == strlen(buf) &&
		   strcmp(buf, "instance=node-a\npid=4242\ndatabase=postgres\nuser=alice\n"
				  "application=psql\nvxid=3/17\nscope=session\nimplicit=false\n"
				  "since=1795000000.123456\nquery=SELECT zk_lock_acquire('a/b')") == 0,
		   "set: scope= rewritten in place, the rest byte for byte");

	/* a line removed (the waiter= of a granted explicit lock) */
	zklock_nodedata_set(buf, sizeof(buf), explicit_waiting, "waiter=", NULL);
	report(strcmp(buf, "v=2\ninstance=node-a\nscope=explicit\nttl=60000\n"
				  "expires_at=1795000060.123456\nquery=SELECT 1") == 0,
		   "set: a field removed with its line");

	/* an absent field is not added; a key's prefix is not the key */
	zklock_nodedata_set(buf, sizeof(buf), format1, "implicit_x=", "true");
	report(strcmp(buf, format1) == 0,
		   "set: an absent field is not added");

	/* the new value is one line; the last line changes without a break */
	zklock_nodedata_set(buf, sizeof(buf), format1, "query=", "SELECT\n2");
	report(value_is(buf, "query=", "SELECT 2") &&
		   buf[strlen(buf) - 1] == '2' && value_is(buf, "since=", "1795000000.123456"),
		   "set: a line break in the value becomes a space; the last line stays last");

	/* too long for the buffer: cut, with the whole length returned */
	n = zklock_nodedata_set(small, sizeof(small), format1, "scope=", "session");
	report(n == strlen(format1) - strlen("transaction") + strlen("session") &&
		   strlen(small) == sizeof(small) - 1 &&
		   strncmp(small, format1, sizeof(small) - 1) == 0,
		   "set: cut to the buffer, the length needed returned");
}

/*
 * zklock_grant_rule_sorted against zklock_grant_rule: for every mix of
 * modes of up to 8 nodes (2^n), each node's verdict and blocker agree.
 */
static void
test_rule_sorted(void)
{
	for (int n = 0; n <= 8; n += 2)
	{
		bool		ok = true;

		for (int mask = 0; mask < (1 << n); mask++)
		{
			ZkGrantNode nodes[8];
			char		names[8][64];
			const char *children[8];

			for (int i = 0; i < n; i++)
			{
				nodes[i].mode = (mask >> i) & 1 ? ZKLOCK_SHARED : ZKLOCK_EXCLUSIVE;
				nodes[i].seq = 10 * i + 3;
				snprintf(names[i], sizeof(names[i]), "zk1.1.1-LOCK-%s-%010d",
						 nodes[i].mode == ZKLOCK_SHARED ? "SHARED" : "EXCLUSIVE",
						 (int) nodes[i].seq);
				/* listed in another order than the sequence */
				children[(i * 5) % n] = names[i];
			}
			zklock_grant_rule_sorted(nodes, n);
			for (int i = 0; i < n; i++)
			{
				int			watch,
							nb;
				ZkGrantVerdict v = zklock_grant_rule(children, n, nodes[i].seq,
													 nodes[i].mode, &watch, &nb);

				if ((v == ZKLOCK_VERDICT_GRANTED) != (nodes[i].blocker < 0) ||
					(nodes[i].blocker >= 0 &&
					 strcmp(children[watch], names[nodes[i].blocker]) != 0))
				{
					printf("#   mask %x node %d: rule %d watch %d, sorted blocker %d\n",
						   mask, i, (int) v, watch, nodes[i].blocker);
					ok = false;
				}
			}
		}
		{
			char		title[100];

			snprintf(title, sizeof(title),
					 "one-pass rule agrees with zklock_grant_rule, every mix of %d nodes", n);
			report(ok, title);
		}
	}
}

/*
 * Equal sequence numbers (another client's nodes made without SEQUENTIAL):
 * they never block each other in zklock_grant_rule, which counts only
 * lower numbers; nor in the one-pass rule.  Pairs of equal numbers, every
 * mix of modes of 6 nodes: the same verdict, and a blocker of the number
 * zklock_grant_rule would watch (which of two equal ones is arbitrary).
 */
static void
test_rule_sorted_ties(void)
{
	bool		ok = true;
	int			n = 6;

	for (int mask = 0; mask < (1 << n); mask++)
	{
		ZkGrantNode nodes[6];
		char		names[6][64];
		const char *children[6];

		for (int i = 0; i < n; i++)
		{
			nodes[i].mode = (mask >> i) & 1 ? ZKLOCK_SHARED : ZKLOCK_EXCLUSIVE;
			nodes[i].seq = 10 * (i / 2) + 3;
			snprintf(names[i], sizeof(names[i]), "%s%010d",
					 nodes[i].mode == ZKLOCK_SHARED ? "read-" : "write-",
					 (int) nodes[i].seq);
			children[i] = names[i];
		}
		zklock_grant_rule_sorted(nodes, n);
		for (int i = 0; i < n; i++)
		{
			int			watch,
						nb;
			ZkGrantVerdict v = zklock_grant_rule(children, n, nodes[i].seq,
												 nodes[i].mode, &watch, &nb);

			if ((v == ZKLOCK_VERDICT_GRANTED) != (nodes[i].blocker < 0) ||
				(nodes[i].blocker >= 0 &&
				 nodes[nodes[i].blocker].seq != nodes[watch].seq))
			{
				printf("#   mask %x node %d: rule %d watch %d, sorted blocker %d\n",
					   mask, i, (int) v, watch, nodes[i].blocker);
				ok = false;
			}
		}
	}
	report(ok, "one-pass rule: equal sequence numbers never block each other");
}

/* zklock_nodedata_add and max_holders= (1.4): before the query, once */
static void
test_add(void)
{
	char		buf[ZKLOCK_MAX_DATA_LEN + 1];
	size_t		n;
	ZkNodeData	f = {0};

	n = zklock_nodedata_add(buf, sizeof(buf), "v=2\nscope=session\nquery=SELECT 1",
							"max_holders=", "3");
	report(n == strlen(buf) &&
		   strcmp(buf, "v=2\nscope=session\nmax_holders=3\nquery=SELECT 1") == 0,
		   "add: a field goes before the query, which stays last");
	zklock_nodedata_add(buf, sizeof(buf), "v=2\nscope=session", "max_holders=", "7");
	report(strcmp(buf, "v=2\nscope=session\nmax_holders=7") == 0,
		   "add: without a query, at the end");
	zklock_nodedata_add(buf, sizeof(buf), "v=2\nmax_holders=5\nquery=x", "max_holders=", "7");
	report(strcmp(buf, "v=2\nmax_holders=5\nquery=x") == 0,
		   "add: a field already there is left as it is");
	f.scope = "transaction";
	f.max_holders = "1000";
	f.query = "Q";
	zklock_nodedata_encode(buf, sizeof(buf), &f);
	report(strcmp(buf, "v=2\nscope=transaction\nmax_holders=1000\nquery=Q") == 0 &&
		   value_is(buf, "max_holders=", "1000"),
		   "encode: max_holders= before the query");
}

int
main(void)
{
	printf("1..%d\n", NCASES);
	test_codec();
	test_fit();
	test_shown();
	test_set();
	test_rule_sorted();
	test_rule_sorted_ties();
	test_add();
	if (tests != NCASES)
	{
		printf("# ran %d cases, planned %d\n", tests, NCASES);
		return 1;
	}
	return failures > 0 ? 1 : 0;
}
