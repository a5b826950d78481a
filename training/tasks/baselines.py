"""Baselines for the three rel-hm tasks, each reading only transactions before the seed time.

The rule baselines are below; ``lightgbm`` (:mod:`training.tasks.gbdt_model`) is gradient boosting
on hand-built seed-time features, trained on earlier cutoffs.

Every baseline maps ``(transactions, TaskTable) -> predictions`` in the format that
:func:`training.tasks.metrics.compute_metrics` scores: churn and sales ``(n,)`` float64, purchase
``(n, k)`` int64 article indices ranked best first, ``-1`` where fewer than ``k`` candidates
exist. Rows are grouped by seed time, and each group reads only ``day < seed_time``.

A task's entry (:mod:`models.registry`) names its baselines by reference; :data:`BASELINES` holds
them ready to call, with the task's name and ``k`` bound where a baseline takes them (one LightGBM
function serves several tasks).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from functools import partial

import numpy as np

from models.arrays import unique_sorted
from models.registry import TaskSpec, derived
from models.store.tables import Transactions
from training.tasks.day_windows import day_slice, popular_articles, seed_groups, sort_by_day
from training.tasks.table import TaskTable

Baseline = Callable[[Transactions, TaskTable], np.ndarray]
SeedGroup = Callable[[Transactions, int, np.ndarray], np.ndarray]


def _dense_lookup(keys: np.ndarray, size: int) -> np.ndarray:
    """``(size,)`` int64 map from a key to its position in ``keys`` (``-1`` for absent keys)."""
    pos = np.full(size, -1, dtype=np.int64)
    pos[keys] = np.arange(len(keys))
    return pos


def _by_seed_time(tx: Transactions, table: TaskTable, group: SeedGroup, k: int | None = None) -> np.ndarray:
    """Every baseline's loop: ``group(day-sorted tx, seed_time, rows)`` predicts the table's ``rows``
    of one seed time (a ``(len(rows),)`` array, or one row for them all).

    Returns:
        ``(n,)`` float64, or with ``k`` ``(n, k)`` int64.
    """
    tx = sort_by_day(tx)
    pred = np.empty(len(table), dtype=np.float64) if k is None else np.empty((len(table), k), dtype=np.int64)
    for seed_time, rows in seed_groups(table.seed_time):
        pred[rows] = group(tx, seed_time, rows)
    return pred


def churn_recency_frequency(tx: Transactions, table: TaskTable, weeks: int = 4) -> np.ndarray:
    """Churn score from purchase frequency, ties broken by recency (higher = more likely to churn).

    Over the last ``weeks`` weeks before the seed time, a customer who bought in ``a`` of them
    scores ``1 - (a + 1) / (weeks + 2)``: the Laplace-smoothed share of recent weeks without a
    purchase. Days since the last purchase (``r``, ``7 * weeks + 1`` if none in that span) add
    ``r / ((7 * weeks + 2) * (weeks + 2))``, less than one frequency step, so among equally
    frequent buyers the one absent longest ranks as likelier to churn.

    Returns:
        ``(n,)`` float64 scores in ``[0, 1]``.
    """
    span = 7 * weeks

    def group(tx: Transactions, seed_time: int, rows: np.ndarray) -> np.ndarray:
        hist = day_slice(tx, seed_time - span, seed_time - 1)
        customers = unique_sorted(table.entity[rows])
        size = max(int(customers.max()), int(tx.customer[hist].max(initial=0))) + 1
        pos = _dense_lookup(customers, size)[tx.customer[hist]]
        known = pos >= 0
        pos, days = pos[known], tx.day[hist][known].astype(np.int64)
        week = (seed_time - 1 - days) // 7
        active_weeks = np.bincount(unique_sorted(pos * weeks + week) // weeks, minlength=len(customers))
        last_day = np.full(len(customers), seed_time - span - 1, dtype=np.int64)
        np.maximum.at(last_day, pos, days)
        recency = seed_time - last_day
        per_customer = 1 - (active_weeks + 1) / (weeks + 2) + recency / ((span + 2) * (weeks + 2))
        return per_customer[np.searchsorted(customers, table.entity[rows])]

    return _by_seed_time(tx, table, group)


def sales_last_week(tx: Transactions, table: TaskTable) -> np.ndarray:
    """Sales forecast = the article's sum of price over the 7 days before the seed time.

    Returns:
        ``(n,)`` float64 predicted sales.
    """
    def group(tx: Transactions, seed_time: int, rows: np.ndarray) -> np.ndarray:
        week = day_slice(tx, seed_time - 7, seed_time - 1)
        size = max(int(table.entity[rows].max()), int(tx.article[week].max(initial=0))) + 1
        sales = np.bincount(tx.article[week], weights=tx.price[week], minlength=size)
        return sales[table.entity[rows]]

    return _by_seed_time(tx, table, group)


def _popular(tx: Transactions, seed_time: int, k: int) -> np.ndarray:
    """``(k,)`` :func:`popular_articles`, padded with ``-1`` when fewer than ``k`` articles sold."""
    top = popular_articles(tx, seed_time, k)
    return np.concatenate([top, np.full(k - len(top), -1, dtype=np.int64)])


def purchase_popular(tx: Transactions, table: TaskTable, k: int = 12) -> np.ndarray:
    """Everyone gets the global top-``k`` articles of the last week before the seed time.

    Returns:
        ``(n, k)`` int64 article indices, best first.
    """
    return _by_seed_time(tx, table, lambda tx, seed_time, rows: _popular(tx, seed_time, k), k)


def _last_distinct_articles(tx: Transactions, stop: int, customers: np.ndarray, k: int) -> np.ndarray:
    """``(len(customers), k)`` each customer's ``k`` most recent distinct articles in rows ``[0, stop)``.

    Rows are day-sorted with file order kept within a day, so a later row is a later purchase.
    History is read newest first in time chunks that double in length, and customers whose
    list is full drop out, so frequent buyers cost only their recent weeks. ``customers``
    must be unique; ``-1`` pads short histories.
    """
    out = np.full((len(customers), k), -1, dtype=np.int64)
    filled = np.zeros(len(customers), dtype=np.int64)
    size = max(int(customers.max()), int(tx.customer[:stop].max(initial=0))) + 1
    slot = _dense_lookup(customers, size)
    end, span_days = stop, 28
    while end > 0 and (filled < k).any():
        start = int(np.searchsorted(tx.day[:end], int(tx.day[end - 1]) - span_days + 1))
        owner = slot[tx.customer[start:end]]
        open_row = owner >= 0
        open_row[open_row] = filled[owner[open_row]] < k
        rows = (start + np.flatnonzero(open_row))[::-1]
        owner, article = slot[tx.customer[rows]], tx.article[rows]
        # unique() on the newest-first rows returns each (customer, article) pair's latest row.
        _, first = np.unique(owner * (int(article.max(initial=0)) + 1) + article, return_index=True)
        first = first[np.lexsort((first, owner[first]))]  # per customer, newest first
        owner, article = owner[first], article[first]
        fresh = ~(out[owner] == article[:, None]).any(axis=1)
        owner, article = owner[fresh], article[fresh]
        starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
        rank = np.arange(len(owner)) - np.repeat(starts, np.diff(np.r_[starts, len(owner)]))
        column = filled[owner] + rank
        placed = column < k
        out[owner[placed], column[placed]] = article[placed]
        filled += np.bincount(owner[placed], minlength=len(customers))
        end, span_days = start, 2 * span_days
    return out


def _top_up(pred: np.ndarray, fill: np.ndarray) -> np.ndarray:
    """Append ``fill``'s items (in order, skipping ones already in the row) into ``-1`` slots.

    Args:
        pred: ``(m, k)`` int64, valid items first then ``-1`` padding; filled in place.
        fill: ``(f,)`` int64 distinct items, ``-1`` padding at the end.
    """
    k = pred.shape[1]
    usable = (fill >= 0) & ~(pred[:, :, None] == fill[None, None, :]).any(axis=1)
    order = np.argsort(~usable, axis=1, kind="stable")
    candidates = np.where(np.take_along_axis(usable, order, axis=1), fill[order], -1)
    column = (pred >= 0).sum(axis=1, keepdims=True) + np.arange(len(fill))
    row, j = np.nonzero(column < k)
    pred[row, column[row, j]] = candidates[row, j]
    return pred


def purchase_repeat(tx: Transactions, table: TaskTable, k: int = 12) -> np.ndarray:
    """Each customer's own most recently bought distinct articles, topped up with the popular list.

    Returns:
        ``(n, k)`` int64 article indices, best first.
    """
    def group(tx: Transactions, seed_time: int, rows: np.ndarray) -> np.ndarray:
        customers, inverse = np.unique(table.entity[rows], return_inverse=True)
        stop = int(np.searchsorted(tx.day, seed_time, side="left"))
        own = _last_distinct_articles(tx, stop, customers, k)
        return _top_up(own, _popular(tx, seed_time, k))[inverse]

    return _by_seed_time(tx, table, group, k)


def task_baselines(spec: TaskSpec) -> dict[str, Baseline]:
    """The baselines ``spec`` names, as ``(transactions, table) -> predictions``: a parameter
    ``task`` gets the task's name and ``k`` its list length."""
    bound = {"task": spec.name, "k": spec.k}
    baselines = {}
    for name, function in spec.baseline_functions().items():
        given = {p: v for p, v in bound.items() if p in inspect.signature(function).parameters}
        baselines[name] = partial(function, **given) if given else function
    return baselines


BASELINES: Mapping[str, dict[str, Baseline]] = derived(task_baselines)
"""Per task, its baselines by report name (follows registrations)."""
