"""servers.py -- the servers every contender talks to, and the processes we
start: one standalone ZooKeeper (test/zk_server.sh), PostgreSQL 15 instances
with zklock (run as `postgres` when we are root), psql sessions kept open,
and the cleanup that stops all of it (on exit, on signals and, through a
watchdog, when this process is killed hard)."""
import json
import os
import pwd
import queue
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

from common import PGBIN, ROOT, BenchError, log

RUN_AS = "postgres"
IS_ROOT = os.geteuid() == 0

CHILDREN = []          # Popen objects we started (each in its own group)
STATE = {"tmp": None, "zkdir": None, "pgs": [], "keep": False}


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

# ---------------------------------------------------------------- ZooKeeper

def zk_start(tmp, servers=1):
    """a standalone ZooKeeper (servers=1) or a 3-server ensemble, on
    loopback, with test/zk_server.sh; returns (connect string, client ports)"""
    zkdir = os.path.join(tmp, "zk")
    base = free_port(3 * servers)
    r = run(["bash", os.path.join(ROOT, "test", "zk_server.sh"), "start", zkdir,
             "--servers", str(servers), "--base-port", str(base),
             "--owner-pid", str(os.getpid())], timeout=120)
    STATE["zkdir"] = zkdir
    return r.stdout.strip().splitlines()[-1], [base + 3 * i for i in range(servers)]


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


def mntr_sum(env, key):
    """a per-server mntr figure summed over the servers (watches, ...)"""
    return sum(int(mntr(p).get(key, 0)) for p in env.zk_ports)


def srvr(port):
    """ZooKeeper's own counters from the srvr four-letter word: packets
    received and sent (the counters mntr calls zk_packets_received/sent;
    srvr's answer is one small packet, mntr's a variable number) and the
    last zxid the server applied"""
    out = fourlw(port, "srvr")
    get = lambda k: re.search(r"^%s: (\S+)" % k, out, re.M)   # noqa: E731
    rec, sent, zxid = get("Received"), get("Sent"), get("Zxid")
    if not (rec and sent and zxid):
        raise BenchError("srvr on port %d: no counters in %r" % (port, out[:200]))
    return int(rec.group(1)), int(sent.group(1)), int(zxid.group(1), 16)


def zk_snapshot(env):
    """(time, packets received, packets sent, zxid) of the whole ZooKeeper:
    packets summed over the servers (each client talks to one; quorum
    traffic is not counted there), the zxid the newest any server has (one
    per write transaction, a multi included, and per session created or
    closed).  Each read is one srvr request to each server: between two
    snapshots, the second's requests and the first's answers are ours,
    which ZkCounter and zk_rates subtract."""
    t = time.time()
    rec = sent = zxid = 0
    for p in env.zk_ports:
        r, s, z = srvr(p)
        rec, sent, zxid = rec + r, sent + s, max(zxid, z)
    return t, rec, sent, zxid


def zk_delta(env, a, b):
    """(seconds, requests, packets sent, write transactions) from snapshot
    a to b, our own srvr requests and answers taken out"""
    n = len(env.zk_ports)
    return b[0] - a[0], b[1] - a[1] - n, b[2] - a[2] - n, b[3] - a[3]


def zk_rates(env, secs):
    """ZooKeeper's rates over a quiet interval (nothing measured runs):
    requests/s, packets sent/s, write transactions/s"""
    a = zk_snapshot(env)
    time.sleep(secs)
    dt, req, sent, wr = zk_delta(env, a, zk_snapshot(env))
    return {"req": req / dt, "sent": sent / dt, "wr": wr / dt, "secs": dt}


NO_IDLE = {"req": 0.0, "sent": 0.0, "wr": 0.0, "secs": 0.0}


class ZkCounter:
    """ZooKeeper requests, packets sent, write transactions and watch
    notifications during a measurement; counts() gives them per cycle with
    the idle rate (env.idle, measured by bench.py over a quiet interval of
    the same run: the instances' pings and sweeps) taken out"""

    def __init__(self, env):
        self.env = env

    def __enter__(self):
        self.n0 = notifications(self.env)
        self.s0 = zk_snapshot(self.env)
        return self

    def __exit__(self, *exc):
        s1 = zk_snapshot(self.env)
        self.notif = notifications(self.env) - self.n0
        self.secs, self.req, self.sent, self.wr = zk_delta(self.env, self.s0, s1)
        return False

    def counts(self, cycles):
        """{req, wr, sent, notif} per cycle, idle rate subtracted"""
        if not cycles:
            return None
        idle = getattr(self.env, "idle", None) or NO_IDLE
        return {"req": (self.req - idle["req"] * self.secs) / cycles,
                "wr": (self.wr - idle["wr"] * self.secs) / cycles,
                "sent": (self.sent - idle["sent"] * self.secs) / cycles,
                "notif": self.notif / cycles, "unit": "cycle"}

    def note(self, cycles):
        if not cycles:
            return ""
        return "%.2f watch notifications per cycle" % (self.notif / cycles)


