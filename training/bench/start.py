"""Cold vs warm compile of the serving ladder, each in a fresh process with an empty Inductor cache.

Cold compiles every bucket from nothing and saves the compile-cache artifact; warm starts another
fresh process on another empty cache directory, loads only the artifact, and runs the same
buckets. Used by :mod:`training.bench.compile`; the child side is ``python -m training.bench.start``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from models.nn.config import ModelConfig

COMPILE_BENCH_MODEL = ModelConfig(hidden=128, head_hidden=128, embedding_dim=128, aggregation="mean",
                                  log_target=False)
"""The model BENCHMARKS.md's compile figures were measured on: the 128-wide, mean-aggregation shape
that was ``ModelConfig``'s default then; ``python -m training.fit`` trains ``ModelConfig()``."""


def _child(phase: str, task: str, max_seeds: int, factor: float, artifact: Path) -> dict[str, float]:
    import torch

    from models.graph.buckets import empty_inputs
    from models.graph.features import table_specs
    from models.nn.model import TaskModel
    from models.registry import TASKS
    from models.runtime.compile import CompileConfig, Predictor
    from models.runtime.compile_cache import CompileCacheRecorder, load_compile_cache
    from training.bench.random_batches import random_tables, tree_ladder

    seed_type = TASKS[task].entity_type
    tables = random_tables(200, 50)
    torch.manual_seed(0)
    model = TaskModel(task, table_specs(tables), COMPILE_BENCH_MODEL)
    ladder = tree_ladder(seed_type, max_seeds, factor)
    columns = {t: (v.shape[1], tables.numeric[t].shape[1]) for t, v in tables.categorical.items()}
    start = time.perf_counter()
    recorder = CompileCacheRecorder()
    hit = load_compile_cache(artifact, "cpu") if phase == "warm" else False
    predictor = Predictor(model, CompileConfig("buckets"), ladder)
    with torch.inference_mode():
        predictor.forward(empty_inputs(ladder.buckets[0], seed_type, columns))
    first = time.perf_counter() - start
    predictor.warmup(columns)
    total = time.perf_counter() - start
    if phase == "cold":
        recorder.save(artifact, "cpu")
    return {"first_call_s": first, "ladder_s": total, "buckets": len(ladder.buckets), "hit": hit}


def _spawn(phase: str, task: str, max_seeds: int, factor: float, artifact: Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="relserve-inductor-") as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        cmd = [sys.executable, "-m", "training.bench.start", phase, task, str(max_seeds), str(factor),
               str(artifact)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{phase} compile subprocess failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_start(task: str, max_seeds: int, factor: float) -> None:
    """Print cold and warm first-call and full-ladder compile times and their ratios."""
    with tempfile.TemporaryDirectory(prefix="relserve-artifact-") as tmp:
        artifact = Path(tmp) / "compile_cache.bin"
        cold = _spawn("cold", task, max_seeds, factor, artifact)
        size = artifact.stat().st_size if artifact.exists() else 0
        warm = _spawn("warm", task, max_seeds, factor, artifact)
    print(f"\ncompile start, fresh processes, {cold['buckets']} buckets (max {max_seeds} seeds), "
          f"artifact {size / 1e6:.1f} MB, warm hit={warm['hit']}")
    for key, label in (("first_call_s", "first call"), ("ladder_s", "whole ladder")):
        print(f"  {label:12s} cold {cold[key]:7.1f} s   warm {warm[key]:7.1f} s   "
              f"x{cold[key] / warm[key]:5.2f} faster warm")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("phase", choices=["cold", "warm"])
    parser.add_argument("task")
    parser.add_argument("max_seeds", type=int)
    parser.add_argument("factor", type=float)
    parser.add_argument("artifact", type=Path)
    a = parser.parse_args()
    print(json.dumps(_child(a.phase, a.task, a.max_seeds, a.factor, a.artifact)))
