"""The snowflaked client: IDs from a cluster's nodes over keep-alive HTTP/1.1."""

from __future__ import annotations

import http.client
import itertools
import json
import hashlib
import logging
import os
import re
import socket
import ssl
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Callable, Deque, Dict, List, Mapping, Optional, Sequence, Tuple, Union, overload
from urllib.parse import quote

from . import _discovery
from .encoding import ENCODINGS
from ._http import BadAnswer, NoAnswer, Pool, split_host_port
from .errors import (
    ClosedError,
    DeadlineExceededError,
    InvalidConfigError,
    NoNodeError,
    NodeFailure,
    RejectedError,
    SnowflakedError,
)

__all__ = ["Bounds", "Client", "MAX_COUNT", "MAX_TAG_LEN"]

log = logging.getLogger("snowflaked")

#: The most IDs one ``next_ids``/``next_segment`` call may ask for.
MAX_COUNT = 1 << 20
#: The longest segment tag, in bytes of UTF-8.
MAX_TAG_LEN = 128
#: One line of an ``/ids`` answer: 19 digits and a newline.
_MAX_ID_LINE = 20
#: One line of a ``/uuids`` answer: 36 characters and a newline.
_MAX_UUID_LINE = 37
#: One line of a ``/segment/{tag}`` answer: a dense ID, or the text of a
#: reset tag's ID (at most 128 characters), and a newline.
_MAX_TEXT_LINE = 129
#: The most bytes of a ``/bounds`` answer.
_MAX_BOUNDS_BODY = 4096
#: How many times one call learns a smaller limit before it gives up.
_MAX_RELEARN = 4
_MAX_INT64 = (1 << 63) - 1

#: The client's rendezvous key, drawn once per process.
_PROCESS_ID = int.from_bytes(os.urandom(8), "big") or 1

#: Refill requests out at once for prefetch.
_PREFETCH_DEPTH = 4

#: Seconds a batcher's worker waits for a batch before it ends (each
#: tag has its own batcher: idle workers would pile up over many tags).
_WORKER_IDLE = 10.0

_SVC_IDS = 0
_SVC_SEGMENTS = 1

