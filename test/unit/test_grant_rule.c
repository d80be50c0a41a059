/*-------------------------------------------------------------------------
 *
 * test_grant_rule.c
 *		Table-driven test of Hive's grant rule and of lock node names
 *		(src/common/grant_rule.c), without ZooKeeper or a server.
 *
 * Each case is a resource's children as ZooKeeper might list them (in no
 * particular order, zklock's own nodes among other clients' and among
 * children that are not lock nodes), our node and our mode; it expects the
 * verdict, the node to watch and how many nodes block us.  The output is
 * TAP; the exit status is 1 when a case fails.  Built and run by
 * `make zklock-unit` (test/run_tests.sh does).
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "grant_rule.h"

/* libc's printf: this binary links grant_rule.c only, not libpgport */
#undef printf
#undef snprintf

#define MAX_CHILDREN	10

/* zklock's own nodes: "zk<incarnation>.<entry>.<generation>-" and a mark */
#define ZK_X(seq)	"zk0000beef.3.1-LOCK-EXCLUSIVE-" seq
#define ZK_S(seq)	"zk0000beef.4.1-LOCK-SHARED-" seq
#define OTHER_X(seq) "zk0000cafe.7.2-LOCK-EXCLUSIVE-" seq
#define OTHER_S(seq) "zk0000cafe.8.2-LOCK-SHARED-" seq
#define HIVE_X(seq)	"LOCK-EXCLUSIVE-" seq
#define HIVE_S(seq)	"LOCK-SHARED-" seq
#define UUID		"3f2a8c1e-6b7d-4e15-9a0c-5d4e3b2a1f00"

typedef struct RuleCase
{
	const char *name;
	const char *children[MAX_CHILDREN]; /* NULL-terminated */
	const char *me;				/* our node (listed or not) */
	ZkLockMode	my_mode;
	ZkGrantVerdict verdict;
	const char *watch;			/* the child to watch, on WAIT */
	int			nblockers;
	const char *ignore;			/* a node that blocks nobody (our own node
								 * of the other mode: advisory locks), or
								 * NULL */
} RuleCase;

#define X ZKLOCK_EXCLUSIVE
#define S ZKLOCK_SHARED
#define GRANTED ZKLOCK_VERDICT_GRANTED
#define WAIT ZKLOCK_VERDICT_WAIT

