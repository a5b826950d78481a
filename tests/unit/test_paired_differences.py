"""``training.tasks.paired``: the model's difference from a baseline on one test week, with its error."""

from __future__ import annotations

import math

import numpy as np
import pytest

from training.tasks import paired
from training.tasks.definitions import TASKS
from training.tasks.metrics import compute_metrics
from training.tasks.paired import paired_differences, pooled_difference
from training.tasks.table import TaskTable


def probability(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def churn_week(rows: int, seed: int = 0) -> tuple[TaskTable, np.ndarray]:
    rng = np.random.default_rng(seed)
    label = rng.random(rows) < 0.3
    table = TaskTable(np.arange(rows), np.full(rows, 100), 99, label=label.astype(np.int64))
    return table, label.astype(np.float64)


def test_identical_predictions_differ_by_nothing() -> None:
    table, label = churn_week(300)
    scores = probability(label + np.random.default_rng(1).normal(0, 1, len(label)))
    paired = paired_differences("churn", scores, {"same": scores.copy()}, table)["same"]
    assert paired == {"difference": 0.0, "se": 0.0, "rounds": 200}


def test_the_error_shrinks_with_more_rows_and_the_difference_is_the_metrics() -> None:
    errors = []
    for rows in (200, 3200):
        table, label = churn_week(rows)
        noise = np.random.default_rng(2).normal(0, 1, (2, rows))
        better, worse = probability(label + noise[0]), probability(label + 2 * noise[1])
        paired = paired_differences("churn", better, {"worse": worse}, table, rounds=100)["worse"]
        auroc = [compute_metrics(TASKS["churn"], p, table)["auroc"] for p in (better, worse)]
        assert paired["difference"] == pytest.approx(auroc[0] - auroc[1]) and paired["difference"] > 0
        errors.append(paired["se"])
    assert errors[1] < errors[0] / 2  # 16x the rows: about a quarter of the error
    # the same seed draws the same resamples
    table, label = churn_week(200)
    runs = [paired_differences("churn", probability(label), {"b": probability(label[::-1].copy())}, table,
                               rounds=20, seed=5) for _ in "ab"]
    assert runs[0] == runs[1]


def test_ranked_lists_and_a_week_of_one_class() -> None:
    # purchase: two rows, the model ranks each row's target first, the baseline never
    table = TaskTable(np.arange(2), np.full(2, 100), 99, target_ptr=np.array([0, 1, 2]),
                      target_items=np.array([5, 6]))
    model = np.array([[5] + [-1] * 11, [6] + [-1] * 11])
    baseline = np.array([[7] + [-1] * 11, [8] + [-1] * 11])
    paired = paired_differences("purchase", model, {"popular": baseline}, table, rounds=30)["popular"]
    assert paired["difference"] == pytest.approx(1.0) and paired["se"] == pytest.approx(0.0)
    # churn with one row of the other class: resamples without it cannot be scored and are left out
    label = np.array([1] * 5 + [0])
    table = TaskTable(np.arange(6), np.full(6, 100), 99, label=label)
    scores = probability(np.arange(6.0))
    paired = paired_differences("churn", scores, {"flat": np.full(6, 0.5)}, table, rounds=50)["flat"]
    assert 0 < paired["rounds"] < 50 and paired["difference"] == pytest.approx(-0.5)


def test_a_mean_over_rows_resamples_the_rows_differences_as_rescoring_would(monkeypatch) -> None:
    rng = np.random.default_rng(4)
    counts = rng.integers(1, 6, 300)
    ptr = np.r_[0, np.cumsum(counts)]
    table = TaskTable(np.arange(300), np.full(300, 100), 99, target_ptr=ptr,
                      target_items=rng.integers(0, 40, ptr[-1]))
    model, baseline = rng.integers(0, 40, (300, 12)), rng.integers(0, 40, (300, 12))
    fast = paired_differences("purchase", model, {"b": baseline}, table, rounds=50)["b"]
    monkeypatch.setattr(paired, "row_values", lambda *args: None)  # score every resample instead
    slow = paired_differences("purchase", model, {"b": baseline}, table, rounds=50)["b"]
    assert fast["difference"] == pytest.approx(slow["difference"]) and fast["se"] == pytest.approx(slow["se"])
    assert fast["se"] > 0


def test_weeks_pool_as_independent_errors() -> None:
    pooled = pooled_difference([{"difference": 0.02, "se": 0.03}, {"difference": -0.01, "se": 0.04}])
    assert pooled["difference"] == pytest.approx(0.005) and pooled["se"] == pytest.approx(0.025)
    assert math.isclose(pooled_difference([{"difference": 1.0, "se": 0.5}])["se"], 0.5)
