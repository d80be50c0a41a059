/*
 * CuratorBench.java -- Apache Curator 5.4's lock recipes (InterProcessMutex,
 * InterProcessReadWriteLock) under the scenarios of bench/run.sh.
 *
 * One CuratorFramework (one ZooKeeper session) per client thread, as
 * separate processes would have.  Compiled and run by bench/run.sh:
 *
 *   java CuratorBench cycles  HOSTS BASE RECIPE CLIENTS SAME|DISTINCT SECS WARMUP
 *   java CuratorBench handoff HOSTS BASE SECS HOLD_MS OUTFILE
 *   java CuratorBench scale   HOSTS BASE WAITERS SECS
 *   java CuratorBench many    HOSTS BASE COUNT SECS LIMIT_SECS [IDLE_SECS]
 *   java CuratorBench queue1|queuepc|queueclean ...   (DistributedQueue: CuratorQueue.java)
 *
 * RECIPE is mutex, read or write.  Each mode prints one JSON line on
 * stdout; handoff also writes "who t_req t_got t_rel" lines (seconds, on
 * the CLOCK_MONOTONIC of System.nanoTime) to OUTFILE for bench.py.  Every
 * loop and wait is bounded in time.
 */

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorBench {
    static String hosts;

    // ------------------------------------------------------------ helpers

    static CuratorFramework client() throws Exception {
        CuratorFramework cf = CuratorFrameworkFactory.builder()
            .connectString(hosts)
            .sessionTimeoutMs(10000)
            .connectionTimeoutMs(15000)
            .retryPolicy(new ExponentialBackoffRetry(100, 3))
            .build();
        cf.start();
        if (!cf.blockUntilConnected(20, TimeUnit.SECONDS))
            throw new RuntimeException("could not connect to " + hosts);
        return cf;
    }

    /** many clients, connected in parallel (bounded) */
    static List<CuratorFramework> clients(int n) throws Exception {
        ExecutorService ex = Executors.newFixedThreadPool(Math.min(n, 16));
        List<Future<CuratorFramework>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++)
            fs.add(ex.submit(CuratorBench::client));
        List<CuratorFramework> out = new ArrayList<>();
        for (Future<CuratorFramework> f : fs)
            out.add(f.get(60, TimeUnit.SECONDS));
        ex.shutdown();
        return out;
    }

    static InterProcessLock lock(CuratorFramework cf, String path, String recipe) {
        switch (recipe) {
            case "mutex": return new InterProcessMutex(cf, path);
            case "read": return new InterProcessReadWriteLock(cf, path).readLock();
            case "write": return new InterProcessReadWriteLock(cf, path).writeLock();
            default: throw new IllegalArgumentException("recipe " + recipe);
        }
    }

    static void acquire(InterProcessLock l, long timeoutMs) throws Exception {
        if (!l.acquire(timeoutMs, TimeUnit.MILLISECONDS))
            throw new RuntimeException("lock not acquired within " + timeoutMs + " ms");
    }

    static final class Lat {
        long[] v = new long[1 << 14];
        int n;
        void add(long x) {
            if (n == v.length) v = Arrays.copyOf(v, n * 2);
            v[n++] = x;
        }
        void addAll(Lat o) { for (int i = 0; i < o.n; i++) add(o.v[i]); }
        double max() {
            long m = -1_000_000;
            for (int i = 0; i < n; i++) m = Math.max(m, v[i]);
            return m / 1e6;
        }
        /** nearest-rank percentile in ms */
        double pct(double p) {
            if (n == 0) return -1;
            long[] s = Arrays.copyOf(v, n);
            Arrays.sort(s);
            int k = (int) Math.ceil(p * n);
            k = Math.max(1, Math.min(n, k));
            return s[k - 1] / 1e6;
        }
    }

    static String f(double x) { return String.format(Locale.ROOT, "%.4f", x); }

    /** the mntr four-letter word, as a map */
    static Map<String, String> mntr() throws Exception {
        String[] hp = hosts.split(",")[0].split(":");
        Map<String, String> m = new HashMap<>();
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(hp[0], Integer.parseInt(hp[1])), 3000);
            s.setSoTimeout(3000);
            OutputStream o = s.getOutputStream();
            o.write("mntr".getBytes(StandardCharsets.US_ASCII));
            o.flush();
            InputStream in = s.getInputStream();
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            byte[] buf = new byte[8192];
            int r;
            while ((r = in.read(buf)) > 0) b.write(buf, 0, r);
            for (String line : b.toString(StandardCharsets.US_ASCII).split("\n")) {
                String[] kv = line.split("\t");
                if (kv.length == 2) m.put(kv[0].trim(), kv[1].trim());
            }
        }
        return m;
    }

    /** watch notifications the server has sent so far (all event types) */
    static long notifications() throws Exception {
        Map<String, String> m = mntr();
        long sum = 0;
        for (String k : new String[] {"created", "deleted", "children", "changed"}) {
            String v = m.get("zk_sum_node_" + k + "_watch_count");
            if (v != null) sum += Long.parseLong(v);
        }
        return sum;
    }

    static long mntrLong(String key) throws Exception {
        String v = mntr().get(key);
        return v == null ? -1 : Long.parseLong(v);
    }

    /**
     * Cycles of clients.size() threads on the lock(s); window [warmup, warmup+secs].
     * Returns {cycles/s, p50, p99, cycles}.
     */
    static double[] runCycles(List<CuratorFramework> cfs, String base, String recipe,
                              boolean same, double secs, double warmup) throws Exception {
        int n = cfs.size();
        Lat[] lats = new Lat[n];
        long[] counts = new long[n];
        long[] every = new long[n];     // warm-up included: for ZK requests per cycle
        Thread[] th = new Thread[n];
        Throwable[] err = new Throwable[1];
        CyclicBarrier go = new CyclicBarrier(n + 1);
        long[] window = new long[2];
        for (int i = 0; i < n; i++) {
            final int id = i;
            lats[i] = new Lat();
            th[i] = new Thread(() -> {
                try {
                    InterProcessLock l = lock(cfs.get(id), same ? base + "/r" : base + "/r" + id, recipe);
                    go.await(60, TimeUnit.SECONDS);
                    long start = window[0], end = window[1];
                    for (;;) {
                        long t0 = System.nanoTime();
                        if (t0 >= end) break;
                        acquire(l, 60000);
                        long t1 = System.nanoTime();
                        l.release();
                        every[id]++;
                        if (t0 >= start && t1 <= end) {
                            counts[id]++;
                            lats[id].add(t1 - t0);
                        }
                    }
                } catch (Throwable t) {
                    synchronized (err) { if (err[0] == null) err[0] = t; }
                }
            });
            th[i].start();
        }
        long now = System.nanoTime();
        window[0] = now + (long) (warmup * 1e9);
        window[1] = window[0] + (long) (secs * 1e9);
        go.await(60, TimeUnit.SECONDS);
        for (Thread t : th) t.join((long) ((warmup + secs) * 1000) + 120000);
        if (err[0] != null) throw new RuntimeException(err[0]);
        Lat all = new Lat();
        long cycles = 0, total = 0;
        for (int i = 0; i < n; i++) { all.addAll(lats[i]); cycles += counts[i]; total += every[i]; }
        return new double[] {cycles / secs, all.pct(0.50), all.pct(0.99), cycles, total, all.max()};
    }

    // ------------------------------------------------------------ modes

    static void cycles(String[] a) throws Exception {
        String base = a[2], recipe = a[3];
        int n = Integer.parseInt(a[4]);
        boolean same = a[5].equalsIgnoreCase("same");
        double secs = Double.parseDouble(a[6]), warmup = Double.parseDouble(a[7]);
        List<CuratorFramework> cfs = clients(n);
        double[] r = runCycles(cfs, base, recipe, same, secs, warmup);
        System.out.println("{\"cycles_per_s\": " + f(r[0]) + ", \"p50_ms\": " + f(r[1])
            + ", \"p99_ms\": " + f(r[2]) + ", \"cycles\": " + (long) r[3]
            + ", \"all_cycles\": " + (long) r[4]
            + ", \"secs\": " + f(secs) + ", \"clients\": " + n + "}");
        for (CuratorFramework cf : cfs) cf.close();
    }

    static void handoff(String[] a) throws Exception {
        String base = a[2];
        double secs = Double.parseDouble(a[3]);
        long holdMs = Long.parseLong(a[4]);
        String out = a[5];
        List<CuratorFramework> cfs = clients(2);
        List<String> lines = new ArrayList<>();
        CyclicBarrier go = new CyclicBarrier(2);
        long end = System.nanoTime() + (long) (secs * 1e9) + 500_000_000L;
        Thread[] th = new Thread[2];
        Throwable[] err = new Throwable[1];
        for (int i = 0; i < 2; i++) {
            final int id = i;
            th[i] = new Thread(() -> {
                try {
                    InterProcessMutex m = new InterProcessMutex(cfs.get(id), base + "/pingpong");
                    List<String> mine = new ArrayList<>();
                    go.await(60, TimeUnit.SECONDS);
                    while (System.nanoTime() < end) {
                        long tReq = System.nanoTime();
                        acquire(m, 60000);
                        long tGot = System.nanoTime();
                        Thread.sleep(holdMs);
                        long tRel = System.nanoTime();
                        m.release();
                        mine.add(id + " " + tReq / 1e9 + " " + tGot / 1e9 + " " + tRel / 1e9);
                    }
                    synchronized (lines) { lines.addAll(mine); }
                } catch (Throwable t) {
                    synchronized (err) { if (err[0] == null) err[0] = t; }
                }
            });
            th[i].start();
        }
        for (Thread t : th) t.join((long) (secs * 1000) + 120000);
        if (err[0] != null) throw new RuntimeException(err[0]);
        try (PrintWriter w = new PrintWriter(out, "US-ASCII")) {
            for (String l : lines) w.println(l);
        }
        System.out.println("{\"records\": " + lines.size() + "}");
        for (CuratorFramework cf : cfs) cf.close();
    }

    static void scale(String[] a) throws Exception {
        String base = a[2];
        int w = Integer.parseInt(a[3]);
        double secs = Double.parseDouble(a[4]);
        String path = base + "/scale";
        CuratorFramework holder = client();
        InterProcessMutex hm = new InterProcessMutex(holder, path);
        acquire(hm, 60000);
        List<CuratorFramework> unrelated = clients(1);
        double[] before = runCycles(unrelated, base + "/unrelated", "mutex", true, secs, 1.0);

        List<CuratorFramework> cfs = clients(w);
        CountDownLatch done = new CountDownLatch(w);
        AtomicLong lastGot = new AtomicLong();
        Throwable[] err = new Throwable[1];
        List<Thread> th = new ArrayList<>();
        for (int i = 0; i < w; i++) {
            final CuratorFramework cf = cfs.get(i);
            Thread t = new Thread(() -> {
                try {
                    InterProcessMutex m = new InterProcessMutex(cf, path);
                    acquire(m, 300000);
                    lastGot.accumulateAndGet(System.nanoTime(), Math::max);
                    m.release();
                } catch (Throwable e) {
                    synchronized (err) { if (err[0] == null) err[0] = e; }
                } finally {
                    done.countDown();
                }
            }, "waiter-" + i);
            t.setDaemon(true);
            t.start();
            th.add(t);
        }
        long deadline = System.nanoTime() + 120_000_000_000L;
        int queued = 0;
        while (System.nanoTime() < deadline) {
            queued = holder.getChildren().forPath(path).size() - 1;
            if (queued >= w) break;
            Thread.sleep(100);
        }
        if (queued < w) throw new RuntimeException("only " + queued + " of " + w + " waiters queued");
        long watches = mntrLong("zk_watch_count");
        double[] with = runCycles(unrelated, base + "/unrelated", "mutex", true, secs, 0.0);

        long n0 = notifications();
        long t0 = System.nanoTime();
        hm.release();
        if (!done.await(300, TimeUnit.SECONDS))
            throw new RuntimeException("waiters did not drain within 300 s");
        if (err[0] != null) throw new RuntimeException(err[0]);
        double drain = (lastGot.get() - t0) / 1e9;
        Thread.sleep(500);      // let the last deletes' notifications be counted
        long n1 = notifications();
        System.out.println("{\"waiters\": " + w + ", \"watches_queued\": " + watches
            + ", \"drain_s\": " + f(drain) + ", \"grants_per_s\": " + f(w / drain)
            + ", \"notifications\": " + (n1 - n0) + ", \"releases\": " + (w + 1)
            + ", \"notif_per_release\": " + f((n1 - n0) / (double) (w + 1))
            + ", \"without\": {\"cycles_per_s\": " + f(before[0]) + ", \"p50_ms\": " + f(before[1]) + ", \"p99_ms\": " + f(before[2]) + ", \"max_ms\": " + f(before[5]) + "}"
            + ", \"with\": {\"cycles_per_s\": " + f(with[0]) + ", \"p50_ms\": " + f(with[1]) + ", \"p99_ms\": " + f(with[2]) + ", \"max_ms\": " + f(with[5]) + "}}");
        for (CuratorFramework cf : cfs) cf.close();
        unrelated.get(0).close();
        holder.close();
    }

    static void many(String[] a) throws Exception {
        String base = a[2];
        int count = Integer.parseInt(a[3]);
        double secs = Double.parseDouble(a[4]);
        double limit = Double.parseDouble(a[5]);
        double idle = a.length > 6 ? Double.parseDouble(a[6]) : 0;
        CuratorFramework cf = client();
        List<CuratorFramework> unrelated = clients(1);
        // warm the JIT on the unrelated lock first, outside the figures
        runCycles(unrelated, base + "/unrelated", "mutex", true, 1.0, 0.0);
        List<InterProcessMutex> held = new ArrayList<>();
        Lat lat = new Lat();
        long t0 = System.nanoTime(), stop = t0 + (long) (limit * 1e9);
        for (int i = 0; i < count && System.nanoTime() < stop; i++) {
            InterProcessMutex m = new InterProcessMutex(cf, base + "/many/r" + i);
            long s = System.nanoTime();
            acquire(m, 60000);
            lat.add(System.nanoTime() - s);
            held.add(m);
        }
        double took = (System.nanoTime() - t0) / 1e9;
        long watches = mntrLong("zk_watch_count");
        long znodes = mntrLong("zk_znode_count");
        double bg = 0;
        if (idle > 0) {     // what ZooKeeper receives while nothing happens
            long p0 = mntrLong("zk_packets_received");
            Thread.sleep((long) (idle * 1000));
            bg = (mntrLong("zk_packets_received") - p0) / idle;
        }
        double[] with = runCycles(unrelated, base + "/unrelated", "mutex", true, secs, 0.0);
        long r0 = System.nanoTime();
        for (InterProcessMutex m : held) m.release();
        double rel = (System.nanoTime() - r0) / 1e9;
        System.out.println("{\"taken\": " + held.size() + ", \"take_s\": " + f(took)
            + ", \"locks_per_s\": " + f(held.size() / took)
            + ", \"p50_ms\": " + f(lat.pct(0.5)) + ", \"p99_ms\": " + f(lat.pct(0.99))
            + ", \"watches\": " + watches + ", \"znodes\": " + znodes
            + ", \"idle_requests_per_s\": " + f(bg)
            + ", \"release_s\": " + f(rel)
            + ", \"with\": {\"cycles_per_s\": " + f(with[0]) + ", \"p50_ms\": " + f(with[1]) + ", \"p99_ms\": " + f(with[2]) + ", \"max_ms\": " + f(with[5]) + "}}");
        unrelated.get(0).close();
        cf.close();
    }

    public static void main(String[] a) throws Exception {
        if (a.length < 3) {
            System.err.println("usage: CuratorBench cycles|handoff|scale|many|queue1|queuepc|queueclean HOSTS BASE ...");
            System.exit(2);
        }
        hosts = a[1];
        switch (a[0]) {
            case "cycles": cycles(a); break;
            case "handoff": handoff(a); break;
            case "scale": scale(a); break;
            case "many": many(a); break;
            case "queue1": CuratorQueue.queue1(a); break;
            case "queuepc": CuratorQueue.queuepc(a); break;
            case "queueclean": CuratorQueue.queueclean(a); break;
            default: System.err.println("unknown mode " + a[0]); System.exit(2);
        }
        System.exit(0);
    }
}