def notifications(env):
    """watch notifications ZooKeeper has sent so far, all event types,
    all servers"""
    n = 0
    for p in env.zk_ports:
        m = mntr(p)
        n += sum(int(m.get("zk_sum_node_%s_watch_count" % k, 0))
                 for k in ("created", "deleted", "children", "changed"))
    return n


# ---------------------------------------------------------------- PostgreSQL

class PG:
    """one PostgreSQL 15 instance with zklock; bindir: the installation it
    runs from (zklock installed there), conf: settings added at the end"""

    def __init__(self, name, tmp, hosts, port, bindir=PGBIN, conf=""):
        self.name = name
        self.bin = bindir
        self.extra_conf = conf
        self.data = os.path.join(tmp, name)
        self.sock = os.path.join(tmp, "sock")
        self.port = port
        self.hosts = hosts
        self.logfile = os.path.join(tmp, name + ".log")

    def conn(self):
        return ["-h", self.sock, "-p", str(self.port), "-U", "postgres"]

    def init(self):
        run(as_owner([self.bin + "/initdb", "-D", self.data, "-A", "trust",
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
        conf += self.extra_conf
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(conf)

    def start(self):
        run(as_owner([self.bin + "/pg_ctl", "-D", self.data, "-l", self.logfile,
                      "-w", "-t", "60", "start"]), timeout=90)
        STATE["pgs"].append(self)

    def stop(self):
        subprocess.run(as_owner([self.bin + "/pg_ctl", "-D", self.data, "-m", "fast",
                                 "-w", "-t", "60", "stop"]),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=90)

    def psql(self, sql, timeout=120):
        r = run([self.bin + "/psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
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
            [pg.bin + "/psql", "-X", "-q", "-A", "-t", *pg.conn(), "-d", "postgres"],
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


def run_json(cmd, timeout, what):
    out = finish(spawn(cmd), timeout, what)
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if not lines:
        raise BenchError("%s printed no result: %s" % (what, out[-500:]))
    return json.loads(lines[-1])

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
    without cleaning up (killed hard).  With PGBIN's pg_ctl, whichever
    installation an instance runs from: any PostgreSQL 15 pg_ctl stops it,
    and a private copy (run.sh --baseline) may be gone by then."""
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


def setup(env, instances, builds=None):
    """
    The work folder, ZooKeeper and `instances` PostgreSQL instances (pg1,
    pg2, ...) as env.pg1, env.pg2.  builds: [(label, bindir, conf)] to start
    `instances` instances of each (label1, label2, ...) instead, listed in
    env.sides[label]; env.pg1/pg2 are then the first build's.  Returns the
    folder where clients are compiled.
    """
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

    servers = 3 if getattr(env, "ensemble", False) else 1
    env.hosts, env.zk_ports = zk_start(tmp, servers)
    env.zk_port = env.zk_ports[0]
    log("ZooKeeper (%s, test/zk_server.sh) at %s" % (
        "3-server ensemble" if servers > 1 else "standalone", env.hosts))

    build = os.path.join(tmp, "build")
    os.makedirs(build)

    builds = builds or [("pg", PGBIN, "")]
    port = free_port(instances * len(builds))
    env.sides = {}
    pgs = []
    for label, bindir, conf in builds:
        env.sides[label] = [PG("%s%d" % (label, i + 1), tmp, env.hosts, port + len(pgs) + i,
                               bindir, conf) for i in range(instances)]
        pgs += env.sides[label]
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
    first = env.sides[builds[0][0]]
    env.pg1 = first[0]
    env.pg2 = first[1] if len(first) > 1 else None
    log("PostgreSQL: %s (zklock, max_connections 200)" % ", ".join(
        "%s port %d" % (pg.name, pg.port) for pg in pgs))
    return build


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
