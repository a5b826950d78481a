"""Prometheus metrics of model versions: swaps and refusals counted where they happen, versions read
at scrape time.

Counters and the swap-time histogram are written by the process where the event happens, in
multiprocess mode like every metric of the server (:mod:`serve.http.metrics`): workers count the versions
they switched to and the ones they refused (each worker of a task counts its own), the admin route
counts the loads the deployment guard refused. The version each task serves, and whether a load is
under way, are read from the workers' state files (:mod:`serve.versions.model_control`) by
:class:`ModelGauges`, so a dead worker's value never lingers.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from serve.versions.model_control import ModelControl

SWAP_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
# Why a version was not served: its bundle does not load (files, checksum, snapshot schema, ...),
# its weights are not finite, its smoke prediction failed, the deployment guard held it back, or
# something else went wrong while warming it up.
REFUSALS = ("load", "weights", "smoke", "guard", "error")


class ModelMetrics:
    """Version changes of ``task`` (a worker's, or the admin route's for guard refusals)."""

    def __init__(self, task: str, registry: CollectorRegistry | None = None) -> None:
        self.task = task
        self._swaps = Counter("relserve_model_swaps", "Model versions a worker switched to after loading "
                              "and warming them up.", ["task"], registry=registry)
        self._refusals = Counter("relserve_model_refusals", "Model versions refused (the serving one "
                                 "kept), by reason.", ["task", "reason"], registry=registry)
        self._seconds = Histogram("relserve_model_swap_seconds", "Load, warm-up and smoke prediction of a "
                                  "new model version, in the background.", ["task"], buckets=SWAP_BUCKETS,
                                  registry=registry)
        self._swaps.labels(task).inc(0)
        for reason in REFUSALS:
            self._refusals.labels(task, reason).inc(0)

    def swapped(self, seconds: float) -> None:
        self._swaps.labels(self.task).inc()
        self._seconds.labels(self.task).observe(seconds)

    def refused(self, reason: str) -> None:
        self._refusals.labels(self.task, reason if reason in REFUSALS else "error").inc()


class ModelGauges(Collector):
    """``relserve_model_version`` (lowest version the task's live workers serve) and
    ``relserve_model_loading`` (workers of the task loading another version), read at scrape time."""

    def __init__(self, control: ModelControl) -> None:
        self.control = control

    def collect(self) -> Iterable[Metric]:
        version = GaugeMetricFamily("relserve_model_version", "Model version the task's workers serve "
                                    "(lowest over workers).", labels=["task"])
        loading = GaugeMetricFamily("relserve_model_loading", "Workers of the task loading another model "
                                    "version in the background.", labels=["task"])
        try:
            states = self.control.workers()
        except OSError:
            states = []
        for task in sorted({s.task for s in states}):
            mine = [s for s in states if s.task == task]
            version.add_metric([task], min(s.version for s in mine))
            loading.add_metric([task], sum(s.loading is not None for s in mine))
        yield version
        yield loading
