package dev.snowflaked.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(30)
class BoundsTextTest {
    private static final String BOUNDS = "{\"from\":\"2026-01-01T00:00:00.000Z\",\"to\":\"2026-01-02T00:00:00.000Z\","
            + "\"from_ms\":1767225600000,\"to_ms\":1767312000000,\"min_id\":\"265945513574400000\",\"max_id\":\"266307891363839999\","
            + "\"min_uuid\":\"019b7662-4800-7000-8000-000000000000\",\"max_uuid\":\"019b7b88-a3ff-7fff-bfff-ffffffffffff\"}";
    private static final String BOUNDS_NO_UUID = "{\"from_ms\":1767225600000,\"to_ms\":1767312000000,"
            + "\"min_id\":\"265945513574400000\",\"max_id\":\"266307891363839999\"}";

    private final List<AutoCloseable> cleanup = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        for (int i = cleanup.size() - 1; i >= 0; i--) {
            cleanup.get(i).close();
        }
    }

    private FakeNode node(String status200Body) throws Exception {
        FakeNode n = new FakeNode();
        cleanup.add(n);
        if (status200Body != null) {
            n.handler = (node, ex, q) -> {
                FakeNode.send(ex, 200, status200Body, null);
                return true;
            };
        }
        return n;
    }

    private SnowflakedClient client(FakeNode... ns) {
        List<String> addrs = new ArrayList<>();
        for (FakeNode n : ns) {
            addrs.add(n.addr);
        }
        SnowflakedClient c = SnowflakedClient.builder().nodes(addrs).tagToken("orders", "tok-orders").build();
        cleanup.add(c);
        return c;
    }

    @Test
    void boundsAsksInMillisecondsAndReadsTheAnswer() throws Exception {
        FakeNode a = node(BOUNDS);
        SnowflakedClient c = client(a);
        Instant from = Instant.parse("2026-01-01T00:00:00Z");
        Bounds b = c.bounds(from, from.plus(Duration.ofDays(1)));
        assertEquals(265945513574400000L, b.minId());
        assertEquals(266307891363839999L, b.maxId());
        assertEquals(from, b.from());
        assertEquals(Instant.parse("2026-01-02T00:00:00Z"), b.to());
        assertEquals(UUID.fromString("019b7662-4800-7000-8000-000000000000"), b.minUuid());
        assertEquals(UUID.fromString("019b7b88-a3ff-7fff-bfff-ffffffffffff"), b.maxUuid());
        assertEquals("/bounds?from=1767225600000&to=1767312000000", a.requests.get(0));
        assertEquals("", a.authorizations.get(0));
        c.bounds(from.plusNanos(1_999_999), from.plusMillis(3), Duration.ofSeconds(5)); // floored to the millisecond
        assertEquals("/bounds?from=1767225600001&to=1767225600003", a.requests.get(1));
    }

    @Test
    void boundsWithoutUuids() throws Exception {
        Bounds b = client(node(BOUNDS_NO_UUID)).bounds(Instant.ofEpochMilli(1), Instant.ofEpochMilli(2));
        assertNull(b.minUuid());
        assertNull(b.maxUuid());
    }

    @Test
    void boundsInvalidRangeIsRejectedWithoutRetry() throws Exception {
        FakeNode a = node(null);
        FakeNode b = node(null);
        for (FakeNode n : new FakeNode[] {a, b}) {
            n.handler = (node, ex, q) -> {
                FakeNode.send(ex, 400, FakeNode.error("invalid_range", "from is after to (reversed)", null), null);
                return true;
            };
        }
        SnowflakedClient c = client(a, b);
        SnowflakedRejectedException e = assertThrows(SnowflakedRejectedException.class,
                () -> c.bounds(Instant.ofEpochMilli(10), Instant.ofEpochMilli(5)));
        assertEquals(400, e.status());
        assertEquals("invalid_range", e.code());
        assertEquals(1, a.hits.get() + b.hits.get());
        e = assertThrows(SnowflakedRejectedException.class, () -> c.bounds(null, Instant.EPOCH));
        assertEquals(0, e.status());
        assertEquals("invalid_range", e.code());
        assertEquals(1, a.hits.get() + b.hits.get());
    }

    @Test
    void boundsFailsOverFromAFailingNodeOrABadAnswer() throws Exception {
        for (String bad : new String[] {"[]", "{", "{\"from_ms\":1}", BOUNDS.replace("\"265945513574400000\"", "5"),
                BOUNDS.replace("\"019b7b88-a3ff-7fff-bfff-ffffffffffff\"", "\"x\""), "503"}) {
            FakeNode a = node(bad);
            if (bad.equals("503")) {
                a.handler = (node, ex, q) -> {
                    FakeNode.send(ex, 503, FakeNode.error("out_of_service", "no", null), null);
                    return true;
                };
            }
            SnowflakedClient c = client(a, node(BOUNDS));
            for (int i = 0; i < 2; i++) {
                assertEquals(266307891363839999L, c.bounds(Instant.ofEpochMilli(1), Instant.ofEpochMilli(2)).maxId(), bad);
            }
            assertEquals(1, a.hits.get(), bad);
        }
        SnowflakedClient c = client(node("nope"));
        assertThrows(SnowflakedNoNodeException.class, () -> c.bounds(Instant.ofEpochMilli(1), Instant.ofEpochMilli(2)));
    }

    @Test
    void segmentTextLinesWithTheTagsToken() throws Exception {
        String[] lines = {"ORD-20261207-000123", "ORD-20261207-000124", "ORD-20261207-000125"};
        FakeNode a = node(null);
        a.handler = (node, ex, q) -> {
            int n = Integer.parseInt(q.get("count"));
            FakeNode.send(ex, 200, String.join("\n", List.of(lines).subList(0, n)) + "\n", null);
            return true;
        };
        SnowflakedClient c = client(a);
        assertEquals(List.of(lines), c.nextSegmentText("orders", 3));
        assertEquals(List.of(lines[0]), c.nextSegmentText("orders", 1, Duration.ofSeconds(5)));
        assertEquals("/segment/orders?count=3", a.requests.get(0));
        assertEquals("Bearer tok-orders", a.authorizations.get(0));
    }

    @Test
    void segmentTextFormat() throws Exception {
        FakeNode a = node("00000000001\n00000000002\n");
        SnowflakedClient c = client(a);
        assertEquals(List.of("00000000001", "00000000002"), c.nextSegmentText("plain", 2, IdEncoding.BASE62, null));
        assertEquals("/segment/plain?format=base62&count=2", a.requests.get(0));
        for (Runnable r : new Runnable[] {() -> c.nextSegmentText("plain", 0), () -> c.nextSegmentText("a/b", 1)}) {
            SnowflakedRejectedException e = assertThrows(SnowflakedRejectedException.class, r::run);
            assertEquals(0, e.status());
        }
        assertEquals(1, a.hits.get());
        a.handler = (node, ex, q) -> {
            FakeNode.send(ex, 400, FakeNode.error("invalid_format", "tag orders is a reset tag", null), null);
            return true;
        };
        SnowflakedRejectedException e = assertThrows(SnowflakedRejectedException.class,
                () -> c.nextSegmentText("orders", 1, IdEncoding.BASE36, null));
        assertEquals(400, e.status());
        assertEquals("invalid_format", e.code());
    }

    @Test
    void segmentTextBadAnswersFailOver() throws Exception {
        for (String bad : new String[] {"a\n", "a\na\n", "a b\nc\n", "\n\n", "x".repeat(200) + "\ny\n", "a\nb\nc\n"}) {
            FakeNode a = node(bad);
            SnowflakedClient c = client(a, node("X-1\nX-2\n"));
            assertEquals(List.of("X-1", "X-2"), c.nextSegmentText("t", 2), bad);
            assertEquals(1, a.hits.get());
        }
    }

    @Test
    void segmentTextClampedPartsKeepTheNodesOrder() throws Exception {
        FakeNode a = node(null);
        AtomicInteger k = new AtomicInteger(100);
        a.handler = (node, ex, q) -> {
            int n = Integer.parseInt(q.get("count"));
            if (n > 2) {
                FakeNode.send(ex, 400, FakeNode.error("invalid_count", "too many", 2), null);
                return true;
            }
            StringBuilder b = new StringBuilder();
            for (int i = 0; i < n; i++) {
                b.append('Z').append(k.getAndDecrement()).append('\n');
            }
            FakeNode.send(ex, 200, b.toString(), null);
            return true;
        };
        assertEquals(List.of("Z100", "Z99", "Z98", "Z97", "Z96"), client(a).nextSegmentText("t", 5));
    }

    @Test
    void integerSegmentCallOnTextIdsIsRejectedNamingTheText() throws Exception {
        String[] body = {"ORD-20261207-000123\n"};
        FakeNode a = node(null);
        FakeNode b = node(null);
        for (FakeNode n : new FakeNode[] {a, b}) {
            n.handler = (node, ex, q) -> {
                FakeNode.send(ex, 200, body[0], null);
                return true;
            };
        }
        SnowflakedClient c = client(a, b);
        SnowflakedRejectedException e = assertThrows(SnowflakedRejectedException.class, () -> c.nextSegment("orders"));
        assertEquals(200, e.status());
        assertNull(e.code());
        assertTrue(e.getMessage().contains("ORD-20261207-000123") && e.getMessage().contains("nextSegmentText"), e.getMessage());
        assertEquals(1, a.hits.get() + b.hits.get()); // no failover: every node answers so
        body[0] = "20261207000000000000123\n"; // beyond 63 bits: no ID either
        assertThrows(SnowflakedRejectedException.class, () -> c.nextSegment("orders", 1));
        body[0] = "20261207000123\n"; // a reset tag's number that fits is an ID
        assertEquals(20261207000123L, c.nextSegment("orders2"));
    }

    @Test
    void integerSegmentCallOnGarbageStillFailsOver() throws Exception {
        FakeNode a = node("x\ny\n");
        FakeNode b = node("7\n");
        assertEquals(7, client(a, b).nextSegment("t"));
        assertEquals(1, b.hits.get());
    }
}
