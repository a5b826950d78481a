"""/metrics of a real server: every metric exported once, and zero recompiles after a varied burst."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from models.schema import ARTICLE, CUSTOMER
from serve.bench.metrics_read import scrape, series, value
from serve.bench.process import ServerProcess
from serve.http.metrics import REJECT_REASONS, STATUSES

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TASKS = ("churn", "sales", "purchase")
BURSTS = (1, 2, 3, 5, 8, 13, 16, 21, 32)


def burst(server, snapshot, size: int, offset: int) -> list[int]:
    """``size`` concurrent requests to every task: known ids, an unknown one, varied k."""
    customers, articles = snapshot.ids[CUSTOMER], snapshot.ids[ARTICLE]
    calls = []
    for i in range(size):
        unknown = i % 7 == 6
        cid = "f" * 64 if unknown else customers[(offset + i * 13) % len(customers)].decode()
        aid = "0999999999" if unknown else articles[(offset + i * 5) % len(articles)].decode()
        calls += [("churn", {"customer_id": cid}), ("sales", {"article_id": aid}),
                  ("purchase", {"customer_id": cid, "k": 1 + (i * 11) % 100})]

    def send(call):
        return requests.post(f"{server.url}/predict/{call[0]}", json=call[1], timeout=60).status_code

    with ThreadPoolExecutor(min(64, len(calls))) as pool:
        return list(pool.map(send, calls))


def test_zero_recompiles_after_a_varied_burst(server, snapshot):
    statuses = []
    for n, size in enumerate(BURSTS):
        statuses += burst(server, snapshot, size, offset=n * 31)
    assert set(statuses) <= {200, 404}, statuses
    samples = scrape(server.url)
    for task in TASKS:
        assert value(samples, "relserve_recompiles_total", task=task) == 0
    used = set(series(samples, "relserve_bucket_total"))
    assert len(used) > len(TASKS), f"the burst should have used several buckets per task, got {used}"


def test_every_metric_is_exported_per_task(server, post, snapshot):
    post("churn", {"customer_id": snapshot.ids[CUSTOMER][0].decode()})
    post("churn", {"customer_id": "f" * 64})
    samples = scrape(server.url)
    for task in TASKS:
        assert value(samples, "relserve_warmup_seconds", task=task) > 0
        assert value(samples, "relserve_batch_size_count", task=task) > 0
        assert value(samples, "relserve_padding_ratio_count", task=task) > 0
        assert (("task", task),) in series(samples, "relserve_inflight_requests")
        assert (("task", task),) in series(samples, "relserve_queue_depth")
        cache = [value(samples, "relserve_compile_cache_total", task=task, result=r) for r in ("hit", "miss")]
        assert sum(cache) >= 1
    for stage in ("sample", "forward"):
        assert value(samples, "relserve_stage_duration_seconds_count", task="churn", stage=stage) > 0
    assert value(samples, "relserve_stage_duration_seconds_count", task="purchase", stage="rank") > 0
    assert value(samples, "relserve_requests_total", task="churn", status="200") >= 1
    assert value(samples, "relserve_requests_total", task="churn", status="404") >= 1
    assert value(samples, "relserve_request_duration_seconds_count", task="churn", status="200") >= 1


def test_a_fresh_server_exports_every_request_series_at_zero(artifacts, tmp_path):
    """Before any prediction request, rejection and request series exist (at 0), not "No data"."""
    with ServerProcess(artifacts, "--tasks", "churn,sales", "--compile", "none",
                       log_path=tmp_path / "serve.log") as fresh:
        fresh.wait_ready(timeout=300)
        samples = scrape(fresh.url)
    for task in ("churn", "sales"):
        for reason in REJECT_REASONS:
            assert samples[("relserve_rejected_total", (("reason", reason), ("task", task)))] == 0
        for status in STATUSES:
            labels = (("status", str(status)), ("task", task))
            assert samples[("relserve_requests_total", labels)] == 0
            assert samples[("relserve_request_duration_seconds_count", labels)] == 0
    rejected = series(samples, "relserve_rejected_total")
    assert not any(dict(labels)["task"] == "purchase" for labels in rejected)
