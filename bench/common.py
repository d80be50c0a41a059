"""common.py -- what every part of the benchmark shares: paths, the
progress log, the error type, percentiles and small text helpers."""
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# the PostgreSQL zklock is installed into (bench/lib.sh exports PGBIN);
# else the one PATH's pg_config names
PGBIN = os.environ.get("PGBIN") or os.popen("pg_config --bindir").read().strip()
PYTHON = "/usr/bin/python3"          # Debian's, with python3-kazoo


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


class Env:
    """what a run measures with: servers, settings, compiled clients"""
    pass


def pct(values, p):
    """nearest-rank percentile"""
    if not values:
        return None
    s = sorted(values)
    k = max(1, min(len(s), int(math.ceil(p * len(s)))))
    return s[k - 1]


def join_notes(*notes):
    return "; ".join(n for n in notes if n)


def plural(n, word, words=None):
    return "%d %s" % (n, word if n == 1 else (words or word + "s"))
