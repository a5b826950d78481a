"""The write path: validate a batch against the current graph and append it to the log, exactly once.

:meth:`Ingestor.ingest` is called by the HTTP routes and the file drop. Under one lock per process
it brings its :class:`serve.ingest.view.GraphView` up to date, answers a retried idempotency key from
the log, validates, and compare-and-appends (:class:`models.store.log.format.Log`). When another process or
replica appended in between, the append is refused and the batch is validated again against the
newer graph, so two writers can never both create the same customer or both take one key.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from models.store.log.format import Log, LogConflict, LogError, numbered
from models.store.records import IngestBatch
from serve.ingest.metrics import IngestMetrics
from serve.ingest.problems import BatchRejected, Problem
from serve.ingest.validation import Validator
from serve.ingest.view import GraphView

MAX_ATTEMPTS = 20
MAX_KEY_LENGTH = 255


@dataclass(frozen=True)
class Accepted:
    """An acknowledged batch: its log ``sequence``, its row count, and whether it was a retry."""

    sequence: int
    accepted: int
    replayed: bool = False


def digest(kind: str, rows: list[Any]) -> str:
    """sha256 of a batch as sent (kind + rows), to tell a retry from a different batch under one key."""
    body = json.dumps([kind, rows], sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def check_key(key: str | None) -> str | None:
    """An idempotency key must be 1..255 printable ASCII characters."""
    if key is not None and not (0 < len(key) <= MAX_KEY_LENGTH and key.isascii() and key.isprintable()):
        message = f"must be 1 to {MAX_KEY_LENGTH} printable ASCII characters"
        raise BatchRejected([Problem(None, "Idempotency-Key", message)])
    return key


class Ingestor:
    """Validates and appends batches (see the module docstring).

    Args:
        log: where batches go.
        view: the graph as the log has it, caught up before each batch.
        validator: the row rules.
        max_rows: most rows per batch (413 beyond).
        metrics: where accepted and refused rows are counted (``None``: not counted).
        clock: wall-clock seconds, the batch's ``received_at``.
    """

    def __init__(self, log: Log, view: GraphView, validator: Validator, max_rows: int = 10_000,
                 metrics: IngestMetrics | None = None, clock: Callable[[], float] = time.time) -> None:
        self.log = log
        self.view = view
        self.validator = validator
        self.max_rows = max_rows
        self.metrics = metrics
        self.clock = clock
        self._lock = threading.Lock()

    def ingest(self, kind: str, rows: list[Any], key: str | None = None, text: bool = False,
               source: str = "http") -> Accepted:
        """Append ``rows`` of ``kind`` as one batch, or replay the answer of an earlier one with ``key``.

        Raises:
            BatchRejected: nothing appended (the status says why: 422, 413 or 409).
            LogError: the log cannot be read or written; nothing appended.
        """
        received_at = self.clock()
        try:
            return self._ingest(kind, rows, check_key(key), text, source, received_at)
        except BatchRejected as e:
            if self.metrics is not None:
                self.metrics.rejected(kind, e.reason, len(rows))
            raise

    def _ingest(self, kind: str, rows: list[Any], key: str | None, text: bool, source: str,
                received_at: float) -> Accepted:
        if len(rows) > self.max_rows:
            raise BatchRejected([Problem(None, "rows", f"{len(rows)} rows, at most {self.max_rows} per batch "
                                         "(--ingest-max-rows): split the batch", "too_large")], 413)
        body_digest = digest(kind, rows) if key is not None else None
        with self._lock:
            for _ in range(MAX_ATTEMPTS):
                self.view.catch_up(self.log)
                if key is not None and key in self.view.keys:
                    return self._replay(key, kind, body_digest)
                columns = self.validator.validate(kind, rows, self.view, text)
                meta = {"digest": body_digest, "source": source}
                batch = IngestBatch(0, kind, columns, key, received_at, meta)
                try:
                    sequence = self.log.append(batch, self.view.sequence)
                except LogConflict:
                    continue
                self.view.apply(numbered(batch, sequence))
                if self.metrics is not None:
                    self.metrics.accepted(kind, len(batch))
                return Accepted(sequence, len(batch))
        raise LogError(f"the log kept moving: {MAX_ATTEMPTS} attempts lost to other writers; retry")

    def check(self, kind: str, rows: list[Any], text: bool = False) -> None:
        """Validate ``rows`` against the graph as the log has it now, appending nothing (no row
        limit: the file drop checks a whole file before its first batch)."""
        with self._lock:
            self.view.catch_up(self.log)
            self.validator.validate(kind, rows, self.view, text)

    def has_key(self, key: str) -> bool:
        """Whether a batch with idempotency ``key`` is in the log."""
        with self._lock:
            self.view.catch_up(self.log)
            return key in self.view.keys

    def _replay(self, key: str, kind: str, body_digest: str | None) -> Accepted:
        record = self.view.keys[key]
        if record.kind != kind or (record.digest is not None and record.digest != body_digest):
            used = f"already used for a different {record.kind} batch (sequence {record.sequence})"
            raise BatchRejected([Problem(None, "Idempotency-Key", used, "key_conflict")], 409)
        return Accepted(record.sequence, record.accepted, replayed=True)
