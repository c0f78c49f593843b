package dev.snowflaked.client;

import java.time.Duration;
import java.time.Instant;

/**
 * The bit layout of a cluster's snowflake IDs, to take an ID apart as a node's {@code /decode/{id}}
 * does, without a request. The fields are those of a node's {@code /clock}: {@code layout},
 * {@code epoch} and {@code time_unit}, and the cluster's gene bits ({@code --gene-bits}).
 *
 * <pre>
 *  63      time (T bits)      worker (W bits)   counter (S-K bits)   gene (K bits)   0
 * </pre>
 */
public final class Layout {
    /** The default layout: 41 time, 10 worker, 12 sequence bits, no gene bits, epoch 2024-01-01T00:00:00Z, 1 ms ticks. */
    public static final Layout DEFAULT = new Layout(41, 10, 12, 0, Instant.parse("2024-01-01T00:00:00Z"), Duration.ofMillis(1));

    private final int timeBits;
    private final int workerBits;
    private final int sequenceBits;
    private final int geneBits;
    private final Instant epoch;
    private final Duration unit;

    /**
     * Creates a layout.
     *
     * @param timeBits bits of the timestamp (ticks since the epoch)
     * @param workerBits bits of the worker ID
     * @param sequenceBits bits of the sequence field (gene bits included)
     * @param geneBits the low bits of the sequence field that carry a gene (0: none)
     * @param epoch the time of tick 0
     * @param unit the length of a tick (a whole number of milliseconds)
     * @throws IllegalArgumentException when the fields do not make a 63-bit layout
     */
    public Layout(int timeBits, int workerBits, int sequenceBits, int geneBits, Instant epoch, Duration unit) {
        if (timeBits < 1 || workerBits < 0 || sequenceBits < 0 || geneBits < 0 || geneBits > sequenceBits
                || timeBits + workerBits + sequenceBits > 63) {
            throw new IllegalArgumentException("layout " + timeBits + "/" + workerBits + "/" + sequenceBits + " gene " + geneBits
                    + ": want at most 63 bits, time at least 1, gene bits at most the sequence bits");
        }
        if (epoch == null || unit == null || unit.toMillis() < 1 || unit.toNanos() % 1_000_000 != 0) {
            throw new IllegalArgumentException("layout: want an epoch and a unit of whole milliseconds");
        }
        this.timeBits = timeBits;
        this.workerBits = workerBits;
        this.sequenceBits = sequenceBits;
        this.geneBits = geneBits;
        this.epoch = epoch;
        this.unit = unit;
    }

    /**
     * The default layout with {@code geneBits} gene bits.
     *
     * @param geneBits the cluster's {@code --gene-bits}
     * @return the layout
     */
    public static Layout withGeneBits(int geneBits) {
        return new Layout(41, 10, 12, geneBits, DEFAULT.epoch, DEFAULT.unit);
    }

    /** @return bits of the timestamp */
    public int timeBits() {
        return timeBits;
    }

    /** @return bits of the worker ID */
    public int workerBits() {
        return workerBits;
    }

    /** @return bits of the sequence field, gene bits included */
    public int sequenceBits() {
        return sequenceBits;
    }

    /** @return the gene bits (0: none) */
    public int geneBits() {
        return geneBits;
    }

    /** @return the time of tick 0 */
    public Instant epoch() {
        return epoch;
    }

    /** @return the length of a tick */
    public Duration unit() {
        return unit;
    }

    /**
     * The bits of an ID: time + worker + sequence (63 for 41/10/12, 53 for js53), the {@code bits}
     * of {@link IdEncoding#encode(long, int)}.
     *
     * @return the bits
     */
    public int idBits() {
        return timeBits + workerBits + sequenceBits;
    }

    /**
     * Takes an ID apart.
     *
     * @param id a snowflake ID of this layout
     * @return its timestamp, worker ID, sequence (without the gene) and gene
     * @throws IllegalArgumentException when the ID is negative or too large for the layout
     */
    public Decoded decode(long id) {
        int total = timeBits + workerBits + sequenceBits;
        if (id < 0 || (total < 63 && (id >>> total) != 0)) {
            throw new IllegalArgumentException("ID " + id + " is out of range for the layout");
        }
        long ticks = id >>> (workerBits + sequenceBits);
        long worker = (id >>> sequenceBits) & mask(workerBits);
        long seqField = id & mask(sequenceBits);
        long gene = seqField & mask(geneBits);
        long sequence = seqField >>> geneBits;
        long ms = epoch.toEpochMilli() + ticks * unit.toMillis();
        return new Decoded(ms, (int) worker, sequence, geneBits > 0 ? gene : -1);
    }

    private static long mask(int bits) {
        return bits >= 63 ? Long.MAX_VALUE : (1L << bits) - 1;
    }

    /**
     * An ID taken apart by {@link Layout#decode(long)}.
     *
     * @param timestampMs the start of the ID's tick, in Unix milliseconds
     * @param workerId the worker that issued it
     * @param sequence its per-tick counter (without the gene bits)
     * @param gene its gene, or -1 when the layout has no gene bits
     */
    public record Decoded(long timestampMs, int workerId, long sequence, long gene) {
        /** @return the start of the ID's tick */
        public Instant timestamp() {
            return Instant.ofEpochMilli(timestampMs);
        }

        /** @return whether the layout has gene bits (then {@link #gene()} is meaningful) */
        public boolean hasGene() {
            return gene >= 0;
        }
    }
}
