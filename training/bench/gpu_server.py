"""The server part of ``python -m training.bench.gpu``: ``python -m serve`` on the CPU, then on CUDA
(with CUDA Graphs), each driven with single ids and with 100-id lists at 32 clients."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

from models.registry import TASKS
from models.store.ids import ids_text
from serve.bench.load import run_requests
from serve.bench.process import ServerProcess
from serve.bench.workload import served_mix

LIST_LENGTH = 100
CLIENTS = 32


def list_requests(snapshot, tasks: list[str], count: int = 64) -> list[tuple[str, bytes]]:
    """``count`` requests per task of :data:`LIST_LENGTH` known ids each (``customer_ids`` or
    ``article_ids``), tasks alternating."""
    requests = []
    for task in tasks:
        spec = TASKS[task]
        ids = ids_text(snapshot.ids[spec.entity_type])
        for i in range(count):
            start = i * LIST_LENGTH % max(1, len(ids) - LIST_LENGTH)
            body = {f"{spec.id_field}s": ids[start:start + LIST_LENGTH]}
            body |= {"k": spec.k} if spec.ranks else {}
            requests.append((spec.path, json.dumps(body).encode()))
    return requests[::2] + requests[1::2]


def bench_server(artifacts: Path, record: Callable[..., None], cuda: bool, seconds: float) -> None:
    bundles, snapshot, singles = served_mix(artifacts)
    lists = list_requests(snapshot, [b.task for b in bundles])
    layouts = {"cpu": ("--accelerator", "cpu")}
    if cuda:
        layouts["cuda"] = ("--accelerator", "cuda", "--cuda-graphs")
    figures: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="relserve-gpu-bench-") as scratch:
        for name, flags in layouts.items():
            with ServerProcess(artifacts, *flags, log_path=Path(scratch) / f"{name}.log") as server:
                ready = server.wait_ready(timeout=600)
                single = run_requests(server.url, singles, CLIENTS, seconds)
                listed = run_requests(server.url, lists, CLIENTS, seconds)
                figures[name] = {"ready_s": round(ready, 1), "single_rps": single.throughput,
                                 "single_p50_ms": single.percentile_ms(50),
                                 "single_errors": sum(n for s, n in single.statuses.items() if s != 200),
                                 "list_predictions_per_s": listed.throughput * LIST_LENGTH,
                                 "list_p99_ms": listed.percentile_ms(99),
                                 "list_errors": sum(n for s, n in listed.statuses.items() if s != 200)}
                record("server", device=name, **figures[name])
    if cuda:
        record("server", cuda_vs_cpu_lists=figures["cuda"]["list_predictions_per_s"]
               / max(1e-9, figures["cpu"]["list_predictions_per_s"]),
               cuda_vs_cpu_single=figures["cuda"]["single_rps"] / max(1e-9, figures["cpu"]["single_rps"]))
