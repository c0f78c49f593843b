package dev.snowflaked.client;

/**
 * A request that any node would refuse: a 4xx answer other than a stale address's 404
 * ({@code unknown_tag}, {@code gene_off}, {@code invalid_count}, {@code token_required},
 * {@code token_invalid}, ...), or an argument the client refused itself before asking a node (then
 * {@link #status()} is 0). It is never retried on another node.
 */
public class SnowflakedRejectedException extends SnowflakedException {
    private static final long serialVersionUID = 1L;

    /** The node that refused, or null. */
    private final String node;
    /** The HTTP status, or 0. */
    private final int status;
    /** The API's error code, or null. */
    private final String code;
    /** The message. */
    private final String detail;
    /** The node's limit with invalid_count, or null. */
    private final Integer max;
    /** The tag's ceiling with invalid_count, or null. */
    private final Integer tagMax;

    /**
     * Creates the exception.
     *
     * @param node the node that answered, or null when the client refused the call itself
     * @param status the node's HTTP status, 0 when the client refused the call itself
     * @param code the API's error code ({@code "unknown_tag"}, ...), or null when the answer had none
     * @param detail the node's message
     * @param max with {@code invalid_count}: the node's limit ({@code --max-batch}), else null
     * @param tagMax with {@code invalid_count}: the tag's per-request ceiling, else null
     */
    public SnowflakedRejectedException(String node, int status, String code, String detail, Integer max, Integer tagMax) {
        super(text(node, status, code, detail));
        this.node = node;
        this.status = status;
        this.code = code;
        this.detail = detail;
        this.max = max;
        this.tagMax = tagMax;
    }

    private static String text(String node, int status, String code, String detail) {
        StringBuilder b = new StringBuilder("request rejected by snowflaked: ");
        if (node != null) {
            b.append(node).append(": ").append(status).append(' ');
        }
        if (code != null) {
            b.append(code).append(": ");
        }
        b.append(detail == null ? "" : detail);
        return b.toString();
    }

    /**
     * The node that refused the request.
     *
     * @return its {@code host:port}, or null when the client refused the call itself
     */
    public String node() {
        return node;
    }

    /**
     * The HTTP status of the refusal.
     *
     * @return the status, or 0 when the client refused the call before asking a node
     */
    public int status() {
        return status;
    }

    /**
     * The API's error code, e.g. {@code unknown_tag}, {@code invalid_count}, {@code gene_off}.
     *
     * @return the code, or null when the node's answer had none
     */
    public String code() {
        return code;
    }

    /**
     * The refusal's message, for people.
     *
     * @return the node's (or the client's) message
     */
    public String detail() {
        return detail;
    }

    /**
     * With {@code invalid_count}: the largest count the node accepts, when it named one.
     *
     * @return the node's limit, or null
     */
    public Integer max() {
        return max;
    }

    /**
     * With {@code invalid_count}: the tag's per-request ceiling ({@code --max-count}), when a
     * tag's ceiling refused the count.
     *
     * @return the tag's ceiling, or null
     */
    public Integer tagMax() {
        return tagMax;
    }
}
