"""Decoding snowflake IDs with a cluster's layout, as a node's ``/decode`` does."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Optional

#: The default epoch of a cluster: 2024-01-01T00:00:00Z.
DEFAULT_EPOCH = datetime(2024, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Decoded:
    """The parts of a snowflake ID.

    Attributes:
        id: the ID.
        timestamp_ms: the start of the ID's tick, Unix milliseconds.
        worker_id: the worker that issued it.
        sequence: the per-tick counter (without the gene bits).
        gene: the gene field (the low ``gene_bits`` bits), ``None`` when the
            layout has no gene bits.
    """

    id: int
    timestamp_ms: int
    worker_id: int
    sequence: int
    gene: Optional[int] = None

    @property
    def time(self) -> datetime:
        """The ID's timestamp as an aware UTC datetime."""
        return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=self.timestamp_ms)


@dataclass(frozen=True)
class Layout:
    """A cluster's ID layout: the fields of a node's ``/clock`` ``layout``,
    ``epoch`` and ``time_unit``, and the cluster's gene bits.

    The default is 41/10/12 bits, epoch 2024-01-01T00:00:00Z, 1 ms ticks, no
    gene bits. An ID is ``tick << (worker_bits + sequence_bits) |
    worker << sequence_bits | sequence``; with gene bits, the low
    ``gene_bits`` bits of the sequence field are the gene.
    """

    time_bits: int = 41
    worker_bits: int = 10
    sequence_bits: int = 12
    gene_bits: int = 0
    epoch: datetime = DEFAULT_EPOCH
    unit: timedelta = timedelta(milliseconds=1)

    def __post_init__(self) -> None:
        for name in ("time_bits", "worker_bits", "sequence_bits", "gene_bits"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 0:
                raise ValueError(f"layout: {name} {v!r} is not a whole number >= 0")
        if self.time_bits + self.worker_bits + self.sequence_bits > 63:
            raise ValueError("layout: more than 63 bits")
        if self.gene_bits > self.sequence_bits:
            raise ValueError("layout: more gene bits than sequence bits")
        if self.epoch.tzinfo is None:
            raise ValueError("layout: the epoch must be an aware datetime")
        if self.unit <= timedelta(0):
            raise ValueError("layout: the unit must be positive")

    @property
    def epoch_ms(self) -> int:
        """The epoch in Unix milliseconds."""
        d = self.epoch - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return (d.days * 86_400_000) + (d.seconds * 1000) + d.microseconds // 1000

    @property
    def unit_ms(self) -> float:
        """A tick's length in milliseconds."""
        return self.unit / timedelta(milliseconds=1)

    @property
    def id_bits(self) -> int:
        """The bits of an ID: time + worker + sequence (63 for 41/10/12, 53
        for ``js53``), the ``bits`` of :func:`snowflaked.encode_id`."""
        return self.time_bits + self.worker_bits + self.sequence_bits

    @property
    def max_id(self) -> int:
        """The largest ID of the layout."""
        return (1 << (self.time_bits + self.worker_bits + self.sequence_bits)) - 1

    def decode(self, id: int) -> Decoded:  # noqa: A002 - the natural name
        """Split ``id`` into its timestamp, worker, sequence and gene.

        Raises :class:`ValueError` for a negative ID or one above the layout's
        largest.
        """
        if not isinstance(id, int) or isinstance(id, bool):
            raise TypeError(f"decode: want an int, got {type(id).__name__}")
        if id < 0:
            raise ValueError(f"decode: {id} is negative")
        if id > self.max_id:
            raise ValueError(f"decode: {id} is above {self.max_id}, the largest ID of the layout")
        tick = id >> (self.worker_bits + self.sequence_bits)
        unit_us = self.unit // timedelta(microseconds=1)
        ts = self.epoch_ms + (tick * unit_us) // 1000
        seq_field = id & ((1 << self.sequence_bits) - 1)
        gene = None
        if self.gene_bits > 0:
            gene = id & ((1 << self.gene_bits) - 1)
        return Decoded(
            id=id,
            timestamp_ms=ts,
            worker_id=(id >> self.sequence_bits) & ((1 << self.worker_bits) - 1),
            sequence=seq_field >> self.gene_bits,
            gene=gene,
        )
