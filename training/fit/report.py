"""What ``training.fit`` reports: ``metrics.json`` per task and the final comparison table."""

from __future__ import annotations

from typing import Any

from models.runtime.quality import MODEL, baseline_warning, beats_baselines
from training.fit.evaluate import Metrics
from training.tasks.definitions import TASKS

__all__ = ["baseline_warning", "metrics_document", "results_table", "split_result"]


def split_result(model: Metrics, baselines: dict[str, Metrics]) -> dict[str, Any]:
    """``{"model": {...}, "baselines": {name: {...}}}`` for one split."""
    return {MODEL: dict(model), "baselines": {name: dict(m) for name, m in baselines.items()}}


def metrics_document(task: str, val: dict[str, Any], test: dict[str, Any]) -> dict[str, Any]:
    """The ``metrics.json`` of one task: primary metric, its direction, both splits, and
    ``beats_baselines`` (whether the model beats every baseline on validation, where it was selected)."""
    spec = TASKS[task]
    return {"task": task, "primary": spec.primary_metric, "higher_is_better": spec.higher_is_better,
            "beats_baselines": beats_baselines(spec.primary_metric, spec.higher_is_better, val),
            "val": val, "test": test}


def results_table(documents: list[dict[str, Any]], split: str = "test") -> str:
    """A plain-text table: per task, the model and each baseline on every metric of ``split``.

    The primary metric comes first and is marked ``*``; the best row per primary metric is marked ``<``.
    """
    lines = []
    for doc in documents:
        primary = doc["primary"]
        names = [primary, *(m for m in doc[split][MODEL] if m != primary)]
        rows = [(MODEL, doc[split][MODEL]), *doc[split]["baselines"].items()]
        values = [row[1][primary] for row in rows]
        best = max(values) if doc["higher_is_better"] else min(values)
        header = f"{doc['task'] + ' (' + split + ')':<22}" + "".join(
            f"{(n + '*' if n == primary else n):>15}" for n in names)
        lines += [header, "-" * len(header)]
        for (name, metrics), value in zip(rows, values, strict=True):
            mark = "  <" if value == best else ""
            lines.append(f"{name:<22}" + "".join(f"{metrics[n]:>15.4f}" for n in names) + mark)
        lines.append("")
    return "\n".join(lines)
