"""``python -m training.bench.answer_features --artifacts A``: what a worker's kept temporal features save.

A worker answers every request of a day at one seed time and keeps each node's temporal aggregates
between requests (:class:`models.graph.temporal_cache.TemporalCache`, ``TaskInference.answer_temporal``).
This times ``gather_inputs`` (the feature rows of one request's sampled trees) on the bundle's
snapshot, for a stream of ``--calls`` batches of random entities at the graph's end, three ways on
the same trees, each call in turn:

- ``fresh``: computed for every call (no cache);
- ``cold``: a cache that starts empty and fills as the stream goes (what a worker sees when it never
  warmed up: the first calls pay to keep what they compute);
- ``filled``: a cache filled as ``TaskInference.warm_up`` fills it (every node, or the busiest that fit).

Per task and batch size it prints the median milliseconds of the first and the last ``--window``
calls and the ratio of each cache to ``fresh`` over the same calls (side by side in one process, so
the machine's drift moves all three alike).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

from models.cli import OneLineErrors
from models.graph.features import gather_inputs
from models.graph.temporal_cache import TemporalCache
from models.registry import TASK_NAMES
from models.runtime.inference import ANSWER_TEMPORAL_BYTES, TaskInference
from models.store.snapshot import GraphSnapshot

WAYS = ("fresh", "cold", "filled")


def _arguments(argv: list[str] | None):
    parser = OneLineErrors(prog="python -m training.bench.answer_features",
                           description=__doc__.splitlines()[0])
    parser.add_argument("--artifacts", type=Path, required=True, help="bundles and snapshot/")
    parser.add_argument("--tasks", nargs="+", default=list(TASK_NAMES), choices=list(TASK_NAMES))
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--calls", type=int, default=2000, help="batches per task and batch size")
    parser.add_argument("--window", type=int, default=200, help="calls in the first and last window")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.calls < 2 * args.window or args.window < 1:
        parser.error("--calls must be at least twice --window, and --window positive")
    if not (args.artifacts / "snapshot").is_dir():
        parser.error(f"--artifacts {args.artifacts}: no snapshot/ in it")
    return args


def measure(inference: TaskInference, graph: GraphSnapshot, batch: int, calls: int,
            generator: torch.Generator) -> dict[str, list[float]]:
    """Seconds of ``gather_inputs`` per call, each way (module docstring), on the same trees."""
    count = graph.num_nodes[inference.entity_type]
    caches = {"fresh": None, "cold": TemporalCache(ANSWER_TEMPORAL_BYTES),
              "filled": TemporalCache(ANSWER_TEMPORAL_BYTES)}
    caches["filled"].fill(graph, graph.end_time)
    seconds: dict[str, list[float]] = {way: [] for way in WAYS}
    for _ in range(calls):
        entity = torch.randint(0, count, (batch,), generator=generator)
        seed_time = torch.full_like(entity, graph.end_time)
        trees = inference.sampler.sample(inference.entity_type, entity, seed_time, graph=graph)
        for way in WAYS:
            started = time.perf_counter()
            gather_inputs(graph, trees, caches[way])
            seconds[way].append(time.perf_counter() - started)
    return seconds


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    torch.set_num_threads(args.threads)
    graph = GraphSnapshot.open(args.artifacts / "snapshot")
    generator = torch.Generator().manual_seed(0)
    print(f"gather_inputs, median ms per call ({args.calls} calls, windows of {args.window}, "
          f"{args.threads} thread(s)); cache / fresh on the same calls")
    print(f"{'task/batch':<14}{'calls':>12}{'fresh':>9}{'cold':>9}{'filled':>9}{'cold/fresh':>12}{'filled/fresh':>14}")
    for task in args.tasks:
        inference = TaskInference.from_bundle(args.artifacts / task, graph, compile="none")
        for batch in args.batch_sizes:
            seconds = measure(inference, graph, batch, args.calls, generator)
            for name, window in (("first", slice(0, args.window)), ("last", slice(-args.window, None))):
                ms = {way: statistics.median(seconds[way][window]) * 1e3 for way in WAYS}
                print(f"{f'{task}/{batch}':<14}{name:>12}{ms['fresh']:>9.3f}{ms['cold']:>9.3f}{ms['filled']:>9.3f}"
                      f"{ms['cold'] / ms['fresh']:>12.2f}{ms['filled'] / ms['fresh']:>14.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
