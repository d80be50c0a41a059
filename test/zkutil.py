#!/usr/bin/python3
"""zkutil.py -- inspect ZooKeeper for zklock's tests (uses python3-kazoo).

Run it with /usr/bin/python3 (Debian's python3-kazoo).

Usage:
  zkutil.py HOSTS ls-r PATH              every znode path below PATH, one a line
  zkutil.py HOSTS count-locks PATH       number of lock nodes (of zklock or any
                                         other lock client) below PATH (0 if absent)
  zkutil.py HOSTS locks PATH             one line per lock node below PATH:
                                         path <TAB> czxid <TAB> ephemeralOwner(hex)
  zkutil.py HOSTS wait-empty PATH SECS   wait until no lock node is left below
                                         PATH; exit 0, else print what is left
                                         and exit 1 after SECS seconds
  zkutil.py HOSTS wait-count PATH N SECS wait until exactly N lock nodes are
                                         below PATH; exit 0, else exit 1
  zkutil.py HOSTS get PATH               print the data of one znode
  zkutil.py HOSTS exists PATH            exit 0 if PATH exists, 1 if not
  zkutil.py HOSTS delete-r PATH          delete PATH and everything below it
  zkutil.py HOSTS create-seq PATH DATA   create a persistent sequential node
                                         PATH<seq> with DATA ("\\n" is a line
                                         break), parents as needed; print
                                         its path
  zkutil.py HOSTS set PATH DATA          replace the data of PATH
  zkutil.py HOSTS create-seq-hex PATH HEX  create the persistent sequential node
                                         PATH<seq> (parents too) with the data
                                         HEX (bytes, hex-encoded); print its path
  zkutil.py HOSTS create-private PATH USER:PASS plain|seq
                                         create PATH (PATH<seq> with seq) as
                                         another client would, with an ACL
                                         that gives every right to the digest
                                         identity USER:PASS only (nobody else
                                         may read it); parents as needed,
                                         open; print its path
  zkutil.py HOSTS delete-private PATH USER:PASS
                                         delete PATH (and below) as USER:PASS
  zkutil.py HOSTS create-acl PATH PERMS USER:PASS
                                         create the persistent node PATH
                                         (parents as needed) letting anyone
                                         do PERMS (of "rwcda"), USER:PASS all
  zkutil.py HOSTS open-acl PATH USER:PASS
                                         as USER:PASS, let anyone do anything
                                         on PATH
  zkutil.py HOSTS dump PATH              one line per lock node below PATH:
                                         path <TAB> czxid <TAB> data, with
                                         backslash, tab and newline escaped
                                         as \\, \t and \n

With ZKUTIL_AUTH=user:password in the environment it authenticates with
that digest identity first.
With ZKUTIL_SASL=user:password, it authenticates with SASL DIGEST-MD5 as
that user instead (pure-sasl; test/t/ops/114_sasl.pl).
With ZKUTIL_TLS=host:port,ca.pem,cert.pem,key.pem it connects to that
(secure) port instead of HOSTS, over TLS with that client certificate,
whose x509 identity ZooKeeper gives it (test/t/ops/113_tls.pl, 119).
With ZKUTIL_TLS=DIR (no comma), it connects over TLS with
test/tls_certs.sh's DIR (ca.pem, inspect.pem, inspect.key): HOSTS then
names the secure port (test/t/ops/124_tls_faults.pl, whose ZooKeeper has
no plain port and makes CN=inspect its x509 superuser).

Exit status 2 on usage errors or when ZooKeeper cannot be reached within
ZKUTIL_CONNECT_TIMEOUT seconds (default 10).
"""

import logging
import os
import re
import sys
import time

try:
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoNodeError
except ImportError:  # pragma: no cover
    sys.stderr.write("zkutil.py: kazoo not found; run with /usr/bin/python3 "
                     "(Debian package python3-kazoo)\n")
    sys.exit(2)

# A lock node, whoever made it: a name that ends in ZooKeeper's ten-digit
# sequence suffix after a lock client's mark (Hive and zklock "LOCK-SHARED-",
# "LOCK-EXCLUSIVE-"; Curator "__READ__", "__WRIT__", "lock-"; Kazoo
# "__lock__", "__rlock__"; ZooKeeper's recipe "read-", "write-").
LOCK_RE = re.compile(r"(LOCK-(SHARED|EXCLUSIVE)-|__READ__|__WRIT__|lock-|__lock__|__rlock__|read-|write-)\d{10}$")


def usage():
    sys.stderr.write(__doc__)
    sys.exit(2)


def join(parent, child):
    return parent.rstrip("/") + "/" + child if parent != "/" else "/" + child


def walk(zk, path):
    """Yield every znode path strictly below path (depth first, sorted).
    Nodes that vanish while we walk are skipped."""
    try:
        children = sorted(zk.get_children(path))
    except NoNodeError:
        return
    for c in children:
        p = join(path, c)
        yield p
        yield from walk(zk, p)


def is_lock(path):
    return LOCK_RE.search(path.rsplit("/", 1)[-1]) is not None


def lock_nodes(zk, path):
    return [p for p in walk(zk, path) if is_lock(p)]


def wait_count(zk, path, want, secs):
    deadline = time.monotonic() + secs
    while True:
        locks = lock_nodes(zk, path)
        if len(locks) == want:
            return 0
        if time.monotonic() >= deadline:
            sys.stderr.write("zkutil.py: %d lock node(s) below %s after %ss, "
                             "expected %d:\n" % (len(locks), path, secs, want))
            for p in locks:
                sys.stdout.write(p + "\n")
            return 1
        time.sleep(0.05)


