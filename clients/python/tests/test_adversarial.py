"""Adversarial tests: hostile or hung peers, races of the batcher."""

from __future__ import annotations

import logging
import socket
import threading
import time
import unittest
from typing import Callable, List

from snowflaked import Client, ClosedError, DeadlineExceededError, NoNodeError

from .fakenode import FakeNode

logging.getLogger("snowflaked").setLevel(logging.ERROR)


class DripNode:
    """A raw TCP peer that answers each request with ``head`` at once, then
    ``body`` one byte every ``every`` seconds (a node that sends slowly)."""

    def __init__(self, head: bytes, body: bytes, every: float) -> None:
        self.head, self.body, self.every = head, body, every
        self.stop = threading.Event()
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(16)
        self.addr = f"127.0.0.1:{self.ls.getsockname()[1]}"
        self.conns: List[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                s, _ = self.ls.accept()
            except OSError:
                return
            self.conns.append(s)
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s: socket.socket) -> None:
        try:
            s.recv(65536)
            s.sendall(self.head)
            for i in range(len(self.body)):
                if self.stop.wait(self.every):
                    return
                s.sendall(self.body[i : i + 1])
        except OSError:
            pass

    def close(self) -> None:
        self.stop.set()
        self.ls.close()
        for s in self.conns:
            s.close()


class Base(unittest.TestCase):
    def node(self, worker: int = 1) -> FakeNode:
        n = FakeNode(worker)
        self.addCleanup(n.close)
        return n

    def drip(self, head: bytes, body: bytes, every: float) -> DripNode:
        d = DripNode(head, body, every)
        self.addCleanup(d.close)
        return d

    def client(self, **kw: object) -> Client:
        c = Client(**kw)  # type: ignore[arg-type]
        self.addCleanup(c.close)
        return c

    def call_in_thread(self, call: Callable[[], object]) -> "tuple[threading.Thread, List[object]]":
        """Starts call on a daemon thread; the list gets its result or its exception."""
        out: List[object] = []

        def run() -> None:
            try:
                out.append(call())
            except Exception as e:
                out.append(e)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t, out


def took(f: Callable[[], object]) -> float:
    start = time.monotonic()
    try:
        f()
    except Exception:
        pass
    return time.monotonic() - start


