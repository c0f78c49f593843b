"""Tests of Client.bounds and Client.next_segment_text against fake nodes."""

from __future__ import annotations

import json
import logging
import unittest
import uuid
from datetime import datetime, timedelta, timezone

from snowflaked import Bounds, NoNodeError, RejectedError

from .fakenode import error_reply
from .test_client import Base

logging.getLogger("snowflaked").setLevel(logging.ERROR)

BOUNDS = {
    "from": "2026-01-01T00:00:00.000Z",
    "to": "2026-01-02T00:00:00.000Z",
    "from_ms": 1767225600000,
    "to_ms": 1767312000000,
    "min_id": "265945513574400000",
    "max_id": "266307891363839999",
    "min_uuid": "019b7662-4800-7000-8000-000000000000",
    "max_uuid": "019b7b88-a3ff-7fff-bfff-ffffffffffff",
}


def bounds_reply(doc: dict = BOUNDS):  # type: ignore[no-untyped-def]
    return 200, [("Content-Type", "application/json")], json.dumps(doc).encode()


class TestBounds(Base):
    def test_bounds(self) -> None:
        a = self.node()
        a.handler = lambda p, q, h: bounds_reply() if p == "/bounds" else None
        c = self.client(nodes=[a.addr])
        f = datetime(2026, 1, 1, tzinfo=timezone.utc)
        b = c.bounds(f, f + timedelta(days=1))
        self.assertIsInstance(b, Bounds)
        self.assertEqual(b.min_id, 265945513574400000)
        self.assertEqual(b.max_id, 266307891363839999)
        self.assertEqual(b.from_, f)
        self.assertEqual(b.to, f + timedelta(days=1))
        self.assertEqual((b.from_ms, b.to_ms), (1767225600000, 1767312000000))
        self.assertEqual(b.min_uuid, uuid.UUID(BOUNDS["min_uuid"]))
        self.assertEqual(b.max_uuid, uuid.UUID(BOUNDS["max_uuid"]))
        path, q, _ = a.requests[-1]
        self.assertEqual((path, q), ("/bounds", {"from": "1767225600000", "to": "1767312000000"}))
        # Milliseconds as they are; a datetime's fraction floored to the millisecond.
        c.bounds(5, 6)
        self.assertEqual(a.requests[-1][1], {"from": "5", "to": "6"})
        c.bounds(f + timedelta(microseconds=1999), datetime(2026, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))))
        self.assertEqual(a.requests[-1][1], {"from": "1767225600001", "to": "1767225600000"})

    def test_without_uuids(self) -> None:
        a = self.node()
        doc = {k: v for k, v in BOUNDS.items() if "uuid" not in k}
        a.handler = lambda p, q, h: bounds_reply(doc)
        b = self.client(nodes=[a.addr]).bounds(1, 2)
        self.assertIsNone(b.min_uuid)
        self.assertIsNone(b.max_uuid)

    def test_invalid_range_is_rejected_without_retry(self) -> None:
        a, b = self.node(1), self.node(2)
        for n in (a, b):
            n.handler = lambda p, q, h: error_reply(400, "invalid_range", "from is after to (reversed)")
        c = self.client(nodes=[a.addr, b.addr])
        with self.assertRaises(RejectedError) as cm:
            c.bounds(10, 5)
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "invalid_range"))
        self.assertIn("reversed", cm.exception.message)
        self.assertEqual(len(a.requests) + len(b.requests), 1)

    def test_fails_over(self) -> None:
        a, b = self.node(1), self.node(2)
        a.handler = lambda p, q, h: error_reply(503, "out_of_service")
        b.handler = lambda p, q, h: bounds_reply()
        c = self.client(nodes=[a.addr, b.addr])
        for _ in range(2):
            self.assertEqual(c.bounds(1, 2).min_id, 265945513574400000)
        self.assertEqual(len(a.requests), 1)

    def test_bad_answers_fail_over(self) -> None:
        for bad in (b"[]", b"{", b'{"from_ms":1}', json.dumps({**BOUNDS, "min_id": 5}).encode(), json.dumps({**BOUNDS, "max_uuid": "x"}).encode()):
            with self.subTest(bad=bad):
                a, b = self.node(1), self.node(2)
                a.handler = lambda p, q, h, r=bad: (200, [], r)
                b.handler = lambda p, q, h: bounds_reply()
                c = self.client(nodes=[a.addr, b.addr])
                self.assertEqual(c.bounds(1, 2).max_id, 266307891363839999)
        a = self.node(3)
        a.handler = lambda p, q, h: (200, [], b"nope")
        with self.assertRaises(NoNodeError):
            self.client(nodes=[a.addr]).bounds(1, 2)

    def test_refused_before_asking(self) -> None:
        a = self.node()
        c = self.client(nodes=[a.addr])
        with self.assertRaises(RejectedError) as cm:
            c.bounds(datetime(2026, 1, 1), 5)
        self.assertEqual((cm.exception.status, cm.exception.code), (0, "invalid_range"))
        with self.assertRaises(TypeError):
            c.bounds("2026-01-01", 5)  # type: ignore[arg-type]
        self.assertEqual(a.requests, [])


