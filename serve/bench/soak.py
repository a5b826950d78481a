"""Soak run: the benchmark's load for minutes on loopback, watching every server process's memory.

``python -m serve.bench.soak --artifacts ARTIFACTS --minutes 10`` starts ``python -m serve`` on a copy
of the bundles (snapshot linked, compile caches left out, so nothing in ARTIFACTS is written),
drives every endpoint with closed-loop clients (:func:`serve.bench.load.run_load`, known ids as
in ``serve.bench``), and after a warm-up samples the memory of each server process every few
seconds (:func:`serve.bench.proc.memory`: RSS, its anonymous part, the heap where leaks show, and
PSS). It prints the samples, a per-process table and a JSON summary, and exits 1 if a process grew
by more than both ``--max-growth-mib`` and ``--max-growth-pct``, a process died, a request failed,
or the server did not stop cleanly. Linux only (reads ``/proc``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import threading
import time
from pathlib import Path

from tqdm import tqdm

from models.registry import TASKS
from models.store.snapshot import GraphSnapshot
from serve.bench.cli import finish
from serve.bench.load import LoadResult, run_load
from serve.bench.proc import memory
from serve.bench.process import ServerProcess
from serve.bench.workload import copy_without_compile_cache, request_bodies
from serve.versions.bundles import ArtifactsError, find_bundles

PROG = "python -m serve.bench.soak"


def sample(roles: dict[int, str]) -> dict[str, dict[str, float] | None]:
    """Each process's :func:`serve.bench.proc.memory` by ``role(pid)``."""
    return {f"{role}({pid})": memory(pid) for pid, role in roles.items()}