static const RuleCase rule_cases[] = {
	/* the simple ones */
	{"empty listing: EXCLUSIVE granted",
	 {NULL}, ZK_X("0000000001"), X, GRANTED, NULL, 0},
	{"empty listing: SHARED granted",
	 {NULL}, ZK_S("0000000001"), S, GRANTED, NULL, 0},
	{"own EXCLUSIVE node only: granted",
	 {ZK_X("0000000000")}, ZK_X("0000000000"), X, GRANTED, NULL, 0},
	{"own SHARED node only: granted",
	 {ZK_S("0000000004")}, ZK_S("0000000004"), S, GRANTED, NULL, 0},
	{"EXCLUSIVE behind SHARED waits for it",
	 {ZK_X("0000000002"), OTHER_S("0000000001")}, ZK_X("0000000002"), X,
	 WAIT, OTHER_S("0000000001"), 1},
	{"EXCLUSIVE behind EXCLUSIVE waits for it",
	 {OTHER_X("0000000001"), ZK_X("0000000002")}, ZK_X("0000000002"), X,
	 WAIT, OTHER_X("0000000001"), 1},
	{"SHARED behind SHARED: granted",
	 {OTHER_S("0000000001"), ZK_S("0000000002")}, ZK_S("0000000002"), S,
	 GRANTED, NULL, 0},
	{"SHARED behind several SHARED: granted",
	 {HIVE_S("0000000001"), OTHER_S("0000000002"), HIVE_S("0000000003"),
	 ZK_S("0000000004")}, ZK_S("0000000004"), S, GRANTED, NULL, 0},
	{"SHARED behind EXCLUSIVE waits for it",
	 {ZK_S("0000000002"), OTHER_X("0000000001")}, ZK_S("0000000002"), S,
	 WAIT, OTHER_X("0000000001"), 1},
	{"EXCLUSIVE behind several EXCLUSIVE (listed out of order) watches the nearest",
	 {HIVE_X("0000000003"), ZK_X("0000000005"), HIVE_X("0000000001"),
	 OTHER_X("0000000004"), HIVE_X("0000000002")}, ZK_X("0000000005"), X,
	 WAIT, OTHER_X("0000000004"), 4},
	{"EXCLUSIVE behind mixed watches its predecessor, a SHARED one",
	 {HIVE_S("0000000001"), HIVE_X("0000000002"), OTHER_S("0000000003"),
	 ZK_X("0000000004")}, ZK_X("0000000004"), X,
	 WAIT, OTHER_S("0000000003"), 3},
	{"SHARED behind mixed watches the nearest lower EXCLUSIVE",
	 {HIVE_X("0000000001"), HIVE_S("0000000002"), OTHER_X("0000000003"),
	 OTHER_S("0000000004"), ZK_S("0000000005")}, ZK_S("0000000005"), S,
	 WAIT, OTHER_X("0000000003"), 2},
	{"SHARED behind SHARED behind EXCLUSIVE: one blocker, not its predecessor",
	 {ZK_S("0000000003"), OTHER_S("0000000002"), OTHER_X("0000000001")},
	 ZK_S("0000000003"), S, WAIT, OTHER_X("0000000001"), 1},
	{"higher nodes do not count: EXCLUSIVE first granted",
	 {OTHER_S("0000000009"), ZK_X("0000000007"), OTHER_X("0000000008")},
	 ZK_X("0000000007"), X, GRANTED, NULL, 0},
	{"higher nodes do not count: SHARED before an EXCLUSIVE granted",
	 {OTHER_S("0000000006"), ZK_S("0000000007"), OTHER_X("0000000008")},
	 ZK_S("0000000007"), S, GRANTED, NULL, 0},
	{"our node not listed: the rule still holds for its number",
	 {OTHER_X("0000000001")}, ZK_X("0000000002"), X,
	 WAIT, OTHER_X("0000000001"), 1},

	/* other clients' nodes */
	{"Curator write lock blocks a SHARED zklock node",
	 {"_c_" UUID "-__WRIT__0000000003", ZK_S("0000000004")},
	 ZK_S("0000000004"), S, WAIT, "_c_" UUID "-__WRIT__0000000003", 1},
	{"Curator read lock does not block SHARED",
	 {"_c_" UUID "-__READ__0000000003", ZK_S("0000000004")},
	 ZK_S("0000000004"), S, GRANTED, NULL, 0},
	{"Curator read lock blocks EXCLUSIVE",
	 {"_c_" UUID "-__READ__0000000003", ZK_X("0000000004")},
	 ZK_X("0000000004"), X, WAIT, "_c_" UUID "-__READ__0000000003", 1},
	{"Curator mutex node is EXCLUSIVE: blocks SHARED",
	 {"_c_" UUID "-lock-0000000007", ZK_S("0000000008")},
	 ZK_S("0000000008"), S, WAIT, "_c_" UUID "-lock-0000000007", 1},
	{"zklock in Curator's naming behind Curator's read and write nodes",
	 {"_c_" UUID "-__WRIT__0000000001", "_c_" UUID "-__READ__0000000002",
	 "_c_zk0000beef.3.1-__READ__0000000003"},
	 "_c_zk0000beef.3.1-__READ__0000000003", S,
	 WAIT, "_c_" UUID "-__WRIT__0000000001", 1},
	{"Kazoo lock node blocks SHARED",
	 {"__lock__0000000002", "__rlock__0000000001", ZK_S("0000000003")},
	 ZK_S("0000000003"), S, WAIT, "__lock__0000000002", 1},
	{"Kazoo read lock nodes (with Kazoo's uuid prefix) do not block SHARED",
	 {UUID "__rlock__0000000001", "__rlock__0000000002", ZK_S("0000000003")},
	 ZK_S("0000000003"), S, GRANTED, NULL, 0},
	{"Kazoo read lock blocks EXCLUSIVE",
	 {UUID "__rlock__0000000001", UUID "__lock__0000000003",
	 ZK_X("0000000002")}, ZK_X("0000000002"), X,
	 WAIT, UUID "__rlock__0000000001", 1},
	{"recipe write- blocks read-",
	 {"write-0000000001", "read-0000000002", "read-0000000003"},
	 "read-0000000003", S, WAIT, "write-0000000001", 1},
	{"recipe write- behind read- and write-",
	 {"write-0000000001", "read-0000000002", "write-0000000003"},
	 "write-0000000003", X, WAIT, "read-0000000002", 2},
	{"every style at once: EXCLUSIVE watches the nearest, counts all",
	 {HIVE_S("0000000001"), "_c_" UUID "-__WRIT__0000000002",
	 "_c_" UUID "-__READ__0000000003", "__lock__0000000004",
	 UUID "__rlock__0000000005", "_c_" UUID "-lock-0000000006",
	 "read-0000000007", "write-0000000008", ZK_X("0000000009")},
	 ZK_X("0000000009"), X, WAIT, "write-0000000008", 8},
	{"every style at once: SHARED watches the nearest EXCLUSIVE, counts those",
	 {HIVE_S("0000000001"), "_c_" UUID "-__WRIT__0000000002",
	 "_c_" UUID "-__READ__0000000003", "__lock__0000000004",
	 UUID "__rlock__0000000005", "_c_" UUID "-lock-0000000006",
	 "read-0000000007", ZK_S("0000000009"), "write-0000000008"},
	 ZK_S("0000000009"), S, WAIT, "write-0000000008", 4},

	/* children that are not lock nodes */
	{"a resource child, short and bad sequence numbers are ignored",
	 {"table1", "LOCK-EXCLUSIVE-12", "x-LOCK-SHARED-00000000a1",
	 "0000000001", ZK_X("0000000005")}, ZK_X("0000000005"), X,
	 GRANTED, NULL, 0},
	{"a non-lock child between lock nodes: the watched index is the lock node's",
	 {"table1", OTHER_X("0000000001"), "LOCK-SHARED-0000000002x",
	 ZK_X("0000000003")}, ZK_X("0000000003"), X,
	 WAIT, OTHER_X("0000000001"), 1},
	{"an unknown mark before ten digits is not a lock node",
	 {"LOCK-SOMETHING-0000000001", "lock_0000000002", ZK_S("0000000003")},
	 ZK_S("0000000003"), S, GRANTED, NULL, 0},

	/* sequence numbers past 2^31 (ZooKeeper's counter is a signed int) */
	{"EXCLUSIVE at 2147483648 blocks SHARED at 2147483649",
	 {HIVE_X("2147483648"), ZK_S("2147483649")}, ZK_S("2147483649"), S,
	 WAIT, HIVE_X("2147483648"), 1},
	{"EXCLUSIVE at 2147483648 is above SHARED at 0000000005",
	 {HIVE_X("2147483648"), ZK_S("0000000005")}, ZK_S("0000000005"), S,
	 GRANTED, NULL, 0},
	{"9999999999 behind 2147483647 and 2147483648 watches the nearest",
	 {HIVE_S("2147483647"), OTHER_X("2147483648"), ZK_X("9999999999")},
	 ZK_X("9999999999"), X, WAIT, OTHER_X("2147483648"), 2},
	{"EXCLUSIVE at 9999999999 is above SHARED at 4294967296",
	 {OTHER_X("9999999999"), ZK_S("4294967296"), HIVE_S("4294967295")},
	 ZK_S("4294967296"), S, GRANTED, NULL, 0},

	/* one node ignored: this backend's own node of the other mode */
	{"own SHARED ignored: EXCLUSIVE behind it granted",
	 {ZK_S("0000000001"), ZK_X("0000000002")},
	 ZK_X("0000000002"), X, GRANTED, NULL, 0, ZK_S("0000000001")},
	{"own EXCLUSIVE ignored: SHARED behind it granted",
	 {ZK_X("0000000001"), ZK_S("0000000002")},
	 ZK_S("0000000002"), S, GRANTED, NULL, 0, ZK_X("0000000001")},
	{"own EXCLUSIVE ignored, another's EXCLUSIVE queued between: SHARED waits for it",
	 {ZK_X("0000000001"), OTHER_X("0000000002"), ZK_S("0000000003")},
	 ZK_S("0000000003"), S, WAIT, OTHER_X("0000000002"), 1, ZK_X("0000000001")},
	{"own EXCLUSIVE ignored, another's SHARED queued between: SHARED granted",
	 {ZK_X("0000000001"), OTHER_S("0000000002"), ZK_S("0000000003")},
	 ZK_S("0000000003"), S, GRANTED, NULL, 0, ZK_X("0000000001")},
	{"own SHARED ignored, another's SHARED held: EXCLUSIVE waits for it",
	 {ZK_S("0000000001"), OTHER_S("0000000002"), ZK_X("0000000003")},
	 ZK_X("0000000003"), X, WAIT, OTHER_S("0000000002"), 1, ZK_S("0000000001")},
	{"own SHARED ignored, another's SHARED below it: EXCLUSIVE waits for that one",
	 {OTHER_S("0000000001"), ZK_S("0000000002"), ZK_X("0000000003")},
	 ZK_X("0000000003"), X, WAIT, OTHER_S("0000000001"), 1, ZK_S("0000000002")},
	{"the ignored name only: another node of its sequence number still blocks",
	 {ZK_S("0000000001"), OTHER_S("0000000001"), ZK_X("0000000002")},
	 ZK_X("0000000002"), X, WAIT, OTHER_S("0000000001"), 1, ZK_S("0000000001")},
	{"an ignored node that is not listed changes nothing",
	 {OTHER_S("0000000001"), ZK_X("0000000002")},
	 ZK_X("0000000002"), X, WAIT, OTHER_S("0000000001"), 1, ZK_S("0000000001")},
	{"ignoring a node above ours changes nothing",
	 {OTHER_X("0000000001"), ZK_S("0000000002"), ZK_X("0000000003")},
	 ZK_S("0000000002"), S, WAIT, OTHER_X("0000000001"), 1, ZK_X("0000000003")},
};

