"""Ingestion benchmark: prediction throughput with and without a steady stream of ingestion, and the
ingest-to-visible lag.

``python -m serve.bench.ingest --artifacts ARTIFACTS`` starts one server with ``--state-dir`` (a
temporary one) and drives ``--clients`` closed-loop clients with the registry's mixed traffic, alone
and while an ingester posts ``--rows-per-second`` transaction rows in batches of ``--batch-rows``
(known customers and articles, dated the day after the snapshot). Each of ``--rounds`` rounds gives
one ratio, of ``--seconds`` of traffic of each kind, cut into ``--alternations`` runs of each kind
taken in turn (alone then ingesting, ingesting then alone, ...): the 2-core machines this runs on
change speed by a fifth from one minute to the next (other tenants), and runs of 20 s taken one
after the other spread a round's ratio from 0.65 to 1.05; short runs in alternating order slow
both kinds alike. The headline is the median of the rounds' ratios (the pooled one beside it).

Before the rounds, ``--warmup`` seconds of the same traffic (default ``2 x --seconds``), half of it
alone and half ingesting, and on while the graph owner still compiles the article keys' forward (its
one-off work when batches first stream in): a compile running into the first round slowed its runs
without ingestion. A watcher polls ``GET /ingest/status`` every ``--watch-poll`` (10 ms) in runs of
both kinds, so its own load costs both alike: a batch's lag is from the moment its POST was sent to
the first poll at which the owner has published a version holding it (every answer reads it from
then on), and its keyed lag to the first poll at which the owner's published article keys cover
it too (what ``?sync=true`` waits for). After each run with ingestion, 2 s unmeasured let its last
batches become visible.

Prints one table; ``--json`` also writes the numbers. The target: throughput with ingestion within
10 % of without, lag p99 under 1 s. Where the CPU went: each server process's (by role) and the
benchmark's own (clients, ingester, watcher) CPU seconds per second of each kind of run, from
``/proc``, beside the whole machine's busy and idle cores (kernel threads and other jobs included),
over the seconds the traffic ran; and how many graph versions and key refreshes the owner made per
second while ingesting.
"""

from __future__ import annotations

import argparse
import functools
import http.client
import json
import resource
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

from models.schema import ARTICLE, CUSTOMER, day_to_date
from models.store.ids import ids_text
from models.store.snapshot import GraphSnapshot
from serve.bench.cli import add_output_options, finish, served_mix_or_exit
from serve.bench.load import LoadResult, run_requests
from serve.bench.metrics_read import scrape, series, value
from serve.bench.proc import cpu_seconds, machine_cpu_seconds
from serve.bench.process import ServerProcess

KEY = "bench-ingest-key"
WALL = "wall"  # the key of the wall-clock seconds among the CPU seconds of cpu_by_role
MACHINE_BUSY, MACHINE_IDLE = "machine: busy", "machine: idle"  # every process and kernel thread
TAIL_S = 2.0  # after each run with ingestion, unmeasured: its last batches become visible
COMPILE_TIMEOUT_S = 300.0  # the longest the warm-up waits for the owner's key compile
AUTH = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}


def connect(url: str) -> http.client.HTTPConnection:
    """A connection to the server at ``url`` (``http://host:port``)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return http.client.HTTPConnection(host, int(port), timeout=30)


class Ingester:
    """Posts batches at a steady rate and records when each was sent and which sequence it got."""

    def __init__(self, url: str, snapshot: GraphSnapshot, rows_per_second: float, batch_rows: int) -> None:
        self.url = url
        self.interval = batch_rows / rows_per_second
        rng = np.random.default_rng(0)
        customers = ids_text(snapshot.ids[CUSTOMER][rng.integers(0, snapshot.num_nodes[CUSTOMER], 4096)])
        articles = ids_text(snapshot.ids[ARTICLE][rng.integers(0, snapshot.num_nodes[ARTICLE], 4096)])
        day = day_to_date(snapshot.max_day + 1).isoformat()
        self.bodies = [json.dumps({"rows": [
            {"t_dat": day, "customer_id": customers[(b * batch_rows + r) % 4096],
             "article_id": articles[(b * 31 + r) % 4096], "price": 0.01 + r * 1e-5, "sales_channel_id": 2}
            for r in range(batch_rows)]}).encode() for b in range(64)]
        self.batch_rows = batch_rows
        self.sent: dict[int, float] = {}  # sequence -> when its POST was sent
        self.statuses: Counter = Counter()
        self.stop = threading.Event()

    def run(self) -> None:
        conn = connect(self.url)
        next_at, n = time.perf_counter(), 0
        while not self.stop.is_set():
            next_at += self.interval
            sent = time.perf_counter()
            conn.request("POST", "/ingest/transactions", body=self.bodies[n % len(self.bodies)], headers=AUTH)
            response = conn.getresponse()
            answer = response.read()
            self.statuses[response.status] += 1
            if response.status == 200:
                self.sent[json.loads(answer)["sequence"]] = sent
            n += 1
            time.sleep(max(0.0, next_at - time.perf_counter()))
        conn.close()


FIELDS = {"applied": "applied_sequence", "keyed": "visible_sequence"}


def watch(url: str, stop: threading.Event, seen: dict[str, dict[int, float]], poll_s: float = 0.01) -> None:
    """Record when each sequence was first in every worker's graph (``seen["applied"]``) and first
    served with article keys that cover it (``seen["keyed"]``)."""
    conn, last = connect(url), dict.fromkeys(FIELDS, 0)
    while not stop.is_set():
        conn.request("GET", "/ingest/status", headers=AUTH)
        status = json.loads(conn.getresponse().read())
        now = time.perf_counter()
        for name, field in FIELDS.items():
            for sequence in range(last[name] + 1, status[field] + 1):
                seen[name].setdefault(sequence, now)
            last[name] = max(last[name], status[field])
        time.sleep(poll_s)
    conn.close()


def compiles_running(url: str) -> int:
    """How many of the graph owner's key-forward compiles have started and not ended."""
    running = 0
    for labels, count in series(scrape(url), "relserve_article_key_compiles_total").items():
        outcome = dict(labels).get("outcome")
        running += int(count) if outcome == "started" else -int(count)
    return running


