"""Time-sorted compressed sparse rows: the adjacency layout the temporal sampler searches.

Each row's neighbours are sorted by day (ties keep the input order), so "the edges of
node ``v`` strictly before time ``t``" is one contiguous prefix of the row, found by a
binary search, and "the most recent ``k`` of them" is that prefix's tail.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor


@dataclass(frozen=True)
class TemporalCSR:
    """Adjacency of one direction (``src type -> dst type``), rows sorted by ``(node, day)``.

    Args:
        rowptr: ``(N_src + 1,)`` int64; row ``v`` owns positions ``rowptr[v]:rowptr[v + 1]``.
        col: ``(E,)`` int32 dense index of the neighbour (of the dst type).
        day: ``(E,)`` int32 day of the edge, non-decreasing within each row.
    """

    rowptr: Tensor
    col: Tensor
    day: Tensor

    @property
    def num_rows(self) -> int:
        return int(self.rowptr.numel()) - 1

    @property
    def num_edges(self) -> int:
        return int(self.col.numel())

    def row_bounds_before(self, nodes: Tensor, time: Tensor) -> tuple[Tensor, Tensor]:
        """Per node, the CSR positions of its edges with ``day < time``.

        A vectorised lower-bound binary search over each row's sorted days: one pass per
        halving of the widest row, every row searched at once.

        Args:
            nodes: ``(F,)`` int64 row indices.
            time: ``(F,)`` int64 exclusive upper bound on the edge day, per node.

        Returns:
            ``(start, end)``, each ``(F,)`` int64: the allowed edges are ``start <= pos < end``.
        """
        # index_select rather than advanced indexing: many times faster for 1-d gathers on CPU.
        start = self.rowptr.index_select(0, nodes)
        lo, hi = start.clone(), self.rowptr.index_select(0, nodes + 1)
        if nodes.numel() == 0:
            return start, lo
        last = max(self.num_edges - 1, 0)
        # Each pass halves every open range, so the widest row's bit length bounds the passes.
        for _ in range(int((hi - lo).max()).bit_length()):
            active = lo < hi
            mid = (lo + hi) // 2
            before = self.day.index_select(0, mid.clamp(max=last)) < time
            lo = torch.where(active & before, mid + 1, lo)
            hi = torch.where(active & ~before, mid, hi)
        return start, lo


def sort_edges(src: np.ndarray, day: np.ndarray, num_src: int) -> tuple[np.ndarray, np.ndarray]:
    """Order edges by ``(src, day)``, ties by input position, and count them per source row.

    Sorting unique composite int64 keys by value (then decoding the position back out)
    is several times faster than an argsort at the 30M-edge scale and still deterministic.

    Args:
        src: ``(E,)`` integer source node index in ``[0, num_src)``.
        day: ``(E,)`` integer day.
        num_src: number of source rows ``N_src``.

    Returns:
        ``(order, rowptr)``: ``(E,)`` int64 permutation into the input edges, and
        ``(N_src + 1,)`` int64 row pointers of the sorted edges.
    """
    num_edges = int(src.shape[0])
    rowptr = np.zeros(num_src + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=num_src), out=rowptr[1:])
    if num_edges == 0:
        return np.zeros(0, dtype=np.int64), rowptr
    min_day = int(day.min())
    span = int(day.max()) - min_day + 1
    key = src.astype(np.int64) * span + (day.astype(np.int64) - min_day)
    if num_src * span * num_edges < 2**62:
        key *= num_edges
        key += np.arange(num_edges, dtype=np.int64)
        key.sort()
        return key % num_edges, rowptr
    return np.argsort(key, kind="stable"), rowptr
