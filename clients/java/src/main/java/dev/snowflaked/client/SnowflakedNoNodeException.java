package dev.snowflaked.client;

import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * No node could serve the call: every node tried failed (at most 3 a batch), or none was left to
 * try. {@link #causes()} holds each node's last failure; each is also a suppressed exception.
 */
public class SnowflakedNoNodeException extends SnowflakedException {
    private static final long serialVersionUID = 1L;

    /** Each node's failure (not serialized: the suppressed exceptions carry them). */
    private final transient Map<String, Throwable> causes;
    /** The nodes neither asked nor down. */
    private final List<String> notTried;

    /**
     * Creates the exception.
     *
     * @param what what the call asked for ("IDs", "dense IDs of orders", ...)
     * @param causes each node's failure, by {@code host:port}, in the order they failed
     * @param notTried the nodes known that were neither asked nor down
     */
    public SnowflakedNoNodeException(String what, Map<String, Throwable> causes, List<String> notTried) {
        super(text(what, causes, notTried));
        this.causes = Collections.unmodifiableMap(causes);
        this.notTried = List.copyOf(notTried);
        for (Throwable t : causes.values()) {
            addSuppressed(t);
        }
    }

    private static String text(String what, Map<String, Throwable> causes, List<String> notTried) {
        StringBuilder b = new StringBuilder("no snowflaked node available");
        if (what != null && !what.isEmpty()) {
            b.append(" for ").append(what);
        }
        b.append(": ");
        if (causes.isEmpty() && notTried.isEmpty()) {
            b.append("no node is known");
        }
        String sep = "";
        for (Throwable t : causes.values()) {
            b.append(sep).append(t.getMessage());
            sep = "; ";
        }
        for (String n : notTried) {
            b.append(sep).append(n).append(": not tried");
            sep = "; ";
        }
        return b.toString();
    }

    /**
     * Each node's failure, keyed by its {@code host:port}: this call's, then the last failure of
     * each other node known to be down for this kind of ID.
     *
     * @return an unmodifiable map in the order of the failures
     */
    public Map<String, Throwable> causes() {
        return causes;
    }

    /**
     * The nodes known that were neither asked nor down.
     *
     * @return an unmodifiable list of {@code host:port}
     */
    public List<String> notTried() {
        return notTried;
    }
}
