#!/usr/bin/python3
"""kazoo_lock.py -- drive Kazoo's lock recipes for zklock's interoperation
test (test/t/ops/030_interop.pl).  Run it with /usr/bin/python3 (Debian's
python3-kazoo, Kazoo 2.8).

Modes: lock (kazoo.recipe.lock.Lock), read (ReadLock), write (WriteLock).
Every output line starts with a word and ends with the wall-clock time in
epoch milliseconds, taken at that moment.

One-shot:
  kazoo_lock.py HOSTS PATH MODE HOLD_MS
    acquires (waiting at most 60 s), prints "ACQUIRED <ms>", holds the lock
    HOLD_MS milliseconds, prints "RELEASED <ms>", releases and exits 0
    (exit 1 and "TIMEOUT <ms>" if the lock was not granted in time).

Long-lived, driven by stdin (the same commands as test/interop/CuratorLock.java):
  kazoo_lock.py HOSTS
    prints "READY <ms>" once connected, then reads commands, one a line:
      acquire ID PATH MODE TIMEOUT_MS  start acquiring in a thread of its own;
                                       prints "ACQUIRED ID <ms>" when granted,
                                       "TIMEOUT ID <ms>" if not within
                                       TIMEOUT_MS (Kazoo removes its node)
      release ID                       prints "RELEASED ID <ms>" (before the
                                       release), releases, then prints
                                       "GONE ID <ms>" (node deleted)
      quit                             closes the client and exits
    End of input counts as quit.  Errors print "ERROR ID <message>".

Whatever happens, the process exits after KAZOO_LOCK_MAX_SECONDS (default
300) so that a lost test never leaves it behind.

SASL (test/t/ops/125_kerberos_interop.pl): with KAZOO_LOCK_SASL_MECHANISM
set (GSSAPI), Kazoo authenticates through pure-sasl (python3-pure-sasl, and
python3-kerberos for GSSAPI) to the service KAZOO_LOCK_SASL_SERVICE (default
zookeeper) at the host named in HOSTS (so name it as in the server's
principal: localhost:PORT for zookeeper/localhost); GSSAPI takes its ticket
from the credential cache KRB5CCNAME (kinit -kt).  A failed authentication
is "ERROR - could not connect ...".  READY comes after the authentication.
"""

import logging
import os
import queue
import sys
import threading
import time

try:
    from kazoo.client import KazooClient
    from kazoo.exceptions import LockTimeout
except ImportError:  # pragma: no cover
    sys.stderr.write("kazoo_lock.py: kazoo not found; run with /usr/bin/python3 "
                     "(Debian package python3-kazoo)\n")
    sys.exit(2)

_out_lock = threading.Lock()


def say(line):
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def now():
    return int(time.time() * 1000)


def make_lock(zk, path, mode, ident):
    if mode == "lock":
        return zk.Lock(path, ident)
    if mode == "read":
        return zk.ReadLock(path, ident)
    if mode == "write":
        return zk.WriteLock(path, ident)
    raise ValueError('mode must be lock, read or write, not "%s"' % mode)


class Holder(threading.Thread):
    """One lock of the long-lived mode, with the thread that drives it."""

    def __init__(self, zk, holders, lock_id, path, mode, timeout_ms):
        super().__init__(name="lock-" + lock_id, daemon=True)
        self.zk = zk
        self.holders = holders
        self.lock_id = lock_id
        self.path = path
        self.mode = mode
        self.timeout = timeout_ms / 1000.0
        self.commands = queue.Queue()

    def run(self):
        try:
            lock = make_lock(self.zk, self.path, self.mode,
                             "kazoo_lock.py:%d:%s" % (os.getpid(), self.lock_id))
            try:
                got = lock.acquire(blocking=True, timeout=self.timeout)
            except LockTimeout:
                got = False
            if not got:
                say("TIMEOUT %s %d" % (self.lock_id, now()))
                return
            say("ACQUIRED %s %d" % (self.lock_id, now()))
            while self.commands.get() != "release":
                pass
            say("RELEASED %s %d" % (self.lock_id, now()))
            lock.release()
            say("GONE %s %d" % (self.lock_id, now()))
        except Exception as e:  # report, never hang silently
            say("ERROR %s %r" % (self.lock_id, e))
        finally:
            if self.holders.get(self.lock_id) is self:
                del self.holders[self.lock_id]


def interactive(zk):
    holders = {}
    say("READY %d" % now())
    for line in sys.stdin:
        w = line.split()
        if not w:
            continue
        try:
            if w[0] == "acquire" and len(w) == 5:
                if w[1] in holders:
                    say("ERROR %s lock id already in use" % w[1])
                    continue
                h = Holder(zk, holders, w[1], w[2], w[3], int(w[4]))
                holders[w[1]] = h
                h.start()
            elif w[0] == "release" and len(w) == 2:
                h = holders.get(w[1])
                if h is None:
                    say("ERROR %s no such lock" % w[1])
                else:
                    h.commands.put("release")
            elif w[0] == "quit":
                break
            else:
                say("ERROR - bad command: %s" % line.strip())
        except Exception as e:
            say("ERROR - %r" % e)
    # closing the session removes whatever nodes are left
    zk.stop()
    zk.close()
    say("BYE %d" % now())
    return 0


def one_shot(zk, path, mode, hold_ms):
    lock = make_lock(zk, path, mode, "kazoo_lock.py:%d" % os.getpid())
    try:
        got = lock.acquire(blocking=True, timeout=60)
    except LockTimeout:
        got = False
    if not got:
        say("TIMEOUT %d" % now())
        zk.stop()
        return 1
    say("ACQUIRED %d" % now())
    time.sleep(hold_ms / 1000.0)
    say("RELEASED %d" % now())
    lock.release()
    zk.stop()
    zk.close()
    return 0


def main(argv):
    if len(argv) not in (2, 5):
        sys.stderr.write("usage: kazoo_lock.py HOSTS PATH lock|read|write HOLD_MS\n"
                         "       kazoo_lock.py HOSTS    (commands on stdin)\n")
        return 2
    logging.basicConfig(level=logging.ERROR)
    max_seconds = float(os.environ.get("KAZOO_LOCK_MAX_SECONDS") or 300)

    def watchdog():
        say("ERROR - kazoo_lock.py: lifetime limit reached, exiting")
        os._exit(3)

    t = threading.Timer(max_seconds, watchdog)
    t.daemon = True
    t.start()

    sasl_options = None
    if os.environ.get("KAZOO_LOCK_SASL_MECHANISM"):
        sasl_options = {
            "mechanism": os.environ["KAZOO_LOCK_SASL_MECHANISM"],
            "service": os.environ.get("KAZOO_LOCK_SASL_SERVICE") or "zookeeper",
        }
    zk = KazooClient(hosts=argv[1], timeout=10.0, sasl_options=sasl_options)
    try:
        zk.start(timeout=20)
        if sasl_options:
            # Kazoo says "connected" before its SASL exchange; a request
            # goes after it, so READY means authenticated
            zk.exists("/")
    except Exception as e:
        say("ERROR - could not connect to ZooKeeper at %s: %r" % (argv[1], e))
        return 1
    if len(argv) == 2:
        return interactive(zk)
    return one_shot(zk, argv[2], argv[3], int(argv[4]))


if __name__ == "__main__":
    rc = main(sys.argv)
    sys.stdout.flush()
    # Kazoo's threads must not keep the process alive
    os._exit(rc)
