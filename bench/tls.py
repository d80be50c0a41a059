"""tls.py -- the TLS row (issue 30): zklock's and Curator's lock cycles over
TLS against the same over plain TCP, on one ZooKeeper, in one run.

ZooKeeper is a standalone server of its own, started the way
test/t/ops/113_tls.pl starts it (test/zk_server.sh --extra-config): Netty,
its plain clientPort and a secureClientPort, client certificates required
(ssl.clientAuth=need) and the x509 provider; the certificates come from
test/tls_certs.sh.  Both transports talk to that one server (the same
Netty server factory), so the ratio is TLS's alone.  The run's instances
pg1 and pg2 are switched between its plain port and its secure port by
ALTER SYSTEM and a reload (zklock.hosts and zklock.ssl* are reloadable; a
change starts a new ZooKeeper session), and put back on the run's own
ZooKeeper at the end.

zklock built without the secure client (plain `make`, Debian's
libzookeeper-mt) cannot connect over TLS: the scenario then prints why and
adds a SKIPPED row, without measuring anything (never a silent pass);
when --only names tls, that also fails the run (exit 1).
"""
import os
import subprocess
import time

from common import ROOT, BenchError, join_notes, log, plural
from runner_curator import JAVA_DIR, curator_cmd
from runner_pg import Pgbench, pgbench_cycles, session_script
from servers import ZkCounter, as_owner, free_port, run, run_json, zk_rates

PASS = "zkpass"
TARGET = 0.9            # the issue's: TLS at >= 0.9x plain cycles/s
SETTINGS = ("zklock.hosts", "zklock.ssl", "zklock.ssl_ca_file", "zklock.ssl_cert_file",
            "zklock.ssl_key_file")
NETTY = ("netty-handler", "netty-common", "netty-buffer", "netty-transport", "netty-codec",
         "netty-resolver", "netty-transport-native-epoll",
         "netty-transport-native-unix-common")
NOT_BUILT = "without TLS"   # in last_error when zklock lacks the secure client


class Skip(Exception):
    pass


def zk_tls_config(certs, secure):
    return """secureClientPort={port}
secureClientPortAddress=127.0.0.1
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
ssl.keyStore.location={d}/server.p12
ssl.keyStore.password={pw}
ssl.keyStore.type=PKCS12
ssl.trustStore.location={d}/truststore.p12
ssl.trustStore.password={pw}
ssl.trustStore.type=PKCS12
ssl.clientAuth=need
authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider
""".format(port=secure, d=certs, pw=PASS)


def start_tls_server(env):
    """certificates (made as the servers' user: the keys must be theirs,
    mode 0600) and a Netty ZooKeeper with both ports; sets env.tls"""
    certs = os.path.join(env.tmp, "tls")
    run(as_owner(["bash", os.path.join(ROOT, "test", "tls_certs.sh"), certs,
                  "pg1", "pg2", "curator"]), timeout=120)
    # Curator's keystore (Java): its certificate, key and the CA
    run(["openssl", "pkcs12", "-export", "-in", certs + "/curator.pem", "-inkey",
         certs + "/curator.key", "-certfile", certs + "/ca.pem", "-name", "curator",
         "-out", certs + "/curator.p12", "-passout", "pass:" + PASS], timeout=60)
    secure = free_port()
    cfg = os.path.join(env.tmp, "zk_tls.cfg")
    with open(cfg, "w") as f:
        f.write(zk_tls_config(certs, secure))
    os.chmod(cfg, 0o644)
    zkdir = os.path.join(env.tmp, "zktls")
    base = free_port(3)
    run(["bash", os.path.join(ROOT, "test", "zk_server.sh"), "start", zkdir,
         "--servers", "1", "--base-port", str(base), "--extra-config", cfg,
         "--owner-pid", str(os.getpid())], timeout=120)
    env.tls = {"certs": certs, "dir": zkdir, "plain": "127.0.0.1:%d" % base,
               "secure": "127.0.0.1:%d" % secure, "port": base, "secure_port": secure,
               "on": set(),
               "failed": []}


