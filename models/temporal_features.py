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

import logging
import math
import time
import weakref

import torch
from torch import Tensor

from models.snapshot_prefix import OTHER, EdgePrefix, in_memory_prefix

log = logging.getLogger(__name__)
WINDOWS_DAYS: tuple[int, ...] = (7, 14, 28, 91, 364)
RECENCY_CAP_DAYS = 365
FEATURE_NAMES: tuple[str, ...] = (
    *(f"{kind}_{w}d" for w in WINDOWS_DAYS for kind in ("count", "spend", "days")),
    "count_all", "days_all", "days_since_last", "days_since_first", "has_history",
)
NUM_TEMPORAL = len(FEATURE_NAMES)
# log1p values of counts reach ~10 on busy nodes; this keeps the inputs of the encoder near unit scale.
_LOG_SCALE = 1.0 / 4.0


_IN_MEMORY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _prefix_sums(snapshot, node_type: str) -> tuple[EdgePrefix, float]:
    """The prefix sums of ``node_type``'s CSR and the mean price: the snapshot's memory-mapped
    arrays, or for a snapshot built without them, a private copy computed once per process."""
    prefix = snapshot.prefix if getattr(snapshot, "prefix", None) is not None else _IN_MEMORY.get(snapshot)
    if prefix is None:
        started = time.perf_counter()
        prefix = _IN_MEMORY[snapshot] = in_memory_prefix(snapshot.adjacency, snapshot.price.numpy())
        size = sum(t.nbytes for e in prefix.edges.values() for t in (e.spend, e.day_starts, e.key))
        log.warning("%s has no stored prefix arrays (built before they were): computed them in %.1fs, %d MB "
                    "private to this process; store them once with: python -m models.upgrade_snapshot %s",
                    snapshot.directory, time.perf_counter() - started, size // 2**20, snapshot.directory)
    return prefix.edges[node_type], prefix.mean_price


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
    if ids.numel() == 0:
        return _features(snapshot, node_type, ids, seed_time)
    # Each distinct (node, time) once, in sorted order: a sampled batch repeats popular nodes, and
    # sorted queries make the binary searches over the E-edge key walk shared paths (2-3x faster
    # than random order at 30M edges). Rows are computed independently, so the values are unchanged.
    t0 = seed_time.min()
    width = int(seed_time.max() - t0) + 1
    pairs, inverse = torch.unique(ids * width + (seed_time - t0), return_inverse=True)
    return _features(snapshot, node_type, pairs // width, pairs % width + t0).index_select(0, inverse)


def _features(snapshot, node_type: str, ids: Tensor, seed_time: Tensor) -> Tensor:
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
