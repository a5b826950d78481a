"""serve.http.metrics: what a worker records, and the live gauges read at scrape time."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from serve.http.metrics import LiveGauges, WorkerMetrics


def test_worker_metrics_record_batches_warmup_and_cache_outcome():
    registry = CollectorRegistry()
    metrics = WorkerMetrics("purchase", registry)
    metrics.warmed_up(3.5, "hit")
    metrics.batch(5, "n4160", 0.25, {"sample": 0.001, "forward": 0.004, "rank": 0.0005})
    metrics.batch(1, "n520", 0.5, {"sample": 0.001, "forward": 0.002, "rank": 0.0005})
    value = registry.get_sample_value
    assert value("relserve_warmup_seconds", {"task": "purchase"}) == 3.5
    assert value("relserve_compile_cache_total", {"task": "purchase", "result": "hit"}) == 1
    assert value("relserve_batch_size_sum", {"task": "purchase"}) == 6
    assert value("relserve_bucket_total", {"task": "purchase", "bucket": "n4160"}) == 1
    assert value("relserve_padding_ratio_count", {"task": "purchase"}) == 2
    assert value("relserve_stage_duration_seconds_count", {"task": "purchase", "stage": "rank"}) == 2


def test_recompiles_count_only_increases_of_the_running_total():
    registry = CollectorRegistry()
    metrics = WorkerMetrics("churn", registry)
    assert registry.get_sample_value("relserve_recompiles_total", {"task": "churn"}) == 0
    for total in (0, 2, 2, 3):
        metrics.recompiles(total)
    assert registry.get_sample_value("relserve_recompiles_total", {"task": "churn"}) == 3


def test_live_gauges_read_at_scrape_time_and_skip_unreadable_values():
    depth = {"churn": 4}
    registry = CollectorRegistry()

    def broken() -> float:
        raise ConnectionError("queue not started")

    registry.register(LiveGauges({"relserve_queue_depth": ("doc", {"churn": lambda: depth["churn"],
                                                                     "sales": broken})}))
    assert registry.get_sample_value("relserve_queue_depth", {"task": "churn"}) == 4
    depth["churn"] = 7
    text = generate_latest(registry).decode()
    assert 'relserve_queue_depth{task="churn"} 7.0' in text and "sales" not in text