def graph_version(url: str) -> int:
    """The number of the graph owner's current published version (``GET /ingest/status``)."""
    conn = connect(url)
    try:
        conn.request("GET", "/ingest/status", headers=AUTH)
        graph = json.loads(conn.getresponse().read())["graph"]
    finally:
        conn.close()
    return int(graph["version"]) if graph else 0


def warm_up(server: ServerProcess, ingester: Ingester, requests: list[tuple[str, bytes]], clients: int,
            seconds: float, compile_timeout_s: float = COMPILE_TIMEOUT_S) -> None:
    """The traffic for ``seconds``: the first half alone, the second while ``ingester`` posts, and on
    while the graph owner still compiles the article keys' forward (one-off start-up work: a compile
    running into the first round slowed its run without ingestion); forgotten after (the lags count
    from the first round)."""
    run_requests(server.url, requests, clients, seconds / 2, warmup_s=0.0)
    posting = threading.Thread(target=ingester.run, daemon=True)
    posting.start()
    run_requests(server.url, requests, clients, seconds / 2, warmup_s=0.0)
    waited = 0.0
    while compiles_running(server.url) > 0 and waited < compile_timeout_s:
        if waited == 0.0:
            print("warm-up: the graph owner is still compiling the article keys' forward; waiting ...",
                  file=sys.stderr, flush=True)
        run_requests(server.url, requests, clients, 5.0, warmup_s=0.0)
        waited += 5.0
    if waited >= compile_timeout_s:
        print(f"warm-up: the key compile did not end within {compile_timeout_s:.0f} s; measuring anyway",
              file=sys.stderr, flush=True)
    ingester.stop.set()
    posting.join(30)
    ingester.sent.clear()
    ingester.statuses.clear()


def watched_run(server: ServerProcess, ingester: Ingester | None, requests: list[tuple[str, bytes]],
                args: argparse.Namespace, seen: dict[str, dict[int, float]],
                measure: Callable[[], dict[str, float]],
                seconds: float) -> tuple[LoadResult, dict[str, float]]:
    """The mixed traffic for ``seconds`` under the lag watcher, with ``ingester`` posting
    meanwhile (``None``: the run without ingestion, watched alike); returns its result and what
    ``measure()`` read as the traffic ended (before the wait for the last batches, so that the CPU
    figures cover the seconds the throughput does)."""
    stop = threading.Event()
    threads = [threading.Thread(target=watch, args=(server.url, stop, seen, args.watch_poll), daemon=True)]
    if ingester is not None:
        ingester.stop.clear()
        threads.append(threading.Thread(target=ingester.run, daemon=True))
    for thread in threads:
        thread.start()
    result = run_requests(server.url, requests, args.clients, seconds, warmup_s=0.0)
    at_end = measure()
    if ingester is not None:
        ingester.stop.set()
        time.sleep(TAIL_S)  # the last batches become visible
    stop.set()
    for thread in threads:
        thread.join(30)
    return result, at_end


