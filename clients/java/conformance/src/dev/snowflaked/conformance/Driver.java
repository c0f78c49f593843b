package dev.snowflaked.conformance;

import dev.snowflaked.client.Bounds;
import dev.snowflaked.client.IdEncoding;
import dev.snowflaked.client.IdEncodingException;
import dev.snowflaked.client.Layout;
import dev.snowflaked.client.SnowflakedClient;
import dev.snowflaked.client.SnowflakedClosedException;
import dev.snowflaked.client.SnowflakedNoNodeException;
import dev.snowflaked.client.SnowflakedRejectedException;
import dev.snowflaked.client.SnowflakedTimeoutException;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.Writer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The conformance driver of the Java client: reads requests from stdin, one JSON object a line,
 * calls the client's public API, and writes answers to stdout, one JSON object a line
 * (tests/conformance/README.md). It decides nothing; the suite holds every assertion.
 */
public final class Driver {
    private final Writer out;
    private SnowflakedClient client;

    private Driver(Writer out) {
        this.out = out;
    }

    /**
     * Runs the driver until stdin ends.
     *
     * @param args none
     * @throws Exception when stdout fails
     */
    public static void main(String[] args) throws Exception {
        PrintStream realOut = System.out;
        System.setOut(System.err); // anything else printed goes to stderr
        Writer w = new OutputStreamWriter(realOut, StandardCharsets.UTF_8);
        Driver d = new Driver(w);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.isBlank()) {
                continue;
            }
            d.handle(line);
        }
        if (d.client != null) {
            d.client.close();
        }
        w.flush();
        System.exit(0);
    }

    private synchronized void write(String line) {
        try {
            out.write(line);
            out.write('\n');
            out.flush();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private void handle(String line) {
        long seq = 0;
        Map<?, ?> req;
        try {
            Object o = Json.parse(line);
            if (!(o instanceof Map<?, ?> m)) {
                throw new IllegalArgumentException("not a JSON object");
            }
            req = m;
            if (req.get("seq") instanceof Long s) {
                seq = s;
            }
        } catch (RuntimeException e) {
            write(driverError(0, "cannot parse the line: " + e.getMessage()));
            return;
        }
        StringBuilder b = new StringBuilder("{\"seq\":").append(seq);
        try {
            String op = req.get("op") instanceof String s ? s : "";
            switch (op) {
                case "describe" -> describe(b);
                case "open" -> open(req);
                case "close" -> {
                    if (client != null) {
                        client.close(); // kept: later calls answer "closed"
                    }
                }
                case "next_id" -> ids(b, new long[] {held().nextId(deadline(req))});
                case "next_ids" -> ids(b, held().nextIds(intField(req, "n"), deadline(req)));
                case "next_gene" -> ids(b, new long[] {held().nextGene(Long.parseLong(str(req, "key")), deadline(req))});
                case "next_segment" -> {
                    String tag = str(req, "tag");
                    if (req.get("n") == null) {
                        ids(b, new long[] {held().nextSegment(tag, deadline(req))});
                    } else {
                        ids(b, held().nextSegment(tag, intField(req, "n"), deadline(req)));
                    }
                }
                case "next_uuid" -> {
                    UUID u = held().nextUuid(deadline(req));
                    b.append(",\"uuid\":");
                    Json.quote(b, u.toString());
                }
                case "decode" -> decode(b, req);
                case "nodes" -> {
                    b.append(",\"nodes\":[");
                    String sep = "";
                    for (String n : held().nodes()) {
                        b.append(sep);
                        Json.quote(b, n);
                        sep = ",";
                    }
                    b.append(']');
                }
                case "encode" -> {
                    IdEncoding e = IdEncoding.of(str(req, "encoding"));
                    String text = "uuid".equals(req.get("kind")) ? e.encode(UUID.fromString(str(req, "value")))
                            : e.encode(Long.parseLong(str(req, "value")), (int) longOr(req, "bits", 63));
                    b.append(",\"text\":");
                    Json.quote(b, text);
                }
                case "decode_string" -> {
                    IdEncoding e = IdEncoding.of(str(req, "encoding"));
                    String value = "uuid".equals(req.get("kind")) ? e.decodeUuid(str(req, "text")).toString()
                            : Long.toString(e.decode(str(req, "text"), (int) longOr(req, "bits", 63)));
                    b.append(",\"value\":");
                    Json.quote(b, value);
                }
                case "bounds" -> {
                    Bounds bd = held().bounds(Instant.ofEpochMilli(longOr(req, "from_ms", 0)), Instant.ofEpochMilli(longOr(req, "to_ms", 0)),
                            deadline(req));
                    b.append(",\"bounds\":{\"from_ms\":").append(bd.from().toEpochMilli()).append(",\"to_ms\":").append(bd.to().toEpochMilli())
                            .append(",\"min_id\":\"").append(bd.minId()).append("\",\"max_id\":\"").append(bd.maxId()).append('"');
                    if (bd.minUuid() != null) {
                        b.append(",\"min_uuid\":\"").append(bd.minUuid()).append("\",\"max_uuid\":\"").append(bd.maxUuid()).append('"');
                    }
                    b.append('}');
                }
                case "next_segment_text" -> {
                    IdEncoding format = req.get("format") == null || "text".equals(req.get("format")) ? null : IdEncoding.of(str(req, "format"));
                    List<String> texts = held().nextSegmentText(str(req, "tag"), req.get("n") == null ? 1 : intField(req, "n"), format, deadline(req));
                    b.append(",\"texts\":");
                    strings(b, texts);
                }
                case "load" -> load(b, seq, req);
                case "bench" -> bench(b, req);
                default -> {
                    write(driverError(seq, "unknown op " + op));
                    return;
                }
            }
        } catch (DriverError e) {
            write(driverError(seq, e.getMessage()));
            return;
        } catch (RuntimeException e) {
            b.setLength(0);
            b.append("{\"seq\":").append(seq).append(",\"error\":");
            error(b, e);
            b.append('}');
            write(b.toString());
            return;
        }
        b.append('}');
        write(b.toString());
    }

    /** A request the driver cannot carry out (a missing field): type "driver". */
    private static final class DriverError extends RuntimeException {
        private static final long serialVersionUID = 1L;

        DriverError(String message) {
            super(message);
        }
    }

    private static String driverError(long seq, String message) {
        StringBuilder b = new StringBuilder("{\"seq\":").append(seq).append(",\"error\":{\"type\":\"driver\",\"message\":");
        Json.quote(b, message);
        return b.append("}}").toString();
    }

    private SnowflakedClient held() {
        if (client == null) {
            throw new DriverError("no client is open");
        }
        return client;
    }

    private static String str(Map<?, ?> m, String k) {
        if (m.get(k) instanceof String s) {
            return s;
        }
        throw new DriverError("want a string \"" + k + "\"");
    }

    private static int intField(Map<?, ?> m, String k) {
        if (m.get(k) instanceof Long l) {
            return (int) Math.max(Integer.MIN_VALUE, Math.min(Integer.MAX_VALUE, l));
        }
        throw new DriverError("want an integer \"" + k + "\"");
    }

    private static long longOr(Map<?, ?> m, String k, long def) {
        Object v = m.get(k);
        if (v == null) {
            return def;
        }
        if (v instanceof Long l) {
            return l;
        }
        throw new DriverError("want an integer \"" + k + "\"");
    }

    private static Duration deadline(Map<?, ?> req) {
        Object v = req.get("deadline_ms");
        if (v == null) {
            return null;
        }
        if (v instanceof Long l) {
            return Duration.ofMillis(Math.max(l, 0));
        }
        throw new DriverError("want an integer deadline_ms");
    }

    private static void ids(StringBuilder b, long[] ids) {
        b.append(",\"ids\":");
        idList(b, ids);
    }

    private static void idList(StringBuilder b, long[] ids) {
        b.append('[');
        for (int i = 0; i < ids.length; i++) {
            if (i > 0) {
                b.append(',');
            }
            b.append('"').append(ids[i]).append('"');
        }
        b.append(']');
    }

    private static void error(StringBuilder b, Throwable e) {
        String type;
        int status = 0;
        String code = null;
        Integer max = null;
        if (e instanceof IdEncodingException x) {
            type = "encoding";
            code = x.kind().name().toLowerCase(java.util.Locale.ROOT);
        } else if (e instanceof SnowflakedRejectedException r) {
            type = "rejected";
            status = r.status();
            code = r.code();
            max = r.max();
        } else if (e instanceof SnowflakedNoNodeException) {
            type = "no_node";
        } else if (e instanceof SnowflakedTimeoutException) {
            type = "deadline";
        } else if (e instanceof SnowflakedClosedException) {
            type = "closed";
        } else {
            type = "other";
        }
        b.append("{\"type\":\"").append(type).append("\",\"status\":").append(status).append(",\"code\":");
        if (code == null) {
            b.append("null");
        } else {
            Json.quote(b, code);
        }
        b.append(",\"max\":").append(max == null ? "null" : max.toString()).append(",\"message\":");
        Json.quote(b, e.getClass().getSimpleName() + ": " + e.getMessage());
        b.append('}');
    }

    private void describe(StringBuilder b) {
        b.append(",\"client\":\"java\",\"version\":");
        Json.quote(b, SnowflakedClient.VERSION);
        b.append(",\"routes\":");
        strings(b, SnowflakedClient.ROUTES);
        b.append(",\"codes\":");
        strings(b, SnowflakedClient.CODES);
    }

    private static void strings(StringBuilder b, List<String> l) {
        b.append('[');
        String sep = "";
        for (String s : l) {
            b.append(sep);
            Json.quote(b, s);
            sep = ",";
        }
        b.append(']');
    }

    private void open(Map<?, ?> req) {
        if (client != null) {
            client.close();
            client = null;
        }
        if (!(req.get("config") instanceof Map<?, ?> cfg)) {
            throw new DriverError("want an object \"config\"");
        }
        SnowflakedClient.Builder bl = SnowflakedClient.builder();
        if (cfg.get("nodes") != null) {
            bl.nodes(stringList(cfg.get("nodes"), "nodes"));
        }
        if (cfg.get("bootstrap") != null) {
            bl.bootstrap(stringList(cfg.get("bootstrap"), "bootstrap"));
        }
        if (cfg.get("bootstrap_interval_ms") != null) {
            bl.bootstrapInterval(Duration.ofMillis(longOr(cfg, "bootstrap_interval_ms", 10000)));
        }
        if (cfg.get("api_token") instanceof String t) {
            bl.apiToken(t);
        }
        if (cfg.get("tag_tokens") instanceof Map<?, ?> tt) {
            for (Map.Entry<?, ?> e : tt.entrySet()) {
                bl.tagToken(String.valueOf(e.getKey()), String.valueOf(e.getValue()));
            }
        }
        if (cfg.get("tls") instanceof Map<?, ?> tls) {
            Path ca = Path.of(str(tls, "ca"));
            Path cert = tls.get("cert") instanceof String s ? Path.of(s) : null;
            Path key = tls.get("key") instanceof String s ? Path.of(s) : null;
            bl.tls(ca, cert, key);
        }
        if (cfg.get("timeout_ms") != null) {
            bl.timeout(Duration.ofMillis(longOr(cfg, "timeout_ms", 2000)));
        }
        if (cfg.get("max_batch") != null) {
            bl.maxBatch((int) longOr(cfg, "max_batch", 1000));
        }
        if (cfg.get("prefetch") != null) {
            bl.prefetch((int) longOr(cfg, "prefetch", 0));
        }
        try {
            client = bl.build();
        } catch (IllegalArgumentException e) {
            throw new DriverError("open: " + e.getMessage());
        }
    }

    private static List<String> stringList(Object o, String name) {
        if (!(o instanceof List<?> l)) {
            throw new DriverError("want a list \"" + name + "\"");
        }
        List<String> out = new ArrayList<>();
        for (Object e : l) {
            if (!(e instanceof String s)) {
                throw new DriverError("want strings in \"" + name + "\"");
            }
            out.add(s);
        }
        return out;
    }

    private static void decode(StringBuilder b, Map<?, ?> req) {
        long id;
        try {
            id = Long.parseLong(str(req, "id"));
        } catch (NumberFormatException e) {
            throw new DriverError("id: " + e.getMessage());
        }
        if (!(req.get("layout") instanceof Map<?, ?> l)) {
            throw new DriverError("want an object \"layout\"");
        }
        Layout layout;
        try {
            layout = new Layout((int) longOr(l, "time_bits", 41), (int) longOr(l, "worker_bits", 10), (int) longOr(l, "sequence_bits", 12),
                    (int) longOr(l, "gene_bits", 0), Instant.ofEpochMilli(longOr(l, "epoch_ms", 1704067200000L)),
                    Duration.ofMillis(longOr(l, "unit_ms", 1)));
        } catch (IllegalArgumentException e) {
            throw new DriverError(e.getMessage());
        }
        Layout.Decoded d = layout.decode(id);
        b.append(",\"decoded\":{\"timestamp_ms\":").append(d.timestampMs()).append(",\"worker_id\":").append(d.workerId())
                .append(",\"sequence\":").append(d.sequence());
        if (d.hasGene()) {
            b.append(",\"gene\":").append(d.gene());
        }
        b.append('}');
    }

    private void load(StringBuilder b, long seq, Map<?, ?> req) {
        SnowflakedClient c = held();
        int threads = intField(req, "threads");
        int calls = intField(req, "calls");
        String call = str(req, "call");
        int n = "next_ids".equals(call) ? intField(req, "n") : 1;
        if (!call.equals("next_id") && !call.equals("next_ids")) {
            throw new DriverError("load: call must be next_id or next_ids");
        }
        Duration dl = deadline(req);
        long mark = longOr(req, "mark", 0);
        AtomicInteger finished = new AtomicInteger();
        AtomicBoolean marked = new AtomicBoolean();
        String markLine = "{\"seq\":" + seq + ",\"event\":\"mark\"}";
        if (mark <= 0 && marked.compareAndSet(false, true)) {
            write(markLine);
        }
        List<List<Long>> perThread = new ArrayList<>();
        List<List<Throwable>> failures = new ArrayList<>();
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            List<Long> got = new ArrayList<>();
            List<Throwable> failed = new ArrayList<>();
            perThread.add(got);
            failures.add(failed);
            ts[t] = new Thread(() -> {
                for (int i = 0; i < calls; i++) {
                    try {
                        if (n == 1 && call.equals("next_id")) {
                            got.add(c.nextId(dl));
                        } else {
                            for (long id : c.nextIds(n, dl)) {
                                got.add(id);
                            }
                        }
                    } catch (RuntimeException e) {
                        failed.add(e);
                    }
                    if (finished.incrementAndGet() >= mark && marked.compareAndSet(false, true)) {
                        write(markLine);
                    }
                }
            }, "load-" + t);
            ts[t].start();
        }
        joinAll(ts);
        if (marked.compareAndSet(false, true)) {
            write(markLine);
        }
        b.append(",\"threads\":[");
        for (int t = 0; t < threads; t++) {
            if (t > 0) {
                b.append(',');
            }
            List<Long> got = perThread.get(t);
            long[] a = new long[got.size()];
            for (int i = 0; i < a.length; i++) {
                a[i] = got.get(i);
            }
            idList(b, a);
        }
        b.append("],\"failures\":[");
        String sep = "";
        for (List<Throwable> fl : failures) {
            for (Throwable e : fl) {
                b.append(sep);
                error(b, e);
                sep = ",";
            }
        }
        b.append("],\"calls\":").append(finished.get());
    }

    private void bench(StringBuilder b, Map<?, ?> req) {
        String mode = str(req, "mode");
        int threads = intField(req, "threads");
        long durationMs = longOr(req, "duration_ms", 1000);
        long warmupMs = longOr(req, "warmup_ms", 0);
        Call call;
        if (mode.equals("client")) {
            SnowflakedClient c = held();
            call = c::nextId;
        } else if (mode.equals("plain")) {
            String node = str(req, "node");
            HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
            HttpRequest r = HttpRequest.newBuilder(URI.create("http://" + node + "/id")).timeout(Duration.ofSeconds(2)).GET().build();
            call = () -> {
                try {
                    HttpResponse<byte[]> resp = http.send(r, HttpResponse.BodyHandlers.ofByteArray());
                    if (resp.statusCode() != 200) {
                        throw new IllegalStateException("status " + resp.statusCode());
                    }
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException(e);
                }
            };
        } else {
            throw new DriverError("bench: mode must be client or plain");
        }
        long start = System.nanoTime();
        long measureFrom = start + warmupMs * 1_000_000L;
        long end = measureFrom + durationMs * 1_000_000L;
        long[][] lat = new long[threads][];
        int[] counts = new int[threads];
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            int ti = t;
            ts[t] = new Thread(() -> {
                long[] l = new long[1 << 16];
                int k = 0;
                while (true) {
                    long s = System.nanoTime();
                    if (s - end >= 0) {
                        break;
                    }
                    try {
                        call.run();
                    } catch (RuntimeException e) {
                        // counted as a call all the same: its latency is what it took
                    }
                    long f = System.nanoTime();
                    if (s - measureFrom >= 0) {
                        if (k == l.length) {
                            l = Arrays.copyOf(l, l.length * 2);
                        }
                        l[k++] = f - s;
                    }
                }
                lat[ti] = l;
                counts[ti] = k;
            }, "bench-" + t);
            ts[t].start();
        }
        joinAll(ts);
        int total = 0;
        for (int cnt : counts) {
            total += cnt;
        }
        long[] all = new long[total];
        int p = 0;
        for (int t = 0; t < threads; t++) {
            System.arraycopy(lat[t], 0, all, p, counts[t]);
            p += counts[t];
        }
        Arrays.sort(all);
        double p50 = total == 0 ? 0 : all[(int) Math.min(total - 1, (long) (total * 0.50))] / 1000.0;
        double p99 = total == 0 ? 0 : all[(int) Math.min(total - 1, (long) (total * 0.99))] / 1000.0;
        b.append(",\"calls\":").append(total).append(",\"seconds\":").append(durationMs / 1000.0)
                .append(",\"p50_us\":").append(p50).append(",\"p99_us\":").append(p99);
    }

    @FunctionalInterface
    private interface Call {
        void run();
    }

    /** Waits for every thread of ts to end. */
    private static void joinAll(Thread[] ts) {
        for (Thread t : ts) {
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new DriverError("interrupted");
            }
        }
    }
}