_UUID_RE = re.compile(rb"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
_INF = float("inf")
#: The longest one wait of a thread (longer ones overflow the platform's time_t); waits loop.
_MAX_WAIT = 3600.0

#: The API error codes the client branches on or names.
CODES = (
    "batch_timeout",
    "unknown_tag",
    "invalid_count",
    "invalid_tag",
    "invalid_gene",
    "gene_off",
    "token_required",
    "token_invalid",
    "segments_off",
    "out_of_service",
    "invalid_format",
    "invalid_range",
)
#: The API paths the client requests.
ROUTES = ("/ids", "/segment/{tag}", "/uuids", "/cluster/nodes", "/bounds")


class _GaveUp(Exception):
    """Every caller of a batch gave up before it was served."""


class _Endpoint:
    """One kind of batch: snowflake IDs, one tag's dense IDs, a gene, UUIDs."""

    __slots__ = ("svc", "path", "what", "headers", "unordered", "uuids", "tag_max", "text", "bounds")

    def __init__(
        self,
        svc: int,
        path: str,
        what: str,
        headers: Optional[Dict[str, str]],
        unordered: bool = False,
        uuids: bool = False,
        has_tag_max: bool = False,
        text: bool = False,
        bounds: bool = False,
    ) -> None:
        self.svc = svc
        self.path = path  # up to and including "count="; with bounds, the whole path
        self.text = text  # the answer's lines as strings
        self.bounds = bounds  # a /bounds answer (JSON), no count
        self.what = what
        self.headers = headers
        self.unordered = unordered
        self.uuids = uuids
        # A tag's per-request ceiling once a node named it (0 before);
        # None for endpoints that are not a tag's.
        self.tag_max: Optional[int] = 0 if has_tag_max else None


class _Node:
    __slots__ = ("addr", "down_until", "last_err")

    def __init__(self, addr: str) -> None:
        self.addr = addr
        self.down_until = [0.0, 0.0]
        self.last_err: List[Optional[BaseException]] = [None, None]


class _Batch:
    """One request shared by the calls that joined it."""

    __slots__ = ("total", "joined", "left", "deadline", "gate", "ids", "err", "back", "gathered")

    def __init__(self) -> None:
        self.total = 0
        self.joined = 0
        self.left = 0
        self.deadline = -_INF  # the latest deadline of the calls joined; inf: one has none
        # Held until the answer is published; each caller that gets it
        # releases it at once for the next: one wake-up at a time, rather
        # than every caller at once fighting for the GIL.
        self.gate = threading.Lock()
        self.gate.acquire()
        self.ids: Optional[List[int]] = None
        self.err: Optional[BaseException] = None
        self.back = itertools.count(1)
        self.gathered = threading.Event()

    def publish(self, ids: Optional[List[int]], err: Optional[BaseException]) -> None:
        self.ids, self.err = ids, err
        self.gate.release()

    def wait(self, timeout: float = -1) -> bool:
        """Wait for the answer (timeout in seconds, -1: none); True once published."""
        if self.gate.acquire(timeout != 0, min(timeout, _MAX_WAIT) if timeout > 0 else -1):
            self.gate.release()
            return True
        return False

    def leave(self) -> None:
        # itertools.count's next is atomic in CPython.
        if next(self.back) == self.joined:
            self.gathered.set()


def _clone(err: BaseException) -> BaseException:
    """A copy of a batch's error for one of its callers (each raises its own)."""
    if isinstance(err, RejectedError):
        return RejectedError(err.message, node=err.node, status=err.status, code=err.code, max=err.max, tag_max=err.tag_max)
    if isinstance(err, NoNodeError):
        return NoNodeError(err.what, err.causes, err.not_tried)
    if isinstance(err, ClosedError):
        return ClosedError()
    return err


class _Slot:
    """A request out, holding one of the ``max_in_flight`` slots until it
    ends or, while calls wait, until it has been out ``stall_after``."""

    __slots__ = ("start", "gave_up")

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.gave_up = False


class _Batcher:
    """Merges the calls for one kind of ID (snowflake IDs, or one tag's dense
    IDs) into requests.

    A call that finds a free slot and nobody waiting makes its request
    itself, on its own thread: no hand-off. While ``max_in_flight`` requests
    are out, calls join the open batch (up to ``max_batch`` IDs); when a slot
    frees, the oldest waiting batch goes to a worker thread of the batcher,
    which makes one request for it and publishes the answer to all its
    callers at once (each woken caller wakes the next), then waits until
    they have taken it, so that those who call again join the next batch
    together. A request out longer than ``stall_after`` while calls wait (a
    node that hangs) gives its slot up, so the waiting calls get a request
    of their own on the next node; the waiting callers check this
    themselves, no timer thread runs.
    """

    def __init__(self, client: "Client", ep: _Endpoint) -> None:
        self.c = client
        self.ep = ep
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.open: Optional[_Batch] = None
        self.full: Deque[_Batch] = deque()  # sealed, waiting for a slot
        self.ready: Deque[Tuple[_Batch, _Slot]] = deque()  # given a slot, waiting for a worker
        self.in_flight = 0  # slots taken (stalled requests do not count)
        self.slots: List[_Slot] = []
        self.idle = 0  # workers waiting for a batch (or notified, not yet awake)
        self.closed = False
        self.threads: List[threading.Thread] = []

    def most(self) -> int:
        """The most IDs one request asks for: max_batch, or a tag's ceiling."""
        tm = self.ep.tag_max
        if tm and tm < self.c._max_batch:
            return tm
        return self.c._max_batch

    def get(self, n: int, deadline: Optional[float]) -> List[int]:
        """n IDs, increasing (up to max_batch in one batch, more in several, sorted)."""
        if n < 1 or n > MAX_COUNT:
            raise RejectedError(f"next {n} {self.ep.what}: want 1..{MAX_COUNT}", code="invalid_count")
        most = self.most()
        if most < self.c._max_batch and n > most:
            raise RejectedError(
                f"next {n} {self.ep.what}: the tag takes at most {most} a request (--max-count)",
                code="invalid_count",
                tag_max=most,
            )
        if n <= most:
            return self.fetch(n, deadline)
        out: List[int] = []
        while len(out) < n:
            out.extend(self.fetch(min(n - len(out), most), deadline))
        out.sort()  # batches may come from different nodes, whose IDs interleave
        return out

    def fetch(self, n: int, deadline: Optional[float]) -> List[int]:
        """n ≤ most() IDs from one request (the call's own, or a shared one)."""
        c = self.c
        with self.lock:
            if self.closed:
                raise ClosedError()
            if self.open is None and not self.full and not self.ready and self.in_flight < c._max_in_flight:
                slot = self._hold_locked()
                bt = None
            else:
                most = self.most()
                bt = self.open
                if bt is None:
                    bt = self.open = _Batch()
                elif bt.total + n > most:
                    self.full.append(bt)
                    bt = self.open = _Batch()
                off = bt.total
                bt.total += n
                bt.joined += 1
                d = _INF if deadline is None else deadline
                if d > bt.deadline:
                    bt.deadline = d
                self._dispatch_locked()
        if bt is None:
            # Alone: the request on this thread, no hand-off.
            try:
                if deadline is None:
                    ids = c._serve_clamped(self.ep, n, None, False, _always)
                else:
                    ids = c._serve_clamped(self.ep, n, deadline, False, lambda: time.monotonic() < deadline)
            except BaseException as e:
                raise _caller_err(deadline, self.ep.what, e) from None
            finally:
                with self.lock:
                    self._drop_locked(slot)
                    if self.full or self.open is not None:
                        self._dispatch_locked()
            if deadline is not None and time.monotonic() >= deadline:
                raise DeadlineExceededError(f"next {self.ep.what}: the caller's deadline passed")
            return ids
        stall = c._stall_after
        while True:
            if deadline is None:
                remaining = -1.0
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    remaining = 0.0
            if remaining != 0.0 and bt.wait(stall if remaining < 0 or remaining > stall else remaining):
                break
            if deadline is not None and time.monotonic() >= deadline:
                if bt.wait(0):
                    break
                with self.lock:
                    bt.left += 1
                bt.leave()
                raise DeadlineExceededError(f"next {self.ep.what}: the caller's deadline passed while waiting for a batch")
            # Still waiting after stall_after: take the slots of requests
            # out that long (a node that hangs) for the waiting batches.
            with self.lock:
                if bt is self.open or bt in self.full:
                    self._stalls_locked()
        bt.leave()
        if bt.err is not None:
            raise _caller_err(deadline, self.ep.what, _clone(bt.err)) from None
        if deadline is not None and time.monotonic() >= deadline:
            raise DeadlineExceededError(f"next {self.ep.what}: the caller's deadline passed")
        assert bt.ids is not None
        return bt.ids[off : off + n]

    def _hold_locked(self) -> _Slot:
        s = _Slot()
        self.in_flight += 1
        self.slots.append(s)
        return s

    def _drop_locked(self, s: _Slot) -> None:
        self.slots.remove(s)
        if not s.gave_up:
            self.in_flight -= 1

    def _stalls_locked(self) -> None:
        now = time.monotonic()
        for s in self.slots:
            if not s.gave_up and now - s.start >= self.c._stall_after:
                s.gave_up = True
                self.in_flight -= 1
        self._dispatch_locked()

    def _dispatch_locked(self) -> None:
        """Hand each waiting batch a free slot can take to a worker. Lock held."""
        while self.in_flight < self.c._max_in_flight and not self.closed:
            if self.full:
                bt = self.full.popleft()
            elif self.open is not None:
                bt = self.open
                self.open = None
            else:
                return
            self.ready.append((bt, self._hold_locked()))
            # Idle workers count themselves busy when they wake; one
            # notified but not yet awake is still idle, its batch ready.
            if self.idle >= len(self.ready):
                self.cond.notify()
            else:
                t = threading.Thread(target=self._work, name="snowflaked-batch", daemon=True)
                try:
                    t.start()
                except RuntimeError as e:  # can't start new thread: the batch's callers get it
                    _, slot = self.ready.pop()
                    self._drop_locked(slot)
                    bt.publish(None, e)
                    return
                self.threads.append(t)

    def _work(self) -> None:
        with self.lock:
            while True:
                while not self.ready and not self.closed:
                    self.idle += 1
                    woken = self.cond.wait(_WORKER_IDLE)
                    self.idle -= 1
                    if not woken and not self.ready and not self.closed:
                        self.threads.remove(threading.current_thread())
                        return  # idle too long: a later batch starts a new worker
                if self.closed:
                    return
                bt, slot = self.ready.popleft()
                self.lock.release()
                try:
                    self._serve_batch(bt)
                finally:
                    self.lock.acquire()
                self._drop_locked(slot)
                self._dispatch_locked()

    def _serve_batch(self, bt: _Batch) -> None:
        deadline = None if bt.deadline == _INF else bt.deadline
        ids: Optional[List[int]] = None
        err: Optional[BaseException] = None
        try:
            ids = self.c._serve_clamped(self.ep, bt.total, deadline, bt.joined > 1, lambda: bt.left < bt.joined)
        except BaseException as e:  # handed to the callers
            err = e
        op = self.open
        gather = op is None or op.joined < bt.joined
        bt.publish(ids, err)
        if gather and not self.closed:
            # Until the callers have taken their IDs (one wake-up, bounded).
            bt.gathered.wait(0.05)

    def close(self) -> None:
        """Fail the waiting calls with ClosedError and stop the workers."""
        with self.lock:
            self.closed = True
            waiting = list(self.full) + [b for b, _ in self.ready]
            if self.open is not None:
                waiting.append(self.open)
            self.full.clear()
            self.ready.clear()
            self.open = None
            self.cond.notify_all()
            threads = list(self.threads)
        for bt in waiting:
            bt.publish(None, ClosedError())
        for t in threads:
            if t is not threading.current_thread():
                t.join(timeout=5)


def _always() -> bool:
    return True


def _caller_err(deadline: Optional[float], what: str, err: BaseException) -> BaseException:
    """What a call whose request ended with err raises: the deadline error
    when the caller's deadline passed meanwhile (naming the last failure),
    unless the client closed or the request was rejected."""
    if isinstance(err, (ClosedError, RejectedError, DeadlineExceededError)):
        return err
    if deadline is not None and time.monotonic() >= deadline:
        if isinstance(err, _GaveUp):
            return DeadlineExceededError(f"next {what}: the caller's deadline passed")
        return DeadlineExceededError(f"next {what}: the caller's deadline passed (last failure: {err})", err)
    return err


def _tag_error(tag: str) -> Optional[str]:
    if not isinstance(tag, str) or tag == "":
        return "empty"
    raw = tag.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_TAG_LEN:
        return f"{len(raw)} bytes, at most {MAX_TAG_LEN}"
    if tag in (".", ".."):
        return "not a tag name"
    if any(ch in tag for ch in "/ ?#%\\"):
        return "contains one of / space ? # % \\"
    for ch in tag:
        o = ord(ch)
        if o < 0x21 or o == 0x7F or o == 0xFFFD or 0xD800 <= o <= 0xDFFF:
            return "contains a control character or is not UTF-8"
    return None


def _valid_token(t: object) -> bool:
    return isinstance(t, str) and 0 < len(t) <= 512 and all(0x21 <= ord(ch) <= 0x7E for ch in t)


def _parse_ids(body: bytes, n: int, increasing: bool) -> List[int]:
    lines = body.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) != n:
        if len(lines) > n:
            raise ValueError(f"more than the {n} IDs asked for")
        raise ValueError(f"answered {len(lines)} of the {n} IDs asked for")
    out: List[int] = []
    last = 0
    for line in lines:
        if not line.isdigit() or len(line) > 19:
            raise ValueError(f"{line[:80]!r} is not an ID")
        v = int(line)
        if v <= 0 or v > _MAX_INT64:
            raise ValueError(f"{line[:80]!r} is not an ID")
        if increasing and v <= last:
            raise ValueError(f"IDs not increasing: {v} after {last}")
        last = v
        out.append(v)
    if not increasing and len(set(out)) != len(out):
        raise ValueError("an ID twice in one answer")
    return out


