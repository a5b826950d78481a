"""Hot-swap benchmark: how long a new model version takes to load and warm up inside the running
workers, and what a swap does to the latency of the requests answered meanwhile.

``python -m serve.bench.swap --artifacts ARTIFACTS`` copies each task's newest bundle (compile cache
included) into a temporary model repository as version 1 and serves it (``--model-poll 0``: every
swap is an admin call). ``--clients`` closed-loop clients send the registry's mixed traffic: first
``--seconds`` without a swap, then while version 2 of every task (a copy of version 1) is loaded one
task after another with ``POST /admin/models/{task}/load``, then while each task rolls back to
version 1. Prints per task the worker's own load + warm-up time and the admin call's wall time, p50
and p99 of requests started during the swaps against those without, failed requests, and each
worker's anonymous memory before, after the swap and after the rollback. ``--json`` also writes them.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

import numpy as np

from models.runtime.bundle import CACHE_DIR, CONFIG_FILE, METRICS_FILE, WEIGHTS_FILE
from serve.bench.cli import add_output_options, finish, served_mix_or_exit
from serve.bench.proc import memory
from serve.bench.process import ServerProcess
from serve.versions.bundles import TaskBundle

KEY = "bench-swap-key"


class Load:
    """Closed-loop clients over ``requests``; each answer as ``(started, seconds, status, version)``."""

    def __init__(self, url: str, requests: list[tuple[str, bytes]], clients: int) -> None:
        self.url, self.requests, self.clients = url, requests, clients
        self.answers: list[tuple[float, float, int, str | None]] = []
        self._stop, self._lock = threading.Event(), threading.Lock()
        self._threads = [threading.Thread(target=self._client, args=(n * 7919,), daemon=True)
                         for n in range(clients)]

    def _client(self, offset: int) -> None:
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        conn, mine, i = http.client.HTTPConnection(host, int(port), timeout=60), [], offset
        while not self._stop.is_set():
            path, body = self.requests[i % len(self.requests)]
            i += 1
            started = time.perf_counter()
            try:
                conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                response.read()
                status, version = response.status, response.getheader("x-model-version")
            except (OSError, http.client.HTTPException):
                status, version = 0, None
                conn.close()
            mine.append((started, time.perf_counter() - started, status, version))
        conn.close()
        with self._lock:
            self.answers.extend(mine)

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


def latency(answers: list, windows: list[tuple[float, float]] | None = None) -> dict:
    """p50/p99 (ms), count and failures of the answers started inside ``windows`` (all: ``None``)."""
    chosen = [a for a in answers if windows is None or any(lo <= a[0] <= hi for lo, hi in windows)]
    seconds = np.array([a[1] for a in chosen]) * 1000 if chosen else np.array([np.nan])
    statuses = Counter(a[2] for a in chosen)
    return {"requests": len(chosen), "p50_ms": round(float(np.percentile(seconds, 50)), 1),
            "p99_ms": round(float(np.percentile(seconds, 99)), 1),
            "failed": sum(n for status, n in statuses.items() if status != 200)}


def repository(bundles: list[TaskBundle], root: Path) -> Path:
    """Each bundle as version 1 of a fresh repository (the snapshot linked, not copied)."""
    root.mkdir(parents=True)
    (root / "snapshot").symlink_to(bundles[0].snapshot_dir.resolve())
    for bundle in bundles:
        copy_version(bundle.bundle_dir, root / bundle.task / "1")
    return root


def copy_version(source: Path, target: Path) -> None:
    partial = target.with_name(f".{target.name}.partial")
    partial.mkdir(parents=True)
    for name in (CONFIG_FILE, WEIGHTS_FILE, METRICS_FILE):
        if (source / name).exists():
            shutil.copy(source / name, partial / name)
    if (source / CACHE_DIR).is_dir():
        shutil.copytree(source / CACHE_DIR, partial / CACHE_DIR)
    partial.rename(target)


def load_version(server: ServerProcess, task: str, version: int) -> tuple[float, float]:
    """``(wall seconds of the admin call, the worker's load + warm-up seconds)``."""
    request = urllib.request.Request(f"{server.url}/admin/models/{task}/load?version={version}&force=true",
                                     method="POST", headers={"Authorization": f"Bearer {KEY}"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=1200) as response:
        answer = json.loads(response.read())
    wall = time.perf_counter() - started
    if answer.get("outcome") != "serving":
        raise RuntimeError(f"{task} version {version}: {answer}")
    return wall, max(w["swap_seconds"] or 0.0 for w in answer["model"]["workers"])


def worker_memory(server: ServerProcess, tasks: list[str]) -> dict[str, float]:
    return {role.removeprefix("worker:"): round(memory(pid)["anon"], 1)
            for pid, role in server.roles(tasks).items() if role.startswith("worker:")}


def run(server: ServerProcess, root: Path, tasks: list[str], requests: list,
        args: argparse.Namespace) -> dict:
    with Load(server.url, requests, args.clients):
        time.sleep(min(3.0, args.seconds))  # warm-up, unmeasured
    with Load(server.url, requests, args.clients) as steady:
        time.sleep(args.seconds)
    memory_before = worker_memory(server, tasks)
    timings: dict[str, dict] = {task: {} for task in tasks}
    windows: dict[str, list[tuple[float, float]]] = {"swap": [], "rollback": []}
    after_swap = {}
    with Load(server.url, requests, args.clients) as swapping:
        time.sleep(1.0)
        for phase, version in (("swap", 2), ("rollback", 1)):
            for task in tasks:
                if version == 2:
                    copy_version(root / task / "1", root / task / "2")
                started = time.perf_counter()
                timings[task][f"{phase}_wall_s"], timings[task][f"{phase}_load_warm_s"] = (
                    round(x, 2) for x in load_version(server, task, version))
                windows[phase].append((started, time.perf_counter()))
                print(f"{task}: {phase} to version {version} done", file=sys.stderr, flush=True)
            if version == 2:
                after_swap = worker_memory(server, tasks)
        time.sleep(3.0)  # the replaced models' last batches finish and they are freed
    return {"clients": args.clients, "per_task": timings, "without_swap": latency(steady.answers),
            "during_swap": latency(swapping.answers, windows["swap"]),
            "during_rollback": latency(swapping.answers, windows["rollback"]),
            "whole_swap_run": latency(swapping.answers),
            "worker_anon_mib": {"before": memory_before, "after_swap": after_swap,
                                "after_rollback": worker_memory(server, tasks)}}


def report(summary: dict) -> None:
    print(f"{summary['clients']} clients of mixed traffic")
    print(f"{'task':<10}{'swap load+warm s':>18}{'admin call s':>14}{'rollback load+warm s':>22}")
    for task, t in summary["per_task"].items():
        print(f"{task:<10}{t['swap_load_warm_s']:>18}{t['swap_wall_s']:>14}{t['rollback_load_warm_s']:>22}")
    for name in ("without_swap", "during_swap", "during_rollback", "whole_swap_run"):
        s = summary[name]
        print(f"{name:<16} requests {s['requests']:>7}  p50 {s['p50_ms']:>7} ms  p99 {s['p99_ms']:>7} ms  "
              f"failed {s['failed']}")
    print("worker anonymous memory (MiB):", json.dumps(summary["worker_anon_mib"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve.bench.swap", description=__doc__.split("\n")[0])
    parser.add_argument("--artifacts", type=Path, required=True)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds without a swap")
    add_output_options(parser, server_example="--max-batch-size 8")
    args = parser.parse_args(argv)
    bundles, _, requests = served_mix_or_exit(parser, args.artifacts)
    tasks = [b.task for b in bundles]
    with tempfile.TemporaryDirectory(prefix="relserve-bench-swap-") as tmp:
        root = repository(bundles, Path(tmp) / "repository")
        server = ServerProcess(root, "--model-poll", "0", *args.server_args.split(),
                               env={"RELSERVE_WRITE_KEY": KEY}, log_path=Path(tmp) / "serve.log")
        with server:
            print(f"server ready in {server.wait_ready(timeout=1800):.0f} s", file=sys.stderr, flush=True)
            summary = run(server, root, tasks, requests, args)
    report(summary)
    return finish(summary, args.json)


if __name__ == "__main__":
    sys.exit(main())
