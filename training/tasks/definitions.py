"""Tasks as training reads them (seeds, labels, train/val/test cutoffs), and the rel-hm label functions.

Each task's facts (entity type, window, metrics) are its :mod:`models.registry` entry; its labels
are built by the vectorised function the entry names (the three RelBench rel-hm tasks' are below).
Conventions for a cutoff day ``t``:
seeds get ``seed_time = t + 1`` (the model sees ``day <= t``) and labels cover days
``t + 1 .. t + 7``, i.e. RelBench's window ``(t, t + 7d]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

import numpy as np

from models.arrays import unique_sorted
from models.registry import LINK, TaskSpec, derived
from models.schema import ARTICLE, CUSTOMER
from models.store.tables import Transactions
from training.tasks.cutoffs import split_cutoffs
from training.tasks.day_windows import day_slice, seen_mask, sort_by_day
from training.tasks.table import TaskTable

LabelFunction = Callable[[Transactions, Mapping[str, int], int, int], tuple]


class Task:
    """A predictive task over the H&M transactions: a :class:`models.registry.TaskSpec` and its labels.

    Every field of the spec reads as an attribute (``task.name``, ``task.entity_type``,
    ``task.metrics``, ``task.primary_metric``, ``task.higher_is_better``, ``task.window_days``,
    ``task.k``, ...). :attr:`label_function` is the function the spec names: ``(day-sorted
    transactions, num_nodes, cutoff, window_days) -> (entity, label)`` or ``(entity, (ptr, items))``
    for link prediction.

    Args:
        spec: the task's registry entry.
    """

    def __init__(self, spec: TaskSpec) -> None:
        self.spec = spec

    @cached_property
    def label_function(self) -> LabelFunction:
        """The entry's label function (imported on first use)."""
        return self.spec.label_function()

    def __getattr__(self, name: str) -> Any:
        spec = self.__dict__.get("spec")  # absent while unpickling
        if spec is None:
            raise AttributeError(name)
        return getattr(spec, name)

    def make_table(self, tx: Transactions, num_nodes: Mapping[str, int], cutoff: int) -> TaskTable:
        """Seeds and labels for one cutoff day.

        Args:
            tx: all transactions (any order; pass them sorted by day to skip a sort).
            num_nodes: number of entities per node type, e.g. ``{"customer": C, "article": A}``.
            cutoff: the cutoff day ``t``; the table's ``seed_time`` is ``t + 1``.
        """
        tx = sort_by_day(tx)
        entity, truth = self.label_function(tx, num_nodes, cutoff, self.window_days)
        seed_time = np.full(len(entity), cutoff + 1, dtype=np.int64)
        if self.task_type == LINK:
            ptr, items = truth
            return TaskTable(entity, seed_time, cutoff, target_ptr=ptr, target_items=items)
        return TaskTable(entity, seed_time, cutoff, label=truth)

    def splits(
        self,
        tx: Transactions,
        num_nodes: Mapping[str, int],
        min_history_days: int = 7,
        max_train_cutoffs: int = 0,
        weeks_back: int = 0,
    ) -> dict[str, list[TaskTable]]:
        """Tables for every cutoff of :func:`training.tasks.cutoffs.split_cutoffs`.

        Args:
            tx: all transactions (any order).
            num_nodes: number of entities per node type.
            min_history_days: days of data required up to and including a training cutoff.
            max_train_cutoffs: keep only this many most recent training cutoffs (``0``: all).
            weeks_back: move the validation and test weeks this many weeks earlier.

        Returns:
            ``{"train": [...], "val": [table], "test": [table]}``, one table per cutoff, oldest
            first; use :func:`training.tasks.table.concat_tables` for one training table.
        """
        tx = sort_by_day(tx)
        if len(tx) == 0:
            raise ValueError("no transactions: cannot place task cutoffs")
        cutoffs = split_cutoffs(
            int(tx.day[0]), int(tx.day[-1]), self.window_days, min_history_days, max_train_cutoffs, weeks_back
        )
        return {split: [self.make_table(tx, num_nodes, t) for t in days] for split, days in cutoffs.items()}



def _label_window(tx: Transactions, cutoff: int, window: int) -> slice:
    """Rows of the label window ``(t, t + window]``."""
    return day_slice(tx, cutoff + 1, cutoff + window)


def churn_labels(tx: Transactions, num_nodes: Mapping[str, int], cutoff: int, window: int) -> tuple:
    """Customers active in ``(t - 7d, t]``; label 1 if they buy nothing in ``(t, t + 7d]``."""
    n = num_nodes[CUSTOMER]
    recent = day_slice(tx, cutoff - window + 1, cutoff)
    entity = np.flatnonzero(seen_mask(tx.customer[recent], n)).astype(np.int64)
    buys_next = seen_mask(tx.customer[_label_window(tx, cutoff, window)], n)
    return entity, (~buys_next[entity]).astype(np.float32)


def sales_labels(tx: Transactions, num_nodes: Mapping[str, int], cutoff: int, window: int) -> tuple:
    """Every article (sold or not); target = sum of price over ``(t, t + 7d]``."""
    n = num_nodes[ARTICLE]
    rows = _label_window(tx, cutoff, window)
    sales = np.bincount(tx.article[rows], weights=tx.price[rows], minlength=n)
    return np.arange(n, dtype=np.int64), sales.astype(np.float32)


def purchase_labels(tx: Transactions, num_nodes: Mapping[str, int], cutoff: int, window: int) -> tuple:
    """Customers who buy in ``(t, t + 7d]``; targets = the distinct articles they buy then."""
    rows = _label_window(tx, cutoff, window)
    num_articles = num_nodes[ARTICLE]
    # One int64 key per (customer, article) pair: unique() dedups and sorts by customer.
    pairs = unique_sorted(tx.customer[rows] * num_articles + tx.article[rows])
    customer, items = np.divmod(pairs, num_articles)
    entity, counts = np.unique(customer, return_counts=True)
    ptr = np.zeros(len(entity) + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return entity.astype(np.int64), (ptr, items.astype(np.int64))


TASKS: Mapping[str, Task] = derived(Task)
"""Every task of :data:`models.registry.TASKS` as a :class:`Task` (follows registrations)."""
