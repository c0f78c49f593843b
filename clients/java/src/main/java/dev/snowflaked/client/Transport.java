package dev.snowflaked.client;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Flow;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;

/**
 * HTTP/1.1 GETs to the nodes on one {@link HttpClient} (keep-alive), each bounded in time and in
 * the size of its answer, and all abortable by {@link #close()}.
 */
final class Transport {
    /** The most an error answer may hold. */
    static final int MAX_ERROR_BODY = 64 << 10;

    /** An answer: status, body, Retry-After in nanoseconds (0: none). */
    record Answer(int status, byte[] body, long retryAfterNanos) {
    }

    /** The request did not end before its deadline. */
    static final class Timeout extends IOException {
        private static final long serialVersionUID = 1L;

        Timeout(String message) {
            super(message);
        }
    }

    /** The most requests kept for sending again (one per node, path and count asked). */
    private static final int MAX_KEPT_REQUESTS = 4096;

    /** How often the watchdog looks, and how far past its timeout a request may go. */
    private static final long WATCH_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

    /** Null once closed: an HttpClient no longer referenced ends its selector thread and closes its connections. */
    private volatile HttpClient http;
    private final ScheduledThreadPoolExecutor watchdog;
    private final long defaultTimeoutNanos;
    private final ConcurrentHashMap<String, HttpRequest> requests = new ConcurrentHashMap<>();
    private final String scheme;
    private final Set<Call> inFlight = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;

