"""What the graph owner pays per version, in one process: apply a batch, publish the version, map it in a
worker, and refresh the purchase article keys.

``python -m serve.bench.graph_owner --artifacts ARTIFACTS`` applies ``--rows`` transaction rows of
known customers and articles (dated the day after the snapshot) in batches of ``--batch-rows`` to a
live graph over ``ARTIFACTS/snapshot``, publishing every version as the owner does
(:class:`models.store.shared_publisher.Publisher`, into a temporary directory) and mapping it as a
worker does (:class:`models.store.shared_graph.SharedGraph`); it prints the median of each step at
a few delta sizes, the version file's size, then the time of a refresh of the purchase keys with
``ARTIFACTS/purchase`` (one thread; eagerly, and with ``--compiled-keys`` also compiled as the
owner compiles it once batches stream in, alternated refresh by refresh, each after one more
batch as in the owner's steps). The serving-side measure
of the same work is ``python -m serve.bench.ingest``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from models.cli import OneLineErrors
from models.graph.temporal_cache import TemporalCache
from models.runtime.inference import TaskInference
from models.runtime.key_compile import KeyCompiler
from models.schema import ARTICLE, CUSTOMER
from models.store.ids import ids_text
from models.store.live import LiveGraph
from models.store.records import IngestBatch
from models.store.shared_graph import SharedGraph
from models.store.shared_publisher import Publisher, remove_shared
from models.store.snapshot import GraphSnapshot


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineErrors(prog="python -m serve.bench.graph_owner", description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifacts", type=Path, required=True)
    parser.add_argument("--rows", type=int, default=20_000, help="transaction rows applied in all")
    parser.add_argument("--batch-rows", type=int, default=100)
    parser.add_argument("--key-refreshes", type=int, default=3, help="purchase key refreshes timed (0: none)")
    parser.add_argument("--compiled-keys", action="store_true",
                        help="also time the refresh compiled as the graph owner compiles it")
    args = parser.parse_args(argv)
    if not (args.artifacts / "snapshot").is_dir():
        parser.error(f"--artifacts {args.artifacts}: no snapshot/ in it")
    if args.rows < args.batch_rows or args.batch_rows < 1:
        parser.error("--rows must be at least --batch-rows, which must be positive")
    return args


def batches(snapshot: GraphSnapshot, rows: int, size: int) -> list[IngestBatch]:
    rng = np.random.default_rng(0)
    customers = ids_text(snapshot.ids[CUSTOMER][rng.integers(0, snapshot.num_nodes[CUSTOMER], rows)])
    articles = ids_text(snapshot.ids[ARTICLE][rng.integers(0, snapshot.num_nodes[ARTICLE], rows)])
    day = snapshot.max_day + 1
    return [IngestBatch(n + 1, "transactions", {
        "day": [day] * size, "customer_id": customers[start:start + size],
        "article_id": articles[start:start + size], "price": [0.02] * size, "sales_channel_id": [2] * size})
        for n, start in enumerate(range(0, rows - size + 1, size))]


def time_key_refreshes(args: argparse.Namespace, graph: LiveGraph, todo: list[IngestBatch]) -> None:
    """Median wall and CPU time of a refresh of every purchase key, eager and (with
    ``--compiled-keys``) compiled as the owner compiles it, the two alternated refresh by refresh,
    each after one more batch (``todo``) as in the owner's steps; each keeps its own temporal
    features between refreshes (:mod:`models.graph.temporal_cache`), so each pays for what the
    batch moved."""
    inference = TaskInference.from_bundle(args.artifacts / "purchase", graph, compile="none")
    view = graph.view()
    forwards: dict[str, object] = {"eager": None}
    if args.compiled_keys:
        compiler = KeyCompiler(inference, view).start()
        compiler.join()
        if compiler.seconds is None:
            raise SystemExit("compiling the key forward failed (see the warning above)")
        print(f"key forward compiled in {compiler.seconds:.1f} s", flush=True)
        forwards["compiled"] = inference.key_forward
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in forwards}
    keys: dict[str, torch.Tensor] = {}
    caches = {name: TemporalCache() for name in forwards}
    for name in forwards:  # each cache filled once, as the owner's is by its first refresh
        inference.key_temporal = caches[name]
        inference.compute_article_keys(view.end_time, view)
    for batch in todo:
        graph.apply(batch)
        view = graph.view()
        for name, forward in forwards.items():
            inference.key_forward, inference.key_temporal = forward, caches[name]
            wall, cpu = time.perf_counter(), time.thread_time()
            keys[name] = inference.compute_article_keys(view.end_time, view)
            times[name].append((time.perf_counter() - wall, time.thread_time() - cpu))
    for name, measured in times.items():
        wall, cpu = np.median(np.array(measured), axis=0) * 1e3
        print(f"purchase key refresh, {name} ({view.num_nodes[ARTICLE]:,} articles): median {wall:.1f} ms "
              f"wall, {cpu:.1f} ms CPU of {len(measured)}")
    if "compiled" in keys:
        ratio = np.median([c for _, c in times["compiled"]]) / np.median([c for _, c in times["eager"]])
        difference = float((keys["compiled"] - keys["eager"]).abs().max())
        print(f"compiled / eager CPU {ratio:.2f}; largest key difference {difference:.1e}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(1)
    snapshot = GraphSnapshot.open(args.artifacts / "snapshot")
    graph = LiveGraph(snapshot)
    directory = Path(tempfile.mkdtemp(prefix="relserve-owner-bench-"))
    publisher = Publisher(directory)
    try:
        publisher.publish(graph.view())
        worker = SharedGraph(directory, wait_s=1)
        todo = batches(snapshot, args.rows + args.key_refreshes * args.batch_rows, args.batch_rows)
        todo, later = todo[:len(todo) - args.key_refreshes], todo[len(todo) - args.key_refreshes:]
        marks = {len(todo) // 10, len(todo) // 2, len(todo)} - {0}
        steps: list[tuple[float, float, float]] = []
        print(f"{'delta rows':>10} {'apply ms':>9} {'publish ms':>10} {'map ms':>7} {'file MB':>8}")
        for n, batch in enumerate(todo, start=1):
            t0 = time.perf_counter()
            graph.apply(batch)
            t1 = time.perf_counter()
            publisher.publish(graph.view())
            t2 = time.perf_counter()
            worker.view()
            steps.append((t1 - t0, t2 - t1, time.perf_counter() - t2))
            if n in marks:
                recent = np.median(np.array(steps[-10:]), axis=0) * 1e3
                print(f"{graph.delta_edges:>10,} {recent[0]:>9.2f} {recent[1]:>10.2f} {recent[2]:>7.2f} "
                      f"{publisher.bytes_written / 1e6:>8.1f}", flush=True)
        if args.key_refreshes and (args.artifacts / "purchase").is_dir():
            time_key_refreshes(args, graph, later)
        worker.close()
    finally:
        publisher.close()
        remove_shared(directory)


if __name__ == "__main__":
    main()
