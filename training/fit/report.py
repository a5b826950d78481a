"""What ``training.fit`` reports: ``metrics.json`` per task and the final comparison table."""

from __future__ import annotations

from typing import Any

import numpy as np

from models.runtime.quality import MODEL, baseline_warning, beats_baselines
from training.fit.evaluate import Metrics
from training.tasks.calibration import reliability
from training.tasks.definitions import TASKS
from training.tasks.metrics import with_nmae
from training.tasks.table import TaskTable

__all__ = ["baseline_warning", "metrics_document", "reliability_tables", "results_table", "split_result"]


def split_result(model: Metrics, baselines: dict[str, Metrics]) -> dict[str, Any]:
    """``{"model": {...}, "baselines": {name: {...}}}`` for one split."""
    return {MODEL: dict(model), "baselines": {name: dict(m) for name, m in baselines.items()}}


def metrics_document(task: str, val: dict[str, Any], test: dict[str, Any],
                     target_std: float | None = None) -> dict[str, Any]:
    """The ``metrics.json`` of one task: primary metric, its direction, both splits, and
    ``beats_baselines`` (whether the model beats every baseline on validation, where it was selected).

    Args:
        task: the task's name.
        val, test: :func:`split_result` of each split.
        target_std: for a task scored by ``mae``, the standard deviation of its training targets:
            every system then also gets ``nmae`` (MAE / ``target_std``) beside its ``mae``, and the
            document records ``target_std``.
    """
    spec = TASKS[task]
    document = {"task": task, "primary": spec.primary_metric, "higher_is_better": spec.higher_is_better,
                "beats_baselines": beats_baselines(spec.primary_metric, spec.higher_is_better, val),
                "val": val, "test": test}
    if target_std is not None and "mae" in spec.metrics:
        for split in ("val", "test"):
            document[split] = normalized(document[split], target_std)
        document["target_std"] = target_std
    return document


def normalized(split: dict[str, Any], target_std: float) -> dict[str, Any]:
    """:func:`split_result` ``split`` with ``nmae`` beside every system's ``mae``."""
    return {MODEL: with_nmae(split[MODEL], target_std),
            "baselines": {name: with_nmae(m, target_std) for name, m in split["baselines"].items()}}


def results_table(documents: list[dict[str, Any]], split: str = "test") -> str:
    """A plain-text table: per task, the model and each baseline on every metric of ``split``.

    The primary metric comes first and is marked ``*``; the best row per primary metric is marked ``<``.
    On the test split a baseline's row ends with how far the model is ahead of it on the primary
    metric (``+`` = model better) and the paired bootstrap standard error of that difference.
    """
    lines = []
    for doc in documents:
        primary = doc["primary"]
        names = [primary, *(m for m in doc[split][MODEL] if m != primary)]
        rows = [(MODEL, doc[split][MODEL]), *doc[split]["baselines"].items()]
        values = [row[1][primary] for row in rows]
        best = max(values) if doc["higher_is_better"] else min(values)
        paired = doc.get("paired_test", {}) if split == "test" else {}
        header = f"{doc['task'] + ' (' + split + ')':<22}" + "".join(
            f"{(n + '*' if n == primary else n):>15}" for n in names) + (
            f"{'model ahead ± se':>22}" if paired else "")
        lines += [header, "-" * len(header)]
        sign = 1.0 if doc["higher_is_better"] else -1.0
        for (name, metrics), value in zip(rows, values, strict=True):
            ahead = (f"{sign * paired[name]['difference']:>+13.4f} ± {paired[name]['se']:.4f}"
                     if name in paired else "")
            mark = "  <" if value == best else ""
            lines.append(f"{name:<22}" + "".join(f"{metrics[n]:>15.4f}" for n in names) + ahead + mark)
        lines.append("")
    return "\n".join(lines)


def reliability_tables(table: TaskTable, model: np.ndarray, baselines: dict[str, np.ndarray]
                       ) -> dict[str, list[dict[str, Any]]]:
    """The :func:`training.tasks.calibration.reliability` table of the model and of every baseline
    whose scores are probabilities (LightGBM's are; a rule's score in ``[0, 1]`` is tabled too).

    Args:
        table: the labelled rows (a binary task's test week).
        model: ``(n,)`` the model's probabilities.
        baselines: ``(n,)`` scores per baseline.
    """
    out = {MODEL: reliability(table.label, model)}
    for name, scores in baselines.items():
        if scores.min() >= 0 and scores.max() <= 1:
            out[name] = reliability(table.label, scores)
    return out
