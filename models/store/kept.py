"""The sampler's ``per_day`` candidate list over a time-sorted CSR: the last edges of each (node, day).

Kept here, beside the CSR it indexes, so that the live graph (:mod:`models.store.live`) can build
the same structure over its delta and combine it with the base's (:class:`LiveKept`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from models.store.overlay import AFTER, BEFORE, DELTA, Overlay, VirtualCumulative, as_numpy, as_tensor, take


@dataclass(frozen=True)
class KeptEdges:
    """The last ``per_day`` edges of every (node, day) group of a CSR, as a sub-list of positions.

    ``positions`` ``(K,)`` int64 are the kept CSR positions in order; ``cumulative`` ``(E + 1,)``
    int64 counts kept edges before each CSR position, so the kept edges of CSR range ``[s, e)`` are
    ``positions[cumulative[s]:cumulative[e]]``, still sorted by day.
    """

    positions: Tensor
    cumulative: Tensor

    @classmethod
    def build(cls, day: np.ndarray, rowptr: np.ndarray, per_day: int) -> KeptEdges:
        """Over a CSR's ``(E,)`` edge days and ``(N + 1,)`` row pointers."""
        num = len(day)
        last_of_group = np.ones(num, dtype=bool)  # the edge ends its (node, day) group
        if num:
            last_of_group[:-1] = day[1:] != day[:-1]
            ends = rowptr[1:][np.diff(rowptr) > 0] - 1
            last_of_group[ends] = True
        group_end = np.flatnonzero(last_of_group)
        end_of = group_end[np.searchsorted(group_end, np.arange(num))]  # each edge's group end
        keep = (end_of - np.arange(num)) < per_day
        cumulative = np.concatenate([[0], np.cumsum(keep)])
        return cls(torch.from_numpy(np.flatnonzero(keep)), torch.from_numpy(cumulative))


@dataclass(frozen=True)
class VirtualKeptPositions:
    """``positions`` of a live graph's kept sub-list, read at kept ranks, as virtual positions
    (:mod:`models.store.overlay`).

    Args:
        ranks: the overlay of kept ranks (base kept list + the delta's kept lists).
        positions: the overlay of edge positions.
        base, delta: the base's and the delta's kept positions.
        size: kept edges of the virtual CSR.
    """

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
    """:class:`KeptEdges` of a live graph's virtual CSR (same attributes, read lazily)."""

    positions: VirtualKeptPositions
    cumulative: VirtualCumulative

    @classmethod
    def build(cls, base: KeptEdges, delta: KeptEdges, o: Overlay, tail: np.ndarray,
              num_edges: int) -> LiveKept:
        """From the base's and the delta's kept edges, the position overlay ``o`` and each dirty row's
        replaced base tail ``(K,)``."""
        base_cumulative, delta_cumulative = as_numpy(base.cumulative), as_numpy(delta.cumulative)
        head_end = o.base_start + o.head
        rank_start = base_cumulative[o.base_start]
        rank_head = base_cumulative[head_end] - rank_start
        rank_tail = base_cumulative[head_end + tail] - rank_start - rank_head
        delta_start = delta_cumulative[o.delta_start]
        delta_length = delta_cumulative[o.delta_start + o.length] - delta_start
        ranks = Overlay.build(rank_start, rank_head, rank_tail, delta_start, delta_length)
        size = int(base.positions.numel()) + int(ranks.shift[-1])
        return cls(VirtualKeptPositions(ranks, o, as_numpy(base.positions), as_numpy(delta.positions), size),
                   VirtualCumulative.build(o, base_cumulative, delta_cumulative, tail, num_edges + 1))