def _text_lines(body: bytes, n: int) -> List[str]:
    """Exactly n lines of 1 to 128 printable ASCII characters each, none twice."""
    lines = body.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) != n:
        raise ValueError(f"{len(lines)} lines, want {n}")
    out: List[str] = []
    for line in lines:
        if not 1 <= len(line) <= _MAX_TEXT_LINE - 1 or any(b < 0x21 or b > 0x7E for b in line):
            raise ValueError(f"{line[:80]!r} is not an ID as text")
        out.append(line.decode("ascii"))
    if len(set(out)) != len(out):
        raise ValueError("an ID twice in one answer")
    return out


def _parse_text(body: bytes, n: int) -> List[str]:
    return _text_lines(body, n)


def _not_a_number(body: bytes, n: int) -> Optional[str]:
    """The first line that is not a 63-bit ID, when body is otherwise a well
    formed text answer of n IDs (a reset tag's); None when it is not."""
    try:
        lines = _text_lines(body, n)
    except ValueError:
        return None
    for line in lines:
        if not line.isdigit() or not 0 < int(line) <= _MAX_INT64:
            return line
    return None


def _unix_ms(t: object, name: str) -> int:
    """t (an aware datetime, or Unix milliseconds) in Unix milliseconds, floored."""
    if isinstance(t, datetime):
        if t.tzinfo is None:
            raise RejectedError(f"{name} {t!r}: want an aware datetime (with a tzinfo) or Unix milliseconds", code="invalid_range")
        return (t - _UNIX) // timedelta(milliseconds=1)
    if isinstance(t, int) and not isinstance(t, bool):
        return t
    raise TypeError(f"{name}: want a datetime or Unix milliseconds (int), got {type(t).__name__}")


_UNIX = datetime(1970, 1, 1, tzinfo=timezone.utc)
_CANONICAL_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass(frozen=True)
class Bounds:
    """What ``GET /bounds`` answers: the IDs a node of the cluster can have
    issued in ``[from_, to)``, the range truncated to the start of its ticks.

    Attributes:
        from_, to: the range the node used (the starts of the first tick in
            it and of the first after it), aware UTC datetimes.
        from_ms, to_ms: the same in Unix milliseconds.
        min_id, max_id: the smallest and largest ID of a tick in the range:
            ``min_id <= id <= max_id`` selects the IDs issued in it.
        min_uuid, max_uuid: the same for UUIDv7s; ``None`` when the layout
            has no UUIDs.
    """

    from_: datetime
    to: datetime
    from_ms: int
    to_ms: int
    min_id: int
    max_id: int
    min_uuid: Optional[uuid.UUID] = None
    max_uuid: Optional[uuid.UUID] = None


