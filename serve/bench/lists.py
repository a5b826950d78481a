"""``python -m serve.bench.lists``: lists of ids over HTTP against the model's in-process limit, in one run.

One ``python -m serve`` (defaults, or ``--server-args``) answers ``--clients`` closed-loop clients,
each sending ``{"customer_ids": [...]}`` / ``{"article_ids": [...]}`` bodies of ``--size`` known ids
(drawn at random, fixed seed), one task at a time after an unmeasured warm-up. Predictions/s is the
ids answered 200 per second; p50 and p99 are per request. ``/metrics`` before and after each task
gives the forwards run, their mean size and the recompiles (lists are cut into forwards of at most
``--max-batch-size`` ids, so they must stay 0). Then, with the server stopped, the model alone
(:func:`serve.bench.model.model_throughput`, one thread, a full batch of ``--max-batch-size``)
gives the in-process limit, and the ratio of the two is printed per task. The CPU time of every
server process is read from ``/proc`` around each task's run (:mod:`serve.bench.cpu`): CPU ms per
prediction, beside the model alone's ms per prediction at that batch.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from pathlib import Path

import numpy as np

from models.registry import TASKS
from models.store.ids import ids_text
from models.store.snapshot import GraphSnapshot
from serve.bench.cpu import CpuSample, cpu_report
from serve.bench.load import LoadResult, run_requests
from serve.bench.metrics_read import Samples, scrape, value
from serve.bench.model import model_throughput
from serve.bench.process import ServerProcess
from serve.config import ServeConfig
from serve.id_fields import MAX_IDS
from serve.versions.bundles import ArtifactsError, TaskBundle, find_bundles

TARGET = 0.5  # the share of the in-process limit a 100-id list should reach (issue 31)


def list_bodies(snapshot: GraphSnapshot, task: str, size: int, count: int = 64, seed: int = 0) -> list[bytes]:
    """``count`` JSON bodies of ``size`` known ids each for ``task`` (fixed seed)."""
    spec = TASKS[task]
    ids = snapshot.ids[spec.entity_type]
    picks = np.random.default_rng(seed).integers(0, len(ids), size=(count, size))
    extra = {"k": spec.k} if spec.ranks else {}
    return [json.dumps({f"{spec.id_field}s": ids_text(ids[row]), **extra}).encode() for row in picks]


def _forwards(before: Samples, after: Samples, task: str) -> tuple[float, float, float]:
    """Forwards run between two scrapes, their mean ids, and the recompiles counted meanwhile."""
    def delta(name: str) -> float:
        return value(after, name, task=task) - value(before, name, task=task)

    count, ids = delta("relserve_batch_size_count"), delta("relserve_batch_size_sum")
    return count, ids / count if count else 0.0, delta("relserve_recompiles_total")


def drive(server: ServerProcess, bundles: list[TaskBundle], size: int, clients: int,
          seconds: float) -> dict[str, dict]:
    """Per task, the load's figures (predictions/s, p50, p99, forwards, recompiles)."""
    snapshot = GraphSnapshot.open(bundles[0].snapshot_dir)
    out = {}
    for bundle in bundles:
        path = TASKS[bundle.task].path
        requests = [(path, body) for body in list_bodies(snapshot, bundle.task, size)]
        run_requests(server.url, requests, clients, 2.0, warmup_s=0.0)  # connections, batch sizes settle
        before, cpu_before = scrape(server.url), CpuSample.of(server)
        result: LoadResult = run_requests(server.url, requests, clients, seconds)
        spent = CpuSample.of(server).since(cpu_before)
        forwards, mean_ids, recompiles = _forwards(before, scrape(server.url), bundle.task)
        cpu = cpu_report(spent, result.ok * size, server.roles([b.task for b in bundles]))
        out[bundle.task] = {"predictions_per_s": result.throughput * size,
                            "requests_per_s": result.throughput,
                            "p50_ms": result.percentile_ms(50), "p99_ms": result.percentile_ms(99),
                            "errors": sum(n for s, n in result.statuses.items() if s != 200),
                            "forwards": forwards, "ids_per_forward": mean_ids, "recompiles": recompiles,
                            "cpu_ms_per_prediction": cpu["ms_per_request"], "cpu": cpu}
        print(f"  {bundle.task:9s} {result.summary()}", file=sys.stderr, flush=True)
    return out


