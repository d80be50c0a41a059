#!/usr/bin/python3
"""bench.py -- zklock side by side with Curator, Kazoo, ZooKeeper's own floor
and PostgreSQL's advisory locks, on one ZooKeeper, in one run.

Started by bench/run.sh (the full comparison) and bench/smoke.sh (the CI
check), which install what is missing first; run it through them.

  bench.py [--quick] [--csv FILE] [--png FILE] [--keep] [--secs S]
  bench.py --smoke [--min-ratio R]

What it does: starts a standalone ZooKeeper with test/zk_server.sh (the
only ZooKeeper every contender talks to), initdb's two PostgreSQL 15
instances with zklock into a temporary folder (run as `postgres` when we are
root), compiles bench/zk_floor.c and bench/CuratorBench.java there, runs the
scenarios, prints one table and stops everything it started.
"""
import argparse
import csv
import glob
import json
import math
import os
import pwd
import queue
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PGBIN = os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin")
PYTHON = "/usr/bin/python3"          # Debian's, with python3-kazoo
JAVA_DIR = "/usr/share/java"
JARS = ["curator-recipes.jar", "curator-framework.jar", "curator-client.jar",
        "zookeeper.jar", "zookeeper-jute.jar", "guava.jar", "slf4j-api.jar",
        "slf4j-nop.jar"]
RUN_AS = "postgres"
IS_ROOT = os.geteuid() == 0

CHILDREN = []          # Popen objects we started (each in its own group)
STATE = {"tmp": None, "zkdir": None, "pgs": [], "keep": False}


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


# ---------------------------------------------------------------- processes

def as_owner(cmd):
    """run a server-side command as the unprivileged user when root"""
    return ["runuser", "-u", RUN_AS, "--"] + cmd if IS_ROOT else cmd


def run(cmd, timeout=120, check=True, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise BenchError("%s failed (%d): %s" % (" ".join(cmd[:4]), r.returncode,
                                                 (r.stderr or r.stdout)[-2000:]))
    return r


def spawn(cmd, **kw):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True, **kw)
    CHILDREN.append(p)
    return p


def finish(p, timeout, what):
    """wait for a spawned process (bounded); returns stdout"""
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(p)
        raise BenchError("%s did not finish within %d s" % (what, timeout))
    finally:
        if p in CHILDREN:
            CHILDREN.remove(p)
    if p.returncode != 0:
        raise BenchError("%s failed (%d): %s" % (what, p.returncode,
                                                 (err or out)[-2000:]))
    return out


def kill_group(p):
    """end a child we started, and what it started in its own group"""
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(5)


def free_port(count=1):
    """a base port p with p..p+count-1 free on 127.0.0.1"""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + count > 65000:
            continue
        ok = True
        for q in range(base, base + count):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", q))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise BenchError("no free port")


def pct(values, p):
    """nearest-rank percentile"""
    if not values:
        return None
    s = sorted(values)
    k = max(1, min(len(s), int(math.ceil(p * len(s)))))
    return s[k - 1]


# ---------------------------------------------------------------- ZooKeeper

def zk_start(tmp):
    zkdir = os.path.join(tmp, "zk")
    base = free_port(3)
    r = run(["bash", os.path.join(ROOT, "test", "zk_server.sh"), "start", zkdir,
             "--servers", "1", "--base-port", str(base),
             "--owner-pid", str(os.getpid())], timeout=90)
    STATE["zkdir"] = zkdir
    return r.stdout.strip().splitlines()[-1], base


def zk_stop():
    if STATE["zkdir"]:
        subprocess.run(["bash", os.path.join(ROOT, "test", "zk_server.sh"), "stop",
                        STATE["zkdir"]], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)
        STATE["zkdir"] = None


def fourlw(port, cmd):
    out = b""
    with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
        s.sendall(cmd.encode())
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    return out.decode("ascii", "replace")


def mntr(port):
    m = {}
    for line in fourlw(port, "mntr").splitlines():
        kv = line.split("\t")
        if len(kv) == 2:
            m[kv[0].strip()] = kv[1].strip()
    return m


class ZkCounter:
    """ZooKeeper requests and watch notifications during a measurement"""

    def __init__(self, env):
        self.port = env.zk_port

    def __enter__(self):
        m = mntr(self.port)
        self.req0 = int(m.get("zk_packets_received", 0))
        self.n0 = notifications(self.port)
        return self

    def __exit__(self, *exc):
        m = mntr(self.port)
        self.req = int(m.get("zk_packets_received", 0)) - self.req0
        self.notif = notifications(self.port) - self.n0
        return False

    def note(self, cycles):
        if not cycles:
            return ""
        return "ZK per cycle: %.2f requests, %.2f notifications" % (
            self.req / cycles, self.notif / cycles)


def join_notes(*notes):
    return "; ".join(n for n in notes if n)


def notifications(port):
    """watch notifications ZooKeeper has sent so far, all event types"""
    m = mntr(port)
    return sum(int(m.get("zk_sum_node_%s_watch_count" % k, 0))
               for k in ("created", "deleted", "children", "changed"))


# ---------------------------------------------------------------- PostgreSQL