def cpu_by_role(server: ServerProcess, tasks: list[str]) -> dict[str, float]:
    """CPU seconds (user + system) so far of each server process by role, and of this process."""
    cpu: dict[str, float] = Counter()
    for pid, role in server.roles(tasks).items():
        try:
            cpu[role] += cpu_seconds(pid)
        except OSError:  # gone meanwhile
            continue
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu["benchmark (clients)"] = usage.ru_utime + usage.ru_stime
    cpu[MACHINE_BUSY], cpu[MACHINE_IDLE] = machine_cpu_seconds()
    cpu[WALL] = time.perf_counter()
    return dict(cpu)


def add_cpu(total: dict[str, float], before: dict[str, float], after: dict[str, float]) -> None:
    for role, seconds in after.items():
        total[role] = total.get(role, 0.0) + seconds - before.get(role, seconds)


def merge(total: LoadResult, part: LoadResult) -> None:
    total.seconds += part.seconds
    total.latencies_s.extend(part.latencies_s)
    total.statuses.update(part.statuses)


def percentiles(lags_ms: np.ndarray) -> dict[str, float | None]:
    """p50, p99 and max of ``lags_ms``, rounded (``None`` when nothing became visible)."""
    return {q: round(float(np.percentile(lags_ms, p)), 1) if len(lags_ms) else None
            for q, p in (("p50", 50), ("p99", 99), ("max", 100))}


