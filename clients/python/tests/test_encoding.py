"""Tests of snowflaked.encoding: the string IDs of format=base62 and the rest."""

from __future__ import annotations

import random
import unittest
import uuid

from snowflaked import ENCODINGS, EncodingError, Layout, decode_id, decode_uuid, encode_id, encode_uuid, encoded_width

ALPHABETS = {
    "base62": "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "base58": "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz",
    "base36": "0123456789abcdefghijklmnopqrstuvwxyz",
    "base32": "0123456789ABCDEFGHJKMNPQRSTVWXYZ",
}

U = "019abc12-3456-7def-8123-456789abcdef"

# Computed once with Python's int arithmetic (the same literals are in the
# Java and TypeScript clients' tests): value, bits, encoding, string.
VECTORS = [
    (0, 63, "base62", "00000000000"),
    (1, 63, "base62", "00000000001"),
    (2**63 - 1, 63, "base62", "AzL8n0Y58m7"),
    (2**53 - 1, 63, "base62", "00fFgnDxSe7"),
    (2**53 - 1, 53, "base62", "fFgnDxSe7"),
    (0, 63, "base58", "11111111111"),
    (1, 63, "base58", "11111111112"),
    (2**63 - 1, 63, "base58", "NQm6nKp8qFC"),
    (2**53 - 1, 63, "base58", "12DLNrMSKug"),
    (2**53 - 1, 53, "base58", "2DLNrMSKug"),
    (0, 63, "base36", "0000000000000"),
    (1, 63, "base36", "0000000000001"),
    (2**63 - 1, 63, "base36", "1y2p0ij32e8e7"),
    (2**53 - 1, 63, "base36", "002gosa7pa2gv"),
    (2**53 - 1, 53, "base36", "2gosa7pa2gv"),
    (0, 63, "base32", "0000000000000"),
    (1, 63, "base32", "0000000000001"),
    (2**63 - 1, 63, "base32", "7ZZZZZZZZZZZZ"),
    (2**53 - 1, 63, "base32", "007ZZZZZZZZZZ"),
    (2**53 - 1, 53, "base32", "7ZZZZZZZZZZ"),
]
UUID_VECTORS = {
    "base62": "031hmrl3sC1oTeZjz9D9EV",
    "base58": "1CVV1KiMCivT7E6Ego3omp",
    "base36": "03f3ogm1xwf5ylz1jz1p0clwv",
    "base32": "01KAY14D2PFQQR28T5CY4TQKFF",
}


def reference(v: int, enc: str, bits: int) -> str:
    """The encoding from first principles: big-endian digits of v, padded to
    the fewest digits that hold 2^bits."""
    a = ALPHABETS[enc]
    w = 0
    while len(a) ** w < 2**bits:
        w += 1
    out = ""
    for _ in range(w):
        v, r = divmod(v, len(a))
        out = a[r] + out
    return out


class TestVectors(unittest.TestCase):
    def test_widths(self) -> None:
        want = {63: (11, 11, 13, 13), 53: (9, 10, 11, 11), 128: (22, 22, 25, 26)}
        for bits, ws in want.items():
            self.assertEqual(tuple(encoded_width(e, bits) for e in ("base62", "base58", "base36", "base32")), ws, bits)
        self.assertEqual(encoded_width("base62"), 11)
        self.assertEqual(Layout().id_bits, 63)
        self.assertEqual(Layout(time_bits=41, worker_bits=5, sequence_bits=7).id_bits, 53)

    def test_id_vectors(self) -> None:
        for v, bits, enc, s in VECTORS:
            with self.subTest(v=v, bits=bits, enc=enc):
                self.assertEqual(reference(v, enc, bits), s)
                self.assertEqual(encode_id(v, enc, bits), s)
                self.assertEqual(decode_id(s, enc, bits), v)

    def test_uuid_vectors(self) -> None:
        u = uuid.UUID(U)
        for enc, s in UUID_VECTORS.items():
            with self.subTest(enc=enc):
                self.assertEqual(reference(u.int, enc, 128), s)
                self.assertEqual(encode_uuid(u, enc), s)
                self.assertEqual(encode_uuid(U, enc), s)
                self.assertEqual(decode_uuid(s, enc), u)
                self.assertEqual(decode_uuid(reference(0, enc, 128), enc), uuid.UUID(int=0))
                self.assertEqual(decode_uuid(reference(2**128 - 1, enc, 128), enc), uuid.UUID(int=2**128 - 1))

    def test_case_rules(self) -> None:
        self.assertEqual(decode_id("1Y2P0IJ32E8E7", "base36"), 2**63 - 1)
        self.assertEqual(decode_id("7zzzzzzzzzzzz", "base32"), 2**63 - 1)
        # Crockford: I, i, L, l read as 1; O, o as 0.
        self.assertEqual(decode_id("OoOoOoOoOoOoI", "base32"), 1)
        self.assertEqual(decode_id("000000000000l", "base32"), 1)
        self.assertEqual(decode_id("000000000000L", "base32"), 1)
        self.assertEqual(decode_id("000000000000i", "base32"), 1)
        # base62 and base58 are case-sensitive: 'a' is 36 in base62.
        self.assertEqual(decode_id("0000000000a", "base62"), 36)
        self.assertEqual(decode_id("0000000000A", "base62"), 10)


