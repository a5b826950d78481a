"""Prefix sums over every purchase edge, the arrays behind :mod:`models.graph.temporal_features`.

Per adjacency direction: the spend and the count of distinct (node, day) groups before every
edge, and a sorted ``node * span + day`` key that finds a node's edges before a day with one
``searchsorted``. They grow with the transactions (20-28 bytes per edge and direction), so
:meth:`models.store.snapshot.GraphSnapshot.build` computes them once and stores them beside the other
arrays: every training and serving process maps the same pages instead of building a private copy
on first use. They are derived data: the snapshot fingerprint does not cover them (a snapshot
rebuilt with them matches the bundles of one built without); ``meta.json`` records their own
sha256 under ``"prefix"`` and :meth:`GraphSnapshot.verify` checks it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from models.schema import ARTICLE, CUSTOMER, NODE_TYPES
from models.store.csr import TemporalCSR, sort_edges

OTHER = {CUSTOMER: ARTICLE, ARTICLE: CUSTOMER}
FIELDS = ("spend", "day_starts", "key")
INT32_MAX = np.iinfo(np.int32).max


@dataclass(frozen=True)
class EdgePrefix:
    """Prefix sums over one CSR's ``E`` edges.

    Args:
        spend: ``(E + 1,)`` float64 cumulative price (float64 so window differences stay exact).
        day_starts: ``(E + 1,)`` int32 (int64 past 2**31 edges) cumulative count of edges that start
            a (node, day) group, i.e. distinct active days.
        key: ``(E,)`` int32 (int64 when ``num_rows * span`` does not fit) ``row * span + day - min_day``,
            sorted because rows are sorted by ``(node, day)``.
        min_day: first day of any edge.
        span: ``max_day - min_day + 2`` (days ``min_day .. max_day + 1``).
    """

    spend: Tensor
    day_starts: Tensor
    key: Tensor
    min_day: int
    span: int

    def before(self, ids: Tensor, time: Tensor) -> Tensor:
        """``(N,)`` int64: the CSR position of node ``ids``'s first edge with ``day >= time``."""
        day = (time - self.min_day).clamp(min=0, max=self.span - 1)
        # the query in the key's dtype: a mixed-dtype searchsorted may convert the whole sorted key
        return torch.searchsorted(self.key, (ids * self.span + day).to(self.key.dtype))


@dataclass(frozen=True)
class SnapshotPrefix:
    """Both directions' :class:`EdgePrefix` (by source node type) and the mean edge price."""

    edges: dict[str, EdgePrefix]
    mean_price: float


def array_name(node_type: str, field: str) -> str:
    """File stem of a prefix array, e.g. ``customer_article.prefix_spend``."""
    return f"{node_type}_{OTHER[node_type]}.prefix_{field}"


def _int_dtype(largest: int) -> str:
    return "int32" if largest <= INT32_MAX else "int64"


def prefix_meta(num_nodes: dict[str, int], num_edges: int, min_day: int, max_day: int,
                mean_price: float) -> dict[str, Any]:
    """The ``"prefix"`` entry of ``meta.json`` (everything but its sha256)."""
    span = max_day - min_day + 2
    return {
        "mean_price": mean_price, "min_day": min_day, "span": span,
        "dtypes": {t: {"spend": "float64", "day_starts": _int_dtype(num_edges),
                       "key": _int_dtype(num_nodes[t] * span - 1)} for t in NODE_TYPES},
    }


def prefix_spec(prefix: dict[str, Any], num_edges: int) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Every prefix array as ``name -> (dtype, shape)`` from ``meta["prefix"]``."""
    shapes = {"spend": (num_edges + 1,), "day_starts": (num_edges + 1,), "key": (num_edges,)}
    return {array_name(t, f): (str(prefix["dtypes"][t][f]), shapes[f]) for t in NODE_TYPES for f in FIELDS}


def compute_prefix(adjacency: dict[tuple[str, str], TemporalCSR],
                   price: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The prefix arrays of a snapshot's adjacency and their ``meta.json`` entry (without sha256).

    Args:
        adjacency: both directions' CSR.
        price: ``(E,)`` price of each edge in the customer -> article CSR's order.
    """
    price_c = np.asarray(price).astype(np.float64)
    customer_csr, article_csr = adjacency[(CUSTOMER, ARTICLE)], adjacency[(ARTICLE, CUSTOMER)]
    num_edges = customer_csr.num_edges
    day_c = customer_csr.day.numpy()
    min_day = int(day_c.min()) if num_edges else 0
    max_day = int(day_c.max()) if num_edges else 0
    mean_price = float(price_c.mean()) if num_edges else 1.0
    meta = prefix_meta({CUSTOMER: customer_csr.num_rows, ARTICLE: article_csr.num_rows}, num_edges,
                       min_day, max_day, mean_price)
    # The article CSR stores no prices: re-sort the customer-ordered edges by (article, day). Ties
    # inside one (article, day) may come out in another order, which no prefix sum taken at a day
    # boundary (all the windows here) can see.
    order, _ = sort_edges(customer_csr.col.numpy(), day_c, article_csr.num_rows)
    prices = {CUSTOMER: price_c, ARTICLE: price_c[order]}
    del order
    arrays: dict[str, np.ndarray] = {}
    for node_type, csr in ((CUSTOMER, customer_csr), (ARTICLE, article_csr)):
        dtypes = meta["dtypes"][node_type]
        day, rowptr = csr.day.numpy(), csr.rowptr.numpy()
        starts = np.ones(len(day), dtype=np.int8)
        if len(day):
            starts[1:] = day[1:] != day[:-1]
            starts[rowptr[:-1][np.diff(rowptr) > 0]] = 1  # a row's first edge
        count = np.zeros(num_edges + 1, dtype=dtypes["day_starts"])
        np.cumsum(starts, dtype=count.dtype, out=count[1:])
        spend = np.zeros(num_edges + 1, dtype=np.float64)
        np.cumsum(prices[node_type], out=spend[1:])
        row = np.repeat(np.arange(csr.num_rows, dtype=np.int64), np.diff(rowptr))
        row *= meta["span"]
        row += day
        row -= min_day
        arrays[array_name(node_type, "spend")] = spend
        arrays[array_name(node_type, "day_starts")] = count
        arrays[array_name(node_type, "key")] = row.astype(dtypes["key"])
    return arrays, meta


def prefix_digest(arrays: dict[str, np.ndarray]) -> str:
    """sha256 over every prefix array's name, dtype, shape and bytes (in name order)."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{array.dtype.str}|{array.shape}".encode())
        digest.update(memoryview(array.reshape(-1).view(np.uint8)))
    return digest.hexdigest()


def snapshot_prefix(tensors: dict[str, Tensor], meta: dict[str, Any]) -> SnapshotPrefix:
    """The :class:`SnapshotPrefix` over prefix arrays (memory-mapped or in memory) as tensors."""
    days = int(meta["min_day"]), int(meta["span"])
    edges = {t: EdgePrefix(*(tensors[array_name(t, f)] for f in FIELDS), *days) for t in NODE_TYPES}
    return SnapshotPrefix(edges, float(meta["mean_price"]))


def in_memory_prefix(adjacency: dict[tuple[str, str], TemporalCSR], price: np.ndarray) -> SnapshotPrefix:
    """:func:`compute_prefix` as private in-memory tensors (snapshots built without the files)."""
    arrays, meta = compute_prefix(adjacency, price)
    return snapshot_prefix({name: torch.from_numpy(a) for name, a in arrays.items()}, meta)
