#!/usr/bin/python3
"""kazoo_bench.py -- Kazoo 2.8's Lock and ReadLock under bench/run.sh's
scenarios.  Run with Debian's /usr/bin/python3 (python3-kazoo).

One KazooClient per client; with more than one client, one process per
client (multiprocessing) so that the GIL does not serialize them.  The
scale scenario's waiters, which only wait, run as threads spread over a few
processes.

  kazoo_bench.py cycles  HOSTS BASE RECIPE CLIENTS same|distinct SECS WARMUP
  kazoo_bench.py handoff HOSTS BASE SECS HOLD_MS OUTFILE
  kazoo_bench.py scale   HOSTS BASE WAITERS SECS
  kazoo_bench.py many    HOSTS BASE COUNT SECS LIMIT_SECS [IDLE_SECS]

RECIPE is mutex (Lock), read (ReadLock) or write (WriteLock).  Prints one
JSON line on stdout; handoff also writes "who t_req t_got t_rel" lines
(time.monotonic(), i.e. CLOCK_MONOTONIC, seconds) to OUTFILE.  Every loop
and wait is bounded.
"""
import json
import logging
import math
import multiprocessing as mp
import os
import socket
import sys
import threading
import time

from kazoo.client import KazooClient

logging.basicConfig(level=logging.CRITICAL)

HOSTS = None


def client():
    zk = KazooClient(hosts=HOSTS, timeout=10.0)
    zk.start(timeout=20)
    return zk


def make_lock(zk, path, recipe):
    if recipe == "mutex":
        return zk.Lock(path, "kazoo_bench")
    if recipe == "read":
        return zk.ReadLock(path, "kazoo_bench")
    if recipe == "write":
        return zk.WriteLock(path, "kazoo_bench")
    raise ValueError(recipe)


def acquire(lock, timeout=60):
    if not lock.acquire(timeout=timeout):
        raise RuntimeError("lock not acquired within %s s" % timeout)


def pct(values, p):
    """nearest-rank percentile, values in seconds -> ms"""
    if not values:
        return -1.0
    s = sorted(values)
    k = max(1, min(len(s), int(math.ceil(p * len(s)))))
    return s[k - 1] * 1000.0


def mntr():
    host, port = HOSTS.split(",")[0].split(":")
    out = b""
    with socket.create_connection((host, int(port)), timeout=3) as s:
        s.sendall(b"mntr")
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    m = {}
    for line in out.decode("ascii", "replace").splitlines():
        kv = line.split("\t")
        if len(kv) == 2:
            m[kv[0].strip()] = kv[1].strip()
    return m


def notifications():
    m = mntr()
    return sum(int(m.get("zk_sum_node_%s_watch_count" % k, 0))
               for k in ("created", "deleted", "children", "changed"))


# ---------------------------------------------------------------- cycles

def cycle_loop(zk, path, recipe, start, end):
    """acquire/release until end; count cycles inside [start, end]"""
    lock = make_lock(zk, path, recipe)
    lat = []
    n = every = 0
    while True:
        t0 = time.monotonic()
        if t0 >= end:
            break
        acquire(lock)
        t1 = time.monotonic()
        lock.release()
        every += 1
        if t0 >= start and t1 <= end:
            n += 1
            lat.append(t1 - t0)
    return n, lat, every


def cycle_proc(path, recipe, barrier, window, q):
    try:
        zk = client()
        barrier.wait(60)
        start, end = window[0], window[1]
        n, lat, every = cycle_loop(zk, path, recipe, start, end)
        zk.stop()
        zk.close()
        q.put((n, lat, every, None))
    except Exception as e:  # reported by the parent
        q.put((0, [], 0, repr(e)))


def collect(q, procs, timeout):
    """each client process's result (its tuple without the trailing error);
    raises if any client failed"""
    results, errs = [], []
    for _ in procs:
        *r, err = q.get(timeout=timeout)
        results.append(r)
        if err:
            errs.append(err)
    for p in procs:
        p.join(30)
    if errs:
        raise RuntimeError("; ".join(errs))
    return results


