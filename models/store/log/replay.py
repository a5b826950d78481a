"""Replaying the log into a graph: the one loop every reader runs, with one error policy.

Readers: the server's write-side view (:class:`serve.ingest.view.GraphView`: ids and keys), each
worker's follower, the background compaction, ``python -m training.compact`` and
``python -m training.fit --data STATE_DIR`` (:func:`replayed_graph`).

The policy, the same for all of them: a batch out of order is a broken log (:class:`LogError`, raised:
nothing can be served correctly past it); a batch the graph refuses (:class:`BatchError`: it passed
the write side's validation, so this is a bug) is stepped over, logged and returned in
:attr:`Replayed.skipped`. Every reader skips the same batches, so every worker, a compaction and a
training run see the same graph; raising instead would stall every worker on that batch forever and
make a compaction of the log impossible (docs/fresh-graph.md, "One log, one replay").
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from models.store.live import LiveGraph
from models.store.live_parse import BatchError
from models.store.log import WAL_DIR, open_log
from models.store.log.format import READ_LIMIT, Log, check_order
from models.store.records import IngestBatch
from models.store.versions import SNAPSHOTS_DIR, open_current

log = logging.getLogger("relserve.ingest")

WORKERS_DIR = "workers"  # where servers before the graph owner kept their workers' progress reports
STATE_DIR_MARKS = (WAL_DIR, WORKERS_DIR, SNAPSHOTS_DIR)


class Target(Protocol):
    """What a log is replayed into: :class:`models.store.live.LiveGraph`, or a view of ids."""

    @property
    def sequence(self) -> int:
        """The last batch taken in."""
        ...

    def apply_many(self, batches: Sequence[IngestBatch]) -> int:
        """Take in ``batches`` in order; on :class:`BatchError` the ones before it stay taken in."""
        ...

    def skip(self, sequence: int) -> None:
        """Mark batch ``sequence`` (the next one) taken in without applying it."""
        ...


@dataclass
class Replayed:
    """What one :func:`replay` read: every batch (applied or skipped), and the skipped ones with why."""

    batches: list[IngestBatch] = field(default_factory=list)
    skipped: dict[int, str] = field(default_factory=dict)


def replay(source: Log, target: Target, reads: int | None = None, limit: int = READ_LIMIT,
           who: str = "replay") -> Replayed:
    """Apply the batches ``source`` holds past ``target.sequence`` (see the module docstring).

    Args:
        source: the log.
        target: the graph (or view) to bring up to date.
        reads: at most this many reads of the log (``None``: until it holds nothing new).
        limit: batches per read.
        who: names the reader in the log line of a skipped batch.

    Raises:
        LogError: the log cannot be read, or hands back batches out of order.
    """
    done, count = Replayed(), 0
    while reads is None or count < reads:
        after = target.sequence
        batches = source.read(after, limit)
        count += 1
        if not batches:
            break
        check_order(batches, after)
        done.batches += batches
        while target.sequence < batches[-1].sequence:
            try:
                target.apply_many([b for b in batches if b.sequence > target.sequence])
            except BatchError as e:
                failed = target.sequence + 1
                log.error("%s: skipping log batch %d, which the graph cannot apply: %s", who, failed, e)
                done.skipped[failed] = str(e)
                target.skip(failed)
    return done


def is_state_dir(path: Path) -> bool:
    """Whether ``path`` looks like a server's ``--state-dir`` (it holds a log, snapshot versions or an
    older server's worker progress)."""
    return any((Path(path) / name).is_dir() for name in STATE_DIR_MARKS)


@contextmanager
def replayed_graph(artifacts: Path, state_dir: Path, ingest_log: str = "wal",
                   who: str = "replay") -> Iterator[tuple[LiveGraph, Replayed]]:
    """The live graph of ``state_dir``, caught up with the log, while the ``with`` block runs.

    The snapshot version is held by a lease while open (a compaction cannot remove it); the log is
    read as every worker reads it (whole records only, no lock the server needs).

    Args:
        artifacts: the served artifacts (``artifacts/snapshot`` is the base until a compaction).
        state_dir: the server's state directory.
        ingest_log: ``wal`` (``state_dir/wal``) or a ``redis://`` URL, as given to the server.
        who: names the reader in the log line of a skipped batch.

    Raises:
        models.store.snapshot.SnapshotError: the current snapshot cannot be opened.
        LogError: the log cannot be read.
        ValueError: a bad ``ingest_log``.
    """
    base, lease = open_current(artifacts, state_dir)
    try:
        graph = LiveGraph(base)
        source = open_log(ingest_log, state_dir)
        try:
            done = replay(source, graph, who=who)
        finally:
            source.close()
        yield graph, done
    finally:
        if lease is not None:
            lease.release()
