"""``python -m serve.bench --ceiling``: the server against the framework's own ceiling, in one run.

Four servers on loopback: **stock** (``python -m serve.bench.ceiling_server --stock``: LitServe as a new user
writes it, the same three routes and request models, batching 32, ``predict`` answers a constant:
the framework's ceiling the targets are stated against), **noop** (``python -m serve.bench.ceiling_server``:
the same no-model APIs on this server's own LitServe options, loop and transport, so
default / noop is the share the model and the server's own work cost), **default**
(``python -m serve``) and **naive** (``--compile none --max-batch-size 1``). The last three start
side by side (idle ones cost no CPU: their workers block on their queues); stock is started only
for its own runs, because LitServe's stock batched loop spins on its queue when idle.

For each traffic (known ids in the mix of the registry's ``load_share``, the load test's mix, then
each endpoint alone) and each number of clients, every server is driven in turn by
``wrk`` (see :mod:`serve.bench.wrk` for why; without it, :mod:`serve.bench.loop_client`) after an
unmeasured warm-up; the order rotates from
point to point so drift in the machine's load does not favour one server. ``/metrics`` is read
before and after each run of the model servers, giving per task the batches formed, the queueing
delay (API server put to batch start), the model time per batch and the server-side latency; the
CPU time of every process of each server is read from ``/proc`` around each run
(:mod:`serve.bench.cpu`), giving CPU-milliseconds per answered request, which unlike req/s does not
depend on the machine's core count.
Last, with the servers stopped, the model alone runs in this process at the batch sizes the
default server formed. Prints the tables and the ratios the targets are stated in.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from models.registry import TASKS
from models.store.snapshot import GraphSnapshot
from serve.bench.cpu import CpuSample, cpu_report
from serve.bench.loop_client import run_loop_client
from serve.bench.metrics_read import TaskStats, scrape, task_stats
from serve.bench.model import model_throughput
from serve.bench.process import ServerProcess
from serve.bench.workload import mixed, request_bodies
from serve.bench.wrk import WrkResult, have_wrk, run_wrk
from serve.versions.bundles import TaskBundle

SERVERS = {"noop": ("serve.bench.ceiling_server", ()), "default": ("serve", ()),
           "naive": ("serve", ("--compile", "none", "--max-batch-size", "1"))}
STOCK = ("serve.bench.ceiling_server", ("--stock",))
CEILING = "stock"
LIST_SIZE = 100  # ids per request of the lists traffic
MODEL_SERVERS = ("default", "naive")


def as_lists(bodies: list[dict], task: str, size: int) -> list[dict]:
    """``bodies``' ids in lists of ``size`` (``{"customer_ids": [...]}``, with ``k`` where the task ranks)."""
    spec = TASKS[task]
    ids = [b[spec.id_field] for b in bodies]
    extra = {"k": spec.k} if spec.ranks else {}
    return [{f"{spec.id_field}s": ids[i:i + size], **extra} for i in range(0, len(ids) - size + 1, size)]


def traffics(bodies: dict[str, list[dict]], only: list[str]) -> dict[str, list[tuple[str, dict]]]:
    """The traffics named in ``only``: ``mixed``, ``lists`` (the mix with :data:`LIST_SIZE`-id lists)
    and single endpoints, as ``(path, body)`` requests."""
    lists = {t: as_lists(b, t, LIST_SIZE) for t, b in bodies.items()}
    every = ({"mixed": mixed(bodies), "lists": mixed(lists, count=400)}
             | {t: [(TASKS[t].path, b) for b in bodies[t]] for t in bodies})
    return {name: reqs for name, reqs in every.items() if name in only}


def ids_per_request(traffic: str) -> int:
    return LIST_SIZE if traffic == "lists" else 1


