"""Aggregation behind ``python -m training.bench.backtest``: per task, the test weeks side by side.

Torch-free and pure, like :mod:`training.bench.seed_stats` (whose :class:`Spread` and :func:`margin`
it shares): every function takes the run records the command writes, each one ``training.fit`` run
with ``weeks_back`` (how many weeks before the last full week its test week lies) and the test
metrics of the tasks it trained. Per dataset and task: the primary metric's mean and spread over the
weeks for the model and every baseline, the weeks the model won against each baseline (strictly
better), the per-week margins and the margin of the means; for a task with a reliability table
(churn) the ECE and Brier score of all test weeks pooled, from the tables' per-bin sums.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from training.bench.seed_stats import COMPANIONS, LIGHTGBM, MODEL, Z95, Spread, margin, spread
from training.tasks.paired import pooled_difference


@dataclass(frozen=True)
class Week:
    """One test week of one task: ``weeks_back``, its first day, the test split of ``metrics.json``,
    its reliability tables and its paired differences (:func:`training.tasks.paired.paired_differences`;
    ``None`` in records written before them)."""

    weeks_back: int
    start: str
    test: dict[str, Any]
    reliability: dict[str, list[dict[str, Any]]] | None
    paired: dict[str, dict[str, float]] | None = None


@dataclass(frozen=True)
class TaskBacktest:
    """One task of one dataset over its test weeks (oldest first).

    Args:
        task, metric, higher_is_better: the task and its primary metric.
        weeks: the weeks scored.
        systems: ``model`` and every baseline: the primary metric over the weeks.
        wins: per baseline, in how many weeks the model was strictly better.
        margins: per baseline, the model's margin in % over the weeks (each week against that week's).
        margin_of_means: per baseline, the margin of the model's mean over the baseline's mean.
        pooled: per system with reliability tables, ``{"ece", "brier", "rows"}`` of all weeks pooled.
        paired: per baseline whose every week has a paired difference: the margin of the means in %
            with its 95 % interval from the weeks' bootstrap errors (``{"margin_pct", "low_pct",
            "high_pct"}``) and the weeks won and lost by more than that interval (``"clear_wins"``,
            ``"clear_losses"``).
    """

    task: str
    metric: str
    higher_is_better: bool
    weeks: tuple[Week, ...]
    systems: dict[str, Spread]
    wins: dict[str, int]
    margins: dict[str, Spread]
    margin_of_means: dict[str, float]
    pooled: dict[str, dict[str, float]]
    paired: dict[str, dict[str, float]]

    def as_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "higher_is_better": self.higher_is_better,
                "weeks": [{"weeks_back": w.weeks_back, "start": w.start} for w in self.weeks],
                "systems": {k: v.as_json() for k, v in self.systems.items()}, "wins": self.wins,
                "margins_pct": {k: v.as_json() for k, v in self.margins.items()},
                "margin_of_means_pct": self.margin_of_means, "pooled_calibration": self.pooled,
                "paired": self.paired}


def task_weeks(runs: Sequence[dict[str, Any]], task: str) -> list[Week]:
    """The successful weeks of ``task`` in ``runs`` (one dataset's records), oldest first."""
    weeks = {}
    for run in runs:
        doc = run.get("tasks", {}).get(task) if run.get("ok") else None
        if doc is not None:
            start = doc.get("training", {}).get("test_week_start", "")
            back = run["weeks_back"]
            weeks[back] = Week(back, start, doc["test"], doc.get("reliability_test"), doc.get("paired_test"))
    return [weeks[w] for w in sorted(weeks, reverse=True)]


def pooled_calibration(tables: Sequence[list[dict[str, Any]]]) -> dict[str, float]:
    """The ECE of several weeks' reliability tables pooled (their per-bin sums added): ``{"ece", "rows"}``."""
    bins: dict[float, list[float]] = {}
    for table in tables:
        for row in table:
            total = bins.setdefault(row["low"], [0.0, 0.0, 0.0])
            total[0] += row["rows"]
            total[1] += row["rows"] * row["predicted"]
            total[2] += row["rows"] * row["observed"]
    rows = sum(total[0] for total in bins.values())
    return {"ece": sum(abs(p - o) for _, p, o in bins.values()) / rows if rows else float("nan"),
            "rows": rows}


def summarize_task(task: str, metric: str, higher: bool, weeks: Sequence[Week]) -> TaskBacktest:
    """The :class:`TaskBacktest` of ``weeks`` (at least one)."""
    tests = [w.test for w in weeks]
    baselines = [name for name in tests[0]["baselines"] if all(name in t["baselines"] for t in tests)]
    baselines.sort(key=lambda name: name != LIGHTGBM)
    model = [t[MODEL][metric] for t in tests]
    systems, wins, margins, of_means = {MODEL: spread(model)}, {}, {}, {}
    for name in baselines:
        values = [t["baselines"][name][metric] for t in tests]
        systems[name] = spread(values)
        wins[name] = sum(m > b if higher else m < b for m, b in zip(model, values, strict=True))
        margins[name] = spread([margin(m, b, higher) for m, b in zip(model, values, strict=True)])
        of_means[name] = margin(systems[MODEL].mean, systems[name].mean, higher)
    pooled = {}
    if all(w.reliability for w in weeks):
        for name in (MODEL, *baselines):
            if all(name in w.reliability for w in weeks) and all("brier" in _metrics(w, name) for w in weeks):
                result = pooled_calibration([w.reliability[name] for w in weeks])
                sizes = [sum(row["rows"] for row in w.reliability[name]) for w in weeks]
                briers = [_metrics(w, name)["brier"] * n for w, n in zip(weeks, sizes, strict=True)]
                result["brier"] = sum(briers) / sum(sizes)
                pooled[name] = result
    paired = {name: paired_margin([w.paired[name] for w in weeks], systems[name].mean, higher)
              for name in baselines if all(w.paired and name in w.paired for w in weeks)}
    return TaskBacktest(task, metric, higher, tuple(weeks), systems, wins, margins, of_means, pooled, paired)


def paired_margin(weeks: Sequence[dict[str, float]], baseline_mean: float, higher: bool) -> dict[str, float]:
    """The margin of the means in % over a baseline whose mean is ``baseline_mean``, with its 95 %
    interval from the weeks' paired bootstrap errors, and the weeks won and lost beyond theirs."""
    sign = 1.0 if higher else -1.0
    pooled = pooled_difference(list(weeks))
    scale = 100.0 / abs(baseline_mean) if baseline_mean else math.nan
    centre, half = sign * pooled["difference"] * scale, Z95 * pooled["se"] * scale
    return {"margin_pct": centre, "low_pct": centre - half, "high_pct": centre + half,
            "clear_wins": sum(sign * w["difference"] > Z95 * w["se"] for w in weeks),
            "clear_losses": sum(sign * w["difference"] < -Z95 * w["se"] for w in weeks)}


def _metrics(week: Week, name: str) -> dict[str, float]:
    return week.test[MODEL] if name == MODEL else week.test["baselines"][name]


def summarize(runs: Sequence[dict[str, Any]], tasks: dict[str, tuple[str, bool]]
              ) -> dict[str, dict[str, TaskBacktest]]:
    """Per dataset (in the order first seen), per task of ``tasks`` (name -> (primary metric,
    higher is better)) with at least one successful week: its :class:`TaskBacktest`."""
    out: dict[str, dict[str, TaskBacktest]] = {}
    for dataset in dict.fromkeys(run["dataset"] for run in runs):
        group = [run for run in runs if run["dataset"] == dataset]
        out[dataset] = {}
        for task, (metric, higher) in tasks.items():
            weeks = task_weeks(group, task)
            if weeks:
                out[dataset][task] = summarize_task(task, metric, higher, weeks)
    return out


def task_table(s: TaskBacktest) -> str:
    """One task's plain-text table: a row per week, then mean ± std, wins and margins per system."""
    names = list(s.systems)
    extra = COMPANIONS.get(s.metric)
    direction = "higher" if s.higher_is_better else "lower"
    lines = [f"{s.task}: test {s.metric} ({direction} is better) per week"
             + (f"; {extra} in brackets" if extra and extra in s.weeks[0].test[MODEL] else "")]
    lines.append(f"{'week of':<12}{'back':>5}" + "".join(f"{n:>20}" for n in names))
    for w in s.weeks:
        cells = []
        for name in names:
            metrics = _metrics(w, name)
            cell = f"{metrics[s.metric]:.4f}" + (f" ({metrics[extra]:.3f})" if extra in metrics else "")
            cells.append(f"{cell:>20}")
        lines.append(f"{w.start:<12}{w.weeks_back:>5}" + "".join(cells))
    lines.append(f"{'mean ± std':<17}" + "".join(f"{s.systems[n].text():>20}" for n in names))
    n = len(s.weeks)
    lines.append(f"{'model won':<17}{'':>20}"
                 + "".join(f"{f'{s.wins[b]} of {n} weeks':>20}" for b in names[1:]))
    lines.append(f"{'margin %/week':<17}{'':>20}"
                 + "".join(f"{s.margins[b].text(2, signed=True):>20}" for b in names[1:]))
    lines.append(f"{'margin of means':<17}{'':>20}"
                 + "".join(f"{s.margin_of_means[b]:>+19.2f}%" for b in names[1:]))
    if s.paired:
        lines.append(f"{'95 % interval':<17}{'':>20}" + "".join(
            f"{_interval(s.paired[b]) if b in s.paired else 'n/a':>20}" for b in names[1:]))
        lines.append(f"{'clearly won/lost':<17}{'':>20}" + "".join(
            f"{_clear(s.paired[b], n) if b in s.paired else 'n/a':>20}" for b in names[1:]))
    for name, values in s.pooled.items():
        lines.append(f"pooled over {int(values['rows']):,} test rows, {name}: ECE {values['ece']:.4f}, "
                     f"Brier {values['brier']:.4f}")
    return "\n".join(lines)


def _interval(paired: dict[str, float]) -> str:
    return f"{paired['low_pct']:+.2f}..{paired['high_pct']:+.2f}%"


def _clear(paired: dict[str, float], weeks: int) -> str:
    return f"{paired['clear_wins']}/{paired['clear_losses']} of {weeks}"


def report(runs: Sequence[dict[str, Any]], tasks: dict[str, tuple[str, bool]]) -> str:
    """Every dataset's task tables and its cost per run, blank-line separated."""
    blocks = []
    for dataset, summary in summarize(runs, tasks).items():
        done = [run for run in runs if run["dataset"] == dataset and run.get("ok")]
        head = (f"{dataset}: backtest, {len(done)} of "
                f"{sum(run['dataset'] == dataset for run in runs)} runs ok; margin + = model better")
        cost = ""
        if done:
            walls = spread([run["wall_s"] for run in done])
            cost = (f"per run: wall {walls.text(1)} s, CPU {spread([r['cpu_s'] for r in done]).text(1)} s; "
                    f"all runs {sum(r['wall_s'] for r in done) / 60:.1f} min wall")
        blocks.append("\n\n".join([head, *(task_table(s) for s in summary.values()), cost]).rstrip())
    return "\n\n".join(blocks)
