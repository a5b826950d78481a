"""Seed-time temporal aggregates of every sampled node, from the snapshot's time-sorted CSR.

What a data scientist would hand-build for a customer or an article at a prediction time:
how many purchases, how much spend and how many distinct active days in the last 7, 14, 28,
91 and 364 days, days since the last and the first purchase, and lifetime counts. The same
function runs in training (each row at its own seed time) and in serving (at the snapshot's
end), so the model reads identical inputs offline and online.

Everything is vectorised: per node a few binary searches over its row's sorted days
(:meth:`models.csr.TemporalCSR.row_bounds_before`) and differences of prefix sums over the
edges. Only edges with ``day < seed_time`` count, exactly the edges the sampler may follow.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from models.csr import TemporalCSR, sort_edges
from models.schema import ARTICLE, CUSTOMER

OTHER = {CUSTOMER: ARTICLE, ARTICLE: CUSTOMER}
WINDOWS_DAYS: tuple[int, ...] = (7, 14, 28, 91, 364)
RECENCY_CAP_DAYS = 365
FEATURE_NAMES: tuple[str, ...] = (
    *(f"{kind}_{w}d" for w in WINDOWS_DAYS for kind in ("count", "spend", "days")),
    "count_all", "days_all", "days_since_last", "days_since_first", "has_history",
)
NUM_TEMPORAL = len(FEATURE_NAMES)
# log1p values of counts reach ~10 on busy nodes; this keeps the inputs of the encoder near unit scale.
_LOG_SCALE = 1.0 / 4.0


@dataclass(frozen=True)
class _Prefix:
    """Per CSR: prefix sums over its edges, ``(E + 1,)`` each (price as float64, day starts), and
    ``key`` ``(E,)`` int64 ``row * span + day - min_day``, sorted because rows are sorted by
    ``(node, day)``: one ``searchsorted`` finds a row's edges before a day for every node at once."""

    spend: Tensor
    day_starts: Tensor
    key: Tensor
    min_day: int
    span: int

    def before(self, ids: Tensor, time: Tensor) -> Tensor:
        """``(N,)`` int64: the CSR position of node ``ids``'s first edge with ``day >= time``."""
        day = (time - self.min_day).clamp(min=0, max=self.span - 1)
        return torch.searchsorted(self.key, ids * self.span + day)


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _prefix_sums(snapshot, node_type: str) -> tuple[_Prefix, float]:
    """The prefix sums of ``node_type``'s CSR and the mean price (computed once per snapshot)."""
    cached = _CACHE.get(snapshot)
    if cached is None:
        cached = _CACHE[snapshot] = _build_prefix(snapshot)
    return cached[node_type], cached["mean_price"]


def _build_prefix(snapshot) -> dict:
    price_c = snapshot.price.numpy().astype(np.float64)  # in the customer CSR's edge order
    customer_csr: TemporalCSR = snapshot.adjacency[(CUSTOMER, ARTICLE)]
    article_csr: TemporalCSR = snapshot.adjacency[(ARTICLE, CUSTOMER)]
    # The article CSR stores no prices: re-sort the customer-ordered edges by (article, day). Ties
    # inside one (article, day) may come out in another order, which no prefix sum taken at a day
    # boundary (all the windows here) can see.
    order, _ = sort_edges(customer_csr.col.numpy(), customer_csr.day.numpy(), article_csr.num_rows)
    prices = {CUSTOMER: price_c, ARTICLE: price_c[order]}
    out: dict = {"mean_price": float(price_c.mean()) if len(price_c) else 1.0}
    for node_type, csr in ((CUSTOMER, customer_csr), (ARTICLE, article_csr)):
        day = csr.day.numpy()
        starts = np.ones(len(day), dtype=np.int64)
        if len(day):
            starts[1:] = day[1:] != day[:-1]
            starts[csr.rowptr.numpy()[:-1][np.diff(csr.rowptr.numpy()) > 0]] = 1  # a row's first edge
        spend = np.concatenate([[0.0], np.cumsum(prices[node_type])])
        count = np.concatenate([[0], np.cumsum(starts)])
        min_day = int(day.min()) if len(day) else 0
        span = (int(day.max()) if len(day) else 0) - min_day + 2  # days min_day .. max_day + 1
        row = np.repeat(np.arange(csr.num_rows, dtype=np.int64), np.diff(csr.rowptr.numpy()))
        key = row * span + (day.astype(np.int64) - min_day)
        out[node_type] = _Prefix(torch.from_numpy(spend), torch.from_numpy(count), torch.from_numpy(key),
                                 min_day, span)
    return out