typedef struct NameCase
{
	const char *name;
	bool		is_lock;
	ZkLockMode	mode;
	int64		seq;
} NameCase;

static const NameCase name_cases[] = {
	{"LOCK-EXCLUSIVE-0000000001", true, X, 1},
	{"LOCK-SHARED-0000000002", true, S, 2},
	{"zk0000beef.3.1-LOCK-EXCLUSIVE-0000000010", true, X, 10},
	{"zx0000beef.3.1-LOCK-SHARED-0000000011", true, S, 11},
	{"_c_" UUID "-__WRIT__0000000003", true, X, 3},
	{"_c_" UUID "-__READ__0000000004", true, S, 4},
	{"_c_" UUID "-lock-0000000005", true, X, 5},
	{"__lock__0000000002", true, X, 2},
	{UUID "__lock__0000000006", true, X, 6},
	{"__rlock__0000000007", true, S, 7},
	{UUID "__rlock__0000000008", true, S, 8},
	{"write-0000000009", true, X, 9},
	{"read-0000000012", true, S, 12},
	{"LOCK-EXCLUSIVE-0000000000", true, X, 0},
	{"LOCK-SHARED-2147483647", true, S, INT64CONST(2147483647)},
	{"LOCK-EXCLUSIVE-2147483648", true, X, INT64CONST(2147483648)},
	{"LOCK-SHARED-4294967296", true, S, INT64CONST(4294967296)},
	{"LOCK-EXCLUSIVE-9999999999", true, X, INT64CONST(9999999999)},
	{"table1", false},
	{"", false},
	{"LOCK-EXCLUSIVE-12", false},
	{"LOCK-EXCLUSIVE-", false},
	{"x-LOCK-SHARED-00000000a1", false},
	{"LOCK-SHARED-0000000002x", false},
	{"0000000001", false},
	{"00000000001", false},
	{"LOCK-SHARED-00000000001", false},
	{"LOCK-SOMETHING-0000000001", false},
	{"lock_0000000002", false},
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

static const char *
verdict_name(ZkGrantVerdict v)
{
	return v == ZKLOCK_VERDICT_GRANTED ? "granted" : "wait";
}

static void
run_rule_case(const RuleCase *c)
{
	int			nchildren = 0;
	int64		my_seq;
	int			watch_index = -2;
	int			nblockers = -2;
	ZkGrantVerdict v;
	const char *watched;
	bool		ok;

	while (nchildren < MAX_CHILDREN && c->children[nchildren])
		nchildren++;
	if (!zklock_parse_node_name(c->me, NULL, &my_seq))
	{
		report(false, c->name);
		printf("#   our node \"%s\" is not a lock node\n", c->me);
		return;
	}
	if (c->ignore)
		v = zklock_grant_rule_ignoring(c->children, nchildren, my_seq,
									   c->my_mode, c->ignore, &watch_index,
									   &nblockers);
	else
		v = zklock_grant_rule(c->children, nchildren, my_seq, c->my_mode,
							  &watch_index, &nblockers);
	watched = (watch_index >= 0 && watch_index < nchildren) ?
		c->children[watch_index] : NULL;
	if (v == ZKLOCK_VERDICT_GRANTED)
		ok = (c->verdict == ZKLOCK_VERDICT_GRANTED &&
			  watch_index == -1 && nblockers == 0);
	else
		ok = (c->verdict == ZKLOCK_VERDICT_WAIT && watched != NULL &&
			  strcmp(watched, c->watch) == 0 && nblockers == c->nblockers);
	report(ok, c->name);
	if (!ok)
	{
		printf("#   expected %s, watch %s, %d blockers\n",
			   verdict_name(c->verdict), c->watch ? c->watch : "(none)",
			   c->nblockers);
		printf("#   got      %s, watch %s (index %d), %d blockers\n",
			   verdict_name(v), watched ? watched : "(none)", watch_index,
			   nblockers);
	}
}

static void
run_name_case(const NameCase *c)
{
	ZkLockMode	mode = (ZkLockMode) -1;
	int64		seq = -1;
	bool		is_lock = zklock_parse_node_name(c->name, &mode, &seq);
	bool		ok;
	char		title[200];

	if (c->is_lock)
		ok = is_lock && mode == c->mode && seq == c->seq;
	else
		ok = !is_lock && mode == (ZkLockMode) -1 && seq == -1;
	snprintf(title, sizeof(title), "node name \"%s\": %s", c->name,
			 !c->is_lock ? "not a lock node" :
			 c->mode == ZKLOCK_SHARED ? "SHARED" : "EXCLUSIVE");
	report(ok, title);
	if (!ok)
		printf("#   got %s, mode %d, seq " INT64_FORMAT "\n",
			   is_lock ? "a lock node" : "not a lock node", (int) mode, seq);
}

/*
 * Semaphores (1.4): names, and the semaphore rule.  Each case lists the
 * children, our node (a semaphore node, whose name gives our limit), the
 * verdict, the set of nodes to watch (as a space-separated list of
 * sequence numbers, in any order) and the lower semaphore count.
 */
#define SEM(n, seq)		"zk0000beef.5.1-SEMAPHORE-" #n "-LOCK-EXCLUSIVE-" seq
#define OSEM(n, seq)	"zk0000cafe.9.3-SEMAPHORE-" #n "-LOCK-EXCLUSIVE-" seq
#define CSEM(n, seq)	"_c_zk0000cafe.9.4-SEMAPHORE-" #n "-__WRIT__" seq

typedef struct SemNameCase
{
	const char *name;
	bool		is_sem;
	int			limit;
	int64		seq;
} SemNameCase;

static const SemNameCase sem_name_cases[] = {
	{SEM(3, "0000000007"), true, 3, 7},
	{SEM(1, "0000000000"), true, 1, 0},
	{SEM(1000, "0000000012"), true, 1000, 12},
	{CSEM(5, "0000000002"), true, 5, 2},
	{"zk1.2.3-SEMAPHORE-7-lock-0000000004", true, 7, 4},
	{"SEMAPHORE-2-LOCK-EXCLUSIVE-0000000001", true, 2, 1},
	{"zk1.2.3-SEMAPHORE-0-LOCK-EXCLUSIVE-0000000001", false},
	{"zk1.2.3-SEMAPHORE-1001-LOCK-EXCLUSIVE-0000000001", false},
	{"zk1.2.3-SEMAPHORE-03-LOCK-EXCLUSIVE-0000000001", false},
	{"zk1.2.3-SEMAPHORE-99999-LOCK-EXCLUSIVE-0000000001", false},
	{"zk1.2.3-SEMAPHORE--LOCK-EXCLUSIVE-0000000001", false},
	{"zk1.2.3-SEMAPHORE-3-LOCK-SHARED-0000000001", false},
	{"zk1.2.3-SEMAPHOR-3-LOCK-EXCLUSIVE-0000000001", false},
	{"zk1.2.3-SEMAPHORE-3LOCK-EXCLUSIVE-0000000001", false},
	{"zk1.2.3-SEMAPHORE-3-LOCK-EXCLUSIVE-000000001", false},
	{ZK_X("0000000001"), false},
	{"table1", false},
};

typedef struct SemRuleCase
{
	const char *name;
	const char *children[MAX_CHILDREN];
	const char *me;
	ZkSemaphoreVerdict verdict;
	const char *watch;			/* sequence numbers, e.g. "3 4 5" */
	int			nlower;
	const char *conflict;		/* the child named in an error */
} SemRuleCase;

static const SemRuleCase sem_rule_cases[] = {
	{"alone: granted",
	 {SEM(3, "0000000001")}, SEM(3, "0000000001"), ZKLOCK_SEM_GRANTED, "", 0, NULL},
	{"third of 3: granted",
	 {OSEM(3, "0000000001"), OSEM(3, "0000000002"), SEM(3, "0000000003")},
	 SEM(3, "0000000003"), ZKLOCK_SEM_GRANTED, "", 2, NULL},
	{"fourth of 3: waits on the 3 nearest",
	 {OSEM(3, "0000000001"), OSEM(3, "0000000002"), OSEM(3, "0000000003"),
	 SEM(3, "0000000004")}, SEM(3, "0000000004"), ZKLOCK_SEM_WAIT, "1 2 3", 3, NULL},
	{"sixth of 2 (listed out of order): waits on the 2 nearest, 5 lower",
	 {OSEM(2, "0000000005"), OSEM(2, "0000000001"), SEM(2, "0000000006"),
	 OSEM(2, "0000000003"), OSEM(2, "0000000004"), OSEM(2, "0000000002")},
	 SEM(2, "0000000006"), ZKLOCK_SEM_WAIT, "4 5", 5, NULL},
	{"a gap in the numbers (a withdrawn waiter): counted by nodes, not numbers",
	 {OSEM(3, "0000000001"), OSEM(3, "0000000009"), SEM(3, "0000000010")},
	 SEM(3, "0000000010"), ZKLOCK_SEM_GRANTED, "", 2, NULL},
	{"higher nodes do not count",
	 {SEM(1, "0000000002"), OSEM(1, "0000000003"), OSEM(1, "0000000004")},
	 SEM(1, "0000000002"), ZKLOCK_SEM_GRANTED, "", 0, NULL},
	{"mutex (1) behind one: waits on it",
	 {OSEM(1, "0000000002"), SEM(1, "0000000003"), OSEM(1, "0000000004")},
	 SEM(1, "0000000003"), ZKLOCK_SEM_WAIT, "2", 1, NULL},
	{"other clients' nodes and other children do not count",
	 {"table1", "LOCK-EXCLUSIVE-12", OSEM(2, "0000000001"), SEM(2, "0000000003")},
	 SEM(2, "0000000003"), ZKLOCK_SEM_GRANTED, "", 1, NULL},
	{"Curator-named semaphore nodes count",
	 {CSEM(2, "0000000001"), CSEM(2, "0000000002"), SEM(2, "0000000003")},
	 SEM(2, "0000000003"), ZKLOCK_SEM_WAIT, "1 2", 2, NULL},
	{"a lower lock node: used as a lock",
	 {OSEM(3, "0000000001"), OTHER_X("0000000002"), SEM(3, "0000000003")},
	 SEM(3, "0000000003"), ZKLOCK_SEM_USED_AS_LOCK, NULL, -1, OTHER_X("0000000002")},
	{"a lower SHARED node (a parent's lock): used as a lock",
	 {HIVE_S("0000000001"), SEM(3, "0000000003")},
	 SEM(3, "0000000003"), ZKLOCK_SEM_USED_AS_LOCK, NULL, -1, HIVE_S("0000000001")},
	{"a higher lock node: not our concern (it fails itself)",
	 {SEM(3, "0000000003"), OTHER_X("0000000004")},
	 SEM(3, "0000000003"), ZKLOCK_SEM_GRANTED, "", 0, NULL},
	{"a lower node of another limit: mismatch",
	 {OSEM(4, "0000000001"), SEM(3, "0000000003")},
	 SEM(3, "0000000003"), ZKLOCK_SEM_OTHER_LIMIT, NULL, -1, OSEM(4, "0000000001")},
	{"a higher node of another limit: not our concern (it fails itself)",
	 {SEM(3, "0000000003"), OSEM(2, "0000000005")},
	 SEM(3, "0000000003"), ZKLOCK_SEM_GRANTED, "", 0, NULL},
};

static void
run_sem_name_case(const SemNameCase *c)
{
	int			limit = -1;
	int64		seq = -1;
	bool		is_sem = zklock_parse_semaphore_node(c->name, &limit, &seq);
	ZkLockMode	mode = (ZkLockMode) -1;
	bool		ok;
	char		title[200];

	if (c->is_sem)
		ok = is_sem && limit == c->limit && seq == c->seq &&
			zklock_parse_node_name(c->name, &mode, NULL) &&
			mode == ZKLOCK_EXCLUSIVE;
	else
		ok = !is_sem && limit == -1 && seq == -1;
	snprintf(title, sizeof(title), "semaphore name \"%s\": %s", c->name,
			 c->is_sem ? "a semaphore node, EXCLUSIVE to lock readers" :
			 "not a semaphore node");
	report(ok, title);
	if (!ok)
		printf("#   got %s, limit %d, seq " INT64_FORMAT "\n",
			   is_sem ? "a semaphore node" : "not one", limit, seq);
}

static void
run_sem_rule_case(const SemRuleCase *c)
{
	int			nchildren = 0;
	int			my_limit;
	int64		my_seq;
	int			watch[ZKLOCK_SEMAPHORE_NAME_MAX];
	int64		watch_seq[ZKLOCK_SEMAPHORE_NAME_MAX];
	int			nwatch = -2;
	int			nlower = -2;
	int			conflict = -2;
	ZkSemaphoreVerdict v;
	bool		ok;
	char		got[200] = "";

	while (nchildren < MAX_CHILDREN && c->children[nchildren])
		nchildren++;
	if (!zklock_parse_semaphore_node(c->me, &my_limit, &my_seq))
	{
		report(false, c->name);
		return;
	}
	v = zklock_semaphore_rule(c->children, nchildren, my_seq, my_limit,
							  watch, watch_seq, &nwatch, &nlower, &conflict);
	ok = (v == c->verdict);
	if (c->conflict)
		ok = ok && conflict >= 0 && strcmp(c->children[conflict], c->conflict) == 0;
	else
	{
		/* the watched set, sorted, as "a b c" */
		int64		sorted[ZKLOCK_SEMAPHORE_NAME_MAX];

		for (int i = 0; i < nwatch; i++)
		{
			int64		s;
			int			k = i;

			if (!zklock_parse_node_name(c->children[watch[i]], NULL, &s) ||
				s != watch_seq[i])
				ok = false;
			while (k > 0 && sorted[k - 1] > s)
			{
				sorted[k] = sorted[k - 1];
				k--;
			}
			sorted[k] = s;
		}
		for (int i = 0; i < nwatch; i++)
			snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%d",
					 i ? " " : "", (int) sorted[i]);
		ok = ok && strcmp(got, c->watch) == 0 && nlower == c->nlower &&
			conflict == -1;
	}
	report(ok, c->name);
	if (!ok)
		printf("#   got verdict %d, watch \"%s\", %d lower, conflict %d\n",
			   (int) v, got, nlower, conflict);
}

