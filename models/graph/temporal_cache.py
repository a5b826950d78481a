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

A cache is reset when the seed time or the base snapshot changes (a compaction renumbers nodes),
and when what it keeps would pass ``max_bytes``.

The same holds for answers: a server answers at the graph's end, so every request of a day reads
its nodes' aggregates at one seed time, and a worker keeps them
(:meth:`models.runtime.inference.TaskInference.prepare`) instead of searching the same prefix sums
again for each request (the hot nodes, popular articles and active customers, are in most trees).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from models.feature_definitions import NUM_TEMPORAL
from models.graph.temporal_features import finish_features, raw_features
from models.schema import NODE_TYPES
from models.store.keyed import prefix_sums
from models.store.live_view import TemporalRows
from models.store.snapshot_prefix import OTHER


@dataclass
class _Kept:
    """One node type's kept rows: ``slot[node]`` is its row of ``raw`` and ``degree`` (-1: none); the
    first ``used`` rows are taken, the rest is room to grow into (doubled when full, so that a
    request's few new nodes do not copy every kept row)."""

    slot: Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.long))
    raw: Tensor = field(default_factory=lambda: torch.empty(0, NUM_TEMPORAL, dtype=torch.float64))
    degree: Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.long))
    used: int = 0

    def rows_after(self, new: int) -> int:
        """The rows allocated once ``new`` more are kept."""
        end = self.used + new
        return self.raw.shape[0] if end <= self.raw.shape[0] else max(end, 2 * self.raw.shape[0])

    def append(self, raw: Tensor, degree: Tensor) -> Tensor:
        """Keep ``raw`` ``(N, NUM_TEMPORAL)`` and ``degree`` ``(N,)`` in new rows; returns their slots."""
        end = self.used + raw.shape[0]
        if end > self.raw.shape[0]:
            room = self.rows_after(raw.shape[0])
            self.raw = torch.cat([self.raw[:self.used], self.raw.new_empty(room - self.used, NUM_TEMPORAL)])
            self.degree = torch.cat([self.degree[:self.used], self.degree.new_empty(room - self.used)])
        self.raw[self.used:end] = raw
        self.degree[self.used:end] = degree
        slots = torch.arange(self.used, end)
        self.used = end
        return slots


def _degree(graph, node_type: str, ids: Tensor) -> Tensor:
    """``(N,)`` edge counts of ``ids``: what moves when a live graph adds an edge to a node."""
    rowptr = graph.adjacency[(node_type, OTHER[node_type])].rowptr
    return rowptr.index_select(0, ids + 1) - rowptr.index_select(0, ids)


ROW_BYTES = (NUM_TEMPORAL + 1) * 8  # a kept row: its raw aggregates and degree (float64, int64)
# Most rows a graph version carries for its readers (~9 MB, beside the version's own arrays in
# /dev/shm): a step past it (a large file drop) leaves them to each reader, as a skipped version does.
PUBLISHED_MAX_ROWS = 50_000


