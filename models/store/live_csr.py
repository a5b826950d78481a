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

import torch
from torch import Tensor

from models.store.csr import TemporalCSR
from models.store.delta import DeltaCSR
from models.store.kept import KeptEdges
from models.store.overlay import AFTER, BEFORE, DELTA, Overlay, VirtualArray, VirtualCumulative, take
from models.store.snapshot_prefix import EdgePrefix

FAR = 2**40  # a day after every edge (the split of a row the delta does not touch)


@dataclass(frozen=True)
class VirtualRowptr:
    """``(N + 1,)`` row pointers of the virtual CSR, for base rows and new rows alike."""

    base: Tensor
    nodes: Tensor
    shift: Tensor
    size: int

    def index_select(self, dim: int, index: Tensor) -> Tensor:
        assert dim == 0
        dirty_before = torch.searchsorted(self.nodes, index)
        base = self.base.index_select(0, index.clamp(max=self.base.shape[0] - 1))
        return base + self.shift.index_select(0, dirty_before)

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

    def before(self, ids: Tensor, time: Tensor) -> Tensor:
        delta = self.delta
        in_base = ids < self.num_base_rows
        base_ids = ids.clamp(max=self.num_base_rows - 1)
        count = torch.zeros_like(ids)
        if delta.num_rows:
            dirty_at = torch.searchsorted(delta.nodes, ids).clamp(max=delta.num_rows - 1)
            dirty = delta.nodes.index_select(0, dirty_at) == ids
            time_in_base = torch.minimum(time, torch.where(dirty, delta.split.index_select(0, dirty_at), FAR))
            delta_count = delta.prefix.before(dirty_at, time) - delta.csr.rowptr.index_select(0, dirty_at)
            count = torch.where(dirty, delta_count, count)
        else:
            time_in_base = time
        base_count = self.base.before(base_ids, time_in_base) - self.rowptr.base.index_select(0, base_ids)
        count = count + torch.where(in_base, base_count, 0)
        return self.rowptr.index_select(0, ids) + count


@dataclass(frozen=True)
class VirtualKeptPositions:
    """``positions`` of the sampler's kept sub-list, read at kept ranks, as virtual positions."""

    ranks: Overlay
    positions: Overlay
    base: Tensor
    delta: Tensor
    size: int

    def index_select(self, dim: int, index: Tensor) -> Tensor:
        assert dim == 0
        if self.ranks.start.numel() == 0:  # no dirty row: the base's own positions
            return self.base.index_select(0, index)
        row, case, base_rank, delta_rank = self.ranks.locate(index)
        in_delta = case == DELTA
        source = take(self.base, self.delta, in_delta, base_rank, delta_rank)
        shift = self.positions.shift.index_select(0, row + (case == AFTER).long())
        from_base = source + torch.where(case == BEFORE, 0, shift)
        from_delta = self.positions.head_end(row) + (source - self.positions.delta_start.index_select(0, row))
        return torch.where(in_delta, from_delta, from_base)

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
        base_start = self.base.rowptr.index_select(0, d.nodes.clamp(max=base_rows))
        overlay = Overlay.build(base_start, d.head, d.tail, d.csr.rowptr[:-1], d.csr.rowptr.diff())
        num_edges = self.base.num_edges + int(overlay.shift[-1])
        rowptr = VirtualRowptr(self.base.rowptr, d.nodes, overlay.shift, self.num_rows + 1)
        spend = VirtualCumulative.build(overlay, self.base_prefix.spend, d.prefix.spend, d.tail,
                                        num_edges + 1)
        days = VirtualCumulative.build(overlay, self.base_prefix.day_starts, d.prefix.day_starts, d.tail,
                                       num_edges + 1)
        for name, value in (("overlay", overlay), ("num_edges", num_edges), ("rowptr", rowptr),
                            ("col", VirtualArray(overlay, self.base.col, d.csr.col, num_edges)),
                            ("day", VirtualArray(overlay, self.base.day, d.csr.day, num_edges)),
                            ("prefix", LivePrefix(self.base_prefix, d, rowptr, spend, days, base_rows)),
                            ("_kept", {})):
            object.__setattr__(self, name, value)

    def row_bounds_before(self, nodes: Tensor, time: Tensor) -> tuple[Tensor, Tensor]:
        """As :meth:`models.store.csr.TemporalCSR.row_bounds_before`, in virtual positions."""
        return self.rowptr.index_select(0, nodes), self.prefix.before(nodes, time)

    def kept(self, per_day: int) -> LiveKept:
        """The sampler's ``per_day`` candidate sub-list of this CSR (built once per version)."""
        if per_day not in self._kept:
            base = self.kept_cache.get(per_day)
            if base is None:
                base = self.kept_cache[per_day] = KeptEdges.build(
                    self.base.day.numpy(), self.base.rowptr.numpy(), per_day)
            d = self.delta
            delta = KeptEdges.build(d.csr.day.numpy(), d.csr.rowptr.numpy(), per_day)
            o = self.overlay
            head_end = o.base_start + o.head
            rank_start = base.cumulative.index_select(0, o.base_start)
            rank_head = base.cumulative.index_select(0, head_end) - rank_start
            rank_tail = base.cumulative.index_select(0, head_end + d.tail) - rank_start - rank_head
            delta_start = delta.cumulative.index_select(0, o.delta_start)
            delta_length = delta.cumulative.index_select(0, o.delta_start + o.length) - delta_start
            ranks = Overlay.build(rank_start, rank_head, rank_tail, delta_start, delta_length)
            size = int(base.positions.numel()) + int(ranks.shift[-1])
            self._kept[per_day] = LiveKept(
                VirtualKeptPositions(ranks, o, base.positions, delta.positions, size),
                VirtualCumulative.build(o, base.cumulative, delta.cumulative, d.tail, self.num_edges + 1))
        return self._kept[per_day]
