/*-------------------------------------------------------------------------
 *
 * grant_rule.c
 *		Lock node names and Hive's grant rule, as pure functions.
 *
 * The lock protocol (protocol.c) lists a resource's children after creating
 * its node and asks zklock_grant_rule whether the node is granted, and if
 * not, which node to watch.  Hive's ZooKeeper lock manager decides the same
 * way, and so, for their own nodes, do Curator's and Kazoo's read/write
 * locks:
 *
 *	- EXCLUSIVE is granted when no node has a lower sequence number, and
 *	  otherwise watches its predecessor (the nearest lower node);
 *	- SHARED is granted when no EXCLUSIVE node has a lower sequence number,
 *	  and otherwise watches the nearest lower EXCLUSIVE node.
 *
 * Every child whose name is a lock node of any client counts, with the mode
 * its name says; any other child (a resource below this one, a name without
 * a sequence number) is not a contender.
 *
 * Semaphore nodes (zklock 1.4) are EXCLUSIVE lock nodes to this rule and
 * to every other client; their own rule, zklock_semaphore_rule, is at the
 * end of this file.
 *
 * No allocation, no error reporting, no shared state: this file links into
 * the standalone unit test test/unit/test_grant_rule.c.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "grant_rule.h"
#include "zklock.h"

/*
 * Lock node names.  ZooKeeper appends a ten-digit sequence number to the
 * name a sequential create asks for; the mark right before it says the mode.
 * zklock recognises the marks of every lock client it shares an ensemble
 * with, whatever it names its own nodes, so that their nodes count as
 * contenders with their modes:
 */
typedef struct NodeMark
{
	const char *mark;
	ZkLockMode	mode;
} NodeMark;

static const NodeMark node_marks[] = {
	{"LOCK-EXCLUSIVE-", ZKLOCK_EXCLUSIVE},	/* Hive, and zklock by default */
	{"LOCK-SHARED-", ZKLOCK_SHARED},
	{"__WRIT__", ZKLOCK_EXCLUSIVE}, /* Curator InterProcessReadWriteLock */
	{"__READ__", ZKLOCK_SHARED},
	{"__rlock__", ZKLOCK_SHARED},	/* Kazoo ReadLock */
	{"__lock__", ZKLOCK_EXCLUSIVE}, /* Kazoo Lock and WriteLock */
	{"lock-", ZKLOCK_EXCLUSIVE},	/* Curator InterProcessMutex */
	{"write-", ZKLOCK_EXCLUSIVE},	/* ZooKeeper's shared-lock recipe */
	{"read-", ZKLOCK_SHARED},
};

#define SEQ_DIGITS		10

/*
 * The sequence number of a lock node's name and where its mark begins:
 * false when the name is not a lock node of any client.
 */
static bool
parse_mark(const char *name, const char **mark, ZkLockMode *mode, int64 *seq)
{
	size_t		len = strlen(name);
	const char *digits;
	int64		s = 0;

	if (len <= SEQ_DIGITS)
		return false;
	digits = name + len - SEQ_DIGITS;
	for (const char *p = digits; *p; p++)
	{
		if (*p < '0' || *p > '9')
			return false;
		s = s * 10 + (*p - '0');
	}

	for (int i = 0; i < lengthof(node_marks); i++)
	{
		size_t		marklen = strlen(node_marks[i].mark);

		if ((size_t) (digits - name) >= marklen &&
			strncmp(digits - marklen, node_marks[i].mark, marklen) == 0)
		{
			*mark = digits - marklen;
			*mode = node_marks[i].mode;
			*seq = s;
			return true;
		}
	}
	return false;
}

bool
zklock_parse_node_name(const char *name, ZkLockMode *mode, int64 *seq)
{
	const char *mark;
	ZkLockMode	m;
	int64		s;

	if (!parse_mark(name, &mark, &m, &s))
		return false;
	if (mode)
		*mode = m;
	if (seq)
		*seq = s;
	return true;
}

