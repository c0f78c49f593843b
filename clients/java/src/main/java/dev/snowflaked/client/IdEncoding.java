package dev.snowflaked.client;

import java.math.BigInteger;
import java.util.Arrays;
import java.util.UUID;

/**
 * The string IDs of a node's {@code format=base62} ({@code base58}, {@code base36}, {@code
 * base32}): fixed-width radix encodings of snowflake IDs, dense IDs and UUIDs.
 *
 * <p>Each alphabet is in ASCII order and every string of one kind of value has the same width, so
 * strings sort as their numbers do. The width is the fewest digits d with base<sup>d</sup> &ge;
 * 2<sup>bits</sup>: {@code bits} is a layout's time + worker + sequence bits for a snowflake ID (63
 * by default, 53 for {@code js53}; {@link Layout#idBits()}), 63 for a dense ID, 128 for a UUID.
 *
 * <pre>{@code
 * IdEncoding.BASE62.encode(Long.MAX_VALUE);   // "AzL8n0Y58m7"
 * IdEncoding.BASE62.decode("AzL8n0Y58m7");    // 9223372036854775807
 * IdEncoding.of("base32").encode(uuid);       // 26 characters
 * }</pre>
 *
 * <p>Decoding refuses, with an {@link IdEncodingException}, a character outside the alphabet
 * (checked first, as a node does), a string not of the width, and a value of {@code bits} bits or
 * more. base36 and base32 read either case; base32 also reads I and L as 1 and O as 0 (Crockford).
 */
public enum IdEncoding {
    /** 0-9 A-Z a-z, case-sensitive. */
    BASE62("base62", "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"),
    /** Bitcoin's alphabet (no 0, O, I, l), case-sensitive. */
    BASE58("base58", "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"),
    /** 0-9 a-z, written lower case, read in either case. */
    BASE36("base36", "0123456789abcdefghijklmnopqrstuvwxyz"),
    /** Crockford's base32, written upper case, read in either case, I and L as 1, O as 0. */
    BASE32("base32", "0123456789ABCDEFGHJKMNPQRSTVWXYZ");

    /** The bits of a UUID. */
    public static final int UUID_BITS = 128;

    private final String wireName;
    private final String alphabet;
    private final int base;
    private final byte[] digits = new byte[128];
    private final int[] widths = new int[UUID_BITS + 1];

    IdEncoding(String wireName, String alphabet) {
        this.wireName = wireName;
        this.alphabet = alphabet;
        this.base = alphabet.length();
        Arrays.fill(digits, (byte) -1);
        boolean anyCase = wireName.equals("base36") || wireName.equals("base32");
        for (int i = 0; i < base; i++) {
            char c = alphabet.charAt(i);
            digits[c] = (byte) i;
            if (anyCase) {
                digits[Character.toUpperCase(c)] = (byte) i;
                digits[Character.toLowerCase(c)] = (byte) i;
            }
        }
        if (wireName.equals("base32")) {
            for (char c : "IiLl".toCharArray()) {
                digits[c] = 1;
            }
            digits['O'] = 0;
            digits['o'] = 0;
        }
        BigInteger b = BigInteger.valueOf(base);
        for (int bits = 1; bits <= UUID_BITS; bits++) {
            BigInteger top = BigInteger.ONE.shiftLeft(bits);
            int d = 0;
            for (BigInteger p = BigInteger.ONE; p.compareTo(top) < 0; p = p.multiply(b)) {
                d++;
            }
            widths[bits] = d;
        }
    }

    /**
     * The encoding a node's {@code format} names.
     *
     * @param name {@code base62}, {@code base58}, {@code base36} or {@code base32}
     * @return the encoding
     * @throws IdEncodingException (kind {@link IdEncodingException.Kind#ENCODING}) for any other name
     */
    public static IdEncoding of(String name) {
        for (IdEncoding e : values()) {
            if (e.wireName.equals(name)) {
                return e;
            }
        }
        throw new IdEncodingException(IdEncodingException.Kind.ENCODING, null, -1,
                "encoding " + (name == null ? "null" : '"' + name + '"') + ": want base62, base58, base36 or base32");
    }

    /**
     * The name a node's {@code format} takes.
     *
     * @return {@code "base62"}, ...
     */
    public String wireName() {
        return wireName;
    }

    @Override
    public String toString() {
        return wireName;
    }

    /**
     * The alphabet, digit 0 first.
     *
     * @return the alphabet
     */
    public String alphabet() {
        return alphabet;
    }

    /**
     * The width of the strings of values of {@code bits} bits: 63 bits: 11, 11, 13, 13 for base62,
     * base58, base36, base32; 128 bits: 22, 22, 25, 26.
     *
     * @param bits 1 to 128
     * @return the width
     */
    public int width(int bits) {
        if (bits < 1 || bits > UUID_BITS) {
            throw new IllegalArgumentException("bits " + bits + ": want 1..128");
        }
        return widths[bits];
    }

    /**
     * An ID of the default layout, or a dense ID (63 bits).
     *
     * @param id the ID, 0 or more
     * @return its string
     */
    public String encode(long id) {
        return encode(id, 63);
    }

