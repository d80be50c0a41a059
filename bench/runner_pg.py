"""runner_pg.py -- the contenders that run inside PostgreSQL: zklock and,
for reference, PostgreSQL's advisory locks.  Both are driven the same way,
by pgbench scripts (cycles, latencies, handoffs recorded in tables); only
their SQL differs."""
import glob
import os
import re

from common import BenchError, pct
from servers import finish, spawn


class Pgbench:
    """one pgbench run against one instance, started in the background"""
    counter = 0

    def __init__(self, env, pg, script, clients, secs=None, txns=None,
                 defines=None, log_latencies=True):
        Pgbench.counter += 1
        self.dir = os.path.join(env.tmp, "pgbench", "%03d" % Pgbench.counter)
        os.makedirs(self.dir)
        self.script = os.path.join(self.dir, "script.sql")
        with open(self.script, "w") as f:
            f.write(script)
        self.prefix = os.path.join(self.dir, "log")
        cmd = [pg.bin + "/pgbench", "-n", *pg.conn(), "-f", self.script,
               "-c", str(clients), "-j", str(clients), "-r"]
        cmd += ["-T", str(int(secs))] if secs else ["-t", str(txns)]
        if log_latencies:
            cmd += ["--log", "--log-prefix=" + self.prefix]
        for k, v in dict({"ph": 0}, **(defines or {})).items():
            cmd += ["-D", "%s=%s" % (k, v)]
        cmd.append("postgres")
        self.secs = secs
        self.p = spawn(cmd, cwd=self.dir)
        self.out = None

    def wait(self, timeout=None):
        self.out = finish(self.p, timeout or (self.secs or 60) + 120, "pgbench")
        if re.search(r"number of failed transactions: [1-9]", self.out):
            raise BenchError("pgbench: failed transactions\n" + self.out[-1500:])
        return self

    def processed(self):
        m = re.search(r"number of transactions actually processed: (\d+)", self.out)
        return int(m.group(1)) if m else 0

    def tps(self):
        m = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", self.out)
        if not m:
            raise BenchError("pgbench: no tps in output\n" + self.out[-1500:])
        return float(m.group(1))

    def statement_means(self):
        """[(mean ms, command)] from -r"""
        res = []
        on = False
        for line in self.out.splitlines():
            if line.startswith("statement latencies"):
                on = True
                continue
            if on:
                m = re.match(r"\s+([0-9.]+)\s+(\d+)\s+(.*)$", line)
                if m:
                    res.append((float(m.group(1)), m.group(3).strip()))
        return res

    def log_rows(self):
        """[(client, txno, latency s, end epoch s)]"""
        rows = []
        for fn in glob.glob(self.prefix + ".*"):
            with open(fn) as f:
                for line in f:
                    p = line.split()
                    if len(p) < 6 or not p[2].isdigit():
                        continue
                    rows.append((int(p[0]), int(p[1]), int(p[2]) / 1e6,
                                 int(p[4]) + int(p[5]) / 1e6))
        return rows


# pgbench scripts.  {r} is a resource expression (SQL), {m} a mode.
SESSION_SCRIPT = {
    "zklock": ("SELECT zk_lock_acquire_session({r}{m}{p});",
               "SELECT zk_lock_release({r}{m});"),
    "advisory": ("SELECT pg_advisory_lock{sh}(hashtext({r}));",
                 "SELECT pg_advisory_unlock{sh}(hashtext({r}));"),
}
XACT_SCRIPT = {
    "zklock": "SELECT zk_lock_acquire({r}{m}{p});",
    "advisory": "SELECT pg_advisory_xact_lock{sh}(hashtext({r}));",
}


def fmt_sql(s, resource, shared, flat=False):
    """flat: zklock's acquire with parents => false"""
    return s.format(r=resource, m=", 'shared'" if shared else "",
                    sh="_shared" if shared else "",
                    p=", parents => false" if flat else "")


