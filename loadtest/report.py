"""The files a load test leaves behind: summary JSON and CSV, a per-second timeline CSV and a chart."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from loadtest.record import PERCENTILES, TASKS
from models.registry import TASKS as TASK_SPECS

SUMMARY_JSON = "summary.json"
SUMMARY_CSV = "summary.csv"
TIMELINE_CSV = "timeline.csv"
CHART_PNG = "latency_throughput.png"
SUMMARY_COLUMNS = ("endpoint", "requests", "failures", "rps", *(f"p{q}_ms" for q in PERCENTILES), "mean_ms",
                   "max_ms")


def _json_safe(value: Any) -> Any:
    """NaN (a group without requests) as ``null``: strict JSON has no NaN."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    return value


def endpoint_rows(summary: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(endpoint, stats)`` per endpoint, then ``("total", stats)``."""
    return [*((TASK_SPECS[t].path, summary["endpoints"][t]) for t in TASKS), ("total", summary["total"])]


def write_report(out: Path, summary: dict[str, Any], timeline: list[dict[str, float]]) -> list[Path]:
    """Write every report file into ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / SUMMARY_JSON, out / SUMMARY_CSV, out / TIMELINE_CSV, out / CHART_PNG]
    paths[0].write_text(json.dumps(_json_safe(summary), indent=2) + "\n")
    with paths[1].open("w", newline="") as f:
        writer = csv.DictWriter(f, SUMMARY_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for name, row in endpoint_rows(summary):
            writer.writerow({"endpoint": name, **row})
    with paths[2].open("w", newline="") as f:
        columns = ["second", "users", *(f"{t}_rps" for t in TASKS), "expected_4xx", "failures",
                   *(f"p{q}_ms" for q in PERCENTILES)]
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(timeline)
    plot_timeline(timeline, summary, paths[3])
    return paths


def plot_timeline(timeline: list[dict[str, float]], summary: dict[str, Any], path: Path) -> None:
    """Latency percentiles (top) and throughput per endpoint with the user count (bottom), per second."""
    import matplotlib

    matplotlib.use("Agg")  # files only, never a display
    import matplotlib.pyplot as plt

    seconds = [row["second"] for row in timeline]
    fig, (latency, throughput) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    for q, style in zip(PERCENTILES, ("-", "--", ":"), strict=True):
        latency.plot(seconds, [row[f"p{q}_ms"] for row in timeline], style, label=f"p{q}")
    latency.set_ylabel("latency of 200s (ms)")
    latency.set_ylim(bottom=0)
    latency.legend(loc="upper left")
    total = summary["total"]
    latency.set_title(f"relserve under load: {total['rps']:.0f} req/s, p50 {total['p50_ms']} ms, "
                      f"p99 {total['p99_ms']} ms, {summary['unexpected_failures']} failures")
    stacked = [[row[f"{t}_rps"] for row in timeline] for t in TASKS]
    throughput.stackplot(seconds, *stacked, labels=[TASK_SPECS[t].path for t in TASKS], alpha=0.8)
    throughput.plot(seconds, [row["expected_4xx"] for row in timeline], "k-", lw=1, label="expected 4xx")
    throughput.plot(seconds, [row["failures"] for row in timeline], "r-", lw=1.5, label="failures")
    throughput.set_ylabel("requests / s")
    throughput.set_xlabel("seconds since start")
    throughput.legend(loc="upper left", fontsize="small")
    users = throughput.twinx()
    users.plot(seconds, [row["users"] for row in timeline], color="grey", lw=1, ls="-.")
    users.set_ylabel("users", color="grey")
    users.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
