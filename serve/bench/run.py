"""Serving benchmark: default (compiled buckets + batching) vs naive (eager, one request per batch).

``python -m serve.bench --artifacts ARTIFACTS`` starts both servers side by side on loopback
(an idle server costs no CPU: its workers block on their queues), then, per endpoint and per
number of concurrent clients, drives one and then the other for the same time, so both see
the same machine load. It also times cold vs warm start-up: ``/health`` 200 from an empty
Inductor cache, first with the bundles' compile caches emptied (cold; that start saves fresh
artifacts) and then again with those artifacts (warm), both on a copy of the bundles. Prints
one table and the ratios the serving targets are stated in.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from models.registry import TASK_NAMES, TASKS
from models.store.snapshot import GraphSnapshot
from serve.bench.ceiling import run_ceiling
from serve.bench.cli import add_output_options, finish
from serve.bench.load import LoadResult, run_load
from serve.bench.process import ServerProcess
from serve.bench.workload import copy_without_compile_cache, request_bodies
from serve.bench.wrk import have_wrk
from serve.versions.bundles import ArtifactsError, find_bundles

CONFIGS = {"default": (), "naive": ("--compile", "none", "--max-batch-size", "1")}


def time_to_ready(artifacts: Path, scratch: Path, name: str) -> float:
    """Seconds from process start to ``/health`` 200, with an empty Inductor cache."""
    env = {"TORCHINDUCTOR_CACHE_DIR": str(scratch / f"inductor-{name}")}
    with ServerProcess(artifacts, env=env, log_path=scratch / f"{name}.log") as server:
        return server.wait_ready(timeout=900)


def drive(servers: dict[str, ServerProcess], bodies: dict[str, list[dict]], clients: list[int],
          seconds: float) -> dict[tuple[str, str, int], LoadResult]:
    results = {}
    for task, task_bodies in bodies.items():
        for n in clients:
            for name, server in servers.items():
                result = run_load(server.url, TASKS[task].path, task_bodies, n, seconds)
                results[(name, task, n)] = result
                if result.ok < sum(result.statuses.values()):
                    tail = "\n".join(server.log().splitlines()[-12:])
                    print(f"  {name} answered errors; its log ends:\n{tail}", file=sys.stderr, flush=True)
                print(f"  {name:8s} {task:9s} {n:3d} clients: {result.summary()}", file=sys.stderr,
                      flush=True)
    return results


def report(results: dict[tuple[str, str, int], LoadResult], ready: dict[str, float],
           clients: list[int]) -> dict:
    print(f"{'config':8s} {'endpoint':9s} {'clients':>7s} {'req/s':>8s} {'p50 ms':>8s} {'p95 ms':>8s} "
          f"{'p99 ms':>8s} {'errors':>6s}")
    for (name, task, n), r in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        s = r.summary()
        print(f"{name:8s} {task:9s} {n:7d} {s['rps']:8.1f} {s['p50_ms']:8.2f} {s['p95_ms']:8.2f} "
              f"{s['p99_ms']:8.2f} {sum(s['errors'].values()):6d}")
    top = max(clients)
    ratios = {task: results[("default", task, top)].throughput
              / max(results[("naive", task, top)].throughput, 1e-9)
              for task in sorted({t for _, t, _ in results})}
    print(f"\nthroughput default / naive at {top} clients (target >= 3x): "
          + ", ".join(f"{t} {v:.2f}x" for t, v in ratios.items()))
    print(f"p99 default at {top} clients (target < 100 ms): "
          + ", ".join(f"{t} {results[('default', t, top)].percentile_ms(99):.1f} ms" for t in ratios))
    speedup = ready["cold"] / ready["warm"]
    print(f"time to ready: cold {ready['cold']:.1f} s, warm {ready['warm']:.1f} s, "
          f"warm is {speedup:.2f}x faster (target >= 3.5x)")
    return {"load": [{"config": k[0], "endpoint": k[1], **r.summary()} for k, r in results.items()],
            "throughput_ratio": ratios, "ready_seconds": ready, "ready_speedup": speedup}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--artifacts", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per point")
    parser.add_argument("--clients", default=None,
                        help="comma-separated concurrency levels (default: 1,8,32; with --ceiling 1,32)")
    add_output_options(parser)
    parser.add_argument("--ceiling", action="store_true",
                        help="compare with the no-model ceiling and naive servers under wrk")
    parser.add_argument("--traffic", default=",".join(("mixed", *TASK_NAMES)),
                        help="with --ceiling: mixed (the registry's load_share mix), lists (the mix with "
                             "100-id lists) and/or single endpoints")
    args = parser.parse_args(argv)
    try:
        levels = args.clients or ("1,32" if args.ceiling else "1,8,32")
        clients = sorted({int(c) for c in levels.split(",")})
        bundles = find_bundles(args.artifacts)
        if args.ceiling and not have_wrk():
            print("no wrk on the PATH: the ceiling's load comes from serve.bench.loop_client (Python, "
                  "more client CPU)", file=sys.stderr)
    except (ValueError, ArtifactsError) as e:
        parser.exit(2, f"{parser.prog}: error: {e}\n")
    if args.ceiling:
        return run_ceiling(args.artifacts, bundles, clients, args.seconds, args.traffic.split(","), args.json)
    snapshot = GraphSnapshot.open(bundles[0].snapshot_dir)
    bodies = {b.task: request_bodies(snapshot, b.task) for b in bundles}
    with tempfile.TemporaryDirectory(prefix="relserve-bench-") as tmp:
        scratch = Path(tmp)
        print("timing cold and warm start-up ...", file=sys.stderr, flush=True)
        artifacts = copy_without_compile_cache(args.artifacts, scratch / "artifacts")
        ready = {"cold": time_to_ready(artifacts, scratch, "cold"),
                 "warm": time_to_ready(artifacts, scratch, "warm")}
        servers = {name: ServerProcess(artifacts, *extra, log_path=scratch / f"{name}-load.log")
                   for name, extra in CONFIGS.items()}
        try:
            for server in servers.values():
                server.start()
            for server in servers.values():
                server.wait_ready(timeout=900)
            print("driving load ...", file=sys.stderr, flush=True)
            results = drive(servers, bodies, clients, args.seconds)
        finally:
            for server in servers.values():
                server.stop()
    return finish(report(results, ready, clients), args.json)


if __name__ == "__main__":
    sys.exit(main())
