"""Prometheus metrics of ingestion (the write side, the workers' followers, and live gauges).

Counters and histograms are written by the process where the event happens (API servers and the
file drop: rows accepted and refused; workers: ingest-to-visible lag, applied batches, article-key
refreshes, snapshot switches), in multiprocess mode like every other metric of the server
(:mod:`serve.http.metrics`). State that must not outlive a dead worker (how far each worker got, its delta
size and snapshot version, the log's last sequence) is read at scrape time by :class:`IngestGauges`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from models.store.records import KINDS
from serve.ingest.problems import REASONS
from serve.ingest.progress import Progress

LAG_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 30.0)
APPEND_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
REFRESH_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class IngestMetrics:
    """The write side's metrics (API server processes and the file drop).

    Every series whose labels are known up front (rows and append time per kind, refused rows per
    kind x reason, compactions) is created at 0, so a dashboard shows 0 rather than "No data"; the
    server makes one at start-up (:func:`serve.ingest.server.install`) so they are there before the
    first row. Per status (``relserve_ingest_requests_total``) only statuses that happened are.

    Args:
        registry: where to register (``None``: nowhere; multiprocess files only).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self._rows = Counter("relserve_ingest_rows", "Rows acknowledged (durable in the log).", ["kind"],
                             registry=registry)
        self._rejected = Counter("relserve_ingest_rejected_rows", "Rows of refused batches, by the reason "
                                 "of the batch's first problem.", ["kind", "reason"], registry=registry)
        self._requests = Counter("relserve_ingest_requests", "Ingestion requests answered, by status.",
                                 ["kind", "status"], registry=registry)
        self._append = Histogram("relserve_ingest_append_seconds", "A batch's request from its first "
                                 "byte to its answer (validation and durable append).", ["kind"],
                                 buckets=APPEND_BUCKETS, registry=registry)
        self._compactions = Counter("relserve_compactions", "Compactions of the delta into a new snapshot "
                                    "version run by this server.", registry=registry)
        self._compaction_seconds = Histogram("relserve_compaction_seconds", "Time of one compaction.",
                                             buckets=REFRESH_BUCKETS, registry=registry)
        for kind in KINDS:
            self._rows.labels(kind)
            self._append.labels(kind)
            for reason in REASONS:
                self._rejected.labels(kind, reason)

    def accepted(self, kind: str, rows: int) -> None:
        self._rows.labels(kind).inc(rows)

    def rejected(self, kind: str, reason: str, rows: int) -> None:
        self._rejected.labels(kind, reason).inc(rows)

    def answered(self, kind: str, status: int, seconds: float | None = None) -> None:
        self._requests.labels(kind, str(status)).inc()
        if seconds is not None and status == 200:
            self._append.labels(kind).observe(seconds)

    def compacted(self, seconds: float) -> None:
        """One compaction finished (called by whatever runs compactions inside the server)."""
        self._compactions.inc()
        self._compaction_seconds.observe(seconds)


class FollowerMetrics:
    """A worker's metrics of applying the log (``task``: label of every sample)."""

    def __init__(self, task: str, registry: CollectorRegistry | None = None) -> None:
        self._lag = Histogram("relserve_ingest_visible_lag_seconds", "From a batch's receipt to the worker "
                              "answering from a graph that holds it.", ["task"], buckets=LAG_BUCKETS,
                              registry=registry).labels(task)
        self._keys_lag = Histogram("relserve_article_keys_lag_seconds", "From the receipt of the oldest "
                                   "batch the purchase article keys did not cover to refreshed keys "
                                   "being served.", ["task"], buckets=LAG_BUCKETS,
                                   registry=registry).labels(task)
        self._batches = Counter("relserve_ingest_applied_batches", "Log batches applied to the live graph.",
                                ["task"], registry=registry).labels(task)
        self._refreshes = Counter("relserve_article_key_refreshes", "Purchase article keys recomputed "
                                  "after the graph changed.", ["task"], registry=registry).labels(task)
        self._refresh_seconds = Histogram("relserve_article_key_refresh_seconds", "Time to recompute the "
                                          "purchase article keys.", ["task"], buckets=REFRESH_BUCKETS,
                                          registry=registry).labels(task)
        self._switches = Counter("relserve_snapshot_switches", "Compacted snapshot versions a worker "
                                 "switched to.", ["task"], registry=registry).labels(task)
        self._compiles = Counter("relserve_article_key_compiles", "Compiles of the article keys' forward "
                                 "by the graph owner, by outcome (started, done, failed).",
                                 ["task", "outcome"], registry=registry)
        self._task = task
        self._batches.inc(0)
        self._refreshes.inc(0)
        self._switches.inc(0)

    def applied(self, batches: int, lags: Iterable[float]) -> None:
        self._batches.inc(batches)
        for lag in lags:
            self._lag.observe(max(0.0, lag))

    def refreshed(self, seconds: float, lag: float | None = None) -> None:
        """Keys refreshed in ``seconds``; ``lag``: since the oldest batch they now cover arrived."""
        self._refreshes.inc()
        self._refresh_seconds.observe(seconds)
        if lag is not None:
            self._keys_lag.observe(max(0.0, lag))

    def switched(self) -> None:
        self._switches.inc()

    def key_compile(self, outcome: str) -> None:
        """A compile of the task's key forward ``"started"``, or ended ``"done"`` or ``"failed"``."""
        self._compiles.labels(self._task, outcome).inc()


class IngestGauges(Collector):
    """Gauges read at scrape time from the graph owner's header, the keyed workers' reports and the log.

    Args:
        progress: how far the server serves the log (:func:`serve.ingest.progress.read_progress`).
        tasks: the served tasks.
        ranking: those of them whose answers rank with article keys.
        log_sequence: the log's last sequence (``None``: unknown now).
    """

    def __init__(self, progress: Callable[[], Progress], tasks: list[str], ranking: list[str],
                 log_sequence: Callable[[], int | None]) -> None:
        self.progress = progress
        self.tasks = tasks
        self.ranking = set(ranking)
        self.log_sequence = log_sequence

    def collect(self) -> Iterable[Metric]:
        try:
            now = self.progress()
        except OSError:
            now = Progress(None)
        families = {
            "applied": GaugeMetricFamily("relserve_ingest_applied_sequence", "Log sequence the task's "
                                         "answers read (the graph owner's published version).",
                                         labels=["task"]),
            "keyed": GaugeMetricFamily("relserve_ingest_keyed_sequence", "Log sequence the task's "
                                       "answers read with article keys that cover it.", labels=["task"]),
            "delta": GaugeMetricFamily("relserve_ingest_delta_rows", "Rows the served graph holds on top "
                                       "of its base snapshot.", labels=["task"]),
            "version": GaugeMetricFamily("relserve_snapshot_version", "Snapshot version the served graph "
                                         "is built on.", labels=["task"]),
        }
        graph = now.graph
        if graph is not None:
            for task in self.tasks:
                families["applied"].add_metric([task], graph.sequence)
                families["keyed"].add_metric([task], now.visible(task in self.ranking))
                families["delta"].add_metric([task], graph.delta_rows)
                families["version"].add_metric([task], graph.snapshot_version)
        yield from families.values()
        try:
            sequence = self.log_sequence()
        except Exception:  # an unreachable broker leaves the gauge out of this scrape
            sequence = None
        if sequence is not None:
            log = GaugeMetricFamily("relserve_ingest_log_sequence", "Last sequence in the ingestion log.")
            log.add_metric([], sequence)
            yield log
