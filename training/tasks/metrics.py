"""Evaluation metrics (numpy, exact definitions below), and the ones registry entries name.

A task's entry (:mod:`models.registry`) names each of its metrics by reference to a function
``Scored -> float``; :func:`compute_metrics` calls them on one :class:`Scored`.

Binary classification (churn), ``label`` in {0, 1}, ``score`` higher = more likely positive:

- ``auroc``: probability that a random positive scores above a random negative, ties counting
  one half: ``(sum of positives' ranks - P (P + 1) / 2) / (P N)`` with tied scores given
  their average rank (Mann-Whitney U). Undefined with one class: raises ``ValueError``.
- ``average_precision``: scikit-learn's definition, ``sum_n (R_n - R_{n-1}) P_n`` over the
  distinct score thresholds in decreasing order (tied scores enter together), ``R_0 = 0``.
  Undefined without positives: raises ``ValueError``.

Regression (sales): ``mae = mean |y - p|``, ``rmse = sqrt(mean (y - p)^2)``, and beside them
``nmae = mae / std`` with ``std`` the (population) standard deviation of the training targets
(RelBench's normalised MAE; added to a report by :func:`with_nmae`, since a metric of one table
does not see the training targets).

Link prediction (purchase), per customer, with a ranked list of ``k`` predicted articles
(``-1`` = no prediction, never relevant; a repeated article counts only at its first rank)
and the set of articles actually bought, averaged over customers (those without targets score 0):

- ``map@k`` (Kaggle H&M MAP@12): ``AP@k = sum_{i<=k} P(i) rel(i) / min(|actual|, k)`` with
  ``P(i)`` the precision of the first ``i`` predictions.
- ``precision@k = hits / k`` and ``recall@k = hits / |actual|``, ``hits`` = relevant
  predictions in the top ``k``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from training.tasks.definitions import Task
from training.tasks.table import TaskTable


def _check_pair(y: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y, p = np.asarray(y, dtype=np.float64), np.asarray(p, dtype=np.float64)
    if y.ndim != 1 or y.shape != p.shape:
        raise ValueError(f"labels {y.shape} and predictions {p.shape} must be equal-length vectors")
    if len(y) == 0:
        raise ValueError("metrics need at least one row")
    if not np.isfinite(p).all():
        raise ValueError("predictions contain NaN or infinity")
    return y, p


def _binary_counts(label: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, int]:
    label, score = _check_pair(label, score)
    if not np.isin(label, (0.0, 1.0)).all():
        raise ValueError("binary labels must be 0 or 1")
    positives = int(label.sum())
    return label, score, positives, len(label) - positives


def average_ranks(values: np.ndarray) -> np.ndarray:
    """``(n,)`` float64 1-based ranks of ``values`` ascending, tied values sharing their mean rank."""
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    ends = np.r_[starts[1:], len(values)]
    mean_rank = (starts + 1 + ends) / 2.0  # mean of ranks starts+1 .. ends
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def auroc(label: np.ndarray, score: np.ndarray) -> float:
    """Area under the ROC curve; ``(n,)`` 0/1 labels and ``(n,)`` scores. See module docstring."""
    label, score, positives, negatives = _binary_counts(label, score)
    if positives == 0 or negatives == 0:
        raise ValueError("AUROC is undefined when only one class is present")
    positive_rank_sum = average_ranks(score)[label == 1].sum()
    return float((positive_rank_sum - positives * (positives + 1) / 2) / (positives * negatives))


def average_precision(label: np.ndarray, score: np.ndarray) -> float:
    """Average precision; ``(n,)`` 0/1 labels and ``(n,)`` scores. See module docstring."""
    label, score, positives, _ = _binary_counts(label, score)
    if positives == 0:
        raise ValueError("average precision is undefined without positive labels")
    order = np.argsort(-score, kind="stable")
    score, label = score[order], label[order]
    # Threshold n admits every row scoring >= its value, so count at the end of each tie group.
    group_end = np.r_[np.flatnonzero(score[1:] != score[:-1]), len(score) - 1]
    true_pos = np.cumsum(label)[group_end]
    precision = true_pos / (group_end + 1)
    recall = true_pos / positives
    return float(np.sum(np.diff(recall, prepend=0.0) * precision))


def absolute_errors(target: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """``(n,)`` float64 each row's absolute error: what :func:`mae` averages."""
    target, pred = _check_pair(target, pred)
    return np.abs(target - pred)


def mae(target: np.ndarray, pred: np.ndarray) -> float:
    """Mean absolute error of ``(n,)`` predictions."""
    return float(np.mean(absolute_errors(target, pred)))


def rmse(target: np.ndarray, pred: np.ndarray) -> float:
    """Root mean squared error of ``(n,)`` predictions."""
    target, pred = _check_pair(target, pred)
    return float(np.sqrt(np.mean((target - pred) ** 2)))


def target_std(train_labels: np.ndarray) -> float:
    """Population standard deviation of the training targets: the scale of ``nmae``."""
    labels = np.asarray(train_labels, dtype=np.float64)
    if labels.ndim != 1 or len(labels) == 0:
        raise ValueError("the training targets must be a non-empty vector")
    return float(labels.std())


def with_nmae(metrics: dict[str, float], std: float) -> dict[str, float]:
    """``metrics`` with ``nmae = mae / std`` right after ``mae`` (NaN when ``std`` is 0).

    Args:
        metrics: one system's metrics on one split, holding ``mae``.
        std: :func:`target_std` of the training targets.
    """
    out: dict[str, float] = {}
    for name, value in metrics.items():
        out[name] = value
        if name == "mae":
            out["nmae"] = value / std if std > 0 else float("nan")
    return out