    Transport(SSLContext tls, Duration connectTimeout) {
        this.defaultTimeoutNanos = connectTimeout.toNanos();
        HttpClient.Builder b = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .followRedirects(HttpClient.Redirect.NEVER)
                .connectTimeout(connectTimeout);
        if (tls != null) {
            b.sslContext(tls);
        }
        this.http = b.build();
        this.scheme = tls != null ? "https://" : "http://";
        this.watchdog = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "snowflaked-watchdog");
            t.setDaemon(true);
            return t;
        });
        watchdog.setRemoveOnCancelPolicy(true);
        watchdog.scheduleWithFixedDelay(this::watch, WATCH_NANOS, WATCH_NANOS, TimeUnit.NANOSECONDS);
    }

    /**
     * GETs path from node, within timeoutNanos, reading at most okLimit bytes of a 200 answer and
     * {@link #MAX_ERROR_BODY} of any other (the Content-Length is checked before the body is read).
     *
     * @throws Timeout when the request did not end in time
     * @throws IOException when the node could not be reached or its answer not read
     * @throws SnowflakedClosedException when the transport was closed
     */
    Answer get(String node, String path, String token, long timeoutNanos, int okLimit) throws IOException, InterruptedException {
        if (closed) {
            throw new SnowflakedClosedException();
        }
        if (timeoutNanos <= 0) {
            throw new Timeout("deadline passed before the request");
        }
        HttpRequest req;
        try {
            req = request(node, path, token, timeoutNanos);
        } catch (IllegalArgumentException e) {
            // An address no URI holds ("bad host:1", from a node list): the node's failure, so
            // that the call moves on, not an exception out of the client.
            throw new IOException("not a host:port: " + e.getMessage(), e);
        }
        // send() on the caller's thread: sendAsync().get() costs another hand-off to the
        // client's executor (about 250 µs measured on 2 cores).
        // A request bounded by a caller's deadline (a timeout other than the client's own) gets a
        // timer of its own at that deadline: the watchdog's period and grace would let a stalled
        // body run up to 200 ms past it. Requests with the client's timeout keep the watchdog.
        boolean exact = timeoutNanos != defaultTimeoutNanos;
        Call call = new Call(Thread.currentThread(), System.nanoTime() + timeoutNanos + (exact ? 0 : WATCH_NANOS));
        inFlight.add(call);
        ScheduledFuture<?> timer = null;
        HttpResponse<byte[]> r;
        try {
            if (exact) {
                try {
                    timer = watchdog.schedule(() -> call.abort(Call.EXPIRED), timeoutNanos, TimeUnit.NANOSECONDS);
                } catch (java.util.concurrent.RejectedExecutionException e) {
                    throw new SnowflakedClosedException();
                }
            }
            if (closed) {
                throw new SnowflakedClosedException();
            }
            HttpClient h = http;
            if (h == null) {
                throw new SnowflakedClosedException();
            }
            r = h.send(req, bounded(okLimit));
        } catch (java.net.http.HttpTimeoutException e) {
            throw new Timeout(e.getMessage());
        } catch (InterruptedException | IOException e) {
            int why = call.end();
            if (why == Call.CLOSED || closed) {
                throw new SnowflakedClosedException();
            }
            if (why == Call.EXPIRED) {
                throw new Timeout("the answer's body did not come within " + Duration.ofNanos(timeoutNanos).toMillis() + " ms");
            }
            throw e;
        } finally {
            if (timer != null) {
                timer.cancel(false);
            }
            if (call.end() != Call.OUT) {
                Thread.interrupted(); // the client's own interrupt, not the caller's
            }
            inFlight.remove(call);
        }
        if (closed) {
            throw new SnowflakedClosedException();
        }
        long retry = 0;
        List<String> ra = r.headers().allValues("retry-after");
        if (!ra.isEmpty()) {
            try {
                long sec = Long.parseLong(ra.get(0).trim());
                if (sec > 0 && sec < 3600) {
                    retry = TimeUnit.SECONDS.toNanos(sec);
                }
            } catch (NumberFormatException ignored) {
                // an HTTP date, or garbage: the client's own DownFor applies
            }
        }
        return new Answer(r.statusCode(), r.body(), retry);
    }

    /**
     * A request in progress on a caller's thread. close(), and the watchdog for a request past
     * its timeout, interrupt the thread while (and only while) the request is out, which makes
     * send() abort it; the thread then clears that interrupt, so that none of the client's leaks
     * into the caller's code.
     */
    private static final class Call {
        static final int OUT = 0;
        static final int CLOSED = 1;
        static final int EXPIRED = 2;

        private final Thread thread;
        final long deadline;
        private boolean ended;
        private int interrupted = OUT;

        Call(Thread thread, long deadline) {
            this.thread = thread;
            this.deadline = deadline;
        }

        /** Ends the call; returns why the client interrupted it (OUT: it did not). */
        synchronized int end() {
            ended = true;
            return interrupted;
        }

        synchronized void abort(int why) {
            if (!ended && interrupted == OUT) {
                interrupted = why;
                thread.interrupt();
            }
        }
    }

    /**
     * Ends the requests past their timeout. HttpClient's own timeout ends only the wait for the
     * answer's head; a node that sends a head and then stalls its body is ended here.
     */
    private void watch() {
        long now = System.nanoTime();
        for (Call c : inFlight) {
            if (now - c.deadline > 0) {
                c.abort(Call.EXPIRED);
            }
        }
    }

    /**
     * The request for node and path. Requests with the client's own timeout are kept and sent
     * again: building a new HttpRequest (URI parsing, header checks) cost 30-40 µs a call on 2 busy
     * cores, against nothing for one sent before.
     */
    private HttpRequest request(String node, String path, String token, long timeoutNanos) {
        boolean keep = timeoutNanos == defaultTimeoutNanos;
        String key = null;
        if (keep) {
            key = token == null ? node + path : node + path + "\n" + token;
            HttpRequest r = requests.get(key);
            if (r != null) {
                return r;
            }
        }
        HttpRequest.Builder rb = HttpRequest.newBuilder(URI.create(scheme + node + path))
                .timeout(Duration.ofNanos(timeoutNanos))
                .GET();
        if (token != null) {
            rb.header("Authorization", "Bearer " + token);
        }
        HttpRequest r = rb.build();
        if (keep) {
            if (requests.size() >= MAX_KEPT_REQUESTS) {
                requests.clear();
            }
            requests.put(key, r);
        }
        return r;
    }

    /** Aborts every request in flight; later requests throw {@link SnowflakedClosedException}. */
    void close() {
        closed = true;
        watchdog.shutdownNow();
        for (Call c : inFlight) {
            c.abort(Call.CLOSED);
        }
        HttpClient h = http;
        http = null;
        if (h != null) {
            // Java 21 and later: HttpClient.shutdownNow() closes its connections and threads at
            // once. Java 17 has no such call: with the client no longer referenced, its selector
            // thread ends and closes the connections at the next garbage collection.
            try {
                HttpClient.class.getMethod("shutdownNow").invoke(h);
            } catch (ReflectiveOperationException | RuntimeException e) {
                // Java 17
            }
        }
    }

    private static HttpResponse.BodyHandler<byte[]> bounded(int okLimit) {
        return info -> {
            int limit = info.statusCode() == 200 ? okLimit : MAX_ERROR_BODY;
            long cl = info.headers().firstValueAsLong("content-length").orElse(-1L);
            if (cl < 0) {
                return new Refused("an answer without a Content-Length");
            }
            if (cl > limit) {
                return new Refused("an answer of " + cl + " bytes, above the " + limit + " expected at most");
            }
            return HttpResponse.BodySubscribers.ofByteArray();
        };
    }

    /** A body not read: the subscription is cancelled at once and the answer fails. */
    private static final class Refused implements HttpResponse.BodySubscriber<byte[]> {
        private final CompletableFuture<byte[]> cf = new CompletableFuture<>();
        private final String why;

        Refused(String why) {
            this.why = why;
        }

        @Override
        public CompletionStage<byte[]> getBody() {
            return cf;
        }

        @Override
        public void onSubscribe(Flow.Subscription s) {
            s.cancel();
            cf.completeExceptionally(new IOException(why));
        }

        @Override
        public void onNext(List<ByteBuffer> item) {
        }

        @Override
        public void onError(Throwable t) {
            cf.completeExceptionally(t);
        }

        @Override
        public void onComplete() {
            cf.completeExceptionally(new IOException(why));
        }
    }
}