def drive(servers: dict[str, ServerProcess], artifacts: Path,
          traffic: dict[str, list[tuple[str, dict]]], clients: list[int], seconds: float,
          scratch: Path, tasks: list[str]) -> tuple[dict, dict, dict]:
    results: dict[tuple[str, int, str], WrkResult] = {}
    stats: dict[tuple[str, int, str], dict[str, TaskStats]] = {}
    cpu: dict[tuple[str, int, str], dict] = {}
    names = [CEILING, *servers]
    point = 0
    load = run_wrk if have_wrk() else run_loop_client
    for name_t, reqs in traffic.items():
        for n in clients:
            order = names[point % len(names):] + names[:point % len(names)]
            point += 1
            for name in order:
                stock = name == CEILING
                server = ServerProcess(artifacts, *STOCK[1], module=STOCK[0],
                                       log_path=scratch / "stock.log") if stock else servers[name]
                if stock:
                    server.start()
                    server.wait_ready(timeout=300)
                try:
                    load(server.url, reqs, n, 2)  # warm-up: connections, caches, batch sizes settle
                    before = scrape(server.url) if name in MODEL_SERVERS else None
                    cpu_before = CpuSample.of(server)
                    result = load(server.url, reqs, n, seconds)
                    spent = CpuSample.of(server).since(cpu_before)
                    if before is not None:
                        stats[(name_t, n, name)] = task_stats(before, scrape(server.url))
                    cpu[(name_t, n, name)] = cpu_report(spent, round(result.rps * result.seconds),
                                                        server.roles(tasks))
                finally:
                    if stock:
                        server.stop()
                results[(name_t, n, name)] = result
                ms = cpu[(name_t, n, name)]["ms_per_request"]
                print(f"  {name_t:8s} {n:3d} clients {name:8s} {result.summary()} CPU {ms:.2f} ms/request",
                      file=sys.stderr, flush=True)
    return results, stats, cpu


def report(results: dict, stats: dict, model: dict[str, dict[int, float]], clients: list[int],
           cpu: dict) -> dict:
    print(f"{'traffic':8s} {'clients':>7s} {'server':8s} {'req/s':>8s} {'p50 ms':>7s} {'p90 ms':>7s} "
          f"{'p99 ms':>7s} {'errors':>6s} {'CPU ms/req':>10s}  avg batch per task")
    for (traffic, n, name), r in results.items():
        batches = stats.get((traffic, n, name), {})
        per_task = " ".join(f"{t} {s.avg_batch:.1f}" for t, s in batches.items() if s.batches)
        print(f"{traffic:8s} {n:7d} {name:8s} {r.rps:8.1f} {r.p50_ms:7.2f} {r.p90_ms:7.2f} {r.p99_ms:7.2f} "
              f"{r.errors:6d} {cpu[(traffic, n, name)]['ms_per_request']:10.2f}  {per_task}")
    top, one = max(clients), min(clients)
    ratios = {}
    print(f"\nratios (same run; ceiling = {CEILING}):")
    for traffic in dict.fromkeys(t for t, _, _ in results):
        d_top, c_top, n_top, o_top = (results.get((traffic, top, s))
                                      for s in ("default", CEILING, "naive", "noop"))
        d_one, c_one = results.get((traffic, one, "default")), results.get((traffic, one, CEILING))
        if not (d_top and c_top and n_top and o_top and d_one and c_one):
            continue
        cpu_d, cpu_c = cpu[(traffic, top, "default")], cpu[(traffic, top, CEILING)]
        ratios[traffic] = {"default_over_ceiling": d_top.rps / c_top.rps,
                           "cpu_per_request_over_ceiling": cpu_d["ms_per_request"] / cpu_c["ms_per_request"],
                           "default_over_noop": d_top.rps / o_top.rps,
                           "default_over_naive": d_top.rps / n_top.rps,
                           "p99_ms": d_top.p99_ms, "ceiling_p99_ms": c_top.p99_ms,
                           "p50_1_client_ms": d_one.p50_ms, "ceiling_p50_1_client_ms": c_one.p50_ms}
        x = ratios[traffic]
        x["cpu_ms_per_prediction"] = cpu_d["ms_per_request"] / ids_per_request(traffic)
        x["ceiling_cpu_ms_per_prediction"] = cpu_c["ms_per_request"] / ids_per_request(traffic)
        if traffic == "lists":  # the single-id targets do not apply; CPU per prediction does
            print(f"  {traffic:8s} {top} clients: {d_top.rps * LIST_SIZE:,.0f} predictions/s, p99 "
                  f"{x['p99_ms']:.1f} ms; CPU per prediction {x['cpu_ms_per_prediction']:.3f} ms "
                  f"(ceiling {x['ceiling_cpu_ms_per_prediction']:.3f}, noop "
                  f"{cpu[(traffic, top, 'noop')]['ms_per_request'] / LIST_SIZE:.3f})")
            continue
        print(f"  {traffic:8s} {top} clients: default/ceiling {x['default_over_ceiling']:.2f} (>= 0.9), "
              f"default/noop {x['default_over_noop']:.2f}, default/naive {x['default_over_naive']:.2f}, "
              f"p99 {x['p99_ms']:.1f} ms (ceiling "
              f"{x['ceiling_p99_ms']:.1f}; target < 50); {one} client p50 {x['p50_1_client_ms']:.2f} ms vs "
              f"ceiling {x['ceiling_p50_1_client_ms']:.2f} (target within 1.5 ms), CPU per request "
              f"{x['cpu_per_request_over_ceiling']:.2f}x the ceiling's (target <= 1.15)")
    print(f"\nCPU ms per answered request by process role ({top} clients; all processes of each server; "
          f"lists: {LIST_SIZE} predictions per request):")
    for (traffic, n, name), c in cpu.items():
        if n == top:
            roles = "  ".join(f"{role} {ms:.2f}" for role, ms in c.get("by_role_ms", {}).items())
            print(f"  {traffic:8s} {name:8s} {c['ms_per_request']:5.2f}  = {roles}")
    print(f"\nwhere the time goes (default, {top} clients; server-side means from /metrics):")
    for (traffic, n, name), per_task in stats.items():
        if name != "default" or n != top:
            continue
        for task, s in per_task.items():
            if s.batches:
                rest = s.server_ms - s.queue_wait_ms - s.model_ms_per_batch
                print(f"  {traffic:8s} {task:9s} batch {s.avg_batch:5.1f}  queue wait {s.queue_wait_ms:6.2f} "
                      "ms "
                      f"(p99 <= {s.queue_wait_p99_ms:.1f})  model {s.model_ms_per_batch:5.2f} ms/batch  "
                      f"server total {s.server_ms:6.2f} ms (p99 <= {s.server_p99_ms:.1f})  "
                      f"rest (API server, transport, decode/encode) {rest:5.2f} ms")
    print("\nmodel alone in this process (1 thread): ms per batch (predictions/s)")
    for task, sizes in model.items():
        print(f"  {task:9s} " + "  ".join(f"batch {b}: {ms:.2f} ms ({b / ms * 1000:,.0f}/s)"
                                           for b, ms in sizes.items()))
    return {"load": [{"traffic": k[0], "server": k[2], **r.summary(), "cpu": cpu[k],
                      "tasks": {t: s.__dict__ for t, s in stats.get(k, {}).items()}}
                     for k, r in results.items()],
            "ratios": ratios, "model_ms_per_batch": model}