def run_cycles(base, recipe, nclients, same, secs, warmup):
    if nclients == 1:
        zk = client()
        start = time.monotonic() + warmup
        n, lat, every = cycle_loop(zk, base + "/r", recipe, start, start + secs)
        zk.stop()
        zk.close()
        return n / secs, pct(lat, .5), pct(lat, .99), n, every, max(lat) * 1e3
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(nclients + 1)
    window = ctx.Array("d", 2)
    q = ctx.Queue()
    procs = []
    for i in range(nclients):
        path = base + "/r" if same else "%s/r%d" % (base, i)
        p = ctx.Process(target=cycle_proc,
                        args=(path, recipe, barrier, window, q), daemon=True)
        p.start()
        procs.append(p)
    # every client is connected at the barrier; the window starts after
    window[0] = time.monotonic() + 0.2 + warmup
    window[1] = window[0] + secs
    barrier.wait(120)
    total, lat, every = 0, [], 0
    for n, l, e in collect(q, procs, secs + warmup + 180):
        total += n
        every += e
        lat.extend(l)
    return total / secs, pct(lat, .5), pct(lat, .99), total, every, max(lat) * 1e3


def cmd_cycles(a):
    base, recipe, n, same = a[0], a[1], int(a[2]), a[3] == "same"
    secs, warmup = float(a[4]), float(a[5])
    cps, p50, p99, total, every, _ = run_cycles(base, recipe, n, same, secs, warmup)
    print(json.dumps({"cycles_per_s": cps, "p50_ms": p50, "p99_ms": p99,
                      "cycles": total, "all_cycles": every, "secs": secs,
                      "clients": n}))


# ---------------------------------------------------------------- handoff

def handoff_proc(who, path, hold, end, barrier, q):
    try:
        zk = client()
        lock = make_lock(zk, path, "mutex")
        rec = []
        barrier.wait(60)
        while time.monotonic() < end.value:
            t_req = time.monotonic()
            acquire(lock)
            t_got = time.monotonic()
            time.sleep(hold)
            t_rel = time.monotonic()
            lock.release()
            rec.append((who, t_req, t_got, t_rel))
        zk.stop()
        zk.close()
        q.put((rec, None))
    except Exception as e:
        q.put(([], repr(e)))


def cmd_handoff(a):
    base, secs, hold_ms, out = a[0], float(a[1]), float(a[2]), a[3]
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(3)
    end = ctx.Value("d", 0.0)
    q = ctx.Queue()
    procs = [ctx.Process(target=handoff_proc,
                         args=(i, base + "/pingpong", hold_ms / 1000.0, end,
                               barrier, q), daemon=True) for i in range(2)]
    for p in procs:
        p.start()
    end.value = time.monotonic() + 60 + secs  # until the barrier is passed
    barrier.wait(60)
    end.value = time.monotonic() + secs
    recs = []
    for (r,) in collect(q, procs, secs + 120):
        recs.extend(r)
    with open(out, "w") as f:
        for r in recs:
            f.write("%d %.9f %.9f %.9f\n" % r)
    print(json.dumps({"records": len(recs)}))


# ---------------------------------------------------------------- scale

def waiter_proc(path, k, ready, q):
    """k waiter threads, one KazooClient each"""
    try:
        zks = [client() for _ in range(k)]
        got = []
        errs = []
        lk = threading.Lock()

        def wait_one(zk):
            try:
                lock = make_lock(zk, path, "mutex")
                acquire(lock, timeout=300)
                t = time.monotonic()
                lock.release()
                with lk:
                    got.append(t)
            except Exception as e:
                with lk:
                    errs.append(repr(e))

        ths = [threading.Thread(target=wait_one, args=(zk,), daemon=True)
               for zk in zks]
        for t in ths:
            t.start()
        ready.put(k)
        for t in ths:
            t.join(330)
        for zk in zks:
            zk.stop()
            zk.close()
        q.put((max(got) if got else 0.0, len(got), "; ".join(errs[:3]) or None))
    except Exception as e:
        ready.put(0)
        q.put((0.0, 0, repr(e)))


