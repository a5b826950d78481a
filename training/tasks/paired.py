"""How sure one test week is: the model's difference from each baseline, with a paired bootstrap error.

A test week is small (a few hundred to a few thousand rows on a shop's data), so a model can beat a
baseline on one week by chance. Resampling the week's rows with replacement, and scoring the model
and the baseline on the same resample each time, gives the spread of their difference that the
choice of rows alone causes (Efron and Tibshirani, *An Introduction to the Bootstrap*, ch. 6): the
standard error of the difference. Rows shared by both systems make it far smaller than either
system's own spread, which is why the difference is resampled, not each metric apart.
"""

from __future__ import annotations

import math

import numpy as np

from training.tasks.definitions import TASKS
from training.tasks.metrics import Scored, absolute_errors, link_rows
from training.tasks.table import TaskTable

BOOTSTRAP_ROUNDS = 200
"""Resamples per baseline: enough for a standard error within ~5 % of its value."""


def paired_differences(task: str, model: np.ndarray, baselines: dict[str, np.ndarray], table: TaskTable,
                       rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0) -> dict[str, dict[str, float]]:
    """Per baseline, the model's primary metric minus the baseline's on ``table`` and its standard error.

    Args:
        task: the task's name (its primary metric is compared).
        model: the model's predictions for ``table``'s rows (as :func:`training.tasks.metrics.compute_metrics`
            reads them: ``(n,)`` scores or values, ``(n, k)`` ranked articles).
        baselines: each baseline's predictions, aligned the same way.
        table: the labelled rows.
        rounds: bootstrap resamples; every baseline is scored on the same ones.
        seed: fixes the resamples.

    Returns:
        ``{baseline: {"difference", "se", "rounds"}}``; ``difference`` is positive when the model is
        better on a higher-is-better metric. ``se`` is ``nan`` when fewer than two resamples could be
        scored (a churn week with one class only), ``rounds`` how many were.
    """
    spec = TASKS[task]
    metric = spec.metric_functions()[spec.primary_metric]

    def score(predictions: np.ndarray, rows: TaskTable) -> float:
        return metric(Scored(predictions, rows, spec.k))

    rng = np.random.default_rng(seed)
    model_rows = row_values(task, model, table)
    if model_rows is not None:  # a mean over rows: resample the rows' differences, no re-scoring
        resamples = [rng.integers(0, len(table), size=len(table)) for _ in range(rounds)]
        out = {}
        for name, predictions in baselines.items():
            rows = model_rows - row_values(task, predictions, table)
            means = np.array([rows[resample].mean() for resample in resamples])
            out[name] = {"difference": float(rows.mean()),
                         "se": float(np.std(means, ddof=1)) if rounds > 1 else math.nan, "rounds": rounds}
        return out
    differences: dict[str, list[float]] = {name: [] for name in baselines}
    for _ in range(rounds):  # one resample at a time: memory stays one table's
        rows = rng.integers(0, len(table), size=len(table))
        resampled = table.subset(rows)
        try:  # a resample one system cannot be scored on (AUROC of one class) is left out for all
            model_score = score(model[rows], resampled)
            scores = {name: score(predictions[rows], resampled) for name, predictions in baselines.items()}
        except ValueError:
            continue
        for name, value in scores.items():
            differences[name].append(model_score - value)
    model_score = score(model, table)
    return {name: {"difference": model_score - score(predictions, table),
                   "se": float(np.std(differences[name], ddof=1)) if len(differences[name]) > 1 else math.nan,
                   "rounds": len(differences[name])}
            for name, predictions in baselines.items()}


def row_values(task: str, predictions: np.ndarray, table: TaskTable) -> np.ndarray | None:
    """``(n,)`` each row's share of ``task``'s primary metric when that metric is a mean over rows
    (MAE, MAP@k), else ``None`` (AUROC)."""
    spec = TASKS[task]
    if spec.primary_metric == "mae":
        return absolute_errors(table.label, predictions)
    if spec.primary_metric == f"map@{spec.k}":
        return link_rows(predictions, table.target_ptr, table.target_items, spec.k)[spec.primary_metric]
    return None


def pooled_difference(weeks: list[dict[str, float]]) -> dict[str, float]:
    """The mean of several weeks' differences and its standard error (weeks' rows are independent).

    Args:
        weeks: per week ``{"difference", "se"}`` of one baseline (see :func:`paired_differences`).

    Returns:
        ``{"difference", "se"}`` of the mean over the weeks.
    """
    n = len(weeks)
    return {"difference": sum(w["difference"] for w in weeks) / n,
            "se": math.sqrt(sum(w["se"] ** 2 for w in weeks)) / n}
