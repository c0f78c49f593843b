"""Tests of snowflaked.Client against fake nodes on 127.0.0.1."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest
import uuid
from datetime import datetime, timedelta, timezone
from typing import Callable, List

from snowflaked import (
    Client,
    ClosedError,
    DeadlineExceededError,
    InvalidConfigError,
    Layout,
    NoNodeError,
    RejectedError,
    SnowflakedError,
)

from .fakenode import FakeNode, error_reply

# Failovers are logged at WARNING; the tests provoke many.
logging.getLogger("snowflaked").setLevel(logging.ERROR)


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    """Poll cond every 5 ms, failing after timeout: a bounded wait, not a sleep."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def closed_addr() -> str:
    """An address where nothing listens (a port bound then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    addr = f"127.0.0.1:{s.getsockname()[1]}"
    s.close()
    return addr


class Base(unittest.TestCase):
    def node(self, worker: int = 1) -> FakeNode:
        n = FakeNode(worker)
        self.addCleanup(n.close)
        return n

    def client(self, **kw: object) -> Client:
        c = Client(**kw)  # type: ignore[arg-type]
        self.addCleanup(c.close)
        return c


class TestCalls(Base):
    def test_ids_uuid_segment_gene(self) -> None:
        a = self.node()
        c = self.client(nodes=[a.addr])
        i = c.next_id()
        self.assertIsInstance(i, int)
        ids = c.next_ids(5)
        self.assertEqual(len(ids), 5)
        self.assertEqual(ids, sorted(set(ids)))
        self.assertGreater(ids[0], i)
        u = c.next_uuid()
        self.assertIsInstance(u, uuid.UUID)
        self.assertEqual(u.version, 7)
        s = c.next_segment("orders")
        self.assertIsInstance(s, int)
        self.assertEqual(len(c.next_segment("orders", 3)), 3)
        c.next_gene(12345)
        paths = [(p, q) for p, q, _ in a.requests]
        self.assertIn(("/ids", {"count": "1"}), paths)
        self.assertIn(("/uuids", {"count": "1"}), paths)
        self.assertIn(("/segment/orders", {"count": "3"}), paths)
        self.assertIn(("/ids", {"gene": "12345", "count": "1"}), paths)

    def test_client_refusals_before_asking(self) -> None:
        a = self.node()
        c = self.client(nodes=[a.addr])
        for bad in (lambda: c.next_ids(0), lambda: c.next_segment("a/b"), lambda: c.next_gene(-1)):
            with self.assertRaises(RejectedError) as cm:
                bad()
            self.assertEqual(cm.exception.status, 0)
        self.assertEqual(a.requests, [])

    def test_bad_config(self) -> None:
        for kw in ({}, {"nodes": ["a:1"], "bootstrap": ["b:1"]}, {"nodes": ["nohost"]}, {"nodes": ["h:1"], "max_batch": 0}, {"nodes": ["h:1"], "api_token": "has space"}):
            with self.assertRaises(InvalidConfigError):
                Client(**kw)  # type: ignore[arg-type]

    def test_large_call_in_several_batches_sorted(self) -> None:
        a = self.node()
        c = self.client(nodes=[a.addr], max_batch=100)
        ids = c.next_ids(250)
        self.assertEqual(len(ids), 250)
        self.assertEqual(ids, sorted(set(ids)))
        self.assertEqual(a.counts(), [100, 100, 50])


class TestBatching(Base):
    def test_concurrent_callers_share_one_request(self) -> None:
        a = self.node()
        a.gate = threading.Event()
        c = self.client(nodes=[a.addr], max_in_flight=1)
        results: List[List[int]] = []
        errors: List[BaseException] = []
        lock = threading.Lock()

        def call(n: int) -> None:
            try:
                got = c.next_ids(n) if n > 1 else [c.next_id()]
                with lock:
                    results.append(got)
            except BaseException as e:  # reported below
                with lock:
                    errors.append(e)

        first = threading.Thread(target=call, args=(1,))
        first.start()
        wait_for(lambda: len(a.requests) == 1, "the first caller's request")
        others = [threading.Thread(target=call, args=(1 + i % 3,)) for i in range(10)]
        for t in others:
            t.start()
        want = sum(1 + i % 3 for i in range(10))
        wait_for(lambda: c._ids.open is not None and c._ids.open.joined == 10, "ten callers to join the open batch")
        a.gate.set()
        for t in [first] + others:
            t.join(5)
            self.assertFalse(t.is_alive())
        self.assertEqual(errors, [])
        self.assertEqual(a.counts(), [1, want])  # one request for the ten
        flat = [i for r in results for i in r]
        self.assertEqual(len(flat), len(set(flat)))
        for r in results:
            self.assertEqual(r, sorted(r))

    def test_caller_alone_needs_no_other_thread(self) -> None:
        a = self.node()
        c = self.client(nodes=[a.addr])
        for _ in range(20):
            c.next_id()
        self.assertEqual(c._ids.threads, [])  # no worker started: each call made its own request
        self.assertNotIn("snowflaked-batch", [t.name for t in threading.enumerate()])


class TestFailover(Base):
    def test_503_moves_and_leaves_node_for_retry_after(self) -> None:
        a, b = self.node(1), self.node(2)
        a.handler = lambda p, q, h: error_reply(503, "out_of_service", retry_after=5, reason="clock_rollback", state="out_of_service")
        c = self.client(nodes=[a.addr, b.addr])
        for _ in range(6):
            c.next_id()
        self.assertEqual(len(a.requests), 1)
        self.assertEqual(len(b.requests), 6)

    def test_503_batch_timeout_leaves_node_up(self) -> None:
        a, b = self.node(1), self.node(2)
        a.handler = lambda p, q, h: error_reply(503, "batch_timeout", retry_after=5)
        c = self.client(nodes=[a.addr, b.addr])
        for _ in range(4):
            c.next_id()
        # Round-robin comes back to a on every call: it was never left alone.
        self.assertEqual(len(a.requests), 4)
        self.assertEqual(len(b.requests), 4)

    def test_4xx_is_rejected_without_retry(self) -> None:
        a, b = self.node(1), self.node(2)
        for n in (a, b):
            n.handler = lambda p, q, h: error_reply(400, "gene_off", "no gene bits")
        c = self.client(nodes=[a.addr, b.addr])
        with self.assertRaises(RejectedError) as cm:
            c.next_gene(7)
        e = cm.exception
        self.assertEqual((e.status, e.code), (400, "gene_off"))
        self.assertEqual(len(a.requests) + len(b.requests), 1)

    def test_404_unknown_tag_rejected_other_404_fails_over(self) -> None:
        a, b = self.node(1), self.node(2)
        a.handler = b.handler = lambda p, q, h: error_reply(404, "unknown_tag") if "nope" in p else None
        c = self.client(nodes=[a.addr, b.addr])
        with self.assertRaises(RejectedError) as cm:
            c.next_segment("nope")
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "unknown_tag"))
        self.assertEqual(len(a.requests) + len(b.requests), 1)
        a.handler = lambda p, q, h: error_reply(404, "not_found")
        b.handler = None
        for _ in range(3):
            c.next_id()
        self.assertEqual(len(b.requests), 3)

    def test_bad_answers_fail_over(self) -> None:
        replies = [
            (200, [], b"5\n"),  # too few
            (200, [], b"9\n8\n"),  # not increasing
            (200, [], b"x\n"),  # garbage
            (200, [("Content-Length", "100000")], b""),  # longer than 20 bytes an ID
            (200, [("Transfer-Encoding", "chunked")], b"0\r\n\r\n"),  # no Content-Length
        ]
        for reply in replies:
            with self.subTest(reply=reply):
                a, b = self.node(1), self.node(2)
                a.handler = lambda p, q, h, r=reply: r
                c = self.client(nodes=[a.addr, b.addr])
                self.assertEqual(len(c.next_ids(2)), 2)
                self.assertEqual(len(a.requests), 1)
                self.assertEqual(len(b.requests), 1)

    def test_idle_connection_closed_by_node_is_replaced(self) -> None:
        a = self.node()
        a.drop_idle = True
        c = self.client(nodes=[a.addr])
        for _ in range(5):
            c.next_id(timeout=2)  # each reuses a dead connection, then dials anew
        self.assertEqual(len(a.requests), 5)  # never marked down, never failed

    def test_down_per_kind_of_id(self) -> None:
        a, b = self.node(1), self.node(2)
        a.handler = lambda p, q, h: error_reply(503, "out_of_service", retry_after=5) if p == "/ids" else None
        c = self.client(nodes=[a.addr, b.addr])
        c.next_id()  # a fails, b serves; a is down for snowflake IDs
        for _ in range(4):
            c.next_segment("orders")
        self.assertEqual(len([1 for p, _, _ in a.requests if p.startswith("/segment/")]), 2)  # still up for dense IDs

    def test_no_node(self) -> None:
        addrs = [closed_addr(), closed_addr(), closed_addr(), closed_addr()]
        c = self.client(nodes=addrs)
        with self.assertRaises(NoNodeError) as cm:
            c.next_id(timeout=2)
        e = cm.exception
        self.assertEqual(len([x for x in e.causes if getattr(x, "node", "") in addrs]), 3)  # at most 3 nodes
        self.assertEqual(len(e.not_tried), 1)
        self.assertIsInstance(e, SnowflakedError)

    def test_clamping_to_max(self) -> None:
        a = self.node()
        a.handler = lambda p, q, h: error_reply(400, "invalid_count", max=100) if int(q.get("count", "1")) > 100 else None
        c = self.client(nodes=[a.addr])
        ids = c.next_ids(250)
        self.assertEqual(len(ids), 250)
        self.assertEqual(ids, sorted(set(ids)))
        self.assertEqual(a.counts(), [250, 100, 100, 50])
        c.next_ids(250)
        self.assertEqual(a.counts()[4:], [100, 100, 50])  # the limit was kept

    def test_invalid_count_without_smaller_max_is_rejected(self) -> None:
        a = self.node()
        a.handler = lambda p, q, h: error_reply(400, "invalid_count", max=1000)
        c = self.client(nodes=[a.addr])
        with self.assertRaises(RejectedError) as cm:
            c.next_ids(5)
        self.assertEqual((cm.exception.code, cm.exception.max), ("invalid_count", 1000))


class TestSubset(Base):
    def test_talks_to_its_subset_then_beyond(self) -> None:
        ns = [self.node(i) for i in range(4)]
        addrs = [n.addr for n in ns]
        c = self.client(nodes=addrs, subset=2, subset_id=42)
        self.assertEqual(c.nodes, addrs)
        sub = c.subset
        self.assertEqual(len(sub), 2)
        self.assertEqual(sub, [a for a in addrs if a in sub])  # in the list's order
        self.assertEqual(self.client(nodes=list(reversed(addrs)), subset=2, subset_id=42).subset, list(reversed(sub)))
        for _ in range(6):
            c.next_id()
        used = {n.addr for n in ns if n.requests}
        self.assertEqual(used, set(sub))
        for n in ns:
            if n.addr in sub:
                n.handler = lambda p, q, h: error_reply(503, "out_of_service", retry_after=5)
        for _ in range(3):
            c.next_id()
        beyond = [n for n in ns if n.addr not in sub and n.requests]
        self.assertEqual(len(beyond), 1)  # the next node of the ranking, only

    def test_no_node_names_the_subset(self) -> None:
        addrs = [closed_addr() for _ in range(5)]
        c = self.client(nodes=addrs, subset=3, attempts=2)
        with self.assertRaises(NoNodeError) as cm:
            c.next_id(timeout=2)
        self.assertEqual(len(cm.exception.causes), 2)
        self.assertEqual(len(cm.exception.not_tried), 1)  # the subset's third node, not the other two


class TestStall(Base):
    def test_waiting_callers_leave_a_hung_request(self) -> None:
        a, b = self.node(1), self.node(2)
        a.gate = threading.Event()  # a hangs
        c = self.client(nodes=[a.addr, b.addr], request_timeout=5, stall_after=0.05)
        hung = threading.Thread(target=lambda: c.next_id(timeout=10))
        hung.start()
        wait_for(lambda: len(a.requests) == 1, "the request to the hung node")
        got: List[int] = []
        ts = [threading.Thread(target=lambda: got.append(c.next_id(timeout=3))) for _ in range(4)]
        start = time.monotonic()
        for t in ts:
            t.start()
        for t in ts:
            t.join(5)
        self.assertEqual(len(got), 4)
        self.assertLess(time.monotonic() - start, 1.5)  # not the 5 s request timeout
        self.assertTrue(hung.is_alive())  # its caller still waits for a
        self.assertGreaterEqual(len(b.requests), 1)
        a.gate.set()
        hung.join(5)


class TestDeadline(Base):
    def test_hung_node_caller_deadline(self) -> None:
        a = self.node()
        a.gate = threading.Event()
        c = self.client(nodes=[a.addr], request_timeout=5)
        start = time.monotonic()
        with self.assertRaises(DeadlineExceededError) as cm:
            c.next_id(timeout=0.2)
        took = time.monotonic() - start
        self.assertIsInstance(cm.exception, TimeoutError)
        self.assertLess(took, 1.5)
        a.gate.set()
        self.assertIsInstance(c.next_id(timeout=2), int)  # not marked down: the caller's doing

    def test_waiting_caller_deadline(self) -> None:
        a = self.node()
        a.gate = threading.Event()
        c = self.client(nodes=[a.addr], max_in_flight=1, request_timeout=5)
        first: List[int] = []
        t = threading.Thread(target=lambda: first.append(c.next_id(timeout=3)))
        t.start()
        wait_for(lambda: len(a.requests) == 1, "the first request")
        start = time.monotonic()
        with self.assertRaises(TimeoutError):
            c.next_id(timeout=0.1)  # queued behind the hung request
        self.assertLess(time.monotonic() - start, 1.0)
        a.gate.set()
        t.join(5)
        self.assertEqual(len(first), 1)  # the hung request's own caller is served once it answers


class TestClose(Base):
    def test_close_fails_waiting_and_later_calls(self) -> None:
        a = self.node()
        a.gate = threading.Event()
        c = Client(nodes=[a.addr], max_in_flight=1, request_timeout=5)
        errs: List[BaseException] = []

        def call() -> None:
            try:
                c.next_id()
            except BaseException as e:
                errs.append(e)

        ts = [threading.Thread(target=call) for _ in range(3)]
        ts[0].start()
        wait_for(lambda: len(a.requests) == 1, "the first request")
        for t in ts[1:]:
            t.start()
        wait_for(lambda: c._ids.open is not None and c._ids.open.joined == 2, "two callers waiting")
        c.close()
        for t in ts:
            t.join(5)
            self.assertFalse(t.is_alive())
        self.assertEqual(len(errs), 3)
        self.assertTrue(all(isinstance(e, ClosedError) for e in errs), errs)
        with self.assertRaises(ClosedError):
            c.next_id()
        c.close()  # twice is no error

    def test_context_manager(self) -> None:
        a = self.node()
        with Client(nodes=[a.addr]) as c:
            c.next_id()
        self.assertTrue(c.closed)


class TestTokens(Base):
    def test_api_and_tag_tokens(self) -> None:
        a = self.node()
        c = self.client(nodes=[a.addr], api_token="api-secret", tag_tokens={"secret": "tag-secret"})
        c.next_id()
        c.next_uuid()
        c.next_segment("secret")
        c.next_segment("plain")
        auth = {p: h.get("authorization") for p, q, h in a.requests}
        self.assertEqual(auth["/ids"], "Bearer api-secret")
        self.assertEqual(auth["/uuids"], "Bearer api-secret")
        self.assertEqual(auth["/segment/secret"], "Bearer tag-secret")
        self.assertIsNone(auth["/segment/plain"])

    def test_token_refusal(self) -> None:
        a, b = self.node(1), self.node(2)
        a.handler = b.handler = lambda p, q, h: error_reply(401, "token_required")
        c = self.client(nodes=[a.addr, b.addr])
        with self.assertRaises(RejectedError) as cm:
            c.next_id()
        self.assertEqual(cm.exception.code, "token_required")
        self.assertEqual(len(a.requests) + len(b.requests), 1)


class TestBootstrap(Base):
    def test_follows_and_keeps_last_list(self) -> None:
        a, b = self.node(1), self.node(2)
        listing = {"nodes": [a.addr, b.addr], "fail": False}

        def cluster(p: str, q: dict, h: dict):  # type: ignore[no-untyped-def]
            if p != "/cluster/nodes":
                return None
            if listing["fail"]:
                return error_reply(503, "out_of_service")
            import json

            return 200, [], json.dumps({"nodes": [{"worker_id": i, "addr": x} for i, x in enumerate(listing["nodes"])]}).encode()

        a.handler = b.handler = cluster
        c = self.client(bootstrap=[a.addr], bootstrap_interval=0.02)
        self.assertEqual(c.nodes, [a.addr, b.addr])
        listing["fail"] = True

        def polls() -> int:
            return sum(1 for n in (a, b) for p, _, _ in list(n.requests) if p == "/cluster/nodes")

        seen = polls()
        wait_for(lambda: polls() >= seen + 4, "four failed polls")
        self.assertEqual(c.nodes, [a.addr, b.addr])  # the last list stays
        listing["fail"] = False
        listing["nodes"] = [b.addr]
        wait_for(lambda: c.nodes == [b.addr], "the new list")
        c.next_id()
        self.assertEqual(b.counts(), [1])

    def test_close_aborts_a_hung_poll(self) -> None:
        a = self.node()
        hang = threading.Event()
        release = threading.Event()
        self.addCleanup(release.set)

        def cluster(p: str, q: dict, h: dict):  # type: ignore[no-untyped-def]
            if p == "/cluster/nodes" and hang.is_set():
                release.wait(10)
            return None

        a.handler = cluster
        c = Client(bootstrap=[a.addr], bootstrap_interval=0.02, request_timeout=8)
        hang.set()
        polls = len(a.requests)
        wait_for(lambda: len(a.requests) > polls, "a poll to hang")
        start = time.monotonic()
        c.close()
        self.assertLess(time.monotonic() - start, 2.0)

    def test_no_seed_answers(self) -> None:
        with self.assertRaises(NoNodeError) as cm:
            Client(bootstrap=[closed_addr(), closed_addr()], request_timeout=1)
        self.assertEqual(len(cm.exception.causes), 2)


class TestPrefetch(Base):
    def test_next_id_from_buffer(self) -> None:
        a = self.node()
        c = self.client(nodes=[a.addr], prefetch=40)
        wait_for(lambda: sum(a.counts()) >= 40, "the buffer to fill")
        ids = [c.next_id() for _ in range(30)]
        self.assertEqual(len(set(ids)), 30)
        self.assertTrue(all(n == 10 for n in a.counts()), a.counts())


def _openssl() -> bool:
    return shutil.which("openssl") is not None


@unittest.skipUnless(_openssl(), "needs the openssl command to make certificates")
class TestTLS(Base):
    def test_mutual_tls(self) -> None:
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)

        def run(*args: str) -> None:
            subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=test-ca",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        for name in ("server", "client"):
            run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
            with open(os.path.join(d, f"{name}.ext"), "w") as f:
                # What Python 3.13's strict verification asks of a leaf.
                f.write("authorityKeyIdentifier=keyid\nkeyUsage=critical,digitalSignature,keyEncipherment\n")
                f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n" if name == "server" else "extendedKeyUsage=clientAuth\n")
            run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", f"{name}.pem", "-days", "1", "-extfile", f"{name}.ext")
        a = self.node()
        sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        sctx.load_cert_chain(os.path.join(d, "server.pem"), os.path.join(d, "server.key"))
        sctx.load_verify_locations(os.path.join(d, "ca.pem"))
        sctx.verify_mode = ssl.CERT_REQUIRED
        a.server.socket = sctx.wrap_socket(a.server.socket, server_side=True)
        c = self.client(nodes=[a.addr], ca_file=os.path.join(d, "ca.pem"), cert_file=os.path.join(d, "client.pem"), key_file=os.path.join(d, "client.key"))
        self.assertEqual(len(c.next_ids(3)), 3)
        self.assertTrue(a.requests[0][2].get("host"))
        # Without the client certificate the node refuses the handshake.
        c2 = self.client(nodes=[a.addr], ca_file=os.path.join(d, "ca.pem"))
        with self.assertRaises(NoNodeError):
            c2.next_id(timeout=3)


class TestLayout(unittest.TestCase):
    def test_default_layout(self) -> None:
        d = Layout().decode(382690140893499392)  # docs/api.md's example
        self.assertEqual((d.timestamp_ms, d.worker_id, d.sequence, d.gene), (1795307639628, 5, 0, None))
        self.assertEqual(d.time, datetime(2026, 11, 22, 0, 33, 59, 628000, tzinfo=timezone.utc))

    def test_gene_and_unit(self) -> None:
        lay = Layout(time_bits=39, worker_bits=8, sequence_bits=16, gene_bits=4, epoch=datetime(2020, 1, 1, tzinfo=timezone.utc), unit=timedelta(milliseconds=10))
        id_ = (1000 << 24) | (3 << 16) | (77 << 4) | 9
        d = lay.decode(id_)
        self.assertEqual(d.timestamp_ms, 1577836800000 + 10000)
        self.assertEqual((d.worker_id, d.sequence, d.gene), (3, 77, 9))

    def test_out_of_range(self) -> None:
        with self.assertRaises(ValueError):
            Layout().decode(-1)
        with self.assertRaises(ValueError):
            Layout().decode(1 << 63)


if __name__ == "__main__":
    unittest.main()