/*
 * How many of children[] are lock nodes, of any client: a resource's child
 * resources (a parent's, such as "r" under "m") and other nodes are not.
 * The lock protocol guards a lock granted as the only one by its listing.
 */
int
zklock_count_lock_nodes(const char *const *children, int nchildren)
{
	int			n = 0;

	for (int i = 0; i < nchildren; i++)
	{
		ZkLockMode	mode;
		int64		seq;

		if (zklock_parse_node_name(children[i], &mode, &seq))
			n++;
	}
	return n;
}

/*
 * Semaphore nodes (zklock 1.4).  A request for a counting semaphore of
 * limit n is named "<prefix>SEMAPHORE-<n>-" and an EXCLUSIVE mark (Hive's
 * "LOCK-EXCLUSIVE-" by default, the style's under zklock.node_naming): the
 * limit is in the name, so one listing tells every request's limit, and
 * every client that does not know semaphores (zklock 1.3, Hive, Curator)
 * sees an EXCLUSIVE lock node and never grants a lock beside its holders.
 * zklock_parse_node_name says EXCLUSIVE for it, as they do.
 *
 * True, with the limit (1 .. ZKLOCK_SEMAPHORE_NAME_MAX) and the sequence
 * number, when the name is such a node; a limit out of range, or a
 * SHARED mark, makes it an ordinary lock node.
 */
bool
zklock_parse_semaphore_node(const char *name, int *limit, int64 *seq)
{
	static const char tag[] = "SEMAPHORE-";
	const char *mark;
	const char *p;
	ZkLockMode	m;
	int64		s;
	int			n = 0;
	int			ndigits = 0;

	if (!parse_mark(name, &mark, &m, &s) || m != ZKLOCK_EXCLUSIVE)
		return false;
	/* "SEMAPHORE-<digits>-" right before the mark, read backwards */
	p = mark;
	if (p == name || p[-1] != '-')
		return false;
	p--;
	while (p > name && p[-1] >= '0' && p[-1] <= '9' && ndigits < 5)
	{
		p--;
		ndigits++;
	}
	if (ndigits == 0 || ndigits > 4 || *p == '0' ||
		(size_t) (p - name) < sizeof(tag) - 1 ||
		strncmp(p - (sizeof(tag) - 1), tag, sizeof(tag) - 1) != 0)
		return false;
	for (int i = 0; i < ndigits; i++)
		n = n * 10 + (p[i] - '0');
	if (n < 1 || n > ZKLOCK_SEMAPHORE_NAME_MAX)
		return false;
	if (limit)
		*limit = n;
	if (seq)
		*seq = s;
	return true;
}

/*
 * The conflict rule, the one definition of it: only two SHARED nodes do not
 * keep each other waiting.
 */
bool
zklock_modes_conflict(ZkLockMode held, ZkLockMode wanted)
{
	return held == ZKLOCK_EXCLUSIVE || wanted == ZKLOCK_EXCLUSIVE;
}

/*
 * Hive's rule for our node (sequence number my_seq, mode my_mode) among the
 * children of its resource, our own node included or not.
 *
 * A blocker is a lock node with a lower sequence number whose mode conflicts
 * with ours.  With none, the verdict is GRANTED.  Otherwise it is WAIT, and
 * *watch_index is the index in children[] of the nearest blocker (the one
 * with the highest sequence number below ours; the first such child if a
 * listing ever named two), and *nblockers how many blockers there are: when
 * it is 1, the watched node's deletion alone grants us, since a node created
 * later always has a higher sequence number.  On GRANTED, *watch_index is
 * -1 and *nblockers 0.
 */
ZkGrantVerdict
zklock_grant_rule(const char *const *children, int nchildren, int64 my_seq,
				  ZkLockMode my_mode, int *watch_index, int *nblockers)
{
	return zklock_grant_rule_ignoring(children, nchildren, my_seq, my_mode,
									  NULL, watch_index, nblockers);
}

