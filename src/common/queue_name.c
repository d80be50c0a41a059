/*-------------------------------------------------------------------------
 *
 * queue_name.c
 *		A queue entry's name and the order in which entries are taken
 *		(issue 31), as pure functions.
 *
 * An entry is entries/entry-PPP-<seq>: PPP the priority (three digits,
 * Kazoo's), <seq> what ZooKeeper appends to a sequential create, the
 * parent's cversion printed with Java's "%010d".  The cversion is a
 * signed 32-bit int that grows by one with every child *created* under
 * `entries` (PrepRequestProcessor.pRequest2TxnCreate; a delete changes
 * only the parent's pzxid, so it does not count).  After 2^31 puts into
 * one queue it is negative ("-2147483648", "-000000001"), and after 2^32
 * it is back where it began.  So the number is read as a signed int32,
 * and two entries of one priority are ordered by serial-number
 * arithmetic (RFC 1982): a is before b when (int32) (b - a) > 0.  That is
 * arrival order as long as the live entries of a queue were made within
 * fewer than 2^31 puts of each other; beyond that no order can be told
 * from the names (two exactly 2^31 apart: the lower signed number first,
 * so that the comparator stays antisymmetric).
 *
 * Kazoo sorts the names as strings (sorted(children)): the same order
 * while the numbers are non-negative, priority first as here (its three
 * digits); across the wrap it takes negative numbers first ('-' sorts
 * before digits), and among them the wrong way round.
 *
 * No allocation, no error reporting, no shared state: this file links
 * into the standalone unit test test/unit/test_queue_name.c.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queue_common.h"
#include "queue_name.h"
#include "zklock.h"

/* digits as ZooKeeper prints a sequence: at most 10, an int32 */
static bool
parse_seq(const char *p, int32 *seq)
{
	bool		neg = *p == '-';
	int64		v = 0;
	int			ndigits = 0;

	if (neg)
		p++;
	for (; *p >= '0' && *p <= '9'; p++)
	{
		if (++ndigits > 10)
			return false;
		v = v * 10 + (*p - '0');
	}
	if (*p != '\0' || ndigits == 0)
		return false;
	if (neg)
		v = -v;
	if (v < PG_INT32_MIN || v > PG_INT32_MAX)
		return false;
	*seq = (int32) v;
	return true;
}

/*
 * Is name an entry's (entry-<digits>-<seq>, <seq> optionally negative)?
 * True with its priority and sequence number.
 */
bool
zklock_queue_parse_entry(const char *name, int *priority, int32 *seq)
{
	size_t		plen = strlen(ZKLOCK_QUEUE_ENTRY);
	const char *p = name + plen;
	int			prio = 0;
	int			ndigits = 0;

	if (strncmp(name, ZKLOCK_QUEUE_ENTRY, plen) != 0 ||
		strlen(name) > ZKLOCK_MAX_NODE_NAME_LEN)
		return false;
	for (; *p >= '0' && *p <= '9'; p++)
	{
		if (++ndigits > 9)
			return false;
		prio = prio * 10 + (*p - '0');
	}
	if (ndigits == 0 || *p++ != '-' || !parse_seq(p, seq))
		return false;
	*priority = prio;
	return true;
}

/*
 * The order of two entries' names: priority, then sequence number in
 * serial-number arithmetic (see the top), then the names themselves (two
 * spellings of one number: no order, but a stable one).  Names that are
 * not entries' come last, among themselves as strings.
 */
int
zklock_queue_entry_cmp(const char *a, const char *b)
{
	int			pa,
				pb;
	int32		sa,
				sb;
	bool		ea = zklock_queue_parse_entry(a, &pa, &sa);
	bool		eb = zklock_queue_parse_entry(b, &pb, &sb);
	int32		diff;

	if (ea != eb)
		return ea ? -1 : 1;
	if (!ea)
		return strcmp(a, b);
	if (pa != pb)
		return pa < pb ? -1 : 1;
	/* b - a modulo 2^32, as signed: positive when a came first */
	diff = (int32) ((uint32) sb - (uint32) sa);
	if (diff == PG_INT32_MIN)
	{
		/*
		 * Exactly 2^31 apart: b - a and a - b are both INT32_MIN, and
		 * serial-number arithmetic has no order (RFC 1982); without this
		 * each would be "after" the other, which qsort must not be told.
		 * Any antisymmetric answer will do: the lower signed number first.
		 */
		return sa < sb ? -1 : 1;
	}
	if (diff != 0)
		return diff > 0 ? -1 : 1;
	return strcmp(a, b);
}
