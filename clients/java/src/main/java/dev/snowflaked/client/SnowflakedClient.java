package dev.snowflaked.client;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import javax.net.ssl.SSLContext;

/**
 * A client of a snowflaked cluster: snowflake IDs, dense IDs of segment tags, IDs with a gene and
 * UUIDv7s, asked of the nodes over HTTP with batching and failover.
 *
 * <pre>{@code
 * try (SnowflakedClient c = SnowflakedClient.builder().nodes("127.0.0.1:8081", "127.0.0.1:8082").build()) {
 *     long id = c.nextId();
 *     long[] ids = c.nextIds(500, Duration.ofMillis(200)); // increasing
 * }
 * }</pre>
 *
 * <p>Thread-safe: share one client between all the threads of a process. Concurrent callers share
 * requests: a call that finds a free slot (by default one request in flight per node) makes its own
 * request on its own thread; calls that arrive while every slot is taken join one batch
 * ({@code GET /ids?count=N}), served as soon as a slot frees.
 *
 * <p>Every call throws unchecked {@link SnowflakedException}s: {@link SnowflakedRejectedException}
 * (a 4xx any node would answer, never retried), {@link SnowflakedNoNodeException} (no node could
 * serve it), {@link SnowflakedTimeoutException} (the caller's deadline passed first) and
 * {@link SnowflakedClosedException}. Calls without a {@link Duration} have no deadline of the
 * caller's; each request to a node is still bounded by {@link Builder#timeout(Duration)}.
 */
public final class SnowflakedClient implements AutoCloseable {
    /** The most IDs one call may ask for; calls above {@link Builder#maxBatch(int)} are served in several requests. */
    public static final int MAX_COUNT = 1 << 20;
    /** The client's version. */
    public static final String VERSION = "0.1.0";

    static final long NO_DEADLINE = Long.MAX_VALUE;
    /** A caller's timeout longer than this is no deadline: nanoTime() arithmetic stays far from overflow. */
    private static final Duration FAR = Duration.ofDays(365L * 100);
    /** The most bytes of one ID line (19 digits and a newline), and of one UUID line. */
    private static final int MAX_ID_LINE = 20;
    private static final int MAX_UUID_LINE = 37;
    /** The most bytes of a segment answer's line: a dense ID, or a reset tag's ID as text (128 characters), and a newline. */
    private static final int MAX_TEXT_LINE = 129;
    private static final int MAX_BOUNDS_BODY = 4096;
    /** How often one call may learn a smaller limit from the nodes. */
    private static final int MAX_RELEARN = 4;
    private static final int BOOTSTRAP_MAX_BODY = 1 << 20;
    private static final int BOOTSTRAP_MAX_ASK = 16;

    static final String CODE_BATCH_TIMEOUT = "batch_timeout";
    static final String CODE_UNKNOWN_TAG = "unknown_tag";
    static final String CODE_INVALID_COUNT = "invalid_count";
    static final String CODE_INVALID_TAG = "invalid_tag";
    static final String CODE_INVALID_GENE = "invalid_gene";
    static final String CODE_INVALID_FORMAT = "invalid_format";
    static final String CODE_INVALID_RANGE = "invalid_range";

    /** The error codes the client branches on or names. */
    public static final List<String> CODES = List.of(CODE_BATCH_TIMEOUT, CODE_UNKNOWN_TAG, CODE_INVALID_COUNT,
            CODE_INVALID_TAG, CODE_INVALID_GENE, CODE_INVALID_FORMAT, CODE_INVALID_RANGE);
    /** The path templates the client requests. */
    public static final List<String> ROUTES = List.of("/ids", "/segment/{tag}", "/uuids", "/cluster/nodes", "/bounds");

    final int maxBatch;
    private final int attempts;
    private final long timeoutNanos;
    private final long downForNanos;
    private final String apiToken;
    private final Map<String, String> tagTokens;
    private final Transport transport;
    private final List<String> seeds;
    private final long bootstrapIntervalNanos;

    private final Object nodesLock = new Object();
    private volatile Node[] nodes = new Node[0];
    private int nextNode;

    private final AtomicInteger nodeMax = new AtomicInteger();
    private final ExecutorService workers;
    private final ScheduledExecutorService poller;
    private final Batcher ids;
    private final ConcurrentHashMap<String, Batcher> tags = new ConcurrentHashMap<>();
    private final Prefetcher prefetcher;
    private final int maxInFlight;
    private final long stallNanos;
    private volatile boolean closed;

    /** A node and when it is down until, per service. */
    private static final class Node {
        final String addr;
        final long[] downUntil = new long[2];
        final boolean[] down = new boolean[2];
        final Throwable[] lastErr = new Throwable[2];

        Node(String addr) {
            this.addr = addr;
        }
    }

    private SnowflakedClient(Builder b, SSLContext tls) {
        this.maxBatch = b.maxBatch;
        this.attempts = b.attempts;
        this.timeoutNanos = b.timeout.toNanos();
        this.downForNanos = b.downFor.toNanos();
        this.apiToken = b.apiToken;
        this.tagTokens = Map.copyOf(b.tagTokens);
        this.maxInFlight = b.maxInFlight;
        this.stallNanos = b.stallAfter.toNanos();
        this.transport = new Transport(tls, b.timeout);
        this.seeds = b.seeds;
        this.bootstrapIntervalNanos = b.bootstrapInterval.toNanos();
        this.workers = Executors.newCachedThreadPool(daemon("snowflaked-batch"));
        this.poller = Executors.newSingleThreadScheduledExecutor(daemon("snowflaked-bootstrap"));
        this.ids = new Batcher(this, new Endpoint(Endpoint.SVC_IDS, "/ids?count=", "IDs", apiToken, false, false, null),
                workers, this::slots, stallNanos);
        this.prefetcher = b.prefetch > 0 ? new Prefetcher(this, ids.ep, b.prefetch, workers) : null;
    }

    private static java.util.concurrent.ThreadFactory daemon(String name) {
        AtomicInteger n = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, name + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }

    /**
     * Starts a builder.
     *
     * @return a builder with the defaults
     */
    public static Builder builder() {
        return new Builder();
    }

    // ---- the calls ----

    /**
     * One snowflake ID.
     *
     * @return the ID
     * @throws SnowflakedException on failure (see the class comment)
     */
    public long nextId() {
        return nextId(null);
    }

