"""The delta of one adjacency direction: the dirty rows' edges from their split day on, in memory.

Built from every edge ingested since the base (:func:`build_delta`), rebuilt whole after each
applied batch: it holds the new edges plus the few base edges they would interleave with (a row's
base edges on or after its earliest new day), so each dirty row's delta segment is already in the
order a rebuild would give it: by day, base edges before new ones within a day, new ones in log order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from models.store.csr import TemporalCSR
from models.store.snapshot_prefix import EdgePrefix


@dataclass(frozen=True)
class DeltaCSR:
    """The delta of one direction over ``K`` dirty rows and ``M`` edges.

    Args:
        nodes: ``(K,)`` int64 dirty rows (source node indices), sorted.
        split: ``(K,)`` int64 per dirty row, the day from which its edges live here (its base edges
            before it stay in the base).
        head: ``(K,)`` int64 number of the row's base edges before ``split``.
        tail: ``(K,)`` int64 number of the row's base edges from ``split`` on (copied here).
        csr: rows ``0..K-1`` (dirty row ``j``), ``col`` ``(M,)`` int32, ``day`` ``(M,)`` int32.
        price: ``(M,)`` float64 price of each edge.
        prefix: prefix sums over the delta's own positions (its ``key`` over ``j * span + day``).
        new_edges: how many of the ``M`` edges are new (the others are copied base edges).
        new_spend: their summed price (float64).
        log_index: ``(M,)`` int64 each edge's index among the new edges in log order, ``-1`` for a
            copied base edge (what a later version's delta adds is found by it).
    """

    nodes: Tensor
    split: Tensor
    head: Tensor
    tail: Tensor
    csr: TemporalCSR
    price: Tensor
    prefix: EdgePrefix
    new_edges: int
    new_spend: float
    log_index: Tensor | None = None

    @property
    def num_rows(self) -> int:
        return int(self.nodes.numel())


def _ranges(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every position of the ranges ``[start[i], end[i])`` and its range ``i``, concatenated."""
    length = end - start
    row = np.repeat(np.arange(len(start)), length)
    first = np.cumsum(length) - length
    return start[row] + (np.arange(int(length.sum())) - first[row]), row


def build_delta(base: TemporalCSR, base_prefix: EdgePrefix, base_price: Tensor | None, num_base_rows: int,
                src: np.ndarray, dst: np.ndarray, day: np.ndarray, price: np.ndarray) -> DeltaCSR:
    """The delta of one direction from the new edges in log order.

    Args:
        base: the base's CSR of this direction (memory-mapped; read, never copied whole).
        base_prefix: its prefix sums (the day search, and the prices of an article row's copied edges).
        base_price: ``(E,)`` the base's edge prices in this direction's order, or ``None`` (the article
            direction stores none: copied edges take theirs from ``base_prefix.spend`` differences).
        num_base_rows: rows of the base (source nodes at or past it are new nodes).
        src, dst, day, price: ``(T,)`` the new edges in log order: source and destination node
            indices, day, price.
    """
    src, day = src.astype(np.int64), day.astype(np.int64)
    present = np.bincount(src) > 0 if len(src) else np.zeros(0, dtype=bool)
    nodes = np.flatnonzero(present).astype(np.int64)  # sorted, without np.unique's sort
    row_of = (np.cumsum(present) - 1)[src]
    num = len(nodes)
    # The new edges by (row, day), in log order within one: one stable sort of one key.
    order = np.argsort(_sort_key(row_of, day), kind="stable")
    count = np.bincount(row_of, minlength=num)
    split = day[order][np.cumsum(count) - count]  # each row's earliest new day
    in_base = nodes < num_base_rows
    rowptr = base.rowptr.numpy()
    base_start = np.zeros(num, dtype=np.int64)
    tail_end = np.zeros(num, dtype=np.int64)
    base_start[in_base] = rowptr[nodes[in_base]]
    tail_end[in_base] = rowptr[nodes[in_base] + 1]
    tail_start = tail_end.copy()
    # Only a row with new edges on or before the base's last day has base edges to copy (a tail).
    late = in_base & (split <= base_prefix.min_day + base_prefix.span - 2)
    if late.any():
        late_nodes, late_split = torch.from_numpy(nodes[late]), torch.from_numpy(split[late])
        tail_start[late] = base_prefix.before(late_nodes, late_split).numpy()
    positions, tail_row = _ranges(tail_start, tail_end)
    new_price = price.astype(np.float32).astype(np.float64)
    if len(positions):
        index = torch.from_numpy(positions)
        if base_price is not None:
            tail_price = base_price.index_select(0, index).numpy().astype(np.float64)
        else:
            spend = base_prefix.spend
            tail_price = (spend.index_select(0, index + 1) - spend.index_select(0, index)).numpy()
        # One order for both: row, day, copied base edges before new ones, then base order / log order.
        rows = np.concatenate([tail_row, row_of])
        days = np.concatenate([base.day.index_select(0, index).numpy().astype(np.int64), day])
        source = np.concatenate([np.zeros(len(tail_row), np.int64), np.ones(len(row_of), np.int64)])
        order = np.argsort(_row_day(rows, days) * 2 + source, kind="stable")
        log_index = np.concatenate([np.full(len(tail_row), -1), np.arange(len(row_of))])[order]
        rows, days = rows[order], days[order]
        cols = np.concatenate([base.col.index_select(0, index).numpy().astype(np.int64), dst])[order]
        prices = np.concatenate([tail_price, new_price])[order]
    else:
        rows, days, cols, prices, log_index = row_of[order], day[order], dst[order], new_price[order], order
    delta_rowptr = np.zeros(num + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=num), out=delta_rowptr[1:])
    csr = TemporalCSR(torch.from_numpy(delta_rowptr), torch.from_numpy(cols.astype(np.int32)),
                      torch.from_numpy(days.astype(np.int32)))
    return DeltaCSR(
        nodes=torch.from_numpy(nodes), split=torch.from_numpy(split),
        head=torch.from_numpy(tail_start - base_start), tail=torch.from_numpy(tail_end - tail_start),
        csr=csr, price=torch.from_numpy(prices), prefix=_prefix(rows, days, prices, delta_rowptr),
        new_edges=len(row_of), new_spend=float(new_price.sum()),
        log_index=torch.from_numpy(log_index.astype(np.int64)))


