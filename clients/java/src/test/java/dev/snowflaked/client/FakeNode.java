package dev.snowflaked.client;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import javax.net.ssl.SSLContext;

/**
 * A fake snowflaked node on 127.0.0.1 (a random port): by default it serves /ids, /segment/{tag}
 * and /uuids with increasing IDs; {@link #handler} replaces that. It records each request.
 */
final class FakeNode implements AutoCloseable {
    /** What a request is answered with; return false to fall back to the default answer. */
    interface Handler {
        boolean handle(FakeNode node, HttpExchange ex, Map<String, String> query) throws Exception;
    }

    final HttpServer server;
    final String addr;
    final List<String> requests = new CopyOnWriteArrayList<>();
    final List<String> authorizations = new CopyOnWriteArrayList<>();
    final AtomicInteger hits = new AtomicInteger();
    final AtomicLong next = new AtomicLong(1000);
    volatile Handler handler;
    private final ExecutorService exec = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "fake-node");
        t.setDaemon(true);
        return t;
    });

    FakeNode() throws IOException {
        this(null);
    }

    FakeNode(SSLContext tls) throws IOException {
        if (tls != null) {
            HttpsServer s = HttpsServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
            s.setHttpsConfigurator(new HttpsConfigurator(tls) {
                @Override
                public void configure(com.sun.net.httpserver.HttpsParameters params) {
                    javax.net.ssl.SSLParameters p = tls.getDefaultSSLParameters();
                    p.setNeedClientAuth(true);
                    params.setSSLParameters(p);
                }
            });
            server = s;
        } else {
            server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        }
        server.setExecutor(exec);
        server.createContext("/", this::serve);
        server.start();
        addr = "127.0.0.1:" + server.getAddress().getPort();
    }

    private void serve(HttpExchange ex) throws IOException {
        try {
            hits.incrementAndGet();
            requests.add(ex.getRequestURI().toString());
            String auth = ex.getRequestHeaders().getFirst("Authorization");
            authorizations.add(auth == null ? "" : auth);
            Map<String, String> q = new ConcurrentHashMap<>();
            String raw = ex.getRequestURI().getRawQuery();
            if (raw != null) {
                for (String kv : raw.split("&")) {
                    int i = kv.indexOf('=');
                    q.put(i < 0 ? kv : kv.substring(0, i), i < 0 ? "" : kv.substring(i + 1));
                }
            }
            Handler h = handler;
            if (h != null && h.handle(this, ex, q)) {
                return;
            }
            String path = ex.getRequestURI().getPath();
            if (path.equals("/ids") || path.startsWith("/segment/")) {
                int n = Integer.parseInt(q.getOrDefault("count", "1"));
                send(ex, 200, ids(n), null);
            } else if (path.equals("/uuids")) {
                int n = Integer.parseInt(q.getOrDefault("count", "1"));
                StringBuilder b = new StringBuilder();
                for (int i = 0; i < n; i++) {
                    long v = next.incrementAndGet();
                    b.append(String.format("01a2522e-5e97-7%03x-8%03x-%012x%n", v & 0xfff, (v >> 12) & 0xfff, v));
                }
                send(ex, 200, b.toString(), null);
            } else {
                send(ex, 404, error("not_found", "no endpoint", null), null);
            }
        } catch (Exception e) {
            send(ex, 500, error("internal", e.toString(), null), null);
        } finally {
            ex.close();
        }
    }

    /** n increasing IDs, one a line. */
    String ids(int n) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < n; i++) {
            b.append(next.incrementAndGet()).append('\n');
        }
        return b.toString();
    }

    /** The requests whose path and query start with prefix. */
    List<String> requestsTo(String prefix) {
        List<String> out = new ArrayList<>();
        for (String r : requests) {
            if (r.startsWith(prefix)) {
                out.add(r);
            }
        }
        return out;
    }

    static String error(String code, String message, Integer max) {
        return "{\"error\":{\"code\":\"" + code + "\",\"message\":\"" + message + "\"" + (max != null ? ",\"max\":" + max : "") + "}}";
    }

    static void send(HttpExchange ex, int status, String body, String retryAfter) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        if (retryAfter != null) {
            ex.getResponseHeaders().set("Retry-After", retryAfter);
        }
        ex.sendResponseHeaders(status, b.length == 0 ? -1 : b.length);
        try (OutputStream o = ex.getResponseBody()) {
            o.write(b);
        }
    }

    /**
     * Starts a node that sends an answer's head and 2 of its 20 bytes, then nothing, on every
     * connection; what it opens is added to cleanup. Returns its address.
     */
    static String stalledBody(List<AutoCloseable> cleanup) throws IOException {
        java.net.ServerSocket ss = new java.net.ServerSocket(0, 50, java.net.InetAddress.getByName("127.0.0.1"));
        cleanup.add(ss);
        List<java.net.Socket> held = new CopyOnWriteArrayList<>();
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
                    s.getOutputStream().write("HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n12".getBytes(StandardCharsets.US_ASCII));
                    s.getOutputStream().flush();
                }
            } catch (IOException e) {
                // closed by the test
            }
        });
        t.setDaemon(true);
        t.start();
        return "127.0.0.1:" + ss.getLocalPort();
    }

    @Override
    public void close() {
        server.stop(0);
        exec.shutdownNow();
    }
}
