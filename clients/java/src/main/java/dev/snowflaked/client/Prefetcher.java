package dev.snowflaked.client;

import java.util.ArrayDeque;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Keeps up to K snowflake IDs fetched ahead for {@link SnowflakedClient#nextId()}, in chunks of at
 * most maxBatch (K/4 when smaller), refilled by up to 4 requests at once whenever fewer than K are
 * held or on their way. A chunk older than 1 s is dropped. With the buffer empty while refills are
 * out, a call waits for them; with none out (they failed), it makes its own request, so that its
 * error is the node's.
 */
final class Prefetcher {
    private static final long MAX_AGE_NANOS = TimeUnit.SECONDS.toNanos(1);
    private static final int MAX_REFILLS = 4;
    private static final long BACKOFF_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

    private final SnowflakedClient c;
    private final Endpoint ep;
    private final int k;
    private final int chunk;
    private final Executor workers;

    private final ReentrantLock lock = new ReentrantLock();
    private final Condition more = lock.newCondition();
    private final ArrayDeque<Chunk> chunks = new ArrayDeque<>();
    private int held;
    private int coming;
    private int refills;
    private long noRefillUntil;
    private boolean failed;
    private volatile boolean closed; // read by refills outside the lock

    private static final class Chunk {
        final long[] ids;
        final long at;
        int pos;

        Chunk(long[] ids, long at) {
            this.ids = ids;
            this.at = at;
        }
    }

    Prefetcher(SnowflakedClient c, Endpoint ep, int k, Executor workers) {
        this.c = c;
        this.ep = ep;
        this.k = k;
        this.chunk = Math.max(1, Math.min(c.maxBatch, Math.max(1, k / 4)));
        this.workers = workers;
    }

    long next(long deadline) {
        lock.lock();
        try {
            while (true) {
                if (closed) {
                    throw new SnowflakedClosedException();
                }
                long now = System.nanoTime();
                while (!chunks.isEmpty()) {
                    Chunk ch = chunks.peekFirst();
                    if (now - ch.at > MAX_AGE_NANOS || ch.pos == ch.ids.length) {
                        held -= ch.ids.length - ch.pos;
                        chunks.pollFirst();
                        continue;
                    }
                    long id = ch.ids[ch.pos++];
                    held--;
                    refill(now);
                    return id;
                }
                refill(now);
                if (refills == 0) {
                    break; // failing: the call's own request says why
                }
                try {
                    if (deadline == SnowflakedClient.NO_DEADLINE) {
                        more.await();
                    } else {
                        long left = deadline - System.nanoTime();
                        if (left <= 0) {
                            throw new SnowflakedTimeoutException("next ID: the caller's deadline passed waiting for a prefetch", null);
                        }
                        more.awaitNanos(left);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new SnowflakedException("next ID: interrupted", e);
                }
            }
        } finally {
            lock.unlock();
        }
        return c.serveClamped(ep, 1, deadline, false, () -> true)[0];
    }

    /** Starts refills while fewer than K are held or coming. Lock held. */
    private void refill(long now) {
        if (failed && now - noRefillUntil < 0) {
            return;
        }
        failed = false;
        while (held + coming < k && refills < MAX_REFILLS) {
            refills++;
            coming += chunk;
            try {
                workers.execute(this::fetch);
            } catch (RuntimeException e) { // closed
                refills--;
                coming -= chunk;
                return;
            }
        }
    }

    private void fetch() {
        // A chunk's age counts from when its request left (its IDs were issued after that), not
        // from when a slow answer arrived: the time inside an ID lags a call by at most MAX_AGE.
        long born = System.nanoTime();
        long[] ids = null;
        try {
            ids = c.serveClamped(ep, chunk, SnowflakedClient.NO_DEADLINE, false, () -> !closed);
        } catch (RuntimeException e) {
            System.getLogger(SnowflakedClient.class.getName()).log(System.Logger.Level.WARNING,
                    "snowflaked client: prefetch failed: " + e.getMessage());
        }
        lock.lock();
        try {
            refills--;
            coming -= chunk;
            if (ids != null && !closed) {
                chunks.addLast(new Chunk(ids, born));
                held += ids.length;
            } else {
                failed = true;
                noRefillUntil = System.nanoTime() + BACKOFF_NANOS;
            }
            more.signalAll();
        } finally {
            lock.unlock();
        }
    }

    void close() {
        lock.lock();
        try {
            closed = true;
            chunks.clear();
            held = 0;
            more.signalAll();
        } finally {
            lock.unlock();
        }
    }
}
