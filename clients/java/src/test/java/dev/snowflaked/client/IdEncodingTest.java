package dev.snowflaked.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.UUID;
import org.junit.jupiter.api.Test;

class IdEncodingTest {
    private static final String U = "019abc12-3456-7def-8123-456789abcdef";
    private static final long MAX53 = (1L << 53) - 1;

    private static final IdEncoding B62 = IdEncoding.BASE62;
    private static final IdEncoding B58 = IdEncoding.BASE58;
    private static final IdEncoding B36 = IdEncoding.BASE36;
    private static final IdEncoding B32 = IdEncoding.BASE32;

    /** Computed once with Python's int arithmetic (the same literals are in the Python and TypeScript clients' tests). */
    private static final Object[][] VECTORS = {
        {0L, 63, B62, "00000000000"}, {1L, 63, B62, "00000000001"}, {Long.MAX_VALUE, 63, B62, "AzL8n0Y58m7"},
        {MAX53, 63, B62, "00fFgnDxSe7"}, {MAX53, 53, B62, "fFgnDxSe7"},
        {0L, 63, B58, "11111111111"}, {1L, 63, B58, "11111111112"}, {Long.MAX_VALUE, 63, B58, "NQm6nKp8qFC"},
        {MAX53, 63, B58, "12DLNrMSKug"}, {MAX53, 53, B58, "2DLNrMSKug"},
        {0L, 63, B36, "0000000000000"}, {1L, 63, B36, "0000000000001"}, {Long.MAX_VALUE, 63, B36, "1y2p0ij32e8e7"},
        {MAX53, 63, B36, "002gosa7pa2gv"}, {MAX53, 53, B36, "2gosa7pa2gv"},
        {0L, 63, B32, "0000000000000"}, {1L, 63, B32, "0000000000001"}, {Long.MAX_VALUE, 63, B32, "7ZZZZZZZZZZZZ"},
        {MAX53, 63, B32, "007ZZZZZZZZZZ"}, {MAX53, 53, B32, "7ZZZZZZZZZZ"},
    };
    private static final Object[][] UUID_VECTORS = {
        {B62, "031hmrl3sC1oTeZjz9D9EV"}, {B58, "1CVV1KiMCivT7E6Ego3omp"},
        {B36, "03f3ogm1xwf5ylz1jz1p0clwv"}, {B32, "01KAY14D2PFQQR28T5CY4TQKFF"},
    };