class TestErrors(unittest.TestCase):
    def check(self, kind: str, f, *args) -> EncodingError:  # type: ignore[no-untyped-def]
        with self.assertRaises(EncodingError) as cm:
            f(*args)
        self.assertEqual(cm.exception.kind, kind, str(cm.exception))
        self.assertIsInstance(cm.exception, ValueError)
        return cm.exception

    def test_width(self) -> None:
        for enc in ENCODINGS:
            w = encoded_width(enc)
            self.check("width", decode_id, "1" * (w - 1), enc)
            self.check("width", decode_id, "1" * (w + 1), enc)
            self.check("width", decode_id, "", enc)
            self.check("width", decode_uuid, "1" * w, enc)
        e = self.check("width", decode_id, "0000000000", "base62")
        self.assertIn("11", str(e))

    def test_bad_character(self) -> None:
        for enc, bad in (("base62", "-"), ("base58", "0"), ("base58", "O"), ("base58", "I"), ("base58", "l"), ("base36", "_"), ("base32", "U"), ("base32", "u")):
            s = "1" * (encoded_width(enc) - 2) + bad + "1"
            e = self.check("character", decode_id, s, enc)
            self.assertEqual(e.index, len(s) - 2)
            self.assertIn(repr(bad), str(e))
        self.check("character", decode_id, "0000000000é", "base62")
        # The character first, whatever the width.
        self.check("character", decode_id, "-", "base62")
        self.check("character", decode_uuid, "0" * 30 + "!", "base36")

    def test_value_too_large(self) -> None:
        self.check("range", decode_id, "zzzzzzzzzzz", "base62")
        self.check("range", decode_id, "8000000000000", "base32")
        self.check("range", decode_id, "1y2p0ij32e8e8", "base36")
        self.check("range", decode_id, "NQm6nKp8qFD", "base58")
        # 2^53 in 53 bits: the width holds it, the layout does not.
        self.check("range", decode_id, "80000000000", "base32", 53)
        self.check("range", decode_uuid, "zzzzzzzzzzzzzzzzzzzzzz", "base62")
        self.check("range", encode_id, 2**63, "base62")
        self.check("range", encode_id, -1, "base62")
        self.check("range", encode_id, 2**53, "base36", 53)

    def test_unknown_encoding(self) -> None:
        self.check("encoding", encode_id, 1, "base64")
        self.check("encoding", decode_id, "1", "BASE62")
        with self.assertRaises(ValueError):
            encode_id(1, "base62", 0)
        with self.assertRaises(TypeError):
            encode_id(True, "base62")


class TestProperties(unittest.TestCase):
    def test_round_trip_and_order(self) -> None:
        rnd = random.Random(46)
        for bits in (63, 53, 128):
            for enc in ENCODINGS:
                vals = [rnd.getrandbits(rnd.choice((bits, bits, 8, 32)) if bits > 32 else bits) for _ in range(10_000)]
                vals += [0, 2**bits - 1]
                enc_f = (lambda v: encode_uuid(uuid.UUID(int=v), enc)) if bits == 128 else (lambda v: encode_id(v, enc, bits))
                dec_f = (lambda s: decode_uuid(s, enc).int) if bits == 128 else (lambda s: decode_id(s, enc, bits))
                strs = [enc_f(v) for v in vals]
                w = encoded_width(enc, bits)
                for v, s in zip(vals, strs):
                    self.assertEqual(len(s), w)
                    self.assertEqual(dec_f(s), v)
                # Byte-wise string order is numeric order.
                self.assertEqual(sorted(strs), [enc_f(v) for v in sorted(vals)], (bits, enc))
                if enc in ("base36", "base32"):
                    for s in strs[:200]:
                        self.assertEqual(dec_f(s.swapcase()), dec_f(s))


if __name__ == "__main__":
    unittest.main()
