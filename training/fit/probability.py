"""Calibrating a binary head's probability on the validation week (Platt scaling), after training.

The churn answer is used as a probability, and a network trained with cross-entropy on many past
weeks is not one on the next week by construction: the weeks differ in their base rate, and the
epoch kept is the one with the best AUROC, not the best log loss. So after the best epoch is
chosen, the validation rows' raw logits ``z`` are fitted with ``sigmoid(a z + b)`` by maximum
likelihood (Newton's method on two parameters; Platt 1999), and ``a`` and ``b`` become the head's
``calibration_scale`` and ``calibration_bias`` buffers (:class:`models.nn.heads.ChurnHead`): they
travel in the bundle's weights and the server answers the calibrated probability. ``a > 0``, so
the ranking (AUROC, average precision) is unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from models.runtime.inference import TaskInference
from training.fit.evaluate import predict_table
from training.tasks.calibration import brier, ece
from training.tasks.table import TaskTable

EPSILON = 1e-7
"""Probabilities are clipped to ``[EPSILON, 1 - EPSILON]`` before their logit is taken."""
RIDGE = 1e-3
"""A small L2 pull of ``(a, b)`` towards the identity ``(1, 0)``: keeps Newton's steps finite on
a validation week that one threshold separates perfectly (or that has a single class)."""


def fit_platt(logit: np.ndarray, label: np.ndarray, iterations: int = 50) -> tuple[float, float]:
    """``(a, b)`` maximising the likelihood of ``label`` under ``sigmoid(a * logit + b)``.

    Args:
        logit: ``(n,)`` raw scores.
        label: ``(n,)`` 0/1 labels.
        iterations: at most this many Newton steps (it converges in a handful).

    Returns:
        The scale ``a`` (at least a small positive number: the ranking is kept) and the bias ``b``.
    """
    z = np.asarray(logit, dtype=np.float64)
    y = np.asarray(label, dtype=np.float64)
    x = np.stack([z, np.ones_like(z)], axis=1)
    theta = np.array([1.0, 0.0])
    prior = theta.copy()
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(x @ theta)))
        gradient = x.T @ (p - y) + RIDGE * len(y) * (theta - prior)
        hessian = (x * (p * (1 - p))[:, None]).T @ x + RIDGE * len(y) * np.eye(2)
        step = np.linalg.solve(hessian, gradient)
        theta = theta - step
        if np.abs(step).max() < 1e-9:
            break
    return max(float(theta[0]), 1e-3), float(theta[1])


def calibrate_binary(inference: TaskInference, table: TaskTable, batch_size: int = 512,
                     progress: bool = False) -> dict[str, Any]:
    """Fit the head's Platt scaling on ``table`` (the validation rows) and set it in place.

    Args:
        inference: a binary task's inference path; its model's head has the calibration buffers.
        table: the labelled validation rows.
        batch_size: rows per forward.
        progress: a progress bar on stderr.

    Returns:
        What the bundle records: ``scale``, ``bias`` and the validation ECE and Brier score
        before and after.
    """
    head = inference.model.head
    head.calibration_scale.fill_(1.0)
    head.calibration_bias.fill_(0.0)
    raw = np.clip(predict_table(inference, table, batch_size, progress, f"{inference.task} calibration"),
                  EPSILON, 1 - EPSILON)
    scale, bias = fit_platt(np.log(raw / (1 - raw)), table.label)
    head.calibration_scale.fill_(scale)
    head.calibration_bias.fill_(bias)
    calibrated = 1.0 / (1.0 + np.exp(-(scale * np.log(raw / (1 - raw)) + bias)))
    return {"method": "platt", "scale": scale, "bias": bias,
            "val_ece_before": ece(table.label, raw), "val_ece_after": ece(table.label, calibrated),
            "val_brier_before": brier(table.label, raw), "val_brier_after": brier(table.label, calibrated)}
