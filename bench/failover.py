"""failover.py -- see failover.sh: leader failover of zklock.elections,
measured over several rounds on two instances and one ZooKeeper."""
import argparse
import os
import signal
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import BenchError, log                       # noqa: E402
from servers import (PG, STATE, cleanup, free_port, on_signal, run,  # noqa: E402
                     as_owner, start_watchdog, zk_start)

TICK_S = 0.2            # test/zk_server.sh's tickTime
GROUP = "bench"
PGS = []


def leads(pg):
    try:
        return pg.psql("SELECT zk_is_leader('%s')" % GROUP, timeout=10) == "t"
    except BenchError:
        return False


def leader_of(pgs, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        now = [pg for pg in pgs if leads(pg)]
        if len(now) == 1:
            return now[0]
        if len(now) > 1:
            raise BenchError("two leaders at once: %s" % [p.name for p in now])
        time.sleep(0.05)
    raise BenchError("no single leader within %d s" % timeout)


def candidates(pg):
    return pg.psql("SELECT coalesce(max(cardinality(candidates)), 0) FROM zk_elections",
                   timeout=20)


def postmaster_pid(pg):
    with open(os.path.join(pg.data, "postmaster.pid")) as f:
        return int(f.readline())


def restart(pg, timeout=60):
    """start a killed instance again (its orphans may still be leaving)"""
    deadline = time.time() + timeout
    while True:
        r = run(as_owner([pg.bin + "/pg_ctl", "-D", pg.data, "-l", pg.logfile,
                          "-w", "-t", "60", "start"]), timeout=90, check=False)
        if r.returncode == 0:
            return
        if time.time() >= deadline:
            raise BenchError("%s did not start again: %s" % (pg.name, r.stderr[-500:]))
        time.sleep(0.5)


def one_round(i, pgs, mode):
    old = leader_of(pgs)
    new = [pg for pg in pgs if pg is not old][0]
    worker = int(old.psql("SELECT worker_pid FROM zk_lock_status"))
    t0 = time.time()
    if mode == "kill":
        os.kill(postmaster_pid(old), signal.SIGKILL)
    else:
        os.kill(worker, signal.SIGSTOP)
    try:
        deadline = t0 + 60
        while not leads(new):
            if time.time() >= deadline:
                raise BenchError("round %d: %s did not take over within 60 s" % (i, new.name))
        took = time.time() - t0
    finally:
        if mode == "stop":
            os.kill(worker, signal.SIGCONT)
    if mode == "kill":
        restart(old)
    old.wait_connected(60)
    deadline = time.time() + 60
    while candidates(new) != "2":
        if time.time() >= deadline:
            raise BenchError("round %d: %s did not stand again" % (i, old.name))
        time.sleep(0.1)
    log("round %d: %s -> %s in %.3f s" % (i, old.name, new.name, took))
    return took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--mode", choices=("kill", "stop"), default="kill")
    ap.add_argument("--session-timeout", type=int, default=4000)
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, on_signal)
    tmp = tempfile.mkdtemp(prefix="zklock-failover-")
    if os.geteuid() == 0:
        os.chmod(tmp, 0o777)
    STATE["tmp"] = tmp
    bound = a.session_timeout / 1000.0 + TICK_S + 1.0
    times = []
    try:
        os.makedirs(os.path.join(tmp, "sock"))
        os.chmod(os.path.join(tmp, "sock"), 0o777)
        hosts, _ = zk_start(tmp)
        conf = ("zklock.elections = '%s'\nzklock.session_timeout = '%dms'\n"
                "zklock.lease_margin = '500ms'\n" % (GROUP, a.session_timeout))
        pgs = [PG("pg%d" % n, tmp, hosts, free_port(), conf=conf) for n in (1, 2)]
        PGS.extend(pgs)
        start_watchdog(tmp, pgs)
        for pg in pgs:
            pg.init()
            pg.start()
            pg.psql("CREATE EXTENSION zklock")
            pg.wait_connected()
        while candidates(pgs[0]) != "2":
            time.sleep(0.1)
        for i in range(1, a.rounds + 1):
            times.append(one_round(i, pgs, a.mode))
    except (BenchError, KeyboardInterrupt) as e:
        log("failed: %s" % e)
        for pg in PGS:
            try:
                with open(pg.logfile) as f:
                    log("%s's log ends:\n%s" % (pg.name, f.read()[-1500:]))
            except OSError:
                pass
    finally:
        cleanup()
    if not times:
        print("bench: 0 passed, 1 failed")
        return 1
    med = statistics.median(times)
    worst = max(times)
    ok = len(times) == a.rounds and med <= bound and worst <= 2 * bound
    print("failover (%s), %d rounds, session timeout %d ms, tick %d ms:"
          % (a.mode, len(times), a.session_timeout, TICK_S * 1000))
    print("  median %.3f s   (bound: session timeout + tick + 1 s = %.1f s)" % (med, bound))
    print("  worst  %.3f s   (bound: twice that = %.1f s)" % (worst, 2 * bound))
    print("  all: " + " ".join("%.3f" % t for t in times))
    print("bench: %d passed, %d failed" % ((1, 0) if ok else (0, 1)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
