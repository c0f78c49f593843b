"""Finding the nodes: a static list, or a seed's ``GET /cluster/nodes``, polled."""

from __future__ import annotations

import http.client
import json
import random
import ssl
import threading
import socket
import time
from typing import Callable, List, Optional, Sequence, Tuple

from ._http import bound, split_host_port
from .errors import NoNodeError, NodeFailure

#: An answer of /cluster/nodes is at most this long.
BOOTSTRAP_MAX_BODY = 1 << 20
#: A poll asks at most this many nodes.
BOOTSTRAP_MAX_ASK = 16


def fetch_nodes(
    addr: str,
    timeout: float,
    ssl_context: Optional[ssl.SSLContext],
    track: Optional[Callable[[Optional[http.client.HTTPConnection]], None]] = None,
    stop: Optional[threading.Event] = None,
) -> List[str]:
    """Ask one node for the cluster's nodes: a 200 with at least one node,
    every address ``host:port``. Raises :class:`NodeFailure` otherwise.
    ``track`` is told of the connection while it is in use (so that closing
    can abort it)."""
    try:
        host, port = split_host_port(addr)
    except ValueError as e:
        raise NodeFailure(addr, str(e)) from None
    if ssl_context is not None:
        hc: http.client.HTTPConnection = http.client.HTTPSConnection(host, port, timeout=timeout, context=ssl_context)
    else:
        hc = http.client.HTTPConnection(host, port, timeout=timeout)
    if track is not None:
        track(hc)

    def dial(address: Tuple[str, int], timeout: Optional[float], source: object = None) -> socket.socket:
        # socket.create_connection, with the socket on hc (``dialing``)
        # while it connects, so that closing aborts the dial.
        err: Optional[OSError] = None
        for af, kind, proto, _, sa in socket.getaddrinfo(address[0], address[1], 0, socket.SOCK_STREAM):
            sock = socket.socket(af, kind, proto)
            hc.dialing = sock  # type: ignore[attr-defined]
            try:
                if track is not None:
                    track(hc)
                if stop is not None and stop.is_set():
                    raise OSError("closed")
                sock.settimeout(timeout)
                sock.connect(sa)
                return sock
            except OSError as e:
                sock.close()
                if stop is not None and stop.is_set():
                    raise
                err = e
            finally:
                hc.dialing = None  # type: ignore[attr-defined]
        raise err if err is not None else OSError(f"{address[0]}: no address")

    hc._create_connection = dial  # type: ignore[attr-defined]
    deadline = time.monotonic() + timeout
    try:
        hc.connect()
        bound(hc, deadline)  # the whole answer within timeout, not each byte
        hc.request("GET", "/cluster/nodes", headers={"User-Agent": "snowflaked-python"})
        resp = hc.getresponse()
        length = resp.getheader("Content-Length")
        if length is not None and length.isdigit() and int(length) > BOOTSTRAP_MAX_BODY:
            raise NodeFailure(addr, f"a node list over {BOOTSTRAP_MAX_BODY} bytes")
        body = resp.read(BOOTSTRAP_MAX_BODY + 1)
        if len(body) > BOOTSTRAP_MAX_BODY:
            raise NodeFailure(addr, f"a node list over {BOOTSTRAP_MAX_BODY} bytes")
        if resp.status != 200:
            raise NodeFailure(addr, f"/cluster/nodes {resp.status} {body[:80]!r}", status=resp.status)
        try:
            doc = json.loads(body)
            entries = doc["nodes"]
            if not isinstance(entries, list):
                raise TypeError("nodes is not a list")
        except (ValueError, TypeError, KeyError, RecursionError) as e:
            raise NodeFailure(addr, f"the node list is not JSON of the API's form: {e}") from None
        out: List[str] = []
        for n in entries:
            a = n.get("addr") if isinstance(n, dict) else None
            try:
                if not isinstance(a, str):
                    raise ValueError(f"{a!r} is not host:port")
                split_host_port(a)
            except ValueError:
                raise NodeFailure(addr, f"node list entry {a!r} is not host:port") from None
            if a not in out:
                out.append(a)
        if not out:
            raise NodeFailure(addr, "answered no node in service")
        return out
    except NodeFailure:
        raise
    except (OSError, http.client.HTTPException) as e:
        raise NodeFailure(addr, f"{type(e).__name__}: {e}", timeout=isinstance(e, TimeoutError)) from None
    finally:
        if track is not None:
            track(None)
        hc.close()