def drive(url: str, bodies: dict[str, list[dict]], clients: int, seconds: float, warmup_s: float
          ) -> tuple[list[threading.Thread], dict[str, LoadResult]]:
    """Start one closed-loop load per endpoint in the background; results land in the dict."""
    results: dict[str, LoadResult] = {}
    per_task = max(1, clients // len(bodies))

    def one(task: str) -> None:
        results[task] = run_load(url, TASKS[task].path, bodies[task], per_task, seconds, warmup_s)

    threads = [threading.Thread(target=one, args=(task,), daemon=True) for task in bodies]
    for thread in threads:
        thread.start()
    return threads, results


def summarize(samples: list[tuple[float, dict]], results: dict[str, LoadResult], args: argparse.Namespace,
              server_exit: int | None) -> dict:
    first, last = samples[0][1], samples[-1][1]
    processes, passed = [], server_exit == 0
    for name, start in first.items():
        end = last.get(name)
        if start is None or end is None:
            processes.append({"process": name, "died": True})
            passed = False
            continue
        growth = end["rss"] - start["rss"]
        pct = 100.0 * growth / start["rss"]
        grew = growth > args.max_growth_mib and pct > args.max_growth_pct
        passed &= not grew
        processes.append({"process": name, "rss_start_mib": round(start["rss"], 1),
                          "rss_end_mib": round(end["rss"], 1), "growth_mib": round(growth, 1),
                          "growth_pct": round(pct, 2), "anon_start_mib": round(start["anon"], 1),
                          "anon_end_mib": round(end["anon"], 1), "pss_start_mib": round(start["pss"], 1),
                          "pss_end_mib": round(end["pss"], 1), "over_threshold": grew})
    load = {task: r.summary() | {"requests": sum(r.statuses.values())} for task, r in results.items()}
    errors = sum(sum(s["errors"].values()) for s in load.values())
    clients = sum(r.clients for r in results.values())
    return {"minutes": args.minutes, "clients": clients, "warmup_s": args.warmup,
            "sample_every_s": args.every, "requests": sum(s["requests"] for s in load.values()),
            "errors": errors, "load": load, "processes": processes, "server_exit": server_exit,
            "thresholds": {"growth_mib": args.max_growth_mib, "growth_pct": args.max_growth_pct},
            "passed": passed and errors == 0}


def print_report(samples: list[tuple[float, dict]], summary: dict) -> None:
    names = list(samples[0][1])
    print("RSS MiB per process, seconds after warm-up:")
    print(f"{'t_s':>6s} " + " ".join(f"{n:>22s}" for n in names))
    for t, values in samples:
        print(f"{t:6.0f} " + " ".join(f"{values[n]['rss'] if values.get(n) else float('nan'):22.1f}"
                                       for n in names))
    print(f"\n{'process':24s} {'RSS start':>10s} {'RSS end':>10s} {'growth':>9s} {'%':>7s} "
          f"{'anon start':>11s} {'anon end':>9s} {'PSS start':>10s} {'PSS end':>9s}")
    for p in summary["processes"]:
        if p.get("died"):
            print(f"{p['process']:24s} died or was restarted during the soak")
            continue
        print(f"{p['process']:24s} {p['rss_start_mib']:10.1f} {p['rss_end_mib']:10.1f} "
              f"{p['growth_mib']:+9.1f} {p['growth_pct']:+7.2f} {p['anon_start_mib']:11.1f} "
              f"{p['anon_end_mib']:9.1f} {p['pss_start_mib']:10.1f} {p['pss_end_mib']:9.1f}")
    for task, s in summary["load"].items():
        print(f"{task:9s} {s['requests']:8d} requests, {s['rps']:7.1f} req/s, p50 {s['p50_ms']:.1f} ms, "
              f"p99 {s['p99_ms']:.1f} ms, errors {s['errors']}")
    print(json.dumps(summary, indent=2))


def soak(args: argparse.Namespace, scratch: Path) -> dict:
    bundles = find_bundles(args.artifacts)
    tasks = [b.task for b in bundles]
    snapshot = GraphSnapshot.open(bundles[0].snapshot_dir)
    bodies = {task: request_bodies(snapshot, task) for task in tasks}
    artifacts = copy_without_compile_cache(args.artifacts, scratch / "artifacts")
    server = ServerProcess(artifacts, *shlex.split(args.serve_args), log_path=scratch / "serve.log")
    print(f"{PROG}: starting the server (compiles cold) ...", file=sys.stderr, flush=True)
    server.start()
    server_exit = None
    try:
        server.wait_ready(timeout=1800)
        roles = server.roles(tasks)
        measured = args.minutes * 60
        threads, results = drive(server.url, bodies, args.clients, measured, args.warmup)
        time.sleep(args.warmup)
        started, samples = time.monotonic(), []
        steps = int(measured // args.every)
        for step in tqdm(range(steps + 1), desc="soak samples", file=sys.stderr):
            time.sleep(max(0.0, started + step * args.every - time.monotonic()))
            samples.append((time.monotonic() - started, sample(roles)))
        for thread in threads:
            thread.join()
    finally:
        server_exit = server.stop()
    summary = summarize(samples, results, args, server_exit)
    print_report(samples, summary)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--artifacts", type=Path, required=True, help="bundles from python -m training.fit")
    parser.add_argument("--minutes", type=float, default=10.0, help="measured duration (after warm-up)")
    parser.add_argument("--clients", type=int, default=32, help="closed-loop clients, split over endpoints")
    parser.add_argument("--warmup", type=float, default=60.0, metavar="S",
                        help="seconds of load before the first sample")
    parser.add_argument("--every", type=float, default=10.0, metavar="S", help="seconds between samples")
    parser.add_argument("--max-growth-mib", type=float, default=16.0)
    parser.add_argument("--max-growth-pct", type=float, default=5.0)
    parser.add_argument("--serve-args", default="", help="extra python -m serve arguments, one string")
    parser.add_argument("--json", type=Path, default=None, help="also write the summary here")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.clients < 1 or args.warmup < 0 or args.every <= 0:
        parser.exit(2, f"{PROG}: error: --minutes, --clients and --every must be positive\n")
    try:
        with tempfile.TemporaryDirectory(prefix="relserve-soak-") as tmp:
            summary = soak(args, Path(tmp))
    except (ArtifactsError, RuntimeError, TimeoutError) as e:
        parser.exit(1, f"{PROG}: error: {str(e).splitlines()[0]}\n")
    return finish(summary, args.json, passed=summary["passed"])


if __name__ == "__main__":
    sys.exit(main())
