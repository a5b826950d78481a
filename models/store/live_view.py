"""One version of the live graph: what the sampler, the features and the history read, immutable.

A :class:`LiveView` has the attributes of a :class:`models.store.snapshot.GraphSnapshot` that the graph
layer and the runtime read (``ids``, ``categorical``, ``numeric``, ``adjacency``, ``prefix``,
``num_nodes``, ``end_time``, :meth:`lookup`, ...), over base + delta. :class:`models.store.live.LiveGraph`
builds a new one per applied batch and swaps it in with one reference assignment; a request reads one
view from start to end, so it never mixes two versions.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from torch import Tensor

from models.store.keyed import keyed_csr
from models.store.live_nodes import JoinedIds, NewNodes
from models.store.snapshot import GraphSnapshot
from models.store.snapshot_prefix import OTHER, SnapshotPrefix


@dataclass(frozen=True, eq=False)
class TemporalRows:
    """The raw temporal aggregates (:func:`models.graph.temporal_features.raw_features`) of every
    node a live graph's version added edges to, at its seed day: computed once per version by the
    one process that applies the log and read by every worker, whose kept rows of those nodes are
    stale after each version.

    Args:
        seed_time: the seed day of the rows (the version's ``end_time``).
        ids: per node type, ``(N,)`` int64 sorted dense indices.
        raw: per node type, ``(N, F)`` float64 rows of ``ids``.
        degree: per node type, ``(N,)`` int64 edge counts of ``ids`` in the version.
    """

    seed_time: int
    ids: dict[str, np.ndarray]
    raw: dict[str, np.ndarray]
    degree: dict[str, np.ndarray]

    def find(self, node_type: str, ids: np.ndarray) -> np.ndarray:
        """``(K,)`` int64 the rows of ``ids``, ``-1`` where none was computed."""
        held = self.ids.get(node_type)
        if held is None or not len(held):
            return np.full(len(ids), -1, dtype=np.int64)
        at = np.searchsorted(held, ids).clip(max=len(held) - 1)
        return np.where(held[at] == ids, at, -1)


@dataclass(frozen=True, eq=False)
class LiveView:
    """The live graph at one log sequence and seed day (see the module docstring).

    Args:
        base: the memory-mapped snapshot underneath.
        sequence: the last log sequence applied.
        ids: per node type, ids by dense index (the base's array when no node was added).
        categorical, numeric: per node type, feature rows (base rows, then new rows).
        adjacency: per direction, the CSR read at virtual positions (the base's when nothing changed).
        prefix: per node type the prefix sums of its CSR, and the mean edge price of base + delta.
        min_day, max_day: first and last transaction day of base + delta.
        end_time: the seed day every answer is for (the live graph's ``now_day``).
        num_transactions: edges of base + delta.
        nodes: per node type, the nodes added since the base (for :meth:`lookup`).
        temporal_rows: what the graph owner computed of this version's temporal aggregates, for
            its readers to copy instead of computing (``None``: nothing).
    """

    base: GraphSnapshot
    sequence: int
    ids: dict[str, np.ndarray | JoinedIds]
    categorical: dict[str, Tensor]
    numeric: dict[str, Tensor]
    adjacency: dict
    prefix: SnapshotPrefix
    min_day: int
    max_day: int
    end_time: int
    num_transactions: int
    nodes: dict[str, NewNodes]
    temporal_rows: TemporalRows | None = None

    @property
    def temporal(self) -> bool:
        return True

    @property
    def directory(self) -> Path:
        return self.base.directory

    @property
    def fingerprint(self) -> str:
        return self.base.fingerprint

    @property
    def categorical_names(self) -> dict[str, tuple[str, ...]]:
        return self.base.categorical_names

    @property
    def numeric_names(self) -> dict[str, tuple[str, ...]]:
        return self.base.numeric_names

    @property
    def cardinalities(self) -> dict[str, tuple[int, ...]]:
        return self.base.cardinalities

    @property
    def num_nodes(self) -> dict[str, int]:
        return {t: len(ids) for t, ids in self.ids.items()}

    @property
    def changed(self) -> bool:
        """Whether anything was added to the base (else every array read is the base's own)."""
        return self.num_transactions != self.base.num_transactions or self.num_nodes != self.base.num_nodes

    def lookup(self, node_type: str, ids: np.ndarray | list[str] | list[bytes]) -> np.ndarray:
        """``(K,)`` int64 dense indices of string ids; ``-1`` where unknown."""
        nodes = self.nodes.get(node_type)
        if nodes is None or not nodes.index:
            return self.base.lookup(node_type, ids)
        found = nodes.lookup(ids)
        found[found >= len(self.ids[node_type])] = -1  # added after this version
        return found

    def keyed_csr(self, node_type: str):
        """The ``node_type`` -> other-type CSR the sampler and the history search (see
        :func:`models.store.keyed.keyed_csr`)."""
        csr = self.adjacency[(node_type, OTHER[node_type])]
        return keyed_csr(self.base, node_type) if csr is self.base.adjacency[(node_type, OTHER[node_type])] \
            else csr

    def at(self, end_time: int) -> LiveView:
        """The same graph answering for another seed day."""
        return self if end_time == self.end_time else dataclasses.replace(self, end_time=end_time)

    def __repr__(self) -> str:
        counts = ", ".join(f"{t}s={n:,}" for t, n in self.num_nodes.items())
        return (f"LiveView({str(self.directory)!r}, sequence={self.sequence}, {counts}, "
                f"transactions={self.num_transactions:,}, end_time={self.end_time})")
