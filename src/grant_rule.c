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

bool
zklock_parse_node_name(const char *name, ZkLockMode *mode, int64 *seq)
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
			if (mode)
				*mode = node_marks[i].mode;
			if (seq)
				*seq = s;
			return true;
		}
	}
	return false;
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