class TemporalCache:
    """Temporal features at one seed time for the versions of one live graph (module docstring).

    Calls are serialised (a hot swap may refresh keys beside the key thread).

    Args:
        max_bytes: the most the kept rows and their slot tables may take; a call that would pass it
            starts the cache again (``None``: no bound).
    """

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._for: tuple[Any, int] | None = None
        self._kept: dict[str, _Kept] = {}
        self.computed = 0  # rows computed (not read from the cache), for tests and benchmarks
        self.copied = 0  # rows copied from the rows a live graph's version carries
        self.restarts = 0  # times the bound emptied the cache

    def features(self, graph, node_type: str, ids: Tensor, seed_time: int) -> Tensor:
        """``(N, NUM_TEMPORAL)`` :func:`models.graph.temporal_features.temporal_features` of ``ids``
        (int64 dense indices, repeats allowed) at ``seed_time``, from ``graph`` (a snapshot or a
        version of a live graph)."""
        with self._lock:
            return self._features(graph, node_type, ids, seed_time)

    def fill(self, graph, seed_time: int) -> int:
        """Keep every node's aggregates at ``seed_time`` before the first call asks; where they do
        not all fit in half of ``max_bytes``, the nodes with the most edges (those most trees reach).
        Returns the nodes kept."""
        counts = {t: graph.num_nodes[t] for t in NODE_TYPES}
        room = sum(counts.values())
        if self.max_bytes is not None:
            room = min(room, max(0, self.max_bytes // 2 - 8 * room) // ROW_BYTES)
        kept = 0
        for node_type, count in counts.items():
            take = min(count, room * count // max(sum(counts.values()), 1))
            if not take:
                continue
            ids = torch.arange(count)
            if take < count:
                rowptr = graph.adjacency[(node_type, OTHER[node_type])].rowptr
                ids = torch.topk(rowptr[1:] - rowptr[:-1], take).indices.sort().values
            self.features(graph, node_type, ids, seed_time)
            kept += take
        return kept

    def refresh(self, graph, seed_time: int) -> int:
        """Compute again, in one call per node type, every kept node whose edges moved in ``graph``
        (a new version of a live graph): what the next calls would otherwise find stale one call at a
        time, each paying the fixed cost of a computation (or copy them from the rows the version
        carries). Returns the nodes made current."""
        with self._lock:
            if self._for != (getattr(graph, "base", graph), int(seed_time)):
                return 0
            before = self.computed + self.copied
            for node_type, kept in self._kept.items():
                ids = (kept.slot >= 0).nonzero().squeeze(1)
                if not ids.numel():
                    continue
                degree = _degree(graph, node_type, ids)
                slot = kept.slot.index_select(0, ids)
                moved = kept.degree.index_select(0, slot) != degree
                if bool(moved.any()):
                    self._update(graph, node_type, kept, ids[moved], degree[moved], slot[moved], seed_time)
            return self.computed + self.copied - before

    def _features(self, graph, node_type: str, ids: Tensor, seed_time: int) -> Tensor:
        kept = self._kept_current(graph, node_type, ids.long(), seed_time)
        return finish_features(kept.raw.index_select(0, kept.slot.index_select(0, ids.long())),
                               prefix_sums(graph, node_type)[1])

    def _kept_current(self, graph, node_type: str, ids: Tensor, seed_time: int) -> _Kept:
        """The kept rows of ``node_type``, holding every one of ``ids`` (int64) current."""
        base = getattr(graph, "base", graph)
        if self._for != (base, int(seed_time)):
            self._for, self._kept = (base, int(seed_time)), {}
        kept = self._kept.setdefault(node_type, _Kept())
        largest = int(ids.max()) if ids.numel() else -1
        if largest >= kept.slot.numel():
            grown = torch.full((max(largest + 1, graph.num_nodes[node_type]),), -1, dtype=torch.long)
            grown[:kept.slot.numel()] = kept.slot
            kept.slot = grown
        # Per id, repeats and all: a warm call is a few gathers, no sort (the request path).
        degree = _degree(graph, node_type, ids)
        slot = kept.slot.index_select(0, ids)
        stale = slot < 0
        if kept.used:
            stale |= kept.degree.index_select(0, slot.clamp(min=0)) != degree
        if bool(stale.any()):
            missing = torch.unique(ids[stale])
            missing_slot = kept.slot.index_select(0, missing)
            if self._over_bound(node_type, int((missing_slot < 0).sum())):
                self._kept, self.restarts = {}, self.restarts + 1
                return self._kept_current(graph, node_type, ids, seed_time)
            self._update(graph, node_type, kept, missing, _degree(graph, node_type, missing), missing_slot,
                         seed_time)
        return kept

    def _over_bound(self, node_type: str, new_rows: int) -> bool:
        """Whether keeping ``new_rows`` more rows of ``node_type`` passes ``max_bytes`` (the rows
        allocated and the slot tables); never for a cache that keeps no row yet, which must answer
        however large the call."""
        if self.max_bytes is None or not any(kept.used for kept in self._kept.values()):
            return False
        rows = sum(kept.rows_after(new_rows if name == node_type else 0) for name, kept in self._kept.items())
        slots = sum(kept.slot.numel() for kept in self._kept.values())
        return rows * ROW_BYTES + slots * 8 > self.max_bytes

    def _update(self, graph, node_type: str, kept: _Kept, ids: Tensor, degree: Tensor, slot: Tensor,
                seed_time: int) -> None:
        raw = self._owner_rows(graph, node_type, ids, degree, int(seed_time))
        old = slot >= 0
        kept.raw[slot[old]] = raw[old]
        kept.degree[slot[old]] = degree[old]
        new = ~old
        kept.slot[ids[new]] = kept.append(raw[new], degree[new])

    def _owner_rows(self, graph, node_type: str, ids: Tensor, degree: Tensor, seed_time: int) -> Tensor:
        """``(N, NUM_TEMPORAL)`` raw aggregates of ``ids``: copied from the rows the version carries
        (:attr:`models.store.live_view.LiveView.temporal_rows`) where it has them at this degree,
        computed for the rest."""
        rows = getattr(graph, "temporal_rows", None)
        if rows is None or rows.seed_time != seed_time or node_type not in rows.ids:
            self.computed += ids.numel()
            return raw_features(graph, node_type, ids, torch.full_like(ids, seed_time))
        at = rows.find(node_type, ids.numpy())
        found = at >= 0
        found[found] = rows.degree[node_type][at[found]] == degree.numpy()[found]
        raw = torch.empty(ids.numel(), NUM_TEMPORAL, dtype=torch.float64)
        if found.any():
            raw[torch.from_numpy(found)] = torch.from_numpy(rows.raw[node_type][at[found]])
            self.copied += int(found.sum())
        missing = torch.from_numpy(~found)
        if bool(missing.any()):
            rest = ids[missing]
            raw[missing] = raw_features(graph, node_type, rest, torch.full_like(rest, seed_time))
            self.computed += rest.numel()
        return raw

    def rows_to_publish(self, graph, seed_time: int, since: Any = None) -> TemporalRows:
        """The raw aggregates at ``seed_time`` of every node ``graph`` (a live graph's version) added
        edges to since the version ``since``, for its readers (kept rows where current, computed
        where not): what the one process that applies the log publishes with each version. None
        without an earlier version on the same base (a start or a compaction: readers then fill
        their caches themselves) or past :data:`PUBLISHED_MAX_ROWS` nodes (a large file drop). A
        reader that skipped a version computes the nodes it then misses."""
        empty = TemporalRows(int(seed_time), {}, {}, {})
        if getattr(since, "base", None) is not getattr(graph, "base", graph):
            return empty
        moved = {}
        for node_type in NODE_TYPES:
            delta = getattr(graph.adjacency[(node_type, OTHER[node_type])], "delta", None)
            if delta is None:
                continue
            nodes = delta.nodes.long()
            old = nodes < since.num_nodes[node_type]
            changed, known = ~old, nodes[old]
            changed[old] = _degree(since, node_type, known) != _degree(graph, node_type, known)
            moved[node_type] = nodes[changed]
        if sum(n.numel() for n in moved.values()) > PUBLISHED_MAX_ROWS:
            return empty
        ids, raw, degree = {}, {}, {}
        # As every other call fills the cache (the answers, the article keys): its tensors are
        # inference tensors, updated in place only in inference mode.
        with self._lock, torch.inference_mode():
            for node_type, nodes in moved.items():
                kept = self._kept_current(graph, node_type, nodes, seed_time)
                slot = kept.slot.index_select(0, nodes)
                ids[node_type] = nodes.numpy()
                raw[node_type] = kept.raw.index_select(0, slot).numpy()
                degree[node_type] = kept.degree.index_select(0, slot).numpy()
        return TemporalRows(int(seed_time), ids, raw, degree)
