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

``--side-by-side``: instead, in one process, the snapshot, the live graph with ``--rows`` applied and
that live graph compacted into a snapshot (the same rows, rebuilt) answer the same batches, in
blocks of 10 calls, each graph in turn, ``--rounds`` times; per task and batch size the median call
and the median over blocks of live / snapshot and live / compacted (each ratio of two blocks timed
one after the other: wall time, and live / snapshot in CPU time, which other load inflates less);
then the median milliseconds to apply a ``--apply-rows`` batch on top (with ``--before-code``, the
same again with that code).
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
BLOCK = 10  # calls per graph in turn (--side-by-side)


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
    parser.add_argument("--side-by-side", action="store_true",
                        help="snapshot vs live graph in one process, ratios per task and batch size")
    parser.add_argument("--apply-rows", type=int, default=100,
                        help="rows of the batches timed by --side-by-side")
    parser.add_argument("--mode", choices=(*MODES, "side"), default=None, help=argparse.SUPPRESS)
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


def _side_by_side(args) -> dict:
    """Snapshot, compacted snapshot and live graph in this process, alternately on the same batches
    (see the module docstring)."""
    import numpy as np
    import torch

    import models
    from models.runtime.inference import TaskInference
    from models.store.compact import materialize
    from models.store.live import LiveGraph
    from models.store.snapshot import GraphSnapshot

    torch.set_num_threads(args.threads)
    snapshot = GraphSnapshot.open(args.artifacts / "snapshot")
    live = LiveGraph(snapshot)
    _ingest(live, args.rows, args.batch_rows)
    directory = tempfile.TemporaryDirectory()
    materialize(live.view(), Path(directory.name) / "snapshot")  # the same rows, rebuilt
    graphs = {"snapshot": snapshot, "compacted": GraphSnapshot.open(Path(directory.name) / "snapshot"),
              "live": live}
    out: dict = {"latency": {}, "delta_rows": live.delta_edges, "models": str(Path(models.__file__).parent)}
    for task in args.tasks:
        runs = {name: TaskInference.from_bundle(args.artifacts / task, graph, compile=args.compile,
                                                max_batch_size=max(args.batch_sizes))
                for name, graph in graphs.items()}
        for inference in runs.values():
            inference.warm_up()
        generator = torch.Generator().manual_seed(0)
        for size in args.batch_sizes:
            count = snapshot.num_nodes[runs["live"].entity_type]
            entities = [torch.randint(count, (size,), generator=generator) for _ in range(args.calls)]
            # Blocks of BLOCK calls, each graph in turn (its arrays stay in the caches through a
            # block), so every ratio compares two blocks timed under the same load.
            wall: dict[str, list[list[float]]] = {name: [] for name in runs}
            cpu: dict[str, list[list[float]]] = {name: [] for name in runs}
            for entity in entities[:BLOCK]:
                for inference in runs.values():
                    inference.run(entity)
            for _ in range(args.rounds):
                for start in range(0, len(entities), BLOCK):
                    for name, inference in runs.items():
                        times = []
                        for entity in entities[start:start + BLOCK]:
                            started, started_cpu = time.perf_counter(), time.process_time()
                            inference.run(entity)
                            times.append((time.perf_counter() - started, time.process_time() - started_cpu))
                        wall[name].append([w * 1000 for w, _ in times])
                        cpu[name].append([c * 1000 for _, c in times])

            def ratio(times: dict[str, list[list[float]]], base: str) -> float:
                return float(np.median([np.median(a) / np.median(b)
                                        for a, b in zip(times["live"], times[base], strict=True)]))

            medians = [float(np.median(np.concatenate(wall[name]))) for name in graphs]
            out["latency"][f"{task}/{size}"] = [*medians,
                                                ratio(wall, "snapshot"), ratio(wall, "compacted"),
                                                ratio(cpu, "snapshot")]
    directory.cleanup()
    applied = _ingest_more(live, args.apply_rows, 20)
    out["apply_ms"] = [float(np.median([w for w, _ in applied])), float(np.median([c for _, c in applied]))]
    out["apply_at"] = live.delta_edges
    return out


def _ingest_more(graph, rows: int, batches: int) -> list[tuple[float, float]]:
    """Apply ``batches`` more random ``rows``-row batches, all on the next day (a stream within a
    day); each apply's wall and CPU milliseconds."""
    import numpy as np

    from models.store.records import IngestBatch

    rng = np.random.default_rng(1)
    customers, articles = graph.base.ids["customer"], graph.base.ids["article"]
    times, day = [], int(graph.now_day)
    for _ in range(batches):
        batch = IngestBatch(graph.sequence + 1, "transactions", {
            "day": [day] * rows,
            "customer_id": [customers[i].decode() for i in rng.integers(0, len(customers), rows)],
            "article_id": [articles[i].decode() for i in rng.integers(0, len(articles), rows)],
            "price": rng.gamma(2.0, 0.014, rows).tolist()})
        started, started_cpu = time.perf_counter(), time.process_time()
        graph.apply(batch)
        times.append(((time.perf_counter() - started) * 1000, (time.process_time() - started_cpu) * 1000))
    return times


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
    env, cwd = dict(os.environ), None
    if mode in ("before", "before-side"):
        # `python -m` puts the working directory first on sys.path: run from DIR, so that its
        # models/ is the one imported (and this checkout's training/ the next).
        env["PYTHONPATH"] = str(Path.cwd())
        cwd = args.before_code.resolve()
        mode_for_child = "snapshot" if mode == "before" else "side"
    else:
        mode_for_child = mode
    command = [sys.executable, "-m", "training.bench.live_graph", *argv, "--mode", mode_for_child,
               "--artifacts", str(args.artifacts.resolve())]
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{mode}: failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _arguments(argv)
    if args.mode is not None:
        print(json.dumps(_side_by_side(args) if args.mode == "side" else _measure(args)))
        return 0
    if args.side_by_side:
        return _print_side_by_side(args, argv)
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


def _print_side_by_side(args, argv: list[str]) -> int:
    codes = {"this code": _run_mode(args, "side", argv)}
    if args.before_code is not None:
        codes["before"] = _run_mode(args, "before-side", argv)
    print(f"median ms per call ({args.compile}, {args.threads} thread(s), {args.calls} calls x {args.rounds} "
          f"rounds, in blocks of {BLOCK} calls per graph in turn, in one process); ratios: median over "
          "blocks of live / other, wall time (and CPU time)")
    columns = ("snapshot", "compacted", f"live+{args.rows}", "live/snap", "live/compacted", "CPU live/snap")
    for code, result in codes.items():
        print(f"{code} ({result['models']}):")
        print(f"{'task/batch':<14}" + "".join(f"{c:>16}" for c in columns))
        for key, row in result["latency"].items():
            cells = [f"{v:>16.2f}" for v in row[:3]] + [f"{v:>16.3f}" for v in row[3:]]
            print(f"{key:<14}" + "".join(cells))
        wall_ms, cpu_ms = result["apply_ms"]
        print(f"apply a {args.apply_rows}-row batch: {wall_ms:.2f} ms wall, {cpu_ms:.2f} ms CPU (median of "
              f"20, at {result['delta_rows']:,} to {result['apply_at']:,} delta rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