def session_script(kind, resource, shared=False, flat=False):
    """
    One acquire or one release per pgbench transaction, alternating (the
    client variable ph survives from one transaction to the next), so that
    pgbench's log holds the acquire latency alone: even transactions are
    acquires.  A cycle is two pgbench transactions.
    """
    acq, rel = SESSION_SCRIPT[kind]
    return ("\\if :ph = 0\n" + fmt_sql(acq, resource, shared, flat) + "\n\\set ph 1\n"
            "\\else\n" + fmt_sql(rel, resource, shared) + "\n\\set ph 0\n\\endif\n")


def xact_script(kind, resource, shared=False, flat=False):
    return "BEGIN;\n" + fmt_sql(XACT_SCRIPT[kind], resource, shared, flat) + "\nCOMMIT;\n"


def acquire_rows(rows):
    """the acquires of an alternating session script: each client's 1st,
    3rd, 5th... transaction (pgbench numbers them from 0 or 1 by version)"""
    first = {}
    for r in rows:
        first[r[0]] = min(first.get(r[0], r[1]), r[1])
    return [r for r in rows if (r[1] - first[r[0]]) % 2 == 0]


def pgbench_cycles(env, runs, scope):
    """
    runs: [(pg, script, clients)], started together and for env.secs.
    Returns (cycles/s, p50 ms, p99 ms, note, cycles run, max ms).

    Session scope: the latencies are the acquires' alone.  Transaction
    scope: pgbench can only log whole transactions (a script may not end
    inside a transaction block), so p50/p99 are those of BEGIN; acquire;
    COMMIT, and the note gives the mean of each statement (pgbench -r).
    """
    pbs = [Pgbench(env, pg, script, c, secs=env.secs, defines={"ph": 0})
           for pg, script, c in runs]
    for pb in pbs:
        pb.wait()
    tps = sum(pb.tps() for pb in pbs)
    if scope == "session":
        lat = [r[2] for pb in pbs for r in acquire_rows(pb.log_rows())]
        return (tps / 2, pct(lat, .5) * 1e3, pct(lat, .99) * 1e3, "",
                sum(pb.processed() for pb in pbs) / 2, max(lat) * 1e3)
    lat = [r[2] for pb in pbs for r in pb.log_rows()]
    means = pbs[0].statement_means()
    parts = ", ".join("%s %.3f" % (c.split("(")[0].split()[-1] if c.startswith("SELECT")
                                   else c.rstrip(";"), m) for m, c in means)
    note = "p50/p99 of the whole cycle; means (pgbench -r): " + parts
    return (tps, pct(lat, .5) * 1e3, pct(lat, .99) * 1e3, note,
            sum(pb.processed() for pb in pbs), max(lat) * 1e3)


HANDOFF_SQL = """BEGIN;
INSERT INTO bench_grant SELECT :who, statement_timestamp(), clock_timestamp()
  FROM (SELECT {acquire} AS t OFFSET 0) s;
INSERT INTO bench_release SELECT :who, clock_timestamp() FROM pg_sleep({hold});
COMMIT;
"""


def pg_handoff(env, pg_a, pg_b, acquire):
    for pg in {pg_a.name: pg_a, pg_b.name: pg_b}.values():
        pg.psql("TRUNCATE bench_grant, bench_release")
    script = HANDOFF_SQL.format(acquire=acquire, hold=env.hold_ms / 1000.0)
    pbs = [Pgbench(env, pg, script, 1, secs=env.secs, defines={"who": who},
                   log_latencies=False)
           for who, pg in ((1, pg_a), (2, pg_b))]
    for pb in pbs:
        pb.wait()
    recs = []
    for pg in {pg_a.name: pg_a, pg_b.name: pg_b}.values():
        grants, rels = {}, {}
        for line in pg.psql("SELECT who, extract(epoch FROM t_req), extract(epoch FROM t_got)"
                            " FROM bench_grant ORDER BY t_got").splitlines():
            w, a, b = line.split("|")
            grants.setdefault(int(w), []).append((float(a), float(b)))
        for line in pg.psql("SELECT who, extract(epoch FROM t_rel) FROM bench_release"
                            " ORDER BY t_rel").splitlines():
            w, a = line.split("|")
            rels.setdefault(int(w), []).append(float(a))
        for w in grants:
            for (t_req, t_got), t_rel in zip(grants[w], rels.get(w, [])):
                recs.append((w, t_req, t_got, t_rel))
    return recs