def ask(
    addrs: Sequence[str],
    timeout: float,
    ssl_context: Optional[ssl.SSLContext],
    stop: Optional[threading.Event] = None,
    track: Optional[Callable[[Optional[http.client.HTTPConnection]], None]] = None,
) -> List[str]:
    """Ask ``addrs`` in turn until one answers; :class:`NoNodeError` naming
    each failure otherwise (or as soon as ``stop`` is set)."""
    causes: List[BaseException] = []
    for a in addrs:
        if stop is not None and stop.is_set():
            break
        try:
            return fetch_nodes(a, timeout, ssl_context, track, stop)
        except NodeFailure as e:
            causes.append(e)
    raise NoNodeError("the cluster's node list", causes)


class Bootstrap:
    """Polls ``GET /cluster/nodes`` every ``interval`` seconds (±20% at random),
    asking the nodes it knows (from a different one each poll), then the
    seeds; when none answers, the last list stays. ``on_change`` is called
    with each new list."""

    def __init__(
        self,
        seeds: Sequence[str],
        interval: float,
        timeout: float,
        ssl_context: Optional[ssl.SSLContext],
        on_change: Callable[[List[str]], None],
    ) -> None:
        self._seeds = list(seeds)
        self._interval = interval
        self._timeout = timeout
        self._ssl = ssl_context
        self._on_change = on_change
        self._lock = threading.Lock()
        self._polls = random.randrange(1 << 30)
        self._stop = threading.Event()
        self._conn: Optional[http.client.HTTPConnection] = None
        self.nodes: List[str] = ask(self._seeds, timeout, ssl_context)
        self._thread = threading.Thread(target=self._run, name="snowflaked-bootstrap", daemon=True)
        self._thread.start()

    def _jittered(self) -> float:
        return self._interval * random.uniform(0.8, 1.2)

    def candidates(self) -> List[str]:
        """The nodes a poll asks, in order (at most 16)."""
        with self._lock:
            nodes = list(self.nodes)
            out: List[str] = []
            if nodes:
                k = self._polls % len(nodes)
                out = nodes[k:] + nodes[:k]
            self._polls += 1
        for s in self._seeds:
            if s not in out:
                out.append(s)
        return out[:BOOTSTRAP_MAX_ASK]

    def poll_once(self) -> bool:
        """Ask once; True when a node answered (the list may be the same)."""
        try:
            nodes = ask(self.candidates(), self._timeout, self._ssl, self._stop, self._track)
        except NoNodeError:
            return False  # the last list stays in force
        if self._stop.is_set():
            return False
        with self._lock:
            changed = nodes != self.nodes
            self.nodes = nodes
        if changed:
            self._on_change(nodes)
        return True

    def _track(self, hc: Optional[http.client.HTTPConnection]) -> None:
        with self._lock:
            self._conn = hc
            stopped = self._stop.is_set()
        if stopped and hc is not None:
            _abort(hc)

    def _run(self) -> None:
        while not self._stop.wait(self._jittered()):
            self.poll_once()

    def close(self) -> None:
        """Stop polling and wait for the poller (bounded by one request's timeout)."""
        self._stop.set()
        with self._lock:
            hc = self._conn
        if hc is not None:
            _abort(hc)  # a poll in progress fails at once
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=self._timeout * BOOTSTRAP_MAX_ASK + 1)


def _abort(hc: http.client.HTTPConnection) -> None:
    sock = hc.sock or getattr(hc, "dialing", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
