"""The three rel-hm tasks (RelBench definitions): seeds, labels and train/val/test cutoffs.

Each task is a small declarative class (entity type, window, metrics) whose labels are built
in one vectorised function, :meth:`Task.make_table`. Conventions for a cutoff day ``t``:
seeds get ``seed_time = t + 1`` (the model sees ``day <= t``) and labels cover days
``t + 1 .. t + 7``, i.e. RelBench's window ``(t, t + 7d]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from models.schema import ARTICLE, CUSTOMER
from models.tables import Transactions
from training.tasks.cutoffs import split_cutoffs
from training.tasks.day_windows import day_slice, seen_mask, sort_by_day
from training.tasks.table import TaskTable

BINARY = "binary_classification"
REGRESSION = "regression"
LINK = "link_prediction"


class Task:
    """A predictive task over the H&M transactions.

    Class attributes:
        name: registry key (``churn``, ``sales``, ``purchase``).
        task_type: :data:`BINARY`, :data:`REGRESSION` or :data:`LINK`.
        entity_type: node type of the seeds (``customer`` or ``article``).
        window_days: length of the label window after the cutoff.
        metrics: metric names as returned by :func:`training.metrics.compute_metrics`.
        primary_metric: the metric used for model selection, one of ``metrics``.
        higher_is_better: direction of ``primary_metric``.
        k: length of the ranked list scored by link-prediction metrics.
    """

    name: ClassVar[str]
    task_type: ClassVar[str]
    entity_type: ClassVar[str]
    window_days: ClassVar[int] = 7
    metrics: ClassVar[tuple[str, ...]]
    primary_metric: ClassVar[str]
    higher_is_better: ClassVar[bool]
    k: ClassVar[int] = 12

    def make_table(self, tx: Transactions, num_nodes: Mapping[str, int], cutoff: int) -> TaskTable:
        """Seeds and labels for one cutoff day.

        Args:
            tx: all transactions (any order; pass them sorted by day to skip a sort).
            num_nodes: number of entities per node type, e.g. ``{"customer": C, "article": A}``.
            cutoff: the cutoff day ``t``; the table's ``seed_time`` is ``t + 1``.
        """
        tx = sort_by_day(tx)
        entity, truth = self._label(tx, num_nodes, cutoff)
        seed_time = np.full(len(entity), cutoff + 1, dtype=np.int64)
        if self.task_type == LINK:
            ptr, items = truth
            return TaskTable(entity, seed_time, cutoff, target_ptr=ptr, target_items=items)
        return TaskTable(entity, seed_time, cutoff, label=truth)

    def _label(self, tx: Transactions, num_nodes: Mapping[str, int], cutoff: int) -> tuple:
        """``(entity, label)`` or ``(entity, (ptr, items))`` from day-sorted transactions."""
        raise NotImplementedError

    def splits(
        self,
        tx: Transactions,
        num_nodes: Mapping[str, int],
        min_history_days: int = 7,
        max_train_cutoffs: int | None = None,
    ) -> dict[str, list[TaskTable]]:
        """Tables for every cutoff of :func:`training.split_cutoffs.split_cutoffs`.

        Args:
            tx: all transactions (any order).
            num_nodes: number of entities per node type.
            min_history_days: days of data required up to and including a training cutoff.
            max_train_cutoffs: keep only this many most recent training cutoffs (``None``: all).

        Returns:
            ``{"train": [...], "val": [table], "test": [table]}``, one table per cutoff, oldest
            first; use :func:`training.task_table.concat_tables` for one training table.
        """
        tx = sort_by_day(tx)
        if len(tx) == 0:
            raise ValueError("no transactions: cannot place task cutoffs")
        cutoffs = split_cutoffs(
            int(tx.day[0]), int(tx.day[-1]), self.window_days, min_history_days, max_train_cutoffs
        )
        return {split: [self.make_table(tx, num_nodes, t) for t in days] for split, days in cutoffs.items()}

    def _label_window(self, tx: Transactions, cutoff: int) -> slice:
        """Rows of the label window ``(t, t + window]``."""
        return day_slice(tx, cutoff + 1, cutoff + self.window_days)


class ChurnTask(Task):
    """Customers active in ``(t - 7d, t]``; label 1 if they buy nothing in ``(t, t + 7d]``."""

    name = "churn"
    task_type = BINARY
    entity_type = CUSTOMER
    metrics = ("auroc", "average_precision")
    primary_metric = "auroc"
    higher_is_better = True

    def _label(self, tx: Transactions, num_nodes: Mapping[str, int], cutoff: int) -> tuple:
        n = num_nodes[CUSTOMER]
        recent = day_slice(tx, cutoff - self.window_days + 1, cutoff)
        entity = np.flatnonzero(seen_mask(tx.customer[recent], n)).astype(np.int64)
        buys_next = seen_mask(tx.customer[self._label_window(tx, cutoff)], n)
        return entity, (~buys_next[entity]).astype(np.float32)


class SalesTask(Task):
    """Every article (sold or not); target = sum of price over ``(t, t + 7d]``."""

    name = "sales"
    task_type = REGRESSION
    entity_type = ARTICLE
    metrics = ("mae", "rmse")
    primary_metric = "mae"
    higher_is_better = False

    def _label(self, tx: Transactions, num_nodes: Mapping[str, int], cutoff: int) -> tuple:
        n = num_nodes[ARTICLE]
        window = self._label_window(tx, cutoff)
        sales = np.bincount(tx.article[window], weights=tx.price[window], minlength=n)
        return np.arange(n, dtype=np.int64), sales.astype(np.float32)


class PurchaseTask(Task):
    """Customers who buy in ``(t, t + 7d]``; targets = the distinct articles they buy then."""

    name = "purchase"
    task_type = LINK
    entity_type = CUSTOMER
    metrics = ("map@12", "precision@12", "recall@12")
    primary_metric = "map@12"
    higher_is_better = True

    def _label(self, tx: Transactions, num_nodes: Mapping[str, int], cutoff: int) -> tuple:
        window = self._label_window(tx, cutoff)
        num_articles = num_nodes[ARTICLE]
        # One int64 key per (customer, article) pair: unique() dedups and sorts by customer.
        pairs = np.unique(tx.customer[window] * num_articles + tx.article[window])
        customer, items = np.divmod(pairs, num_articles)
        entity, counts = np.unique(customer, return_counts=True)
        ptr = np.zeros(len(entity) + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        return entity.astype(np.int64), (ptr, items.astype(np.int64))


TASKS: dict[str, Task] = {task.name: task for task in (ChurnTask(), SalesTask(), PurchaseTask())}
