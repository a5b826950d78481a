"""``python -m serve.bench.score``: batch-scoring throughput on the first N entities of a task.

Runs exactly what ``python -m serve.score`` runs (warm-up, then :func:`serve.score.run.batches`
with the sampling thread, and the rows built as for the file), without writing, and prints wall
seconds, rows per second, and rows per CPU-second of the whole process (user + system, both
threads): on a shared machine the second figure survives other jobs' load much better than the
first, and ``rows / (CPU-seconds per row x cores)`` bounds the wall time on idle cores.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from models.cli import OneLineErrors, add_threads_option
from models.registry import TASK_NAMES, TASKS
from serve.config import COMPILE_STRATEGIES

PROG = "python -m serve.bench.score"


def default_task() -> str:
    """The costliest rows to score: the first task answering a ranked list (every article scored)."""
    return next(name for name, spec in TASKS.items() if spec.ranks)


def cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def main(argv: list[str] | None = None) -> int:
    p = OneLineErrors(prog=PROG, description="Batch-scoring throughput on the first N entities of a task.")
    p.add_argument("--artifacts", type=Path, required=True)
    p.add_argument("--task", default=default_task(), choices=TASK_NAMES)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--limit", type=int, default=102_400, help="entities scored")
    p.add_argument("--compile", default="buckets", choices=COMPILE_STRATEGIES)
    add_threads_option(p, "every core this process may use")
    a = p.parse_args(argv)
    if not (a.artifacts / a.task).is_dir():
        p.error(f"--artifacts {a.artifacts} has no {a.task}/ bundle")
    import torch

    from models.runtime.inference import TaskInference
    from models.store.snapshot import GraphSnapshot
    from serve.config import available_cores
    from serve.score.run import batches
    from serve.score.tables import TableBuilder

    torch.set_num_threads(a.threads or available_cores())
    snapshot = GraphSnapshot.open(a.artifacts / "snapshot")
    start = time.perf_counter()
    inference = TaskInference.from_bundle(a.artifacts / a.task, snapshot, compile=a.compile,
                                          max_batch_size=a.batch_size, batch_sizes=(a.batch_size,))
    warm = inference.warm_up()
    builder = TableBuilder(a.task, snapshot)
    wall, cpu, rows = time.perf_counter(), cpu_seconds(), 0
    for entity, result in batches(inference, a.batch_size, a.limit):
        builder(entity, result)
        rows += len(entity)
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    report = {"task": a.task, "batch_size": a.batch_size, "compile": a.compile, "rows": rows,
              "entities": snapshot.num_nodes[inference.entity_type], "warmup_s": round(warm.seconds, 1),
              "cache_hit": warm.cache_hit,
              "wall_s": round(wall, 2), "rows_per_s": round(rows / wall), "cpu_s": round(cpu, 2),
              "rows_per_cpu_s": round(rows / cpu), "load_average": os.getloadavg()[0],
              "since_start_s": round(time.perf_counter() - start, 1)}
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
