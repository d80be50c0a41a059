#!/usr/bin/python3
"""kazoo_queue.py -- drive Kazoo's LockingQueue for zklock's queue test
(test/t/recipes/130_queue.pl).  Run it with /usr/bin/python3 (Debian's
python3-kazoo).

  kazoo_queue.py HOSTS PATH
    PATH is the queue's node, <zklock.root>/zklock.queues/<queue>.
    Prints "READY" once connected, then reads commands, one a line, and
    answers each with one line:
      put PRIORITY VALUE   LockingQueue.put(VALUE, PRIORITY): "PUT"
      get TIMEOUT_S        LockingQueue.get(TIMEOUT_S): "GOT <value>" (the
                           entry held by Kazoo's ephemeral node), or "NONE"
      consume              LockingQueue.consume(): "CONSUMED True|False"
      release              LockingQueue.release(): "RELEASED True|False"
      len                  len(LockingQueue): "LEN <n>"
      quit                 closes the client and exits
    End of input counts as quit; an error prints "ERROR <message>".

Whatever happens, the process exits after 120 s so that a lost test never
leaves it behind.
"""

import sys
import threading
import os

try:
    from kazoo.client import KazooClient
    from kazoo.recipe.queue import LockingQueue
except ImportError:  # pragma: no cover
    sys.stderr.write("kazoo_queue.py: kazoo not found; run with /usr/bin/python3 "
                     "(Debian package python3-kazoo)\n")
    sys.exit(2)


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main():
    hosts, path = sys.argv[1], sys.argv[2]
    threading.Timer(120, lambda: os._exit(3)).start()
    zk = KazooClient(hosts=hosts, timeout=10)
    zk.start(timeout=30)
    q = LockingQueue(zk, path)
    say("READY")
    for line in sys.stdin:
        words = line.split(" ", 2)
        cmd = words[0].strip()
        try:
            if cmd == "put":
                q.put(words[2].rstrip("\n").encode(), int(words[1]))
                say("PUT")
            elif cmd == "get":
                v = q.get(float(words[1]))
                say("NONE" if v is None else "GOT " + v.decode())
            elif cmd == "consume":
                say("CONSUMED %s" % q.consume())
            elif cmd == "release":
                say("RELEASED %s" % q.release())
            elif cmd == "len":
                say("LEN %d" % len(q))
            elif cmd == "quit":
                break
            else:
                say("ERROR unknown command " + cmd)
        except Exception as e:  # report, keep going
            say("ERROR %r" % (e,))
    zk.stop()
    zk.close()
    os._exit(0)


if __name__ == "__main__":
    main()
