"""The unit of ingestion: one acknowledged batch of new rows, as the log stores and replays it.

Shared by the write side (the HTTP ingestion routes and the file drop, which validate rows and
append batches to the log) and the read side (:class:`models.store.live.LiveGraph` in every worker,
which applies batches in sequence order on top of the memory-mapped base snapshot).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

BatchKind = Literal["transactions", "customers", "articles"]
KINDS: tuple[BatchKind, ...] = ("transactions", "customers", "articles")


@dataclass(frozen=True)
class IngestBatch:
    """One batch of validated rows, all applied or none.

    Args:
        sequence: position in the log, 1, 2, ... without gaps; a graph that applied batch ``n``
            has applied every batch before it.
        kind: which table the rows extend.
        rows: column name -> one value per row. Transactions carry ``day`` (int, days since
            1970-01-01), ``customer_id`` and ``article_id`` (str), ``price`` (float) and
            ``sales_channel_id`` (int); customers and articles carry their id column and the
            feature columns of the dataset (``None`` for a missing value).
        key: the client's idempotency key; a batch whose key is already in the log is not
            appended again.
        received_at: wall-clock seconds when the batch was acknowledged (for the
            ingest-to-visible lag).
    """

    sequence: int
    kind: BatchKind
    rows: dict[str, list[Any]]
    key: str | None = None
    received_at: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown batch kind {self.kind!r}; use one of {', '.join(KINDS)}")
        lengths = {len(v) for v in self.rows.values()}
        if len(lengths) > 1:
            raise ValueError(f"batch {self.sequence}: columns of different lengths {sorted(lengths)}")

    def __len__(self) -> int:
        return len(next(iter(self.rows.values()), []))
