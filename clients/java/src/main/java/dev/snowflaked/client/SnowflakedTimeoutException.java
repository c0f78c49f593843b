package dev.snowflaked.client;

/**
 * Thrown when the caller's own deadline (the per-call {@link java.time.Duration}) passed before the
 * call was served: before it started, while it waited in a batch, during a request or a failover.
 * The node that was being asked is not blamed for it (it stays in rotation).
 */
public class SnowflakedTimeoutException extends SnowflakedException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates the exception.
     *
     * @param message what was being done when the deadline passed
     * @param cause the last node's failure, or null
     */
    public SnowflakedTimeoutException(String message, Throwable cause) {
        super(message, cause);
    }
}