    /**
     * One snowflake ID, within the caller's deadline.
     *
     * @param timeout the most the call may take; null for no deadline of the caller's
     * @return the ID
     * @throws SnowflakedTimeoutException when the deadline passed first
     */
    public long nextId(Duration timeout) {
        long dl = deadline(timeout);
        if (prefetcher != null) {
            return prefetcher.next(dl);
        }
        return get(ids, 1, dl)[0];
    }

    /**
     * {@code n} snowflake IDs, increasing.
     *
     * @param n how many, 1 to {@link #MAX_COUNT}
     * @return the IDs
     */
    public long[] nextIds(int n) {
        return nextIds(n, null);
    }

    /**
     * {@code n} snowflake IDs, increasing, within the caller's deadline.
     *
     * @param n how many, 1 to {@link #MAX_COUNT}
     * @param timeout the most the call may take; null for no deadline of the caller's
     * @return the IDs
     */
    public long[] nextIds(int n, Duration timeout) {
        return get(ids, n, deadline(timeout));
    }

    /**
     * The next dense ID of a segment tag.
     *
     * @param tag the tag ({@code snowflakectl segment create})
     * @return the ID
     */
    public long nextSegment(String tag) {
        return nextSegment(tag, (Duration) null);
    }

    /**
     * The next dense ID of a segment tag, within the caller's deadline.
     *
     * @param tag the tag
     * @param timeout the most the call may take; null for no deadline of the caller's
     * @return the ID
     */
    public long nextSegment(String tag, Duration timeout) {
        return nextSegment(tag, 1, timeout)[0];
    }

    /**
     * The next {@code n} dense IDs of a segment tag, increasing.
     *
     * @param tag the tag
     * @param n how many, 1 to {@link #MAX_COUNT}
     * @return the IDs
     */
    public long[] nextSegment(String tag, int n) {
        return nextSegment(tag, n, null);
    }

    /**
     * The next {@code n} dense IDs of a segment tag, increasing, within the caller's deadline.
     *
     * @param tag the tag
     * @param n how many, 1 to {@link #MAX_COUNT}
     * @param timeout the most the call may take; null for no deadline of the caller's
     * @return the IDs
     */
    public long[] nextSegment(String tag, int n, Duration timeout) {
        long dl = deadline(timeout);
        checkTag(tag);
        Batcher b = tags.computeIfAbsent(tag, t -> new Batcher(this,
                new Endpoint(Endpoint.SVC_SEGMENTS, "/segment/" + t + "?count=", "dense IDs of " + t, tagTokens.get(t), false, true,
                        new AtomicInteger()),
                workers, this::slots, stallNanos));
        return get(b, n, dl);
    }

    /**
     * One snowflake ID that ends in {@code key}'s low gene bits (a cluster with {@code --gene-bits}).
     *
     * @param key the gene, typically a user ID, 0 to {@link Long#MAX_VALUE}
     * @return the ID
     */
    public long nextGene(long key) {
        return nextGene(key, null);
    }

    /**
     * One snowflake ID with a gene, within the caller's deadline.
     *
     * @param key the gene, 0 to {@link Long#MAX_VALUE}
     * @param timeout the most the call may take; null for no deadline of the caller's
     * @return the ID
     */
    public long nextGene(long key, Duration timeout) {
        long dl = deadline(timeout);
        if (key < 0) {
            throw new SnowflakedRejectedException(null, 0, CODE_INVALID_GENE, "gene " + key + ": want 0.." + Long.MAX_VALUE, null, null);
        }
        checkOpen();
        Endpoint ep = new Endpoint(Endpoint.SVC_IDS, "/ids?gene=" + key + "&count=", "IDs with gene " + key, apiToken, false, false, null);
        return serveClamped(ep, 1, dl, false, () -> true)[0];
    }

    /**
     * One UUIDv7 (RFC 9562), unique across the cluster by construction.
     *
     * @return the UUID
     */
    public UUID nextUuid() {
        return nextUuid(null);
    }

    /**
     * One UUIDv7, within the caller's deadline.
     *
     * @param timeout the most the call may take; null for no deadline of the caller's
     * @return the UUID
     */
    public UUID nextUuid(Duration timeout) {
        long dl = deadline(timeout);
        checkOpen();
        Endpoint ep = new Endpoint(Endpoint.SVC_IDS, "/uuids?count=", "UUIDs", apiToken, true, false, null);
        long[] w = serveClamped(ep, 1, dl, false, () -> true);
        return new UUID(w[0], w[1]);
    }

    /**
     * The next {@code n} IDs of a segment tag as the node writes them, one string each: {@code GET
     * /segment/{tag}?count=n} as text. A reset tag's IDs ({@code 20261207000123}, {@code
     * ORD-20261207-000123}) when they are not numbers; a plain tag's are decimal. Its own request,
     * never merged; the strings in the node's order.
     *
     * @param tag the tag
     * @param n how many, 1 to {@link #MAX_COUNT}
     * @return the IDs as text
     */
    public List<String> nextSegmentText(String tag, int n) {
        return nextSegmentText(tag, n, null, null);
    }

    /**
     * {@link #nextSegmentText(String, int)} within the caller's deadline.
     *
     * @param tag the tag
     * @param n how many, 1 to {@link #MAX_COUNT}
     * @param timeout the most the call may take; null for no deadline of the caller's
     * @return the IDs as text
     */
    public List<String> nextSegmentText(String tag, int n, Duration timeout) {
        return nextSegmentText(tag, n, null, timeout);
    }

    /**
     * The next {@code n} IDs of a segment tag, each encoded by the node ({@code
     * format=base62}, ...; a reset tag refuses it: {@code invalid_format}), or as text.
     *
     * @param tag the tag
     * @param n how many, 1 to {@link #MAX_COUNT}
     * @param format the encoding, or null for the node's text
     * @param timeout the most the call may take; null for no deadline of the caller's
     * @return the IDs as strings, in the node's order
     */
    public List<String> nextSegmentText(String tag, int n, IdEncoding format, Duration timeout) {
        long dl = deadline(timeout);
        checkTag(tag);
        if (n < 1 || n > MAX_COUNT) {
            throw new SnowflakedRejectedException(null, 0, CODE_INVALID_COUNT, "next " + n + " IDs of " + tag + " as text: want 1.." + MAX_COUNT, null, null);
        }
        checkOpen();
        String query = format == null ? "?count=" : "?format=" + format.wireName() + "&count=";
        Endpoint ep = new Endpoint(Endpoint.SVC_SEGMENTS, "/segment/" + tag + query, "IDs of " + tag + " as text", tagTokens.get(tag), false, true, null);
        List<String> out = new ArrayList<>(n);
        int limit = limitFor(ep);
        int relearned = 0;
        while (out.size() < n) {
            int size = limit == 0 ? n - out.size() : Math.min(n - out.size(), limit);
            try {
                out.addAll(serve(ep, ep.path + size, size * MAX_TEXT_LINE, (node, body) -> parseText(body, size), dl, () -> true));
            } catch (SnowflakedRejectedException e) {
                int[] m = refusedAbove(e, size);
                if (m[0] == 0 || relearned++ >= MAX_RELEARN) {
                    throw e;
                }
                learnMax(m[0]);
                limit = limitFor(ep);
            }
        }
        return out;
    }

