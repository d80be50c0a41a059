/*-------------------------------------------------------------------------
 *
 * test_queue_name.c
 *		Table-driven test of queue entry names and of the order in which
 *		entries are taken (src/common/queue_name.c), without ZooKeeper or
 *		a server: sequence numbers past 2^31 (ZooKeeper prints the parent's
 *		signed cversion with "%010d").  TAP; exit status 1 when a case
 *		fails.  Built and run by `make zklock-unit`.
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queue_name.h"

/* libc's printf: this binary links queue_name.c only, not libpgport */
#undef printf
#undef snprintf
#undef qsort

typedef struct NameCase
{
	const char *name;
	bool		ok;
	int			priority;
	int32		seq;
} NameCase;

static const NameCase name_cases[] = {
	{"entry-100-0000000000", true, 100, 0},
	{"entry-100-0000000007", true, 100, 7},
	{"entry-007-2147483647", true, 7, PG_INT32_MAX},
	{"entry-100--2147483648", true, 100, PG_INT32_MIN},
	{"entry-100--000000001", true, 100, -1},
	{"entry-999--000000002", true, 999, -2},
	{"entry-100-", false},
	{"entry-100--", false},
	{"entry-100---000000001", false},
	{"entry--0000000001", false},
	{"entry-100-2147483648", false},	/* beyond an int32 */
	{"entry-100--2147483649", false},
	{"entry-100-00000000001", false},	/* 11 digits */
	{"entry-100-0000000001x", false},
	{"lock-100-0000000001", false},
};

typedef struct OrderCase
{
	const char *title;
	const char *in[6];			/* NULL-terminated, in no order */
	const char *want[6];		/* in the order they are taken */
} OrderCase;

static const OrderCase order_cases[] = {
	{"before the wrap: arrival order",
		{"entry-100-0000000002", "entry-100-0000000000", "entry-100-0000000001", NULL},
	{"entry-100-0000000000", "entry-100-0000000001", "entry-100-0000000002", NULL}},
	{"across 2^31: 2147483647 before -2147483648",
		{"entry-100--2147483648", "entry-100-2147483647", "entry-100--2147483647", NULL},
	{"entry-100-2147483647", "entry-100--2147483648", "entry-100--2147483647", NULL}},
	{"across 2^32: -1 before 0",
		{"entry-100-0000000001", "entry-100-0000000000", "entry-100--000000001", "entry-100--000000002", NULL},
	{"entry-100--000000002", "entry-100--000000001", "entry-100-0000000000", "entry-100-0000000001", NULL}},
	{"priority first, wrapped or not",
		{"entry-100--2147483648", "entry-050-2147483647", "entry-050--2147483648", "entry-007-0000000009", NULL},
	{"entry-007-0000000009", "entry-050-2147483647", "entry-050--2147483648", "entry-100--2147483648", NULL}},
	/*
	 * exactly 2^31 apart (b - a = INT32_MIN both ways): no arrival order,
	 * but an antisymmetric one (review: both said "after", which sorting
	 * must never be told); the lower signed number first
	 */
	{"2^31 apart: an order all the same, either way round",
		{"entry-100-0000000000", "entry-100--2147483648", NULL},
	{"entry-100--2147483648", "entry-100-0000000000", NULL}},
	{"2^31 apart, the other pair",
		{"entry-100-2147483647", "entry-100--000000001", NULL},
	{"entry-100--000000001", "entry-100-2147483647", NULL}},
};

static int	test_no = 0;
static int	failures = 0;

static void
report(bool ok, const char *name)
{
	test_no++;
	if (!ok)
		failures++;
	printf("%s %d - %s\n", ok ? "ok" : "not ok", test_no, name);
}

static void
run_name_case(const NameCase *c)
{
	int			priority = -1;
	int32		seq = 0;
	bool		ok = zklock_queue_parse_entry(c->name, &priority, &seq);
	char		title[200];

	snprintf(title, sizeof(title), "entry name \"%s\": %s", c->name,
			 c->ok ? "an entry" : "not an entry");
	report(ok == c->ok && (!ok || (priority == c->priority && seq == c->seq)),
		   title);
	if (ok != c->ok || (ok && (priority != c->priority || seq != c->seq)))
		printf("#   got %s, priority %d, seq %d\n", ok ? "entry" : "none",
			   priority, seq);
}

static int
cmp(const void *a, const void *b)
{
	return zklock_queue_entry_cmp(*(const char *const *) a,
								  *(const char *const *) b);
}

static void
run_order_case(const OrderCase *c)
{
	const char *names[6];
	int			n = 0;
	bool		ok = true;

	while (c->in[n])
	{
		names[n] = c->in[n];
		n++;
	}
	qsort(names, n, sizeof(char *), cmp);
	for (int i = 0; i < n; i++)
		ok = ok && strcmp(names[i], c->want[i]) == 0;
	/* and pairwise, both ways: the comparator is antisymmetric */
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++)
		{
			int			r = zklock_queue_entry_cmp(c->want[i], c->want[j]);

			ok = ok && (i < j ? r < 0 : i > j ? r > 0 : r == 0);
		}
	report(ok, c->title);
	if (!ok)
		for (int i = 0; i < n; i++)
			printf("#   %d: got %s, want %s\n", i, names[i], c->want[i]);
}

/*
 * Every pair of numbers at the edges (and 2^31 apart), as ZooKeeper
 * prints them: cmp(a, b) is -cmp(b, a) and 0 only for a name itself, so
 * that qsort is never told two answers (review)
 */
static void
run_antisymmetry(void)
{
	static const int32 seqs[] = {PG_INT32_MIN, PG_INT32_MIN + 1, -1073741824,
		-2, -1, 0, 1, 2, 1073741824, PG_INT32_MAX - 1, PG_INT32_MAX};
	char		names[lengthof(seqs)][32];
	bool		ok = true;

	for (int i = 0; i < lengthof(seqs); i++)
		snprintf(names[i], sizeof(names[i]), "entry-100-%010d", seqs[i]);
	for (int i = 0; i < lengthof(seqs); i++)
		for (int j = 0; j < lengthof(seqs); j++)
		{
			int			r = zklock_queue_entry_cmp(names[i], names[j]);
			int			q = zklock_queue_entry_cmp(names[j], names[i]);

			if ((i == j) != (r == 0) || (r < 0) != (q > 0))
			{
				printf("#   %s vs %s: %d, the other way %d\n",
					   names[i], names[j], r, q);
				ok = false;
			}
		}
	report(ok, "antisymmetric for every pair of edge numbers");
}

int
main(void)
{
	printf("1..%d\n", (int) (lengthof(name_cases) + lengthof(order_cases)) + 1);
	for (int i = 0; i < lengthof(name_cases); i++)
		run_name_case(&name_cases[i]);
	for (int i = 0; i < lengthof(order_cases); i++)
		run_order_case(&order_cases[i]);
	run_antisymmetry();
	return failures > 0 ? 1 : 0;
}
