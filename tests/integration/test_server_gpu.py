"""CUDA serving: --cuda-graphs (reduce-overhead over static buckets) answers like eager CPU inference."""

from __future__ import annotations

import pytest
import requests
import torch

from models.runtime.inference import TaskInference
from models.schema import CUSTOMER
from serve.bench.metrics_read import scrape, value
from serve.bench.process import ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_cuda_graphs_server_matches_cpu_and_never_recompiles(artifacts, snapshot, tmp_path):
    indices = list(range(5))
    expected = TaskInference.from_bundle(artifacts / "churn", snapshot, compile="none").run(
        torch.tensor(indices)).values.tolist()
    with ServerProcess(artifacts, "--cuda-graphs", "--tasks", "churn,purchase", "--max-batch-size", "8",
                       log_path=tmp_path / "gpu.log") as gpu:
        gpu.wait_ready(timeout=900)
        for i, probability in zip(indices, expected, strict=True):
            body = {"customer_id": snapshot.ids[CUSTOMER][i].decode()}
            answer = requests.post(gpu.url + "/predict/churn", json=body, timeout=30).json()
            assert answer["churn_probability"] == pytest.approx(probability, abs=1e-3)
            ranked = requests.post(gpu.url + "/predict/purchase", json=body, timeout=30)
            assert ranked.status_code == 200 and len(ranked.json()["articles"]) == 12
        metrics = scrape(gpu.url)
        for task in ("churn", "purchase"):
            assert ("relserve_recompiles_total", (("task", task),)) in metrics, metrics
            assert value(metrics, "relserve_recompiles_total", task=task) == 0