/* A big semaphore: the heap keeps exactly the nearest, whatever the order */
static void
run_sem_many(void)
{
	static char names[600][64];
	const char *children[600];
	int			watch[ZKLOCK_SEMAPHORE_NAME_MAX];
	int64		watch_seq[ZKLOCK_SEMAPHORE_NAME_MAX];
	int			nwatch;
	int			nlower;
	int			conflict;
	ZkSemaphoreVerdict v;
	bool		ok;
	bool		seen[600] = {false};

	/* 599 lower nodes in a scrambled order, ours (599) last; limit 100 */
	for (int i = 0; i < 599; i++)
	{
		int			seq = (i * 7) % 599;	/* 7 is prime to 599 */

		snprintf(names[i], sizeof(names[i]),
				 "zk1.2.3-SEMAPHORE-100-LOCK-EXCLUSIVE-%010d", seq);
		children[i] = names[i];
	}
	snprintf(names[599], sizeof(names[599]),
			 "zk1.2.4-SEMAPHORE-100-LOCK-EXCLUSIVE-%010d", 599);
	children[599] = names[599];
	v = zklock_semaphore_rule(children, 600, 599, 100, watch, watch_seq,
							  &nwatch, &nlower, &conflict);
	ok = v == ZKLOCK_SEM_WAIT && nwatch == 100 && nlower == 599;
	for (int i = 0; ok && i < nwatch; i++)
	{
		if (watch_seq[i] < 499 || watch_seq[i] > 598 || seen[watch_seq[i]])
			ok = false;
		else
			seen[watch_seq[i]] = true;
	}
	report(ok, "semaphore of 100 behind 599 (scrambled): watches exactly the 100 nearest");
	v = zklock_semaphore_rule(children, 600, 599, 600, watch, watch_seq,
							  &nwatch, &nlower, &conflict);
	report(v == ZKLOCK_SEM_OTHER_LIMIT, "a limit of 600 among nodes of 100: mismatch");
}

