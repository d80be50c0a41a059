"""runner_kazoo.py -- Kazoo 2.8 (Debian's python3-kazoo): kazoo_bench.py
under Debian's /usr/bin/python3; one KazooClient per client, one process
per client.  Each command prints one JSON line (servers.run_json)."""
import os

from common import HERE, PYTHON


def kazoo_cmd(env, *args):
    return [PYTHON, os.path.join(HERE, "kazoo_bench.py"), args[0], env.hosts,
            *[str(a) for a in args[1:]]]
