"""``python -m training.bench.untrained``: bundles with the recipes' shapes but initial weights.

Serving cost (time to ready, memory, latency, throughput) depends on the model's shape, the
bucket ladder and the snapshot, not on the values of the weights. At H&M size a real training run
takes tens of minutes per task; this writes a servable bundle of every task in a minute, so the
serving benchmarks can run on full-size data before (or without) a training. The bundles record
``"training": {"untrained": true}`` and have no ``metrics.json``: never serve them for answers.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from models.cli import OneLineErrors
from models.feature_definitions import snapshot_schema
from models.graph.features import table_specs
from models.graph.sampler import SamplerConfig, TemporalSampler
from models.nn.model import TaskModel
from models.registry import TASKS
from models.runtime.bundle import SNAPSHOT_DIR, BundleConfig, save_bundle
from models.runtime.inference import fitted_ladder
from models.store.snapshot import GraphSnapshot, SnapshotError
from training.fit.config import RECIPES

PROG = "python -m training.bench.untrained"


def write_untrained(snapshot: GraphSnapshot, out: Path, task: str, max_batch_size: int = 32,
                    seed: int = 0) -> Path:
    """Write ``out/<task>/``: the task's recipe model with its initial weights and a fitted ladder."""
    recipe = RECIPES[task]
    torch.manual_seed(seed)
    model = TaskModel(task, table_specs(snapshot), recipe.model_config()).eval()
    sampler = TemporalSampler(snapshot, SamplerConfig(recipe.fanouts, "last", recipe.per_day))
    entity_type = TASKS[task].entity_type
    ladder = fitted_ladder(snapshot, sampler, entity_type, max_batch_size, seed)
    config = BundleConfig(task=task, model=model.config, sampler=sampler.config, specs=table_specs(snapshot),
                          ladders={entity_type: ladder}, max_batch_size=max_batch_size,
                          fingerprint=snapshot.fingerprint, snapshot_schema=snapshot_schema(snapshot),
                          training={"untrained": True, "seed": seed})
    save_bundle(out / task, config, model)
    return out / task


def main(argv: list[str] | None = None) -> int:
    parser = OneLineErrors(prog=PROG, description=__doc__.splitlines()[0].split(": ", 1)[1])
    parser.add_argument("--artifacts", type=Path, required=True,
                        help=f"directory holding {SNAPSHOT_DIR}/; the bundles are written beside it")
    parser.add_argument("--tasks", default=",".join(TASKS), help="comma-separated (default: all)")
    parser.add_argument("--max-batch-size", type=int, default=32)
    args = parser.parse_args(argv)
    tasks = [t for t in args.tasks.split(",") if t]
    unknown = sorted(set(tasks) - set(TASKS))
    if unknown or not tasks:
        parser.error(f"--tasks: unknown {', '.join(unknown) or '(none given)'}; "
                     f"choose from {', '.join(TASKS)}")
    try:
        snapshot = GraphSnapshot.open(args.artifacts / SNAPSHOT_DIR)
    except SnapshotError as exc:
        parser.exit(1, f"{PROG}: error: {exc}\n")
    for task in tasks:
        started = time.perf_counter()
        path = write_untrained(snapshot, args.artifacts, task, args.max_batch_size)
        print(f"{path}: untrained {task} bundle in {time.perf_counter() - started:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