def cmd_scale(a):
    base, w, secs = a[0], int(a[1]), float(a[2])
    path = base + "/scale"
    holder = client()
    hl = make_lock(holder, path, "mutex")
    acquire(hl)
    before = run_cycles(base + "/unrelated", "mutex", 1, True, secs, 1.0)

    ctx = mp.get_context("fork")
    nproc = max(1, min(8, (w + 74) // 75))
    ready, q = ctx.Queue(), ctx.Queue()
    procs = []
    left = w
    for i in range(nproc):
        k = left // (nproc - i)
        left -= k
        p = ctx.Process(target=waiter_proc, args=(path, k, ready, q),
                        daemon=True)
        p.start()
        procs.append(p)
    for _ in procs:
        ready.get(timeout=180)
    deadline = time.monotonic() + 120
    queued = 0
    while time.monotonic() < deadline:
        queued = len(holder.get_children(path)) - 1
        if queued >= w:
            break
        time.sleep(0.1)
    if queued < w:
        raise RuntimeError("only %d of %d waiters queued" % (queued, w))
    watches = int(mntr().get("zk_watch_count", -1))
    with_ = run_cycles(base + "/unrelated", "mutex", 1, True, secs, 0.0)

    n0 = notifications()
    t0 = time.monotonic()
    hl.release()
    last, granted, errs = 0.0, 0, []
    for _ in procs:
        t, n, err = q.get(timeout=330)
        last = max(last, t)
        granted += n
        if err:
            errs.append(err)
    for p in procs:
        p.join(30)
    if errs or granted != w:
        raise RuntimeError("%d of %d granted: %s" % (granted, w, "; ".join(errs)))
    drain = last - t0
    time.sleep(0.5)
    n1 = notifications()
    holder.stop()
    holder.close()
    print(json.dumps({
        "waiters": w, "watches_queued": watches, "drain_s": drain,
        "grants_per_s": w / drain, "notifications": n1 - n0,
        "releases": w + 1, "notif_per_release": (n1 - n0) / (w + 1),
        "without": {"cycles_per_s": before[0], "p50_ms": before[1], "p99_ms": before[2],
                    "max_ms": before[5]},
        "with": {"cycles_per_s": with_[0], "p50_ms": with_[1], "p99_ms": with_[2],
                 "max_ms": with_[5]}}))


# ---------------------------------------------------------------- many

def cmd_many(a):
    base, count, secs, limit = a[0], int(a[1]), float(a[2]), float(a[3])
    idle = float(a[4]) if len(a) > 4 else 0.0
    zk = client()
    held, lat = [], []
    t0 = time.monotonic()
    stop = t0 + limit
    for i in range(count):
        if time.monotonic() >= stop:
            break
        lock = make_lock(zk, "%s/many/r%d" % (base, i), "mutex")
        s = time.monotonic()
        acquire(lock)
        lat.append(time.monotonic() - s)
        held.append(lock)
    took = time.monotonic() - t0
    m = mntr()
    bg = 0.0
    if idle > 0:  # what ZooKeeper receives while nothing happens
        p0 = int(mntr().get("zk_packets_received", 0))
        time.sleep(idle)
        bg = (int(mntr().get("zk_packets_received", 0)) - p0) / idle
    with_ = run_cycles(base + "/unrelated", "mutex", 1, True, secs, 0.0)
    r0 = time.monotonic()
    for lock in held:
        lock.release()
    rel = time.monotonic() - r0
    zk.stop()
    zk.close()
    print(json.dumps({
        "taken": len(held), "take_s": took, "locks_per_s": len(held) / took,
        "p50_ms": pct(lat, .5), "p99_ms": pct(lat, .99),
        "watches": int(m.get("zk_watch_count", -1)),
        "znodes": int(m.get("zk_znode_count", -1)), "release_s": rel,
        "idle_requests_per_s": bg,
        "with": {"cycles_per_s": with_[0], "p50_ms": with_[1], "p99_ms": with_[2],
                 "max_ms": with_[5]}}))


def main():
    global HOSTS
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    mode, HOSTS, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    cmds = {"cycles": cmd_cycles, "handoff": cmd_handoff, "scale": cmd_scale,
            "many": cmd_many}
    if mode not in cmds:
        print("unknown mode " + mode, file=sys.stderr)
        sys.exit(2)
    cmds[mode](args)
    sys.stdout.flush()
    os._exit(0)  # do not wait for kazoo's daemon threads


if __name__ == "__main__":
    main()