    /**
     * The smallest and largest ID (and UUID) a node of the cluster can have issued in {@code [from,
     * to)}: {@code GET /bounds}, arithmetic on the layout that any node answers (one out of service
     * too). The node truncates each time to the start of its tick (the client sends whole
     * milliseconds, floored); the answer gives the range it used.
     *
     * @param from the range's start
     * @param to the range's end, not in it
     * @return the bounds
     * @throws SnowflakedRejectedException {@code invalid_range} for a range the layout cannot hold
     *     (reversed, empty, before the epoch, past the time field's end)
     */
    public Bounds bounds(Instant from, Instant to) {
        return bounds(from, to, null);
    }

    /**
     * {@link #bounds(Instant, Instant)} within the caller's deadline.
     *
     * @param from the range's start
     * @param to the range's end, not in it
     * @param timeout the most the call may take; null for no deadline of the caller's
     * @return the bounds
     */
    public Bounds bounds(Instant from, Instant to, Duration timeout) {
        long dl = deadline(timeout);
        long f;
        long t;
        try {
            f = from.toEpochMilli();
            t = to.toEpochMilli();
        } catch (NullPointerException | ArithmeticException e) {
            throw new SnowflakedRejectedException(null, 0, CODE_INVALID_RANGE, "from " + from + ", to " + to + ": want two instants within Unix milliseconds", null, null);
        }
        checkOpen();
        String path = "/bounds?from=" + f + "&to=" + t;
        Endpoint ep = new Endpoint(Endpoint.SVC_IDS, path, "the bounds of [" + f + ", " + t + ") ms", null, false, false, null);
        return serve(ep, path, MAX_BOUNDS_BODY, (node, body) -> parseBounds(body), dl, () -> true);
    }

    /**
     * The nodes the client knows now: the static list, or the last list bootstrap read.
     *
     * @return {@code host:port} of each
     */
    public List<String> nodes() {
        Node[] ns = nodes;
        List<String> out = new ArrayList<>(ns.length);
        for (Node n : ns) {
            out.add(n.addr);
        }
        return out;
    }

    /**
     * Closes the client: calls in progress and later calls throw {@link SnowflakedClosedException},
     * requests in flight are aborted, polling stops. Closing twice is no error.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        ids.close();
        for (Batcher b : tags.values()) {
            b.close();
        }
        if (prefetcher != null) {
            prefetcher.close();
        }
        transport.close();
        poller.shutdownNow();
        workers.shutdownNow();
    }

    /** The requests of one kind out at once: maxInFlight, else one per node. */
    private int slots() {
        return maxInFlight > 0 ? maxInFlight : Math.max(1, nodes.length);
    }

    /** The snowflake IDs' batcher (for tests). */
    Batcher idsBatcher() {
        return ids;
    }

    boolean isClosed() {
        return closed;
    }

    private void checkOpen() {
        if (closed) {
            throw new SnowflakedClosedException();
        }
    }

    private static long deadline(Duration timeout) {
        if (timeout == null) {
            return NO_DEADLINE;
        }
        long now = System.nanoTime();
        if (timeout.isNegative() || timeout.isZero()) {
            throw new SnowflakedTimeoutException("the caller's deadline passed before the call", null);
        }
        if (timeout.compareTo(FAR) > 0) {
            return NO_DEADLINE; // beyond any run (and beyond what toNanos() and now + t can hold)
        }
        long t = timeout.toNanos();
        long d = now + t;
        return d == NO_DEADLINE ? d - 1 : d;
    }

    private static void checkTag(String tag) {
        String why = null;
        if (tag == null || tag.isEmpty()) {
            why = "empty";
        } else if (tag.getBytes(StandardCharsets.UTF_8).length > 128) {
            why = "over 128 bytes";
        } else if (tag.equals(".") || tag.equals("..")) {
            why = "a dot path";
        } else {
            for (int i = 0; i < tag.length(); i++) {
                char ch = tag.charAt(i);
                if (ch <= 0x20 || ch == 0x7f || "/?#%\\".indexOf(ch) >= 0) {
                    why = "holds " + (ch <= 0x20 || ch == 0x7f ? "a control character or space" : "'" + ch + "'");
                    break;
                }
            }
        }
        if (why != null) {
            throw new SnowflakedRejectedException(null, 0, CODE_INVALID_TAG, "tag " + tag + ": " + why, null, null);
        }
    }

    /** n IDs from b, up to the batch size in one batch, more in several, sorted. */
    private long[] get(Batcher b, int n, long deadline) {
        if (n < 1 || n > MAX_COUNT) {
            throw new SnowflakedRejectedException(null, 0, CODE_INVALID_COUNT, "next " + n + " " + b.ep.what + ": want 1.." + MAX_COUNT, null, null);
        }
        checkOpen();
        int most = b.most();
        if (most < maxBatch && n > most) {
            throw new SnowflakedRejectedException(null, 0, CODE_INVALID_COUNT,
                    "next " + n + " " + b.ep.what + ": the tag takes at most " + most + " a request (--max-count)", null, most);
        }
        if (n <= most) {
            return b.fetch(n, deadline);
        }
        long[] out = new long[n];
        for (int got = 0; got < n; ) {
            int size = Math.min(n - got, b.most());
            long[] part = b.fetch(size, deadline);
            System.arraycopy(part, 0, out, got, size);
            got += size;
        }
        Arrays.sort(out);
        return out;
    }

    // ---- serving a batch: clamping, failover, one request ----

