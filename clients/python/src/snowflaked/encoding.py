"""String IDs: the fixed-width radix encodings of a node's ``format=base62``
(``base58``, ``base36``, ``base32``), for snowflake IDs, dense IDs and UUIDs.

Each encoding's alphabet is in ASCII order and every string of one kind of
value has the same width, so strings sort byte-wise as their numbers do. The
width is the fewest digits ``d`` with ``base**d >= 2**bits``: ``bits`` is the
layout's time + worker + sequence bits for a snowflake ID (63 by default, 53
for ``js53``), 63 for a dense ID, 128 for a UUID::

    >>> encode_id(2**63 - 1, "base62")
    'AzL8n0Y58m7'
    >>> decode_id("AzL8n0Y58m7", "base62")
    9223372036854775807
"""

from __future__ import annotations

import uuid
from typing import Dict, Union

from .errors import SnowflakedError

__all__ = [
    "ENCODINGS",
    "EncodingError",
    "decode_id",
    "decode_uuid",
    "encode_id",
    "encode_uuid",
    "encoded_width",
]

#: The alphabets, index 0 first (each in ASCII order).
ALPHABETS: Dict[str, str] = {
    "base62": "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "base58": "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz",
    "base36": "0123456789abcdefghijklmnopqrstuvwxyz",
    "base32": "0123456789ABCDEFGHJKMNPQRSTVWXYZ",
}
#: The encodings' names, as a node's ``format`` takes them.
ENCODINGS = tuple(ALPHABETS)


def _table(name: str) -> Dict[str, int]:
    t = {ch: i for i, ch in enumerate(ALPHABETS[name])}
    if name == "base36":
        t.update({ch.upper(): i for ch, i in list(t.items())})
    elif name == "base32":  # Crockford: either case; I, L read as 1, O as 0
        t.update({ch.lower(): i for ch, i in list(t.items())})
        t.update({"I": 1, "i": 1, "L": 1, "l": 1, "O": 0, "o": 0})
    return t


_DIGITS = {name: _table(name) for name in ALPHABETS}


class EncodingError(SnowflakedError, ValueError):
    """A string that is not a value of the encoding, or a value too large to
    encode (also a :class:`ValueError`).

    Attributes:
        encoding: the encoding's name (``"base62"``, ...).
        kind: ``"width"`` (not the encoding's width for the value's bits),
            ``"character"`` (a character outside the alphabet), ``"range"``
            (a value of more bits than the kind of value has, or negative),
            or ``"encoding"`` (no such encoding).
        index: with ``"character"``, the index (from 0) of the first bad
            character; else ``None``.

    A string with a bad character is ``"character"`` whatever its width:
    the character is checked first, as a node does.
    """

    def __init__(self, message: str, *, encoding: str, kind: str, index: Union[int, None] = None) -> None:
        super().__init__(message)
        self.encoding = encoding
        self.kind = kind
        self.index = index


def _alphabet(encoding: str) -> str:
    a = ALPHABETS.get(encoding) if isinstance(encoding, str) else None
    if a is None:
        raise EncodingError(f"encoding {encoding!r}: want one of {', '.join(ENCODINGS)}", encoding=str(encoding), kind="encoding")
    return a


def _bits(bits: object) -> int:
    if not isinstance(bits, int) or isinstance(bits, bool) or not 1 <= bits <= 128:
        raise ValueError(f"bits {bits!r}: want 1..128")
    return bits


def encoded_width(encoding: str, bits: int = 63) -> int:
    """The width of the encoding's strings for values of ``bits`` bits: the
    fewest digits d with base**d >= 2**bits (63 bits: 11, 11, 13, 13 for
    base62, base58, base36, base32; 128 bits: 22, 22, 25, 26)."""
    base = len(_alphabet(encoding))
    top = 1 << _bits(bits)
    d, p = 0, 1
    while p < top:
        p *= base
        d += 1
    return d


def _encode(v: int, encoding: str, bits: int, what: str) -> str:
    a = _alphabet(encoding)
    if v < 0 or v >> bits:
        raise EncodingError(f"{encoding}: {what} {v} does not fit {bits} bits (0 to 2^{bits}-1)", encoding=encoding, kind="range")
    base = len(a)
    out = []
    for _ in range(encoded_width(encoding, bits)):
        v, r = divmod(v, base)
        out.append(a[r])
    return "".join(reversed(out))


def _decode(s: str, encoding: str, bits: int, what: str) -> int:
    _alphabet(encoding)
    if not isinstance(s, str):
        raise TypeError(f"decode: want a str, got {type(s).__name__}")
    digits = _DIGITS[encoding]
    for i, ch in enumerate(s):  # a bad character first: it says more than the width
        if ch not in digits:
            raise EncodingError(
                f"{encoding} {_quote(s)}: {ch!r} at position {i + 1} is not a {encoding} digit", encoding=encoding, kind="character", index=i
            )
    w = encoded_width(encoding, bits)
    if len(s) != w:
        raise EncodingError(f"{encoding} {_quote(s)} has {len(s)} characters, want {w} for {what}", encoding=encoding, kind="width")
    base = len(ALPHABETS[encoding])
    v = 0
    for ch in s:
        v = v * base + digits[ch]
    if v >> bits:
        raise EncodingError(f"{encoding} {_quote(s)} is 2^{bits} or more: not {what}", encoding=encoding, kind="range")
    return v


def _quote(s: str) -> str:
    return repr(s[:40]) + ("…" if len(s) > 40 else "")


def encode_id(id: int, encoding: str, bits: int = 63) -> str:  # noqa: A002 - the natural name
    """An ID (snowflake or dense) in ``encoding``, of the width for ``bits``
    bits (a layout's time + worker + sequence bits; 63 by default).

    Raises :class:`EncodingError` (``kind="range"``) for a negative ID or one
    of more than ``bits`` bits."""
    if not isinstance(id, int) or isinstance(id, bool):
        raise TypeError(f"encode_id: want an int, got {type(id).__name__}")
    return _encode(id, encoding, _bits(bits), "ID")


def decode_id(s: str, encoding: str, bits: int = 63) -> int:
    """The ID that ``s`` encodes (the width for ``bits`` bits exactly;
    base36 and base32 in either case, base32 also reading I and L as 1 and O
    as 0).

    Raises :class:`EncodingError`: ``kind`` ``"width"``, ``"character"`` or
    ``"range"`` (a value of more than ``bits`` bits)."""
    return _decode(s, encoding, _bits(bits), f"an ID of {bits} bits")


def encode_uuid(u: Union[uuid.UUID, str], encoding: str) -> str:
    """A UUID (its 16 bytes as a big-endian integer) in ``encoding``: 22
    characters in base62 and base58, 25 in base36, 26 in base32."""
    if isinstance(u, str):
        u = uuid.UUID(u)
    if not isinstance(u, uuid.UUID):
        raise TypeError(f"encode_uuid: want a uuid.UUID or str, got {type(u).__name__}")
    return _encode(u.int, encoding, 128, "UUID")


def decode_uuid(s: str, encoding: str) -> uuid.UUID:
    """The UUID that ``s`` encodes. Raises :class:`EncodingError`."""
    return uuid.UUID(int=_decode(s, encoding, 128, "a UUID"))
