"""The benchmark's no-model servers answer the real routes and bodies, driven by the wrk load generator."""

from __future__ import annotations

import pytest
import requests

from serve.bench.loop_client import run_loop_client
from serve.bench.process import ServerProcess
from serve.bench.wrk import have_wrk, run_wrk

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REQUESTS = [("/predict/churn", {"customer_id": "a" * 64}), ("/predict/sales", {"article_id": "0108775015"}),
            ("/predict/purchase", {"customer_id": "b" * 64, "k": 12})]


@pytest.mark.parametrize("stock", [False, True])
def test_the_ceiling_validates_bodies_and_answers_constants(tmp_path, stock):
    args = ("--stock",) if stock else ()
    with ServerProcess(tmp_path, *args, module="serve.bench.ceiling_server",
                       log_path=tmp_path / "ceiling.log") as server:
        server.wait_ready(timeout=300)
        answer = requests.post(server.url + "/predict/purchase", json={"customer_id": "b" * 64}, timeout=30)
        assert answer.status_code == 200 and len(answer.json()["articles"]) == 12
        listed = requests.post(server.url + "/predict/sales", json={"article_ids": ["1", "2", "3"]},
                               timeout=30)
        assert listed.status_code == 200 and len(listed.json()["answers"]) == 3
        bad = requests.post(server.url + "/predict/churn", json={"customer_id": ["x"]}, timeout=30)
        assert bad.status_code == 422
        load = run_wrk if have_wrk() else run_loop_client  # the ceiling's fallback without wrk
        result = load(server.url, REQUESTS, clients=4, seconds=1)
        assert result.errors == 0 and result.requests > 0 and result.p50_ms <= result.p99_ms