/*
 * The same, but the child named ignore_node (NULL: none) is no blocker: a
 * backend holding an advisory key in one mode asks for the other, and its
 * own node must not keep it waiting (as PostgreSQL lets one backend hold an
 * advisory lock both shared and exclusive).  Matched by its whole name, not
 * its sequence number, which a node of a resource node made again could
 * have too.  Every other node counts as zklock_grant_rule counts it, also
 * one queued between the two: granting past it would break exclusion once
 * the ignored node goes.
 */
ZkGrantVerdict
zklock_grant_rule_ignoring(const char *const *children, int nchildren,
						   int64 my_seq, ZkLockMode my_mode,
						   const char *ignore_node, int *watch_index,
						   int *nblockers)
{
	int			pred = -1;
	int64		pred_seq = -1;
	int			n = 0;

	for (int i = 0; i < nchildren; i++)
	{
		ZkLockMode	m;
		int64		s;

		if (!zklock_parse_node_name(children[i], &m, &s) || s >= my_seq)
			continue;
		if (ignore_node && strcmp(children[i], ignore_node) == 0)
			continue;
		if (!zklock_modes_conflict(m, my_mode))
			continue;
		n++;
		if (s > pred_seq)
		{
			pred_seq = s;
			pred = i;
		}
	}

	*watch_index = pred;
	*nblockers = n;
	return pred < 0 ? ZKLOCK_VERDICT_GRANTED : ZKLOCK_VERDICT_WAIT;
}

/*
 * The same rule for every lock node of one resource at once, in one pass:
 * nodes[] sorted by sequence number, ascending.  Each node's blocker is the
 * one zklock_grant_rule would have it watch (the nearest lower node whose
 * mode conflicts with its own), or -1 when zklock_grant_rule would grant
 * it.  Linear, for listings and the sweep, where a resource may have many
 * thousand nodes (zklock_grant_rule for each would be quadratic).
 */
void
zklock_grant_rule_sorted(ZkGrantNode *nodes, int n)
{
	static const ZkLockMode modes[] = {ZKLOCK_EXCLUSIVE, ZKLOCK_SHARED};
	int			last[lengthof(modes)];	/* per wanted mode: the latest node
										 * that conflicts with it */

	for (int m = 0; m < lengthof(modes); m++)
		last[m] = -1;
	for (int i = 0, end; i < n; i = end)
	{
		/*
		 * Nodes of one sequence number (another client's, made without
		 * SEQUENTIAL) do not block each other, as in zklock_grant_rule,
		 * which counts only lower numbers: the group is judged first, then
		 * counted.
		 */
		for (end = i; end < n && nodes[end].seq == nodes[i].seq; end++)
		{
			for (int m = 0; m < lengthof(modes); m++)
				if (modes[m] == nodes[end].mode)
					nodes[end].blocker = last[m];
		}
		for (int j = i; j < end; j++)
			for (int m = 0; m < lengthof(modes); m++)
				if (zklock_modes_conflict(nodes[j].mode, modes[m]))
					last[m] = j;
	}
}

