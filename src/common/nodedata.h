/*-------------------------------------------------------------------------
 *
 * nodedata.h
 *		The one codec of lock node data ("key=value" lines) and of the
 *		escaping of listing rows.  The format is documented in nodedata.c.
 *
 * Nothing here allocates, raises or touches shared state: src/common/nodedata.c
 * links into the standalone unit test (test/unit/test_nodedata.c) as it is
 * into the extension.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_NODEDATA_H
#define ZKLOCK_NODEDATA_H

/* The version this code writes (the "v=" line); data without one is 1 */
#define ZKLOCK_NODEDATA_VERSION		2

/*
 * The fields of a holder's description, in the order they are written.
 * NULL leaves a field out.  Values are text; a line break in one is written
 * as a space (a value is always one line).  The query comes last, and is
 * what is cut when the data would exceed the buffer.
 */
typedef struct ZkNodeData
{
	const char *instance;
	const char *pid;
	const char *database;
	const char *user;
	const char *application;
	const char *vxid;
	const char *scope;
	const char *implicit;
	const char *since;
	const char *ttl;
	const char *expires_at;
	const char *waiter;
	const char *revoke;
	const char *revoked_by;
	const char *max_holders;	/* a semaphore's limit (1.4) */
	const char *query;
} ZkNodeData;

/*
 * An election candidate's node (election.c): which instance stands, in
 * the same "key=value" lines, after "v=" and "kind=candidate" (a reader of
 * lock node data finds none of a holder's fields in it).
 */
typedef struct ZkCandidateData
{
	const char *instance_id;	/* "<system identifier>:<port>" */
	const char *node_name;		/* zklock.node_name, or host:port */
	const char *host;
	const char *pid;			/* the postmaster's */
} ZkCandidateData;

#define ZKLOCK_CANDIDATE_KIND		"candidate"

extern size_t zklock_nodedata_encode_candidate(char *buf, size_t buflen,
											   const ZkCandidateData *fields);

/* Encode: returns the length the whole data needs (as snprintf does) */
extern size_t zklock_nodedata_encode(char *buf, size_t buflen,
									 const ZkNodeData *fields);

/*
 * Encode with only the query cut to fit (on a UTF-8 character boundary):
 * the length written, or -1 when the other fields do not fit
 */
extern int	zklock_nodedata_encode_fit(char *buf, size_t buflen,
									   const ZkNodeData *fields);

/* "<seconds>.<6 digits>" of Unix epoch microseconds, as since= has it */
extern void zklock_nodedata_epoch(char *buf, size_t buflen, int64 unix_us);

/*
 * Decode: the value of a "key=" line (key includes the '='), pointing into
 * data, ending at the next line break or the end; NULL when absent.
 */
extern const char *zklock_node_field(const char *data, const char *key);
extern size_t zklock_node_field_len(const char *value);

/* Change (or, with value NULL, remove) one field in place; see nodedata.c */
extern size_t zklock_nodedata_set(char *buf, size_t buflen, const char *data,
								  const char *key, const char *value);

/*
 * Add a field that is absent, before the query (which stays last); see
 * nodedata.c
 */
extern size_t zklock_nodedata_add(char *buf, size_t buflen, const char *data,
								  const char *key, const char *value);

/* The data's format version: its "v=" line, or 1 without one */
extern int	zklock_nodedata_version(const char *data);

/*
 * Listing rows ("path \t czxid \t owner \t data"): data escaped so that it
 * holds no tab or line break.  dst needs 2 * srclen + 1 bytes; returns the
 * length written.  Unescape works in place (never longer).
 */
extern size_t zklock_nodedata_escape(char *dst, const char *src, size_t srclen);
extern char *zklock_nodedata_unescape(char *s);

/*
 * Shown text back to UTF-8: "\\" and "\uXXXX"/"\UXXXXXXXX" as the listing
 * of a database in another encoding shows them (status.c); in place
 */
extern char *zklock_shown_unescape(char *s);

#endif							/* ZKLOCK_NODEDATA_H */
