package dev.snowflaked.client;

import java.util.concurrent.atomic.AtomicInteger;

/** One kind of request: snowflake IDs, a tag's dense IDs, IDs with a gene, or UUIDs. */
final class Endpoint {
    /** The service a node is marked down for: snowflake IDs (and UUIDs, genes), or dense IDs. */
    static final int SVC_IDS = 0;
    static final int SVC_SEGMENTS = 1;

    final int svc;
    /** The path up to and including "count=". */
    final String path;
    /** For errors: "IDs", "dense IDs of orders". */
    final String what;
    /** The bearer token, or null. */
    final String token;
    /** The answer is UUIDs, one a line. */
    final boolean uuids;
    /** The answer's IDs are distinct but in no order (an opaque tag's). */
    final boolean unordered;
    /** A tag's per-request ceiling once a node named it (0 before); null for other kinds. */
    final AtomicInteger tagMax;

    Endpoint(int svc, String path, String what, String token, boolean uuids, boolean unordered, AtomicInteger tagMax) {
        this.svc = svc;
        this.path = path;
        this.what = what;
        this.token = token;
        this.uuids = uuids;
        this.unordered = unordered;
        this.tagMax = tagMax;
    }
}
