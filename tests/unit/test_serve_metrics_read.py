"""serve.bench.metrics_read: per-task figures from two scrapes, on the server's own metric classes."""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, generate_latest

from serve.bench.metrics_read import histogram_quantile, parse, task_stats
from serve.http.metrics import RequestMetrics, WorkerMetrics


def samples(registry: CollectorRegistry) -> dict:
    return parse(generate_latest(registry).decode())


def test_two_scrapes_give_batches_queueing_model_and_server_time_per_task():
    registry = CollectorRegistry()
    worker, requests = WorkerMetrics("churn", registry), RequestMetrics(["churn"], registry)
    worker.batch(1, "n1", 0.0, {"sample": 0.001, "forward": 0.001})  # before the window
    before = samples(registry)
    for size in (2, 4):
        worker.batch(size, "n4", 0.1, {"sample": 0.001, "forward": 0.002, "rank": 0.0})
        worker.queue_waits([0.004] * size)
    for _ in range(6):
        requests.answered("churn", 200, 0.010)
    stats = task_stats(before, samples(registry))["churn"]
    assert stats.batches == 2 and stats.avg_batch == 3
    assert math.isclose(stats.queue_wait_ms, 4.0) and stats.queue_wait_p99_ms == 5.0  # bucket bound
    assert math.isclose(stats.model_ms_per_batch, 3.0) and math.isclose(stats.server_ms, 10.0)


def test_a_quantile_without_observations_is_nan():
    registry = CollectorRegistry()
    RequestMetrics(["sales"], registry)
    now = samples(registry)
    assert math.isnan(histogram_quantile(now, now, "relserve_request_duration_seconds", 0.99,
                                         task="sales", status="200"))