    /**
     * Serves n IDs of ep within what the nodes accept: a node that answers 400 invalid_count with a
     * max below n makes the client ask again in requests of at most max, remembered for later. The
     * answer is sorted (for UUIDs: two longs each, most then least significant bits).
     */
    long[] serveClamped(Endpoint ep, int n, long deadline, boolean merged, BooleanSupplier want) {
        int limit = limitFor(ep);
        if (limit == 0 || n <= limit) {
            try {
                return serve(ep, n, deadline, want);
            } catch (SnowflakedRejectedException e) {
                int[] m = refusedAbove(e, n);
                if (m[1] > 0 && ep.tagMax != null) {
                    ep.tagMax.set(m[1]);
                    if (!merged) {
                        throw e;
                    }
                } else if (m[0] > 0) {
                    learnMax(m[0]);
                } else {
                    throw e;
                }
                limit = limitFor(ep);
            }
        }
        int width = ep.uuids ? 2 : 1;
        long[] out = new long[n * width];
        int relearned = 0;
        for (int got = 0; got < n; ) {
            int size = Math.min(n - got, limit);
            long[] part;
            try {
                part = serve(ep, size, deadline, want);
            } catch (SnowflakedRejectedException e) {
                int[] m = refusedAbove(e, size);
                if (relearned < MAX_RELEARN && (m[0] > 0 || (m[1] > 0 && ep.tagMax != null))) {
                    relearned++;
                    if (m[1] > 0 && ep.tagMax != null) {
                        ep.tagMax.set(m[1]);
                    }
                    if (m[0] > 0) {
                        learnMax(m[0]);
                    }
                    limit = limitFor(ep);
                    continue;
                }
                throw e;
            }
            System.arraycopy(part, 0, out, got * width, size * width);
            got += size;
        }
        if (ep.uuids) {
            sortUuids(out);
        } else {
            Arrays.sort(out);
        }
        return out;
    }

    private int limitFor(Endpoint ep) {
        int limit = nodeMax.get();
        if (ep.tagMax != null) {
            int t = ep.tagMax.get();
            if (t > 0 && (limit == 0 || t < limit)) {
                limit = t;
            }
        }
        return limit;
    }

    /** {node's max, tag's max}, each 0 unless e is an invalid_count naming a limit below n. */
    private static int[] refusedAbove(SnowflakedRejectedException e, int n) {
        int[] m = new int[2];
        if (!CODE_INVALID_COUNT.equals(e.code()) || e.status() == 0) {
            return m;
        }
        if (e.max() != null && e.max() >= 1 && e.max() < n) {
            m[0] = e.max();
        }
        if (e.tagMax() != null && e.tagMax() >= 1 && e.tagMax() < n) {
            m[1] = e.tagMax();
        }
        return m;
    }

    private void learnMax(int lim) {
        while (true) {
            int old = nodeMax.get();
            if (old != 0 && old <= lim) {
                return;
            }
            if (nodeMax.compareAndSet(old, lim)) {
                System.getLogger(SnowflakedClient.class.getName()).log(System.Logger.Level.WARNING,
                        "snowflaked client: a node accepts at most " + lim + " IDs a request, below maxBatch " + maxBatch
                                + "; asking for at most its limit");
                return;
            }
        }
    }

    private static void sortUuids(long[] w) {
        int n = w.length / 2;
        Integer[] idx = new Integer[n];
        for (int i = 0; i < n; i++) {
            idx[i] = i;
        }
        Arrays.sort(idx, (a, b) -> {
            int c = Long.compareUnsigned(w[2 * a], w[2 * b]);
            return c != 0 ? c : Long.compareUnsigned(w[2 * a + 1], w[2 * b + 1]);
        });
        long[] copy = w.clone();
        for (int i = 0; i < n; i++) {
            w[2 * i] = copy[2 * idx[i]];
            w[2 * i + 1] = copy[2 * idx[i] + 1];
        }
    }

    /** How a 200 answer is read: an IllegalArgumentException is a bad answer, the node's failure. */
    @FunctionalInterface
    private interface Reader<T> {
        T read(String node, byte[] body);
    }

    /** Asks up to {@code attempts} nodes for n IDs of ep, never past the deadline. */
    private long[] serve(Endpoint ep, int n, long deadline, BooleanSupplier want) {
        int line = ep.uuids ? MAX_UUID_LINE : ep.svc == Endpoint.SVC_SEGMENTS ? MAX_TEXT_LINE : MAX_ID_LINE;
        return serve(ep, ep.path + n, n * line, (node, body) -> readIds(ep, n, node, body), deadline, want);
    }

    private static long[] readIds(Endpoint ep, int n, String node, byte[] body) {
        try {
            return ep.uuids ? parseUuids(body, n) : parseIds(body, n, !ep.unordered);
        } catch (IllegalArgumentException e) {
            String word = ep.svc == Endpoint.SVC_SEGMENTS ? notANumber(body, n) : null;
            if (word != null) {
                // A reset tag's IDs as text: every node answers so.
                throw new SnowflakedRejectedException(node, 200, null, ep.what + ": the tag's IDs are not numbers (the node answered \""
                        + word + "\"); ask for them with nextSegmentText", null, null);
            }
            throw e;
        }
    }

    /** Asks up to {@code attempts} nodes for path, never past the deadline. */
    private <T> T serve(Endpoint ep, String path, int limit, Reader<T> reader, long deadline, BooleanSupplier want) {
        List<String> tried = new ArrayList<>(attempts);
        Map<String, Throwable> failures = new LinkedHashMap<>();
        Throwable last = null;
        for (int a = 0; a < attempts; a++) {
            if (closed) {
                throw new SnowflakedClosedException();
            }
            if (!want.getAsBoolean()) {
                throw new SnowflakedTimeoutException("next " + ep.what + ": every caller gave up", last);
            }
            long now = System.nanoTime();
            if (deadline != NO_DEADLINE && deadline - now <= 0) {
                throw new SnowflakedTimeoutException("next " + ep.what + ": the caller's deadline passed", last);
            }
            String node = pick(ep.svc, tried);
            if (node == null) {
                break;
            }
            tried.add(node);
            long t = timeoutNanos;
            boolean clipped = false;
            if (deadline != NO_DEADLINE && deadline - now < t) {
                t = deadline - now;
                clipped = true;
            }
            try {
                return request(node, ep, path, limit, reader, t, clipped);
            } catch (NodeFailure f) {
                failures.put(node, f);
                last = f;
            }
        }
        if (deadline != NO_DEADLINE && deadline - System.nanoTime() <= 0) {
            throw new SnowflakedTimeoutException("next " + ep.what + ": the caller's deadline passed", last);
        }
        throw noNode(ep, tried, failures);
    }

    /** A node's failure: the batch moves to another node. */
    static final class NodeFailure extends IOException {
        private static final long serialVersionUID = 1L;

