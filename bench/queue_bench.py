"""queue_bench.py -- the scenario `queue` (issue 31; not queue.py, which would
shadow the standard library's queue module for every script in bench/, Kazoo
included): zklock's distributed queue
beside Kazoo's LockingQueue and Queue (bench/kazoo_queue.py) and Curator's
DistributedQueue built with a lock path (bench/CuratorQueue.java) on the
same ZooKeeper, in one run.

  - 1 client: put, then take and commit, one after the other (zklock:
    zk_queue_put_now; BEGIN; zk_queue_try_take; COMMIT, one pgbench
    transaction per item; Kazoo: put, get, consume; Curator: one session,
    put, then wait until the queue's own consumer thread, woken by its
    children watch, has locked, read, handed over and deleted the item)
  - 8 producers / 8 consumers across two instances (zklock: 4 + 4 on each
    of pg1 and pg2; Kazoo: 8 + 8 processes; Curator: 8 + 8 sessions in one
    JVM): items taken and committed per second, while the producers put as
    fast as they can
  - the handoff: a taker on pg2 waits in zk_queue_take, pg1 puts an item
    every 50 ms carrying clock_timestamp() taken just before the put; the
    latency is the taker's clock_timestamp() at its grant minus that (one
    machine, one clock), p50/p99

ZooKeeper's requests per item are counted as the lock rows count them
(servers.ZkCounter: every server's request counter, the idle rate taken
out), divided by the items of the measurement; with 8 + 8 the producers
put more than the consumers take, so an item there is half a put and half
a take: (puts + takes) / 2.  Kazoo's and Curator's handoffs are not
measured.  The queue's SQL comes from
zklock--1.8--1.9.sql when the installed extension lacks it (as the TAP
tests load it)."""
import os

from common import HERE, PYTHON, join_notes, log, pct
from runner_curator import curator_cmd
from runner_pg import Pgbench
from servers import ZkCounter, run_json

TITLE1 = "queue: 1 client, put + take-and-commit"
TITLE8 = "queue: 8 producers / 8 consumers, two instances"
TITLEH = "queue: handoff, put on pg1 -> waiting taker on pg2"


def setup_sql(env):
    """the queue's functions, from the update script, on both instances"""
    with open(os.path.join(HERE, "..", "zklock--1.8--1.9.sql")) as f:
        sql = f.read()
    lines = [l for l in sql.splitlines()
             if not l.startswith("\\echo") and not l.startswith("SELECT @extschema@")]
    sql = "\n".join(lines).replace("@extschema@", "public").replace(
        "MODULE_PATHNAME", "$libdir/zklock")
    for pg in (env.pg1, env.pg2):
        if pg.psql("SELECT count(*) FROM pg_proc WHERE proname = 'zk_queue_take'") == "0":
            pg.psql(sql)
        pg.psql("DROP TABLE IF EXISTS bench_qgrant; "
                "CREATE TABLE bench_qgrant (t_put float8, t_got float8)")


def purge(env, q):
    return int(env.pg1.psql("SELECT zk_queue_purge('%s')" % q))


def kazoo(env, *args):
    return [PYTHON, os.path.join(HERE, "kazoo_queue.py"), args[0], env.hosts,
            *[str(a) for a in args[1:]]]


def one_client(env, res):
    script = ("SELECT zk_queue_put_now('bq1', 'x');\nBEGIN;\n"
              "SELECT id FROM zk_queue_try_take('bq1');\nCOMMIT;\n")

    def zk():
        with ZkCounter(env) as z:
            pb = Pgbench(env, env.pg1, script, 1, secs=env.secs).wait()
        n = pb.processed()
        lat = [r[2] for r in pb.log_rows()]
        res.add(TITLE1, "zklock put_now; BEGIN; try_take; COMMIT (pg1)", "zklock",
                pb.tps(), pct(lat, .5) * 1e3, pct(lat, .99) * 1e3,
                join_notes(z.note(n), "means (pgbench -r): " + ", ".join(
                    "%s %.3f" % (c.split("(")[0].split()[-1] if c.startswith("SELECT")
                                 else c.rstrip(";"), m) for m, c in pb.statement_means()),
                    "left in the queue: %d" % purge(env, "bq1")),
                zk=z.counts(n))
    res.attempt(TITLE1, "zklock", "zklock", zk)

    for kind, label in (("locking", "LockingQueue put; get; consume"),
                        ("plain", "Queue put; get")):
        def kz(kind=kind, label=label):
            with ZkCounter(env) as z:
                r = run_json(kazoo(env, "cycles", "/kazoo/q1" + kind, kind, env.secs,
                                   env.warmup), env.secs + env.warmup + 180, "kazoo_queue")
            res.add(TITLE1, "Kazoo " + label, "kazoo", r["items_per_s"],
                    note=z.note(r["items"]), zk=z.counts(r["items"]))
        res.attempt(TITLE1, "Kazoo " + kind, "kazoo", kz)

    def cur():
        with ZkCounter(env) as z:
            r = run_json(curator_cmd(env, "queue1", "/curator/q1", env.secs, env.warmup),
                         env.secs + env.warmup + 180, "CuratorBench queue1")
        res.add(TITLE1, "Curator DistributedQueue+lockPath put; consumed", "curator",
                r["items_per_s"], r["p50_ms"], r["p99_ms"],
                join_notes(z.note(r["items"]), "1 session: put, then wait until its "
                           "consumer thread had the item and deleted it and its lock node",
                           "left: %d" % r["left"]),
                zk=z.counts(r["items"]))
    res.attempt(TITLE1, "Curator", "curator", cur)


