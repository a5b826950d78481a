"""The whole live graph of a state directory, outside the server: its current snapshot plus every log
batch after it, applied as a worker applies them.

Used by ``python -m training.compact`` (fold the log into a new snapshot version) and by
``python -m training.fit --data STATE_DIR`` (train on what the server serves). Reading takes no lock
the server needs: the snapshot version is held by a lease while open (so a compaction cannot remove
it), and the log is read the way every worker reads it (whole records only).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from models.store.live import LiveGraph
from models.store.versions import SNAPSHOTS_DIR, open_current
from serve.ingest.config import WAL_DIR, IngestConfig
from serve.ingest.progress import WORKERS_DIR

STATE_DIR_MARKS = (WAL_DIR, WORKERS_DIR, SNAPSHOTS_DIR)


def is_state_dir(path: Path) -> bool:
    """Whether ``path`` looks like a server's ``--state-dir`` (it holds a log, worker progress or
    snapshot versions)."""
    return any((Path(path) / name).is_dir() for name in STATE_DIR_MARKS)


@contextmanager
def replayed_graph(artifacts: Path, state_dir: Path, ingest_log: str = "wal") -> Iterator[LiveGraph]:
    """The live graph of ``state_dir``, caught up with the log, while the ``with`` block runs.

    Args:
        artifacts: the served artifacts (``artifacts/snapshot`` is the base until a compaction).
        state_dir: the server's state directory.
        ingest_log: ``wal`` (``state_dir/wal``) or a ``redis://`` URL, as given to the server.

    Raises:
        models.store.snapshot.SnapshotError: the current snapshot cannot be opened.
        serve.ingest.log.LogError: the log cannot be read.
        ValueError: a bad ``ingest_log``, or a batch the graph cannot apply.
    """
    base, lease = open_current(artifacts, state_dir)
    try:
        graph = LiveGraph(base)
        log = IngestConfig(state_dir=Path(state_dir), log=ingest_log).open_log()
        try:
            while batches := log.read(graph.sequence):
                graph.apply_many(batches)
        finally:
            log.close()
        yield graph
    finally:
        if lease is not None:
            lease.release()
