#!/usr/bin/python3
"""kazoo_queue.py -- Kazoo 2.8's LockingQueue and Queue under bench/queue.py
(the scenario `queue`).  Run with Debian's /usr/bin/python3 (python3-kazoo).
One KazooClient per client, one process per client (multiprocessing).

  kazoo_queue.py cycles HOSTS PATH locking|plain SECS WARMUP
      one client: put, take (LockingQueue: get + consume; Queue: get,
      which deletes), again and again
  kazoo_queue.py pc HOSTS PATH locking|plain PRODUCERS CONSUMERS SECS WARMUP
      producers put as fast as they can, consumers take (and consume);
      counts the items taken inside the window
  kazoo_queue.py clean HOSTS PATH
      removes the queue (pc leaves it: its deletes are not counted)

Prints one JSON line: items_per_s (items put and taken per second),
items (all items taken, the warm-up included: what ZooKeeper's counters
saw).  Every wait is bounded.
"""
import json
import logging
import multiprocessing as mp
import os
import sys
import time

from kazoo.client import KazooClient

logging.basicConfig(level=logging.CRITICAL)

HOSTS = None


def client():
    zk = KazooClient(hosts=HOSTS, timeout=10.0)
    zk.start(timeout=20)
    return zk


def queue(zk, path, kind):
    return zk.LockingQueue(path) if kind == "locking" else zk.Queue(path)


def take(q, kind, timeout):
    """one item taken and consumed, or None"""
    if kind == "locking":
        v = q.get(timeout)
        if v is not None and not q.consume():
            raise RuntimeError("LockingQueue.consume failed")
        return v
    deadline = time.monotonic() + timeout
    while True:
        v = q.get()
        if v is not None or time.monotonic() >= deadline:
            return v
        time.sleep(0.001)


def cmd_cycles(path, kind, secs, warmup):
    zk = client()
    q = queue(zk, path, kind)
    start = time.monotonic() + warmup
    end = start + secs
    n = every = 0
    while True:
        t0 = time.monotonic()
        if t0 >= end:
            break
        q.put(b"x")
        if take(q, kind, 10) is None:
            raise RuntimeError("the item just put was not taken")
        every += 1
        if t0 >= start and time.monotonic() <= end:
            n += 1
    zk.stop()
    zk.close()
    return {"items_per_s": n / secs, "items": every}


def worker(role, path, kind, barrier, window, q):
    try:
        zk = client()
        qu = queue(zk, path, kind)
        barrier.wait(60)
        start, end = window[0], window[1]
        n = every = 0
        while True:
            t = time.monotonic()
            if t >= end:
                break
            if role == "p":
                qu.put(b"x")
                every += 1
            else:
                if take(qu, kind, 0.5) is None:
                    continue
                every += 1
                if t >= start and time.monotonic() <= end:
                    n += 1
        zk.stop()
        zk.close()
        q.put((role, n, every, None))
    except Exception as e:  # reported by the parent
        q.put((role, 0, 0, repr(e)))


def cmd_pc(path, kind, producers, consumers, secs, warmup):
    ctx = mp.get_context("fork")
    total = producers + consumers
    barrier = ctx.Barrier(total + 1)
    window = ctx.Array("d", 2)
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(role, path, kind, barrier, window, q),
                         daemon=True)
             for role in ["p"] * producers + ["c"] * consumers]
    for p in procs:
        p.start()
    window[0] = time.monotonic() + 0.2 + warmup
    window[1] = window[0] + secs
    barrier.wait(120)
    taken = every = put = 0
    errs = []
    for _ in procs:
        role, n, e, err = q.get(timeout=secs + warmup + 180)
        if err:
            errs.append(err)
        if role == "c":
            taken += n
            every += e
        else:
            put += e
    for p in procs:
        p.join(30)
    if errs:
        raise RuntimeError("; ".join(errs))
    # what is left: taken by no one in the run (removed by `clean`, after
    # ZooKeeper's counters are read)
    zk = client()
    left = len(zk.get_children(path + "/entries" if kind == "locking" else path))
    zk.stop()
    return {"items_per_s": taken / secs, "items": every, "put": put, "left": left}


def main():
    global HOSTS
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    mode, HOSTS, a = sys.argv[1], sys.argv[2], sys.argv[3:]
    if mode == "cycles":
        r = cmd_cycles(a[0], a[1], float(a[2]), float(a[3]))
    elif mode == "pc":
        r = cmd_pc(a[0], a[1], int(a[2]), int(a[3]), float(a[4]), float(a[5]))
    elif mode == "clean":
        zk = client()
        zk.delete(a[0], recursive=True)
        zk.stop()
        r = {"removed": a[0]}
    else:
        print("unknown mode " + mode, file=sys.stderr)
        sys.exit(2)
    print(json.dumps(r))
    sys.stdout.flush()
    os._exit(0)  # do not wait for kazoo's daemon threads


if __name__ == "__main__":
    main()