class PG:
    def __init__(self, name, tmp, hosts, port):
        self.name = name
        self.data = os.path.join(tmp, name)
        self.sock = os.path.join(tmp, "sock")
        self.port = port
        self.hosts = hosts
        self.logfile = os.path.join(tmp, name + ".log")

    def conn(self):
        return ["-h", self.sock, "-p", str(self.port), "-U", "postgres"]

    def init(self):
        run(as_owner([PGBIN + "/initdb", "-D", self.data, "-A", "trust",
                      "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"]),
            timeout=120)
        conf = """
listen_addresses = ''
unix_socket_directories = '{sock}'
port = {port}
max_connections = 200
shared_preload_libraries = 'zklock'
zklock.hosts = '{hosts}'
zklock.node_name = '{name}'
# 10,000 locks in one backend: max_locks_per_backend caps one backend's
# entries; the shared table keeps the size it had when it was
# 64 x MaxBackends (about 222 here) entries
zklock.max_locks_per_backend = 10000
zklock.max_locks = 14208
# the expiry sweep's cost shows within the 10,000-lock scenario's window
zklock.sweep_interval = '10s'
fsync = off
synchronous_commit = off
full_page_writes = off
autovacuum = off
log_min_messages = warning
log_line_prefix = '%m [%p] '
""".format(sock=self.sock, port=self.port, hosts=self.hosts, name=self.name)
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(conf)

    def start(self):
        run(as_owner([PGBIN + "/pg_ctl", "-D", self.data, "-l", self.logfile,
                      "-w", "-t", "60", "start"]), timeout=90)
        STATE["pgs"].append(self)

    def stop(self):
        subprocess.run(as_owner([PGBIN + "/pg_ctl", "-D", self.data, "-m", "fast",
                                 "-w", "-t", "60", "stop"]),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=90)

    def psql(self, sql, timeout=120):
        r = run([PGBIN + "/psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                 *self.conn(), "-d", "postgres", "-c", sql], timeout=timeout)
        return r.stdout.strip()

    def wait_connected(self, timeout=30):
        deadline = time.time() + timeout
        state = ""
        while time.time() < deadline:
            state = self.psql("SELECT state FROM zk_lock_status")
            if state == "connected":
                return
            time.sleep(0.2)
        raise BenchError("%s: zklock worker not connected (state %r)" % (self.name, state))


class PsqlSession:
    """one psql we keep open (a backend that holds locks across steps)"""

    def __init__(self, pg):
        self.p = subprocess.Popen(
            [PGBIN + "/psql", "-X", "-q", "-A", "-t", *pg.conn(), "-d", "postgres"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, bufsize=1, start_new_session=True)
        CHILDREN.append(self.p)
        self.q = queue.Queue()
        threading.Thread(target=self._reader, daemon=True).start()

    def _reader(self):
        for line in self.p.stdout:
            self.q.put(line.rstrip("\n"))
        self.q.put(None)

    def query(self, sql, timeout=120):
        self.p.stdin.write(sql.rstrip().rstrip(";") + ";\n\\echo __bench_done__\n")
        self.p.stdin.flush()
        out = []
        deadline = time.time() + timeout
        while True:
            try:
                line = self.q.get(timeout=max(0.1, deadline - time.time()))
            except queue.Empty:
                raise BenchError("psql: no answer within %d s to %s" % (timeout, sql[:60]))
            if line is None:
                raise BenchError("psql exited: " + "\n".join(out))
            if line == "__bench_done__":
                break
            out.append(line)
        for line in out:
            if line.startswith("ERROR") or "ERROR:" in line:
                raise BenchError("psql: " + "\n".join(out))
        return out

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            kill_group(self.p)
        if self.p in CHILDREN:
            CHILDREN.remove(self.p)


# ---------------------------------------------------------------- pgbench

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
        cmd = [PGBIN + "/pgbench", "-n", *pg.conn(), "-f", self.script,
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
    "zklock": ("SELECT zk_lock_acquire_session({r}{m});",
               "SELECT zk_lock_release({r}{m});"),
    "advisory": ("SELECT pg_advisory_lock{sh}(hashtext({r}));",
                 "SELECT pg_advisory_unlock{sh}(hashtext({r}));"),
}
XACT_SCRIPT = {
    "zklock": "SELECT zk_lock_acquire({r}{m});",
    "advisory": "SELECT pg_advisory_xact_lock{sh}(hashtext({r}));",
}


def fmt_sql(s, resource, shared):
    return s.format(r=resource, m=", 'shared'" if shared else "",
                    sh="_shared" if shared else "")


def session_script(kind, resource, shared=False):
    """
    One acquire or one release per pgbench transaction, alternating (the
    client variable ph survives from one transaction to the next), so that
    pgbench's log holds the acquire latency alone: even transactions are
    acquires.  A cycle is two pgbench transactions.
    """
    acq, rel = SESSION_SCRIPT[kind]
    return ("\\if :ph = 0\n" + fmt_sql(acq, resource, shared) + "\n\\set ph 1\n"
            "\\else\n" + fmt_sql(rel, resource, shared) + "\n\\set ph 0\n\\endif\n")


def xact_script(kind, resource, shared=False):
    return "BEGIN;\n" + fmt_sql(XACT_SCRIPT[kind], resource, shared) + "\nCOMMIT;\n"


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


# ---------------------------------------------------------------- helpers for the others

def curator_cmd(env, *args):
    cp = env.curator_cp
    return ["java", "-Xss512k", "-XX:+UseSerialGC", "-cp", cp, "CuratorBench",
            args[0], env.hosts, *[str(a) for a in args[1:]]]


def kazoo_cmd(env, *args):
    return [PYTHON, os.path.join(HERE, "kazoo_bench.py"), args[0], env.hosts,
            *[str(a) for a in args[1:]]]


def run_json(cmd, timeout, what):
    out = finish(spawn(cmd), timeout, what)
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if not lines:
        raise BenchError("%s printed no result: %s" % (what, out[-500:]))
    return json.loads(lines[-1])


def floor(env, mode, n=None):
    cmd = [env.zk_floor, env.hosts, mode, str(env.secs)] + ([str(n)] if n else [])
    return run_json(cmd, env.secs + 90, "zk_floor " + mode)


def handoff_from_records(recs):
    """recs: (who, t_req, t_got, t_rel); handoff = t_got - previous t_rel,
    counted only when the grantee was already waiting at that release"""
    recs = sorted(recs, key=lambda r: r[2])
    out = []
    for prev, cur in zip(recs, recs[1:]):
        if prev[0] != cur[0] and cur[1] < prev[3] <= cur[2]:
            out.append(cur[2] - prev[3])
    return out


# ---------------------------------------------------------------- the run

class Env:
    pass


class Results:
    def __init__(self):
        self.rows = []
        self.failed = []

    def add(self, scenario, contender, role, cps=None, p50=None, p99=None, note=""):
        self.rows.append(dict(scenario=scenario, contender=contender, role=role,
                              cps=cps, p50=p50, p99=p99, note=note))
        log("  %-34s %s" % (contender, " ".join(
            "%s=%s" % (k, "-" if v is None else "%.3f" % v)
            for k, v in (("cyc/s", cps), ("p50", p50), ("p99", p99)))))

    def attempt(self, scenario, contender, role, fn):
        """run one measurement; a failure is a row too, and the run goes on"""
        try:
            fn()
        except Exception as e:          # noqa: BLE001 -- reported, counted
            msg = str(e).strip().splitlines()
            msg = msg[-1] if msg else repr(e)
            self.failed.append("%s / %s: %s" % (scenario, contender, str(e)[-800:]))
            self.add(scenario, contender, role, note="FAILED: " + msg[:100])


def plural(n, word, words=None):
    return "%d %s" % (n, word if n == 1 else (words or word + "s"))


def scenario_basic(env, res, title, key, clients, same, shared=False):
    """the cycle scenarios: 1 / 32 / 8 clients, distinct or one resource"""
    res_name = "bench_%s_r" % key
    half = clients // 2
    mode_word = "shared" if shared else "exclusive"
    log("scenario: " + title)

    def res_expr(prefix):
        if same:
            return "'%s'" % res_name
        return "'%s%s' || :client_id" % (res_name, prefix)

    for scope in ("xact", "session"):
        def zk(scope=scope):
            mk = xact_script if scope == "xact" else session_script
            if clients == 1:
                runs = [(env.pg1, mk("zklock", res_expr(""), shared), 1)]
            else:
                runs = [(env.pg1, mk("zklock", res_expr("a"), shared), half),
                        (env.pg2, mk("zklock", res_expr("b"), shared), clients - half)]
            with ZkCounter(env) as z:
                cps, p50, p99, note, n, _ = pgbench_cycles(env, runs, scope)
            where = "pg1" if clients == 1 else "%d+%d on pg1+pg2" % (half, clients - half)
            label = ("zklock txn* (BEGIN;acq;COMMIT)" if scope == "xact"
                     else "zklock session (acq;release)")
            res.add(title, "%s %s" % (label, where), "zklock", cps, p50, p99,
                    join_notes(z.note(n), note))
        res.attempt(title, "zklock " + scope, "zklock", zk)

    if clients == 1:
        def zk_nested():
            runs = [(env.pg1, session_script("zklock", "'bench/h/r'"), 1)]
            with ZkCounter(env) as z:
                cps, p50, p99, note, n, _ = pgbench_cycles(env, runs, "session")
            res.add(title, "zklock session, name 'bench/h/r' pg1", "zklock", cps, p50, p99,
                    join_notes(z.note(n), "default parents => true: + SHARED on bench, bench/h"))
        res.attempt(title, "zklock nested name", "zklock", zk_nested)

    for scope in ("xact", "session"):
        def adv(scope=scope):
            mk = xact_script if scope == "xact" else session_script
            runs = [(env.pg1, mk("advisory", res_expr("a"), shared), clients)]
            cps, p50, p99, note, _, _ = pgbench_cycles(env, runs, scope)
            label = ("PG advisory xact%s*" if scope == "xact" else "PG advisory%s") % (
                "_shared" if shared else "")
            res.add(title, "%s, %d on pg1" % (label, clients), "advisory", cps, p50,
                    p99, note if scope == "xact" else "")
        res.attempt(title, "PG advisory " + scope, "advisory", adv)

    recipe = "read" if shared else "mutex"

    def cur():
        with ZkCounter(env) as z:
            r = run_json(curator_cmd(env, "cycles", "/curator/" + key, recipe, clients,
                                     "same" if same else "distinct", env.secs, env.warmup),
                         env.secs + env.warmup + 180, "CuratorBench")
        res.add(title, "Curator %s (%s)" % (
            "InterProcessReadWriteLock.readLock" if shared else "InterProcessMutex",
            plural(clients, "session")), "curator", r["cycles_per_s"], r["p50_ms"],
            r["p99_ms"], z.note(r["all_cycles"]))
    res.attempt(title, "Curator", "curator", cur)

    def kaz():
        with ZkCounter(env) as z:
            r = run_json(kazoo_cmd(env, "cycles", "/kazoo/" + key, recipe, clients,
                                   "same" if same else "distinct", env.secs, 0.3),
                         env.secs + 180, "kazoo_bench")
        res.add(title, "Kazoo %s (%s)" % (
            "ReadLock" if shared else "Lock", plural(clients, "process", "processes")),
            "kazoo", r["cycles_per_s"], r["p50_ms"], r["p99_ms"], z.note(r["all_cycles"]))
    res.attempt(title, "Kazoo", "kazoo", kaz)

    if not same or clients == 1:
        def fl_sync():
            with ZkCounter(env) as z:
                r = floor(env, "sync", clients)
            res.add(title, "ZK floor: sync create+delete, %s" % plural(clients, "session"),
                    "floor", r["cycles"] / env.secs, r["p50_ms"], r["p99_ms"],
                    join_notes(z.note(r["all_cycles"]), "C client; latency = the create"))
        res.attempt(title, "ZK floor sync", "floor", fl_sync)
    if clients > 1 and not same:
        def fl_async():
            with ZkCounter(env) as z:
                r = floor(env, "async", 32)
            res.add(title, "ZK floor: 32 in flight on 1 session", "floor",
                    r["cycles"] / env.secs, r["p50_ms"], r["p99_ms"],
                    join_notes(z.note(r["all_cycles"]),
                               "C client, zoo_acreate/zoo_adelete window 32"))
        res.attempt(title, "ZK floor async", "floor", fl_async)


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


def scenario_handoff(env, res):
    title = "handoff: release -> other client's grant"
    log("scenario: " + title)

    def add(contender, role, recs, note=""):
        h = handoff_from_records(recs)
        if len(h) < 10:
            raise BenchError("only %d handoffs out of %d grants" % (len(h), len(recs)))
        res.add(title, contender, role, None, pct(h, .5) * 1e3, pct(h, .99) * 1e3,
                join_notes("%d handoffs (of %d grants), holder sleeps %d ms" % (
                    len(h), len(recs), env.hold_ms), note))

    def zk():
        recs = pg_handoff(env, env.pg1, env.pg2, "zk_lock_acquire('bench_pingpong')")
        add("zklock txn, pg1 <-> pg2", "zklock", recs,
            "clock_timestamp() before the holder's COMMIT -> after the waiter's acquire")
    res.attempt(title, "zklock", "zklock", zk)

    def adv():
        recs = pg_handoff(env, env.pg1, env.pg1,
                          "pg_advisory_xact_lock(hashtext('bench_pingpong'))")
        add("PG advisory xact, 2 clients on pg1", "advisory", recs)
    res.attempt(title, "PG advisory", "advisory", adv)

    def client(kind, cmd, label):
        def go():
            out = os.path.join(env.tmp, "%s_handoff.txt" % kind)
            run_json(cmd(env, "handoff", "/%s/handoff" % kind, env.secs, env.hold_ms, out),
                     env.secs + 180, "%s handoff" % kind)
            add(label, kind, read_recs(out))
        return go
    res.attempt(title, "Curator", "curator",
                client("curator", curator_cmd, "Curator InterProcessMutex (2 sessions)"))
    res.attempt(title, "Kazoo", "kazoo",
                client("kazoo", kazoo_cmd, "Kazoo Lock (2 processes)"))

    def fl():
        r = floor(env, "watch")
        res.add(title, "ZK floor: delete -> watch -> getChildren", "floor",
                None, r["p50_ms"], r["p99_ms"],
                "%d samples; watch event alone: p50 %.3f p99 %.3f" % (
                    r["samples"], r["watch_p50_ms"], r["watch_p99_ms"]))
    res.attempt(title, "ZK floor", "floor", fl)


def read_recs(fn):
    recs = []
    with open(fn) as f:
        for line in f:
            w, a, b, c = line.split()
            recs.append((int(w), float(a), float(b), float(c)))
    return recs


def unrelated_latency(env, pg=None):
    """1 client, session scope, on a resource nobody else uses"""
    script = session_script("zklock", "'bench_unrelated'")
    return pgbench_cycles(env, [(pg or env.pg1, script, 1)], "session")


def waiting_count(pg):
    return int(pg.psql("SELECT count(*) FROM pg_stat_activity "
                       "WHERE wait_event_type = 'Extension' AND state = 'active'"))


def scenario_scale(env, res):
    w = env.waiters
    half = w // 2
    t_unrel = "unrelated 1-client acquire, %d waiters queued elsewhere" % w
    t_drain = "drain %d waiters of 1 resource" % w
    log("scenario: %d waiters (zklock: %d per instance; max_connections = 200)" % (w, half))

    def zk():
        before = unrelated_latency(env)
        for pg in (env.pg1, env.pg2):
            pg.psql("TRUNCATE bench_grant")
        holder = PsqlSession(env.pg1)
        # After its grant and release, each waiter records when it was
        # granted and then waits at a gate (an advisory lock we hold on each
        # instance), so that no backend exits while the queue drains: 300
        # backend exits on 2 cores would be measured, not the handoffs.
        gates = [PsqlSession(pg) for pg in (env.pg1, env.pg2)]
        waiters = []
        try:
            for g in gates:
                g.query("SELECT pg_advisory_lock(4242)")
            holder.query("SELECT zk_lock_acquire_session('bench_scale')")
            script = (
                "SELECT extract(epoch FROM clock_timestamp()) AS tgot FROM "
                "(SELECT zk_lock_acquire_session('bench_scale') AS tok OFFSET 0) s \\gset\n"
                "SELECT zk_lock_release('bench_scale');\n"
                "INSERT INTO bench_grant VALUES (0, to_timestamp(:tgot), to_timestamp(:tgot));\n"
                "SELECT pg_advisory_lock_shared(4242);\n")
            waiters = [Pgbench(env, pg, script, n, txns=1, log_latencies=False)
                       for pg, n in ((env.pg1, half), (env.pg2, w - half))]
            deadline = time.time() + 180
            while time.time() < deadline:
                n1, n2 = waiting_count(env.pg1), waiting_count(env.pg2)
                if n1 + n2 >= w:
                    break
                for pb in waiters:
                    if pb.p.poll() is not None:
                        raise BenchError("a waiters' pgbench ended early: %s"
                                         % pb.p.stderr.read()[-500:])
                time.sleep(0.5)
            else:
                raise BenchError("only %d + %d of %d waiters waiting" % (n1, n2, w))
            # a backend waits (wait event Extension) from its request on;
            # its watch is set a round trip or two later: wait for all
            deadline = time.time() + 30
            while time.time() < deadline:
                watches = int(mntr(env.zk_port).get("zk_watch_count", -1))
                if watches >= w + 1:        # every waiter's + the holder's own
                    break
                time.sleep(0.2)
            with_ = unrelated_latency(env)
            n0 = notifications(env.zk_port)
            t0 = time.time()
            holder.query("SELECT zk_lock_release('bench_scale')")
            deadline = time.time() + 300
            while time.time() < deadline:
                got = sum(int(pg.psql("SELECT count(*) FROM bench_grant"))
                          for pg in (env.pg1, env.pg2))
                if got >= w:
                    break
                time.sleep(0.2)
            else:
                raise BenchError("only %d of %d waiters granted within 300 s" % (got, w))
            last = max(float(pg.psql("SELECT coalesce(max(extract(epoch FROM t_got)), 0) "
                                     "FROM bench_grant")) for pg in (env.pg1, env.pg2))
            drain = last - t0
            time.sleep(0.5)
            n1 = notifications(env.zk_port)
            for g in gates:
                g.close()
            for pb in waiters:
                pb.wait(timeout=120)
        finally:
            holder.close()
            for g in gates:
                g.close()
            for pb in waiters:
                kill_group(pb.p)
        res.add(t_unrel, "zklock session, pg1 (waiters %d+%d on pg1+pg2)" % (half, w - half),
                "zklock", with_[0], with_[1], with_[2],
                "max %.1f; no waiters: %.0f cyc/s p50 %.3f p99 %.3f max %.1f" % (
                    with_[5], before[0], before[1], before[2], before[5]))
        res.add(t_drain, "zklock (%d+%d backends)" % (half, w - half), "zklock",
                w / drain, None, None,
                "%.2f watch notifications per release (%d/%d); %d watches while queued; drain %.2f s"
                % ((n1 - n0) / (w + 1), n1 - n0, w + 1, watches, drain))
    res.attempt(t_unrel, "zklock", "zklock", zk)

    for name, cmdf, role in (("Curator InterProcessMutex", curator_cmd, "curator"),
                             ("Kazoo Lock", kazoo_cmd, "kazoo")):
        def other(name=name, cmdf=cmdf, role=role):
            r = run_json(cmdf(env, "scale", "/%s/scale" % role, w, env.secs),
                         2 * env.secs + 600, name + " scale")
            b, x = r["without"], r["with"]
            res.add(t_unrel, "%s (%d waiter sessions)" % (name, w), role,
                    x["cycles_per_s"], x["p50_ms"], x["p99_ms"],
                    "max %.1f; no waiters: %.0f cyc/s p50 %.3f p99 %.3f max %.1f" % (
                        x["max_ms"], b["cycles_per_s"], b["p50_ms"], b["p99_ms"], b["max_ms"]))
            res.add(t_drain, "%s (%d sessions)" % (name, w), role, r["grants_per_s"],
                    None, None,
                    "%.2f watch notifications per release (%d/%d); %d watches while queued; drain %.2f s"
                    % (r["notif_per_release"], r["notifications"], r["releases"],
                       r["watches_queued"], r["drain_s"]))
        res.attempt(t_unrel, name, role, other)


MANY_SQL = """
CREATE TEMP TABLE IF NOT EXISTS many_lat(ms float8);
TRUNCATE many_lat;
DO $$
DECLARE
  t0 timestamptz;
  start timestamptz := clock_timestamp();
  lat float8[] := '{{}}';
BEGIN
  FOR i IN 1..{count} LOOP
    EXIT WHEN clock_timestamp() - start > interval '{limit} s';
    t0 := clock_timestamp();
    PERFORM zk_lock_acquire_session('bench_many_' || i);
    lat := lat || (extract(epoch FROM clock_timestamp() - t0) * 1000)::float8;
  END LOOP;
  INSERT INTO many_lat SELECT unnest(lat);
END $$;
SELECT count(*), percentile_disc(0.5) WITHIN GROUP (ORDER BY ms),
       percentile_disc(0.99) WITHIN GROUP (ORDER BY ms) FROM many_lat
"""


def scenario_many(env, res):
    n = env.many
    t_take = "take %d locks, 1 client, one after another" % n
    t_unrel = "unrelated 1-client acquire while %d locks held" % n
    log("scenario: %d locks held by one instance" % n)

    def zk():
        sess = PsqlSession(env.pg1)
        try:
            base_in_use = int(env.pg1.psql("SELECT entries_in_use FROM zk_lock_status"))
            t0 = time.time()
            out = sess.query(MANY_SQL.format(count=n, limit=env.many_limit),
                             timeout=env.many_limit + 120)
            took = time.time() - t0
            cnt, p50, p99 = out[-1].split("|")
            cnt = int(cnt)
            m = mntr(env.zk_port)
            # what ZooKeeper receives while nothing happens, over one
            # zklock.sweep_interval (set to 10 s here; 1 min by default)
            # and a bit
            idle = env.many_idle
            r0 = int(m.get("zk_packets_received", 0))
            time.sleep(idle)
            bg = (int(mntr(env.zk_port).get("zk_packets_received", 0)) - r0) / idle
            # over one sweep interval at least, so that a sweep falls inside
            secs, env.secs = env.secs, max(env.secs, env.many_idle)
            try:
                with_ = unrelated_latency(env)
            finally:
                env.secs = secs
            t1 = time.time()
            rows = env.pg2.psql("SELECT count(*) FROM zk_locks", timeout=300)
            list_s = time.time() - t1
            t2 = time.time()
            sess.query("SELECT zk_lock_release_all()")
            deadline = time.time() + 120
            while time.time() < deadline:
                if int(env.pg1.psql("SELECT entries_in_use FROM zk_lock_status")) <= base_in_use:
                    break
                time.sleep(0.05)
            rel_s = time.time() - t2
        finally:
            sess.close()
        res.add(t_take, "zklock session, 1 backend on pg1", "zklock", cnt / took,
                float(p50), float(p99),
                "%d taken in %.1f s; %s watches, %s znodes held; idle, ZK receives %.0f "
                "requests/s; release_all + deletes %.2f s; zk_locks (from pg2) listed %s rows "
                "in %.2f s; latency server-side (plpgsql)"
                % (cnt, took, m.get("zk_watch_count"), m.get("zk_znode_count"), bg, rel_s,
                   rows, list_s))
        res.add(t_unrel, "zklock session, pg1", "zklock", *with_[:3],
                note="max %.1f (acquire latency, ms)" % with_[5])

    for name, cmdf, role in (("Curator InterProcessMutex", curator_cmd, "curator"),
                             ("Kazoo Lock", kazoo_cmd, "kazoo")):
        def other(name=name, cmdf=cmdf, role=role):
            r = run_json(cmdf(env, "many", "/%s/many" % role, n,
                              max(env.secs, env.many_idle), env.many_limit, env.many_idle),
                         env.many_limit + env.secs + env.many_idle + 300, name + " many")
            res.add(t_take, "%s, 1 session" % name, role, r["locks_per_s"], r["p50_ms"],
                    r["p99_ms"], "%d taken in %.1f s; %d watches, %d znodes held; idle, ZK "
                    "receives %.0f requests/s; release %.2f s"
                    % (r["taken"], r["take_s"], r["watches"], r["znodes"],
                       r["idle_requests_per_s"], r["release_s"]))
            x = r["with"]
            res.add(t_unrel, name, role, x["cycles_per_s"], x["p50_ms"], x["p99_ms"],
                    note="max %.1f (acquire latency, ms)" % x["max_ms"])
        res.attempt(t_take, name, role, other)

    # zklock last: its workers sweep every node under their root every
    # zklock.sweep_interval, and the 10,000 resources' container nodes stay
    # behind for a while after the release; they would load ZooKeeper under
    # the others' measurements.
    res.attempt(t_take, "zklock", "zklock", zk)


SCENARIOS = {
    "s1": lambda env, res: scenario_basic(
        env, res, "1 client, 1 resource, uncontended", "s1", 1, True),
    "s32": lambda env, res: scenario_basic(
        env, res, "32 clients, 32 distinct resources", "s2", 32, False),
    "excl8": lambda env, res: scenario_basic(
        env, res, "8 clients, 1 resource, EXCLUSIVE", "s3", 8, True),
    "shared8": lambda env, res: scenario_basic(
        env, res, "8 clients, 1 resource, SHARED", "s4", 8, True, shared=True),
    "handoff": lambda env, res: scenario_handoff(env, res),
    "scale": lambda env, res: scenario_scale(env, res),
    "many": lambda env, res: scenario_many(env, res),
}


# ---------------------------------------------------------------- report

def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


ROLE_ORDER = {"zklock": 0, "advisory": 1, "curator": 2, "kazoo": 3, "floor": 4}


def grouped(rows):
    """rows by scenario (in order of first appearance), zklock first in each"""
    first = {}
    for i, r in enumerate(rows):
        first.setdefault(r["scenario"], i)
    return sorted(rows, key=lambda r: (first[r["scenario"]], ROLE_ORDER.get(r["role"], 9)))


def with_ratios(rows):
    """for zklock rows: ratios to the scenario's Curator, Kazoo and floor rows"""
    rows = grouped(rows)
    out = []
    for r in rows:
        r = dict(r)
        for role in ("curator", "kazoo", "floor"):
            r["cps_" + role] = r["p50_" + role] = None
        if r["role"] == "zklock":
            peers = [x for x in rows if x["scenario"] == r["scenario"]]
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


def table(rows, meta):
    rows = with_ratios(rows)
    head = ["contender", "cycles/s", "p50 ms", "p99 ms", "zk/Curator", "zk/Kazoo",
            "zk/floor", "notes"]
    lines = []
    body = []
    scen = None
    for r in rows:
        if r["scenario"] != scen:
            scen = r["scenario"]
            body.append(("#", scen))
        body.append([r["contender"], num(r["cps"]), num(r["p50"]), num(r["p99"]),
                     rcell(r, "curator"), rcell(r, "kazoo"), rcell(r, "floor"),
                     r["note"]])
    widths = [max(len(head[i]), *(len(b[i]) for b in body if b[0] != "#"))
              for i in range(7)]
    fmt = lambda cells: "  ".join(  # noqa: E731
        (c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])) if i < 7 else c
        for i, c in enumerate(cells)).rstrip()
    lines.append(fmt(head))
    lines.append("-" * (sum(widths) + 2 * 7 + 5))
    for b in body:
        if b[0] == "#":
            lines.append("")
            lines.append("[%s]" % b[1])
        else:
            lines.append(fmt(b))
    lines.append("")
    lines += meta
    return "\n".join(lines)


def write_csv(rows, fn):
    rows = with_ratios(rows)
    cols = ["scenario", "contender", "role", "cps", "p50", "p99",
            "cps_curator", "p50_curator", "cps_kazoo", "p50_kazoo",
            "cps_floor", "p50_floor", "note"]
    names = ["scenario", "contender", "role", "cycles_per_s", "p50_ms", "p99_ms",
             "zk_over_curator_cycles", "zk_over_curator_p50",
             "zk_over_kazoo_cycles", "zk_over_kazoo_p50",
             "zk_over_floor_cycles", "zk_over_floor_p50", "notes"]
    with open(fn, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(names)
        for r in rows:
            w.writerow(["" if r[c] is None else (round(r[c], 4) if isinstance(r[c], float)
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
        if r["scenario"] not in scen and not r["scenario"].startswith("drain"):
            scen.append(r["scenario"])
    short = {s: short_name(s) for s in scen}
    data = os.path.join(tmp, "chart.dat")
    with open(data, "w") as f:
        f.write("scenario\t" + "\t".join('"%s"' % n for n, _ in families) + "\t" +
                "\t".join('"%s"' % n for n, _ in families) + "\n")
        for s in scen:
            cps, p50 = [], []
            for _, pred in families:
                cand = [r for r in rows if r["scenario"] == s and pred(r)]
                c = max((r["cps"] for r in cand if r["cps"]), default=None)
                l = min((r["p50"] for r in cand if r["p50"]), default=None)
                cps.append("?" if c is None or s.startswith("handoff") else "%.4f" % c)
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


# ---------------------------------------------------------------- setup / teardown

def cleanup(*_):
    for p in list(CHILDREN):
        try:
            kill_group(p)
        except Exception:   # noqa: BLE001 -- best effort on the way out
            pass
    CHILDREN.clear()
    for pg in STATE["pgs"]:
        try:
            pg.stop()
        except Exception:   # noqa: BLE001
            pass
    STATE["pgs"] = []
    try:
        zk_stop()
    except Exception:       # noqa: BLE001
        pass
    if STATE["tmp"] and not STATE["keep"]:
        shutil.rmtree(STATE["tmp"], ignore_errors=True)
        STATE["tmp"] = None


def on_signal(signum, _frame):
    raise KeyboardInterrupt("signal %d" % signum)


def start_watchdog(tmp, pgs):
    """stop the servers and remove the work folder if this process dies
    without cleaning up (killed hard)"""
    stops = " ; ".join(" ".join(as_owner([PGBIN + "/pg_ctl", "-D", pg.data, "-m",
                                          "immediate", "-w", "-t", "30", "stop"]))
                       for pg in pgs)
    zk = "bash %s stop %s/zk" % (os.path.join(ROOT, "test", "zk_server.sh"), tmp)
    rm = "" if STATE["keep"] else "; rm -rf %s" % tmp
    script = ("while kill -0 %d 2>/dev/null; do sleep 1; done; "
              "if [ -d %s ]; then %s; %s%s; fi >/dev/null 2>&1") % (
                  os.getpid(), tmp, stops, zk, rm)
    subprocess.Popen(["bash", "-c", script], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)


def setup(env, instances):
    tmp = tempfile.mkdtemp(prefix="zklock-bench.")
    STATE["tmp"] = env.tmp = tmp
    os.chmod(tmp, 0o755)
    os.makedirs(os.path.join(tmp, "sock"))
    os.makedirs(os.path.join(tmp, "pgbench"))
    if IS_ROOT:
        pw = pwd.getpwnam(RUN_AS)
        for d in (tmp, os.path.join(tmp, "sock")):
            os.chown(d, pw.pw_uid, pw.pw_gid)
    log("work folder " + tmp)

    env.hosts, env.zk_port = zk_start(tmp)
    log("ZooKeeper (standalone, test/zk_server.sh) at " + env.hosts)

    build = os.path.join(tmp, "build")
    os.makedirs(build)
    env.zk_floor = os.path.join(build, "zk_floor")
    run(["gcc", "-O2", "-Wall", "-Werror", "-o", env.zk_floor,
         os.path.join(HERE, "zk_floor.c"), "-lzookeeper_mt", "-lpthread"])

    port = free_port(instances)
    pgs = [PG("pg%d" % (i + 1), tmp, env.hosts, port + i) for i in range(instances)]
    for pg in pgs:
        pg.init()
    start_watchdog(tmp, pgs)
    for pg in pgs:
        pg.start()
    for pg in pgs:
        pg.psql("CREATE EXTENSION zklock")
        pg.psql("CREATE UNLOGGED TABLE bench_grant(who int, t_req timestamptz, t_got timestamptz);"
                "CREATE UNLOGGED TABLE bench_release(who int, t_rel timestamptz)")
    for pg in pgs:
        pg.wait_connected()
    env.pg1 = pgs[0]
    env.pg2 = pgs[1] if len(pgs) > 1 else None
    log("PostgreSQL: %s (zklock, max_connections 200)" % ", ".join(
        "%s port %d" % (pg.name, pg.port) for pg in pgs))
    return build


def compile_curator(env, build):
    cp = ":".join(os.path.join(JAVA_DIR, j) for j in JARS)
    run(["javac", "-nowarn", "-d", build, "-cp", cp,
         os.path.join(HERE, "CuratorBench.java")], timeout=180)
    env.curator_cp = build + ":" + cp


def versions():
    v = []
    try:
        v.append(run([PGBIN + "/postgres", "--version"]).stdout.strip())
    except Exception:   # noqa: BLE001
        pass
    for pkg in ("zookeeper", "libcurator-recipes-java", "python3-kazoo",
                "libzookeeper-mt2"):
        r = run(["dpkg-query", "-W", "-f", "${Version}", pkg], check=False)
        v.append("%s %s" % (pkg, r.stdout.strip() or "?"))
    return v


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="~2 s per measurement, no scale scenarios (CI)")
    ap.add_argument("--csv", metavar="FILE")
    ap.add_argument("--png", metavar="FILE")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--secs", type=float, help="seconds per measurement")
    ap.add_argument("--only", metavar="LIST",
                    help="comma-separated subset of: %s" % ",".join(SCENARIOS))
    ap.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--soak", action="store_true",
                    help="memory over a run at full rate (default 600 s; --secs to change)")
    ap.add_argument("--profile", action="store_true",
                    help="CPU time and context switches per cycle, by process")
    ap.add_argument("--clients", type=int, default=1,
                    help="with --profile: clients, each on its own resource")
    ap.add_argument("--min-ratio", type=float, default=0.25, help=argparse.SUPPRESS)
    a = ap.parse_args()
    only = a.only.split(",") if a.only else [
        k for k in SCENARIOS if not (a.quick and k in ("scale", "many"))]
    for k in only:
        if k not in SCENARIOS:
            ap.error("unknown scenario %r (known: %s)" % (k, ",".join(SCENARIOS)))
    for opt in ("csv", "png"):
        if getattr(a, opt):
            setattr(a, opt, os.path.abspath(getattr(a, opt)))

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    STATE["keep"] = a.keep
    env = Env()
    env.secs = a.secs or (2 if a.quick else 5)
    env.warmup = 0.5 if (a.quick or a.smoke) else 1.0
    env.hold_ms = 5
    env.waiters = 300
    env.many = 10000
    env.many_limit = 60
    env.many_idle = 11.0
    t_start = time.time()
    try:
        if a.smoke:
            return smoke(env, a.min_ratio)
        if a.soak:
            env.secs = a.secs or 600
            return soak(env)
        if a.profile:
            env.secs = a.secs or 6
            return profile(env, a.clients)
        build = setup(env, 2)
        compile_curator(env, build)
        res = Results()
        for k in SCENARIOS:
            if k in only:
                SCENARIOS[k](env, res)
        took = time.time() - t_start
        meta = [
            "cycles/s: lock+unlock cycles per second, all clients together (handoff: handoffs/s; "
            "drain: grants/s; take: locks/s).",
            "p50/p99: acquire latency in ms, as the client sees it (handoff: from the releaser's "
            "release to the waiter's return).",
            "zk/X cells: \"cycles/s ratio / p50 ratio\" of the zklock row to the scenario's X row "
            "(>1 / <1 favour zklock); floor = the fastest ZK-floor row.",
            "* txn rows: p50/p99 of the whole BEGIN;acquire;COMMIT (pgbench logs whole transactions "
            "only; the notes give each statement's mean); session rows time each acquire alone.",
            "ZK per cycle: requests ZooKeeper received (mntr zk_packets_received) and watch "
            "notifications it sent (zk_sum_node_*_watch_count), divided by the cycles run.",
            "%g s per measurement%s%s; one standalone ZooKeeper (test/zk_server.sh, tickTime 200, "
            "forceSync=no) for every contender; PostgreSQL fsync=off, synchronous_commit=off; "
            "2 cores shared by all." % (env.secs, " (with 10,000 locks held: %g s, one zklock.sweep_interval)" % env.many_idle
                  if "many" in only else "",
                  ", scale scenarios skipped" if "scale" not in only
                                        else "; scale: %d waiters (150 per instance for zklock, "
                                        "max_connections 200), not 1,000" % env.waiters),
            "versions: " + "; ".join(versions()) + ".  Run took %.0f s." % took,
        ]
        text = table(res.rows, meta)
        print(text, flush=True)
        if a.csv:
            write_csv(res.rows, a.csv)
            log("CSV written to " + a.csv)
        if a.png:
            try:
                write_png(res.rows, a.png, env.tmp, "zklock benchmark, %s" %
                          time.strftime("%Y-%m-%d %H:%M"))
                log("chart written to " + a.png)
            except Exception as e:   # noqa: BLE001
                res.failed.append("chart: %s" % e)
        if res.failed:
            log("%d measurement(s) failed:" % len(res.failed))
            for f in res.failed:
                log("  " + f)
            return 1
        return 0
    except KeyboardInterrupt as e:
        log("interrupted (%s); stopping what was started" % (e or "SIGINT"))
        if a.smoke:
            print("bench: 0 passed, 1 failed")
        return 130
    except (BenchError, subprocess.TimeoutExpired, OSError) as e:
        log("error: %s" % e)
        if STATE["tmp"]:
            STATE["keep"] = True
            log("logs kept in " + STATE["tmp"])
        if a.smoke:
            print("bench: 0 passed, 1 failed")
        return 1
    finally:
        cleanup()


# ---------------------------------------------------------------- profile

def proc_sample(pids):
    """CPU seconds (user+system) and context switches (voluntary and not)
    of these processes, all their threads counted"""
    tick = os.sysconf("SC_CLK_TCK")
    cpu = 0.0
    cs = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cpu += (int(fields[11]) + int(fields[12])) / tick
            for t in os.listdir("/proc/%d/task" % pid):
                with open("/proc/%d/task/%s/status" % (pid, t)) as f:
                    for line in f:
                        if "ctxt_switches:" in line:
                            cs += int(line.split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return cpu, cs


def children_sample():
    """the same for our reaped children (pgbench, zk_floor)"""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime, r.ru_nvcsw + r.ru_nivcsw


def children_of(ppid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == ppid:
                        out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


def zk_server_pids():
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    cmd = f.read().decode("utf-8", "replace")
            except OSError:
                continue
            if "java" in cmd and STATE["zkdir"] and STATE["zkdir"] in cmd:
                out.append(int(d))
    return out


def profile(env, clients=1):
    """
    Where a lock cycle's time goes: CPU time and context switches per cycle
    of each process taking part, for zklock's 1-client session cycle
    (pgbench, its backend, the zklock worker with libzookeeper_mt's threads,
    ZooKeeper) and for the floor's synchronous create+delete.
    """
    setup(env, 1)
    pg = env.pg1
    with open(os.path.join(pg.data, "postmaster.pid")) as f:
        pm = int(f.readline())
    worker = int(pg.psql("SELECT worker_pid FROM zk_lock_status"))
    zk = zk_server_pids()
    script = session_script("zklock", "'bench_profile' || :client_id")
    Pgbench(env, pg, script, clients, txns=500).wait()      # warm-up, not counted
    rows = []

    def measure(what, client, proc, count):
        """sample every process over a window inside the run (all of them
        live through it); count() tells the cycles done so far"""
        time.sleep(1.0)
        groups = {"ZooKeeper server (JVM)": zk, "zklock worker (all threads)": [worker],
                  "PostgreSQL backends": [c for c in children_of(pm) if c != worker],
                  client: [proc.pid]}
        c0, t0 = count(), time.time()
        before = {k: proc_sample(v) for k, v in groups.items()}
        time.sleep(max(1.0, env.secs - 2.0))
        after = {k: proc_sample(v) for k, v in groups.items()}
        cycles, wall = count() - c0, time.time() - t0
        for k in groups:
            rows.append((what, k, (after[k][0] - before[k][0]) / cycles * 1e6,
                         (after[k][1] - before[k][1]) / cycles))
        rows.append((what, "(wall time per cycle)", wall / cycles * 1e6, None))

    def granted():
        return int(pg.psql("SELECT granted FROM zk_lock_status"))

    def zk_requests_half():
        return int(mntr(env.zk_port)["zk_packets_received"]) / 2.0

    pb = Pgbench(env, pg, script, clients, secs=env.secs, log_latencies=False)
    measure("zklock session cycle, %d client%s" % (clients, "s" if clients > 1 else ""),
            "pgbench (client)", pb.p, granted)
    pb.wait()
    p = spawn([env.zk_floor, env.hosts, "sync", str(env.secs), str(clients)])
    measure("ZK floor: sync create+delete, %d session%s" % (clients, "s" if clients > 1 else ""),
            "zk_floor (client)", p, zk_requests_half)
    finish(p, env.secs + 90, "zk_floor sync")
    print("%-42s %-28s %13s %19s" % ("run", "process", "CPU us/cycle", "ctx switches/cycle"))
    for what, proc, us, cs in rows:
        print("%-42s %-28s %13.1f %19s" % (what, proc, us, "" if cs is None else "%.2f" % cs))
    return 0


# ---------------------------------------------------------------- soak

def rss_anon_kb(pid):
    """a process's private (anonymous) resident memory: what it malloc'd or
    palloc'd, without the shared memory it touched"""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


def soak(env):
    """
    Memory at full rate: 8 clients cycling session locks on 8 resources
    (transaction and session scope, 4 each) for env.secs seconds; every
    30 s, the worker's and the busiest backend's anonymous RSS and zklock's
    shared memory.  Growth per cycle must be nil.
    """
    setup(env, 1)
    pg = env.pg1
    worker = int(pg.psql("SELECT worker_pid FROM zk_lock_status"))
    shmem = pg.psql("SELECT coalesce(sum(allocated_size), 0) FROM pg_shmem_allocations "
                    "WHERE name LIKE 'zklock%'")
    maxconn = pg.psql("SHOW max_connections")
    per = pg.psql("SHOW zklock.max_locks")
    sess = Pgbench(env, pg, session_script("zklock", "'soak_s' || :client_id"), 4,
                   secs=env.secs, log_latencies=False)
    xact = Pgbench(env, pg, xact_script("zklock", "'soak_x' || :client_id"), 4,
                   secs=env.secs, log_latencies=False)
    t0 = time.time()
    samples = []
    while time.time() - t0 < env.secs - 5:
        time.sleep(min(30, max(1, env.secs - 5 - (time.time() - t0))))
        backends = pg.psql("SELECT string_agg(pid::text, ' ') FROM pg_stat_activity "
                           "WHERE application_name = 'pgbench'").split()
        grants = int(pg.psql("SELECT granted FROM zk_lock_status"))
        samples.append((time.time() - t0, grants, rss_anon_kb(worker),
                        max(rss_anon_kb(int(b)) for b in backends) if backends else 0,
                        pg.psql("SELECT coalesce(sum(allocated_size), 0) FROM pg_shmem_allocations "
                                "WHERE name LIKE 'zklock%'")))
        log("soak: %4.0f s, %d grants, worker RssAnon %d kB, largest backend RssAnon %d kB, "
            "zklock shared memory %s bytes" % samples[-1])
    sess.wait()
    xact.wait()
    print("%8s %12s %18s %22s %20s" % ("seconds", "grants", "worker RssAnon kB",
                                       "max backend RssAnon kB", "zklock shmem bytes"))
    for t, g, w, b, sh in samples:
        print("%8.0f %12d %18d %22d %20s" % (t, g, w, b, sh))
    if len(samples) >= 3:
        first, last = samples[1], samples[-1]      # after warm-up
        dg = max(1, last[1] - first[1])
        print("worker growth after warm-up: %d kB over %d grants (%.4f bytes per grant); "
              "backend growth: %d kB" % (last[2] - first[2], dg,
                                         (last[2] - first[2]) * 1024.0 / dg, last[3] - first[3]))
    print("zklock shared memory: %s bytes with max_connections = %s and "
          "zklock.max_locks = %s (fixed at start; with zklock.max_locks = 0 it grows "
          "linearly with max_connections: max_locks_per_backend entries per backend slot)"
          % (shmem, maxconn, per))
    return 0


def smoke(env, min_ratio, rounds=3):
    """
    zklock's 1-client session cycle against ZooKeeper's sync create+delete,
    in alternating 1-second rounds; each side keeps its best round, so that
    a burst of load from elsewhere on the machine does not fail the check.
    """
    setup(env, 1)
    script = session_script("zklock", "'bench_smoke'")
    Pgbench(env, env.pg1, script, 1, txns=200).wait()      # warm-up, not counted
    env.secs = 1
    zk, fl = [], []
    for _ in range(rounds):
        zk.append(pgbench_cycles(env, [(env.pg1, script, 1)], "session"))
        fl.append(floor(env, "sync", 1))
    best_zk = max(zk, key=lambda r: r[0])
    best_fl = max(fl, key=lambda r: r["cycles"])
    floor_cps = best_fl["cycles"] / env.secs
    r = best_zk[0] / floor_cps if floor_cps else 0.0
    print("zklock session cycle, 1 client: %.0f cycles/s (acquire p50 %.3f ms, p99 %.3f ms); "
          "rounds: %s" % (best_zk[0], best_zk[1], best_zk[2],
                          " ".join("%.0f" % z[0] for z in zk)))
    print("ZooKeeper floor, sync create+delete, 1 session: %.0f cycles/s (create p50 %.3f ms); "
          "rounds: %s" % (floor_cps, best_fl["p50_ms"],
                          " ".join("%.0f" % (f["cycles"] / env.secs) for f in fl)))
    ok = r >= min_ratio
    print("zklock/floor = %.2f (must be >= %.2f): %s" % (r, min_ratio, "ok" if ok else "REGRESSION"))
    print("bench: %d passed, %d failed" % (1 if ok else 0, 0 if ok else 1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
