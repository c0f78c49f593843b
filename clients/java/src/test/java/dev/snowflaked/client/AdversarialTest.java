package dev.snowflaked.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Cases found by review: each failed before its fix. */
@Timeout(30)
class AdversarialTest {
    private final List<AutoCloseable> cleanup = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        for (int i = cleanup.size() - 1; i >= 0; i--) {
            cleanup.get(i).close();
        }
    }

    private FakeNode node() throws Exception {
        FakeNode n = new FakeNode();
        cleanup.add(n);
        return n;
    }

    private SnowflakedClient client(SnowflakedClient.Builder b) {
        SnowflakedClient c = b.build();
        cleanup.add(c);
        return c;
    }

    /**
     * A caller's deadline must bound a request whose body stalls as tightly as one whose head
     * never comes: the watchdog's 100 ms grace and 100 ms period let the call run 100-200 ms past
     * a 100 ms deadline (2-3 times it).
     */
    @Test
    void aStalledBodyEndsAtTheCallersDeadline() throws Exception {
        String stalled = FakeNode.stalledBody(cleanup);
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(stalled).timeout(Duration.ofSeconds(10)));
        for (int i = 0; i < 3; i++) {
            long start = System.nanoTime();
            assertThrows(SnowflakedTimeoutException.class, () -> c.nextId(Duration.ofMillis(100)));
            long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertTrue(took >= 95 && took < 195, "a 100 ms deadline took " + took + " ms");
        }
    }

    /**
     * Prefetch: "a chunk older than PrefetchMaxAge (1 s) is dropped, so the time inside an ID
     * lags the call by at most that". A chunk's age must count from when its request left, not
     * from when its slow answer arrived.
     */
    @Test
    void aPrefetchedIdIsNeverOlderThanOneSecond() throws Exception {
        FakeNode a = node();
        Map<Long, Long> issued = new ConcurrentHashMap<>();
        a.handler = (n, ex, q) -> {
            int count = Integer.parseInt(q.get("count"));
            StringBuilder b = new StringBuilder();
            long now = System.nanoTime();
            for (int i = 0; i < count; i++) {
                long id = n.next.incrementAndGet();
                issued.put(id, now);
                b.append(id).append('\n');
            }
            Thread.sleep(700); // a slow answer: the IDs were issued 700 ms before they arrive
            FakeNode.send(ex, 200, b.toString(), null);
            return true;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr).prefetch(8));
        long first = c.nextId();
        assertTrue(issued.containsKey(first));
        Thread.sleep(500); // the chunk arrived 500 ms ago; its IDs were issued 1200 ms ago
        long id = c.nextId();
        long age = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - issued.get(id));
        assertTrue(age <= 1000, "an ID issued " + age + " ms before the call returned it");
    }

    /**
     * Many callers of every kind (one ID, several, above maxBatch, with and without a deadline)
     * against nodes that answer late, hang, refuse with 503 or clamp: no ID twice, each call's
     * IDs increasing, every call back within its deadline (plus a margin for GC pauses).
     */
    @Test
    void manyCallersNeverGetAnIdTwice() throws Exception {
        java.util.concurrent.atomic.AtomicLong next = new java.util.concurrent.atomic.AtomicLong(1000);
        List<FakeNode> ns = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            FakeNode n = node();
            n.next.set(0);
            final int k = i;
            n.handler = (f, ex, q) -> {
                java.util.concurrent.ThreadLocalRandom r = java.util.concurrent.ThreadLocalRandom.current();
                int count = Integer.parseInt(q.getOrDefault("count", "1"));
                int roll = r.nextInt(100);
                if (roll < 5) {
                    FakeNode.send(ex, 503, FakeNode.error("out_of_service", "x", null), null);
                    return true;
                }
                if (roll < 8) {
                    FakeNode.send(ex, 503, FakeNode.error("batch_timeout", "x", null), null);
                    return true;
                }
                if (k == 0 && count > 37) {
                    FakeNode.send(ex, 400, FakeNode.error("invalid_count", "x", 37), null);
                    return true;
                }
                StringBuilder b = new StringBuilder();
                for (int j = 0; j < count; j++) {
                    b.append(next.incrementAndGet()).append('\n');
                }
                if (roll < 10) {
                    Thread.sleep(300); // slow: past stallAfter, and past some callers' deadlines
                } else if (roll < 40) {
                    Thread.sleep(r.nextInt(3));
                }
                FakeNode.send(ex, 200, b.toString(), null);
                return true;
            };
            ns.add(n);
        }
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(ns.get(0).addr, ns.get(1).addr, ns.get(2).addr)
                .maxBatch(100).downFor(Duration.ofMillis(20)).stallAfter(Duration.ofMillis(20)).timeout(Duration.ofSeconds(2)));
        Set<Long> seen = ConcurrentHashMap.newKeySet();
        java.util.concurrent.atomic.AtomicReference<String> bad = new java.util.concurrent.atomic.AtomicReference<>();
        java.util.concurrent.atomic.AtomicInteger served = new java.util.concurrent.atomic.AtomicInteger();
        int threads = 16;
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(threads);
        cleanup.add(pool::shutdownNow);
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(4);
        List<java.util.concurrent.Future<?>> fs = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            fs.add(pool.submit(() -> {
                java.util.concurrent.ThreadLocalRandom r = java.util.concurrent.ThreadLocalRandom.current();
                while (System.nanoTime() - end < 0 && bad.get() == null) {
                    int n = switch (r.nextInt(4)) {
                        case 0 -> 1;
                        case 1 -> 1 + r.nextInt(10);
                        case 2 -> 1 + r.nextInt(100);
                        default -> 1 + r.nextInt(250);
                    };
                    Duration d = r.nextBoolean() ? null : Duration.ofMillis(5 + r.nextInt(200));
                    long start = System.nanoTime();
                    long[] ids;
                    try {
                        ids = c.nextIds(n, d);
                    } catch (SnowflakedTimeoutException | SnowflakedNoNodeException e) {
                        ids = null;
                    } catch (RuntimeException e) {
                        bad.compareAndSet(null, "unexpected " + e);
                        return;
                    }
                    long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                    // The margin covers this test's own GC pauses (its set of IDs grows to a
                    // million) on a loaded 2-core machine: it catches a call held for a request's
                    // timeout (2 s), not scheduling noise.
                    if (d != null && took > d.toMillis() + 400) {
                        bad.compareAndSet(null, "a " + d.toMillis() + " ms call took " + took + " ms");
                    }
                    if (ids == null) {
                        continue;
                    }
                    if (ids.length != n) {
                        bad.compareAndSet(null, "asked " + n + ", got " + ids.length);
                    }
                    for (int i = 0; i < ids.length; i++) {
                        if (i > 0 && ids[i] <= ids[i - 1]) {
                            bad.compareAndSet(null, "not increasing");
                        }
                        if (!seen.add(ids[i])) {
                            bad.compareAndSet(null, "ID twice: " + ids[i]);
                        }
                    }
                    served.incrementAndGet();
                }
            }));
        }
        for (java.util.concurrent.Future<?> f : fs) {
            f.get(20, TimeUnit.SECONDS);
        }
        assertEquals(null, bad.get());
        assertTrue(served.get() > 100, "served " + served.get());
    }

    /**
     * close() must close the client's connections: a keep-alive connection stayed open (and the
     * HttpClient's selector and worker threads alive) for as long as the closed client was
     * referenced. On Java 17 they end at the next garbage collection once close() drops the
     * HttpClient, hence the System.gc() while waiting.
     */
    @Test
    void closeClosesTheConnections() throws Exception {
        java.net.ServerSocket ss = new java.net.ServerSocket(0, 50, java.net.InetAddress.getByName("127.0.0.1"));
        cleanup.add(ss);
        java.util.concurrent.CountDownLatch eof = new java.util.concurrent.CountDownLatch(1);
        Thread t = new Thread(() -> {
            try (java.net.Socket s = ss.accept()) {
                java.io.InputStream in = s.getInputStream();
                java.io.ByteArrayOutputStream head = new java.io.ByteArrayOutputStream();
                while (!head.toString(java.nio.charset.StandardCharsets.US_ASCII).endsWith("\r\n\r\n")) {
                    int b = in.read();
                    if (b < 0) {
                        return;
                    }
                    head.write(b);
                }
                s.getOutputStream().write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n5000\n".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                s.getOutputStream().flush();
                if (in.read() < 0) { // blocks while the client keeps the connection
                    eof.countDown();
                }
            } catch (java.io.IOException e) {
                eof.countDown(); // reset by the client: closed too
            }
        });
        t.setDaemon(true);
        t.start();
        SnowflakedClient c = client(SnowflakedClient.builder().nodes("127.0.0.1:" + ss.getLocalPort()));
        assertEquals(5000, c.nextId());
        c.close();
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        while (!eof.await(100, TimeUnit.MILLISECONDS)) {
            if (System.nanoTime() - end > 0) {
                fail("the closed client's connection is still open");
            }
            System.gc();
        }
    }

    /** A Duration too large for nanoseconds is no deadline, not an ArithmeticException. */
    @Test
    void aHugeDurationIsNoDeadline() throws Exception {
        FakeNode a = node();
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr));
        assertEquals(1001, c.nextId(Duration.ofSeconds(Long.MAX_VALUE)));
        assertEquals(1002, c.nextId(Duration.ofNanos(Long.MAX_VALUE)));
        assertEquals(1003, c.nextSegment("t", Duration.ofDays(1L << 40)));
    }

    /**
     * A node list from /cluster/nodes is the cluster's word, not checked by build(): an address
     * that is no URI authority ("bad host:1") made every call sent to it throw
     * IllegalArgumentException (from URI.create) instead of failing over, and a poll that met it
     * asked no further node.
     */
    @Test
    void aMalformedAddressFromBootstrapIsANodeFailure() throws Exception {
        FakeNode seed = node();
        seed.handler = (n, ex, q) -> {
            if (!ex.getRequestURI().getPath().equals("/cluster/nodes")) {
                return false;
            }
            FakeNode.send(ex, 200, "{\"nodes\":[{\"worker_id\":1,\"addr\":\"bad host:1\"},{\"worker_id\":2,\"addr\":\"" + n.addr + "\"}]}", null);
            return true;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().bootstrap(seed.addr).bootstrapInterval(Duration.ofSeconds(60)));
        for (int i = 0; i < 6; i++) {
            assertTrue(c.nextId() > 1000);
            assertTrue(c.nextSegment("t") > 1000);
        }
    }

    /**
     * close() with calls of every kind waiting on a hung node (one alone, several joined to a
     * batch, one in a stalled slot's successor, prefetch waiters, a dense ID, a UUID): each
     * returns SnowflakedClosedException promptly, and no thread of the client is left.
     */
    @Test
    void closeEndsEveryWaitingCall() throws Exception {
        FakeNode hung = node();
        java.util.concurrent.CountDownLatch hang = new java.util.concurrent.CountDownLatch(1);
        cleanup.add(hang::countDown);
        hung.handler = (n, ex, q) -> {
            hang.await(20, TimeUnit.SECONDS);
            return false;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(hung.addr).timeout(Duration.ofSeconds(15))
                .stallAfter(Duration.ofMillis(30)).prefetch(16));
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newCachedThreadPool();
        cleanup.add(pool::shutdownNow);
        List<java.util.concurrent.Future<?>> fs = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            fs.add(pool.submit(() -> c.nextIds(3)));
            fs.add(pool.submit(() -> c.nextId()));
        }
        fs.add(pool.submit(() -> c.nextSegment("t")));
        fs.add(pool.submit(() -> c.nextUuid()));
        fs.add(pool.submit(() -> c.nextGene(3)));
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (hung.hits.get() < 4) { // the calls are out or waiting
            if (System.nanoTime() - end > 0) {
                fail("requests: " + hung.hits.get());
            }
            Thread.sleep(5);
        }
        Thread.sleep(100); // past stallAfter: slots handed on
        long start = System.nanoTime();
        c.close();
        for (java.util.concurrent.Future<?> f : fs) {
            try {
                f.get(3, TimeUnit.SECONDS);
                fail("served after close");
            } catch (java.util.concurrent.ExecutionException e) {
                assertTrue(e.getCause() instanceof SnowflakedClosedException, String.valueOf(e.getCause()));
            }
        }
        long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(took < 1000, "close took " + took + " ms to end the calls");
        end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (true) {
            List<String> left = new ArrayList<>();
            for (Thread t : Thread.getAllStackTraces().keySet()) {
                if (t.getName().startsWith("snowflaked-") && t.isAlive()) {
                    left.add(t.getName());
                }
            }
            // Other tests' clients may still be closing: only this client's kinds matter, and
            // they all end; wait for none at all, bounded.
            if (left.isEmpty()) {
                break;
            }
            if (System.nanoTime() - end > 0) {
                fail("threads left after close: " + left);
            }
            Thread.sleep(10);
        }
    }

    /** Prefetch with many callers and failing nodes: no ID twice. */
    @Test
    void prefetchNeverHandsAnIdTwice() throws Exception {
        java.util.concurrent.atomic.AtomicLong next = new java.util.concurrent.atomic.AtomicLong(1000);
        FakeNode a = node();
        FakeNode b = node();
        FakeNode.Handler h = (n, ex, q) -> {
            if (java.util.concurrent.ThreadLocalRandom.current().nextInt(10) == 0) {
                FakeNode.send(ex, 503, FakeNode.error("out_of_service", "x", null), null);
                return true;
            }
            int count = Integer.parseInt(q.get("count"));
            StringBuilder sb = new StringBuilder();
            for (int j = 0; j < count; j++) {
                sb.append(next.incrementAndGet()).append('\n');
            }
            FakeNode.send(ex, 200, sb.toString(), null);
            return true;
        };
        a.handler = h;
        b.handler = h;
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr, b.addr).prefetch(64).downFor(Duration.ofMillis(10)));
        Set<Long> seen = ConcurrentHashMap.newKeySet();
        java.util.concurrent.atomic.AtomicReference<String> bad = new java.util.concurrent.atomic.AtomicReference<>();
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(8);
        cleanup.add(pool::shutdownNow);
        List<java.util.concurrent.Future<?>> fs = new ArrayList<>();
        for (int t = 0; t < 8; t++) {
            fs.add(pool.submit(() -> {
                for (int i = 0; i < 5000 && bad.get() == null; i++) {
                    try {
                        long id = c.nextId(Duration.ofSeconds(2));
                        if (!seen.add(id)) {
                            bad.compareAndSet(null, "ID twice: " + id);
                        }
                    } catch (SnowflakedNoNodeException e) {
                        // both nodes down for a moment
                    }
                }
            }));
        }
        for (java.util.concurrent.Future<?> f : fs) {
            f.get(25, TimeUnit.SECONDS);
        }
        assertEquals(null, bad.get());
    }
}