static void
run_sem_in_way(void)
{
	const char *children[] = {OSEM(2, "0000000002"), ZK_X("0000000003"),
	ZK_X("0000000001")};

	report(zklock_semaphore_in_way(children, 3, 3) == 0,
		   "a lock request behind a semaphore node: in the way");
	report(zklock_semaphore_in_way(children, 3, 1) == -1,
		   "a lock request below a semaphore node: not in the way");
}

static void
run_count_lock_nodes(void)
{
	const char *children[] = {ZK_X("0000000001"), "r", "LOCK-SHARED-12",
		"_c_" UUID "-lock-0000000007", "__lock__99", "__rlock__0000000002"};

	report(zklock_count_lock_nodes(children, 6) == 3,
		   "lock nodes among a child resource and near misses: 3");
	report(zklock_count_lock_nodes(children + 1, 2) == 0,
		   "a child resource and a name with too few digits: no lock node");
}

/*
 * The count and Hive's rule never disagree about a child: a child that the
 * rule would make an EXCLUSIVE request wait behind (a contender) is
 * counted, so that a lock is never taken for its resource's only lock node
 * (hence guarded by its listing alone) beside a contender; and one that is
 * not counted never blocks.  Over every name of name_cases, semaphore
 * nodes, and all of them at once.
 */