def _parse_bounds(body: bytes) -> Bounds:
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, RecursionError) as e:
        raise ValueError(f"not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")

    def ms(k: str) -> int:
        v = doc.get(k)
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"{k} {v!r} is not a whole number")
        return v

    def id_(k: str) -> int:
        v = doc.get(k)
        if not isinstance(v, str) or not v.isdigit() or len(v) > 19 or int(v) > _MAX_INT64:
            raise ValueError(f"{k} {v!r} is not an ID in a decimal string")
        return int(v)

    def uuid_(k: str) -> Optional[uuid.UUID]:
        v = doc.get(k)
        if v is None:
            return None
        if not isinstance(v, str) or not _CANONICAL_UUID.match(v):
            raise ValueError(f"{k} {v!r} is not a canonical UUID")
        return uuid.UUID(v)

    f, t = ms("from_ms"), ms("to_ms")
    lo, hi = id_("min_id"), id_("max_id")
    if f >= t or lo > hi:
        raise ValueError(f"an empty range: from_ms {f}, to_ms {t}, min_id {lo}, max_id {hi}")
    return Bounds(
        from_=_UNIX + timedelta(milliseconds=f),
        to=_UNIX + timedelta(milliseconds=t),
        from_ms=f,
        to_ms=t,
        min_id=lo,
        max_id=hi,
        min_uuid=uuid_("min_uuid"),
        max_uuid=uuid_("max_uuid"),
    )


def _path_tag(tag: str) -> str:
    """tag in a path: percent-encoded beyond ASCII."""
    return quote(tag, safe="!$&'()*+,;=:@-._~[]{}|^`\"<>")


def _parse_uuids(body: bytes, n: int) -> List[uuid.UUID]:
    lines = body.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) != n:
        raise ValueError(f"{len(lines)} UUIDs, want {n}")
    out: List[uuid.UUID] = []
    prev = b""
    for line in lines:
        if not _UUID_RE.match(line):
            raise ValueError(f"{line[:80]!r} is not a version 7 UUID with the RFC variant")
        if line <= prev:
            raise ValueError(f"{line.decode()} does not follow {prev.decode()}: not increasing")
        prev = line
        out.append(uuid.UUID(line.decode("ascii")))
    return out


def _error_of(body: bytes) -> Dict[str, object]:
    try:
        doc = json.loads(body)
        e = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(e, dict) and isinstance(e.get("code"), str) and e["code"]:
            return e
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: "[[[[..." nested too deep
        pass
    return {}


def _int_or_none(v: object) -> Optional[int]:
    if isinstance(v, int) and not isinstance(v, bool) and v >= 1:
        return v
    return None


def _rejected(node: str, status: int, body: bytes) -> RejectedError:
    e = _error_of(body)
    if e:
        return RejectedError(
            str(e.get("message", "")),
            node=node,
            status=status,
            code=str(e["code"]),
            max=_int_or_none(e.get("max")),
            tag_max=_int_or_none(e.get("tag_max")),
        )
    return RejectedError(repr(body[:80]), node=node, status=status)


def _error_text(body: bytes) -> Tuple[str, str]:
    e = _error_of(body)
    if e:
        return str(e["code"]), f"{e['code']}: {e.get('message', '')}"
    return "", repr(body[:80])


