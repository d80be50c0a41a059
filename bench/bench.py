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

The parts: servers.py (ZooKeeper, PostgreSQL, processes, cleanup),
runner_pg.py (zklock and advisory locks through pgbench), runner_curator.py,
runner_kazoo.py, runner_floor.py, scenarios.py, report.py (table, CSV,
chart), modes.py (--smoke, --profile, --soak), ab.py (--ab: two builds of
zklock alternated, for run.sh --baseline).
"""
import argparse
import os
import signal
import subprocess
import sys
import time

import ab
from common import BenchError, Env, log
from modes import profile, smoke, soak
from report import Results, table, table_notes, write_csv, write_png
from runner_curator import compile_curator
from runner_floor import compile_floor
from scenarios import SCENARIOS
from servers import STATE, cleanup, on_signal, setup, versions


def parse_args():
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
    ab.add_args(ap)
    a = ap.parse_args()
    a.only_list = a.only.split(",") if a.only else [
        k for k in SCENARIOS if not (a.quick and k in ("scale", "many"))]
    for k in a.only_list:
        if k not in SCENARIOS:
            ap.error("unknown scenario %r (known: %s)" % (k, ",".join(SCENARIOS)))
    for opt in ("csv", "png"):
        if getattr(a, opt):
            setattr(a, opt, os.path.abspath(getattr(a, opt)))
    return a


def make_env(a):
    env = Env()
    env.secs = a.secs or (2 if a.quick else 5)
    env.warmup = 0.5 if (a.quick or a.smoke) else 1.0
    env.hold_ms = 5
    env.waiters = 300
    env.many = 10000
    env.many_limit = 60
    env.many_idle = 11.0
    return env


def comparison(env, a, t_start):
    """the side-by-side run: every contender, the table, CSV and chart"""
    only = a.only_list
    build = setup(env, 2)
    compile_floor(env, build)
    compile_curator(env, build)
    res = Results()
    for k in SCENARIOS:
        if k in only:
            SCENARIOS[k](env, res)
    took = time.time() - t_start
    text = table(res.rows, table_notes(env, only, versions(), took))
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


def main():
    a = parse_args()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    STATE["keep"] = a.keep
    env = make_env(a)
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
        if a.ab_old:
            return ab.run(env, a)
        return comparison(env, a, t_start)
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


if __name__ == "__main__":
    sys.exit(main())