static void
run_count_agrees_with_rule(void)
{
	const char *names[lengthof(name_cases) + 2];
	int			n = 0;
	int			nlock = 0;
	int			want = 2;		/* the two semaphore nodes, and: */
	bool		ok = true;

	for (int i = 0; i < lengthof(name_cases); i++)
	{
		names[n++] = name_cases[i].name;
		want += name_cases[i].is_lock ? 1 : 0;
	}
	names[n++] = OSEM(2, "0000000002");
	names[n++] = "zk0000beef.3.1-SEMAPHORE-0-LOCK-EXCLUSIVE-0000000003";
	for (int i = 0; i < n; i++)
	{
		int			counted = zklock_count_lock_nodes(&names[i], 1);
		int			watch = -2;
		int			nblockers = -2;
		bool		blocks;

		/* our request: EXCLUSIVE, above every sequence number */
		blocks = zklock_grant_rule(&names[i], 1, INT64CONST(10000000000),
								   ZKLOCK_EXCLUSIVE, &watch, &nblockers) ==
			ZKLOCK_VERDICT_WAIT;
		if (counted != (blocks ? 1 : 0) ||
			counted != (zklock_parse_node_name(names[i], NULL, NULL) ? 1 : 0))
		{
			ok = false;
			printf("#   \"%s\": counted %d, blocks %d\n", names[i], counted,
				   (int) blocks);
		}
		nlock += counted;
	}
	report(ok, "every child that keeps a request waiting is counted, and no other");
	report(zklock_count_lock_nodes(names, n) == nlock && nlock == want,
		   "all the names at once: the lock nodes among them counted");
}

int
main(void)
{
	printf("1..%d\n", (int) (lengthof(rule_cases) + lengthof(name_cases) +
							 lengthof(sem_name_cases) +
							 lengthof(sem_rule_cases) + 8));
	for (int i = 0; i < lengthof(name_cases); i++)
		run_name_case(&name_cases[i]);
	for (int i = 0; i < lengthof(rule_cases); i++)
		run_rule_case(&rule_cases[i]);
	for (int i = 0; i < lengthof(sem_name_cases); i++)
		run_sem_name_case(&sem_name_cases[i]);
	for (int i = 0; i < lengthof(sem_rule_cases); i++)
		run_sem_rule_case(&sem_rule_cases[i]);
	run_sem_many();
	run_sem_in_way();
	run_count_lock_nodes();
	run_count_agrees_with_rule();
	return failures > 0 ? 1 : 0;
}
