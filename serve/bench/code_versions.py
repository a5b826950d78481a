"""Two checkouts of relserve serving the same artifacts, side by side: did a change cost throughput?

``python -m serve.bench.code_versions --artifacts ARTIFACTS --code NEW_DIR --code OLD_DIR`` starts
one server per checkout (``python -m serve`` with ``PYTHONPATH`` set to that checkout and
``PYTHONSAFEPATH`` so that the current directory does not shadow it, both from this virtualenv),
waits until both are ready, then per round drives every task's endpoint with ``--clients``
closed-loop clients for ``--seconds``, one server after the other, the order swapped every round so
that neither always runs first on a machine whose load drifts. Prints each task's req/s and p99 per
round and the ratio of the medians (first checkout / second). Both servers stay up meanwhile; an
idle server costs no CPU (its workers block on their queues).

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
from serve.bench.load import run_load
from serve.bench.process import ServerProcess
from serve.bench.workload import request_bodies
from serve.versions.bundles import ArtifactsError, find_bundles


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m serve.bench.code_versions",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--artifacts", type=Path, required=True)
    parser.add_argument("--code", type=Path, action="append", required=True,
                        help="a checkout to serve from (give it twice: the new one, then the old one)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="measured seconds per task, server and round")
    parser.add_argument("--clients", type=int, default=32)
    add_output_options(parser, server_example="--threads 1")
    args = parser.parse_args(argv)
    if len(args.code) != 2:
        parser.error("give --code exactly twice (the new checkout, then the old one)")
    for code in args.code:
        if not (code / "serve" / "__main__.py").is_file():
            parser.error(f"--code {code}: no serve/__main__.py in it (not a relserve checkout)")
    if args.rounds < 1 or args.seconds <= 0 or args.clients < 1:
        parser.error("--rounds, --seconds and --clients must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        tasks = [b.task for b in find_bundles(args.artifacts)]
    except ArtifactsError as e:
        print(f"python -m serve.bench.code_versions: error: {e}", file=sys.stderr)
        return 2
    names = [f"{i + 1}:{code.resolve().name}" for i, code in enumerate(args.code)]
    servers = {name: ServerProcess(args.artifacts, *args.server_args.split(),
                                   env={"PYTHONPATH": str(code.resolve()), "PYTHONSAFEPATH": "1"})
               for name, code in zip(names, args.code, strict=True)}
    snapshot = GraphSnapshot.open(args.artifacts / "snapshot")
    bodies = {task: request_bodies(snapshot, task) for task in tasks}
    runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for server in servers.values():
        server.start()
    try:
        ready = {name: round(server.wait_ready(timeout=900), 1) for name, server in servers.items()}
        print(f"ready (both starting at once): {ready}", file=sys.stderr, flush=True)
        for round_ in range(args.rounds):
            order = names if round_ % 2 == 0 else names[::-1]
            for task in tasks:
                for name in order:
                    result = run_load(servers[name].url, TASKS[task].path, bodies[task], args.clients,
                                      args.seconds)
                    runs.setdefault((name, task), []).append((result.throughput, result.percentile_ms(99)))
                    print(f"round {round_ + 1} {name} {task}: {result.throughput:.1f} req/s, "
                          f"p99 {result.percentile_ms(99):.1f} ms", file=sys.stderr, flush=True)
    finally:
        for server in servers.values():
            server.stop()
    summary = {"ready_seconds": ready, "tasks": {}}
    print(f"{'task':9s} {'req/s ' + names[0]:>16s} {'req/s ' + names[1]:>16s} {'ratio':>6s} "
          f"{'p99 ms':>14s}")
    for task in tasks:
        rps = [statistics.median(r for r, _ in runs[(name, task)]) for name in names]
        p99 = [statistics.median(p for _, p in runs[(name, task)]) for name in names]
        ratio = rps[0] / max(rps[1], 1e-9)
        summary["tasks"][task] = {"rps_median": dict(zip(names, rps, strict=True)),
                                  "p99_ms_median": dict(zip(names, p99, strict=True)),
                                  "ratio_of_medians": round(ratio, 3)}
        print(f"{task:9s} {rps[0]:16.1f} {rps[1]:16.1f} {ratio:6.3f} {p99[0]:6.1f} / {p99[1]:6.1f}")
    return finish(summary, args.json)


if __name__ == "__main__":
    sys.exit(main())