        NodeFailure(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** One request to one node, its answer read as the table of docs/client.md says. */
    private <T> T request(String node, Endpoint ep, String path, int limit, Reader<T> reader, long timeout, boolean clipped) throws NodeFailure {
        Transport.Answer a;
        try {
            a = transport.get(node, path, ep.token, timeout, limit);
        } catch (Transport.Timeout e) {
            if (clipped) {
                // The caller's deadline, not the node's fault: it stays in rotation.
                throw new SnowflakedTimeoutException("next " + ep.what + ": the caller's deadline passed during a request to " + node, e);
            }
            throw down(node, ep.svc, downForNanos, new NodeFailure(node + ": " + e.getMessage(), e));
        } catch (IOException e) {
            if (closed) {
                throw new SnowflakedClosedException();
            }
            throw down(node, ep.svc, downForNanos, new NodeFailure(node + ": " + e, e));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new SnowflakedException("next " + ep.what + ": interrupted", e);
        }
        int st = a.status();
        if (st == 200) {
            try {
                return reader.read(node, a.body());
            } catch (IllegalArgumentException e) {
                throw down(node, ep.svc, downForNanos, new NodeFailure(node + ": bad answer to GET " + path + ": " + e.getMessage(), null));
            }
        }
        ErrorBody eb = ErrorBody.read(a.body());
        if (st == 503) {
            NodeFailure f = new NodeFailure(node + ": 503 " + eb.text(), null);
            if (CODE_BATCH_TIMEOUT.equals(eb.code)) {
                throw f; // the request's doing, not the node's: it stays up
            }
            throw down(node, ep.svc, a.retryAfterNanos() > 0 ? a.retryAfterNanos() : downForNanos, f);
        }
        if (st == 404 && !CODE_UNKNOWN_TAG.equals(eb.code)) {
            throw down(node, ep.svc, downForNanos, new NodeFailure(node + ": 404 " + eb.text(), null));
        }
        if (st >= 400 && st < 500) {
            throw new SnowflakedRejectedException(node, st, eb.code, eb.message, eb.max, eb.tagMax);
        }
        throw down(node, ep.svc, downForNanos, new NodeFailure(node + ": status " + st + " " + eb.text(), null));
    }

    /** A snowflaked error body, read leniently. */
    static final class ErrorBody {
        String code;
        String message;
        Integer max;
        Integer tagMax;
        String raw;

        static ErrorBody read(byte[] body) {
            ErrorBody e = new ErrorBody();
            String s = new String(body, StandardCharsets.UTF_8);
            e.raw = s.length() > 80 ? s.substring(0, 80) + "…" : s;
            try {
                if (Json.parse(s) instanceof Map<?, ?> m && m.get("error") instanceof Map<?, ?> err) {
                    if (err.get("code") instanceof String c && !c.isEmpty()) {
                        e.code = c;
                    }
                    if (err.get("message") instanceof String msg) {
                        e.message = msg;
                    }
                    if (err.get("max") instanceof Long mx && mx > 0 && mx <= Integer.MAX_VALUE) {
                        e.max = mx.intValue();
                    }
                    if (err.get("tag_max") instanceof Long tm && tm > 0 && tm <= Integer.MAX_VALUE) {
                        e.tagMax = tm.intValue();
                    }
                }
            } catch (IllegalArgumentException ignored) {
                // not JSON: the raw text names it
            }
            if (e.code == null) {
                e.message = '"' + e.raw + '"';
            }
            return e;
        }

        String text() {
            return code != null ? code + ": " + message : '"' + raw + '"';
        }
    }

    /** Exactly n positive IDs, one a line, strictly increasing (or distinct, then sorted). */
    static long[] parseIds(byte[] body, int n, boolean increasing) {
        long[] out = new long[n];
        int k = 0;
        for (int i = 0; i < body.length; ) {
            long id = 0;
            int j = i;
            for (; j < body.length && body[j] != '\n'; j++) {
                int d = body[j] - '0';
                if (d < 0 || d > 9 || j - i >= 19) {
                    throw new IllegalArgumentException("a line that is not an ID");
                }
                id = id * 10 + d;
            }
            if (j == i) {
                throw new IllegalArgumentException("an empty line");
            }
            if (id <= 0) {
                throw new IllegalArgumentException("a line that is not an ID");
            }
            if (k == n) {
                throw new IllegalArgumentException("more than the " + n + " IDs asked for");
            }
            if (increasing && k > 0 && id <= out[k - 1]) {
                throw new IllegalArgumentException("IDs not increasing: " + id + " after " + out[k - 1]);
            }
            out[k++] = id;
            i = j + 1;
        }
        if (k != n) {
            throw new IllegalArgumentException("answered " + k + " of the " + n + " IDs asked for");
        }
        if (!increasing) {
            Arrays.sort(out);
            for (int i = 1; i < n; i++) {
                if (out[i] == out[i - 1]) {
                    throw new IllegalArgumentException("ID " + out[i] + " twice in one answer");
                }
            }
        }
        return out;
    }

    /** Exactly n lines of 1 to 128 printable ASCII characters each, none twice. */
    static List<String> parseText(byte[] body, int n) {
        List<String> out = new ArrayList<>(n);
        for (int i = 0; i < body.length; ) {
            int j = i;
            while (j < body.length && body[j] != '\n') {
                if (body[j] < 0x21 || body[j] > 0x7e) {
                    throw new IllegalArgumentException("a line that is not an ID as text");
                }
                j++;
            }
            if (j == i || j - i > MAX_TEXT_LINE - 1) {
                throw new IllegalArgumentException("a line of " + (j - i) + " characters: not an ID as text");
            }
            if (out.size() == n) {
                throw new IllegalArgumentException("more than the " + n + " IDs asked for");
            }
            out.add(new String(body, i, j - i, StandardCharsets.US_ASCII));
            i = j + 1;
        }
        if (out.size() != n) {
            throw new IllegalArgumentException("answered " + out.size() + " of the " + n + " IDs asked for");
        }
        if (new java.util.HashSet<>(out).size() != n) {
            throw new IllegalArgumentException("an ID twice in one answer");
        }
        return out;
    }

    /** The first line that is not a 63-bit ID when body is otherwise a well-formed text answer of n IDs; else null. */
    static String notANumber(byte[] body, int n) {
        List<String> lines;
        try {
            lines = parseText(body, n);
        } catch (IllegalArgumentException e) {
            return null;
        }
        for (String l : lines) {
            boolean digits = l.chars().allMatch(c -> c >= '0' && c <= '9');
            if (!digits || l.length() > 19 || Long.parseLong(l) <= 0) {
                return l;
            }
        }
        return null;
    }

    /** A /bounds answer. */
    static Bounds parseBounds(byte[] body) {
        if (!(Json.parse(new String(body, StandardCharsets.UTF_8)) instanceof Map<?, ?> m)) {
            throw new IllegalArgumentException("not a JSON object");
        }
        long f = ms(m, "from_ms");
        long t = ms(m, "to_ms");
        long lo = decimalId(m, "min_id");
        long hi = decimalId(m, "max_id");
        if (f >= t || lo > hi) {
            throw new IllegalArgumentException("an empty range: from_ms " + f + ", to_ms " + t + ", min_id " + lo + ", max_id " + hi);
        }
        return new Bounds(Instant.ofEpochMilli(f), Instant.ofEpochMilli(t), lo, hi, uuid(m, "min_uuid"), uuid(m, "max_uuid"));
    }

    private static long ms(Map<?, ?> m, String k) {
        if (m.get(k) instanceof Long v) {
            return v;
        }
        throw new IllegalArgumentException(k + " " + m.get(k) + " is not a whole number");
    }

    private static long decimalId(Map<?, ?> m, String k) {
        if (m.get(k) instanceof String v && !v.isEmpty() && v.length() <= 19 && v.chars().allMatch(c -> c >= '0' && c <= '9')) {
            return Long.parseLong(v);
        }
        throw new IllegalArgumentException(k + " " + m.get(k) + " is not an ID in a decimal string");
    }

    private static final java.util.regex.Pattern CANONICAL_UUID = java.util.regex.Pattern.compile(
            "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");

    private static UUID uuid(Map<?, ?> m, String k) {
        Object v = m.get(k);
        if (v == null) {
            return null;
        }
        if (v instanceof String u && CANONICAL_UUID.matcher(u).matches()) {
            return UUID.fromString(u);
        }
        throw new IllegalArgumentException(k + " " + v + " is not a canonical UUID");
    }

    /** Exactly n version 7 UUIDs with the RFC variant, one a line, increasing: two longs each. */
    static long[] parseUuids(byte[] body, int n) {
        long[] out = new long[2 * n];
        int k = 0;
        for (int i = 0; i < body.length; ) {
            int j = i;
            while (j < body.length && body[j] != '\n') {
                j++;
            }
            if (j - i != 36) {
                throw new IllegalArgumentException("a line that is not a UUID");
            }
            if (k == n) {
                throw new IllegalArgumentException("more than the " + n + " UUIDs asked for");
            }
            long hi = 0;
            long lo = 0;
            int digits = 0;
            for (int p = i; p < j; p++) {
                int off = p - i;
                byte ch = body[p];
                if (off == 8 || off == 13 || off == 18 || off == 23) {
                    if (ch != '-') {
                        throw new IllegalArgumentException("a line that is not a UUID");
                    }
                    continue;
                }
                int v = Character.digit(ch, 16);
                if (v < 0 || (ch >= 'A' && ch <= 'F')) {
                    throw new IllegalArgumentException("a line that is not a canonical UUID");
                }
                if (digits < 16) {
                    hi = hi << 4 | v;
                } else {
                    lo = lo << 4 | v;
                }
                digits++;
            }
            if (((hi >>> 12) & 0xf) != 7 || (lo >>> 62) != 2) {
                throw new IllegalArgumentException("not a version 7 UUID with the RFC variant");
            }
            if (k > 0) {
                int c = Long.compareUnsigned(hi, out[2 * k - 2]);
                if (c < 0 || (c == 0 && Long.compareUnsigned(lo, out[2 * k - 1]) <= 0)) {
                    throw new IllegalArgumentException("UUIDs not increasing");
                }
            }
            out[2 * k] = hi;
            out[2 * k + 1] = lo;
            k++;
            i = j + 1;
        }
        if (k != n) {
            throw new IllegalArgumentException("answered " + k + " of the " + n + " UUIDs asked for");
        }
        return out;
    }

    // ---- nodes ----

    /** The next node in turn that is neither tried nor down for svc, or null. */
    private String pick(int svc, List<String> tried) {
        synchronized (nodesLock) {
            Node[] ns = nodes;
            long now = System.nanoTime();
            for (int i = 0; i < ns.length; i++) {
                Node n = ns[Math.floorMod(nextNode++, ns.length)];
                if (tried.contains(n.addr)) {
                    continue;
                }
                if (n.down[svc] && n.downUntil[svc] - now > 0) {
                    continue;
                }
                n.down[svc] = false;
                return n.addr;
            }
            return null;
        }
    }

    private NodeFailure down(String addr, int svc, long forNanos, NodeFailure err) {
        synchronized (nodesLock) {
            for (Node n : nodes) {
                if (n.addr.equals(addr)) {
                    n.down[svc] = true;
                    n.downUntil[svc] = System.nanoTime() + forNanos;
                    n.lastErr[svc] = err;
                }
            }
        }
        return err;
    }

    private SnowflakedNoNodeException noNode(Endpoint ep, List<String> tried, Map<String, Throwable> failures) {
        List<String> notTried = new ArrayList<>();
        Map<String, Throwable> causes = new LinkedHashMap<>(failures);
        synchronized (nodesLock) {
            long now = System.nanoTime();
            for (Node n : nodes) {
                if (tried.contains(n.addr)) {
                    continue;
                }
                if (n.down[ep.svc] && n.downUntil[ep.svc] - now > 0 && n.lastErr[ep.svc] != null) {
                    causes.put(n.addr, n.lastErr[ep.svc]);
                } else {
                    notTried.add(n.addr);
                }
            }
        }
        return new SnowflakedNoNodeException(ep.what, causes, notTried);
    }

    private void setNodes(List<String> list) {
        synchronized (nodesLock) {
            Map<String, Node> old = new HashMap<>();
            for (Node n : nodes) {
                old.put(n.addr, n);
            }
            Node[] ns = new Node[list.size()];
            for (int i = 0; i < ns.length; i++) {
                Node o = old.get(list.get(i));
                ns[i] = o != null ? o : new Node(list.get(i));
            }
            nodes = ns;
        }
    }

    // ---- bootstrap ----

    private void bootstrapFirst() {
        Map<String, Throwable> causes = new LinkedHashMap<>();
        for (String seed : seeds) {
            try {
                setNodes(clusterNodes(seed));
                schedulePoll();
                return;
            } catch (IOException e) {
                causes.put(seed, e);
            }
        }
        throw new SnowflakedNoNodeException("the cluster's node list", causes, List.of());
    }

    private void schedulePoll() {
        double jitter = 0.8 + 0.4 * ThreadLocalRandom.current().nextDouble();
        try {
            poller.schedule(this::poll, (long) (bootstrapIntervalNanos * jitter), TimeUnit.NANOSECONDS);
        } catch (RuntimeException e) {
            // closed
        }
    }

    private int polls = -1;

    /** Asks the nodes known (from a random one on), then the seeds, until one answers; keeps the last list otherwise. */
    private void poll() {
        if (closed) {
            return;
        }
        try {
            List<String> ask = new ArrayList<>();
            List<String> known = nodes();
            if (polls < 0) {
                polls = known.isEmpty() ? 0 : ThreadLocalRandom.current().nextInt(known.size());
            }
            for (int i = 0; i < known.size() && ask.size() < BOOTSTRAP_MAX_ASK; i++) {
                ask.add(known.get(Math.floorMod(polls + i, known.size())));
            }
            polls++;
            for (String s : seeds) {
                if (!ask.contains(s)) {
                    ask.add(s);
                }
            }
            List<String> got = null;
            IOException last = null;
            for (String node : ask) {
                if (closed) {
                    return;
                }
                try {
                    got = clusterNodes(node);
                    break;
                } catch (IOException e) {
                    last = e;
                }
            }
            if (got != null) {
                setNodes(got);
            } else {
                System.getLogger(SnowflakedClient.class.getName()).log(System.Logger.Level.WARNING,
                        "snowflaked client: no node answered /cluster/nodes; keeping the last list: " + last);
            }
        } catch (RuntimeException e) {
            System.getLogger(SnowflakedClient.class.getName()).log(System.Logger.Level.WARNING,
                    "snowflaked client: polling /cluster/nodes: " + e);
        } finally {
            if (!closed) {
                schedulePoll();
            }
        }
    }

    /** GET /cluster/nodes of node: a non-empty list of host:port. */
    private List<String> clusterNodes(String node) throws IOException {
        Transport.Answer a;
        try {
            a = transport.get(node, "/cluster/nodes", null, timeoutNanos, BOOTSTRAP_MAX_BODY);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException(node + ": interrupted", e);
        } catch (IOException e) {
            throw new IOException(node + ": " + e.getMessage(), e);
        }
        if (a.status() != 200) {
            throw new IOException(node + ": /cluster/nodes: status " + a.status() + " " + ErrorBody.read(a.body()).text());
        }
        List<String> out = new ArrayList<>();
        try {
            if (Json.parse(new String(a.body(), StandardCharsets.UTF_8)) instanceof Map<?, ?> m && m.get("nodes") instanceof List<?> l) {
                for (Object o : l) {
                    if (o instanceof Map<?, ?> e && e.get("addr") instanceof String addr && !addr.isEmpty() && !out.contains(addr)) {
                        out.add(addr);
                    }
                }
            } else {
                throw new IOException(node + ": /cluster/nodes: not a node list");
            }
        } catch (IllegalArgumentException e) {
            throw new IOException(node + ": /cluster/nodes: " + e.getMessage());
        }
        if (out.isEmpty()) {
            throw new IOException(node + ": /cluster/nodes: no node in service");
        }
        return out;
    }

    // ---- builder ----

    /**
     * Configures a {@link SnowflakedClient}. Exactly one of {@link #nodes(String...)} and
     * {@link #bootstrap(String...)} is required; the rest has defaults.
     */
    public static final class Builder {
        private List<String> nodes;
        private List<String> seeds;
        private Duration bootstrapInterval = Duration.ofSeconds(10);
        private String apiToken;
        private final Map<String, String> tagTokens = new HashMap<>();
        private Path tlsCa;
        private Path tlsCert;
        private Path tlsKey;
        private SSLContext sslContext;
        private Duration timeout = Duration.ofSeconds(2);
        private Duration downFor = Duration.ofSeconds(1);
        private int maxBatch = 1000;
        private int prefetch;
        private int attempts = 3;
        private int maxInFlight;
        private Duration stallAfter = Duration.ofMillis(50);

        private Builder() {
        }

        /**
         * How long a request may be out, while other calls wait for a slot, before it gives its
         * slot up so that they get a request of their own (default 50 ms: a node that hangs).
         *
         * @param stallAfter 1 ms or more
         * @return this builder
         */
        public Builder stallAfter(Duration stallAfter) {
            this.stallAfter = stallAfter;
            return this;
        }

        /**
         * A static list of nodes, never changed.
         *
         * @param nodes {@code host:port} of each
         * @return this builder
         */
        public Builder nodes(String... nodes) {
            return nodes(List.of(nodes));
        }

        /**
         * A static list of nodes, never changed.
         *
         * @param nodes {@code host:port} of each
         * @return this builder
         */
        public Builder nodes(List<String> nodes) {
            this.nodes = List.copyOf(nodes);
            return this;
        }

        /**
         * Seeds to bootstrap from: the nodes come from {@code GET /cluster/nodes} of the first seed
         * that answers at build time (none answering is a {@link SnowflakedNoNodeException}), and
         * are polled again every {@link #bootstrapInterval(Duration)}; the last list stays while
         * none answers.
         *
         * @param seeds {@code host:port} of each
         * @return this builder
         */
        public Builder bootstrap(String... seeds) {
            return bootstrap(List.of(seeds));
        }

        /**
         * Seeds to bootstrap from; see {@link #bootstrap(String...)}.
         *
         * @param seeds {@code host:port} of each
         * @return this builder
         */
        public Builder bootstrap(List<String> seeds) {
            this.seeds = List.copyOf(seeds);
            return this;
        }

        /**
         * The pause between bootstrap polls (default 10 s, made up to 20% shorter or longer at random).
         *
         * @param interval 10 ms to 1 h
         * @return this builder
         */
        public Builder bootstrapInterval(Duration interval) {
            this.bootstrapInterval = interval;
            return this;
        }

        /**
         * The bearer token for snowflake IDs and UUIDs (nodes run with {@code --api-tokens-file}).
         *
         * @param token the token, or null for none
         * @return this builder
         */
        public Builder apiToken(String token) {
            this.apiToken = token;
            return this;
        }

        /**
         * The bearer token of one segment tag (a tag created with {@code --require-token}).
         *
         * @param tag the tag
         * @param token its token
         * @return this builder
         */
        public Builder tagToken(String tag, String token) {
            this.tagTokens.put(tag, token);
            return this;
        }

        /**
         * The bearer tokens of segment tags, by tag.
         *
         * @param tokens tag to token
         * @return this builder
         */
        public Builder tagTokens(Map<String, String> tokens) {
            this.tagTokens.putAll(tokens);
            return this;
        }

        /**
         * HTTPS to every node, verified against a CA (PEM), without a client certificate.
         *
         * @param ca the CA's certificate(s), PEM
         * @return this builder
         */
        public Builder tls(Path ca) {
            return tls(ca, null, null);
        }

        /**
         * HTTPS to every node, verified against a CA, presenting a client certificate (mutual TLS).
         *
         * @param ca the CA's certificate(s), PEM
         * @param cert the client's certificate chain, PEM, or null for none
         * @param key the client's PKCS#8 private key ({@code -----BEGIN PRIVATE KEY-----}, EC or RSA), PEM
         * @return this builder
         */
        public Builder tls(Path ca, Path cert, Path key) {
            this.tlsCa = ca;
            this.tlsCert = cert;
            this.tlsKey = key;
            return this;
        }

        /**
         * HTTPS to every node with an {@link SSLContext} of your own (instead of {@link #tls(Path)}).
         *
         * @param context the context
         * @return this builder
         */
        public Builder sslContext(SSLContext context) {
            this.sslContext = context;
            return this;
        }

        /**
         * The most one request to one node may take (default 2 s); a call's own deadline, when
         * sooner, bounds it instead.
         *
         * @param timeout the timeout
         * @return this builder
         */
        public Builder timeout(Duration timeout) {
            this.timeout = timeout;
            return this;
        }

        /**
         * How long a node that failed is left alone when it names no {@code Retry-After} (default 1 s).
         *
         * @param downFor the pause
         * @return this builder
         */
        public Builder downFor(Duration downFor) {
            this.downFor = downFor;
            return this;
        }

        /**
         * The most IDs one request asks for (default 1000); lowered for the client's lifetime when
         * a node answers {@code invalid_count} with a smaller {@code max}.
         *
         * @param maxBatch 1 to {@link SnowflakedClient#MAX_COUNT}
         * @return this builder
         */
        public Builder maxBatch(int maxBatch) {
            this.maxBatch = maxBatch;
            return this;
        }

        /**
         * Snowflake IDs to keep fetched ahead for {@link SnowflakedClient#nextId()} (default 0: off).
         * IDs from a prefetch buffer are unique but not always increasing from one call to the next,
         * and at most 1 s old.
         *
         * @param prefetch how many
         * @return this builder
         */
        public Builder prefetch(int prefetch) {
            this.prefetch = prefetch;
            return this;
        }

        /**
         * The most nodes one batch tries (default 3).
         *
         * @param attempts 1 to 16
         * @return this builder
         */
        public Builder attempts(int attempts) {
            this.attempts = attempts;
            return this;
        }

        /**
         * The most requests of one kind out at once before callers join a shared batch (default
         * 0: one per node known).
         *
         * @param maxInFlight 0 (one per node) to 64
         * @return this builder
         */
        public Builder maxInFlight(int maxInFlight) {
            this.maxInFlight = maxInFlight;
            return this;
        }

        /**
         * Builds the client. With {@link #bootstrap(String...)} this asks the seeds for the nodes.
         *
         * @return the client
         * @throws IllegalArgumentException for a bad configuration (the message says what)
         * @throws SnowflakedNoNodeException when no seed answered
         */
        public SnowflakedClient build() {
            if ((nodes == null) == (seeds == null)) {
                throw new IllegalArgumentException("snowflaked client: want exactly one of nodes and bootstrap");
            }
            List<String> list = nodes != null ? nodes : seeds;
            if (list.isEmpty()) {
                throw new IllegalArgumentException("snowflaked client: no node given");
            }
            for (String n : list) {
                int c = n == null ? -1 : n.lastIndexOf(':');
                if (c <= 0 || c == n.length() - 1 || n.contains("/")) {
                    throw new IllegalArgumentException("snowflaked client: node " + n + ": want host:port");
                }
            }
            if (timeout == null || timeout.isNegative() || timeout.isZero()) {
                throw new IllegalArgumentException("snowflaked client: timeout must be positive");
            }
            if (downFor == null || downFor.isNegative()) {
                throw new IllegalArgumentException("snowflaked client: downFor must not be negative");
            }
            if (bootstrapInterval == null || bootstrapInterval.compareTo(Duration.ofMillis(10)) < 0
                    || bootstrapInterval.compareTo(Duration.ofHours(1)) > 0) {
                throw new IllegalArgumentException("snowflaked client: bootstrapInterval: want 10ms..1h");
            }
            if (maxBatch < 1 || maxBatch > MAX_COUNT) {
                throw new IllegalArgumentException("snowflaked client: maxBatch: want 1.." + MAX_COUNT);
            }
            if (prefetch < 0 || prefetch > MAX_COUNT) {
                throw new IllegalArgumentException("snowflaked client: prefetch: want 0.." + MAX_COUNT);
            }
            if (attempts < 1 || attempts > 16) {
                throw new IllegalArgumentException("snowflaked client: attempts: want 1..16");
            }
            if (stallAfter == null || stallAfter.toMillis() < 1) {
                throw new IllegalArgumentException("snowflaked client: stallAfter: want 1ms or more");
            }
            if (maxInFlight < 0 || maxInFlight > 64) {
                throw new IllegalArgumentException("snowflaked client: maxInFlight: want 0..64");
            }
            for (Map.Entry<String, String> e : tagTokens.entrySet()) {
                if (e.getKey() == null || e.getValue() == null || e.getValue().isEmpty()) {
                    throw new IllegalArgumentException("snowflaked client: tag token for " + e.getKey() + ": empty");
                }
            }
            SSLContext tls = sslContext;
            if (tlsCa != null) {
                if (sslContext != null) {
                    throw new IllegalArgumentException("snowflaked client: want one of tls and sslContext");
                }
                if ((tlsCert == null) != (tlsKey == null)) {
                    throw new IllegalArgumentException("snowflaked client: tls: want both cert and key, or neither");
                }
                try {
                    tls = Pem.context(tlsCa, tlsCert, tlsKey);
                } catch (IOException | GeneralSecurityException e) {
                    throw new IllegalArgumentException("snowflaked client: tls: " + e.getMessage(), e);
                }
            }
            SnowflakedClient c = new SnowflakedClient(this, tls);
            if (nodes != null) {
                c.setNodes(nodes);
            } else {
                try {
                    c.bootstrapFirst();
                } catch (RuntimeException e) {
                    c.close();
                    throw e;
                }
            }
            return c;
        }
    }
}
