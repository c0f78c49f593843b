package dev.snowflaked.client;

/**
 * The base of every error a {@link SnowflakedClient} call throws. It is unchecked: a call's failure
 * is either a programming or configuration error (a rejected request) or an outage the caller
 * usually cannot handle locally (no node answered, the deadline passed), and the subclasses let a
 * caller branch on the cases it can handle.
 */
public class SnowflakedException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /**
     * Creates an exception with a message.
     *
     * @param message what went wrong
     */
    public SnowflakedException(String message) {
        super(message);
    }

    /**
     * Creates an exception with a message and a cause.
     *
     * @param message what went wrong
     * @param cause the underlying failure
     */
    public SnowflakedException(String message, Throwable cause) {
        super(message, cause);
    }
}