class _Prefetch:
    """Keeps up to ``want`` snowflake IDs fetched ahead, in chunks of at most
    max_batch (want/4 when smaller), refilled by up to 4 requests at once
    (threads of its own) whenever fewer than ``want`` are held or on their
    way; chunks older than ``max_age`` are dropped."""

    def __init__(self, client: "Client", want: int, max_age: float) -> None:
        self.c = client
        self.want = want
        self.size = min(client._max_batch, max(want // 4, 1))
        self.max_age = max_age
        self.cond = threading.Condition()
        self.chunks: Deque[list] = deque()  # [born, ids, next index]
        self.held = 0
        self.fetching = 0
        self.closed = False
        # Up to 4 refills at once, as many as the buffer's chunks.
        depth = min(_PREFETCH_DEPTH, -(-want // self.size))
        self.threads = [threading.Thread(target=self._run, name="snowflaked-prefetch", daemon=True) for _ in range(depth)]
        for t in self.threads:
            t.start()

    def take(self, deadline: Optional[float]) -> Optional[int]:
        """The next prefetched ID; None when none is held nor on its way."""
        with self.cond:
            for _ in range(3):
                now = time.monotonic()
                while self.chunks:
                    ch = self.chunks[0]
                    ids = ch[1]
                    if now - ch[0] > self.max_age:
                        self.chunks.popleft()
                        self.held -= len(ids) - ch[2]
                        continue
                    v = ids[ch[2]]
                    ch[2] += 1
                    self.held -= 1
                    if ch[2] == len(ids):
                        self.chunks.popleft()
                    if self.held + self.fetching < self.want:
                        self.cond.notify_all()
                    return v
                if self.fetching == 0 or self.closed:
                    self.cond.notify_all()
                    return None
                timeout = None if deadline is None else deadline - now
                if timeout is not None and timeout <= 0:
                    return None
                self.cond.wait(None if timeout is None else min(timeout, _MAX_WAIT))
        return None

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.closed and self.held + self.fetching >= self.want:
                    self.cond.wait()
                if self.closed:
                    return
                self.fetching += self.size
            born = time.monotonic()
            ids: Optional[List[int]] = None
            try:
                ids = self.c._serve_clamped(self.c._ids.ep, self.size, None, True, lambda: not self.closed)
            except Exception as e:  # anything: a refill thread that died would leave fetching counted forever
                if not self.closed:
                    log.warning("snowflaked client: prefetch failed: %s", e)
            with self.cond:
                self.fetching -= self.size
                if ids:
                    self.chunks.append([born, ids, 0])
                    self.held += len(ids)
                self.cond.notify_all()
                if ids is None and not self.closed:
                    self.cond.wait(0.1)  # a pause before the next try after a failure

    def stop(self) -> None:
        """Tell the refill thread to stop (its request fails as the pool closes)."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def close(self) -> None:
        """Stop and wait for the refill thread."""
        self.stop()
        for t in self.threads:
            if t is not threading.current_thread():
                t.join(timeout=10)


class Client:
    """Issues IDs from a snowflaked cluster. Thread-safe; close it when done
    (or use it as a context manager).

    Give exactly one of ``nodes`` (a static list of ``host:port``) and
    ``bootstrap`` (seeds: the nodes come from the first seed that answers
    ``GET /cluster/nodes``, polled every ``bootstrap_interval`` seconds, ±20%
    at random; when none answers, the last list stays; at construction no
    seed answering is a :class:`NoNodeError`).

    Args:
        nodes: static node list, ``host:port`` each.
        bootstrap: seeds, ``host:port`` each.
        bootstrap_interval: seconds between polls of ``/cluster/nodes`` (10).
        api_token: bearer token for snowflake IDs and UUIDs (nodes run with
            ``--api-tokens-file``).
        tag_tokens: bearer token per segment tag (tags created with
            ``--require-token``).
        ca_file: PEM file of the CA that verifies the nodes: every
            connection is then HTTPS.
        cert_file, key_file: the client certificate and key (PEM), for nodes
            that require one (``--tls-client-ca``).
        ssl_context: an ``ssl.SSLContext`` to use instead of ``ca_file``...
        request_timeout: seconds one request to one node may take (2).
        max_batch: the most IDs one request asks for (1000).
        max_in_flight: requests out at once per kind of ID (1): callers that
            arrive while they are out join the next batch. More make smaller
            batches and, measured on 2 cores, fewer IDs a second.
        stall_after: seconds after which a request out, while callers wait,
            gives its slot up (a node that hangs), so that they get a request
            of their own on the next node (0.05).
        attempts: nodes one batch tries before it fails (3).
        down_for: seconds a failing node without ``Retry-After`` gets no
            traffic (1).
        prefetch: snowflake IDs kept fetched ahead for ``next_id`` (0: off).
        prefetch_max_age: seconds after which prefetched IDs are dropped (1).
        subset: how many nodes the client talks to (6): the first of its
            rendezvous ranking of the node list, round-robin; only when
            every node of the subset is down or tried does a batch go on to
            the next nodes of the ranking. At least the cluster's size:
            every node.
        subset_id: keys the ranking (0: a random ID drawn once per process);
            clients with the same ID talk to the same nodes. For tests.

    Raises:
        InvalidConfigError: a bad argument.
        NoNodeError: with ``bootstrap``, no seed answered.
    """

    def __init__(
        self,
        nodes: Optional[Sequence[str]] = None,
        *,
        bootstrap: Optional[Sequence[str]] = None,
        bootstrap_interval: float = 10.0,
        api_token: Optional[str] = None,
        tag_tokens: Optional[Mapping[str, str]] = None,
        ca_file: Optional[str] = None,
        cert_file: Optional[str] = None,
        key_file: Optional[str] = None,
        ssl_context: Optional[ssl.SSLContext] = None,
        request_timeout: float = 2.0,
        max_batch: int = 1000,
        max_in_flight: int = 1,
        stall_after: float = 0.05,
        attempts: int = 3,
        down_for: float = 1.0,
        prefetch: int = 0,
        prefetch_max_age: float = 1.0,
        subset: int = 6,
        subset_id: int = 0,
    ) -> None:
        bad = InvalidConfigError
        if isinstance(nodes, str) or isinstance(bootstrap, str):
            raise bad("nodes and bootstrap are lists of host:port, not one string")
        if bool(nodes) == bool(bootstrap):
            raise bad("give exactly one of nodes and bootstrap")
        for a in list(nodes or []) + list(bootstrap or []):
            try:
                split_host_port(a)
            except (ValueError, AttributeError, TypeError):
                raise bad(f"node {a!r} is not host:port") from None
        for name, v, lo, hi in (
            ("max_batch", max_batch, 1, 1_000_000),
            ("attempts", attempts, 1, 100),
            ("prefetch", prefetch, 0, 10_000_000),
            ("subset", subset, 1, 4096),
            ("subset_id", subset_id, 0, (1 << 64) - 1),
        ):
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                raise bad(f"{name} {v!r}: want {lo}..{hi}")
        if not isinstance(max_in_flight, int) or isinstance(max_in_flight, bool) or not 1 <= max_in_flight <= 1024:
            raise bad(f"max_in_flight {max_in_flight!r}: want 1..1024")
        for name, f in (("request_timeout", request_timeout), ("stall_after", stall_after), ("down_for", down_for), ("prefetch_max_age", prefetch_max_age)):
            if not isinstance(f, (int, float)) or f <= 0:
                raise bad(f"{name} {f!r}: want a positive number of seconds")
        if not isinstance(bootstrap_interval, (int, float)) or not 0.01 <= bootstrap_interval <= 3600:
            raise bad(f"bootstrap_interval {bootstrap_interval!r}: want 0.01..3600 seconds")
        if api_token is not None and api_token != "" and not _valid_token(api_token):
            raise bad("api_token: want 1..512 printable ASCII characters without spaces")
        tokens = dict(tag_tokens or {})
        for tag, tok in tokens.items():
            if not _valid_token(tok):
                raise bad(f"the token of tag {tag!r}: want 1..512 printable ASCII characters without spaces")
        if ssl_context is not None and (ca_file or cert_file or key_file):
            raise bad("give ssl_context or ca_file/cert_file/key_file, not both")
        if (cert_file is None) != (key_file is None) and cert_file is None:
            raise bad("key_file without cert_file")
        if ca_file or cert_file:
            try:
                ssl_context = ssl.create_default_context(cafile=ca_file)
                if cert_file:
                    ssl_context.load_cert_chain(cert_file, key_file)
            except (OSError, ssl.SSLError) as e:
                raise bad(f"TLS files: {e}") from None

        self._max_batch = max_batch
        self._max_in_flight = max_in_flight
        self._stall_after = float(stall_after)
        self._attempts = attempts
        self._timeout = float(request_timeout)
        self._down_for = float(down_for)
        self._tag_tokens = tokens
        self._api_headers = {"Authorization": "Bearer " + api_token} if api_token else None
        self._pool = Pool(ssl_context)
        self._closed = False
        self._close_lock = threading.Lock()
        self._node_max = 0  # the smallest count a node said it accepts (0: none)
        self._nodes_lock = threading.Lock()
        self._nodes: List[_Node] = []
        self._sub: List[_Node] = []
        self._spill: List[_Node] = []
        self._subset = subset
        self._subset_id = subset_id if subset_id else _PROCESS_ID
        self._next = 0
        self._segs: Dict[str, _Batcher] = {}
        self._segs_lock = threading.Lock()
        self._ids = _Batcher(self, _Endpoint(_SVC_IDS, "/ids?count=", "IDs", self._api_headers))
        self._bootstrap: Optional[_discovery.Bootstrap] = None
        if nodes:
            self._set_nodes(list(nodes))
        else:
            assert bootstrap is not None
            self._bootstrap = _discovery.Bootstrap(bootstrap, float(bootstrap_interval), self._timeout, ssl_context, self._set_nodes)
            self._set_nodes(self._bootstrap.nodes)
        self._prefetch: Optional[_Prefetch] = _Prefetch(self, prefetch, float(prefetch_max_age)) if prefetch else None

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the client: calls waiting or in flight fail with
        :class:`ClosedError`, every connection is closed, the client's
        threads end. Closing twice is no error."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self._prefetch is not None:
            self._prefetch.stop()
        if self._bootstrap is not None:
            self._bootstrap.close()
        self._pool.close()  # requests in flight fail at once
        if self._prefetch is not None:
            self._prefetch.close()
        self._ids.close()
        with self._segs_lock:
            segs = list(self._segs.values())
        for b in segs:
            b.close()

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    @property
    def nodes(self) -> List[str]:
        """The nodes the client knows now (static: the list given;
        bootstrap: the last list read)."""
        with self._nodes_lock:
            return [n.addr for n in self._nodes]

    # -- public calls ------------------------------------------------------

    def next_id(self, *, timeout: Optional[float] = None) -> int:
        """One new snowflake ID.

        Args:
            timeout: the caller's deadline for this call, in seconds (None:
                only the per-request ``request_timeout`` applies).
        """
        deadline = self._deadline(timeout)
        if self._prefetch is not None:
            v = self._prefetch.take(deadline)
            if v is not None:
                return v
            if self._closed:
                raise ClosedError()
        return self._ids.get(1, deadline)[0]

    def next_ids(self, n: int, *, timeout: Optional[float] = None) -> List[int]:
        """``n`` new snowflake IDs (1 ≤ n ≤ 2^20), increasing."""
        deadline = self._deadline(timeout)
        return self._ids.get(_count(n, "IDs"), deadline)

    def next_gene(self, key: int, *, timeout: Optional[float] = None) -> int:
        """One new snowflake ID that ends in ``key``'s low gene bits
        (``id % 2**K == key % 2**K`` on a cluster run with ``--gene-bits K``).
        Each call is its own request, never merged nor prefetched. A cluster
        without gene bits refuses it: :class:`RejectedError` ``gene_off``."""
        deadline = self._deadline(timeout)
        if not isinstance(key, int) or isinstance(key, bool) or not 0 <= key <= _MAX_INT64:
            raise RejectedError(f"next ID with gene {key!r}: want a gene from 0 to 2^63-1", code="invalid_gene")
        ep = _Endpoint(_SVC_IDS, f"/ids?gene={key}&count=", f"IDs with gene {key}", self._api_headers)
        return self._direct(ep, 1, deadline)[0]

    @overload
    def next_segment(self, tag: str, n: None = None, *, timeout: Optional[float] = None) -> int: ...

    @overload
    def next_segment(self, tag: str, n: int, *, timeout: Optional[float] = None) -> List[int]: ...

    def next_segment(self, tag: str, n: Optional[int] = None, *, timeout: Optional[float] = None) -> Union[int, List[int]]:
        """The next dense ID of ``tag`` (segment mode), or, with ``n``, a list
        of ``n`` (increasing for a plain tag; an opaque tag's are distinct,
        in no order). An unknown tag is :class:`RejectedError` ``unknown_tag``."""
        deadline = self._deadline(timeout)
        b = self._segment(tag)
        if n is None:
            return b.get(1, deadline)[0]
        return b.get(_count(n, f"dense IDs of {tag}"), deadline)

    def next_uuid(self, *, timeout: Optional[float] = None) -> uuid.UUID:
        """One new UUIDv7 (made by a node from a snowflake ID it issued):
        its own request, never merged nor prefetched."""
        deadline = self._deadline(timeout)
        ep = _Endpoint(_SVC_IDS, "/uuids?count=", "UUIDs", self._api_headers, uuids=True)
        return self._direct(ep, 1, deadline)[0]  # type: ignore[return-value]

    def next_segment_text(self, tag: str, n: int = 1, *, format: Optional[str] = None, timeout: Optional[float] = None) -> List[str]:  # noqa: A002 - the API's parameter
        """The next ``n`` IDs of ``tag`` as the node writes them, one string
        each: ``GET /segment/{tag}?count=n`` as text. A reset tag's IDs
        (``20261207000123``, ``ORD-20261207-000123``) are only served this
        way when they are not numbers; a plain tag's are decimal. With
        ``format`` (``"base62"``, ``"base58"``, ``"base36"``, ``"base32"``)
        the node encodes each ID (a reset tag refuses it: ``invalid_format``).
        Its own request, never merged; the strings in the node's order."""
        deadline = self._deadline(timeout)
        n = _count(n, f"IDs of {tag} as text")
        query = ""
        if format is not None and format != "text":
            if format not in ENCODINGS:
                raise RejectedError(f"format {format!r}: want text or one of {', '.join(ENCODINGS)}", code="invalid_format")
            query = f"format={format}&"
        why = _tag_error(tag)
        if why is not None:
            raise RejectedError(f"tag {tag!r}: {why}", code="invalid_tag")
        tok = self._tag_tokens.get(tag)
        ep = _Endpoint(
            _SVC_SEGMENTS,
            "/segment/" + _path_tag(tag) + "?" + query + "count=",
            f"IDs of {tag} as text",
            {"Authorization": "Bearer " + tok} if tok else None,
            unordered=True,
            has_tag_max=True,
            text=True,
        )
        return self._direct(ep, n, deadline)

    def bounds(self, from_: Union[datetime, int], to: Union[datetime, int], *, timeout: Optional[float] = None) -> "Bounds":
        """The smallest and largest ID (and UUID) a node of the cluster can
        have issued in ``[from_, to)``: ``GET /bounds``, arithmetic on the
        layout, answered by any node (also one out of service). ``from_`` and
        ``to`` are aware datetimes or Unix milliseconds; the node truncates
        each to the start of its tick, and the answer gives the range it
        used. A range the layout cannot hold (reversed, empty, before the
        epoch, past the time field's end) is :class:`RejectedError`
        ``invalid_range``."""
        deadline = self._deadline(timeout)
        a, b = _unix_ms(from_, "from_"), _unix_ms(to, "to")
        ep = _Endpoint(_SVC_IDS, f"/bounds?from={a}&to={b}", f"the bounds of [{a}, {b}) ms", None, bounds=True)
        return self._direct(ep, 1, deadline)[0]  # type: ignore[no-any-return]

    # -- internals ---------------------------------------------------------

    def _deadline(self, timeout: Optional[float]) -> Optional[float]:
        if self._closed:
            raise ClosedError()
        if timeout is None:
            return None
        if not isinstance(timeout, (int, float)) or timeout != timeout:
            raise TypeError(f"timeout {timeout!r}: want seconds")
        if timeout <= 0:
            raise DeadlineExceededError("the caller's deadline passed before the call")
        return time.monotonic() + timeout

    def _segment(self, tag: str) -> _Batcher:
        with self._segs_lock:
            if self._closed:
                raise ClosedError()
            b = self._segs.get(tag)
            if b is not None:
                return b
            why = _tag_error(tag)
            if why is not None:
                raise RejectedError(f"tag {tag!r}: {why}", code="invalid_tag")
            tok = self._tag_tokens.get(tag)
            ep = _Endpoint(
                _SVC_SEGMENTS,
                "/segment/" + _path_tag(tag) + "?count=",
                f"dense IDs of {tag}",
                {"Authorization": "Bearer " + tok} if tok else None,
                unordered=True,
                has_tag_max=True,
            )
            b = self._segs[tag] = _Batcher(self, ep)
            return b

    def _direct(self, ep: _Endpoint, n: int, deadline: Optional[float]) -> list:
        want = _always if deadline is None else (lambda: time.monotonic() < deadline)  # type: ignore[operator]
        try:
            out = self._serve_clamped(ep, n, deadline, False, want)
        except BaseException as e:
            raise _caller_err(deadline, ep.what, e) from None
        if deadline is not None and time.monotonic() >= deadline:
            raise DeadlineExceededError(f"next {ep.what}: the caller's deadline passed")
        return out

    def _set_nodes(self, addrs: List[str]) -> None:
        """Replace the node list (a node listed twice counts once), keeping
        what is known of the nodes still there, and pick the subset anew:
        the first ``subset`` nodes of the client's rendezvous ranking."""
        with self._nodes_lock:
            old = {n.addr: n for n in self._nodes}
            nodes: List[_Node] = []
            seen = set()
            for a in addrs:
                if a in seen:
                    continue
                seen.add(a)
                nodes.append(old.get(a) or _Node(a))
            ranked = sorted(nodes, key=lambda nd: _rank(self._subset_id, nd.addr), reverse=True)
            inside = {id(nd) for nd in ranked[: self._subset]}
            self._nodes = nodes
            self._sub = [nd for nd in nodes if id(nd) in inside]  # in the list's order
            self._spill = ranked[self._subset :]  # in the ranking's order
            keep = [nd.addr for nd in self._sub]
        self._pool.keep_only(keep)

    def _pick(self, svc: int, tried: List[str]) -> Optional[str]:
        """The next node up for svc not tried yet: the subset's,
        round-robin; when none of it is, the first of the other nodes in
        the client's ranking."""
        with self._nodes_lock:
            sub = self._sub
            k = len(sub)
            now = time.monotonic()
            for _ in range(k):
                nd = sub[self._next % k]
                self._next += 1
                if nd.addr not in tried and now >= nd.down_until[svc]:
                    return nd.addr
            for nd in self._spill:
                if nd.addr not in tried and now >= nd.down_until[svc]:
                    return nd.addr
        return None

    @property
    def subset(self) -> List[str]:
        """The nodes the client talks to, in the order of ``nodes``: the
        first ``subset`` of its ranking (all of them when there are no more)."""
        with self._nodes_lock:
            return [n.addr for n in self._sub]

    def _mark_down(self, addr: str, svc: int, secs: float, err: BaseException) -> None:
        with self._nodes_lock:
            for nd in self._nodes:
                if nd.addr == addr:
                    nd.down_until[svc] = time.monotonic() + secs
                    nd.last_err[svc] = err

    def _no_node(self, ep: _Endpoint, tried: List[str], failures: List[BaseException]) -> NoNodeError:
        causes = list(failures)
        not_tried: List[str] = []
        with self._nodes_lock:
            sub = {id(nd) for nd in self._sub}
            for nd in self._nodes:
                last = nd.last_err[ep.svc]
                if nd.addr in tried:
                    continue
                if last is None:
                    if id(nd) in sub:  # the subset's nodes, not the rest of the cluster
                        not_tried.append(nd.addr)
                elif last not in causes:
                    causes.append(last)
        return NoNodeError(ep.what, causes, not_tried)

    def _serve_clamped(self, ep: _Endpoint, n: int, deadline: Optional[float], merged: bool, want: Callable[[], bool]) -> list:
        """_serve within what the nodes accept: a node's 400 invalid_count
        naming a ``max`` below the count asked is asked again in parts of at
        most that, remembered for later requests; a tag's ``tag_max`` is
        learnt for the tag (a merged request is split, one caller's own
        refused)."""
        limit = self._limit_for(ep)
        if limit == 0 or n <= limit:
            try:
                return self._serve(ep, n, deadline, want)
            except RejectedError as e:
                node_max, tag_max = _refused_above(e, n)
                if tag_max and ep.tag_max is not None:
                    ep.tag_max = tag_max
                    if not merged:
                        raise
                    limit = self._limit_for(ep)
                elif node_max:
                    limit = min(self._learn_max(node_max, e), self._limit_for(ep) or node_max)
                else:
                    raise
        out: list = []
        got = 0
        relearned = 0
        while got < n:
            size = min(n - got, limit)
            try:
                part = self._serve(ep, size, deadline, want)
            except RejectedError as e:
                node_max, tag_max = _refused_above(e, size)
                if tag_max and ep.tag_max is not None and relearned < _MAX_RELEARN:
                    relearned += 1
                    ep.tag_max = tag_max
                    limit = self._limit_for(ep)
                    continue
                if node_max and relearned < _MAX_RELEARN:
                    relearned += 1
                    limit = min(self._learn_max(node_max, e), self._limit_for(ep) or node_max)
                    continue
                raise
            out.extend(part)
            got += size
        if not ep.text:
            out.sort()
        return out

    def _limit_for(self, ep: _Endpoint) -> int:
        limit = self._node_max
        tm = ep.tag_max
        if tm and (limit == 0 or tm < limit):
            limit = tm
        return limit

    def _learn_max(self, lim: int, err: BaseException) -> int:
        with self._nodes_lock:
            if self._node_max and self._node_max <= lim:
                return self._node_max
            self._node_max = lim
        log.warning("snowflaked client: a node accepts at most %d IDs a request (max_batch %d); asking for at most that: %s", lim, self._max_batch, err)
        return lim

    def _serve(self, ep: _Endpoint, n: int, deadline: Optional[float], want: Callable[[], bool]) -> list:
        """n IDs of ep, failing over: up to ``attempts`` nodes, each for at
        most ``request_timeout``, none past ``deadline``."""
        tried: List[str] = []
        failures: List[BaseException] = []
        for _ in range(self._attempts):
            if not want():
                raise _GaveUp()
            node = self._pick(ep.svc, tried)
            if node is None:
                break
            tried.append(node)
            d = time.monotonic() + self._timeout
            clipped = False
            if deadline is not None and deadline < d:
                d, clipped = deadline, True
            try:
                return self._request(node, ep, n, d, clipped)
            except NodeFailure as e:
                if self._closed:
                    raise ClosedError() from None
                if clipped and e.timeout:
                    # The callers' deadline, not the node's fault: no failover.
                    raise NoNodeError(ep.what, failures + [e]) from None
                failures.append(e)
                log.warning("snowflaked client: failing over from %s: %s", node, e)
                if deadline is not None and time.monotonic() >= deadline:
                    break
        raise self._no_node(ep, tried, failures)

    def _request(self, node: str, ep: _Endpoint, n: int, deadline: float, clipped: bool) -> list:
        if ep.bounds:
            limit, path = _MAX_BOUNDS_BODY, ep.path
        else:
            path = ep.path + str(n)
            if ep.uuids:
                limit = n * _MAX_UUID_LINE
            elif ep.svc == _SVC_SEGMENTS:
                limit = n * _MAX_TEXT_LINE
            else:
                limit = n * _MAX_ID_LINE
        try:
            a = self._pool.get(node, path, ep.headers, deadline, limit)
        except ClosedError:
            raise
        except socket.timeout as e:
            f = NodeFailure(node, f"timeout: {e}", timeout=True)
            if not clipped:
                self._mark_down(node, ep.svc, self._down_for, f)
            raise f from None
        except (OSError, http.client.HTTPException, NoAnswer, BadAnswer, ValueError) as e:
            if self._closed:
                raise ClosedError() from None
            f = NodeFailure(node, f"{type(e).__name__}: {e}", timeout=isinstance(e, TimeoutError))
            if not (clipped and f.timeout):
                self._mark_down(node, ep.svc, self._down_for, f)
            raise f from None
        st = a.status
        if st == 200:
            try:
                if ep.uuids:
                    return _parse_uuids(a.body, n)
                if ep.text:
                    return _parse_text(a.body, n)
                if ep.bounds:
                    return [_parse_bounds(a.body)]
                return _parse_ids(a.body, n, not ep.unordered)
            except ValueError as e:
                if ep.svc == _SVC_SEGMENTS and not ep.text:
                    word = _not_a_number(a.body, n)
                    if word is not None:
                        # A reset tag's IDs as text: every node answers so.
                        raise RejectedError(
                            f"{ep.what}: the tag's IDs are not numbers (the node answered {word!r}); "
                            "ask for them with next_segment_text",
                            node=node,
                            status=200,
                        ) from None
                f = NodeFailure(node, f"bad answer to {n} {ep.what}: {e}", status=200)
                self._mark_down(node, ep.svc, self._down_for, f)
                raise f from None
        code, text = _error_text(a.body)
        if st == 503:
            f = NodeFailure(node, f"503 {text}", status=503, code=code)
            if code != "batch_timeout":  # the batch's doing, not the node's
                self._mark_down(node, ep.svc, a.retry_after or self._down_for, f)
            raise f
        if st == 404:
            if code == "unknown_tag":
                raise _rejected(node, st, a.body)
            f = NodeFailure(node, f"404 {text}", status=404, code=code)
            self._mark_down(node, ep.svc, self._down_for, f)
            raise f
        if 400 <= st < 500:
            raise _rejected(node, st, a.body)
        f = NodeFailure(node, f"status {st} {text}", status=st, code=code)
        self._mark_down(node, ep.svc, self._down_for, f)
        raise f


def _refused_above(err: RejectedError, n: int) -> Tuple[int, int]:
    if err.code != "invalid_count":
        return 0, 0
    node_max = err.max if err.max is not None and 1 <= err.max < n else 0
    tag_max = err.tag_max if err.tag_max is not None and 1 <= err.tag_max < n else 0
    return node_max, tag_max


def _rank(key: int, addr: str) -> int:
    """The rendezvous (highest-random-weight) score of addr for key."""
    h = hashlib.blake2b(addr.encode("utf-8", "surrogatepass"), digest_size=8, key=key.to_bytes(8, "big"))
    return int.from_bytes(h.digest(), "big")


def _count(n: object, what: str) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_COUNT:
        raise RejectedError(f"next {n!r} {what}: want 1..{MAX_COUNT}", code="invalid_count")
    return n

