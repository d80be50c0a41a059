/*
 * CuratorQueue.java -- Apache Curator 5.4's DistributedQueue under the
 * scenario `queue` of bench/run.sh (bench/queue_bench.py), beside zklock's
 * queue and Kazoo's LockingQueue and Queue.
 *
 * The queue is built with a lock path (QueueBuilder ... .lockPath(...)):
 * Curator's "take, then consume after the work" queue, the closest to
 * zklock's take-and-commit.  For each item its consumer creates an
 * EPHEMERAL lock node named after the item, reads the item, calls the
 * QueueConsumer, deletes the item, then deletes the lock node; a crash
 * before the item's delete leaves the item for another consumer.  Puts are
 * in the foreground (putInBackground(false)): put() returns once the
 * PERSISTENT_SEQUENTIAL node is created, as zk_queue_put_now and Kazoo's
 * put do.  Consuming is not a call: each consumer's DistributedQueue runs
 * a background thread fed by a children watch on the queue, which hands
 * each item to the QueueConsumer callback (the default, direct executor:
 * one item after the other).  An item counts as consumed once Curator's
 * processing of it has returned (the lock node deleted): see queue().
 *
 * One CuratorFramework (one ZooKeeper session) per client, as in
 * CuratorBench.  Run through CuratorBench (one compiled class path):
 *
 *   java CuratorBench queue1 HOSTS PATH SECS WARMUP
 *       one session, one queue: put an item, wait until the same queue's
 *       consumer has consumed and committed it (the callback had it, the
 *       item and its lock node are deleted), again and again; latency =
 *       from put's call to the lock node's delete
 *   java CuratorBench queuepc HOSTS PATH PRODUCERS CONSUMERS SECS WARMUP
 *       producer sessions (producer-only queues: no consumer) put as fast
 *       as they can; consumer sessions consume; counts the items consumed
 *       inside the window
 *
 *   java CuratorBench queueclean HOSTS PATH
 *       removes the queue (after ZooKeeper's counters are read: the
 *       deletes of the items left are no cost of the items measured)
 *
 * Prints one JSON line: items_per_s (items consumed per second in the
 * window), items (every item consumed, warm-up and the consumers' close
 * included: what ZooKeeper's counters saw), put (pc), left (pc: items
 * nobody consumed), p50_ms/p99_ms (queue1).  Every wait is bounded.
 */

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.queue.DistributedQueue;
import org.apache.curator.framework.recipes.queue.QueueBuilder;
import org.apache.curator.framework.recipes.queue.QueueConsumer;
import org.apache.curator.framework.recipes.queue.QueueSerializer;
import org.apache.curator.framework.state.ConnectionState;

final class CuratorQueue {
    private CuratorQueue() {}

    static final byte[] ITEM = {'x'};

    static final QueueSerializer<byte[]> BYTES = new QueueSerializer<byte[]>() {
        public byte[] serialize(byte[] item) { return item; }
        public byte[] deserialize(byte[] bytes) { return bytes; }
    };

    /** what is done once an item is consumed and committed */
    interface OnItem { void item(long now); }

    /** set by the callback, read after the item's processing returned (same thread) */
    static final ThreadLocal<Boolean> CONSUMED = ThreadLocal.withInitial(() -> false);

    static QueueConsumer<byte[]> consumer() {
        return new QueueConsumer<byte[]>() {
            public void consumeMessage(byte[] message) { CONSUMED.set(true); }
            public void stateChanged(CuratorFramework c, ConnectionState s) {}
        };
    }

    /**
     * A started queue with the lock path; on == null: producer only.  The
     * executor runs Curator's processing of one item (lock node, getData,
     * the callback, the item's delete, the lock node's delete) in the
     * queue's thread, as the default (direct) executor does, and calls on
     * after it returned, if the callback had the item: "consumed and
     * committed", as zklock's COMMIT and Kazoo's consume().
     */
    static DistributedQueue<byte[]> queue(CuratorFramework cf, String path, OnItem on)
            throws Exception {
        QueueBuilder<byte[]> b = QueueBuilder.builder(cf, on == null ? null : consumer(),
                                                      BYTES, path + "/items")
            .lockPath(path + "/locks")
            .putInBackground(false);
        if (on != null)
            b = b.executor(r -> {
                CONSUMED.set(false);
                r.run();
                if (CONSUMED.get()) on.item(System.nanoTime());
            });
        DistributedQueue<byte[]> q = b.buildQueue();
        q.start();
        return q;
    }