class TestSlowPeer(Base):
    def test_body_drip_bounded_by_request_timeout(self) -> None:
        # 20 bytes, one every 0.1 s: 2 s in all, each byte well within a 0.3 s recv timeout.
        d = self.drip(b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n", b"1" * 19 + b"\n", 0.1)
        c = self.client(nodes=[d.addr], request_timeout=0.3, attempts=1)
        with self.assertRaises(NoNodeError):
            start = time.monotonic()
            try:
                c.next_id()
            finally:
                self.assertLess(time.monotonic() - start, 1.0)

    def test_body_drip_bounded_by_caller_deadline(self) -> None:
        d = self.drip(b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n", b"1" * 19 + b"\n", 0.1)
        c = self.client(nodes=[d.addr], request_timeout=10, attempts=1)
        self.assertLess(took(lambda: c.next_id(timeout=0.3)), 1.0)
        with self.assertRaises(DeadlineExceededError):
            c.next_id(timeout=0.3)

    def test_header_drip_bounded_by_request_timeout(self) -> None:
        d = self.drip(b"HTTP/1.1 200 OK\r\n", b"X-Slow: " + b"a" * 40 + b"\r\nContent-Length: 0\r\n\r\n", 0.05)
        c = self.client(nodes=[d.addr], request_timeout=0.3, attempts=1)
        self.assertLess(took(lambda: c.next_id()), 1.0)

    def test_bootstrap_drip_bounded_by_request_timeout(self) -> None:
        d = self.drip(b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n", b" " * 40, 0.05)
        start = time.monotonic()
        with self.assertRaises(NoNodeError):
            Client(bootstrap=[d.addr], request_timeout=0.3)
        self.assertLess(time.monotonic() - start, 1.0)


DEEP = b"[" * 5000  # json.loads raises RecursionError, not ValueError


class TestHostileErrorBody(Base):
    def test_deeply_nested_error_body_fails_over(self) -> None:
        a, b = self.node(1), self.node(2)
        a.handler = lambda p, q, h: (503, [], DEEP)
        c = self.client(nodes=[a.addr, b.addr], attempts=2, request_timeout=2)
        for _ in range(2):  # whichever node is picked first
            self.assertIsInstance(c.next_ids(2, timeout=3), list)
        self.assertGreaterEqual(len(a.requests), 1)

    def test_deeply_nested_error_body_does_not_kill_prefetch(self) -> None:
        a = self.node(1)
        a.handler = lambda p, q, h: (503, [], DEEP)
        c = self.client(nodes=[a.addr], prefetch=8, request_timeout=1, down_for=0.01)
        t, out = self.call_in_thread(c.next_id)
        t.join(5)
        self.assertFalse(t.is_alive(), "next_id hung: the prefetch threads died")
        self.assertIsInstance(out[0], NoNodeError)
        a.handler = None
        wait_for = time.monotonic() + 5
        while True:  # the refills go on once the node answers
            try:
                self.assertIsInstance(c.next_id(timeout=2), int)
                break
            except NoNodeError:
                self.assertLess(time.monotonic(), wait_for)

    def test_deeply_nested_node_list(self) -> None:
        a = self.node(1)
        a.handler = lambda p, q, h: (200, [], DEEP)
        with self.assertRaises(NoNodeError):
            Client(bootstrap=[a.addr], request_timeout=1)


class Backlogged:
    """A listener whose accept queue is full: a connect to it hangs (its SYN is dropped)."""

    def __init__(self) -> None:
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(0)
        self.addr = f"127.0.0.1:{self.ls.getsockname()[1]}"
        self.fill: List[socket.socket] = []
        for _ in range(3):
            s = socket.socket()
            s.setblocking(False)
            try:
                s.connect(self.ls.getsockname())
            except BlockingIOError:
                pass
            self.fill.append(s)

    def close(self) -> None:
        for s in self.fill:
            s.close()
        self.ls.close()


class TestCloseDuringDial(Base):
    def test_close_aborts_a_dial_in_progress(self) -> None:
        bl = Backlogged()
        self.addCleanup(bl.close)
        c = Client(nodes=[bl.addr], request_timeout=3, attempts=1)
        self.addCleanup(c.close)
        t, out = self.call_in_thread(c.next_id)
        end = time.monotonic() + 5
        while not any(x.hc.sock is None for x in list(c._pool._open)):  # dialling
            self.assertLess(time.monotonic(), end, "no dial began")
            time.sleep(0.005)
        time.sleep(0.05)  # well into connect()
        start = time.monotonic()
        c.close()
        t.join(5)
        self.assertLess(time.monotonic() - start, 1.0, "close or the call waited for the dial's timeout")
        self.assertIsInstance(out[0], ClosedError)

    def test_close_aborts_a_bootstrap_poll_dialling(self) -> None:
        bl = Backlogged()
        self.addCleanup(bl.close)
        seed = self.node()
        seed.handler = lambda p, q, h: (200, [], ('{"nodes":[{"worker_id":1,"addr":"%s"}]}' % bl.addr).encode()) if p == "/cluster/nodes" else None
        c = Client(bootstrap=[seed.addr], bootstrap_interval=0.01, request_timeout=3)
        self.addCleanup(c.close)
        end = time.monotonic() + 5
        while c._bootstrap._conn is None:  # a poll asks the backlogged node first
            self.assertLess(time.monotonic(), end, "no poll began")
            time.sleep(0.005)
        time.sleep(0.05)  # well into connect()
        start = time.monotonic()
        c.close()
        self.assertLess(time.monotonic() - start, 1.0, "close waited for the poll's dial")


class TestWorkers(Base):
    def test_idle_workers_end(self) -> None:
        from unittest import mock

        import snowflaked.client as sc

        a = self.node()
        c = self.client(nodes=[a.addr])
        with mock.patch.object(sc, "_WORKER_IDLE", 0.1):
            for i in range(5):  # each tag: a call alone, one queued behind it (a worker serves it)
                g = threading.Event()
                a.handler = lambda p, q, h, g=g: None if g.wait(5) else None
                a.arrived.clear()
                t = threading.Thread(target=lambda: c.next_segment(f"t{i}", timeout=5))
                t.start()
                self.assertTrue(a.arrived.wait(5))
                b = c._segment(f"t{i}")
                q = threading.Thread(target=lambda: c.next_segment(f"t{i}", timeout=5))
                q.start()
                end = time.monotonic() + 5
                while b.open is None:
                    self.assertLess(time.monotonic(), end)
                    time.sleep(0.005)
                g.set()
                t.join(5)
                q.join(5)
            a.handler = None
            end = time.monotonic() + 5
            while any(t.name == "snowflaked-batch" for t in threading.enumerate()):
                self.assertLess(time.monotonic(), end, "idle batch workers still running")
                time.sleep(0.01)
            self.assertIsInstance(c.next_segment("t0"), int)

    def test_worker_that_cannot_start(self) -> None:
        from unittest import mock

        a = self.node()
        a.gate = threading.Event()
        c = self.client(nodes=[a.addr], request_timeout=5)
        first: List[object] = []
        t = threading.Thread(target=lambda: first.append(c.next_id(timeout=5)))
        t.start()
        self.assertTrue(a.arrived.wait(5))
        errs: List[object] = []

        def queued() -> None:
            try:
                errs.append(c.next_id(timeout=3))
            except Exception as e:
                errs.append(e)

        qs = [threading.Thread(target=queued) for _ in range(2)]
        for q in qs:
            q.start()
        end = time.monotonic() + 5
        while c._ids.open is None or c._ids.open.joined < 2:
            self.assertLess(time.monotonic(), end)
            time.sleep(0.005)
        real = threading.Thread.start

        def start(th: threading.Thread) -> None:
            if th.name == "snowflaked-batch":
                raise RuntimeError("can't start new thread")
            real(th)

        with mock.patch.object(threading.Thread, "start", start):
            start_t = time.monotonic()
            a.gate.set()  # the first request ends: its slot goes to the queued batch, whose worker fails to start
            t.join(5)
            for q in qs:
                q.join(5)
        self.assertEqual(len(first), 1, "the first call lost its IDs")
        self.assertEqual(len(errs), 2)
        self.assertTrue(all(isinstance(e, RuntimeError) and not isinstance(e, TimeoutError) for e in errs), errs)
        self.assertLess(time.monotonic() - start_t, 1.0, "the queued calls waited for their deadline")
        a.gate = None
        self.assertIsInstance(c.next_ids(3, timeout=2), list)  # the slot came back
        got: List[object] = []
        ts = [threading.Thread(target=lambda: got.append(c.next_id(timeout=2))) for _ in range(8)]
        for x in ts:
            x.start()
        for x in ts:
            x.join(5)
        self.assertEqual(len(got), 8)


class TestLongWaits(Base):
    """Waits longer than the platform's time_t allows (OverflowError) loop instead."""

    def test_huge_caller_timeout_with_prefetch(self) -> None:
        a = self.node()
        a.gate = threading.Event()  # hangs: the buffer stays empty while a refill is out
        c = self.client(nodes=[a.addr], prefetch=4, request_timeout=0.3, attempts=1)
        with self.assertRaises(NoNodeError):
            c.next_id(timeout=1e10)

    def test_huge_stall_after(self) -> None:
        a = self.node()
        a.gate = threading.Event()
        c = self.client(nodes=[a.addr], stall_after=1e10, request_timeout=0.3, attempts=1)
        first = threading.Thread(target=lambda: self.assertRaises(NoNodeError, c.next_id), daemon=True)
        first.start()
        end = time.monotonic() + 5
        while not a.requests:
            self.assertLess(time.monotonic(), end)
            time.sleep(0.005)
        with self.assertRaises(NoNodeError):  # waits in a batch behind the first
            c.next_id()
        first.join(5)


if __name__ == "__main__":
    unittest.main()