def main(argv):
    if len(argv) < 4:
        usage()
    hosts, cmd, path = argv[1], argv[2], argv[3]
    args = argv[4:]
    if not path.startswith("/"):
        sys.stderr.write("zkutil.py: path must be absolute\n")
        return 2

    logging.basicConfig(level=logging.CRITICAL)
    timeout = float(os.environ.get("ZKUTIL_CONNECT_TIMEOUT", "10"))
    auth = os.environ.get("ZKUTIL_AUTH")
    sasl = os.environ.get("ZKUTIL_SASL")
    sasl_options = None
    if sasl:
        user, _, password = sasl.partition(":")
        sasl_options = {"mechanism": "DIGEST-MD5", "username": user,
                        "password": password}
    tls = {}
    tls_env = os.environ.get("ZKUTIL_TLS")
    if tls_env and "," in tls_env:
        hosts, ca, cert, key = tls_env.split(",")
        tls = {"use_ssl": True, "ca": ca, "certfile": cert, "keyfile": key,
               "verify_certs": True}
    elif tls_env:
        # test/tls_certs.sh's folder: its CA, and the client certificate
        # of the tests' own tools (a ZooKeeper without a plain port)
        tls = {"use_ssl": True, "ca": tls_env + "/ca.pem",
               "certfile": tls_env + "/inspect.pem",
               "keyfile": tls_env + "/inspect.key"}
    zk = KazooClient(hosts=hosts, timeout=10.0,
                     auth_data=[("digest", auth)] if auth else None,
                     sasl_options=sasl_options, **tls)
    try:
        zk.start(timeout=timeout)
    except Exception as e:  # kazoo raises a timeout error
        sys.stderr.write("zkutil.py: cannot connect to %s: %s\n" % (hosts, e))
        return 2
    try:
        if cmd == "ls-r" and not args:
            for p in walk(zk, path):
                sys.stdout.write(p + "\n")
            return 0
        if cmd == "count-locks" and not args:
            sys.stdout.write("%d\n" % len(lock_nodes(zk, path)))
            return 0
        if cmd == "locks" and not args:
            for p in lock_nodes(zk, path):
                try:
                    _, st = zk.get(p)
                except NoNodeError:
                    continue
                sys.stdout.write("%s\t%d\t%x\n" % (p, st.czxid, st.ephemeralOwner))
            return 0
        if cmd == "dump" and not args:
            for p in lock_nodes(zk, path):
                try:
                    data, st = zk.get(p)
                except NoNodeError:
                    continue
                text = (data or b"").decode("utf-8", "replace")
                text = text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
                sys.stdout.write("%s\t%d\t%s\n" % (p, st.czxid, text))
            return 0
        if cmd == "wait-empty" and len(args) == 1:
            return wait_count(zk, path, 0, float(args[0]))
        if cmd == "wait-count" and len(args) == 2:
            return wait_count(zk, path, int(args[0]), float(args[1]))
        if cmd == "get" and not args:
            try:
                data, _ = zk.get(path)
            except NoNodeError:
                sys.stderr.write("zkutil.py: %s does not exist\n" % path)
                return 1
            sys.stdout.write((data or b"").decode("utf-8", "replace") + "\n")
            return 0
        if cmd == "create-seq-hex" and len(args) == 1:
            # a sequential node (as another client makes one) with the
            # given data, in hex: it may hold bytes that are not UTF-8
            made = zk.create(path, bytes.fromhex(args[0]), sequence=True,
                             makepath=True)
            sys.stdout.write(made + "\n")
            return 0
        if cmd == "exists" and not args:
            return 0 if zk.exists(path) else 1
        if cmd == "create-seq" and len(args) == 1:
            made = zk.create(path, args[0].replace("\\n", "\n").encode("utf-8"),
                             sequence=True, makepath=True)
            sys.stdout.write(made + "\n")
            return 0
        if cmd == "set" and len(args) == 1:
            zk.set(path, args[0].replace("\\n", "\n").encode("utf-8"))
            return 0
        if cmd == "create-private" and len(args) == 2 and args[1] in ("plain", "seq"):
            from kazoo.security import make_digest_acl
            user, _, password = args[0].partition(":")
            parent = path.rsplit("/", 1)[0]
            if parent:
                zk.ensure_path(parent)
            made = zk.create(path, b"another client's node",
                             acl=[make_digest_acl(user, password, all=True)],
                             sequence=(args[1] == "seq"))
            sys.stdout.write(made + "\n")
            return 0
        if cmd == "create-acl" and len(args) == 2:
            from kazoo.security import make_acl, make_digest_acl
            perms, (user, _, password) = args[0], args[1].partition(":")
            zk.ensure_path(path.rsplit("/", 1)[0] or "/")
            anyone = make_acl("world", "anyone", read="r" in perms,
                              write="w" in perms, create="c" in perms,
                              delete="d" in perms, admin="a" in perms)
            zk.create(path, b"", acl=[anyone,
                                      make_digest_acl(user, password, all=True)])
            return 0
        if cmd == "open-acl" and len(args) == 1:
            from kazoo.security import OPEN_ACL_UNSAFE
            zk.add_auth("digest", args[0])
            zk.set_acls(path, OPEN_ACL_UNSAFE)
            return 0
        if cmd == "delete-private" and len(args) == 1:
            zk.add_auth("digest", args[0])
            zk.delete(path, recursive=True)
            return 0
        if cmd == "delete-r" and not args:
            if path == "/":
                sys.stderr.write("zkutil.py: refusing to delete /\n")
                return 2
            zk.delete(path, recursive=True)
            return 0
        usage()
    finally:
        try:
            zk.stop()
            zk.close()
        except Exception:
            pass
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