def stop_tls_server(env):
    subprocess.run(["bash", os.path.join(ROOT, "test", "zk_server.sh"), "stop",
                    env.tls["dir"]], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60)


def status(pg):
    out = pg.psql("SELECT state || '|' || coalesce(session_id::text, '') || '|' || "
                  "coalesce(last_error, '') FROM zk_lock_status")
    return (out.split("|", 2) + ["", ""])[:3]


def switch(env, kind, timeout=40):
    """pg1 and pg2 onto the TLS server's plain port ("plain"), its secure
    port ("tls"), or back to the run's own ZooKeeper (None: only those
    switched, env.tls["on"]); waits until each worker has a new session,
    connected"""
    if env.tls.get("now") == kind:
        return
    env.tls["now"] = kind
    errors = []
    for pg in (env.pg1, env.pg2):
        if kind is None:
            # back on the run's ZooKeeper: each instance, whatever the other did
            if pg.name not in env.tls["on"]:
                continue
            try:
                before = status(pg)[1]
                for s in SETTINGS:
                    pg.psql("ALTER SYSTEM RESET %s" % s)
                pg.psql("SELECT pg_reload_conf()")
                wait_new_session(pg, before, timeout)
            except Exception as e:  # noqa: BLE001 -- raised below, after the other
                errors.append("%s: %s" % (pg.name, e))
            continue
        before = status(pg)[1]
        c = env.tls["certs"]
        env.tls["on"].add(pg.name)      # before the first ALTER: reset even if one fails
        # each transport under its own chroot: over TLS zklock's root takes
        # the x509 identity's ACL alone (doc/security.md), which a plain
        # session may not use
        conf = {"zklock.hosts": env.tls["secure" if kind == "tls" else "plain"] + "/" + kind,
                "zklock.ssl": "on" if kind == "tls" else "off",
                "zklock.ssl_ca_file": c + "/ca.pem",
                # one certificate (one x509 identity) for both: instances
                # sharing a root use certificates of one subject
                "zklock.ssl_cert_file": c + "/pg1.pem",
                "zklock.ssl_key_file": c + "/pg1.key"}
        for kv in conf.items():         # one each: not in a transaction block
            pg.psql("ALTER SYSTEM SET %s = '%s'" % kv)
        pg.psql("SELECT pg_reload_conf()")
        wait_new_session(pg, before, timeout, skip=kind == "tls")
    if errors:
        raise BenchError("; ".join(errors))
    if kind is not None:
        check_transport(env, kind)


def make_chroots(env):
    """/plain and /tls on the TLS server (open ACL), the two halves' chroots"""
    from kazoo.client import KazooClient
    zk = KazooClient(hosts=env.tls["plain"])
    zk.start(timeout=30)
    try:
        for kind in ("plain", "tls"):
            zk.ensure_path("/" + kind)
    finally:
        zk.stop()
        zk.close()


def connections(port):
    """established TCP connections to 127.0.0.1:port, counted on the client
    side (ss: the peer's port is the server's)"""
    r = run(["ss", "-Htn", "state", "established", "( dport = :%d )" % port], timeout=30)
    return len([ln for ln in r.stdout.splitlines() if ln.strip()])


def check_transport(env, kind, timeout=20):
    """the instances' sessions are on the port of this half, and none on
    the other: both workers' connections (2) to the secure port for "tls",
    to the plain one for "plain" (a round measured on the wrong transport
    would make the ratio meaningless); the plain port's four-letter-word
    connections (ZkCounter's) are closed before this runs"""
    want, other = ((env.tls["secure_port"], env.tls["port"]) if kind == "tls"
                   else (env.tls["port"], env.tls["secure_port"]))
    deadline = time.time() + timeout
    while True:
        n, m = connections(want), connections(other)
        if n >= 2 and m == 0:
            return
        if time.time() >= deadline:
            raise BenchError("the %s half: %d connection(s) to port %d (%s), %d to port %d: "
                             "not both instances on the %s transport"
                             % (kind, n, want, kind, m, other, kind))
        time.sleep(0.2)


