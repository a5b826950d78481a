"""The model path alone, in this process: what a worker costs per batch without any serving around it."""

from __future__ import annotations

import time

import numpy as np
import torch

from models.runtime.inference import TaskInference
from models.schema import ARTICLE
from models.store.snapshot import GraphSnapshot
from serve.http.schemas import MAX_K
from serve.versions.bundles import TaskBundle


def model_throughput(bundles: list[TaskBundle], sizes: dict[str, list[int]], seconds: float = 2.0,
                     max_batch_size: int = 32) -> dict[str, dict[int, float]]:
    """Median ms per batch of ``TaskInference.run`` (sample, gather, pad, compiled forward, head).

    Args:
        bundles: the tasks' bundles (compiled with ``--compile buckets`` from their cache, 1 thread,
            as one worker of ``python -m serve`` on 2 cores runs).
        sizes: per task, the batch sizes to time.
        seconds: time spent per batch size.
        max_batch_size: the server's largest batch (sizes the bucket ladder).
    """
    torch.set_num_threads(1)
    out: dict[str, dict[int, float]] = {}
    for bundle in bundles:
        if bundle.task not in sizes:
            continue
        snapshot = GraphSnapshot.open(bundle.snapshot_dir)
        inference = TaskInference.from_bundle(bundle.bundle_dir, snapshot, compile="buckets",
                                              max_batch_size=max_batch_size)
        inference.warm_up()
        rng = np.random.default_rng(0)
        out[bundle.task] = {size: float(np.median(time_runs(inference, size, seconds, rng)) * 1000)
                            for size in sizes[bundle.task]}
    return out


def time_runs(inference: TaskInference, size: int, seconds: float, rng: np.random.Generator) -> list[float]:
    """Seconds per ``inference.run`` of ``size`` random entities, for about ``seconds`` (at least 5 runs);
    a ranking task ranks as many articles as the API allows (what it ranks for every request)."""
    snapshot = inference.snapshot
    count = snapshot.num_nodes[inference.entity_type]
    k = min(MAX_K, snapshot.num_nodes[ARTICLE])
    times: list[float] = []
    stop = time.perf_counter() + seconds
    while time.perf_counter() < stop or len(times) < 5:
        entity = torch.from_numpy(rng.integers(0, count, size=size))
        started = time.perf_counter()
        inference.run(entity, k=k)
        times.append(time.perf_counter() - started)
    return times
