"""The live graph: a memory-mapped base snapshot plus every batch ingested since, read as one graph.

Every serving worker holds one :class:`LiveGraph` and applies the log's
:class:`models.store.records.IngestBatch` records to it in sequence order. The base arrays are never
copied: the delta (new edges, and the new nodes' feature rows) is small and in memory, rebuilt after
each batch, and a query for a node combines its base segment with its delta segment
(:mod:`models.store.live_csr`). What the graph layer reads is a :class:`models.store.live_view.LiveView`,
one immutable version per applied batch, swapped in atomically.

Guarantees (docs/fresh-graph.md): after applying batches ``1..n`` the graph answers exactly what a
snapshot rebuilt from the base's transactions followed by those batches' rows (in log order) would
answer at the same seed day, for rows of any day (a late row is merged into its day, after the rows
of that day already there); node indices aside, which new nodes get after the base's.

The clock: ``now_day``, the seed day of every answer, is the day after the latest transaction day of
base + delta, or a later day a ``clock`` gives (e.g. :func:`wall_clock`: tomorrow in UTC, so that
"days since the last purchase" also age on days without sales).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Iterable

import numpy as np

from models.schema import ARTICLE, CUSTOMER, NODE_TYPES, day_number
from models.store.live_build import build_view
from models.store.live_nodes import NewNodes, NodeEncoder
from models.store.live_parse import BatchError, Pending, parse_batch
from models.store.live_view import LiveView
from models.store.records import IngestBatch
from models.store.snapshot import GraphSnapshot

__all__ = ["VIEW_ATTRIBUTES", "BatchError", "LiveGraph", "SequenceGap", "VersionedGraph", "wall_clock"]

log = logging.getLogger(__name__)


class SequenceGap(RuntimeError):
    """A batch arrived whose predecessor was never applied (the caller must read the log from
    ``expected``)."""

    def __init__(self, expected: int, got: int) -> None:
        super().__init__(f"batch {got} arrived, but the graph is at sequence {expected - 1}: "
                         f"apply batch {expected} first")
        self.expected = expected
        self.got = got


def wall_clock() -> int:
    """Tomorrow (UTC) as a day number: the seed day that counts every sale of today."""
    return day_number(dt.datetime.now(dt.UTC).date()) + 1


class VersionedGraph:
    """Read like a snapshot through the latest :class:`LiveView` (what :class:`LiveGraph` and a worker's
    :class:`models.store.shared_graph.SharedGraph` have alike): a subclass sets ``clock`` and gives
    :meth:`_latest`; every read takes one version and answers at its ``now_day``."""

    clock: Callable[[], int] | None

    def _latest(self) -> LiveView:
        raise NotImplementedError

    @property
    def sequence(self) -> int:
        """The last log sequence the latest version holds (the base's own when none was applied)."""
        return self._latest().sequence

    @property
    def now_day(self) -> int:
        """The seed day of every answer: the day after the latest transaction, or the clock's day."""
        return self._now(self._latest().max_day)

    def view(self) -> LiveView:
        """The latest version (one atomic read), at the current ``now_day``."""
        view = self._latest()
        return view.at(self._now(view.max_day))

    def lookup(self, node_type: str, ids: np.ndarray | list[str] | list[bytes]) -> np.ndarray:
        """``(K,)`` int64 dense indices (new nodes after the base's rows); ``-1`` where unknown."""
        return self._latest().lookup(node_type, ids)

    def __getattr__(self, name: str):
        if name in VIEW_ATTRIBUTES:
            return getattr(self.view(), name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.view()!r})"

    def _now(self, max_day: int) -> int:
        now = max_day + 1
        return max(now, int(self.clock())) if self.clock is not None else now


class LiveGraph(VersionedGraph):
    """Base snapshot + applied batches (see the module docstring).

    Args:
        base: the memory-mapped snapshot; its ``sequence`` (the last log sequence compacted into it,
            ``0`` for one built from files) is where applying resumes.
        clock: ``() -> day``: a seed day to use when it is later than the day after the latest
            transaction (``None``: the data alone sets ``now_day``).
        id_columns: per node type, the column of a customers/articles batch holding the id
            (default ``customer_id``, ``article_id``).
    """

    def __init__(self, base: GraphSnapshot, clock: Callable[[], int] | None = None,
                 id_columns: dict[str, str] | None = None) -> None:
        self.base = base
        self.clock = clock
        self.id_columns = {t: f"{t}_id" for t in NODE_TYPES} | dict(id_columns or {})
        self._lock = threading.Lock()
        self._pending = Pending.empty({t: NewNodes(base.ids[t]) for t in NODE_TYPES}, {
            t: NodeEncoder.of(base.directory, t, base.categorical_names[t], base.numeric_names[t])
            for t in NODE_TYPES})
        self._kept_cache: dict = {}
        self._view = build_view(base, base.sequence, self._pending, self._kept_cache,
                                base.max_day + 1)
        self._view = self._view.at(self._now(self._view.max_day))

    # -- what the write side calls ---------------------------------------------------------------

    def apply(self, batch: IngestBatch) -> bool:
        """Apply one batch; ``False`` (nothing done) for a batch at or below :attr:`sequence`.

        Raises:
            SequenceGap: ``batch.sequence`` is past ``sequence + 1``.
            BatchError: a row cannot be applied (unknown id, bad value); nothing was applied.
        """
        return self.apply_many([batch]) == 1

    def apply_many(self, batches: Iterable[IngestBatch]) -> int:
        """Apply batches in order, building the next version once at the end (a replay after a
        restart); returns how many were new. On an error the batches before it stay applied."""
        with self._lock:
            pending, sequence, applied = self._pending.copy(), self._view.sequence, 0
            try:
                for batch in batches:
                    if batch.sequence <= sequence:
                        continue
                    if batch.sequence != sequence + 1:
                        raise SequenceGap(sequence + 1, batch.sequence)
                    parse_batch(batch, pending, self.id_columns)
                    sequence, applied = batch.sequence, applied + 1
            finally:
                if applied:
                    self._commit(pending, sequence)
        return applied

    def check(self, batch: IngestBatch) -> None:
        """Raise :class:`BatchError` if ``batch`` could not be applied now (nothing is changed)."""
        with self._lock:
            parse_batch(batch, self._pending.copy(), self.id_columns)

    def skip(self, sequence: int) -> None:
        """Mark batch ``sequence`` (the next one) applied without applying it, e.g. after a
        :class:`BatchError` the caller decided to step over."""
        with self._lock:
            if sequence != self._view.sequence + 1:
                raise SequenceGap(self._view.sequence + 1, sequence)
            self._commit(self._pending, sequence)

    @property
    def delta_edges(self) -> int:
        """Transactions applied since the base (the delta's size, for metrics)."""
        return len(self._pending)

    @property
    def new_nodes(self) -> dict[str, int]:
        return {t: len(n.ids) for t, n in self._pending.nodes.items()}

    def _latest(self) -> LiveView:
        return self._view

    def _commit(self, pending: Pending, sequence: int) -> None:
        view = build_view(self.base, sequence, pending, self._kept_cache, 0)
        self._pending = pending
        self._view = view.at(self._now(view.max_day))


VIEW_ATTRIBUTES = frozenset({
    "ids", "categorical", "numeric", "adjacency", "prefix", "min_day", "max_day", "end_time",
    "num_transactions", "num_nodes", "temporal", "directory", "fingerprint", "categorical_names",
    "numeric_names", "cardinalities", "keyed_csr"})
assert {CUSTOMER, ARTICLE} == set(NODE_TYPES)
