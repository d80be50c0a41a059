"""modes.py -- the runs other than the table: --smoke (the CI check against
the floor), --profile (CPU time and context switches per cycle, by process)
and --soak (memory at full rate)."""
import os
import resource
import time

from common import log
from runner_floor import compile_floor, floor
from runner_pg import Pgbench, pgbench_cycles, session_script, xact_script
from servers import STATE, ZkCounter, finish, mntr, setup, spawn, zk_rates


def start(env, instances):
    """ZooKeeper, the instances and the floor's client"""
    compile_floor(env, setup(env, instances))


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
    start(env, 1)
    pg = env.pg1
    with open(os.path.join(pg.data, "postmaster.pid")) as f:
        pm = int(f.readline())
    worker = int(pg.psql("SELECT worker_pid FROM zk_lock_status"))
    zk = zk_server_pids()
    script = session_script("zklock", "'bench_profile' || :client_id::text")
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
    start(env, 1)
    pg = env.pg1
    worker = int(pg.psql("SELECT worker_pid FROM zk_lock_status"))
    shmem = pg.psql("SELECT coalesce(sum(allocated_size), 0) FROM pg_shmem_allocations "
                    "WHERE name LIKE 'zklock%'")
    maxconn = pg.psql("SHOW max_connections")
    per = pg.psql("SHOW zklock.max_locks")
    sess = Pgbench(env, pg, session_script("zklock", "'soak_s' || :client_id::text"), 4,
                   secs=env.secs, log_latencies=False)
    xact = Pgbench(env, pg, xact_script("zklock", "'soak_x' || :client_id::text"), 4,
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


def smoke_messages(env, max_req, cycles=1000):
    """
    What a flat, uncontended zklock cycle costs ZooKeeper: one client's
    session-scope acquire (parents => false) and release, `cycles` times,
    on the smoke's own ZooKeeper (one instance connected, nothing else);
    requests, write transactions and packets sent per cycle, the idle rate
    measured just before subtracted.  Returns (ok, counts).
    """
    script = session_script("zklock", "'bench_smoke_flat'", flat=True)
    Pgbench(env, env.pg1, script, 1, txns=200, log_latencies=False).wait()   # warm-up
    env.idle = zk_rates(env, 3.0)
    with ZkCounter(env) as z:
        Pgbench(env, env.pg1, script, 1, txns=2 * cycles, log_latencies=False).wait()
    c = z.counts(cycles)
    # a count a little over the integer (the idle rate is an estimate) is
    # still that integer: 0.05 of slack per cycle
    ok = c["req"] <= max_req + 0.05
    print("zklock flat uncontended cycle (session acquire parents => false + release, "
          "1 client, %d cycles): ZooKeeper per cycle: %.2f requests, %.2f write transactions, "
          "%.2f packets sent, %.2f watch notifications (idle %.2f requests/s subtracted); "
          "requests must be <= %g (ZKLOCK_SMOKE_MAX_REQUESTS): %s"
          % (cycles, c["req"], c["wr"], c["sent"], c["notif"], env.idle["req"], max_req,
             "ok" if ok else "REGRESSION"))
    return ok, c


def smoke(env, min_ratio, max_req, rounds=3):
    """
    Two checks.  zklock's 1-client session cycle against ZooKeeper's sync
    create+delete, in alternating 1-second rounds; each side keeps its best
    round, so that a burst of load from elsewhere on the machine does not
    fail the check.  Then the messages a flat uncontended cycle costs
    ZooKeeper (smoke_messages), at most max_req requests.
    """
    start(env, 1)
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
    ok2, _ = smoke_messages(env, max_req)
    passed = int(ok) + int(ok2)
    print("bench: %d passed, %d failed" % (passed, 2 - passed))
    return 0 if ok and ok2 else 1
