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
from functools import cached_property

import numpy as np
from torch import Tensor

from models.store.csr import TemporalCSR
from models.store.delta import DeltaCSR, build_delta
from models.store.kept import KeptEdges, LiveKept
from models.store.live_merged import BUFFERS, MERGED, Buffers, Layout, Merged, log_rows, step
from models.store.overlay import Overlay, VirtualArray, VirtualCumulative, as_numpy, as_tensor
from models.store.snapshot_prefix import INT32_MAX, EdgePrefix

FAR = 2**40  # a day after every edge (the split of a row the delta does not touch)
# Up to this many edges a version copies its CSR and prefix sums into virtual order once (O(E) per
# applied batch, ~0.2 ms per 100k edges and array), so that every read is the snapshot's own single
# gather; past it, each read maps its indices through the overlay instead (docs/fresh-graph.md).
MERGED_MAX_EDGES = 2_000_000


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
        d = self.delta
        num_edges = self.base.num_edges + d.csr.num_edges - int(as_numpy(d.tail).sum())
        merged = num_edges <= MERGED_MAX_EDGES
        for name, value in (("num_edges", num_edges), ("merged", merged), ("_kept", {})):
            object.__setattr__(self, name, value)
        if self.merged:
            self._merge()
        else:
            for name, value in zip(("rowptr", "col", "day", "prefix"), self._through_overlay(), strict=True):
                object.__setattr__(self, name, value)

    @cached_property
    def overlay(self) -> Overlay:
        """The position overlay (built when first read: a merged version continued from the last one
        reads it only for the sampler's per-day list)."""
        d, base_rowptr = self.delta, as_numpy(self.base.rowptr)
        nodes, delta_rowptr = as_numpy(d.nodes), as_numpy(d.csr.rowptr)
        return Overlay.build(base_rowptr[np.minimum(nodes, self.base.num_rows)], as_numpy(d.head),
                             as_numpy(d.tail), delta_rowptr[:-1], np.diff(delta_rowptr))

    def _through_overlay(self) -> tuple[VirtualRowptr, VirtualArray, VirtualArray, LivePrefix]:
        """``rowptr``, ``col``, ``day`` and ``prefix`` read through the overlay (not kept by a merged
        version: a version file written from it carries its merged arrays only)."""
        d, overlay, num_edges = self.delta, self.overlay, self.num_edges
        table = VirtualRowptr.table(as_numpy(d.nodes), self.num_rows)
        rowptr = VirtualRowptr(as_numpy(self.base.rowptr), table, overlay.shift, self.num_rows + 1)
        tail = as_numpy(d.tail)
        spend = VirtualCumulative.build(overlay, self.base_prefix.spend, d.prefix.spend, tail, num_edges + 1)
        days = VirtualCumulative.build(overlay, self.base_prefix.day_starts, d.prefix.day_starts, tail,
                                       num_edges + 1)
        return (rowptr, VirtualArray(overlay, as_numpy(self.base.col), as_numpy(d.csr.col), num_edges),
                VirtualArray(overlay, as_numpy(self.base.day), as_numpy(d.csr.day), num_edges),
                LivePrefix(self.base_prefix, d, rowptr, spend, days, self.base.num_rows))

    def _merge(self) -> None:
        """Replace ``rowptr``, ``col``, ``day`` and ``prefix`` by tensors in virtual order: from the last
        version's (kept in ``kept_cache``) plus the rows logged since, or else from the base + delta."""
        log = log_rows(self.delta)
        later_rows = step(self.kept_cache.get(MERGED), log, self.num_rows)
        if later_rows is None:
            csr, prefix = self._merge_whole()
        else:
            previous, (src, dst, day, price) = later_rows
            small = build_delta(previous.csr, previous.prefix, None, previous.num_rows, src, dst, day, price)
            later = LiveCSR(previous.csr, previous.prefix, small, self.num_rows,
                            {BUFFERS: self.kept_cache.setdefault(BUFFERS, Buffers())})
            csr, prefix = TemporalCSR(later.rowptr, later.col, later.day), later.prefix
        for name, value in (("rowptr", csr.rowptr), ("col", csr.col), ("day", csr.day), ("prefix", prefix)):
            object.__setattr__(self, name, value)
        if log is not None:
            self.kept_cache[MERGED] = Merged(csr, prefix, self.num_rows, log)

    def _merge_whole(self) -> tuple[TemporalCSR, EdgePrefix]:
        """The values the overlay reads at every position (the same ones, bit for bit)."""
        d, layout = self.delta, self.overlay.layout(self.num_edges + 1)
        virtual_rowptr, virtual_col, virtual_day, virtual_prefix = self._through_overlay()
        buffers: Buffers = self.kept_cache.setdefault(BUFFERS, Buffers())

        def merged(name: str, array: VirtualArray | VirtualCumulative) -> np.ndarray:
            return array.merged(layout, buffers.get(name, array.dtype, array.size))

        rowptr = virtual_rowptr.at(np.arange(self.num_rows + 1))
        day = merged("day", virtual_day)
        base = self.base_prefix
        days = [base.min_day, base.min_day + base.span - 2] if self.base.num_edges else []
        if d.csr.num_edges:
            delta_day = as_numpy(d.csr.day)
            days += [int(delta_day.min()), int(delta_day.max())]
        min_day = min(days, default=0)
        span = max(days, default=0) - min_day + 2
        key = self._key(layout, rowptr, day, min_day, span, buffers)
        prefix = EdgePrefix(as_tensor(merged("spend", virtual_prefix.spend)),
                            as_tensor(merged("day_starts", virtual_prefix.day_starts)), as_tensor(key),
                            min_day, span)
        col = merged("col", virtual_col)
        return TemporalCSR(as_tensor(rowptr), as_tensor(col), as_tensor(day)), prefix

    def _key(self, layout: Layout, rowptr: np.ndarray, day: np.ndarray, min_day: int, span: int,
             buffers: Buffers) -> np.ndarray:
        """``(E,)`` the sorted ``row * span + day - min_day`` key: the base's pieces copied when its
        days span the same range, else computed whole."""
        dtype = np.int32 if self.num_rows * span <= INT32_MAX else np.int64  # as a rebuild stores it
        if layout.source is None and (min_day, span) == (self.base_prefix.min_day, self.base_prefix.span):
            d = self.delta
            delta_key = np.repeat(as_numpy(d.nodes) * span - min_day, np.diff(as_numpy(d.csr.rowptr)))
            delta_key += as_numpy(d.csr.day)
            return VirtualArray(self.overlay, as_numpy(self.base_prefix.key).astype(dtype, copy=False),
                                delta_key.astype(dtype), self.num_edges).merged(
                layout, buffers.get("key", dtype, self.num_edges))
        key = np.repeat(np.arange(self.num_rows, dtype=dtype) * dtype(span), np.diff(rowptr))
        key += day
        key -= dtype(min_day)
        return key

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
            d = self.delta
            delta = KeptEdges.build(d.csr.day.numpy(), d.csr.rowptr.numpy(), per_day)
            self._kept[per_day] = LiveKept.build(base, delta, self.overlay, as_numpy(d.tail), self.num_edges)
        return self._kept[per_day]