def relevance(pred: np.ndarray, target_ptr: np.ndarray, target_items: np.ndarray) -> np.ndarray:
    """``(n, k)`` bool: prediction ``[i, j]`` is a target of row ``i`` and not repeated from ``j' < j``.

    Args:
        pred: ``(n, k)`` int64 ranked article indices, ``-1`` for none.
        target_ptr: ``(n + 1,)`` CSR row pointer.
        target_items: ``(L,)`` target articles; each row's slice distinct.
    """
    n, k = pred.shape
    if target_ptr.shape != (n + 1,):
        raise ValueError(f"{n} prediction rows but target_ptr has {target_ptr.shape[0]} entries")
    width = int(max(pred.max(initial=-1), target_items.max(initial=-1))) + 2
    # Row-major keys (row * width + item) are sorted whenever each row's items are.
    target_rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(target_ptr))
    target_keys = np.sort(target_rows * width + target_items + 1)
    pred_keys = (np.arange(n, dtype=np.int64)[:, None] * width + pred + 1).ravel()
    hit = np.zeros(n * k, dtype=bool)
    if len(target_keys):
        found = np.minimum(np.searchsorted(target_keys, pred_keys), len(target_keys) - 1)
        hit = (pred.ravel() >= 0) & (target_keys[found] == pred_keys)
    first = ~np.tril(pred[:, :, None] == pred[:, None, :], k=-1).any(axis=2)
    return hit.reshape(n, k) & first


def link_metrics(
    pred: np.ndarray, target_ptr: np.ndarray, target_items: np.ndarray, k: int = 12
) -> dict[str, float]:
    """``map@k``, ``precision@k`` and ``recall@k`` averaged over rows. See module docstring.

    Args:
        pred: ``(n, >=k)`` int64 ranked article indices; only the first ``k`` columns count.
        target_ptr: ``(n + 1,)`` CSR row pointer of the true articles.
        target_items: ``(L,)`` true articles.
    """
    rows = link_rows(pred, target_ptr, target_items, k)
    return {name: float(values.mean()) for name, values in rows.items()}


def link_rows(
    pred: np.ndarray, target_ptr: np.ndarray, target_items: np.ndarray, k: int = 12
) -> dict[str, np.ndarray]:
    """Each row's ``map@k`` (its average precision), ``precision@k`` and ``recall@k``, ``(n,)``
    float64 each: what :func:`link_metrics` averages (same arguments)."""
    pred = np.asarray(pred, dtype=np.int64)
    if pred.ndim != 2 or pred.shape[1] < k:
        raise ValueError(f"link predictions must be (n, >= {k}), got {pred.shape}")
    if pred.shape[0] == 0:
        raise ValueError("metrics need at least one row")
    rel = relevance(pred[:, :k], target_ptr, target_items)
    hits = rel.sum(axis=1)
    num_actual = np.diff(target_ptr)
    precision_at = np.cumsum(rel, axis=1) / np.arange(1, k + 1)
    ap = (precision_at * rel).sum(axis=1) / np.maximum(np.minimum(num_actual, k), 1)
    return {f"map@{k}": ap, f"precision@{k}": hits / k, f"recall@{k}": hits / np.maximum(num_actual, 1)}


@dataclass(frozen=True)
class Scored:
    """Predictions for the rows of a labelled table: what every metric function reads.

    Args:
        predictions: ``(n,)`` scores or values, or ``(n, >= k)`` ranked article indices.
        table: the labelled rows, aligned with ``predictions``.
        k: the task's ranked-list length.
    """

    predictions: np.ndarray
    table: TaskTable
    k: int

    @cached_property
    def link(self) -> dict[str, float]:
        """:func:`link_metrics`, computed once for the three metrics that read it."""
        return link_metrics(self.predictions, self.table.target_ptr, self.table.target_items, k=self.k)


Metric = Callable[[Scored], float]


def auroc_metric(scored: Scored) -> float:
    """:func:`auroc` of the scores against the table's 0/1 labels."""
    return auroc(scored.table.label, scored.predictions)


def average_precision_metric(scored: Scored) -> float:
    """:func:`average_precision` of the scores against the table's 0/1 labels."""
    return average_precision(scored.table.label, scored.predictions)


def mae_metric(scored: Scored) -> float:
    """:func:`mae` of the values against the table's labels."""
    return mae(scored.table.label, scored.predictions)


def rmse_metric(scored: Scored) -> float:
    """:func:`rmse` of the values against the table's labels."""
    return rmse(scored.table.label, scored.predictions)


def map_at_k(scored: Scored) -> float:
    """MAP@k of the ranked lists against the table's targets (see :func:`link_metrics`)."""
    return scored.link[f"map@{scored.k}"]


def precision_at_k(scored: Scored) -> float:
    """precision@k of the ranked lists against the table's targets."""
    return scored.link[f"precision@{scored.k}"]


def recall_at_k(scored: Scored) -> float:
    """recall@k of the ranked lists against the table's targets."""
    return scored.link[f"recall@{scored.k}"]


def compute_metrics(task: Task, predictions: np.ndarray, table: TaskTable) -> dict[str, float]:
    """All of ``task.metrics`` for predictions on ``table``: the functions its entry names.

    Args:
        task: the task.
        predictions: ``(n,)`` scores/values or ``(n, k)`` ranked articles, as its metrics read them.
        table: the labelled table, rows aligned with ``predictions``.

    Returns:
        ``{name: value}`` with keys exactly ``task.metrics``, in their order.
    """
    scored = Scored(predictions, table, task.k)
    return {name: metric(scored) for name, metric in task.metric_functions().items()}
