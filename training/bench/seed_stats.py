"""Aggregation behind ``python -m training.bench.seeds``: mean ± std over seeds, margins, the table.

Torch-free and pure: every function takes the run records the command writes (``runs`` of its
JSON) and returns numbers or text, so the arithmetic can be tested on made-up numbers.

A *margin* is the relative difference of the model over a baseline on the task's primary metric,
in percent, signed so that positive means the model is better whatever the metric's direction
(``higher_is_better`` of :data:`models.registry.TASKS`). The spread of a margin is the standard
deviation over seeds of the per-seed margins (each seed's model against the same seed's baseline),
not a combination of the two systems' spreads.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from models.registry import TASKS

MODEL = "model"
LIGHTGBM = "lightgbm"  # the learned baseline; every other baseline of a task is a rule
Z95 = 1.96
"""Standard errors either side of a difference for a 95 % interval (normal approximation)."""
COMPANIONS = {"mae": "nmae"}
"""A primary metric's companion, reported beside it when every run has it (NMAE = MAE / the
training targets' standard deviation, RelBench's scale-free form)."""


@dataclass(frozen=True)
class Spread:
    """Mean and sample standard deviation (``n - 1``) of ``n`` values; ``std`` is None for one value."""

    mean: float
    std: float | None
    n: int

    def text(self, digits: int = 4, signed: bool = False) -> str:
        sign = "+" if signed else ""
        std = "n/a" if self.std is None else f"{self.std:.{digits}f}"
        return f"{self.mean:{sign}.{digits}f} ± {std}"

    def as_json(self) -> dict[str, Any]:
        """``{"mean", "std", "n"}`` with None for an undefined (NaN or one-value) number."""
        def plain(x: float | None) -> float | None:
            return None if x is None or math.isnan(x) else x

        return {"mean": plain(self.mean), "std": plain(self.std), "n": self.n}


def spread(values: Sequence[float]) -> Spread:
    """:class:`Spread` of ``values`` (at least one)."""
    if not values:
        raise ValueError("spread of no values")
    std = statistics.stdev(values) if len(values) > 1 else None
    return Spread(statistics.fmean(values), std, len(values))


def margin(model: float, baseline: float, higher_is_better: bool) -> float:
    """The model's relative margin over ``baseline`` in %, positive when the model is better; NaN
    when the baseline is 0 (no relative scale)."""
    if baseline == 0:
        return math.nan
    gain = model - baseline if higher_is_better else baseline - model
    return 100.0 * gain / abs(baseline)


@dataclass(frozen=True)
class TaskSummary:
    """One task of one dataset over the successful runs.

    Args:
        task, metric, higher_is_better: the task and its primary metric's name and direction.
        seeds: the seeds of the runs summarised.
        systems: ``model`` and every baseline: the primary metric over seeds.
        margins: per baseline, the model's margin over it in % (see the module docstring).
        best_rule: the rule baseline (not LightGBM) with the best mean, or None if there is none.
        companion: per system, the primary metric's companion of :data:`COMPANIONS` over seeds
            (empty when the metric has none or a run lacks it).
        row_error: per baseline whose every run has a paired error (``paired_test``), the half-width
            in % of a 95 % interval of the margin from the test week's rows alone: 1.96 times the
            seeds' mean bootstrap error over the baseline's mean. The seeds share the week's rows,
            so this part of the error does not shrink with more seeds.
    """

    task: str
    metric: str
    higher_is_better: bool
    seeds: tuple[int, ...]
    systems: dict[str, Spread]
    margins: dict[str, Spread]
    best_rule: str | None
    companion: dict[str, Spread] = field(default_factory=dict)
    row_error: dict[str, float] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        out = {"metric": self.metric, "higher_is_better": self.higher_is_better, "seeds": list(self.seeds),
               "systems": {k: v.as_json() for k, v in self.systems.items()},
               "margins_pct": {k: v.as_json() for k, v in self.margins.items()}, "best_rule": self.best_rule}
        if self.companion:
            out[COMPANIONS[self.metric]] = {k: v.as_json() for k, v in self.companion.items()}
        if self.row_error:
            out["row_error_pct"] = self.row_error
        return out


def summarize_task(task: str, runs: Sequence[dict[str, Any]]) -> TaskSummary | None:
    """The :class:`TaskSummary` of ``task`` over ``runs`` (one dataset's records); None if no
    successful run has the task."""
    spec = TASKS[task]
    metric, higher = spec.primary_metric, spec.higher_is_better
    done = [run for run in runs if run.get("ok") and task in run.get("tasks", {})]
    if not done:
        return None
    tests = [run["tasks"][task]["test"] for run in done]
    baselines = [name for name in tests[0]["baselines"] if all(name in t["baselines"] for t in tests)]
    baselines.sort(key=lambda name: name != LIGHTGBM)  # LightGBM first, the rules in registry order
    model = [t[MODEL][metric] for t in tests]
    systems = {MODEL: spread(model)}
    margins = {}
    for name in baselines:
        values = [t["baselines"][name][metric] for t in tests]
        systems[name] = spread(values)
        margins[name] = spread([margin(m, b, higher) for m, b in zip(model, values, strict=True)])
    rules = [name for name in baselines if name != LIGHTGBM]
    best = (max if higher else min)(rules, key=lambda name: systems[name].mean) if rules else None
    paired = [run["tasks"][task].get("paired_test") or {} for run in done]
    row_error = {name: Z95 * statistics.fmean(p[name]["se"] for p in paired) * 100 / abs(systems[name].mean)
                 for name in baselines if systems[name].mean and all(name in p for p in paired)}
    return TaskSummary(task, metric, higher, tuple(run["seed"] for run in done), systems, margins, best,
                       companion_spreads(metric, tests, baselines), row_error)


def companion_spreads(metric: str, tests: Sequence[dict[str, Any]], baselines: Sequence[str]
                      ) -> dict[str, Spread]:
    """Per system, the companion of ``metric`` (:data:`COMPANIONS`) over ``tests``; empty when
    there is none or a test split lacks it."""
    name = COMPANIONS.get(metric)
    if name is None:
        return {}
    rows = {MODEL: [t[MODEL].get(name) for t in tests]}
    rows.update({system: [t["baselines"][system].get(name) for t in tests] for system in baselines})
    if any(value is None for values in rows.values() for value in values):
        return {}
    return {system: spread(values) for system, values in rows.items()}


def summarize(runs: Iterable[dict[str, Any]]) -> dict[str, dict[str, TaskSummary]]:
    """Per dataset (in the order first seen), per task of the registry: the :class:`TaskSummary`."""
    by_dataset: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        by_dataset.setdefault(run["dataset"], []).append(run)
    out = {}
    for dataset, group in by_dataset.items():
        tasks = {task: summarize_task(task, group) for task in TASKS}
        out[dataset] = {task: s for task, s in tasks.items() if s is not None}
    return out


def costs(runs: Sequence[dict[str, Any]]) -> dict[str, Spread]:
    """Wall seconds, CPU seconds and peak memory (MiB) per successful run, over ``runs``."""
    done = [run for run in runs if run.get("ok")]
    if not done:
        return {}
    return {key: spread([run[key] for run in done]) for key in ("wall_s", "cpu_s", "peak_rss_mib")}


def dataset_table(dataset: str, runs: Sequence[dict[str, Any]], summary: dict[str, TaskSummary]) -> str:
    """The plain-text table of one dataset: per task, every system's mean ± std and the margins."""
    ok = [run["seed"] for run in runs if run.get("ok")]
    lines = [f"{dataset}: test week, mean ± std over seeds {', '.join(map(str, ok)) or '(none)'} "
             f"({len(ok)} of {len(runs)} runs ok); margin = model over baseline in %, + = model better"]
    header = (f"{'task':<10}{'metric':<18}{'system':<30}{'mean ± std':>20}{'margin % ± std':>20}"
              f"{'rows 95 %':>12}")
    lines += [header, "-" * len(header)]
    for s in summary.values():
        first = True
        for name, value in s.systems.items():
            label = f"{name} (best rule)" if name == s.best_rule else name
            direction = "(higher)" if s.higher_is_better else "(lower)"
            lead = f"{s.task:<10}{s.metric + ' ' + direction:<18}" if first else " " * 28
            cell = s.margins[name].text(2, signed=True) if name in s.margins else ""
            rows = f"±{s.row_error[name]:.2f}" if name in s.row_error else ""
            extra = f"   {COMPANIONS[s.metric]} {s.companion[name].text()}" if name in s.companion else ""
            lines.append(f"{lead}{label:<30}{value.text():>20}{cell:>20}{rows:>12}{extra}".rstrip())
            first = False
    cost = costs(runs)
    if cost:
        lines.append(f"per run of --task all: wall {cost['wall_s'].text(1)} s, "
                     f"CPU {cost['cpu_s'].text(1)} s, peak memory {cost['peak_rss_mib'].text(0)} MiB")
    return "\n".join(lines)


def report(runs: Sequence[dict[str, Any]]) -> str:
    """One :func:`dataset_table` per dataset, blank-line separated."""
    summaries = summarize(runs)
    return "\n\n".join(dataset_table(dataset, [r for r in runs if r["dataset"] == dataset], summary)
                       for dataset, summary in summaries.items())
