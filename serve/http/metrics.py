"""Prometheus metrics of the server, counted in every process and exported once on ``GET /metrics``.

prometheus_client runs in multiprocess mode: each process writes its samples to files in
``PROMETHEUS_MULTIPROC_DIR`` and the ``/metrics`` handler merges them. prometheus_client picks
its storage when it is first imported, so the directory must be in the environment before the
main process imports this module (``serve.__main__`` sees to it). Without the variable (unit
tests), the metrics live in this process and go to whichever registry the caller passes.

Metric objects are built per process with ``registry=None`` (the default registry is never
used), so building them twice is harmless. Worker metrics come from inference workers, request
metrics from the API server's middleware; gauges of live state (in-flight requests, queue depth)
are read at scrape time from the shared counters rather than written to files, because dead
workers' gauge files would never be cleaned up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
STAGE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)
QUEUE_BUCKETS = (0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
RATIO_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


class WorkerMetrics:
    """Metrics of one inference worker serving ``task``.

    Args:
        task: label value of every sample.
        registry: where to register (``None``: nowhere; multiprocess files only).
    """

    def __init__(self, task: str, registry: CollectorRegistry | None = None) -> None:
        self.task = task
        self._batch_size = Histogram("relserve_batch_size", "Ids per inference forward.", ["task"],
                                     buckets=BATCH_BUCKETS, registry=registry).labels(task)
        self._bucket = Counter("relserve_bucket", "Batches run per shape bucket.", ["task", "bucket"],
                               registry=registry)
        self._padding = Histogram("relserve_padding_ratio", "Share of a bucket's node rows that is padding.",
                                  ["task"], buckets=RATIO_BUCKETS, registry=registry).labels(task)
        self._stage = Histogram("relserve_stage_duration_seconds", "Time per inference stage of a batch.",
                                ["task", "stage"], buckets=STAGE_BUCKETS, registry=registry)
        self._warmup = Gauge("relserve_warmup_seconds",
                             "setup() time (load, compile, warm-up) of the slowest worker.",
                             ["task"], multiprocess_mode="max", registry=registry).labels(task)
        self._recompiles = Counter("relserve_recompiles", "Graphs compiled after warm-up (should stay 0).",
                                   ["task"], registry=registry).labels(task)
        self._cache = Counter("relserve_compile_cache", "Worker start-ups by compile-cache outcome.",
                              ["task", "result"], registry=registry)
        self._queue_wait = Histogram("relserve_queue_wait_seconds",
                                     "Time a request waited from the API server's put to its batch.",
                                     ["task"], buckets=QUEUE_BUCKETS, registry=registry).labels(task)
        self._recompiles.inc(0)
        self._seen_recompiles = 0
        # labels() takes a lock and builds a key per call: the children, once per label value.
        self._buckets: dict[str, Any] = {}
        self._stages: dict[str, Any] = {}

    def warmed_up(self, seconds: float, cache: str) -> None:
        """Record a finished ``setup()``; ``cache``: ``hit``, ``miss`` or ``disabled`` (eager)."""
        self._warmup.set(seconds)
        self._cache.labels(self.task, cache).inc()

    def batch(self, size: int, bucket: str, padding_ratio: float, stage_seconds: Mapping[str, float]) -> None:
        """Record one inference forward of ``size`` ids."""
        self._batch_size.observe(size)
        counter = self._buckets.get(bucket)
        if counter is None:
            counter = self._buckets[bucket] = self._bucket.labels(self.task, bucket)
        counter.inc()
        self._padding.observe(padding_ratio)
        for stage, seconds in stage_seconds.items():
            histogram = self._stages.get(stage)
            if histogram is None:
                histogram = self._stages[stage] = self._stage.labels(self.task, stage)
            histogram.observe(seconds)

    def queue_waits(self, seconds: Iterable[float]) -> None:
        """Record the queueing delay of each request of a batch."""
        for wait in seconds:
            self._queue_wait.observe(wait)

    def recompiles(self, total: int) -> None:
        """Record the worker's running total of recompiles (only the increase is counted)."""
        if total > self._seen_recompiles:
            self._recompiles.inc(total - self._seen_recompiles)
            self._seen_recompiles = total


# Every status the prediction routes answer and every reason a request is refused.
STATUSES = (200, 404, 413, 415, 422, 500, 503, 504)
REJECT_REASONS = ("overloaded", "draining", "deadline")


class RequestMetrics:
    """HTTP-side metrics, recorded by the admission middleware in each API server process.

    Args:
        tasks: tasks whose series (task x status, task x reason) are created at 0 now: in
            multiprocess mode a labelled series is absent until first touched, and a dashboard
            panel over an absent series shows "No data" instead of 0.
        registry: where to register (``None``: nowhere; multiprocess files only).
    """

    def __init__(self, tasks: Iterable[str] = (), registry: CollectorRegistry | None = None) -> None:
        self._duration = Histogram("relserve_request_duration_seconds", "Time from request to response.",
                                   ["task", "status"], buckets=LATENCY_BUCKETS, registry=registry)
        self._requests = Counter("relserve_requests", "Answered prediction requests.", ["task", "status"],
                                 registry=registry)
        self._rejected = Counter("relserve_rejected", "Requests refused without running them.",
                                 ["task", "reason"], registry=registry)
        self._answered_children: dict[tuple[str, int], tuple[Any, Any]] = {}
        self._rejected_children: dict[tuple[str, str], Any] = {}
        for task in tasks:
            for status in STATUSES:
                self._answered(task, status)
            for reason in REJECT_REASONS:
                self._rejected_child(task, reason)

    def _answered(self, task: str, status: int) -> tuple[Any, Any]:
        # labels() takes a lock and builds a key per call; the children are cached per label set.
        children = self._answered_children.get((task, status))
        if children is None:
            children = (self._duration.labels(task, str(status)), self._requests.labels(task, str(status)))
            self._answered_children[(task, status)] = children
        return children

    def _rejected_child(self, task: str, reason: str) -> Any:
        child = self._rejected_children.get((task, reason))
        if child is None:
            child = self._rejected_children[(task, reason)] = self._rejected.labels(task, reason)
        return child

    def answered(self, task: str, status: int, seconds: float) -> None:
        duration, requests = self._answered(task, status)
        duration.observe(seconds)
        requests.inc()

    def rejected(self, task: str, reason: str) -> None:
        """``reason``: ``overloaded``, ``draining`` or ``deadline``."""
        self._rejected_child(task, reason).inc()


class LiveGauges(Collector):
    """Gauges read at scrape time: ``{name: (help, {task: read_value})}``."""

    def __init__(self, gauges: Mapping[str, tuple[str, Mapping[str, Callable[[], float]]]]) -> None:
        self.gauges = gauges

    def collect(self) -> Iterable[Metric]:
        for name, (doc, readers) in self.gauges.items():
            family = GaugeMetricFamily(name, doc, labels=["task"])
            for task, read in readers.items():
                try:
                    family.add_metric([task], float(read()))
                except Exception:  # a gauge that cannot be read now is left out of this scrape
                    continue
            yield family


def metrics_route(*live: Collector) -> Callable:
    """A ``GET /metrics`` handler merging every process's samples (plus ``live`` gauges)."""

    async def metrics(request: Request) -> Response:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        for collector in live:
            registry.register(collector)
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return metrics
