"""ab.py -- two builds of zklock in one run (bench/run.sh --baseline REV):
the old one (REV) and the new one (the current tree), each installed in its
own copy of PostgreSQL 15, each with two instances and its own zklock.root
on the one ZooKeeper.  Every zklock measurement of the chosen scenarios runs
on the old build's instances, then on the new one's, for a number of rounds
(old, new, old, new, ...); each side keeps the median of its rounds, and
the table shows both figures and new/old side by side.  No figure passes or
fails: the exit status says only whether every measurement ran."""
import argparse
import statistics

from common import log
from report import Results, num, ratio
from runner_pg import Pgbench, session_script
from scenarios import SCENARIOS
from servers import setup, zk_rates

SIDES = ("old", "new")


def add_args(ap):
    ap.add_argument("--ab-old", metavar="BINDIR", help=argparse.SUPPRESS)
    ap.add_argument("--ab-new", metavar="BINDIR", help=argparse.SUPPRESS)
    ap.add_argument("--ab-old-label", default="old", help=argparse.SUPPRESS)
    ap.add_argument("--ab-new-label", default="new", help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=3,
                    help="with --baseline: rounds per build (default 3)")


def run(env, a):
    builds = [(side, bindir, "zklock.root = '/zklock_bench_%s'\n" % side)
              for side, bindir in zip(SIDES, (a.ab_old, a.ab_new))]
    setup(env, 2, builds)
    labels = dict(zip(SIDES, (a.ab_old_label, a.ab_new_label)))
    for side in SIDES:              # warm-up, not counted, as smoke.sh does
        for pg in env.sides[side]:
            Pgbench(env, pg, session_script("zklock", "'bench_ab_warmup'"), 1, txns=200).wait()
    # what the four idle instances cost ZooKeeper: subtracted from the counts
    env.idle = zk_rates(env, 10.5)
    figures = {}            # (scenario, contender) -> {side: [row per round]}
    failed = []
    for k in a.only_list:
        for rnd in range(a.rounds):
            for side in SIDES:
                log("%s: round %d of %d, %s build: %s" % (k, rnd + 1, a.rounds, side,
                                                          labels[side]))
                env.pg1, env.pg2 = env.sides[side]
                res = Results(roles={"zklock"})
                SCENARIOS[k](env, res)
                failed += ["%s build: %s" % (side, f) for f in res.failed]
                for r in res.rows:
                    per = figures.setdefault((r["scenario"], r["contender"]),
                                             {s: [] for s in SIDES})
                    per[side].append(r)
    print(ab_table(figures, ab_notes(env, a, labels)), flush=True)
    if failed:
        log("%d measurement(s) failed:" % len(failed))
        for f in failed:
            log("  " + f)
        return 1
    return 0


def median(rows, key):
    vals = [r[key] for r in rows if r[key] is not None]
    return statistics.median(vals) if vals else None


def ab_cells(per):
    """one table line's cells: old, new, new/old for cycles/s, p50, p99,
    then each round's figure (cycles/s, or p50 where there is none)"""
    cells = []
    for key in ("cps", "p50", "p99"):
        old, new = median(per["old"], key), median(per["new"], key)
        cells += [num(old), num(new), num(ratio(new, old), 3)]
    # ZooKeeper requests and write transactions per cycle (servers.ZkCounter)
    for key in ("req", "wr"):
        cells += [num(median(per[side], key), 2) for side in SIDES]
    key = "cps" if any(r["cps"] is not None for r in per["old"] + per["new"]) else "p50"
    rounds = "; ".join("%s %s" % (side, " ".join(
        "FAILED" if r["note"].startswith("FAILED") else num(r[key]) for r in per[side]))
        for side in SIDES)
    return cells + ["%s: %s" % ("cycles/s" if key == "cps" else "p50", rounds)]


def ab_table(figures, notes):
    head = ["contender", "old cyc/s", "new cyc/s", "new/old", "old p50", "new p50",
            "new/old", "old p99", "new p99", "new/old", "old req", "new req", "old wr",
            "new wr", "rounds"]
    body = []
    scen = None
    for (scenario, contender), per in figures.items():
        if scenario != scen:
            scen = scenario
            body.append(None)
            body.append(["[%s]" % scenario])
        body.append([contender] + ab_cells(per))
    n = len(head) - 1
    widths = [max([len(head[i])] + [len(b[i]) for b in body if b and len(b) > 1])
              for i in range(n)]

    def fmt(cells):
        return "  ".join((c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]))
                         if i < n else c for i, c in enumerate(cells)).rstrip()
    lines = [fmt(head), "-" * (sum(widths) + 2 * n + 6)]
    for b in body:
        lines.append("" if b is None else b[0] if len(b) == 1 else fmt(b))
    lines.append("")
    return "\n".join(lines + notes)


def ab_notes(env, a, labels):
    return [
        "old: %s; new: %s." % (labels["old"], labels["new"]),
        "Each figure: the median of %d rounds per build, the builds alternated (old, new, old, "
        "new, ...) on one standalone ZooKeeper; each build on its own two instances (old1, old2 / "
        "new1, new2, same settings) and its own zklock.root." % a.rounds,
        "new/old: above 1 for cycles/s, below 1 for p50/p99 favour the new build.  zklock rows "
        "only; as in the full table (bench/README.md), * txn rows time the whole "
        "BEGIN;acquire;COMMIT.",
        "req, wr: ZooKeeper requests and write transactions per cycle (its srvr counters, the "
        "idle rate of the four instances subtracted, as in the full table).",
        "%g s per measurement; 2 cores shared by all: compare the two columns, and the rounds "
        "to see the noise." % env.secs,
    ]
