"""``python -m training.bench.live_graph --artifacts A``: serving latency on a snapshot vs a live graph.

Side by side, per task and batch size, the median and p90 milliseconds of ``TaskInference.run`` on

- ``before``: the snapshot, with the ``models`` package of ``--before-code DIR`` (e.g. an older
  commit's, ``git archive <commit> models | tar -x -C DIR``), when given;
- ``snapshot``: the snapshot, with this code (the base-only path);
- ``live+0``: a live graph over it with nothing applied;
- ``live+N``: a live graph with ``--rows`` transactions applied (random known customers and articles
  on the days after the snapshot, in batches of ``--batch-rows``).

Each mode runs in its own process, ``--rounds`` times interleaved; the table shows the best round's
figures (the machine's other load only ever adds). Then, for the live graph: milliseconds to apply
one batch, to refresh the purchase article keys, and to compact (write the live graph as a
snapshot), and the recompiles counted after the live runs (``--compile buckets``: must be 0).
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

from models.cli import OneLineErrors
from models.registry import TASK_NAMES

MODES = ("before", "snapshot", "live+0", "live+N")


def _arguments(argv: list[str] | None):
    parser = OneLineErrors(prog="python -m training.bench.live_graph", description=__doc__.splitlines()[0])
    parser.add_argument("--artifacts", type=Path, required=True, help="bundles and snapshot/")
    parser.add_argument("--tasks", nargs="+", default=list(TASK_NAMES))
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--calls", type=int, default=100, help="timed calls per task and batch size")
    parser.add_argument("--rows", type=int, default=10_000, help="transactions applied in live+N")
    parser.add_argument("--batch-rows", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compile", choices=["none", "buckets"], default="none")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--before-code", type=Path, default=None, metavar="DIR",
                        help="a directory holding an older models/ package, timed as 'before'")
    parser.add_argument("--mode", choices=MODES, default=None, help=argparse.SUPPRESS)  # one child's mode
    return parser.parse_args(argv)


def _ingest(graph, rows: int, batch_rows: int) -> list[float]:
    """Apply ``rows`` random transactions in batches; returns each apply's milliseconds."""
    import numpy as np

    from models.store.records import IngestBatch

    rng = np.random.default_rng(0)
    base = graph.base
    customers, articles = base.ids["customer"], base.ids["article"]
    seconds = []
    for n, start in enumerate(range(0, rows, batch_rows), start=1):
        size = min(batch_rows, rows - start)
        day = base.max_day + 1 + (start * 7) // max(rows, 1)
        batch = IngestBatch(n, "transactions", {
            "day": [int(day)] * size,
            "customer_id": [customers[i].decode() for i in rng.integers(0, len(customers), size)],
            "article_id": [articles[i].decode() for i in rng.integers(0, len(articles), size)],
            "price": rng.gamma(2.0, 0.014, size).tolist()})
        started = time.perf_counter()
        graph.apply(batch)
        seconds.append((time.perf_counter() - started) * 1000)
    return seconds


def _measure(args) -> dict:
    """One mode in this process: latency per task and batch size, plus the live graph's own costs."""
    import numpy as np
    import torch

    from models.runtime.inference import TaskInference
    from models.store.snapshot import GraphSnapshot

    torch.set_num_threads(args.threads)
    snapshot = GraphSnapshot.open(args.artifacts / "snapshot")
    graph, extra = snapshot, {}
    if args.mode.startswith("live"):
        from models.store.live import LiveGraph

        graph = LiveGraph(snapshot)
        if args.mode == "live+N":
            applied = _ingest(graph, args.rows, args.batch_rows)
            extra["apply_ms"] = float(np.median(applied))
    out: dict = {"latency": {}, **extra}
    for task in args.tasks:
        inference = TaskInference.from_bundle(args.artifacts / task, graph, compile=args.compile,
                                              max_batch_size=max(args.batch_sizes))
        inference.warm_up()
        entity_count = graph.num_nodes[inference.entity_type]
        generator = torch.Generator().manual_seed(0)
        for size in args.batch_sizes:
            batches = [torch.randint(entity_count, (size,), generator=generator) for _ in range(args.calls)]
            for entity in batches[:10]:
                inference.run(entity)
            times = []
            for entity in batches:
                started = time.perf_counter()
                inference.run(entity)
                times.append((time.perf_counter() - started) * 1000)
            out["latency"][f"{task}/{size}"] = [float(np.median(times)), float(np.percentile(times, 90))]
        if args.mode == "live+N":
            out.setdefault("recompiles", {})[task] = inference.recompiles()
            if task == "purchase":
                graph.apply(graph_batch_after(graph))
                started = time.perf_counter()
                inference.refresh_article_keys()
                out["refresh_keys_ms"] = (time.perf_counter() - started) * 1000
    if args.mode == "live+N":
        from models.store.compact import materialize

        with tempfile.TemporaryDirectory() as directory:
            started = time.perf_counter()
            materialize(graph.view(), Path(directory) / "snapshot")
            out["compact_ms"] = (time.perf_counter() - started) * 1000
    return out


def graph_batch_after(graph):
    """One more single-row batch (the keys then go stale)."""
    from models.store.records import IngestBatch

    base = graph.base
    return IngestBatch(graph.sequence + 1, "transactions", {
        "day": [graph.now_day], "customer_id": [base.ids["customer"][0].decode()],
        "article_id": [base.ids["article"][0].decode()], "price": [0.02]})


def _run_mode(args, mode: str, argv: list[str]) -> dict:
    env = dict(os.environ)
    if mode == "before":
        env["PYTHONPATH"] = os.pathsep.join([str(args.before_code), str(Path.cwd())])
        mode_for_child = "snapshot"
    else:
        mode_for_child = mode
    command = [sys.executable, "-m", "training.bench.live_graph", *argv, "--mode", mode_for_child]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{mode}: failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _arguments(argv)
    if args.mode is not None:
        print(json.dumps(_measure(args)))
        return 0
    modes = [m for m in MODES if m != "before" or args.before_code is not None]
    results: dict[str, list[dict]] = {m: [] for m in modes}
    for _ in range(args.rounds):
        for mode in modes:
            results[mode].append(_run_mode(args, mode, argv))
    header = f"{'task/batch':<14}" + "".join(f"{m.replace('N', str(args.rows)):>20}" for m in modes)
    print(f"median / p90 ms per call ({args.compile}, {args.threads} thread(s), "
          f"best of {args.rounds} rounds)")
    print(header)
    for key in results[modes[0]][0]["latency"]:
        cells = []
        for mode in modes:
            median, p90 = min((r["latency"][key] for r in results[mode]), key=lambda v: v[0])
            cells.append(f"{median:>11.2f} / {p90:<6.2f}")
        print(f"{key:<14}" + "".join(cells))
    live = results["live+N"]
    print(f"live graph: apply {min(r['apply_ms'] for r in live):.1f} ms per {args.batch_rows}-row batch "
          f"(median, at up to {args.rows:,} rows); refresh purchase keys "
          f"{min(r.get('refresh_keys_ms', float('nan')) for r in live):.0f} ms; compact "
          f"{min(r['compact_ms'] for r in live):.0f} ms; recompiles {live[0].get('recompiles')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