class TestSegmentText(Base):
    def test_text_lines(self) -> None:
        a = self.node()
        lines = ["ORD-20261207-000123", "ORD-20261207-000124", "ORD-20261207-000125"]
        a.handler = lambda p, q, h: (200, [], "".join(x + "\n" for x in lines[: int(q["count"])]).encode())
        c = self.client(nodes=[a.addr], tag_tokens={"orders": "tok-orders"})
        self.assertEqual(c.next_segment_text("orders", 3), lines)
        self.assertEqual(c.next_segment_text("orders"), lines[:1])
        path, q, h = a.requests[0]
        self.assertEqual((path, q, h["authorization"]), ("/segment/orders", {"count": "3"}, "Bearer tok-orders"))

    def test_format(self) -> None:
        a = self.node()
        a.handler = lambda p, q, h: (200, [], b"00000000001\n00000000002\n")
        c = self.client(nodes=[a.addr])
        self.assertEqual(c.next_segment_text("plain", 2, format="base62"), ["00000000001", "00000000002"])
        self.assertEqual(a.requests[-1][1], {"count": "2", "format": "base62"})
        c.next_segment_text("plain", 2, format="text")
        self.assertEqual(a.requests[-1][1], {"count": "2"})
        with self.assertRaises(RejectedError) as cm:
            c.next_segment_text("plain", 2, format="base64")
        self.assertEqual((cm.exception.status, cm.exception.code), (0, "invalid_format"))
        with self.assertRaises(RejectedError) as cm:
            c.next_segment_text("plain", 0)
        self.assertEqual(cm.exception.code, "invalid_count")
        with self.assertRaises(RejectedError) as cm:
            c.next_segment_text("a/b", 1)
        self.assertEqual(cm.exception.code, "invalid_tag")
        self.assertEqual(len(a.requests), 2)

    def test_reset_tag_refuses_base62(self) -> None:
        a = self.node()
        a.handler = lambda p, q, h: error_reply(400, "invalid_format", "tag orders is a reset tag: its IDs are text, not numbers")
        with self.assertRaises(RejectedError) as cm:
            self.client(nodes=[a.addr]).next_segment_text("orders", 1, format="base36")
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "invalid_format"))

    def test_bad_text_answers_fail_over(self) -> None:
        for bad in (b"a\n", b"a\na\n", b"a b\nc\n", b"\n\n", b"x" * 200 + b"\ny\n", b"a\nb\nc\n"):
            with self.subTest(bad=bad):
                a, b = self.node(1), self.node(2)
                a.handler = lambda p, q, h, r=bad: (200, [], r)
                b.handler = lambda p, q, h: (200, [], b"X-1\nX-2\n")
                c = self.client(nodes=[a.addr, b.addr])
                self.assertEqual(c.next_segment_text("t", 2), ["X-1", "X-2"])
                self.assertEqual(len(a.requests), 1)

    def test_clamped_parts_keep_the_nodes_order(self) -> None:
        a = self.node()
        counter = iter(range(1000))

        def h(p, q, hd):  # type: ignore[no-untyped-def]
            n = int(q["count"])
            if n > 2:
                return error_reply(400, "invalid_count", "too many", max=2)
            return 200, [], "".join(f"Z{100 - next(counter)}\n" for _ in range(n)).encode()

        a.handler = h
        self.assertEqual(self.client(nodes=[a.addr]).next_segment_text("t", 5), ["Z100", "Z99", "Z98", "Z97", "Z96"])

    def test_int_call_on_text_ids_is_rejected(self) -> None:
        a, b = self.node(1), self.node(2)
        for n in (a, b):
            n.handler = lambda p, q, h: (200, [], b"ORD-20261207-000123\n")
        c = self.client(nodes=[a.addr, b.addr])
        with self.assertRaises(RejectedError) as cm:
            c.next_segment("orders")
        e = cm.exception
        self.assertEqual((e.status, e.code), (200, ""))
        self.assertIn("ORD-20261207-000123", e.message)
        self.assertIn("next_segment_text", e.message)
        self.assertEqual(len(a.requests) + len(b.requests), 1)  # no failover: every node answers so
        # A number beyond 63 bits is no ID either; a reset tag's number that fits is one.
        a.handler = b.handler = lambda p, q, h: (200, [], b"20261207000000000000123\n")
        with self.assertRaises(RejectedError):
            c.next_segment("orders")
        a.handler = b.handler = lambda p, q, h: (200, [], b"20261207000123\n")
        self.assertEqual(c.next_segment("orders2"), 20261207000123)

    def test_int_call_on_garbage_still_fails_over(self) -> None:
        a, b = self.node(1), self.node(2)
        a.handler = lambda p, q, h: (200, [], b"x\ny\n")  # 2 lines for 1 asked: not an answer
        c = self.client(nodes=[a.addr, b.addr])
        self.assertIsInstance(c.next_segment("t"), int)
        self.assertEqual(len(b.requests), 1)


if __name__ == "__main__":
    unittest.main()