    static void queue1(String[] a) throws Exception {
        String path = a[2];
        double secs = Double.parseDouble(a[3]), warmup = Double.parseDouble(a[4]);
        CuratorFramework cf = CuratorBench.client();
        Semaphore got = new Semaphore(0);
        DistributedQueue<byte[]> q = queue(cf, path, now -> got.release());
        CuratorBench.Lat lat = new CuratorBench.Lat();
        long start = System.nanoTime() + (long) (warmup * 1e9);
        long end = start + (long) (secs * 1e9);
        long n = 0, every = 0;
        for (;;) {
            long t0 = System.nanoTime();
            if (t0 >= end) break;
            q.put(ITEM);
            if (!got.tryAcquire(10, TimeUnit.SECONDS))
                throw new RuntimeException("the item just put was not consumed within 10 s");
            long t1 = System.nanoTime();
            every++;
            if (t0 >= start && t1 <= end) {
                n++;
                lat.add(t1 - t0);
            }
        }
        q.close();
        long leftover = left(cf, path);
        System.out.println("{\"items_per_s\": " + CuratorBench.f(n / secs)
            + ", \"p50_ms\": " + CuratorBench.f(lat.pct(0.5))
            + ", \"p99_ms\": " + CuratorBench.f(lat.pct(0.99))
            + ", \"items\": " + every + ", \"left\": " + leftover + "}");
        cf.close();
    }

    static void queuepc(String[] a) throws Exception {
        String path = a[2];
        int producers = Integer.parseInt(a[3]), consumers = Integer.parseInt(a[4]);
        double secs = Double.parseDouble(a[5]), warmup = Double.parseDouble(a[6]);
        List<CuratorFramework> pcf = CuratorBench.clients(producers);
        List<CuratorFramework> ccf = CuratorBench.clients(consumers);
        long[] window = new long[2];
        AtomicLong inWindow = new AtomicLong(), every = new AtomicLong(), put = new AtomicLong();
        OnItem count = now -> {
            every.incrementAndGet();
            if (now >= window[0] && now <= window[1]) inWindow.incrementAndGet();
        };
        Throwable[] err = new Throwable[1];
        CyclicBarrier go = new CyclicBarrier(producers + 1);
        Thread[] th = new Thread[producers];
        for (int i = 0; i < producers; i++) {
            final CuratorFramework cf = pcf.get(i);
            th[i] = new Thread(() -> {
                try {
                    DistributedQueue<byte[]> q = queue(cf, path, null);
                    go.await(60, TimeUnit.SECONDS);
                    long end = window[1];
                    while (System.nanoTime() < end) {
                        q.put(ITEM);
                        put.incrementAndGet();
                    }
                    q.close();
                } catch (Throwable t) {
                    synchronized (err) { if (err[0] == null) err[0] = t; }
                }
            });
        }
        // the window is set before the consumers' threads start (they read it)
        window[0] = System.nanoTime() + 200_000_000L + (long) (warmup * 1e9);
        window[1] = window[0] + (long) (secs * 1e9);
        List<DistributedQueue<byte[]>> cqs = new ArrayList<>();
        for (CuratorFramework cf : ccf)
            cqs.add(queue(cf, path, count));
        for (Thread t : th) t.start();
        go.await(60, TimeUnit.SECONDS);
        for (Thread t : th) t.join((long) ((warmup + secs) * 1000) + 120000);
        if (err[0] != null) throw new RuntimeException(err[0]);
        for (DistributedQueue<byte[]> q : cqs) q.close();
        Thread.sleep(300);      // deletes in flight when the consumers closed
        long leftover = left(ccf.get(0), path);
        System.out.println("{\"items_per_s\": " + CuratorBench.f(inWindow.get() / secs)
            + ", \"items\": " + every.get() + ", \"put\": " + put.get()
            + ", \"left\": " + leftover + "}");
        for (CuratorFramework cf : pcf) cf.close();
        for (CuratorFramework cf : ccf) cf.close();
    }

    /** items nobody consumed (the queue is removed by queueclean, uncounted) */
    static long left(CuratorFramework cf, String path) throws Exception {
        return cf.getChildren().forPath(path + "/items").size();
    }

    static void queueclean(String[] a) throws Exception {
        CuratorFramework cf = CuratorBench.client();
        if (cf.checkExists().forPath(a[2]) != null)
            cf.delete().deletingChildrenIfNeeded().forPath(a[2]);
        System.out.println("{\"removed\": \"" + a[2] + "\"}");
        cf.close();
    }
}
