"""What a server costs while nothing happens: CPU per second of each of its processes, without and with
``--state-dir`` (the graph owner, the article-key followers), no traffic, no ingestion.

``python -m serve.bench.idle --artifacts ARTIFACTS`` starts the server each way in turn, waits for
``/health`` and ``--settle`` seconds more (start-up work such as the first key refresh ends), then
reads every process's CPU time from ``/proc`` over ``--seconds``; it prints CPU milliseconds per
second by role and in all, side by side, each way ``--rounds`` times alternated (the median). Being
alive should cost nothing extra: the two totals should be close.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from serve.bench.cli import add_output_options, served_mix_or_exit
from serve.bench.cpu import CpuSample, role_group
from serve.bench.process import ServerProcess

WAYS = ("without --state-dir", "with --state-dir")
KEY = "bench-idle-key"  # RELSERVE_WRITE_KEY: ingestion is on with --state-dir


def idle_cost(artifacts: Path, args: list[str], tasks: list[str], settle_s: float, seconds: float,
              log_path: Path) -> dict[str, float]:
    """CPU ms per second of each role of one idle server started with ``args``, and ``total``."""
    with ServerProcess(artifacts, *args, env={"RELSERVE_WRITE_KEY": KEY}, log_path=log_path) as server:
        server.wait_ready(timeout=900)
        time.sleep(settle_s)
        roles = server.roles(tasks)
        before, started = CpuSample.of(server), time.perf_counter()
        time.sleep(seconds)
        spent, elapsed = CpuSample.of(server).since(before), time.perf_counter() - started
    by_role: dict[str, float] = {}
    for pid, cpu_s in spent.items():
        group = role_group(roles.get(pid, "other"))
        by_role[group] = by_role.get(group, 0.0) + 1000.0 * cpu_s / elapsed
    by_role["total"] = sum(by_role.values())
    return by_role


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve.bench.idle", description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifacts", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=30.0, help="measured seconds per server")
    parser.add_argument("--settle", type=float, default=60.0, help="seconds after /health before measuring")
    parser.add_argument("--rounds", type=int, default=1, help="servers started each way, alternated")
    add_output_options(parser, server_example="--workers-per-task 2")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.seconds <= 0 or args.settle < 0:
        parser.error("--rounds must be at least 1, --seconds positive and --settle not negative")
    bundles = served_mix_or_exit(parser, args.artifacts)[0]
    tasks = [b.task for b in bundles]
    runs: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory(prefix="relserve-bench-idle-") as tmp:
        for r in range(args.rounds):
            for way in WAYS:
                extra = ["--state-dir", str(Path(tmp) / f"state{r}")] if way == WAYS[1] else []
                runs[way].append(idle_cost(args.artifacts, [*args.server_args.split(), *extra], tasks,
                                           args.settle, args.seconds, Path(tmp) / "serve.log"))
    medians = {way: {role: statistics.median(run.get(role, 0.0) for run in found)
                     for role in sorted({r for run in found for r in run})} for way, found in runs.items()}
    print(f"\nidle CPU, ms per second (median of {args.rounds} server(s) each way, {args.seconds:g} s each)")
    print(f"{'role':16s} {WAYS[0]:>20s} {WAYS[1]:>18s}")
    for role in sorted(set(medians[WAYS[0]]) | set(medians[WAYS[1]]), key=lambda r: (r == "total", r)):
        print(f"{role:16s} {medians[WAYS[0]].get(role, 0.0):20.1f} {medians[WAYS[1]].get(role, 0.0):18.1f}")
    if args.json:
        args.json.write_text(json.dumps({"medians": medians, "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
