"""The ordered log of ingested batches: one interface, two implementations (a local WAL, Redis Streams).

A log holds :class:`models.store.records.IngestBatch` records numbered 1, 2, ... without gaps.
Appending is a compare-and-append: the writer says which sequence it validated the batch against,
and the log refuses (:class:`LogConflict`) when another writer appended since. That one rule makes
validation and idempotency exact across API server processes and replicas: on a conflict the writer
reads the new batches, validates again and retries (:class:`serve.ingest.writer.Ingestor`).

An append returns only once the record is durable by the log's policy (the WAL: written and
fsynced; Redis: acknowledged by a server that fsyncs its append-only file, see docs/ingestion.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Protocol

from models.store.records import IngestBatch

# Reads hand back at most this many batches at a time, so a worker that replays a long log applies
# (and reports) progress in steps rather than holding everything in memory at once.
READ_LIMIT = 256


class LogError(Exception):
    """The log cannot be read or written (corrupt file, broker unreachable): nothing was appended."""


class LogConflict(Exception):
    """Another writer appended after the sequence the batch was validated against."""

    def __init__(self, expected: int, actual: int) -> None:
        super().__init__(f"log is at sequence {actual}, the batch was validated at {expected}")
        self.expected = expected
        self.actual = actual


class Log(Protocol):
    """What the write side and the workers need from a log (see the module docstring)."""

    def append(self, batch: IngestBatch, expected: int) -> int:
        """Append ``batch`` as sequence ``expected + 1`` and return that sequence once durable.

        ``batch.sequence`` is ignored (the log numbers records).

        Raises:
            LogConflict: the log's last sequence is not ``expected``.
            LogError: nothing could be appended.
        """
        ...

    def read(self, after: int, limit: int = READ_LIMIT) -> list[IngestBatch]:
        """The durable batches with a sequence above ``after``, in order, at most ``limit``
        (fewer, possibly none, when the log has no more yet)."""
        ...

    def last_sequence(self) -> int:
        """Sequence of the last durable batch (0: empty log)."""
        ...

    def oldest(self) -> int:
        """Sequence of the oldest batch still held (batches before it were folded into a compacted
        snapshot and pruned); ``last_sequence() + 1`` when none is held."""
        ...

    def prune(self, through: int) -> object:
        """Drop the batches up to ``through`` (a compacted snapshot holds them)."""
        ...

    wakes_on_append: bool
    """Whether :meth:`wait` returns as soon as a batch is appended (else it sleeps its timeout)."""

    def wait(self, timeout: float) -> None:
        """Block until a batch may have been appended, or ``timeout`` seconds."""
        ...

    def close(self) -> None:
        ...


def encode_batch(batch: IngestBatch) -> bytes:
    """One batch as compact JSON bytes (floats round-trip exactly; non-finite values are refused)."""
    body = {"sequence": batch.sequence, "kind": batch.kind, "rows": batch.rows, "key": batch.key,
            "received_at": batch.received_at, "meta": batch.meta}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def decode_batch(data: bytes, sequence: int | None = None) -> IngestBatch:
    """Inverse of :func:`encode_batch`; ``sequence`` overrides the stored one (a broker numbers records).

    Raises:
        LogError: not a batch.
    """
    try:
        body: dict[str, Any] = json.loads(data)
        return IngestBatch(sequence=int(body["sequence"] if sequence is None else sequence),
                           kind=body["kind"], rows=body["rows"], key=body.get("key"),
                           received_at=float(body.get("received_at", 0.0)), meta=body.get("meta") or {})
    except (ValueError, KeyError, TypeError) as e:
        raise LogError(f"not an ingest batch record: {e}") from e


def numbered(batch: IngestBatch, sequence: int) -> IngestBatch:
    """``batch`` with its log sequence."""
    return IngestBatch(sequence, batch.kind, batch.rows, batch.key, batch.received_at, batch.meta)


def check_order(batches: Iterable[IngestBatch], after: int) -> None:
    """Raise :class:`LogError` unless ``batches`` are numbered ``after + 1, after + 2, ...``."""
    expected = after + 1
    for batch in batches:
        if batch.sequence != expected:
            raise LogError(f"log out of order: found sequence {batch.sequence} where {expected} was due")
        expected += 1
