"""report.py -- the figures as rows (Results), and what is made of them: the
table on stdout with the ratios of each zklock row to Curator, Kazoo and
the floor, the CSV and the chart (gnuplot)."""
import csv
import os
import re

from common import BenchError, log
from servers import run


class Results:
    def __init__(self, roles=None):
        self.rows = []
        self.failed = []
        self.roles = roles          # None: every contender; else these roles only
        self.setup = "standalone"   # the ZooKeeper set-up the rows are measured on

    def add(self, scenario, contender, role, cps=None, p50=None, p99=None, note="",
            zk=None):
        """zk: ZooKeeper's counts (servers.ZkCounter.counts, zk_rates):
        requests, write transactions and packets sent, per cycle (unit
        "cycle") or per second (unit "s"), and notifications per cycle"""
        zk = zk or {}
        self.rows.append(dict(scenario=scenario, contender=contender, role=role,
                              cps=cps, p50=p50, p99=p99, note=note, setup=self.setup,
                              req=zk.get("req"), wr=zk.get("wr"), sent=zk.get("sent"),
                              notif=zk.get("notif"),
                              zk_unit=zk.get("unit", "cycle") if zk else ""))
        log("  %-34s %s" % (contender, " ".join(
            "%s=%s" % (k, "-" if v is None else "%.3f" % v)
            for k, v in (("cyc/s", cps), ("p50", p50), ("p99", p99), ("req", zk.get("req")),
                         ("wr", zk.get("wr")), ("sent", zk.get("sent"))))))

    def attempt(self, scenario, contender, role, fn):
        """run one measurement; a failure is a row too, and the run goes on"""
        if self.roles is not None and role not in self.roles:
            return
        try:
            fn()
        except Exception as e:          # noqa: BLE001 -- reported, counted
            msg = str(e).strip().splitlines()
            msg = msg[-1] if msg else repr(e)
            self.failed.append("%s / %s: %s" % (scenario, contender, str(e)[-800:]))
            self.add(scenario, contender, role, note="FAILED: " + msg[:100])


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


ROLE_ORDER = {"zklock": 0, "advisory": 1, "curator": 2, "kazoo": 3, "floor": 4}


def skey(r):
    """a scenario on one ZooKeeper set-up"""
    return (r.get("setup", ""), r["scenario"])


def grouped(rows):
    """rows by set-up and scenario (in order of first appearance), zklock
    first in each"""
    first = {}
    for i, r in enumerate(rows):
        first.setdefault(skey(r), i)
    return sorted(rows, key=lambda r: (first[skey(r)], ROLE_ORDER.get(r["role"], 9)))


def with_ratios(rows):
    """for zklock rows: ratios to the scenario's Curator, Kazoo and floor rows"""
    rows = grouped(rows)
    out = []
    for r in rows:
        r = dict(r)
        for role in ("curator", "kazoo", "floor"):
            r["cps_" + role] = r["p50_" + role] = None
        if r["role"] == "zklock":
            peers = [x for x in rows if skey(x) == skey(r)]
            for role in ("curator", "kazoo", "floor"):
                cands = [x for x in peers if x["role"] == role and
                         (x["cps"] is not None or x["p50"] is not None)]
                if not cands:
                    continue
                # the floor is the fastest floor row of the scenario
                ref = max(cands, key=lambda x: x["cps"] or 0)
                r["cps_" + role] = ratio(r["cps"], ref["cps"])
                r["p50_" + role] = ratio(r["p50"], ref["p50"])
        out.append(r)
    return out


def num(x, digits=None):
    if x is None:
        return "-"
    if digits is not None:
        return "%.*f" % (digits, x)
    if x >= 1000:
        return "%.0f" % x
    if x >= 100:
        return "%.1f" % x
    if x >= 10:
        return "%.2f" % x
    return "%.3f" % x


def rcell(r, role):
    a, b = r["cps_" + role], r["p50_" + role]
    if a is None and b is None:
        return ""
    return "%s / %s" % (num(a, 2), num(b, 2))


def zcell(r, key):
    """a ZooKeeper count: per cycle, or per second (idle rows: "/s")"""
    if r.get(key) is None:
        return "-"
    return "%.2f%s" % (r[key], "/s" if r.get("zk_unit") == "s" else "")