def report(loads: dict[str, dict], model_ms: dict[str, dict[int, float]], size: int, clients: int,
           batch: int) -> dict:
    print(f"{size}-id lists, {clients} clients, vs the model alone in this process "
          f"(1 thread, batch {batch}):")
    print(f"{'task':9s} {'pred/s':>9s} {'req/s':>7s} {'p50 ms':>8s} {'p99 ms':>8s} {'errors':>6s} "
          f"{'ids/fwd':>7s} {'recomp':>6s} {'model pred/s':>12s} {'ratio':>6s} {'CPU ms/pred':>11s} "
          f"{'model ms/pred':>13s}")
    for task, x in loads.items():
        limit = batch / model_ms[task][batch] * 1000
        x["model_predictions_per_s"], x["ratio"] = limit, x["predictions_per_s"] / limit
        print(f"{task:9s} {x['predictions_per_s']:9,.0f} {x['requests_per_s']:7.1f} {x['p50_ms']:8.1f} "
              f"{x['p99_ms']:8.1f} {x['errors']:6d} {x['ids_per_forward']:7.1f} {x['recompiles']:6.0f} "
              f"{limit:12,.0f} {x['ratio']:6.2f} {x['cpu_ms_per_prediction']:11.3f} {1000 / limit:13.3f}")
    print(f"target: ratio >= {TARGET} (lists over HTTP vs the in-process limit), recompiles 0; CPU ms/pred: "
          "every server process, per id answered")
    return {"size": size, "clients": clients, "batch": batch, "tasks": loads}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve.bench.lists", description=__doc__.split("\n")[0])
    parser.add_argument("--artifacts", type=Path, required=True)
    parser.add_argument("--size", type=int, default=100, help=f"ids per request, 1..{MAX_IDS}")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per task")
    parser.add_argument("--tasks", default="", help="comma-separated tasks (default: every bundle's)")
    parser.add_argument("--max-batch-size", type=int, default=ServeConfig.max_batch_size,
                        help="the server's, and the in-process batch")
    parser.add_argument("--server-args", default="", help="more python -m serve options, e.g. '--threads 1'")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    try:
        if not 1 <= args.size <= MAX_IDS:
            raise ValueError(f"--size must be 1..{MAX_IDS}, got {args.size}")
        bundles = find_bundles(args.artifacts)
        wanted = [t for t in args.tasks.split(",") if t]
        unknown = sorted(set(wanted) - {b.task for b in bundles})
        if unknown:
            raise ValueError(f"--tasks names {', '.join(unknown)}, not served from {args.artifacts}")
        bundles = [b for b in bundles if not wanted or b.task in wanted]
    except (ValueError, ArtifactsError) as e:
        parser.exit(2, f"{parser.prog}: error: {e}\n")
    batch = args.max_batch_size
    with tempfile.TemporaryDirectory(prefix="relserve-lists-") as tmp, \
            ServerProcess(args.artifacts, "--max-batch-size", str(batch), *shlex.split(args.server_args),
                          log_path=Path(tmp) / "serve.log") as server:
        server.wait_ready(timeout=900)
        print("driving load ...", file=sys.stderr, flush=True)
        loads = drive(server, bundles, args.size, args.clients, args.seconds)
    model_ms = model_throughput(bundles, {b.task: [batch] for b in bundles}, max_batch_size=batch)
    summary = report(loads, model_ms, args.size, args.clients, batch)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
