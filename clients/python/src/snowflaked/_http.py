"""Keep-alive HTTP/1.1 connections to the nodes (http.client), bounded answers."""

from __future__ import annotations

import http.client
import io
import socket
import ssl
import threading
import time
from typing import Dict, List, Optional, Set, Tuple

from .errors import ClosedError

#: An answer that is not IDs (a JSON error) is at most this long.
MAX_ERROR_BODY = 64 << 10
#: A connection idle longer than this is closed rather than reused.
MAX_IDLE_AGE = 30.0


class BadAnswer(Exception):
    """An answer that is not HTTP as a node speaks it (no Content-Length, too long, ...)."""


class NoAnswer(Exception):
    """The connection ended before the first byte of an answer."""


class Answer:
    """A node's answer: status, Retry-After (seconds, 0 for none) and body."""

    __slots__ = ("status", "retry_after", "body")

    def __init__(self, status: int, retry_after: float, body: bytes) -> None:
        self.status = status
        self.retry_after = retry_after
        self.body = body


def split_host_port(addr: str) -> Tuple[str, int]:
    """Split ``host:port`` (``[v6]:port`` too); raises ValueError when it is not one."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"{addr!r} is not host:port")
    p = int(port)
    if not 0 < p < 65536 or str(p) != port:
        raise ValueError(f"{addr!r} is not host:port")
    if host.startswith("["):
        if not host.endswith("]"):
            raise ValueError(f"{addr!r} is not host:port")
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{addr!r} is not host:port")
    return host, p


class DeadlineSocket:
    """A connection's socket whose every receive is bounded by the time
    left until ``deadline`` (monotonic seconds), not only by a timeout of
    its own: a peer that sends one byte at a time, each within the
    timeout, cannot make a request last past its deadline. Everything
    else goes to the socket."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.deadline = float("inf")

    def makefile(self, mode: str = "r", *args: object, **kw: object) -> object:
        if mode == "rb":
            return io.BufferedReader(_DeadlineReader(self))
        return self._sock.makefile(mode, *args, **kw)  # type: ignore[call-overload]

    def __getattr__(self, name: str) -> object:
        return getattr(self._sock, name)


class _DeadlineReader(io.RawIOBase):
    def __init__(self, ds: DeadlineSocket) -> None:
        self._ds = ds

    def readable(self) -> bool:
        return True

    def readinto(self, b: "bytearray | memoryview") -> int:  # type: ignore[override]
        left = self._ds.deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("timed out")
        sock = self._ds._sock
        sock.settimeout(left)
        return sock.recv_into(b)


def bound(hc: http.client.HTTPConnection, deadline: float) -> None:
    """Bound the connected ``hc``'s sending and receiving by ``deadline``."""
    ds = hc.sock
    if not isinstance(ds, DeadlineSocket):
        ds = hc.sock = DeadlineSocket(ds)
    ds.deadline = deadline
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("timed out")
    ds._sock.settimeout(left)


class _Conn:
    __slots__ = ("hc", "addr", "used", "dialing")

    def __init__(self, hc: http.client.HTTPConnection, addr: str) -> None:
        self.hc = hc
        self.addr = addr
        self.used = 0.0
        self.dialing: Optional[socket.socket] = None  # the socket while it connects


