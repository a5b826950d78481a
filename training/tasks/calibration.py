"""How far a binary model's scores are from probabilities: ECE, Brier score, a reliability table.

A churn answer is used as a probability (``churn_probability``: campaign budgets are set on it), so
beside the ranking metrics (AUROC, average precision) a report says whether it is one. ``label`` in
{0, 1}, ``prob`` in ``[0, 1]`` the predicted probability of label 1:

- ``brier = mean (prob - label)^2`` (0 is perfect; always predicting the base rate ``r`` scores
  ``r (1 - r)``).
- ``ece`` (expected calibration error over :data:`BINS` equal-width bins of ``prob``, the last one
  closed at 1): ``sum_b n_b / n * |mean prob_b - mean label_b|``.
- :func:`reliability`: per non-empty bin, its rows, mean predicted probability and observed rate:
  the reliability diagram as a table.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from training.tasks.metrics import Scored, _binary_counts

BINS = 10


def _probabilities(label: np.ndarray, prob: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    label, prob, _, _ = _binary_counts(label, prob)
    if prob.min() < 0 or prob.max() > 1:
        raise ValueError("calibration metrics need probabilities in [0, 1]")
    return label, prob


def _bin_index(prob: np.ndarray, bins: int) -> np.ndarray:
    return np.minimum((prob * bins).astype(np.int64), bins - 1)


def brier(label: np.ndarray, prob: np.ndarray) -> float:
    """Brier score of ``(n,)`` probabilities against ``(n,)`` 0/1 labels."""
    label, prob = _probabilities(label, prob)
    return float(np.mean((prob - label) ** 2))


def reliability(label: np.ndarray, prob: np.ndarray, bins: int = BINS) -> list[dict[str, Any]]:
    """The reliability table: one row per non-empty bin of ``prob``.

    Args:
        label: ``(n,)`` 0/1 labels.
        prob: ``(n,)`` predicted probabilities of label 1.
        bins: equal-width bins over ``[0, 1]``.

    Returns:
        ``[{"low", "high", "rows", "predicted", "observed"}, ...]``, lowest bin first.
    """
    label, prob = _probabilities(label, prob)
    index = _bin_index(prob, bins)
    rows = np.bincount(index, minlength=bins)
    predicted = np.bincount(index, weights=prob, minlength=bins)
    observed = np.bincount(index, weights=label, minlength=bins)
    return [{"low": b / bins, "high": (b + 1) / bins, "rows": int(rows[b]),
             "predicted": float(predicted[b] / rows[b]), "observed": float(observed[b] / rows[b])}
            for b in range(bins) if rows[b]]


def ece(label: np.ndarray, prob: np.ndarray, bins: int = BINS) -> float:
    """Expected calibration error over ``bins`` equal-width bins (see the module docstring)."""
    table = reliability(label, prob, bins)
    n = sum(row["rows"] for row in table)
    return float(sum(row["rows"] / n * abs(row["predicted"] - row["observed"]) for row in table))


def reliability_text(table: list[dict[str, Any]]) -> str:
    """:func:`reliability` as aligned text lines (bin, rows, mean predicted, observed)."""
    lines = [f"{'bin':<12}{'rows':>8}{'predicted':>11}{'observed':>10}"]
    lines += [f"{row['low']:.1f}-{row['high']:.1f}{'':<5}{row['rows']:>8}{row['predicted']:>11.4f}"
              f"{row['observed']:>10.4f}" for row in table]
    return "\n".join(lines)


def ece_metric(scored: Scored) -> float:
    """:func:`ece` of the probabilities against the table's 0/1 labels."""
    return ece(scored.table.label, scored.predictions)


def brier_metric(scored: Scored) -> float:
    """:func:`brier` of the probabilities against the table's 0/1 labels."""
    return brier(scored.table.label, scored.predictions)