def run_ceiling(artifacts: Path, bundles: list[TaskBundle], clients: list[int], seconds: float,
                only: list[str], json_path: Path | None) -> int:
    snapshot = GraphSnapshot.open(bundles[0].snapshot_dir)
    bodies = {b.task: request_bodies(snapshot, b.task, count=1024) for b in bundles}
    traffic = traffics(bodies, only)
    with tempfile.TemporaryDirectory(prefix="relserve-ceiling-") as tmp:
        scratch = Path(tmp)
        servers = {name: ServerProcess(artifacts, *args, module=module, log_path=scratch / f"{name}.log")
                   for name, (module, args) in SERVERS.items()}
        try:
            for server in servers.values():
                server.start()
            started = time.monotonic()
            for server in servers.values():
                server.wait_ready(timeout=900)
            print(f"servers ready after {time.monotonic() - started:.0f} s; driving load ...",
                  file=sys.stderr, flush=True)
            results, stats, cpu = drive(servers, artifacts, traffic, clients, seconds, scratch,
                                        [b.task for b in bundles])
        finally:
            for server in servers.values():
                server.stop()
    formed = {t: s.avg_batch for (_, n, name), per in stats.items() if name == "default" and n == max(clients)
              for t, s in per.items() if s.batches}
    model = model_throughput(bundles, {t: sorted({1, max(1, round(b)), 32}) for t, b in formed.items()})
    summary = report(results, stats, model, clients, cpu)
    if json_path:
        json_path.write_text(json.dumps(summary, indent=2))
    return 0