class Pool:
    """The client's connections: idle ones per node, and every open one so
    that ``close()`` can close them all (a request in flight fails at once)."""

    def __init__(self, ssl_context: Optional[ssl.SSLContext], max_idle: int = 8, user_agent: str = "snowflaked-python") -> None:
        self._ssl = ssl_context
        self._max_idle = max_idle
        self._headers = {"User-Agent": user_agent}
        self._lock = threading.Lock()
        self._idle: Dict[str, List[_Conn]] = {}
        self._open: Set[_Conn] = set()
        self._closed = False

    def _get(self, addr: str, timeout: float, fresh: bool) -> Tuple[_Conn, bool]:
        stale: List[_Conn] = []
        with self._lock:
            if self._closed:
                raise ClosedError()
            lst = self._idle.get(addr)
            conn: Optional[_Conn] = None
            now = time.monotonic()
            while not fresh and lst:
                c = lst.pop()
                if now - c.used > MAX_IDLE_AGE:
                    stale.append(c)
                    continue
                conn = c
                break
        for c in stale:
            self._discard(c)
        if conn is not None:
            return conn, True
        host, port = split_host_port(addr)
        if self._ssl is not None:
            hc: http.client.HTTPConnection = http.client.HTTPSConnection(host, port, timeout=timeout, context=self._ssl)
        else:
            hc = http.client.HTTPConnection(host, port, timeout=timeout)
        conn = _Conn(hc, addr)
        hc._create_connection = lambda address, timeout, source=None: self._dial(conn, address, timeout)  # type: ignore[attr-defined]
        with self._lock:
            if self._closed:
                raise ClosedError()
            self._open.add(conn)
        return conn, False

    def _dial(self, conn: _Conn, address: Tuple[str, int], timeout: Optional[float]) -> socket.socket:
        """socket.create_connection, but with the socket known to ``close()``
        while it connects, so that closing aborts the dial."""
        host, port = address
        err: Optional[OSError] = None
        for af, kind, proto, _, sa in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
            sock = socket.socket(af, kind, proto)
            with self._lock:
                if self._closed:
                    sock.close()
                    raise ClosedError()
                conn.dialing = sock
            try:
                sock.settimeout(timeout)
                sock.connect(sa)
                with self._lock:
                    conn.dialing = None
                    if self._closed:
                        raise ClosedError()
                return sock
            except BaseException as e:
                with self._lock:
                    conn.dialing = None
                sock.close()
                if not isinstance(e, OSError) or self._closed:
                    raise
                err = e
        raise err if err is not None else OSError(f"{host}: no address")

    def _put(self, conn: _Conn) -> None:
        conn.used = time.monotonic()
        with self._lock:
            if not self._closed:
                lst = self._idle.setdefault(conn.addr, [])
                if len(lst) < self._max_idle:
                    lst.append(conn)
                    return
        self._discard(conn)

    def _discard(self, conn: _Conn) -> None:
        with self._lock:
            self._open.discard(conn)
        try:
            conn.hc.close()
        except Exception:  # pragma: no cover - closing is best effort
            pass

    def drop_idle(self, addr: str) -> None:
        """Close the idle connections to ``addr``."""
        with self._lock:
            lst = self._idle.pop(addr, [])
        for c in lst:
            self._discard(c)

    def keep_only(self, addrs: List[str]) -> None:
        """Close the idle connections to nodes not in ``addrs``."""
        keep = set(addrs)
        gone: List[_Conn] = []
        with self._lock:
            for a in list(self._idle):
                if a not in keep:
                    gone.extend(self._idle.pop(a))
        for c in gone:
            self._discard(c)

    def close(self) -> None:
        """Close every connection, idle or in use, and refuse new ones."""
        with self._lock:
            self._closed = True
            conns = list(self._open)
            self._open.clear()
            self._idle.clear()
        for c in conns:
            sock = c.hc.sock or c.dialing
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            try:
                c.hc.close()
            except Exception:  # pragma: no cover
                pass

    def get(self, addr: str, path: str, headers: Optional[Dict[str, str]], deadline: float, max_body: int) -> Answer:
        """GET ``path`` from ``addr`` by ``deadline`` (monotonic seconds).

        The answer must carry a Content-Length (no chunked encoding), checked
        before the body is read: at most ``max_body`` bytes for a 200,
        ``MAX_ERROR_BODY`` otherwise. A reused connection that the node closed
        meanwhile is replaced once by a new one (the request never reached a
        handler), and the node's other idle connections are closed.

        Raises ``socket.timeout``/``TimeoutError`` when the deadline passes,
        ``OSError``, :class:`NoAnswer`, :class:`BadAnswer` or
        ``http.client.HTTPException`` otherwise.
        """
        hdrs = self._headers if not headers else {**self._headers, **headers}
        try_ = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise socket.timeout("timed out")
            conn, reused = self._get(addr, remaining, try_ > 0)
            hc = conn.hc
            started = False
            try:
                if hc.sock is None:
                    hc.timeout = remaining
                    hc.connect()
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise socket.timeout("timed out")
                bound(hc, deadline)
                hc.request("GET", path, headers=hdrs)
                resp = hc.getresponse()
                started = True
                answer, keep = _read(resp, max_body)
            except BaseException as e:
                self._discard(conn)
                if (
                    reused
                    and try_ == 0
                    and not started
                    and isinstance(e, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError))
                    and time.monotonic() < deadline
                ):
                    self.drop_idle(addr)
                    try_ += 1
                    continue
                if self._closed:
                    raise ClosedError() from e
                if isinstance(e, (http.client.RemoteDisconnected,)) or (not started and isinstance(e, (ConnectionResetError, BrokenPipeError))):
                    raise NoAnswer(f"connection closed before an answer: {e}") from e
                raise
            if keep:
                self._put(conn)
            else:
                self._discard(conn)
            return answer


def _read(resp: http.client.HTTPResponse, max_body: int) -> Tuple[Answer, bool]:
    # http.client has parsed Transfer-Encoding (chunked) and the first
    # Content-Length (length: None when absent or not a number >= 0).
    if resp.chunked:
        raise BadAnswer("Transfer-Encoding chunked (a snowflaked node sends Content-Length)")
    length = resp.length
    if length is None:
        raise BadAnswer("no Content-Length, or not a number")
    lengths = resp.headers.get_all("Content-Length") or ()
    if len(lengths) > 1 and any(v.strip() != lengths[0].strip() for v in lengths):
        raise BadAnswer(f"Content-Length given twice: {lengths[:2]!r}")
    limit = max_body if resp.status == 200 else MAX_ERROR_BODY
    if length > limit:
        raise BadAnswer(f"a body of {length} bytes, more than the {limit} expected at most")
    body = resp.read()
    if len(body) != length:
        raise BadAnswer(f"a body of {len(body)} bytes, {length} announced")
    retry_after = 0.0
    if resp.status != 200:
        ra = resp.getheader("Retry-After")
        if ra is not None:
            try:
                s = int(ra.strip())
                if 0 < s < 3600:
                    retry_after = float(s)
            except ValueError:
                pass
    keep = resp.version == 11 and not resp.will_close
    return Answer(resp.status, retry_after, body), keep