def wait_new_session(pg, before, timeout, skip=False):
    """a new session, connected; skip: a last_error saying that zklock
    lacks TLS means a plain build (only when switching to TLS: on the way
    back, the old error stands until the worker has read the reload)"""
    deadline = time.time() + timeout
    st = status(pg)
    while time.time() < deadline:
        st = status(pg)
        if st[0] == "connected" and st[1] != before:
            return
        if skip and NOT_BUILT in st[2]:
            raise Skip("%s: %s" % (pg.name, st[2]))
        time.sleep(0.2)
    raise BenchError("%s: no new connected session within %d s (state %s, last_error %r)"
                     % (pg.name, timeout, st[0], st[2]))


def zklock_round(env, clients):
    """one measurement of zklock's session cycle, each client on its own
    flat name; 1 client on pg1, or half on each instance"""
    def script(tag):
        return session_script("zklock", "'bench_tls_%s' || :client_id::text" % tag,
                              flat=True)
    if clients == 1:
        runs = [(env.pg1, script("a"), 1)]
    else:
        runs = [(env.pg1, script("a"), clients // 2),
                (env.pg2, script("b"), clients - clients // 2)]
    with ZkCounter(env) as z:
        cps, p50, p99, _, n, _ = pgbench_cycles(env, runs, "session")
    return cps, p50, p99, z.note(n), z.counts(n)


def curator_run(env, kind, clients):
    """CuratorBench's mutex cycles; over TLS with the Java client's Netty
    socket, its keystore and the CA (ZooKeeper's own client settings)"""
    cmd = curator_cmd(env, "cycles", "/curator/tls_%s%d" % (kind, clients), "mutex",
                      clients, "distinct", env.secs, env.warmup)
    # Netty's jars (as test/zk_server.sh's): the Java client's Netty socket,
    # on both transports, so that the ratio is TLS's alone
    i = cmd.index("-cp") + 1
    cmd[i] += "".join(":%s/%s.jar" % (JAVA_DIR, j) for j in NETTY)
    cmd[1:1] = ["-Dzookeeper.client.secure=%s" % ("true" if kind == "tls" else "false"),
                "-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty"]
    if kind == "tls":
        c = env.tls["certs"]
        cmd[1:1] = [
            "-Dzookeeper.ssl.keyStore.location=%s/curator.p12" % c,
            "-Dzookeeper.ssl.keyStore.password=" + PASS,
            "-Dzookeeper.ssl.keyStore.type=PKCS12",
            "-Dzookeeper.ssl.trustStore.location=%s/truststore.p12" % c,
            "-Dzookeeper.ssl.trustStore.password=" + PASS,
            "-Dzookeeper.ssl.trustStore.type=PKCS12"]
    with ZkCounter(env) as z:
        r = run_json(cmd, env.secs + env.warmup + 90, "CuratorBench (%s)" % kind)
    return (r["cycles_per_s"], r["p50_ms"], r["p99_ms"], z.note(r["all_cycles"]),
            z.counts(r["all_cycles"]))


def median(rounds):
    return sorted(rounds, key=lambda r: r[0])[len(rounds) // 2]


def measure(env, rounds):
    """zklock: rounds of plain and TLS, alternating (plain tls, tls plain,
    ...: a drift of the load falls on both alike), 1 and 32 clients in each;
    then Curator once per transport and client count"""
    got = {}
    for i in range(rounds):
        for kind in (("plain", "tls") if i % 2 == 0 else ("tls", "plain")):
            switch(env, kind)
            # the new session's first grants wait for its lease: warm up
            Pgbench(env, env.pg1, session_script("zklock", "'bench_tls_w'", flat=True),
                    1, txns=200, log_latencies=False).wait()
            for clients in (1, 32):
                r = zklock_round(env, clients)
                check_transport(env, kind)      # still on this half's port
                got.setdefault(("zklock", kind, clients), []).append(r)
                log("  zklock %s, %d client(s): %.0f cycles/s" % (kind, clients, r[0]))
    env.hosts = env.tls["plain"]
    for clients in (1, 32):
        for kind in (("plain", "tls") if clients == 1 else ("tls", "plain")):
            if kind == "tls":
                env.hosts = env.tls["secure"]
            try:
                got[("curator", kind, clients)] = [curator_run(env, kind, clients)]
            except BenchError as e:
                log("  Curator %s, %d client(s) failed: %s" % (kind, clients, e))
                env.tls["failed"].append("TLS (issue 30) / Curator %s, %d client(s): %s"
                                         % (kind, clients, str(e)[-800:]))
            env.hosts = env.tls["plain"]
    return got


def add_rows(env, res, got, rounds):
    for clients in (1, 32):
        for who, role in (("zklock", "zklock"), ("curator", "curator")):
            plain = got.get((who, "plain", clients))
            tls = got.get((who, "tls", clients))
            for kind, rs in (("plain", plain), ("tls", tls)):
                title = "TLS (issue 30): %s, %s" % (
                    plural(clients, "client"), "plain TCP" if kind == "plain" else "TLS")
                if not rs:
                    res.add(title, "%s %s" % (who, kind), role, note="FAILED (see the log)")
                    continue
                m = median(rs)
                each = "median of %d rounds (%s)" % (len(rs), ", ".join(
                    "%.0f" % r[0] for r in rs)) if len(rs) > 2 else \
                    "the better of 2 rounds (%s)" % ", ".join(
                        "%.0f" % r[0] for r in rs) if len(rs) == 2 else ""
                vs = ""
                if kind == "tls" and plain:
                    p = median(plain)
                    ratio = m[0] / p[0] if p[0] else 0
                    vs = "TLS/plain: cycles/s %.3f, p50 %.3f" % (
                        ratio, m[1] / p[1] if p[1] else 0)
                    if who == "zklock":
                        vs += " (target >= %.1f: %s)" % (TARGET,
                                                         "met" if ratio >= TARGET else "MISSED")
                    log("  %s %d client(s): %s" % (who, clients, vs))
                if who == "zklock":
                    where = "pg1" if clients == 1 else "16+16 on pg1+pg2"
                    label = "zklock session (acq;release), %s %s" % (
                        "TLS" if kind == "tls" else "plain", where)
                else:
                    label = "Curator InterProcessMutex (%s), %s, Netty socket" % (
                        plural(clients, "session"), "TLS" if kind == "tls" else "plain")
                res.add(title, label, role, m[0], m[1], m[2],
                        join_notes(vs, m[3], each), zk=m[4])


def scenario_tls(env, res):
    """the TLS row: see the module's comment"""
    log("scenario: TLS against plain TCP (issue 30)")
    rounds = 2 if env.secs <= 2 else 3
    saved = (env.hosts, env.zk_ports, env.zk_port, getattr(env, "idle", None))
    started = False
    try:
        start_tls_server(env)
        started = True
        env.zk_ports, env.zk_port = [env.tls["port"]], env.tls["port"]
        make_chroots(env)
        switch(env, "tls")
        # the TLS server's idle rate, with both instances on it
        env.idle = zk_rates(env, 3.0)
        got = measure(env, rounds)
        add_rows(env, res, got, rounds)
        res.failed += env.tls["failed"]
    except Skip as e:
        why = "zklock is built without the secure ZooKeeper client (make ZK_CLIENT=" \
              "$(bash scripts/build-zkclient.sh)): %s" % e
        log("  SKIPPED the TLS row: " + why)
        res.add("TLS (issue 30)", "zklock over TLS", "zklock", note="SKIPPED: " + why)
        if getattr(env, "tls_asked", False):
            # --only tls measured nothing: not a pass (exit 1)
            res.failed.append("TLS (issue 30): SKIPPED, though --only names it: " + why)
    except Exception as e:      # noqa: BLE001 -- reported, counted
        res.failed.append("TLS (issue 30): %s" % str(e)[-800:])
        res.add("TLS (issue 30)", "zklock over TLS", "zklock", note="FAILED: %s" % str(e)[:100])
    finally:
        env.hosts, env.zk_ports, env.zk_port, env.idle = saved
        if started:
            try:
                switch(env, None)
            except Exception as e:  # noqa: BLE001
                res.failed.append("TLS (issue 30): back on the run's ZooKeeper: %s" % e)
            stop_tls_server(env)
