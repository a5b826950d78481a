"""Metrics against hand-computed values, ties and edge cases, and a reference MAP@k."""

from __future__ import annotations

import math

import numpy as np
import pytest

from training.tasks.definitions import TASKS
from training.tasks.metrics import (
    auroc,
    average_precision,
    average_ranks,
    compute_metrics,
    link_metrics,
    mae,
    rmse,
)
from training.tasks.table import TaskTable


def csr(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.cumsum([0] + [len(r) for r in rows]).astype(np.int64)
    items = np.array([i for r in rows for i in r], dtype=np.int64)
    return ptr, items


def test_average_ranks_share_ties():
    # sorted: 0.2 -> 1, the two 0.5 -> (2 + 3) / 2, 0.9 -> 4
    np.testing.assert_allclose(average_ranks(np.array([0.5, 0.5, 0.2, 0.9])), [2.5, 2.5, 1.0, 4.0])


def test_auroc_hand_computed():
    # ranks of 0.1, 0.4, 0.35, 0.8 are 1, 3, 2, 4; positives (0.35, 0.8) sum 6;
    # U = 6 - 2*3/2 = 3; AUROC = 3 / (2 * 2)
    assert auroc(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8])) == pytest.approx(0.75)


def test_auroc_ties_count_half():
    # pairs (pos, neg): (0.5, 0.5) -> 1/2, (0.5, 0.2) -> 1, (0.9, 0.5) -> 1, (0.9, 0.2) -> 1 => 3.5 / 4
    assert auroc(np.array([0, 1, 0, 1]), np.array([0.5, 0.5, 0.2, 0.9])) == pytest.approx(0.875)
    assert auroc(np.array([0, 1, 1, 0]), np.full(4, 0.3)) == pytest.approx(0.5)


def test_auroc_extremes_and_single_class():
    assert auroc(np.array([0, 0, 1]), np.array([0.1, 0.2, 0.3])) == 1.0
    assert auroc(np.array([1, 0, 0]), np.array([0.1, 0.2, 0.3])) == 0.0
    with pytest.raises(ValueError, match="one class"):
        auroc(np.array([1, 1]), np.array([0.1, 0.2]))
    with pytest.raises(ValueError, match="0 or 1"):
        auroc(np.array([0, 2]), np.array([0.1, 0.2]))


def test_average_precision_hand_computed():
    # thresholds 0.8: P=1/1 R=1/2; 0.4: P=1/2 R=1/2; 0.35: P=2/3 R=1; 0.1: P=2/4 R=1
    # AP = (1/2 - 0) * 1 + 0 * 1/2 + (1 - 1/2) * 2/3 + 0 * 1/2 = 5/6
    ap = average_precision(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
    assert ap == pytest.approx(5 / 6)


def test_average_precision_ties_enter_together():
    # threshold 0.5 admits both tied rows: P=1/2 R=1/2; threshold 0.2: P=2/3 R=1
    # AP = 1/2 * 1/2 + 1/2 * 2/3 = 7/12 (ordering the tie positive-first would give 5/6)
    assert average_precision(np.array([1, 0, 1]), np.array([0.5, 0.5, 0.2])) == pytest.approx(7 / 12)
    assert average_precision(np.array([0, 1, 0, 1]), np.full(4, 0.7)) == pytest.approx(0.5)


def test_average_precision_without_positives_raises():
    with pytest.raises(ValueError, match="positive"):
        average_precision(np.array([0, 0]), np.array([0.1, 0.2]))


def test_mae_rmse_hand_computed():
    # |errors| = 1, 0, 2 -> MAE 1; squares 1, 0, 4 -> RMSE sqrt(5/3)
    y, p = np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 5.0])
    assert mae(y, p) == pytest.approx(1.0)
    assert rmse(y, p) == pytest.approx(math.sqrt(5 / 3))


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="equal-length"):
        mae(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="NaN"):
        rmse(np.zeros(2), np.array([0.0, np.nan]))
    with pytest.raises(ValueError, match="at least one"):
        mae(np.zeros(0), np.zeros(0))


def test_link_metrics_hand_computed():
    pred = np.array([[5, 1, 7], [2, 2, 3], [-1, -1, -1], [4, 6, 8]])
    ptr, items = csr([[1, 7, 9], [2], [4], [4, 6, 8, 10, 11]])
    got = link_metrics(pred, ptr, items, k=3)
    # row 0: rel 0,1,1 -> AP (1/2 + 2/3) / min(3, 3) = 7/18, precision 2/3, recall 2/3
    # row 1: rel 1,0,0 (the repeated 2 counts once) -> AP 1/1, precision 1/3, recall 1/1
    # row 2: no predictions -> 0, 0, 0
    # row 3: rel 1,1,1 -> AP (1 + 1 + 1) / min(5, 3) = 1, precision 1, recall 3/5
    assert got["map@3"] == pytest.approx((7 / 18 + 1 + 0 + 1) / 4)
    assert got["precision@3"] == pytest.approx((2 / 3 + 1 / 3 + 0 + 1) / 4)
    assert got["recall@3"] == pytest.approx((2 / 3 + 1 + 0 + 3 / 5) / 4)


def test_link_metrics_only_first_k_columns_count():
    pred = np.array([[9, 9, 1]])
    ptr, items = csr([[1]])
    assert link_metrics(pred, ptr, items, k=2) == {"map@2": 0.0, "precision@2": 0.0, "recall@2": 0.0}


def kaggle_apk(actual: list[int], predicted: list[int], k: int) -> float:
    """The Kaggle H&M / ml_metrics reference implementation."""
    predicted = predicted[:k]
    score, hits = 0.0, 0.0
    for i, p in enumerate(predicted):
        if p in actual and p not in predicted[:i]:
            hits += 1.0
            score += hits / (i + 1.0)
    return score / min(len(actual), k) if actual else 0.0


def test_map_matches_kaggle_reference_on_random_rows():
    rng = np.random.default_rng(0)
    rows = [sorted(set(rng.integers(0, 30, size=rng.integers(1, 20)).tolist())) for _ in range(200)]
    pred = rng.integers(-1, 30, size=(200, 12))
    ptr, items = csr(rows)
    expected = np.mean([kaggle_apk(r, p.tolist(), 12) for r, p in zip(rows, pred, strict=True)])
    assert link_metrics(pred, ptr, items)["map@12"] == pytest.approx(expected)


def test_compute_metrics_keys_follow_the_task():
    label = np.array([0, 1, 1, 0], dtype=np.float32)
    scalar = TaskTable(np.arange(4), np.full(4, 9), 8, label=label)
    churn = compute_metrics(TASKS["churn"], np.array([0.1, 0.9, 0.8, 0.2]), scalar)
    assert churn == pytest.approx({"auroc": 1.0, "average_precision": 1.0, "ece": 0.15, "brier": 0.025})
    sales = compute_metrics(TASKS["sales"], np.array([0.0, 1.0, 1.0, 1.0]), scalar)
    assert sales == pytest.approx({"mae": 0.25, "rmse": 0.5})
    ptr, items = csr([[3], [4, 5]])
    link = TaskTable(np.arange(2), np.full(2, 9), 8, target_ptr=ptr, target_items=items)
    pred = np.array([[3] + [0] * 11, [0] * 12])
    got = compute_metrics(TASKS["purchase"], pred, link)
    assert tuple(got) == tuple(TASKS["purchase"].metrics)
    assert got["map@12"] == pytest.approx(0.5) and got["recall@12"] == pytest.approx(0.5)
    for task in TASKS.values():
        assert task.primary_metric in task.metrics
