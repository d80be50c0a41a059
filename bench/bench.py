#!/usr/bin/python3
"""bench.py -- zklock side by side with Curator, Kazoo, ZooKeeper's own floor
and PostgreSQL's advisory locks, on one ZooKeeper, in one run.

Started by bench/run.sh (the full comparison) and bench/smoke.sh (the CI
check), which install what is missing first; run it through them.

  bench.py [--quick] [--csv FILE] [--png FILE] [--keep] [--secs S]
           [--ensemble | --standalone] [--only LIST]
  bench.py --smoke [--min-ratio R]

What it does: starts a standalone ZooKeeper with test/zk_server.sh (the
only ZooKeeper every contender talks to), initdb's two PostgreSQL 15
instances with zklock into a temporary folder (run as `postgres` when we are
root), compiles bench/zk_floor.c and bench/CuratorBench.java (with
CuratorQueue.java) there, runs the
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
from servers import STATE, cleanup, on_signal, setup, versions, zk_rates


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
    ap.add_argument("--ensemble", action="store_true",
                    help="a 3-server ZooKeeper ensemble only (default: the standalone "
                    "server, then the ensemble; --quick: the standalone server)")
    ap.add_argument("--standalone", action="store_true",
                    help="the standalone ZooKeeper only")
    ap.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--soak", action="store_true",
                    help="memory over a run at full rate (default 600 s; --secs to change)")
    ap.add_argument("--profile", action="store_true",
                    help="CPU time and context switches per cycle, by process")
    ap.add_argument("--clients", type=int, default=1,
                    help="with --profile: clients, each on its own resource")
    ap.add_argument("--min-ratio", type=float, default=0.25, help=argparse.SUPPRESS)
    ap.add_argument("--max-requests", type=float, help=argparse.SUPPRESS,
                    default=float(os.environ.get("ZKLOCK_SMOKE_MAX_REQUESTS") or 3))
    ab.add_args(ap)
    a = ap.parse_args()
    # --baseline (ab) compares cycles and latencies: the idle scenario has
    # neither, and the tls one runs Curator and a ZooKeeper of its own;
    # they run there only when --only names them
    a.only_list = a.only.split(",") if a.only else [
        k for k in SCENARIOS if not (a.quick and k in ("scale", "many"))
        and not (a.ab_old and k in ("idle", "tls"))]
    if a.ensemble and a.standalone:
        a.setups = ["standalone", "ensemble"]
    elif a.ensemble or a.standalone:
        a.setups = ["ensemble" if a.ensemble else "standalone"]
    else:
        a.setups = ["standalone"] if a.quick else ["standalone", "ensemble"]
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
    # the idle scenario and the idle rate subtracted from every count
    env.idle_locks = 3000
    env.idle_sweep = "5s"
    env.idle_secs = 10.0 if a.quick else 20.0
    env.idle_settle = 6.0
    env.idle_rate_secs = 10.5         # one sweep_interval of the instances (10 s) and a bit
    env.setups = a.setups
    env.idle_by_setup = {}
    # --only naming tls: its SKIPPED row (a zklock without TLS) fails the
    # run, as nothing asked for was measured; a full run only shows it
    env.tls_asked = bool(a.only) and "tls" in a.only_list
    return env


def ensemble_skips(a):
    """the scenarios the ensemble set-up leaves out unless --only names
    them: scale and many read per-server figures (watches, the idle rate)
    inside Curator's and Kazoo's own runs, from one server; tls runs on a
    standalone server of its own whatever the set-up (once is enough)"""
    return [] if a.only else ["scale", "many", "tls"]


def comparison(env, a, t_start):
    """the side-by-side run: every contender, the table, CSV and chart, on
    each ZooKeeper set-up in turn (servers stopped and started afresh)"""
    only = a.only_list
    res = Results()
    for i, which in enumerate(a.setups):
        if i > 0:
            cleanup()
        env.ensemble = which == "ensemble"
        res.setup = which
        build = setup(env, 2)
        compile_floor(env, build)
        compile_curator(env, build)
        # what ZooKeeper does with nothing measured running (both
        # instances' pings and sweeps): subtracted from every count
        env.idle = zk_rates(env, env.idle_rate_secs)
        env.idle_by_setup[which] = env.idle
        log("idle rate (%s): %.2f requests/s, %.2f packets sent/s, %.2f writes/s" % (
            which, env.idle["req"], env.idle["sent"], env.idle["wr"]))
        for k in SCENARIOS:
            if k in only and not (env.ensemble and k in ensemble_skips(a)):
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
            return smoke(env, a.min_ratio, a.max_requests)
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
            print("bench: 0 passed, 2 failed")
        return 130
    except (BenchError, subprocess.TimeoutExpired, OSError) as e:
        log("error: %s" % e)
        if STATE["tmp"]:
            STATE["keep"] = True
            log("logs kept in " + STATE["tmp"])
        if a.smoke:
            print("bench: 0 passed, 2 failed")
        return 1
    finally:
        cleanup()


if __name__ == "__main__":
    sys.exit(main())