def many(env, res):
    put = "SELECT zk_queue_put_now('bq8', 'x');\n"
    take = "BEGIN;\nSELECT id FROM zk_queue_take('bq8', '500 ms');\nCOMMIT;\n"

    def zk():
        before = int(env.pg1.psql("SELECT zk_queue_length('bq8')"))
        with ZkCounter(env) as z:
            pbs = [Pgbench(env, pg, s, 4, secs=env.secs, log_latencies=False)
                   for pg in (env.pg1, env.pg2) for s in (put, take)]
            for pb in pbs:
                pb.wait()
            after = int(env.pg1.psql("SELECT zk_queue_length('bq8')"))
        puts = pbs[0].processed() + pbs[2].processed()
        taken = puts - (after - before)
        items = (puts + taken) / 2.0
        res.add(TITLE8, "zklock 4+4 producers, 4+4 consumers on pg1+pg2", "zklock",
                taken / env.secs,
                note=join_notes(z.note(items), "%d put, %d taken, %d left" %
                                (puts, taken, after)),
                zk=z.counts(items))
        purge(env, "bq8")
    res.attempt(TITLE8, "zklock", "zklock", zk)

    for kind in ("locking", "plain"):
        def kz(kind=kind):
            with ZkCounter(env) as z:
                r = run_json(kazoo(env, "pc", "/kazoo/q8" + kind, kind, 8, 8, env.secs,
                                   env.warmup), env.secs + env.warmup + 240, "kazoo_queue")
            items = (r["put"] + r["items"]) / 2.0
            res.add(TITLE8, "Kazoo %s (8 + 8 processes)" % (
                "LockingQueue" if kind == "locking" else "Queue"), "kazoo",
                r["items_per_s"], note=join_notes(
                    z.note(items), "%d put, %d taken, %d left" % (
                        r["put"], r["items"], r["left"])),
                zk=z.counts(items))
            # the items left are removed outside the count, as purge() for zklock
            run_json(kazoo(env, "clean", "/kazoo/q8" + kind), 120, "kazoo_queue clean")
        res.attempt(TITLE8, "Kazoo " + kind, "kazoo", kz)

    def cur():
        with ZkCounter(env) as z:
            r = run_json(curator_cmd(env, "queuepc", "/curator/q8", 8, 8, env.secs,
                                     env.warmup), env.secs + env.warmup + 240,
                         "CuratorBench queuepc")
        items = (r["put"] + r["items"]) / 2.0
        res.add(TITLE8, "Curator DistributedQueue+lockPath (8 + 8 sessions)", "curator",
                r["items_per_s"], note=join_notes(
                    z.note(items), "%d put, %d consumed, %d left" % (
                        r["put"], r["items"], r["left"])),
                zk=z.counts(items))
        run_json(curator_cmd(env, "queueclean", "/curator/q8"), 120, "CuratorBench queueclean")
    res.attempt(TITLE8, "Curator", "curator", cur)


def handoff(env, res):
    putter = ("SELECT zk_queue_put_now('bqh', extract(epoch FROM clock_timestamp())::text);\n"
              "SELECT pg_sleep(0.05);\n")
    taker = ("BEGIN;\nINSERT INTO bench_qgrant SELECT convert_from(item, 'UTF8')::float8,"
             " extract(epoch FROM clock_timestamp()) FROM zk_queue_take('bqh', '2 s')"
             " WHERE id IS NOT NULL;\nCOMMIT;\n")

    def zk():
        env.pg2.psql("TRUNCATE bench_qgrant")
        t = Pgbench(env, env.pg2, taker, 1, secs=env.secs + 1, log_latencies=False)
        p = Pgbench(env, env.pg1, putter, 1, secs=env.secs, log_latencies=False)
        p.wait()
        t.wait()
        lat = [float(x) for x in env.pg2.psql(
            "SELECT t_got - t_put FROM bench_qgrant").split()]
        res.add(TITLEH, "zklock put_now (pg1) -> zk_queue_take (pg2)", "zklock",
                None, pct(lat, .5) * 1e3, pct(lat, .99) * 1e3,
                "%d handoffs, %d of them over 500 ms (the taker's wait is 2 s); from "
                "before the put's call to the grant" % (len(lat), len([x for x in lat if x > .5])))
        purge(env, "bqh")
    res.attempt(TITLEH, "zklock", "zklock", zk)


def scenario_queue(env, res):
    log("scenario: queue")
    setup_sql(env)
    one_client(env, res)
    many(env, res)
    handoff(env, res)
