"""CPU against CUDA on one machine: ``python -m training.bench.gpu --artifacts DIR [--out FILE]``.

Four parts, each printed as a CPU column beside a CUDA one and appended to ``--out`` (JSON lines)
as soon as it is measured, so a time limit still leaves the earlier figures:

``forward``  in-process forward ms per bucket (batch 1 / 8 / 32, inputs already sampled and on the
             device): CPU eager, CUDA eager, CUDA buckets, CUDA buckets with CUDA Graphs.
``score``    batch scoring rows/s (``python -m serve.score``'s loop, eager, 1,024 rows per forward).
``train``    training steps/s of the bundle's model on batches sampled ahead, and what sampling a
             batch costs on the CPU (the bound of a GPU training loop that samples on the CPU).
``server``   ``python -m serve`` on the CPU and on CUDA: single ids and 100-id lists at 32 clients.

Without a CUDA device the CUDA columns say so and the CPU ones are still measured.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from models.cli import OneLineErrors
from models.registry import TASKS
from models.runtime.compile import CompileConfig
from models.runtime.inference import TaskInference
from models.runtime.train_step import TrainStep, tensor_lr_adam
from models.store.snapshot import GraphSnapshot
from serve.versions.bundles import ArtifactsError, TaskBundle, find_bundles
from training.bench.batches import BatchSource
from training.bench.random_batches import random_targets

PARTS = ("forward", "score", "train", "server")
FORWARD_SIZES = (1, 8, 32)
NO_CUDA = "skipped (no CUDA device)"


class Recorder:
    """Prints each figure and appends it to a JSON-lines file at once."""

    def __init__(self, out: Path | None) -> None:
        self.out = out

    def __call__(self, part: str, **figures: object) -> None:
        print(f"{part:8s} " + "  ".join(f"{k}={_fmt(v)}" for k, v in figures.items()), flush=True)
        if self.out is not None:
            with open(self.out, "a") as f:
                f.write(json.dumps({"part": part, **figures}) + "\n")


def _fmt(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _median_ms(call: Callable[[], object], sync: bool, calls: int = 60) -> float:
    for _ in range(5):
        call()
    times = []
    for _ in range(calls):
        if sync:
            torch.cuda.synchronize()
        started = time.perf_counter()
        call()
        if sync:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def bench_forward(bundle: TaskBundle, snapshot: GraphSnapshot, record: Recorder, cuda: bool) -> None:
    variants = {"cpu_eager": ("cpu", "none", False)}
    if cuda:
        variants |= {"cuda_eager": ("cuda", "none", False), "cuda_buckets": ("cuda", "buckets", False),
                     "cuda_graphs": ("cuda", "buckets", True)}
    count = snapshot.num_nodes[TASKS[bundle.task].entity_type]
    inferences = {name: TaskInference.from_bundle(bundle.bundle_dir, snapshot, compile=strategy,
                                                  device=device, cuda_graphs=graphs,
                                                  max_batch_size=max(FORWARD_SIZES))
                  for name, (device, strategy, graphs) in variants.items()}
    for size in FORWARD_SIZES:
        entity = torch.randperm(count, generator=torch.Generator().manual_seed(size))[:size]
        figures: dict[str, object] = {"task": bundle.task, "batch": size}
        for name, inference in inferences.items():
            inputs = inference.prepare(entity).to(inference.device)
            figures[f"{name}_ms"] = _median_ms(lambda p=inference.predictor, x=inputs: p(x),
                                               inference.device.type == "cuda")
        if not cuda:
            figures["cuda"] = NO_CUDA
        else:
            figures["graphs_vs_eager"] = figures["cuda_eager_ms"] / figures["cuda_graphs_ms"]
        record("forward", **figures)


def bench_score(bundle: TaskBundle, snapshot: GraphSnapshot, record: Recorder, cuda: bool,
                scratch: Path) -> None:
    from serve.score.run import score_to_file

    figures: dict[str, object] = {"task": bundle.task}
    for device in ("cpu", "cuda") if cuda else ("cpu",):
        inference = TaskInference.from_bundle(bundle.bundle_dir, snapshot, compile="none", device=device)
        inference.warm_up()
        report = score_to_file(inference, scratch / f"{bundle.task}-{device}.parquet", "parquet", 1024,
                               progress=False)
        figures[f"{device}_rows_per_s"] = report.rows_per_second
    if cuda:
        figures["cuda_vs_cpu"] = figures["cuda_rows_per_s"] / figures["cpu_rows_per_s"]
    else:
        figures["cuda"] = NO_CUDA
    record("score", **figures)


def bench_train(bundle: TaskBundle, record: Recorder, cuda: bool, seeds: int = 512, steps: int = 30) -> None:
    from models.runtime.bundle import load_bundle

    spec = TASKS[bundle.task]
    if spec.ranks:  # the purchase step needs its in-batch positives: timed by training.fit itself
        return
    source = BatchSource.snapshot(bundle.snapshot_dir, spec.entity_type)
    started = time.perf_counter()
    batches = source.sample([seeds] * 8, 0, True)
    figures: dict[str, object] = {"task": bundle.task, "seeds": seeds,
                                  "cpu_sample_ms": (time.perf_counter() - started) / 8 * 1000}
    items = [(b, random_targets(bundle.task, b.num_seeds, i)) for i, b in enumerate(batches)]
    for device in ("cpu", "cuda") if cuda else ("cpu",):
        _, model = load_bundle(bundle.bundle_dir, GraphSnapshot.open(bundle.snapshot_dir), device)
        model.train()
        step = TrainStep(model, tensor_lr_adam(model.parameters(), 1e-3), CompileConfig("none"))
        moved = [(b.to(device), t.to(device)) for b, t in items]
        ms = _median_ms(lambda step=step, moved=moved: [step(b, t) for b, t in moved], device == "cuda",
                        calls=max(1, steps // 8))
        figures[f"{device}_steps_per_s"] = len(moved) / (ms / 1000)
    if cuda:
        figures["cuda_vs_cpu"] = figures["cuda_steps_per_s"] / figures["cpu_steps_per_s"]
    else:
        figures["cuda"] = NO_CUDA
    record("train", **figures)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineErrors(prog="python -m training.bench.gpu", description=__doc__.split("\n")[0])
    parser.add_argument("--artifacts", type=Path, required=True, help="trained bundles and their snapshot")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--out", type=Path, help="append every figure here as a JSON line")
    parser.add_argument("--seconds", type=float, default=15.0, help="server part: seconds per load run")
    args = parser.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    if unknown := sorted(set(parts) - set(PARTS)):
        parser.error(f"--parts: unknown {', '.join(unknown)} (use {', '.join(PARTS)})")
    try:
        bundles = find_bundles(args.artifacts)
    except ArtifactsError as e:
        parser.error(str(e))
    cuda = torch.cuda.is_available()
    record = Recorder(args.out)
    record("machine", torch=torch.__version__, cpu_threads=torch.get_num_threads(),
           cuda=torch.cuda.get_device_name() if cuda else NO_CUDA)
    snapshot = GraphSnapshot.open(bundles[0].snapshot_dir)
    scratch = Path(args.out.parent if args.out else Path.cwd()) / "gpu-bench-scratch"
    scratch.mkdir(exist_ok=True)
    for bundle in bundles:
        if "forward" in parts:
            bench_forward(bundle, snapshot, record, cuda)
        if "score" in parts:
            bench_score(bundle, snapshot, record, cuda, scratch)
        if "train" in parts:
            bench_train(bundle, record, cuda)
    if "server" in parts:
        from training.bench.gpu_server import bench_server

        bench_server(args.artifacts, record, cuda, args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