def report(alone: LoadResult, loaded: LoadResult, ingester: Ingester, seen: dict[str, dict[int, float]],
           seconds: float, server_lag: dict[str, float | None], cpu: dict[str, dict[str, float]],
           round_ratios: list[float]) -> dict:
    lags = {name: np.array([at[s] - t for s, t in ingester.sent.items() if s in at]) * 1000
            for name, at in seen.items()}
    rows = sum(ingester.statuses.values()) * ingester.batch_rows
    ratio = loaded.throughput / max(alone.throughput, 1e-9)
    median = float(np.median(round_ratios))
    summary = {"without_ingestion": alone.summary(), "with_ingestion": loaded.summary(),
               "throughput_ratio_median": round(median, 3), "throughput_ratio_pooled": round(ratio, 3),
               "round_ratios": [round(r, 3) for r in round_ratios],
               "ingest": {"rows_per_second": round(rows / seconds, 1), "statuses": dict(ingester.statuses),
                          "batches_acknowledged": len(ingester.sent),
                          "never_visible": len(ingester.sent) - len(lags["applied"]),
                          "never_keyed": len(ingester.sent) - len(lags["keyed"])},
               "lag_ms": percentiles(lags["applied"]), "keyed_lag_ms": percentiles(lags["keyed"]),
               "server_lag_seconds_mean": server_lag,
               "cpu_cores": {phase: {role: round(s / max(c[WALL], 1e-9), 3) for role, s in sorted(c.items())
                                     if role != WALL} for phase, c in cpu.items()}}
    print(f"{'traffic':18s} {'req/s':>8s} {'p50 ms':>8s} {'p99 ms':>8s} {'errors':>6s}")
    for name, result in (("mixed", alone), ("mixed + ingestion", loaded)):
        s = result.summary()
        errors = sum(s["errors"].values())
        print(f"{name:18s} {s['rps']:8.1f} {s['p50_ms']:8.2f} {s['p99_ms']:8.2f} {errors:6d}")
    rounds = ", ".join(f"{r:.3f}" for r in round_ratios)
    print(f"\ningested {summary['ingest']['rows_per_second']} rows/s; throughput with / without ingestion: "
          f"median of the rounds {median:.3f} (target >= 0.90; rounds {rounds}; pooled {ratio:.3f});\n"
          f"ingest-to-visible lag p50 {summary['lag_ms']['p50']} ms, "
          f"p99 {summary['lag_ms']['p99']} ms (target < 1000 ms); with the purchase article keys "
          f"p50 {summary['keyed_lag_ms']['p50']} ms, p99 {summary['keyed_lag_ms']['p99']} ms")
    rates = [f"{v} {k.removesuffix(' per s')}/s" for k, v in server_lag.items() if k.endswith(" per s")]
    print("while ingesting: " + ", ".join(rates))
    alone_cpu, loaded_cpu = summary["cpu_cores"].values()
    print(f"\n{'CPU (cores)':24s} {'alone':>7s} {'+ingest':>7s}")
    for role in sorted(set(alone_cpu) | set(loaded_cpu)):
        print(f"{role:24s} {alone_cpu.get(role, 0.0):7.3f} {loaded_cpu.get(role, 0.0):7.3f}")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve.bench.ingest", description=__doc__.split("\n")[0])
    parser.add_argument("--artifacts", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per run")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--rows-per-second", type=float, default=1000.0)
    parser.add_argument("--batch-rows", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds, each giving one ratio (their median is the headline)")
    parser.add_argument("--alternations", type=int, default=4,
                        help="runs of each kind in a round, --seconds / N long each, alternated")
    parser.add_argument("--warmup", type=float, default=None, metavar="S",
                        help="seconds of the traffic before the first round, the second half ingesting "
                             "(default: 2 x --seconds)")
    parser.add_argument("--watch-poll", type=float, default=0.01, metavar="S",
                        help="how often the lag watcher polls GET /ingest/status (load on the server)")
    add_output_options(parser, server_example="--compile none")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.alternations < 1 or args.seconds <= 0:
        parser.error("--rounds and --alternations must be at least 1 and --seconds positive")
    bundles, snapshot, requests = served_mix_or_exit(parser, args.artifacts)
    with tempfile.TemporaryDirectory(prefix="relserve-bench-ingest-") as tmp:
        server = ServerProcess(args.artifacts, "--state-dir", str(Path(tmp) / "state"),
                               *args.server_args.split(), env={"RELSERVE_WRITE_KEY": KEY},
                               log_path=Path(tmp) / "serve.log")
        with server:
            server.wait_ready(timeout=900)
            warmup = 2 * args.seconds if args.warmup is None else args.warmup
            alone, loaded = LoadResult(args.clients, 0.0), LoadResult(args.clients, 0.0)
            ingester = Ingester(server.url, snapshot, args.rows_per_second, args.batch_rows)
            warm_up(server, ingester, requests, args.clients, warmup)
            seen: dict[str, dict[int, float]] = {name: {} for name in FIELDS}
            tasks = [b.task for b in bundles]
            cpu: dict[str, dict[str, float]] = {"alone": {}, "with_ingestion": {}}
            round_ratios: list[float] = []
            versions = 0  # graph versions published while ingesting (and the 2 s after each run)
            unseen: dict[str, dict[int, float]] = {name: {} for name in FIELDS}  # nothing to see alone
            before = scrape(server.url)
            measure = functools.partial(cpu_by_role, server, tasks)
            for round_ in range(args.rounds):
                print(f"round {round_ + 1}/{args.rounds}: mixed traffic alone and with ingestion, "
                      f"{args.alternations} x each ...", file=sys.stderr, flush=True)
                alone_round, loaded_round = LoadResult(args.clients, 0.0), LoadResult(args.clients, 0.0)
                for turn in range(args.alternations):
                    # Alone first, then ingesting first, and so on: a drift of the machine's speed
                    # within the round slows both alike.
                    for ingesting in ((False, True) if turn % 2 == 0 else (True, False)):
                        start = measure()
                        first_version = graph_version(server.url) if ingesting else 0
                        result, end = watched_run(server, ingester if ingesting else None, requests, args,
                                                  seen if ingesting else unseen, measure,
                                                  args.seconds / args.alternations)
                        merge(loaded_round if ingesting else alone_round, result)
                        add_cpu(cpu["with_ingestion" if ingesting else "alone"], start, end)
                        if ingesting:
                            versions += graph_version(server.url) - first_version
                round_ratios.append(loaded_round.throughput / max(alone_round.throughput, 1e-9))
                print(f"  {alone_round.throughput:.1f} req/s alone, {loaded_round.throughput:.1f} ingesting",
                      file=sys.stderr, flush=True)
                merge(alone, alone_round)
                merge(loaded, loaded_round)
            after = scrape(server.url)
    def delta(name: str, task: str) -> float:
        return value(after, name, task=task) - value(before, name, task=task)

    server_lag: dict[str, float | None] = {}
    ingesting_s = args.rounds * (args.seconds + args.alternations * TAIL_S)  # runs with ingestion, and tails
    for b in bundles:
        count = delta("relserve_ingest_visible_lag_seconds_count", b.task)
        total = delta("relserve_ingest_visible_lag_seconds_sum", b.task)
        server_lag[b.task] = round(total / count, 4) if count else None
        refreshes = delta("relserve_article_key_refresh_seconds_count", b.task)
        if refreshes:
            server_lag[f"{b.task} key refreshes"] = refreshes
            server_lag[f"{b.task} key refreshes per s"] = round(refreshes / ingesting_s, 2)
            server_lag[f"{b.task} key refresh mean s"] = round(
                delta("relserve_article_key_refresh_seconds_sum", b.task) / refreshes, 4)
            keyed = delta("relserve_article_keys_lag_seconds_count", b.task)
            if keyed:
                server_lag[f"{b.task} keys lag mean s"] = round(
                    delta("relserve_article_keys_lag_seconds_sum", b.task) / keyed, 4)
    server_lag["graph versions per s"] = round(versions / ingesting_s, 2)
    summary = report(alone, loaded, ingester, seen, args.seconds * args.rounds, server_lag, cpu, round_ratios)
    return finish(summary, args.json)


if __name__ == "__main__":
    sys.exit(main())
