"""The temporal aggregates of many nodes at one seed time, kept between versions of a live graph.

Refreshing the purchase article keys reads the temporal features of most of the graph at its seed
day (every article, and the ~13,600 customers their trees reach on the demo data), once per graph
version, while a version adds a few hundred edges: recomputing every node's aggregates was a
quarter of the graph owner's step. A node's raw aggregates
(:func:`models.graph.temporal_features.raw_features`) depend only on its own edges before the seed
time, so they are kept per node with its degree, and recomputed when the degree moved (an edge
added, on any day) or for a node not seen yet; what every edge moves (the mean price, the unit of
the spend features) is applied on each read (:func:`models.graph.temporal_features.finish_features`).
The answers are those of :func:`models.graph.temporal_features.temporal_features`, bit for bit.

A cache is reset when the seed time or the base snapshot changes (a compaction renumbers nodes).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from models.feature_definitions import NUM_TEMPORAL
from models.graph.temporal_features import finish_features, raw_features
from models.store.keyed import prefix_sums
from models.store.snapshot_prefix import OTHER


@dataclass
class _Kept:
    """One node type's kept rows: ``slot[node]`` is its row of ``raw`` and ``degree`` (-1: none)."""

    slot: Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.long))
    raw: Tensor = field(default_factory=lambda: torch.empty(0, NUM_TEMPORAL, dtype=torch.float64))
    degree: Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.long))


class TemporalCache:
    """Temporal features at one seed time for the versions of one live graph (module docstring).

    Calls are serialised (a hot swap may refresh keys beside the key thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._for: tuple[Any, int] | None = None
        self._kept: dict[str, _Kept] = {}
        self.computed = 0  # rows computed (not read from the cache), for tests and benchmarks

    def features(self, graph, node_type: str, ids: Tensor, seed_time: int) -> Tensor:
        """``(N, NUM_TEMPORAL)`` :func:`models.graph.temporal_features.temporal_features` of ``ids``
        (int64 dense indices, repeats allowed) at ``seed_time``, from ``graph`` (a snapshot or a
        version of a live graph)."""
        with self._lock:
            return self._features(graph, node_type, ids, seed_time)

    def _features(self, graph, node_type: str, ids: Tensor, seed_time: int) -> Tensor:
        base = getattr(graph, "base", graph)
        if self._for != (base, int(seed_time)):
            self._for, self._kept = (base, int(seed_time)), {}
        kept = self._kept.setdefault(node_type, _Kept())
        distinct, inverse = torch.unique(ids.long(), return_inverse=True)
        rowptr = graph.adjacency[(node_type, OTHER[node_type])].rowptr
        degree = rowptr.index_select(0, distinct + 1) - rowptr.index_select(0, distinct)
        if distinct.numel() and int(distinct[-1]) >= kept.slot.numel():
            grown = torch.full((int(distinct[-1]) + 1,), -1, dtype=torch.long)
            grown[:kept.slot.numel()] = kept.slot
            kept.slot = grown
        slot = kept.slot.index_select(0, distinct)
        known = slot >= 0
        stale = ~known
        stale[known] = kept.degree.index_select(0, slot[known]) != degree[known]
        if bool(stale.any()):
            self._update(graph, node_type, kept, distinct[stale], degree[stale], slot[stale], seed_time)
            slot = kept.slot.index_select(0, distinct)
        mean_price = prefix_sums(graph, node_type)[1]
        return finish_features(kept.raw.index_select(0, slot), mean_price).index_select(0, inverse)

    def _update(self, graph, node_type: str, kept: _Kept, ids: Tensor, degree: Tensor, slot: Tensor,
                seed_time: int) -> None:
        raw = raw_features(graph, node_type, ids, torch.full_like(ids, int(seed_time)))
        self.computed += ids.numel()
        old = slot >= 0
        kept.raw[slot[old]] = raw[old]
        kept.degree[slot[old]] = degree[old]
        new = ~old
        first = kept.raw.shape[0]
        kept.slot[ids[new]] = torch.arange(first, first + int(new.sum()))
        kept.raw = torch.cat([kept.raw, raw[new]])
        kept.degree = torch.cat([kept.degree, degree[new]])
