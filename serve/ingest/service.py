"""The write side of one process: its log connection, its view of the graph and its :class:`Ingestor`.

API server processes are forked from the main process after the routes are built, and a log
connection (a file lock, a socket) must not be shared across a fork, so :class:`IngestService`
opens everything lazily, once per process id.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from models.schema import NODE_TYPES
from models.store.snapshot import GraphSnapshot
from serve.ingest.config import IngestConfig
from serve.ingest.metrics import IngestMetrics
from serve.ingest.validation import NodeColumns, Validator
from serve.ingest.view import GraphView
from serve.ingest.writer import Ingestor


def node_columns(snapshot: GraphSnapshot) -> dict[str, NodeColumns]:
    """What a customers or articles row may hold, from the snapshot's feature names."""
    return {t: NodeColumns.of(t, snapshot.categorical_names[t], snapshot.numeric_names[t])
            for t in NODE_TYPES}


def open_ingestor(config: IngestConfig, snapshot_dir: str | Path,
                  metrics: IngestMetrics | None = None) -> Ingestor:
    """An :class:`Ingestor` over a fresh log connection and a view of the snapshot in ``snapshot_dir``."""
    snapshot = GraphSnapshot.open(snapshot_dir)
    validator = Validator(node_columns(snapshot), config.lateness_days)
    return Ingestor(config.open_log(), GraphView(snapshot), validator, config.max_rows, metrics)


class IngestService:
    """Per process: one :class:`Ingestor` and one :class:`IngestMetrics`, made on first use.

    Args:
        config: the ingestion settings.
        snapshot_dir: the snapshot the server serves.
        keyed: whether a ranking task is served (``?sync=true`` then waits for its article keys too).
    """

    def __init__(self, config: IngestConfig, snapshot_dir: str | Path,
                 keyed: bool) -> None:
        self.config = config
        self.snapshot_dir = Path(snapshot_dir)
        self.keyed = keyed
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._ingestor: Ingestor | None = None
        self._metrics: IngestMetrics | None = None

    @property
    def metrics(self) -> IngestMetrics:
        self._check_process()
        if self._metrics is None:
            self._metrics = IngestMetrics()
        return self._metrics

    def ingestor(self) -> Ingestor:
        """This process's ingestor (raises :class:`models.store.log.format.LogError` if the log cannot
        be opened)."""
        self._check_process()
        with self._lock:
            if self._ingestor is None:
                self._ingestor = open_ingestor(self.config, self.snapshot_dir, self.metrics)
            return self._ingestor

    def log_sequence(self) -> int:
        """The log's last sequence (for ``/metrics`` and ``GET /ingest/status``)."""
        return self.ingestor().log.last_sequence()

    def _check_process(self) -> None:
        if self._pid != os.getpid():  # a forked child: nothing of the parent's is ours
            self._pid, self._ingestor, self._metrics = os.getpid(), None, None
            self._lock = threading.Lock()
