"""Read a server's ``/metrics`` text, and turn two scrapes into per-task figures (benchmarks, tests).

The one parser of the Prometheus text format in the benchmarks, the load test and the tests:
prometheus_client's own, into a flat ``{(sample name, sorted label items): value}``.
"""

from __future__ import annotations

import math
import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]
Samples = dict[tuple[str, Labels], float]


def parse(text: str) -> Samples:
    """``{(sample name, sorted label items): value}`` of a Prometheus text exposition."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def scrape(url: str) -> Samples:
    """:func:`parse` of ``GET url/metrics`` (``url``: ``http://host:port``)."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        return parse(response.read().decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample ``name{labels}`` (exactly those labels); 0 when the series does not exist (yet)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def series(samples: Samples, name: str) -> dict[Labels, float]:
    """Every series of sample ``name``: ``{sorted label items: value}``."""
    return {labels: v for (sample, labels), v in samples.items() if sample == name}


def _delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def histogram_quantile(before: Samples, after: Samples, name: str, q: float, **labels: str) -> float:
    """Upper bound of the bucket holding quantile ``q`` of the observations between the scrapes."""
    buckets = sorted((float(dict(k[1])["le"]), after[k] - before.get(k, 0.0)) for k in after
                      if k[0] == f"{name}_bucket" and all(dict(k[1]).get(a) == v for a, v in labels.items()))
    if not buckets or buckets[-1][1] <= 0:
        return math.nan
    target = q * buckets[-1][1]
    return next(le for le, count in buckets if count >= target)


@dataclass
class TaskStats:
    """One task between two scrapes; times in ms, means unless named p99 (a bucket's upper bound)."""

    batches: float
    avg_batch: float
    queue_wait_ms: float
    queue_wait_p99_ms: float
    model_ms_per_batch: float
    server_ms: float
    server_p99_ms: float


def task_stats(before: Samples, after: Samples) -> dict[str, TaskStats]:
    """Per task that formed batches by the second scrape: its :class:`TaskStats` between the two."""
    tasks = sorted({dict(k[1])["task"] for k in after if k[0] == "relserve_batch_size_count"})
    out = {}
    for task in tasks:
        batches = _delta(before, after, "relserve_batch_size_count", task=task)
        requests = _delta(before, after, "relserve_batch_size_sum", task=task)
        waits = _delta(before, after, "relserve_queue_wait_seconds_count", task=task)
        model_s = sum(_delta(before, after, "relserve_stage_duration_seconds_sum", task=task, stage=stage)
                      for stage in ("sample", "forward", "rank"))
        answered = _delta(before, after, "relserve_request_duration_seconds_count", task=task, status="200")
        out[task] = TaskStats(
            batches=batches, avg_batch=requests / batches if batches else 0.0,
            queue_wait_ms=1000 * _delta(before, after, "relserve_queue_wait_seconds_sum", task=task) / waits
            if waits else math.nan,
            queue_wait_p99_ms=1000 * histogram_quantile(before, after, "relserve_queue_wait_seconds", 0.99,
                                                        task=task),
            model_ms_per_batch=1000 * model_s / batches if batches else math.nan,
            server_ms=1000 * _delta(before, after, "relserve_request_duration_seconds_sum", task=task,
                                    status="200") / answered if answered else math.nan,
            server_p99_ms=1000 * histogram_quantile(before, after, "relserve_request_duration_seconds", 0.99,
                                                    task=task, status="200"))
    return out