SETUP_NAMES = {"standalone": "standalone ZooKeeper", "ensemble": "3-server ensemble"}


def table(rows, meta):
    rows = with_ratios(rows)
    head = ["contender", "cycles/s", "p50 ms", "p99 ms", "req/cyc", "wr/cyc", "sent/cyc",
            "zk/Curator", "zk/Kazoo", "zk/floor", "notes"]
    ncol = len(head) - 1
    lines = []
    body = []
    scen = None
    for r in rows:
        if skey(r) != scen:
            scen = skey(r)
            body.append(("#", "%s | %s" % (SETUP_NAMES.get(scen[0], scen[0]), scen[1])))
        body.append([r["contender"], num(r["cps"]), num(r["p50"]), num(r["p99"]),
                     zcell(r, "req"), zcell(r, "wr"), zcell(r, "sent"),
                     rcell(r, "curator"), rcell(r, "kazoo"), rcell(r, "floor"),
                     r["note"]])
    widths = [max(len(head[i]), *(len(b[i]) for b in body if b[0] != "#"))
              for i in range(ncol)]
    fmt = lambda cells: "  ".join(  # noqa: E731
        (c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])) if i < ncol else c
        for i, c in enumerate(cells)).rstrip()
    lines.append(fmt(head))
    lines.append("-" * (sum(widths) + 2 * ncol + 5))
    for b in body:
        if b[0] == "#":
            lines.append("")
            lines.append("[%s]" % b[1])
        else:
            lines.append(fmt(b))
    lines.append("")
    lines += meta
    return "\n".join(lines)


def table_notes(env, only, versions, took):
    """the lines under the table: how to read it, and what ran"""
    return [
        "cycles/s: lock+unlock cycles per second, all clients together (handoff: handoffs/s; "
        "drain: grants/s; take: locks/s).",
        "p50/p99: acquire latency in ms, as the client sees it (handoff: from the releaser's "
        "release to the waiter's return).",
        "zk/X cells: \"cycles/s ratio / p50 ratio\" of the zklock row to the scenario's X row "
        "(>1 / <1 favour zklock); floor = the fastest ZK-floor row.",
        "* txn rows: p50/p99 of the whole BEGIN;acquire;COMMIT (pgbench logs whole transactions "
        "only; the notes give each statement's mean); session rows time each acquire alone.",
        "req/wr/sent per cycle: ZooKeeper's own counters (srvr: packets received = requests "
        "incl. pings, packets sent = replies + watch notifications; write transactions = the "
        "zxid's advance, a multi counting once), all servers, before and after each "
        "measurement, minus the idle rate measured in the same run, divided by the cycles run "
        "(warm-up and the client's session set-up included); idle rows: per second; the "
        "notes give watch notifications per cycle (mntr zk_sum_node_*_watch_count).",
        "%g s per measurement%s%s; ZooKeeper: %s (test/zk_server.sh, tickTime 200, "
        "forceSync=no, loopback) for every contender; PostgreSQL fsync=off, "
        "synchronous_commit=off; 2 cores shared by all." % (
            env.secs, " (with 10,000 locks held: %g s, one zklock.sweep_interval)" % env.many_idle
            if "many" in only else "",
            ", scale scenarios skipped" if "scale" not in only
            else "; scale: %d waiters (150 per instance for zklock, "
            "max_connections 200), not 1,000" % env.waiters,
            " and ".join(SETUP_NAMES[s] for s in env.setups)),
        "idle rate subtracted (ZooKeeper with both instances connected and idle, nothing "
        "else): %s." % "; ".join(
            "%s: %.2f requests/s, %.2f packets sent/s, %.2f writes/s over %.0f s"
            % (SETUP_NAMES[s], i["req"], i["sent"], i["wr"], i["secs"])
            for s, i in getattr(env, "idle_by_setup", {}).items()),
        "versions: " + "; ".join(versions) + ".  Run took %.0f s." % took,
    ]


