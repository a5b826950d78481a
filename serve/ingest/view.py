"""What the write side knows of the graph: the snapshot's ids and latest day plus every logged batch.

Each API server process (and the file drop) keeps one :class:`GraphView`, brought up to date from
the log before every validation (:meth:`GraphView.catch_up`), so a batch is checked against every
batch acknowledged before it, by any process or replica. It holds ids, not features: a few bytes per
ingested node, and the snapshot's id arrays stay memory-mapped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from models.schema import ARTICLE, CUSTOMER
from models.store.log.format import Log
from models.store.log.replay import replay
from models.store.records import IngestBatch
from models.store.snapshot import GraphSnapshot
from serve.ingest.validation import ID_FIELDS, NODE_KINDS


@dataclass(frozen=True)
class KeyRecord:
    """An idempotency key's batch: its sequence, row count, kind and body digest."""

    sequence: int
    accepted: int
    kind: str
    digest: str | None


class GraphView:
    """Ids, latest day and idempotency keys of ``snapshot`` + the log (see the module docstring).

    Args:
        snapshot: the snapshot the server was started on.
    """

    def __init__(self, snapshot: GraphSnapshot) -> None:
        self.snapshot = snapshot
        self.sequence = 0
        self.added: dict[str, set[str]] = {CUSTOMER: set(), ARTICLE: set()}
        self.keys: dict[str, KeyRecord] = {}
        self._latest_day = int(snapshot.max_day)

    @property
    def latest_day(self) -> int:
        return self._latest_day

    def known(self, node_type: str, ids: list[str]) -> list[bool]:
        if not ids:
            return []
        in_snapshot = np.asarray(self.snapshot.lookup(node_type, ids)) >= 0
        added = self.added[node_type]
        return [bool(found) or node_id in added for node_id, found in zip(ids, in_snapshot, strict=True)]

    def apply(self, batch: IngestBatch) -> None:
        """Take in one batch, the next in sequence."""
        if batch.kind == "transactions":
            self._latest_day = max(self._latest_day, max(batch.rows["day"], default=self._latest_day))
        else:
            node_type = NODE_KINDS[batch.kind]
            self.added[node_type].update(batch.rows[ID_FIELDS[node_type]])
        if batch.key is not None:
            self.keys[batch.key] = KeyRecord(batch.sequence, len(batch), batch.kind, batch.meta.get("digest"))
        self.sequence = batch.sequence

    def apply_many(self, batches: Sequence[IngestBatch]) -> int:
        for batch in batches:
            self.apply(batch)
        return len(batches)

    def skip(self, sequence: int) -> None:
        self.sequence = sequence

    def catch_up(self, log: Log) -> int:
        """Apply every batch the log holds past :attr:`sequence`; returns how many."""
        if self.sequence == 0:
            # A log pruned after a compaction starts later; its earlier batches are in the snapshot.
            self.sequence = max(0, log.oldest() - 1)
        return len(replay(log, self, who="write side").batches)
