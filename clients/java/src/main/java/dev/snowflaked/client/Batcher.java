package dev.snowflaked.client;

import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Merges the calls for one kind of ID (snowflake IDs, or one tag's dense IDs) into requests.
 *
 * <p>A call that finds a free slot (fewer than maxInFlight requests out: by default one per node)
 * and no batch waiting does
 * its request itself, on its own thread: no hand-off. Calls that arrive while every slot is taken
 * join the open batch, up to the most IDs one request asks for. When a request ends, its slot
 * takes the oldest batch waiting and serves it on a worker thread, which goes on with the next
 * batch waiting, if any, and frees the slot when none is left. One latch wakes every caller of a
 * batch, each reading its own slice of the answer.
 *
 * <p>Stalls: while calls wait, a request out longer than stallAfter (a node that hangs) gives its
 * slot up, so that the waiting calls get a request of their own (on the next node in turn); the
 * stalled request's own callers wait for it, up to the request timeout, then fail over.
 */
final class Batcher {
    private final SnowflakedClient c;
    final Endpoint ep;
    private final Executor workers;
    private final java.util.function.IntSupplier maxInFlight;
    private final long stallNanos;

    private final ReentrantLock lock = new ReentrantLock();
    private Batch open;
    private final ArrayDeque<Batch> full = new ArrayDeque<>();
    private int inFlight;
    private boolean closed;

    private final ArrayDeque<Slot> slots = new ArrayDeque<>();

    Batcher(SnowflakedClient c, Endpoint ep, Executor workers, java.util.function.IntSupplier maxInFlight, long stallNanos) {
        this.c = c;
        this.ep = ep;
        this.workers = workers;
        this.maxInFlight = maxInFlight;
        this.stallNanos = stallNanos;
    }

    /** A request out, holding a slot until it stalls. Guarded by lock. */
    private static final class Slot {
        long start = System.nanoTime();
        boolean stalled;
    }

    /** One request shared by the calls that joined it. */
    static final class Batch {
        int total;
        int joined;
        long deadline = Long.MIN_VALUE; // nanoTime; SnowflakedClient.NO_DEADLINE when a caller has none
        final AtomicInteger left = new AtomicInteger();
        final CountDownLatch done = new CountDownLatch(1);
        volatile long[] ids;
        volatile RuntimeException err;

        void publish(long[] ids, RuntimeException err) {
            this.ids = ids;
            this.err = err;
            done.countDown();
        }
    }

    /** The most IDs one request of this batcher asks for. */
    int most() {
        int m = c.maxBatch;
        if (ep.tagMax != null) {
            int t = ep.tagMax.get();
            if (t > 0 && t < m) {
                m = t;
            }
        }
        return m;
    }

    /** Returns n (1 ≤ n ≤ most()) IDs from one batch, increasing. */
    long[] fetch(int n, long deadline) {
        Batch b;
        int off;
        Slot slot = null;
        lock.lock();
        try {
            if (closed) {
                throw new SnowflakedClosedException();
            }
            if (inFlight < maxInFlight.getAsInt() && open == null && full.isEmpty()) {
                inFlight++;
                slot = new Slot();
                slots.add(slot);
                b = null;
                off = 0;
            } else {
                int most = most();
                if (open != null && open.total + n > most) {
                    full.add(open);
                    open = null;
                }
                if (open == null) {
                    open = new Batch();
                }
                b = open;
                off = b.total;
                b.total += n;
                b.joined++;
                if (deadline == SnowflakedClient.NO_DEADLINE || b.deadline == SnowflakedClient.NO_DEADLINE) {
                    b.deadline = SnowflakedClient.NO_DEADLINE;
                } else if (b.deadline == Long.MIN_VALUE || deadline - b.deadline > 0) {
                    b.deadline = deadline;
                }
            }
        } finally {
            lock.unlock();
        }
        if (b == null) {
            // Alone: the request on this thread.
            try {
                return c.serveClamped(ep, n, deadline, false, () -> true);
            } finally {
                release(slot);
            }
        }
        return await(b, off, n, deadline);
    }

    private long[] await(Batch b, int off, int n, long deadline) {
        try {
            while (true) {
                long wait = stallNanos;
                if (deadline != SnowflakedClient.NO_DEADLINE) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        b.left.incrementAndGet();
                        throw new SnowflakedTimeoutException("next " + ep.what + ": the caller's deadline passed while waiting for a batch", null);
                    }
                    wait = Math.min(wait, left);
                }
                if (b.done.await(wait, TimeUnit.NANOSECONDS)) {
                    break;
                }
                unstall();
            }
        } catch (InterruptedException e) {
            b.left.incrementAndGet();
            Thread.currentThread().interrupt();
            throw new SnowflakedException("next " + ep.what + ": interrupted", e);
        }
        RuntimeException err = b.err;
        if (err != null) {
            // The batch's one error, thrown to each of its callers (a timeout here is the most
            // patient caller's deadline: this caller's passed too).
            throw err;
        }
        return Arrays.copyOfRange(b.ids, off, off + n);
    }

    /** Frees the slot of a request that ended, or hands it to the next batch waiting. */
    private void release(Slot slot) {
        Batch next;
        lock.lock();
        try {
            slots.remove(slot);
            if (slot.stalled) {
                return; // its slot was given up already
            }
            next = handOnLocked();
            if (next == null) {
                return;
            }
        } finally {
            lock.unlock();
        }
        start(next);
    }

    /** With the lock held: the batch that takes a slot just freed, or null, and the slot is free. */
    private Batch handOnLocked() {
        Batch next = takeNext();
        if (next == null) {
            inFlight--;
        }
        return next;
    }

    /** Serves b on a worker thread, in a slot taken for it (inFlight counts it already). */
    private void start(Batch b) {
        Slot slot = new Slot();
        lock.lock();
        try {
            slots.add(slot);
        } finally {
            lock.unlock();
        }
        try {
            workers.execute(() -> run(b, slot));
        } catch (RuntimeException e) { // the workers were shut down: closed
            b.publish(null, new SnowflakedClosedException());
            lock.lock();
            try {
                slots.remove(slot);
                if (!slot.stalled) {
                    inFlight--;
                }
            } finally {
                lock.unlock();
            }
        }
    }

    /** Serves b, then every batch waiting, on a worker thread holding one slot until it stalls. */
    private void run(Batch b, Slot slot) {
        while (b != null) {
            serve(b);
            lock.lock();
            try {
                if (slot.stalled) {
                    slots.remove(slot);
                    return;
                }
                b = takeNext();
                if (b == null) {
                    slots.remove(slot);
                    inFlight--;
                } else {
                    slot.start = System.nanoTime();
                }
            } finally {
                lock.unlock();
            }
        }
    }

    /**
     * Called by a waiting call every stallAfter: when every slot is held and the oldest request
     * has been out longer than stallAfter, that request gives its slot up to the next batch.
     */
    private void unstall() {
        Batch next;
        lock.lock();
        try {
            if (closed || inFlight < maxInFlight.getAsInt() || (open == null && full.isEmpty())) {
                return;
            }
            long now = System.nanoTime();
            Slot stalled = null;
            for (Slot s : slots) {
                if (!s.stalled && now - s.start > stallNanos) {
                    stalled = s;
                    break;
                }
            }
            if (stalled == null) {
                return;
            }
            stalled.stalled = true;
            next = handOnLocked();
            if (next == null) {
                return;
            }
        } finally {
            lock.unlock();
        }
        start(next);
    }

    private void serve(Batch b) {
        if (c.isClosed()) {
            b.publish(null, new SnowflakedClosedException());
            return;
        }
        try {
            long[] ids = c.serveClamped(ep, b.total, b.deadline, b.joined > 1, () -> b.left.get() < b.joined);
            b.publish(ids, null);
        } catch (RuntimeException e) {
            b.publish(null, e);
        }
    }

    /** The next batch to serve, sealed: the oldest full one, else the open one. Lock held. */
    private Batch takeNext() {
        while (true) {
            Batch b = full.poll();
            if (b == null) {
                b = open;
                open = null;
            }
            if (b == null) {
                return null;
            }
            if (closed) {
                b.publish(null, new SnowflakedClosedException());
                continue;
            }
            if (b.left.get() >= b.joined) {
                b.publish(null, new SnowflakedTimeoutException("every caller of the batch gave up", null));
                continue;
            }
            return b;
        }
    }

    /** The calls that joined batches not yet served (for tests). */
    int waiting() {
        lock.lock();
        try {
            int n = open == null ? 0 : open.joined;
            for (Batch b : full) {
                n += b.joined;
            }
            return n;
        } finally {
            lock.unlock();
        }
    }

    /** Fails every batch waiting with the closed error. */
    void close() {
        lock.lock();
        try {
            closed = true;
            for (Batch b : full) {
                b.publish(null, new SnowflakedClosedException());
            }
            full.clear();
            if (open != null) {
                open.publish(null, new SnowflakedClosedException());
                open = null;
            }
        } finally {
            lock.unlock();
        }
    }
}