def _between(cumulative: Tensor, lo: Tensor, hi: Tensor) -> Tensor:
    """``(N,)`` float64 sum of the edges at positions ``lo <= pos < hi`` from their prefix sums."""
    return (cumulative.index_select(0, hi) - cumulative.index_select(0, lo)).double()


def temporal_features(snapshot, node_type: str, ids: Tensor, seed_time: Tensor) -> Tensor:
    """Temporal aggregates of nodes ``ids`` at ``seed_time``, from edges with ``day < seed_time``.

    Args:
        snapshot: a :class:`models.snapshot.GraphSnapshot`.
        node_type: ``"customer"`` or ``"article"``.
        ids: ``(N,)`` int64 dense node indices.
        seed_time: ``(N,)`` int64 seed time of each node's tree (days).

    Returns:
        ``(N, NUM_TEMPORAL)`` float32 in the order of :data:`FEATURE_NAMES`: ``log1p`` of counts,
        spend (in units of the snapshot's mean price) and distinct days per window, scaled; recency
        and age as ``log1p(days) / log1p(cap)``; ``has_history`` 0/1.
    """
    ids, seed_time = ids.long(), seed_time.long()
    csr = snapshot.adjacency[(node_type, OTHER[node_type])]
    prefix, mean_price = _prefix_sums(snapshot, node_type)
    start, end = csr.rowptr.index_select(0, ids), prefix.before(ids, seed_time)
    columns = []
    for window in WINDOWS_DAYS:
        lo = prefix.before(ids, seed_time - window)
        columns.append((end - lo).double())
        columns.append(_between(prefix.spend, lo, end) / mean_price)
        columns.append(_between(prefix.day_starts, lo, end))
    columns.append((end - start).double())
    columns.append(_between(prefix.day_starts, start, end))
    logged = torch.stack(columns, dim=1).clamp(min=0.0).log1p() * _LOG_SCALE
    has = end > start
    last_edge = (end - 1).clamp(min=0, max=max(csr.num_edges - 1, 0))
    first_edge = start.clamp(max=max(csr.num_edges - 1, 0))
    if csr.num_edges:
        since_last = torch.where(has, seed_time - csr.day.index_select(0, last_edge).long(), RECENCY_CAP_DAYS)
        since_first = torch.where(has, seed_time - csr.day.index_select(0, first_edge).long(), 0)
    else:
        since_last = torch.full_like(seed_time, RECENCY_CAP_DAYS)
        since_first = torch.zeros_like(seed_time)
    cap = math.log1p(RECENCY_CAP_DAYS)
    recency = since_last.clamp(max=RECENCY_CAP_DAYS).double().log1p() / cap
    age = since_first.clamp(min=0, max=RECENCY_CAP_DAYS).double().log1p() / cap
    return torch.cat([logged, recency[:, None], age[:, None], has[:, None].double()], dim=1).float()




def active_within(snapshot, node_type: str, ids: Tensor, seed_time: Tensor, days: int) -> Tensor:
    """``(N,)`` bool: whether each node has an event in the ``days`` days before its seed time
    (``seed_time - days <= day < seed_time``), e.g. the churn task's population for ``days=7``."""
    prefix, _ = _prefix_sums(snapshot, node_type)
    ids, seed_time = ids.long(), seed_time.long()
    return prefix.before(ids, seed_time) > prefix.before(ids, seed_time - days)
