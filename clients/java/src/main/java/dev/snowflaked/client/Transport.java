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
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Flow;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
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

    private final HttpClient http;
    private final String scheme;
    private final Set<CompletableFuture<?>> inFlight = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;

    Transport(SSLContext tls, Duration connectTimeout) {
        HttpClient.Builder b = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .followRedirects(HttpClient.Redirect.NEVER)
                .connectTimeout(connectTimeout);
        if (tls != null) {
            b.sslContext(tls);
        }
        this.http = b.build();
        this.scheme = tls != null ? "https://" : "http://";
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
        HttpRequest.Builder rb = HttpRequest.newBuilder(URI.create(scheme + node + path))
                .timeout(Duration.ofNanos(timeoutNanos))
                .GET();
        if (token != null) {
            rb.header("Authorization", "Bearer " + token);
        }
        CompletableFuture<HttpResponse<byte[]>> cf = http.sendAsync(rb.build(), bounded(okLimit));
        inFlight.add(cf);
        try {
            if (closed) {
                cf.cancel(true);
            }
            HttpResponse<byte[]> r = cf.get(timeoutNanos, TimeUnit.NANOSECONDS);
            long retry = 0;
            List<String> ra = r.headers().allValues("retry-after");
            if (!ra.isEmpty()) {
                try {
                    long s = Long.parseLong(ra.get(0).trim());
                    if (s > 0 && s < 3600) {
                        retry = TimeUnit.SECONDS.toNanos(s);
                    }
                } catch (NumberFormatException ignored) {
                    // an HTTP date, or garbage: the client's own DownFor applies
                }
            }
            return new Answer(r.statusCode(), r.body(), retry);
        } catch (TimeoutException e) {
            cf.cancel(true);
            throw new Timeout("no answer within " + Duration.ofNanos(timeoutNanos).toMillis() + " ms");
        } catch (CancellationException e) {
            if (closed) {
                throw new SnowflakedClosedException();
            }
            throw new IOException("request cancelled", e);
        } catch (InterruptedException e) {
            cf.cancel(true);
            throw e;
        } catch (ExecutionException e) {
            if (closed) {
                throw new SnowflakedClosedException();
            }
            Throwable c = e.getCause();
            if (c instanceof java.net.http.HttpTimeoutException) {
                throw new Timeout(c.getMessage());
            }
            if (c instanceof IOException io) {
                throw io;
            }
            throw new IOException(String.valueOf(c), c);
        } finally {
            inFlight.remove(cf);
        }
    }

    /** Aborts every request in flight; later requests throw {@link SnowflakedClosedException}. */
    void close() {
        closed = true;
        for (CompletableFuture<?> f : inFlight) {
            f.cancel(true);
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
