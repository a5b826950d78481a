"""One adjacency direction of the live graph: the base CSR and its delta read as the rebuilt CSR.

:class:`LiveCSR` offers what the graph layer reads of a snapshot CSR (:class:`models.store.keyed.KeyedCSR`):
``rowptr``, ``col`` and ``day`` with ``index_select``, ``row_bounds_before``, ``num_rows``,
``num_edges``, and its prefix sums (:class:`LivePrefix`, read like
:class:`models.store.snapshot_prefix.EdgePrefix`), all in the virtual numbering of
:mod:`models.store.overlay`: the positions a snapshot rebuilt from base + delta would have (node
indices aside: new nodes are numbered after the base's). The base arrays stay memory-mapped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from torch import Tensor

from models.store.csr import TemporalCSR
from models.store.delta import DeltaCSR
from models.store.kept import KeptEdges
from models.store.overlay import (
    AFTER,
    BEFORE,
    DELTA,
    Overlay,
    VirtualArray,
    VirtualCumulative,
    as_numpy,
    as_tensor,
    take,
)
from models.store.snapshot_prefix import EdgePrefix

FAR = 2**40  # a day after every edge (the split of a row the delta does not touch)
# Up to this many edges a version copies its CSR and prefix sums into virtual order once (O(E) per
# applied batch, ~0.2 ms per 100k edges and array), so that every read is the snapshot's own single
# gather; past it, each read maps its indices through the overlay instead (docs/fresh-graph.md).
MERGED_MAX_EDGES = 4_000_000


def _before(key: np.ndarray, min_day: int, span: int, ids: np.ndarray, time: np.ndarray) -> np.ndarray:
    """:meth:`models.store.snapshot_prefix.EdgePrefix.before` in numpy."""
    day = np.minimum(np.maximum(time - min_day, 0), span - 1)
    return np.searchsorted(key, (ids * span + day).astype(key.dtype))


@dataclass(frozen=True)
class VirtualRowptr:
    """``(N + 1,)`` row pointers of the virtual CSR, for base rows and new rows alike.

    Args:
        base: the base's row pointers.
        dirty_before: ``(N + 2,)`` int32, per row the number of dirty rows before it (a table, built
            per version in O(N), rather than a binary search per query: queries hold thousands of rows).
        shift: the position overlay's shifts.
        size: ``N + 1``.
    """

    base: np.ndarray
    dirty_before: np.ndarray
    shift: np.ndarray
    size: int

    @staticmethod
    def table(nodes: np.ndarray, num_rows: int) -> np.ndarray:
        counts = np.zeros(num_rows + 2, dtype=np.int32)
        np.cumsum(np.bincount(nodes, minlength=num_rows + 1)[: num_rows + 1], out=counts[1:])
        return counts

    def at(self, index: np.ndarray, dirty_before: np.ndarray | None = None) -> np.ndarray:
        """Row pointers of rows ``index``; ``dirty_before``: ``self.dirty_before[index]`` if known."""
        base = self.base[np.minimum(index, len(self.base) - 1)]
        if dirty_before is None:
            dirty_before = self.dirty_before[index]
        return base + self.shift[dirty_before]

    def index_select(self, dim: int, index: Tensor) -> Tensor:
        assert dim == 0
        return as_tensor(self.at(as_numpy(index)))

    def numel(self) -> int:
        return self.size


@dataclass(frozen=True)
class LivePrefix:
    """Prefix sums of the virtual CSR: ``spend`` and ``day_starts`` at virtual positions, and
    :meth:`before`, the virtual position of a node's first edge on or after a day."""

    base: EdgePrefix
    delta: DeltaCSR
    rowptr: VirtualRowptr
    spend: VirtualCumulative
    day_starts: VirtualCumulative
    num_base_rows: int

    def __post_init__(self) -> None:
        d = self.delta
        for name, value in (("_base_key", as_numpy(self.base.key)),
                            ("_split", as_numpy(d.split)), ("_delta_key", as_numpy(d.prefix.key)),
                            ("_delta_rowptr", as_numpy(d.csr.rowptr))):
            object.__setattr__(self, name, value)

    def positions(self, ids: np.ndarray, time: np.ndarray) -> np.ndarray:
        """:meth:`before` on numpy arrays."""
        d, table = self.delta, self.rowptr.dirty_before
        base_ids = np.minimum(ids, self.num_base_rows - 1)
        count = np.zeros_like(ids)
        time_in_base = time
        dirty_before = table[ids]
        if d.num_rows:
            dirty_at = np.minimum(dirty_before, d.num_rows - 1)
            dirty = table[ids + 1] != dirty_before
            time_in_base = np.minimum(time, np.where(dirty, self._split[dirty_at], FAR))
            which = np.flatnonzero(dirty)  # the delta is searched for its own rows only
            rows = dirty_at[which]
            ends = _before(self._delta_key, d.prefix.min_day, d.prefix.span, rows, time[which])
            count[which] = ends - self._delta_rowptr[rows]
        base_ends = _before(self._base_key, self.base.min_day, self.base.span, base_ids, time_in_base)
        base_count = base_ends - self.rowptr.base[base_ids]
        count = count + np.where(ids < self.num_base_rows, base_count, 0)
        return self.rowptr.at(ids, dirty_before) + count

    def before(self, ids: Tensor, time: Tensor) -> Tensor:
        ids, time = np.broadcast_arrays(as_numpy(ids), as_numpy(time))
        return as_tensor(self.positions(ids, time))


