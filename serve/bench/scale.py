"""Serving at two data sizes, back to back: time to ready, worker memory, latency and throughput.

``python -m serve.bench.scale --artifacts full=DIR --artifacts demo=DIR`` serves one task at a time
(``--tasks X``, one worker) from each artifacts directory in turn, so every size sees the same
machine load within minutes. Per task and size: ``/health`` 200 cold (bundle compile cache
emptied, empty Inductor cache; that start saves fresh artifacts) and warm (the same copy again,
empty Inductor cache); the worker's ``setup()`` seconds from ``/metrics``; the worker's memory
(:func:`serve.bench.proc.memory`): resident in total, resident pages of the snapshot files (shared
by every process that maps them), the rest (anonymous and other private pages, what each further
worker adds), and PSS; then keep-alive clients for ``--seconds`` at each ``--clients`` level.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from models.registry import TASK_NAMES, TASKS
from models.store.snapshot import GraphSnapshot
from serve.bench.load import run_load
from serve.bench.metrics_read import scrape, series
from serve.bench.proc import memory
from serve.bench.process import ServerProcess
from serve.bench.workload import copy_without_compile_cache, request_bodies
from serve.versions.bundles import ArtifactsError, find_bundles

PROG = "python -m serve.bench.scale"


def setup_seconds(url: str, task: str) -> float | None:
    """``relserve_warmup_seconds`` of ``task`` from ``/metrics`` (the worker's ``setup()``)."""
    return series(scrape(url), "relserve_warmup_seconds").get((("task", task),))


def measure(name: str, artifacts: Path, task: str, clients: list[int], seconds: float, scratch: Path,
            extra: tuple[str, ...]) -> dict:
    """Every number of the module docstring for one task served from ``artifacts``."""
    copy = copy_without_compile_cache(artifacts, scratch / f"{name}-{task}")
    snapshot = GraphSnapshot.open(artifacts / "snapshot")
    bodies = request_bodies(snapshot, task)
    row: dict = {"size": name, "task": task, "transactions": snapshot.num_transactions}
    for start in ("cold", "warm"):
        env = {"TORCHINDUCTOR_CACHE_DIR": str(scratch / f"inductor-{name}-{task}-{start}")}
        server = ServerProcess(copy, "--tasks", task, *extra, env=env,
                               log_path=scratch / f"{name}-{task}-{start}.log")
        with server:
            row[f"ready_{start}_s"] = server.wait_ready(timeout=1800)
            row[f"setup_{start}_s"] = setup_seconds(server.url, task)
            if start == "warm":
                worker = server.worker_pids()[0]
                row["worker_mib"] = memory(worker, artifacts / "snapshot")
                row["load"] = []
                for n in clients:
                    summary = run_load(server.url, TASKS[task].path, bodies, n, seconds).summary()
                    row["load"].append({"clients": n, **summary})
                row["worker_mib_after_load"] = memory(worker, artifacts / "snapshot")
        print(f"  {name} {task} {start}: ready {row[f'ready_{start}_s']:.1f}s", file=sys.stderr, flush=True)
    return row


def report(rows: list[dict]) -> None:
    print(f"{'task':9s} {'size':6s} {'cold s':>7s} {'warm s':>7s} {'setup s':>8s} {'RSS MiB':>8s} "
          f"{'snap MiB':>9s} {'priv MiB':>9s} {'PSS MiB':>8s} {'clients':>7s} {'req/s':>7s} {'p50 ms':>7s} "
          f"{'p99 ms':>7s} {'err':>4s}")
    for row in rows:
        mem = row["worker_mib_after_load"]
        for load in row["load"]:
            print(f"{row['task']:9s} {row['size']:6s} {row['ready_cold_s']:7.1f} {row['ready_warm_s']:7.1f} "
                  f"{row['setup_warm_s'] or 0:8.1f} {mem['rss']:8.0f} {mem['snapshot']:9.0f} "
                  f"{mem['private']:9.0f} {mem['pss']:8.0f} {load['clients']:7d} {load['rps']:7.1f} "
                  f"{load['p50_ms']:7.2f} {load['p99_ms']:7.2f} {sum(load['errors'].values()):4d}")


def _named(value: str) -> tuple[str, Path]:
    name, sep, path = value.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=DIR, got {value!r}")
    return name, Path(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--artifacts", type=_named, action="append", required=True, metavar="NAME=DIR",
                        help="repeat: each artifacts directory, measured in this order per task")
    parser.add_argument("--tasks", default=",".join(TASK_NAMES))
    parser.add_argument("--clients", default="1,32")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("server_args", nargs="*", help="further python -m serve arguments (after --)")
    args = parser.parse_args(argv)
    tasks = [t for t in args.tasks.split(",") if t]
    try:
        for _, artifacts in args.artifacts:
            find_bundles(artifacts, tuple(tasks))
    except ArtifactsError as exc:
        parser.exit(2, f"{PROG}: error: {exc}\n")
    clients = sorted({int(c) for c in args.clients.split(",")})
    rows = []
    with tempfile.TemporaryDirectory(prefix="relserve-scale-") as tmp:
        for task in tasks:
            for name, artifacts in args.artifacts:
                rows.append(measure(name, artifacts, task, clients, args.seconds, Path(tmp),
                                    tuple(args.server_args)))
                if args.json:
                    args.json.write_text(json.dumps(rows, indent=2))
    report(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