def write_csv(rows, fn):
    rows = with_ratios(rows)
    cols = ["setup", "scenario", "contender", "role", "cps", "p50", "p99",
            "req", "wr", "sent", "notif", "zk_unit",
            "cps_curator", "p50_curator", "cps_kazoo", "p50_kazoo",
            "cps_floor", "p50_floor", "note"]
    names = ["setup", "scenario", "contender", "role", "cycles_per_s", "p50_ms", "p99_ms",
             "zk_requests", "zk_write_txns", "zk_packets_sent", "zk_notifications",
             "zk_per",
             "zk_over_curator_cycles", "zk_over_curator_p50",
             "zk_over_kazoo_cycles", "zk_over_kazoo_p50",
             "zk_over_floor_cycles", "zk_over_floor_p50", "notes"]
    with open(fn, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(names)
        for r in rows:
            w.writerow(["" if r.get(c) is None else (round(r[c], 4) if isinstance(r[c], float)
                                                  else r[c]) for c in cols])


def short_name(s):
    """a scenario's label on the chart"""
    if s.startswith("8 clients"):
        return "8 clients, " + ("SHARED" if "SHARED" in s else "EXCL.")
    if s.startswith("32 clients"):
        return "32 clients, 32 res."
    if s.startswith("unrelated"):
        m = re.search(r"(\d+) (waiters|locks)", s)
        return "unrelated acq., %s %s" % (m.group(1), "waiters" if m.group(2) == "waiters"
                                          else "held") if m else "unrelated acq."
    return s.split(",")[0].split(":")[0]


def write_png(rows, fn, tmp, title):
    """two panels: cycles/s and acquire p50 per scenario and contender"""
    families = [("zklock txn", lambda r: r["role"] == "zklock" and "txn" in r["contender"]),
                ("zklock session", lambda r: r["role"] == "zklock" and "txn" not in r["contender"]),
                ("PG advisory", lambda r: r["role"] == "advisory"),
                ("Curator", lambda r: r["role"] == "curator"),
                ("Kazoo", lambda r: r["role"] == "kazoo"),
                ("ZK floor", lambda r: r["role"] == "floor")]
    scen = []
    for r in rows:
        if (skey(r) not in scen and not r["scenario"].startswith("drain")
                and not r["scenario"].startswith("idle")):
            scen.append(skey(r))
    short = {k: short_name(k[1]) + (", ensemble" if k[0] == "ensemble" else "")
             for k in scen}
    data = os.path.join(tmp, "chart.dat")
    with open(data, "w") as f:
        f.write("scenario\t" + "\t".join('"%s"' % n for n, _ in families) + "\t" +
                "\t".join('"%s"' % n for n, _ in families) + "\n")
        for s in scen:
            cps, p50 = [], []
            for _, pred in families:
                cand = [r for r in rows if skey(r) == s and pred(r)]
                c = max((r["cps"] for r in cand if r["cps"]), default=None)
                l = min((r["p50"] for r in cand if r["p50"]), default=None)
                cps.append("?" if c is None or s[1].startswith("handoff") else "%.4f" % c)
                p50.append("?" if l is None else "%.4f" % l)
            f.write('"%s"\t%s\t%s\n' % (short[s], "\t".join(cps), "\t".join(p50)))
    n = len(families)
    gp = os.path.join(tmp, "chart.gp")
    with open(gp, "w") as f:
        f.write("""set terminal pngcairo size 1600,1000 font ",10"
set output '{out}'
set datafile missing '?'
set datafile separator '\\t'
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set key outside right top vertical
set grid ytics
set logscale y
set xtics rotate by -25 scale 0
set multiplot layout 2,1 title '{title}'
set title 'lock cycles per second (log scale; higher is better)'
plot for [i=2:{n1}] '{data}' using i:xtic(1) title columnheader(i)
set title 'acquire latency p50, ms (log scale; lower is better; handoff: release -> grant)'
plot for [i={n2}:{n3}] '{data}' using i:xtic(1) title columnheader(i)
unset multiplot
""".format(out=fn, data=data, n1=n + 1, n2=n + 2, n3=2 * n + 1,
           title=title.replace("'", "")))
    r = run(["gnuplot", gp], timeout=60, check=False)
    if r.returncode != 0:
        raise BenchError("gnuplot: " + r.stderr[-800:])
