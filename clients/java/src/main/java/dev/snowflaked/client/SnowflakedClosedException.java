package dev.snowflaked.client;

/** Thrown by a call on a {@link SnowflakedClient} that was closed (before or during the call). */
public class SnowflakedClosedException extends SnowflakedException {
    private static final long serialVersionUID = 1L;

    /** Creates the exception. */
    public SnowflakedClosedException() {
        super("snowflaked client closed");
    }
}