@dataclass(frozen=True)
class VirtualKeptPositions:
    """``positions`` of the sampler's kept sub-list, read at kept ranks, as virtual positions."""

    ranks: Overlay
    positions: Overlay
    base: np.ndarray
    delta: np.ndarray
    size: int

    def index_select(self, dim: int, index: Tensor) -> Tensor:
        assert dim == 0
        index = as_numpy(index)
        if self.ranks.empty:  # no dirty row: the base's own positions
            return as_tensor(self.base[index])
        row, case, base_rank, delta_rank = self.ranks.locate(index)
        in_delta = case == DELTA
        source = take(self.base, self.delta, in_delta, base_rank, delta_rank)
        from_base = source + np.where(case == BEFORE, 0, self.positions.shift[row + (case == AFTER)])
        from_delta = self.positions.head_end(row) + (source - self.positions.delta_start[row])
        return as_tensor(np.where(in_delta, from_delta, from_base))

    def numel(self) -> int:
        return self.size


@dataclass(frozen=True)
class LiveKept:
    """:class:`models.store.kept.KeptEdges` of the virtual CSR (same attributes, read lazily)."""

    positions: VirtualKeptPositions
    cumulative: VirtualCumulative


@dataclass(frozen=True, eq=False)
class LiveCSR:
    """One direction of the live graph (see the module docstring).

    Args:
        base: the base snapshot's CSR of this direction.
        base_prefix: its prefix sums.
        delta: the delta of this direction.
        num_rows: source nodes, base and new.
        kept_cache: the base's :class:`KeptEdges` per ``per_day``, shared by every version of the live graph.
    """

    base: TemporalCSR
    base_prefix: EdgePrefix
    delta: DeltaCSR
    num_rows: int
    kept_cache: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        d, base_rows = self.delta, self.base.num_rows
        base_rowptr = as_numpy(self.base.rowptr)
        nodes, delta_rowptr = as_numpy(d.nodes), as_numpy(d.csr.rowptr)
        overlay = Overlay.build(base_rowptr[np.minimum(nodes, base_rows)], as_numpy(d.head), as_numpy(d.tail),
                                delta_rowptr[:-1], np.diff(delta_rowptr))
        num_edges = self.base.num_edges + int(overlay.shift[-1])
        rowptr = VirtualRowptr(base_rowptr, VirtualRowptr.table(nodes, self.num_rows), overlay.shift,
                               self.num_rows + 1)
        tail = as_numpy(d.tail)
        spend = VirtualCumulative.build(overlay, self.base_prefix.spend, d.prefix.spend, tail, num_edges + 1)
        days = VirtualCumulative.build(overlay, self.base_prefix.day_starts, d.prefix.day_starts, tail,
                                       num_edges + 1)
        for name, value in (
                ("overlay", overlay), ("num_edges", num_edges), ("rowptr", rowptr),
                ("col", VirtualArray(overlay, as_numpy(self.base.col), as_numpy(d.csr.col), num_edges)),
                ("day", VirtualArray(overlay, as_numpy(self.base.day), as_numpy(d.csr.day), num_edges)),
                ("prefix", LivePrefix(self.base_prefix, d, rowptr, spend, days, base_rows)), ("_kept", {})):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "merged", num_edges <= MERGED_MAX_EDGES)
        if self.merged:
            self._merge()

    def _merge(self) -> None:
        """Replace ``rowptr``, ``col``, ``day`` and ``prefix`` by tensors in virtual order, the values
        the overlay reads at every position (the same ones, bit for bit)."""
        d, spread = self.delta, self.overlay.spread(self.num_edges + 1)
        rowptr = self.rowptr.at(np.arange(self.num_rows + 1))
        day = self.day.merged(spread)
        days = [self.base_prefix.min_day, self.base_prefix.min_day + self.base_prefix.span - 2] \
            if self.base.num_edges else []
        if d.csr.num_edges:
            delta_day = as_numpy(d.csr.day)
            days += [int(delta_day.min()), int(delta_day.max())]
        min_day = min(days, default=0)
        span = max(days, default=0) - min_day + 2
        key = np.repeat(np.arange(self.num_rows, dtype=np.int64) * span, np.diff(rowptr))
        key += day
        key -= min_day
        prefix = EdgePrefix(as_tensor(self.prefix.spend.merged(spread)),
                            as_tensor(self.prefix.day_starts.merged(spread)), as_tensor(key), min_day, span)
        for name, value in (("rowptr", as_tensor(rowptr)), ("col", as_tensor(self.col.merged(spread))),
                            ("day", as_tensor(day)), ("prefix", prefix)):
            object.__setattr__(self, name, value)

    def row_bounds_before(self, nodes: Tensor, time: Tensor) -> tuple[Tensor, Tensor]:
        """As :meth:`models.store.csr.TemporalCSR.row_bounds_before`, in virtual positions."""
        if self.merged:
            return self.rowptr.index_select(0, nodes), self.prefix.before(nodes, time)
        ids, time = np.broadcast_arrays(as_numpy(nodes), as_numpy(time))
        return as_tensor(self.rowptr.at(ids)), as_tensor(self.prefix.positions(ids, time))

    def kept(self, per_day: int) -> LiveKept:
        """The sampler's ``per_day`` candidate sub-list of this CSR (built once per version)."""
        if per_day not in self._kept:
            base = self.kept_cache.get(per_day)
            if base is None:
                base = self.kept_cache[per_day] = KeptEdges.build(
                    self.base.day.numpy(), self.base.rowptr.numpy(), per_day)
            d, o = self.delta, self.overlay
            delta = KeptEdges.build(d.csr.day.numpy(), d.csr.rowptr.numpy(), per_day)
            base_cumulative, delta_cumulative = as_numpy(base.cumulative), as_numpy(delta.cumulative)
            head_end = o.base_start + o.head
            tail = as_numpy(d.tail)
            rank_start = base_cumulative[o.base_start]
            rank_head = base_cumulative[head_end] - rank_start
            rank_tail = base_cumulative[head_end + tail] - rank_start - rank_head
            delta_start = delta_cumulative[o.delta_start]
            delta_length = delta_cumulative[o.delta_start + o.length] - delta_start
            ranks = Overlay.build(rank_start, rank_head, rank_tail, delta_start, delta_length)
            size = int(base.positions.numel()) + int(ranks.shift[-1])
            self._kept[per_day] = LiveKept(
                VirtualKeptPositions(ranks, o, as_numpy(base.positions), as_numpy(delta.positions), size),
                VirtualCumulative.build(o, base_cumulative, delta_cumulative, tail, self.num_edges + 1))
        return self._kept[per_day]