/*
 * The semaphore rule (zklock 1.4), for our semaphore request (sequence
 * number my_seq, limit max_holders) among the children of its resource:
 *
 *	- a lock node (any client's, not a semaphore node) with a lower sequence
 *	  number: USED_AS_LOCK, *conflict its index.  A resource is a lock or a
 *	  semaphore, never both at once.
 *	- a lower semaphore node whose limit is not ours: OTHER_LIMIT,
 *	  *conflict its index.  Everyone must agree on the limit; the request
 *	  that came later is the one that fails, so that a request of another
 *	  limit (anyone's, even a try that fails at once) never fails the
 *	  holders and waiters that were there before it.  No two limits ever
 *	  hold at once: of two requests of different limits, the later one
 *	  sees the earlier one's node, which lives as long as it holds.
 *	- fewer than max_holders semaphore nodes with a lower sequence number:
 *	  GRANTED.
 *	- otherwise WAIT: watch[0 .. *nwatch) are the indexes of the
 *	  max_holders nearest lower semaphore nodes (in no particular order),
 *	  watch_seq[] their sequence numbers; both arrays have room for
 *	  max_holders.  We become eligible only when the number of lower nodes
 *	  falls below max_holders, which takes a deletion among those nearest
 *	  (the farther ones may all go and still leave max_holders), and a node
 *	  created later has a higher sequence number: so a waiter is woken by
 *	  exactly the deletions that may grant it, and one deletion wakes at
 *	  most max_holders waiters (those that have it among their nearest).
 *
 * *nlower gets the number of lower semaphore nodes.  Nodes that are not
 * lock nodes (a resource below, other children) do not count, nor do lock
 * nodes above ours: a later lock request sees our node and fails.
 * Linear in the children, with a heap of max_holders for the nearest.
 */
ZkSemaphoreVerdict
zklock_semaphore_rule(const char *const *children, int nchildren,
					  int64 my_seq, int max_holders, int *watch,
					  int64 *watch_seq, int *nwatch, int *nlower,
					  int *conflict)
{
	int			n = 0;			/* heap size: a min-heap on watch_seq */
	int			lower = 0;
	int			other = -1;

	*conflict = -1;
	for (int i = 0; i < nchildren; i++)
	{
		ZkLockMode	m;
		int64		s;
		int			limit;

		if (zklock_parse_semaphore_node(children[i], &limit, &s))
		{
			if (s >= my_seq)
				continue;
			if (limit != max_holders && other < 0)
				other = i;
			lower++;
			if (n < max_holders)
			{
				/* push, sift up */
				int			k = n++;

				while (k > 0 && watch_seq[(k - 1) / 2] > s)
				{
					watch_seq[k] = watch_seq[(k - 1) / 2];
					watch[k] = watch[(k - 1) / 2];
					k = (k - 1) / 2;
				}
				watch_seq[k] = s;
				watch[k] = i;
			}
			else if (s > watch_seq[0])
			{
				/* replace the lowest of the nearest, sift down */
				int			k = 0;

				for (;;)
				{
					int			c = 2 * k + 1;

					if (c >= n)
						break;
					if (c + 1 < n && watch_seq[c + 1] < watch_seq[c])
						c++;
					if (watch_seq[c] >= s)
						break;
					watch_seq[k] = watch_seq[c];
					watch[k] = watch[c];
					k = c;
				}
				watch_seq[k] = s;
				watch[k] = i;
			}
		}
		else if (zklock_parse_node_name(children[i], &m, &s) && s < my_seq)
		{
			*conflict = i;
			*nwatch = 0;
			*nlower = lower;
			return ZKLOCK_SEM_USED_AS_LOCK;
		}
	}

	*nlower = lower;
	if (other >= 0)
	{
		*conflict = other;
		*nwatch = 0;
		return ZKLOCK_SEM_OTHER_LIMIT;
	}
	if (lower < max_holders)
	{
		*nwatch = 0;
		return ZKLOCK_SEM_GRANTED;
	}
	*nwatch = n;
	return ZKLOCK_SEM_WAIT;
}

/*
 * For a lock request (zklock 1.4): the index of a semaphore node with a
 * sequence number lower than ours, or -1.  The resource is then used as a
 * semaphore, and the request fails rather than wait among its holders.
 */
int
zklock_semaphore_in_way(const char *const *children, int nchildren,
						int64 my_seq)
{
	for (int i = 0; i < nchildren; i++)
	{
		int64		s;

		if (zklock_parse_semaphore_node(children[i], NULL, &s) &&
			s < my_seq)
			return i;
	}
	return -1;
}