def _sort_key(rows: np.ndarray, days: np.ndarray) -> np.ndarray:
    """``(T,)`` a key whose stable sort sorts by (row, day): ``row * span + day - min_day``, or the
    row alone when the days never decrease (rows in log order, as a stream usually is), in 16 bits
    where it fits (numpy sorts those by radix, ~10x faster than int64)."""
    if not len(days):
        return rows
    if not (days[1:] < days[:-1]).any():
        return rows.astype(np.uint16) if rows.max() < 2**16 else rows
    return _row_day(rows, days)


def _row_day(rows: np.ndarray, days: np.ndarray) -> np.ndarray:
    """``(T,)`` int64 ``row * span + day - min_day`` (``rows`` and ``days`` int64)."""
    low = int(days.min()) if len(days) else 0
    return rows * (int(days.max()) - low + 1 if len(days) else 1) + (days - low)


def _prefix(rows: np.ndarray, days: np.ndarray, prices: np.ndarray, rowptr: np.ndarray) -> EdgePrefix:
    """Prefix sums over the delta's sorted edges, as :func:`models.store.snapshot_prefix.compute_prefix`."""
    num = len(days)
    min_day = int(days.min()) if num else 0
    span = (int(days.max()) - min_day + 2) if num else 2
    starts = np.ones(num, dtype=np.int64)
    if num:
        starts[1:] = days[1:] != days[:-1]
        starts[rowptr[:-1][np.diff(rowptr) > 0]] = 1
    day_starts = np.zeros(num + 1, dtype=np.int64)
    np.cumsum(starts, out=day_starts[1:])
    spend = np.zeros(num + 1, dtype=np.float64)
    np.cumsum(prices, out=spend[1:])
    key = rows * span + (days - min_day)
    return EdgePrefix(torch.from_numpy(spend), torch.from_numpy(day_starts), torch.from_numpy(key),
                      min_day, span)
