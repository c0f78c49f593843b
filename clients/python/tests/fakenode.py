"""A fake snowflaked node for the tests: http.server on 127.0.0.1 whose
answers a test scripts, recording every request."""

from __future__ import annotations

import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, List, Optional, Tuple
from urllib.parse import parse_qs, urlsplit

# (status, headers, body)
Reply = Tuple[int, List[Tuple[str, str]], bytes]


def error_reply(status: int, code: str, message: str = "refused", retry_after: Optional[int] = None, **extra: object) -> Reply:
    """A JSON error answer as a node gives it."""
    err = {"code": code, "message": message, **extra}
    headers = [("Content-Type", "application/json")]
    if retry_after is not None:
        headers.append(("Retry-After", str(retry_after)))
    return status, headers, json.dumps({"error": err}).encode()


class FakeNode:
    """A node on 127.0.0.1:<free port>. ``handler(path, query, headers)``
    returns the reply; by default it serves increasing IDs for /ids and
    /segment/{tag} and UUIDv7s for /uuids. ``gate``, when set, is waited on
    (bounded) before each /ids answer."""

    def __init__(self, worker: int = 1) -> None:
        self.worker = worker
        self.lock = threading.Lock()
        self.requests: List[Tuple[str, dict, dict]] = []
        self._seq = itertools.count(1)
        self.handler: Optional[Callable[[str, dict, dict], Optional[Reply]]] = None
        self.gate: Optional[threading.Event] = None
        self.arrived = threading.Event()  # set when a request arrives
        # drop_idle: close each connection after its answer without saying
        # so (as a restarted node leaves a client's idle connections).
        self.drop_idle = False
        node = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: object) -> None:
                pass

            def do_GET(self) -> None:
                u = urlsplit(self.path)
                q = {k: v[0] for k, v in parse_qs(u.query).items()}
                hdrs = {k.lower(): v for k, v in self.headers.items()}
                with node.lock:
                    node.requests.append((u.path, q, hdrs))
                node.arrived.set()
                if node.gate is not None and u.path == "/ids":
                    node.gate.wait(10)
                reply = node.handler(u.path, q, hdrs) if node.handler else None
                if reply is None:
                    reply = node.default(u.path, q)
                status, headers, body = reply
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                if not any(k.lower() in ("content-length", "transfer-encoding") for k, _ in headers):
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                if node.drop_idle:
                    self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]  # a client that left
        self.addr = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def ids(self, n: int) -> List[int]:
        """n new increasing IDs of this node (worker in bits 12..21)."""
        with self.lock:
            return [(next(self._seq) << 22) | (self.worker << 12) for _ in range(n)]

    def default(self, path: str, q: dict) -> Reply:
        n = int(q.get("count", "1"))
        if path == "/ids" or path.startswith("/segment/"):
            return 200, [("Content-Type", "text/plain")], "".join(f"{i}\n" for i in self.ids(n)).encode()
        if path == "/uuids":
            out = []
            for i in self.ids(n):
                h = f"{0x019abc123456:012x}7{(i >> 50) & 0xfff:03x}{0x8000000000000000 | (i & 0x3fffffffffffffff):016x}"
                out.append(f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}")
            return 200, [], "".join(u + "\n" for u in out).encode()
        if path == "/cluster/nodes":
            return 200, [], json.dumps({"nodes": [{"worker_id": self.worker, "addr": self.addr}]}).encode()
        return error_reply(404, "not_found")

    def counts(self, path: str = "/ids") -> List[int]:
        """The count of each request for path, in order."""
        with self.lock:
            return [int(q.get("count", "0")) for p, q, _ in self.requests if p == path]

    def close(self) -> None:
        if self.gate is not None:
            self.gate.set()
        self.server.shutdown()
        self.server.server_close()
