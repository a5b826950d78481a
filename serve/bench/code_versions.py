"""Two checkouts of relserve serving the same artifacts, side by side: did a change cost throughput?

``python -m serve.bench.code_versions --artifacts ARTIFACTS --code NEW_DIR --code OLD_DIR`` starts
one server per checkout (``python -m serve`` with ``PYTHONPATH`` set to that checkout and
``PYTHONSAFEPATH`` so that the current directory does not shadow it, both from this virtualenv).
First it times each server's start to ready alone, ``--ready-rounds`` times in alternating order;
then it starts both, and per round drives every task's endpoint with ``--clients`` closed-loop
clients for ``--seconds``, one server after the other, the order swapped every round so that
neither always runs first on a machine whose load drifts. Prints each task's req/s and p99 per
round, the ratio of the medians (first checkout / second) and the median of the rounds' ratios
(each round's two runs back to back), and the same for the CPU milliseconds the server's processes
spent per answered request (steadier than req/s on a shared machine). Both servers stay up
meanwhile; an idle server costs no CPU (its workers block on their queues).

When a change altered the bundle format, no artifacts serve on both checkouts: give
``--artifacts`` twice, each checkout's own (trained by the same command from the same data), in
the order of ``--code``.

A checkout is a directory holding the ``serve``, ``models`` and ``training`` packages, e.g. ``git
worktree add /tmp/old COMMIT``; its dependencies must be those of this virtualenv.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from models.registry import TASKS
from models.store.snapshot import GraphSnapshot
from serve.bench.cli import add_output_options, finish
from serve.bench.cpu import CpuSample, cpu_report
from serve.bench.load import run_load
from serve.bench.process import ServerProcess
from serve.bench.workload import request_bodies
from serve.versions.bundles import ArtifactsError, find_bundles


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m serve.bench.code_versions",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--artifacts", type=Path, action="append", required=True,
                        help="the artifacts both serve, or give it twice: each checkout's own")
    parser.add_argument("--code", type=Path, action="append", required=True,
                        help="a checkout to serve from (give it twice: the new one, then the old one)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="measured seconds per task, server and round")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--ready-rounds", type=int, default=3,
                        help="times each server is started alone and timed to ready (0: skip)")
    add_output_options(parser, server_example="--threads 1")
    args = parser.parse_args(argv)
    if len(args.code) != 2:
        parser.error("give --code exactly twice (the new checkout, then the old one)")
    if len(args.artifacts) not in (1, 2):
        parser.error("give --artifacts once (both serve it) or twice (each checkout's own)")
    args.artifacts = args.artifacts * (2 // len(args.artifacts))
    for code in args.code:
        if not (code / "serve" / "__main__.py").is_file():
            parser.error(f"--code {code}: no serve/__main__.py in it (not a relserve checkout)")
    if args.rounds < 1 or args.seconds <= 0 or args.clients < 1 or args.ready_rounds < 0:
        parser.error("--rounds, --seconds and --clients must be positive, --ready-rounds not negative")
    return args


def time_to_ready(servers: dict[str, ServerProcess], rounds: int) -> dict[str, list[float]]:
    """Each server's seconds from start to ready with the other stopped, in alternating order."""
    names = list(servers)
    ready: dict[str, list[float]] = {name: [] for name in names} if rounds else {}
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            servers[name].start()
            try:
                ready[name].append(round(servers[name].wait_ready(timeout=900), 2))
            finally:
                servers[name].stop()
            print(f"ready alone, round {round_ + 1} {name}: {ready[name][-1]} s", file=sys.stderr,
                  flush=True)
    return ready


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        task_lists = [[b.task for b in find_bundles(artifacts)] for artifacts in args.artifacts]
    except ArtifactsError as e:
        print(f"python -m serve.bench.code_versions: error: {e}", file=sys.stderr)
        return 2
    tasks = [task for task in task_lists[0] if task in task_lists[1]]
    names = [f"{i + 1}:{code.resolve().name}" for i, code in enumerate(args.code)]
    servers = {name: ServerProcess(artifacts, *args.server_args.split(),
                                   env={"PYTHONPATH": str(code.resolve()), "PYTHONSAFEPATH": "1"})
               for name, code, artifacts in zip(names, args.code, args.artifacts, strict=True)}
    bodies = {name: {task: request_bodies(GraphSnapshot.open(artifacts / "snapshot"), task)
                     for task in tasks}
              for name, artifacts in zip(names, args.artifacts, strict=True)}
    ready = time_to_ready(servers, args.ready_rounds)
    runs: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for server in servers.values():
        server.start()
    try:
        both = {name: round(server.wait_ready(timeout=900), 1) for name, server in servers.items()}
        print(f"ready (both starting at once): {both}", file=sys.stderr, flush=True)
        for round_ in range(args.rounds):
            order = names if round_ % 2 == 0 else names[::-1]
            for task in tasks:
                for name in order:
                    before = CpuSample.of(servers[name])
                    result = run_load(servers[name].url, TASKS[task].path, bodies[name][task],
                                      args.clients, args.seconds)
                    spent = CpuSample.of(servers[name]).since(before)
                    cpu_ms = cpu_report(spent, result.ok)["ms_per_request"]
                    runs.setdefault((name, task), []).append(
                        (result.throughput, result.percentile_ms(99), cpu_ms))
                    print(f"round {round_ + 1} {name} {task}: {result.throughput:.1f} req/s, "
                          f"p99 {result.percentile_ms(99):.1f} ms, {cpu_ms:.3f} CPU ms per request",
                          file=sys.stderr, flush=True)
    finally:
        for server in servers.values():
            server.stop()
    summary = {"ready_seconds_alone": ready, "ready_seconds_both_at_once": both, "tasks": {}}
    if ready:
        medians = [statistics.median(ready[name]) for name in names]
        print(f"ready alone, median of {args.ready_rounds}: {medians[0]:.1f} s / {medians[1]:.1f} s "
              f"(ratio {medians[0] / medians[1]:.3f})")
    print(f"{'task':9s} {'req/s ' + names[0]:>16s} {'req/s ' + names[1]:>16s} {'ratio':>6s} "
          f"{'paired':>6s} {'p99 ms':>15s} {'CPU ms/request':>15s} {'paired':>6s}")
    for task in tasks:
        one, two = runs[(names[0], task)], runs[(names[1], task)]
        rps, p99, cpu = ([statistics.median(run[i] for run in kept) for kept in (one, two)] for i in range(3))
        ratio = rps[0] / max(rps[1], 1e-9)
        # Each round's two runs back to back: their ratio cancels the machine's slower drift.
        paired = statistics.median(a[0] / max(b[0], 1e-9) for a, b in zip(one, two, strict=True))
        paired_cpu = statistics.median(a[2] / max(b[2], 1e-9) for a, b in zip(one, two, strict=True))
        summary["tasks"][task] = {"rps_median": dict(zip(names, rps, strict=True)),
                                  "p99_ms_median": dict(zip(names, p99, strict=True)),
                                  "cpu_ms_per_request_median": dict(zip(names, cpu, strict=True)),
                                  "ratio_of_medians": round(ratio, 3),
                                  "median_of_round_ratios": round(paired, 3),
                                  "cpu_median_of_round_ratios": round(paired_cpu, 3)}
        print(f"{task:9s} {rps[0]:16.1f} {rps[1]:16.1f} {ratio:6.3f} {paired:6.3f} "
              f"{p99[0]:6.1f} / {p99[1]:6.1f} {cpu[0]:6.3f} / {cpu[1]:6.3f} {paired_cpu:6.3f}")
    return finish(summary, args.json)


if __name__ == "__main__":
    sys.exit(main())
