package dev.snowflaked.client;

/**
 * A string that is not a value of an {@link IdEncoding}, or a value that does not fit the bits. A
 * string with a bad character is {@link Kind#CHARACTER} whatever its width: characters are
 * checked first, as a node does.
 */
public final class IdEncodingException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    /** What is wrong. */
    public enum Kind {
        /** Not the width of the value's bits. */
        WIDTH,
        /** A character outside the alphabet. */
        CHARACTER,
        /** A value of more bits than the kind of value has (or a negative ID). */
        RANGE,
        /** No such encoding ({@link IdEncoding#of(String)}). */
        ENCODING
    }

    private final Kind kind;
    private final transient IdEncoding encoding;
    private final int index;

    IdEncodingException(Kind kind, IdEncoding encoding, int index, String message) {
        super(message);
        this.kind = kind;
        this.encoding = encoding;
        this.index = index;
    }

    /**
     * What is wrong.
     *
     * @return the kind
     */
    public Kind kind() {
        return kind;
    }

    /**
     * The encoding.
     *
     * @return it, or null with {@link Kind#ENCODING}
     */
    public IdEncoding encoding() {
        return encoding;
    }

    /**
     * With {@link Kind#CHARACTER}: where the first bad character is.
     *
     * @return its index from 0, or -1
     */
    public int index() {
        return index;
    }
}
