package dev.snowflaked.client;

import java.time.Instant;
import java.util.UUID;

/**
 * What {@link SnowflakedClient#bounds(Instant, Instant)} gives: the IDs (and UUIDs) a node of the
 * cluster can have issued in {@code [from, to)}, the range truncated to the start of its ticks.
 * {@code minId <= id && id <= maxId} selects the IDs issued in the range.
 *
 * @param from the start of the first tick in the range
 * @param to the start of the first tick after it
 * @param minId the smallest ID of a tick in the range
 * @param maxId the largest ID of a tick in the range
 * @param minUuid the smallest UUIDv7 of the range, or null when the layout has no UUIDs
 * @param maxUuid the largest UUIDv7 of the range, or null when the layout has no UUIDs
 */
public record Bounds(Instant from, Instant to, long minId, long maxId, UUID minUuid, UUID maxUuid) {
}