    /** The encoding from first principles with BigInteger: big-endian digits, padded to the fewest that hold 2^bits. */
    private static String reference(BigInteger v, IdEncoding e, int bits) {
        BigInteger base = BigInteger.valueOf(e.alphabet().length());
        int w = 0;
        for (BigInteger p = BigInteger.ONE; p.compareTo(BigInteger.ONE.shiftLeft(bits)) < 0; p = p.multiply(base)) {
            w++;
        }
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < w; i++) {
            BigInteger[] qr = v.divideAndRemainder(base);
            b.insert(0, e.alphabet().charAt(qr[1].intValue()));
            v = qr[0];
        }
        return b.toString();
    }

    private static BigInteger big(UUID u) {
        return new BigInteger(1, new BigInteger(1, longBytes(u.getMostSignificantBits())).shiftLeft(64)
                .or(new BigInteger(1, longBytes(u.getLeastSignificantBits()))).toByteArray());
    }

    private static byte[] longBytes(long v) {
        byte[] b = new byte[8];
        for (int i = 0; i < 8; i++) {
            b[i] = (byte) (v >>> (56 - 8 * i));
        }
        return b;
    }

    private static IdEncodingException fails(IdEncodingException.Kind kind, Runnable r) {
        IdEncodingException e = assertThrows(IdEncodingException.class, r::run);
        assertEquals(kind, e.kind(), e.getMessage());
        return e;
    }

    @Test
    void widths() {
        int[][] want = {{63, 11, 11, 13, 13}, {53, 9, 10, 11, 11}, {128, 22, 22, 25, 26}};
        for (int[] w : want) {
            assertEquals(w[1], B62.width(w[0]));
            assertEquals(w[2], B58.width(w[0]));
            assertEquals(w[3], B36.width(w[0]));
            assertEquals(w[4], B32.width(w[0]));
        }
        assertEquals(63, Layout.DEFAULT.idBits());
        assertEquals("base62", B62.wireName());
        assertEquals(B32, IdEncoding.of("base32"));
        fails(IdEncodingException.Kind.ENCODING, () -> IdEncoding.of("base64"));
        fails(IdEncodingException.Kind.ENCODING, () -> IdEncoding.of("BASE62"));
    }

    @Test
    void idVectors() {
        for (Object[] v : VECTORS) {
            long id = (Long) v[0];
            int bits = (Integer) v[1];
            IdEncoding e = (IdEncoding) v[2];
            String s = (String) v[3];
            assertEquals(s, reference(BigInteger.valueOf(id), e, bits), Arrays.toString(v));
            assertEquals(s, e.encode(id, bits));
            assertEquals(id, e.decode(s, bits));
            if (bits == 63) {
                assertEquals(s, e.encode(id));
                assertEquals(id, e.decode(s));
            }
        }
    }

    @Test
    void uuidVectors() {
        UUID u = UUID.fromString(U);
        for (Object[] v : UUID_VECTORS) {
            IdEncoding e = (IdEncoding) v[0];
            String s = (String) v[1];
            assertEquals(s, reference(big(u), e, 128));
            assertEquals(s, e.encode(u));
            assertEquals(u, e.decodeUuid(s));
            assertEquals(new UUID(0, 0), e.decodeUuid(reference(BigInteger.ZERO, e, 128)));
            assertEquals(new UUID(-1, -1), e.decodeUuid(reference(BigInteger.ONE.shiftLeft(128).subtract(BigInteger.ONE), e, 128)));
        }
    }

    @Test
    void caseRules() {
        assertEquals(Long.MAX_VALUE, B36.decode("1Y2P0IJ32E8E7"));
        assertEquals(Long.MAX_VALUE, B32.decode("7zzzzzzzzzzzz"));
        assertEquals(1, B32.decode("OoOoOoOoOoOoI")); // Crockford: O as 0, I as 1
        for (String one : new String[] {"l", "L", "i"}) {
            assertEquals(1, B32.decode("000000000000" + one));
        }
        assertEquals(36, B62.decode("0000000000a"));
        assertEquals(10, B62.decode("0000000000A"));
    }

    @Test
    void errors() {
        for (IdEncoding e : IdEncoding.values()) {
            int w = e.width(63);
            fails(IdEncodingException.Kind.WIDTH, () -> e.decode("1".repeat(w - 1)));
            fails(IdEncodingException.Kind.WIDTH, () -> e.decode("1".repeat(w + 1)));
            fails(IdEncodingException.Kind.WIDTH, () -> e.decode(""));
            fails(IdEncodingException.Kind.WIDTH, () -> e.decodeUuid("1".repeat(w)));
        }
        assertTrue(fails(IdEncodingException.Kind.WIDTH, () -> B62.decode("0000000000")).getMessage().contains("11"));
        Object[][] bad = {{B62, "-"}, {B58, "0"}, {B58, "O"}, {B58, "I"}, {B58, "l"}, {B36, "_"}, {B32, "U"}, {B32, "u"}};
        for (Object[] b : bad) {
            IdEncoding e = (IdEncoding) b[0];
            String s = "1".repeat(e.width(63) - 2) + b[1] + "1";
            IdEncodingException x = fails(IdEncodingException.Kind.CHARACTER, () -> e.decode(s));
            assertEquals(s.length() - 2, x.index());
            assertTrue(x.getMessage().contains("'" + b[1] + "'"), x.getMessage());
        }
        fails(IdEncodingException.Kind.CHARACTER, () -> B62.decode("0000000000é"));
        fails(IdEncodingException.Kind.CHARACTER, () -> B62.decode("-"));
        fails(IdEncodingException.Kind.CHARACTER, () -> B36.decodeUuid("0".repeat(30) + "!"));
        fails(IdEncodingException.Kind.RANGE, () -> B62.decode("zzzzzzzzzzz"));
        fails(IdEncodingException.Kind.RANGE, () -> B32.decode("8000000000000"));
        fails(IdEncodingException.Kind.RANGE, () -> B36.decode("1y2p0ij32e8e8"));
        fails(IdEncodingException.Kind.RANGE, () -> B58.decode("NQm6nKp8qFD"));
        fails(IdEncodingException.Kind.RANGE, () -> B32.decode("80000000000", 53));
        fails(IdEncodingException.Kind.RANGE, () -> B62.decodeUuid("zzzzzzzzzzzzzzzzzzzzzz"));
        fails(IdEncodingException.Kind.RANGE, () -> B62.encode(-1));
        fails(IdEncodingException.Kind.RANGE, () -> B36.encode(1L << 53, 53));
        assertThrows(IllegalArgumentException.class, () -> B62.encode(1, 64));
        assertThrows(IllegalArgumentException.class, () -> B62.encode(1, 0));
    }

    @Test
    void tenThousandRandomValuesRoundTripAndSortAsNumbers() {
        Random r = new Random(46);
        for (int bits : new int[] {63, 53}) {
            for (IdEncoding e : IdEncoding.values()) {
                List<Long> vals = new ArrayList<>(List.of(0L, bits == 63 ? Long.MAX_VALUE : (1L << bits) - 1));
                for (int i = 0; i < 10_000; i++) {
                    int size = new int[] {bits, bits, 8, 32}[i % 4];
                    vals.add(r.nextLong() >>> (64 - size));
                }
                List<String> strs = new ArrayList<>();
                for (long v : vals) {
                    String s = e.encode(v, bits);
                    assertEquals(e.width(bits), s.length());
                    assertEquals(v, e.decode(s, bits));
                    strs.add(s);
                }
                List<String> byString = new ArrayList<>(strs);
                byString.sort(null);
                List<Long> sorted = new ArrayList<>(vals);
                sorted.sort(null);
                List<String> byNumber = new ArrayList<>();
                for (long v : sorted) {
                    byNumber.add(e.encode(v, bits));
                }
                assertEquals(byNumber, byString, bits + " " + e);
            }
        }
        for (IdEncoding e : IdEncoding.values()) {
            List<UUID> vals = new ArrayList<>(List.of(new UUID(0, 0), new UUID(-1, -1)));
            for (int i = 0; i < 10_000; i++) {
                vals.add(i % 2 == 0 ? new UUID(r.nextLong(), r.nextLong()) : new UUID(0, r.nextLong() >>> 1));
            }
            List<String> strs = new ArrayList<>();
            for (UUID u : vals) {
                String s = e.encode(u);
                assertEquals(e.width(128), s.length());
                assertEquals(u, e.decodeUuid(s));
                strs.add(s);
            }
            List<String> byString = new ArrayList<>(strs);
            byString.sort(null);
            List<UUID> sorted = new ArrayList<>(vals);
            sorted.sort((a, b) -> big(a).compareTo(big(b)));
            List<String> byNumber = new ArrayList<>();
            for (UUID u : sorted) {
                byNumber.add(e.encode(u));
            }
            assertEquals(byNumber, byString, "uuid " + e);
        }
    }
}
