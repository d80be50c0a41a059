"""runner_floor.py -- ZooKeeper's own floor: zk_floor.c (the C client,
libzookeeper_mt) compiled with gcc; sync create+delete of an
EPHEMERAL_SEQUENTIAL node per session, async cycles in flight on one
session, delete -> watch -> getChildren."""
import os

from common import HERE
from servers import run, run_json


def compile_floor(env, build):
    env.zk_floor = os.path.join(build, "zk_floor")
    run(["gcc", "-O2", "-Wall", "-Werror", "-o", env.zk_floor,
         os.path.join(HERE, "zk_floor.c"), "-lzookeeper_mt", "-lpthread"])


def floor(env, mode, n=None):
    cmd = [env.zk_floor, env.hosts, mode, str(env.secs)] + ([str(n)] if n else [])
    return run_json(cmd, env.secs + 90, "zk_floor " + mode)