    /**
     * An ID of a layout of {@code bits} bits (time + worker + sequence).
     *
     * @param id the ID
     * @param bits 1 to 63
     * @return its string, {@link #width(int)} characters
     * @throws IdEncodingException (kind {@link IdEncodingException.Kind#RANGE}) for a negative ID or
     *     one of more than {@code bits} bits
     */
    public String encode(long id, int bits) {
        checkIdBits(bits);
        if (id < 0 || (bits < 63 && (id >>> bits) != 0)) {
            throw new IdEncodingException(IdEncodingException.Kind.RANGE, this, -1,
                    wireName + ": ID " + id + " does not fit " + bits + " bits (0 to 2^" + bits + "-1)");
        }
        char[] out = new char[widths[bits]];
        for (int i = out.length - 1; i >= 0; i--) {
            out[i] = alphabet.charAt((int) (id % base));
            id /= base;
        }
        return new String(out);
    }

    /**
     * A UUID: its 16 bytes as a big-endian number.
     *
     * @param uuid the UUID
     * @return its string, {@link #width(int) width(128)} characters
     */
    public String encode(UUID uuid) {
        BigInteger v = new BigInteger(1, bytes(uuid));
        BigInteger b = BigInteger.valueOf(base);
        char[] out = new char[widths[UUID_BITS]];
        for (int i = out.length - 1; i >= 0; i--) {
            BigInteger[] qr = v.divideAndRemainder(b);
            out[i] = alphabet.charAt(qr[1].intValue());
            v = qr[0];
        }
        return new String(out);
    }

    /**
     * The ID a string of 63 bits' width encodes (the default layout, a dense ID).
     *
     * @param s the string
     * @return the ID
     * @throws IdEncodingException for a bad character, a wrong width or a value of 2^63 or more
     */
    public long decode(String s) {
        return decode(s, 63);
    }

    /**
     * The ID a string encodes, of a layout of {@code bits} bits.
     *
     * @param s the string, exactly {@link #width(int)} characters
     * @param bits 1 to 63
     * @return the ID
     * @throws IdEncodingException for a bad character, a wrong width or a value of 2^bits or more
     */
    public long decode(String s, int bits) {
        checkIdBits(bits);
        check(s, bits, "an ID of " + bits + " bits");
        long v = 0;
        long limit = bits == 63 ? Long.MAX_VALUE : (1L << bits) - 1;
        for (int i = 0; i < s.length(); i++) {
            int d = digits[s.charAt(i)];
            if (v > (limit - d) / base) {
                throw tooLarge(s, bits, "an ID of " + bits + " bits");
            }
            v = v * base + d;
        }
        return v;
    }

    /**
     * The UUID a string encodes.
     *
     * @param s the string, exactly {@link #width(int) width(128)} characters
     * @return the UUID
     * @throws IdEncodingException for a bad character, a wrong width or a value of 2^128 or more
     */
    public UUID decodeUuid(String s) {
        check(s, UUID_BITS, "a UUID");
        BigInteger v = BigInteger.ZERO;
        BigInteger b = BigInteger.valueOf(base);
        for (int i = 0; i < s.length(); i++) {
            v = v.multiply(b).add(BigInteger.valueOf(digits[s.charAt(i)]));
        }
        if (v.bitLength() > UUID_BITS) {
            throw tooLarge(s, UUID_BITS, "a UUID");
        }
        return new UUID(v.shiftRight(64).longValue(), v.longValue());
    }

    private static void checkIdBits(int bits) {
        if (bits < 1 || bits > 63) {
            throw new IllegalArgumentException("bits " + bits + ": want 1..63");
        }
    }

    /** Characters first (they say more than the width), then the width. */
    private void check(String s, int bits, String what) {
        if (s == null) {
            throw new NullPointerException("s");
        }
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c >= 128 || digits[c] < 0) {
                int cp = s.codePointAt(i);
                throw new IdEncodingException(IdEncodingException.Kind.CHARACTER, this, i, wireName + " " + quote(s) + ": '"
                        + new String(Character.toChars(cp)) + "' at position " + (i + 1) + " is not a " + wireName + " digit");
            }
        }
        int w = widths[bits];
        if (s.length() != w) {
            throw new IdEncodingException(IdEncodingException.Kind.WIDTH, this, -1,
                    wireName + " " + quote(s) + " has " + s.length() + " characters, want " + w + " for " + what);
        }
    }

    private IdEncodingException tooLarge(String s, int bits, String what) {
        return new IdEncodingException(IdEncodingException.Kind.RANGE, this, -1,
                wireName + " " + quote(s) + " is 2^" + bits + " or more: not " + what);
    }

    private static String quote(String s) {
        return s.length() > 40 ? '"' + s.substring(0, 40) + "\"…" : '"' + s + '"';
    }

    private static byte[] bytes(UUID u) {
        byte[] b = new byte[16];
        long hi = u.getMostSignificantBits();
        long lo = u.getLeastSignificantBits();
        for (int i = 0; i < 8; i++) {
            b[i] = (byte) (hi >>> (56 - 8 * i));
            b[8 + i] = (byte) (lo >>> (56 - 8 * i));
        }
        return b;
    }
}
