package dev.snowflaked.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(30)
class SnowflakedClientTest {
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

    /** Waits, bounded, until cond holds. */
    private static void eventually(String what, java.util.function.BooleanSupplier cond) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() - end > 0) {
                fail("timed out waiting for " + what);
            }
            Thread.sleep(5);
        }
    }

    private static void increasing(long[] ids) {
        for (int i = 1; i < ids.length; i++) {
            assertTrue(ids[i] > ids[i - 1], "IDs not increasing at " + i);
        }
    }

    @Test
    void servesIdsAndCountsExactly() throws Exception {
        FakeNode a = node();
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr));
        long id = c.nextId();
        assertEquals(1001, id);
        long[] ids = c.nextIds(5);
        assertArrayEquals(new long[] {1002, 1003, 1004, 1005, 1006}, ids);
        assertEquals(List.of("/ids?count=1", "/ids?count=5"), a.requests);
        assertEquals(List.of(a.addr), c.nodes());
    }

    @Test
    void concurrentCallersShareABatch() throws Exception {
        FakeNode a = node();
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger first = new AtomicInteger();
        a.handler = (n, ex, q) -> {
            if (first.getAndIncrement() == 0) {
                release.await(10, TimeUnit.SECONDS); // the first request hangs until the others have joined
            }
            return false;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr).stallAfter(Duration.ofSeconds(30)));
        ExecutorService pool = Executors.newFixedThreadPool(11);
        cleanup.add(pool::shutdownNow);
        List<Future<long[]>> calls = new ArrayList<>();
        calls.add(pool.submit(() -> c.nextIds(1)));
        eventually("the first request", () -> a.hits.get() == 1);
        for (int i = 0; i < 10; i++) {
            calls.add(pool.submit(() -> c.nextIds(3)));
        }
        eventually("10 callers joined", () -> c.idsBatcher().waiting() == 10);
        release.countDown();
        Set<Long> seen = new HashSet<>();
        for (Future<long[]> f : calls) {
            long[] ids = f.get(10, TimeUnit.SECONDS);
            increasing(ids);
            for (long id : ids) {
                assertTrue(seen.add(id), "ID twice: " + id);
            }
        }
        assertEquals(31, seen.size());
        assertEquals(List.of("/ids?count=1", "/ids?count=30"), a.requests);
    }

    @Test
    void oneRequestInFlightPerNode() throws Exception {
        FakeNode a = node();
        FakeNode b = node();
        CountDownLatch release = new CountDownLatch(1);
        cleanup.add(release::countDown);
        FakeNode.Handler hold = (n, ex, q) -> {
            release.await(10, TimeUnit.SECONDS);
            return false;
        };
        a.handler = hold;
        b.handler = hold;
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr, b.addr).stallAfter(Duration.ofSeconds(30)));
        ExecutorService pool = Executors.newFixedThreadPool(4);
        cleanup.add(pool::shutdownNow);
        List<Future<long[]>> calls = new ArrayList<>();
        calls.add(pool.submit(() -> c.nextIds(1)));
        calls.add(pool.submit(() -> c.nextIds(1)));
        eventually("a request on each node", () -> a.hits.get() == 1 && b.hits.get() == 1);
        calls.add(pool.submit(() -> c.nextIds(2)));
        calls.add(pool.submit(() -> c.nextIds(2)));
        eventually("2 callers joined", () -> c.idsBatcher().waiting() == 2);
        release.countDown();
        for (Future<long[]> f : calls) {
            assertTrue(f.get(10, TimeUnit.SECONDS).length > 0);
        }
        assertEquals(3, a.hits.get() + b.hits.get(), "the two late callers did not share one request");
    }

    @Test
    void aStalledRequestGivesItsSlotUp() throws Exception {
        FakeNode hung = node();
        FakeNode good = node();
        CountDownLatch hang = new CountDownLatch(1);
        cleanup.add(hang::countDown);
        hung.handler = (n, ex, q) -> {
            hang.await(20, TimeUnit.SECONDS);
            return false;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(hung.addr, good.addr)
                .timeout(Duration.ofSeconds(15)).stallAfter(Duration.ofMillis(50)).maxInFlight(1));
        ExecutorService pool = Executors.newFixedThreadPool(6);
        cleanup.add(pool::shutdownNow);
        Future<Long> first = pool.submit(() -> c.nextId());
        eventually("the hung request", () -> hung.hits.get() == 1);
        List<Future<Long>> waiting = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            waiting.add(pool.submit(() -> c.nextId()));
        }
        // Served by the other node while the first request still hangs.
        for (Future<Long> f : waiting) {
            assertTrue(f.get(5, TimeUnit.SECONDS) > 1000);
        }
        assertTrue(!first.isDone());
        hang.countDown();
        assertTrue(first.get(5, TimeUnit.SECONDS) > 1000);
        assertEquals(1, hung.hits.get());
    }

    @Test
    void failsOverOn503AndLeavesTheNodeAloneForItsRetryAfter() throws Exception {
        FakeNode bad = node();
        FakeNode good = node();
        bad.handler = (n, ex, q) -> {
            FakeNode.send(ex, 503, FakeNode.error("out_of_service", "clock", null), "5");
            return true;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(bad.addr, good.addr));
        for (int i = 0; i < 6; i++) {
            c.nextId();
        }
        assertEquals(1, bad.hits.get(), "the node was asked again within its Retry-After");
        assertEquals(6, good.hits.get());
    }

    @Test
    void batchTimeoutMovesOnButKeepsTheNode() throws Exception {
        FakeNode slow = node();
        FakeNode good = node();
        slow.handler = (n, ex, q) -> {
            FakeNode.send(ex, 503, FakeNode.error("batch_timeout", "too many", null), "1");
            return true;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(slow.addr, good.addr));
        for (int i = 0; i < 4; i++) {
            c.nextId();
        }
        assertEquals(4, slow.hits.get(), "a batch_timeout node must stay in rotation (down, it would be asked once)");
        assertEquals(4, good.hits.get());
    }

    @Test
    void connectionRefusedFailsOver() throws Exception {
        FakeNode gone = new FakeNode();
        String goneAddr = gone.addr;
        gone.close();
        FakeNode good = node();
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(goneAddr, good.addr));
        assertEquals(1001, c.nextId());
        assertEquals(1002, c.nextId());
    }

    @Test
    void fourHundredsAreNotRetried() throws Exception {
        FakeNode a = node();
        FakeNode b = node();
        FakeNode.Handler refuse = (n, ex, q) -> {
            if (ex.getRequestURI().getPath().startsWith("/segment/")) {
                FakeNode.send(ex, 404, FakeNode.error("unknown_tag", "no tag", null), null);
            } else {
                FakeNode.send(ex, 401, FakeNode.error("token_required", "token", null), null);
            }
            return true;
        };
        a.handler = refuse;
        b.handler = refuse;
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr, b.addr));
        SnowflakedRejectedException e = assertThrows(SnowflakedRejectedException.class, () -> c.nextSegment("orders"));
        assertEquals(404, e.status());
        assertEquals("unknown_tag", e.code());
        e = assertThrows(SnowflakedRejectedException.class, c::nextId);
        assertEquals(401, e.status());
        assertEquals("token_required", e.code());
        assertEquals(2, a.hits.get() + b.hits.get(), "a 4xx went to another node");
    }

    @Test
    void otherNotFoundFailsOver() throws Exception {
        FakeNode stale = node();
        FakeNode good = node();
        stale.handler = (n, ex, q) -> {
            FakeNode.send(ex, 404, FakeNode.error("not_found", "no endpoint", null), null);
            return true;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(stale.addr, good.addr));
        assertEquals(1001, c.nextSegment("orders"));
        assertEquals(1, stale.hits.get());
    }

    @Test
    void badAnswersFailOver() throws Exception {
        FakeNode liar = node();
        FakeNode good = node();
        AtomicInteger k = new AtomicInteger();
        liar.handler = (n, ex, q) -> {
            switch (k.getAndIncrement()) {
                case 0 -> FakeNode.send(ex, 200, "5\n4\n", null); // not increasing
                case 1 -> FakeNode.send(ex, 200, "5\n", null); // too few
                default -> FakeNode.send(ex, 200, "garbage\n", null);
            }
            return true;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(liar.addr, good.addr).downFor(Duration.ZERO));
        for (int i = 0; i < 6; i++) {
            increasing(c.nextIds(2));
        }
        assertEquals(6, liar.hits.get()); // downFor 0: asked by every call, each bad answer failed over
        SnowflakedClient d = client(SnowflakedClient.builder().nodes(liar.addr, good.addr));
        for (int i = 0; i < 4; i++) {
            increasing(d.nextIds(2));
        }
        assertEquals(7, liar.hits.get(), "a node with a bad answer must be down for downFor");
    }

    @Test
    void oversizedAnswersAreNotRead() throws Exception {
        FakeNode big = node();
        FakeNode good = node();
        big.handler = (n, ex, q) -> {
            FakeNode.send(ex, 200, "1\n".repeat(100_000), null);
            return true;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(big.addr, good.addr));
        assertEquals(1001, c.nextId());
        assertEquals(1, big.hits.get());
    }

    @Test
    void clampsToTheNodesMaxAndRemembersIt() throws Exception {
        FakeNode a = node();
        a.handler = (n, ex, q) -> {
            if (Integer.parseInt(q.get("count")) > 10) {
                FakeNode.send(ex, 400, FakeNode.error("invalid_count", "at most 10", 10), null);
                return true;
            }
            return false;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr));
        long[] ids = c.nextIds(25);
        assertEquals(25, ids.length);
        increasing(ids);
        assertEquals(List.of("/ids?count=25", "/ids?count=10", "/ids?count=10", "/ids?count=5"), a.requests);
        a.requests.clear();
        assertEquals(15, c.nextIds(15).length);
        assertEquals(List.of("/ids?count=10", "/ids?count=5"), a.requests, "the limit was not remembered");
    }

    @Test
    void invalidCountAtOrAboveTheAskIsRejected() throws Exception {
        FakeNode a = node();
        a.handler = (n, ex, q) -> {
            FakeNode.send(ex, 400, FakeNode.error("invalid_count", "no", 1000), null);
            return true;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr));
        SnowflakedRejectedException e = assertThrows(SnowflakedRejectedException.class, () -> c.nextIds(5));
        assertEquals(1000, e.max());
        assertEquals(1, a.hits.get());
    }

    @Test
    void callersDeadlineEndsTheCallAndKeepsTheNode() throws Exception {
        FakeNode slow = node();
        CountDownLatch hang = new CountDownLatch(1);
        cleanup.add(hang::countDown);
        AtomicInteger k = new AtomicInteger();
        slow.handler = (n, ex, q) -> {
            if (k.getAndIncrement() == 0) {
                hang.await(20, TimeUnit.SECONDS);
            }
            return false;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(slow.addr).timeout(Duration.ofSeconds(10)));
        long start = System.nanoTime();
        assertThrows(SnowflakedTimeoutException.class, () -> c.nextId(Duration.ofMillis(200)));
        long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(took >= 190 && took < 3000, "took " + took + " ms");
        // The node is not down for the caller's deadline: the next call asks it again.
        assertTrue(c.nextId() > 0);
        assertEquals(2, slow.hits.get());
    }

    @Test
    void aQueuedCallReturnsAtItsDeadline() throws Exception {
        FakeNode a = node();
        CountDownLatch hang = new CountDownLatch(1);
        cleanup.add(hang::countDown);
        a.handler = (n, ex, q) -> {
            hang.await(20, TimeUnit.SECONDS);
            return false;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr).timeout(Duration.ofSeconds(15))
                .stallAfter(Duration.ofSeconds(30)));
        ExecutorService pool = Executors.newSingleThreadExecutor();
        cleanup.add(pool::shutdownNow);
        pool.submit(() -> c.nextId());
        eventually("the hung request", () -> a.hits.get() == 1);
        long start = System.nanoTime();
        assertThrows(SnowflakedTimeoutException.class, () -> c.nextId(Duration.ofMillis(200)));
        long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(took >= 190 && took < 3000, "took " + took + " ms");
        assertEquals(1, a.hits.get());
    }

    @Test
    void noNodeNamesEachNodesFailure() throws Exception {
        FakeNode a = node();
        FakeNode b = node();
        FakeNode.Handler down = (n, ex, q) -> {
            FakeNode.send(ex, 503, FakeNode.error("out_of_service", "down", null), "1");
            return true;
        };
        a.handler = down;
        b.handler = down;
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr, b.addr));
        SnowflakedNoNodeException e = assertThrows(SnowflakedNoNodeException.class, c::nextId);
        assertEquals(Set.of(a.addr, b.addr), e.causes().keySet());
        assertTrue(e.getMessage().contains("out_of_service"), e.getMessage());
    }

    @Test
    void atMostThreeNodesABatch() throws Exception {
        List<FakeNode> ns = new ArrayList<>();
        List<String> addrs = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            FakeNode n = node();
            n.handler = (f, ex, q) -> {
                FakeNode.send(ex, 500, FakeNode.error("internal", "bug", null), null);
                return true;
            };
            ns.add(n);
            addrs.add(n.addr);
        }
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(addrs));
        SnowflakedNoNodeException e = assertThrows(SnowflakedNoNodeException.class, c::nextId);
        int hits = 0;
        for (FakeNode n : ns) {
            hits += n.hits.get();
        }
        assertEquals(3, hits);
        assertEquals(2, e.notTried().size());
    }

    @Test
    void tokens() throws Exception {
        FakeNode a = node();
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr).apiToken("api-secret").tagToken("orders", "tag-secret"));
        c.nextId();
        c.nextSegment("orders");
        c.nextSegment("other");
        c.nextUuid();
        assertEquals(List.of("Bearer api-secret", "Bearer tag-secret", "", "Bearer api-secret"), a.authorizations);
    }

    @Test
    void genesAndUuids() throws Exception {
        FakeNode a = node();
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr));
        assertEquals(1001, c.nextGene(42));
        assertEquals("/ids?gene=42&count=1", a.requests.get(0));
        UUID u = c.nextUuid();
        assertEquals(7, u.version());
        assertEquals(2, u.variant());
        SnowflakedRejectedException e = assertThrows(SnowflakedRejectedException.class, () -> c.nextGene(-1));
        assertEquals(0, e.status());
        assertEquals(2, a.hits.get());
    }

    @Test
    void badArgumentsAreRefusedBeforeAsking() throws Exception {
        FakeNode a = node();
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr));
        assertEquals(0, assertThrows(SnowflakedRejectedException.class, () -> c.nextIds(0)).status());
        assertEquals("invalid_tag", assertThrows(SnowflakedRejectedException.class, () -> c.nextSegment("a/b")).code());
        assertEquals(0, a.hits.get());
        assertThrows(IllegalArgumentException.class, () -> SnowflakedClient.builder().build());
        assertThrows(IllegalArgumentException.class, () -> SnowflakedClient.builder().nodes("nohost").build());
    }

    @Test
    void callsAboveMaxBatchAreSplitAndSorted() throws Exception {
        FakeNode a = node();
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr).maxBatch(100));
        long[] ids = c.nextIds(250);
        assertEquals(250, ids.length);
        increasing(ids);
        assertEquals(List.of("/ids?count=100", "/ids?count=100", "/ids?count=50"), a.requests);
    }

    @Test
    void closedClientRefusesCalls() throws Exception {
        FakeNode a = node();
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr));
        c.close();
        assertThrows(SnowflakedClosedException.class, c::nextId);
        c.close();
    }

    @Test
    void closeAbortsARequestInFlight() throws Exception {
        FakeNode a = node();
        CountDownLatch hang = new CountDownLatch(1);
        cleanup.add(hang::countDown);
        a.handler = (n, ex, q) -> {
            hang.await(20, TimeUnit.SECONDS);
            return false;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr).timeout(Duration.ofSeconds(15)));
        ExecutorService pool = Executors.newSingleThreadExecutor();
        cleanup.add(pool::shutdownNow);
        Future<?> f = pool.submit(() -> c.nextId());
        eventually("the request", () -> a.hits.get() == 1);
        c.close();
        try {
            f.get(5, TimeUnit.SECONDS);
            fail("served after close");
        } catch (java.util.concurrent.ExecutionException e) {
            assertTrue(e.getCause() instanceof SnowflakedClosedException, String.valueOf(e.getCause()));
        }
    }

    @Test
    void bootstrapReadsTheListAndKeepsItWhileNoneAnswers() throws Exception {
        FakeNode seed = node();
        AtomicInteger polls = new AtomicInteger();
        seed.handler = (n, ex, q) -> {
            if (!ex.getRequestURI().getPath().equals("/cluster/nodes")) {
                return false;
            }
            if (polls.incrementAndGet() == 1) {
                FakeNode.send(ex, 200, "{\"nodes\":[{\"worker_id\":1,\"addr\":\"" + n.addr + "\"},{\"worker_id\":2,\"addr\":\"127.0.0.1:1\"}]}", null);
            } else {
                FakeNode.send(ex, 503, FakeNode.error("out_of_service", "down", null), "1");
            }
            return true;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().bootstrap(seed.addr).bootstrapInterval(Duration.ofMillis(20)));
        assertEquals(List.of(seed.addr, "127.0.0.1:1"), c.nodes());
        eventually("3 more polls", () -> polls.get() >= 4);
        assertEquals(List.of(seed.addr, "127.0.0.1:1"), c.nodes());
        assertTrue(c.nextId() > 0);
    }

    @Test
    void bootstrapFollowsAChangedList() throws Exception {
        FakeNode seed = node();
        FakeNode other = node();
        AtomicInteger polls = new AtomicInteger();
        seed.handler = (n, ex, q) -> {
            String list = polls.incrementAndGet() == 1 ? n.addr : other.addr;
            FakeNode.send(ex, 200, "{\"nodes\":[{\"worker_id\":1,\"addr\":\"" + list + "\"}]}", null);
            return true;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().bootstrap(seed.addr).bootstrapInterval(Duration.ofMillis(20)));
        assertEquals(List.of(seed.addr), c.nodes());
        eventually("the new list", () -> c.nodes().equals(List.of(other.addr)));
    }

    @Test
    void bootstrapWithNoSeedAnsweringFails() throws Exception {
        FakeNode seed = node();
        seed.handler = (n, ex, q) -> {
            FakeNode.send(ex, 200, "{\"nodes\":[]}", null);
            return true;
        };
        FakeNode gone = new FakeNode();
        String goneAddr = gone.addr;
        gone.close();
        SnowflakedNoNodeException e = assertThrows(SnowflakedNoNodeException.class,
                () -> SnowflakedClient.builder().bootstrap(goneAddr, seed.addr).build());
        assertEquals(Set.of(goneAddr, seed.addr), e.causes().keySet());
    }

    @Test
    void prefetchServesFromItsBuffer() throws Exception {
        FakeNode a = node();
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr).prefetch(40));
        Set<Long> seen = new HashSet<>();
        for (int i = 0; i < 100; i++) {
            assertTrue(seen.add(c.nextId()));
        }
        for (String r : a.requests) {
            assertEquals("/ids?count=10", r);
        }
        assertTrue(a.hits.get() <= 15, "requests: " + a.hits.get());
    }

    @Test
    void prefetchSurfacesTheNodesFailure() throws Exception {
        FakeNode a = node();
        a.handler = (n, ex, q) -> {
            FakeNode.send(ex, 503, FakeNode.error("out_of_service", "down", null), "1");
            return true;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr).prefetch(40));
        assertThrows(SnowflakedNoNodeException.class, () -> c.nextId(Duration.ofSeconds(5)));
    }

    @Test
    void aTagsCeilingIsLearnt() throws Exception {
        FakeNode a = node();
        a.handler = (n, ex, q) -> {
            if (ex.getRequestURI().getPath().startsWith("/segment/") && Integer.parseInt(q.get("count")) > 5) {
                FakeNode.send(ex, 400, "{\"error\":{\"code\":\"invalid_count\",\"message\":\"tag max\",\"max\":1000,\"tag_max\":5}}", null);
                return true;
            }
            return false;
        };
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(a.addr));
        SnowflakedRejectedException e = assertThrows(SnowflakedRejectedException.class, () -> c.nextSegment("small", 8));
        assertEquals(400, e.status());
        assertEquals(5, e.tagMax());
        // Learnt: refused by the client itself from now on, and the tag's other calls still served.
        assertEquals(0, assertThrows(SnowflakedRejectedException.class, () -> c.nextSegment("small", 8)).status());
        assertEquals(3, c.nextSegment("small", 3).length);
        assertEquals(8, c.nextIds(8).length);
        assertEquals(3, a.hits.get());
    }

    @Test
    void aConnectionTheNodeClosedIsNotTheNodesFailure() throws Exception {
        // A node that closes each connection after one answer, without saying so: the pooled
        // connection is stale for the next call, which must still be served by this only node.
        java.net.ServerSocket ss = new java.net.ServerSocket(0, 50, java.net.InetAddress.getByName("127.0.0.1"));
        cleanup.add(ss);
        AtomicInteger conns = new AtomicInteger();
        Thread t = new Thread(() -> {
            long id = 5000;
            try {
                while (true) {
                    try (java.net.Socket s = ss.accept()) {
                        conns.incrementAndGet();
                        java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(s.getInputStream()));
                        for (String l = in.readLine(); l != null && !l.isEmpty(); l = in.readLine()) {
                            // the request's head
                        }
                        String body = ++id + "\n";
                        s.getOutputStream().write(("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + body.length()
                                + "\r\n\r\n" + body).getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                        s.getOutputStream().flush();
                    }
                }
            } catch (java.io.IOException e) {
                // closed by the test
            }
        });
        t.setDaemon(true);
        t.start();
        SnowflakedClient c = client(SnowflakedClient.builder().nodes("127.0.0.1:" + ss.getLocalPort()));
        for (int i = 1; i <= 5; i++) {
            assertEquals(5000 + i, c.nextId());
        }
        assertTrue(conns.get() >= 5);
    }

    @Test
    void aStalledBodyIsTheNodesTimeout() throws Exception {
        String stalled = FakeNode.stalledBody(cleanup); // sends a head and 2 of 20 bytes, then nothing
        FakeNode good = node();
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(stalled, good.addr).timeout(Duration.ofMillis(300)));
        long start = System.nanoTime();
        assertEquals(1001, c.nextId());
        long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(took >= 290 && took < 2000, "took " + took + " ms");
        SnowflakedClient alone = client(SnowflakedClient.builder().nodes(stalled).timeout(Duration.ofSeconds(10)));
        start = System.nanoTime();
        assertThrows(SnowflakedTimeoutException.class, () -> alone.nextId(Duration.ofMillis(300)));
        took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(took >= 290 && took < 2000, "took " + took + " ms");
    }

    @Test
    void layoutDecodesAsTheNodeDoes() {
        // curl localhost:8080/decode/382690140893499392 on a node with --worker-id 5 (docs/api.md)
        Layout.Decoded d = Layout.DEFAULT.decode(382690140893499392L);
        assertEquals(1795307639628L, d.timestampMs());
        assertEquals(5, d.workerId());
        assertEquals(0, d.sequence());
        assertEquals(-1, d.gene());
        Layout g = Layout.withGeneBits(4);
        long id = (123L << 22) | (7L << 12) | (9L << 4) | 0xb;
        Layout.Decoded dg = g.decode(id);
        assertEquals(Layout.DEFAULT.epoch().toEpochMilli() + 123, dg.timestampMs());
        assertEquals(7, dg.workerId());
        assertEquals(9, dg.sequence());
        assertEquals(11, dg.gene());
        assertThrows(IllegalArgumentException.class, () -> Layout.DEFAULT.decode(-1));
    }

    @Test
    void parsesIdsStrictly() {
        assertArrayEquals(new long[] {1, 2}, SnowflakedClient.parseIds("1\n2\n".getBytes(), 2, true));
        assertArrayEquals(new long[] {1, 2}, SnowflakedClient.parseIds("2\n1".getBytes(), 2, false));
        assertThrows(IllegalArgumentException.class, () -> SnowflakedClient.parseIds("1\n1\n".getBytes(), 2, false));
        assertThrows(IllegalArgumentException.class, () -> SnowflakedClient.parseIds("1\n\n".getBytes(), 2, true));
        assertThrows(IllegalArgumentException.class, () -> SnowflakedClient.parseIds("99999999999999999999\n".getBytes(), 1, true));
        assertThrows(IllegalArgumentException.class, () -> SnowflakedClient.parseIds("9223372036854775808\n".getBytes(), 1, true));
        assertThrows(IllegalArgumentException.class, () -> SnowflakedClient.parseIds("-1\n".getBytes(), 1, true));
        assertThrows(IllegalArgumentException.class,
                () -> SnowflakedClient.parseUuids("01a2522e-5e97-4000-800e-b006a4fc1d9d\n".getBytes(), 1)); // version 4
    }

    @Test
    void jsonReadsErrorBodies() {
        SnowflakedClient.ErrorBody e = SnowflakedClient.ErrorBody.read(
                "{\"error\":{\"code\":\"invalid_count\",\"message\":\"a \\\"b\\\" \\u00e9\",\"max\":10,\"tag_max\":5}}".getBytes());
        assertEquals("invalid_count", e.code);
        assertEquals("a \"b\" é", e.message);
        assertEquals(10, e.max);
        assertEquals(5, e.tagMax);
        SnowflakedClient.ErrorBody g = SnowflakedClient.ErrorBody.read("<html>".getBytes());
        assertNull(g.code);
        assertThrows(IllegalArgumentException.class, () -> Json.parse("[".repeat(100) + "]".repeat(100)));
    }
}
