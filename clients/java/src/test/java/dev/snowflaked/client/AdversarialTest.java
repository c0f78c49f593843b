package dev.snowflaked.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
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

    /** A node that sends an answer's head and 2 of its 20 bytes, then nothing; returns its address. */
    private String stalledBodyNode() throws Exception {
        java.net.ServerSocket ss = new java.net.ServerSocket(0, 50, java.net.InetAddress.getByName("127.0.0.1"));
        cleanup.add(ss);
        List<java.net.Socket> held = new java.util.concurrent.CopyOnWriteArrayList<>();
        cleanup.add(() -> {
            for (java.net.Socket s : held) {
                s.close();
            }
        });
        Thread t = new Thread(() -> {
            try {
                while (true) {
                    java.net.Socket s = ss.accept();
                    held.add(s);
                    java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(s.getInputStream()));
                    for (String l = in.readLine(); l != null && !l.isEmpty(); l = in.readLine()) {
                        // the request's head
                    }
                    s.getOutputStream().write("HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n12".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                    s.getOutputStream().flush();
                }
            } catch (java.io.IOException e) {
                // closed by the test
            }
        });
        t.setDaemon(true);
        t.start();
        return "127.0.0.1:" + ss.getLocalPort();
    }

    /**
     * A caller's deadline must bound a request whose body stalls as tightly as one whose head
     * never comes: the watchdog's 100 ms grace and 100 ms period let the call run 100-200 ms past
     * a 100 ms deadline (2-3 times it).
     */
    @Test
    void aStalledBodyEndsAtTheCallersDeadline() throws Exception {
        String stalled = stalledBodyNode();
        SnowflakedClient c = client(SnowflakedClient.builder().nodes(stalled).timeout(Duration.ofSeconds(10)));
        for (int i = 0; i < 3; i++) {
            long start = System.nanoTime();
            assertThrows(SnowflakedTimeoutException.class, () -> c.nextId(Duration.ofMillis(100)));
            long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertTrue(took >= 95 && took < 175, "a 100 ms deadline took " + took + " ms");
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
}
