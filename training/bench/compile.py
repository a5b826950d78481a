"""Benchmark the compile strategies side by side: ``python -m training.bench [--data SNAPSHOT]``.

Prints training steps/s and inference forwards/s for eager (``none``), ``dynamic`` and ``buckets``
on the same batches, alternating strategies call by call so machine noise hits all three alike
(ratios are medians of per-round ratios), then first-call compile time cold vs warm (compile-cache
artifact loaded) in fresh subprocesses. Batches come from the temporal sampler over a snapshot
(``--data``) or, without one, from random trees of the same layout.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from models.cli import add_threads_option
from models.graph.buckets import BucketLadder
from models.nn.inputs import ModelInputs
from models.nn.model import TaskModel
from models.registry import TASKS
from models.runtime.compile import STRATEGIES, CompileConfig, Predictor, compiled_graph_count
from models.runtime.train_step import TrainStep, tensor_lr_adam
from training.bench.batches import BatchSource
from training.bench.random_batches import random_targets
from training.bench.start import COMPILE_BENCH_MODEL, measure_start

SEED_TYPE = {name: spec.entity_type for name, spec in TASKS.items() if not spec.ranks}  # one-number heads


def interleaved(calls: dict[str, Callable[..., object]], items: list[tuple], rounds: int,
                graphs: dict[str, int]) -> dict[str, list[float]]:
    """Seconds per round for each strategy, alternating strategies on every item so that load
    from other processes hits all of them alike; graphs compiled meanwhile go to ``graphs``."""
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        spent = dict.fromkeys(calls, 0.0)
        for item in items:
            for name, call in calls.items():
                before, start = compiled_graph_count(), time.perf_counter()
                call(*item)
                spent[name] += time.perf_counter() - start
                graphs[name] = graphs.get(name, 0) + compiled_graph_count() - before
        for name, value in spent.items():
            seconds[name].append(value)
    return seconds


def report(title: str, unit: str, count: int, seconds: dict[str, list[float]],
           graphs: dict[str, int]) -> None:
    base = seconds["none"]
    print(f"\n{title}  ({count} calls per round, {len(base)} rounds; median)")
    for name, times in seconds.items():
        ratio = statistics.median(b / t for b, t in zip(base, times, strict=True))
        print(f"  {name:8s} {count / statistics.median(times):9.1f} {unit}/s   x{ratio:5.2f} vs eager   "
              f"recompiles after warm-up: {graphs.get(name, 0)}")


def bench_training(base: TaskModel, batches: list[ModelInputs], ladder: BucketLadder, rounds: int) -> None:
    items = [(b, random_targets(base.task, b.num_seeds, i)) for i, b in enumerate(batches)]
    steps, losses = {}, {}
    for strategy in STRATEGIES:
        model = copy.deepcopy(base)
        optimizer = tensor_lr_adam(model.parameters(), 1e-3)
        steps[strategy] = TrainStep(model, optimizer, CompileConfig(strategy), ladder)
        losses[strategy] = torch.zeros(())
    for strategy, step in steps.items():  # warm-up: compiles every bucket these batches need
        for item in items:
            losses[strategy] += step(*item)
    graphs: dict[str, int] = {}
    calls = {s: (lambda i, t, s=s: losses[s].add_(steps[s](i, t))) for s in steps}
    seconds = interleaved(calls, items, rounds, graphs)
    title = f"training ({base.task}, {batches[0].num_seeds} seeds, {len(ladder.buckets)} buckets)"
    report(title, "steps", len(batches), seconds, graphs)
    print("  mean loss:", {s: round(float(v) / (len(items) * (rounds + 1)), 4) for s, v in losses.items()})


def bench_inference(base: TaskModel, batches: list[ModelInputs], ladder: BucketLadder, rounds: int) -> None:
    predictors = {s: Predictor(copy.deepcopy(base), CompileConfig(s), ladder) for s in STRATEGIES}
    for predictor in predictors.values():
        for inputs in batches:
            predictor(inputs)
    graphs: dict[str, int] = {}
    seconds = interleaved(predictors, [(b,) for b in batches], rounds, graphs)
    seeds = sorted({b.num_seeds for b in batches})
    title = f"inference ({base.task}, seeds {seeds}, {len(ladder.buckets)} buckets)"
    report(title, "forwards", len(batches), seconds, graphs)
    outs = {s: torch.cat([p(b).reshape(b.num_seeds, -1) for b in batches]) for s, p in predictors.items()}
    print("  max |output - eager|:", {s: float((o - outs["none"]).abs().max()) for s, o in outs.items()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, help="snapshot directory (default: random trees)")
    parser.add_argument("--task", choices=sorted(SEED_TYPE), default=next(iter(SEED_TYPE)))
    parser.add_argument("--train-seeds", type=int, default=512, help="seeds per training batch")
    parser.add_argument("--infer-seeds", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32],
                        help="seeds per inference batch, cycled")
    parser.add_argument("--batches", type=int, default=6, help="training batches per round (x2 inference)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fill", type=float, default=0.7, help="random trees: mean fraction of each fanout")
    parser.add_argument("--factor", type=float, default=2.0, help="size ratio between bucket levels")
    add_threads_option(parser, "torch's default, every core of the machine")
    parser.add_argument("--only", choices=["train", "infer", "start"], help="run one part only")
    args = parser.parse_args(argv)
    if min(args.train_seeds, *args.infer_seeds, args.batches, args.rounds) < 1 or not 0 < args.fill <= 1:
        print("error: seeds, batches and rounds must be positive and 0 < fill <= 1", file=sys.stderr)
        return 2
    if args.data is not None and not (args.data / "meta.json").is_file():
        print(f"error: {args.data} is not a snapshot directory (no meta.json)", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    seed_type = SEED_TYPE[args.task]
    source = BatchSource.open(args.data, seed_type, args.fill)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.task}, data: {source.name}")
    torch.manual_seed(0)
    base = TaskModel(args.task, source.specs, COMPILE_BENCH_MODEL)

    def ladder(sizes: list[int], train: bool) -> BucketLadder:  # fitted on batches apart from the timed
        samples = source.sample(sizes, 99, train)
        return BucketLadder.fitted(samples, source.max_sizes, seed_type, max(sizes), args.factor)

    if args.only in (None, "train"):
        sizes = [args.train_seeds] * args.batches
        bench_training(base, source.sample(sizes, 1, True), ladder(sizes, True), args.rounds)
    if args.only in (None, "infer"):
        sizes = [args.infer_seeds[i % len(args.infer_seeds)] for i in range(args.batches * 2)]
        bench_inference(base, source.sample(sizes, 2, False), ladder(sizes * 2, False), args.rounds)
    if args.only in (None, "start"):
        measure_start(args.task, max(args.infer_seeds), args.factor)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
