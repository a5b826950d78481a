"""Benchmark the data path: CSV load, snapshot build and open, and sampler throughput.

``python -m training.bench.data --data DIR [--spec FILE] --snapshot SNAP_DIR [--batch-sizes 1 16 128]``

Prints one line per step and a throughput table per seed type, strategy and batch size
(``batches/s`` = ``sample()`` calls, ``seeds/s`` = trees). ``--synthetic`` replaces the CSVs
by numpy-made tables of the real size (31.8M purchases); ``--open-only`` reuses a snapshot.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch

from models.cli import OneLineErrors
from models.graph.sampler import SamplerConfig, TemporalSampler
from models.schema import NODE_TYPES
from models.store.snapshot import GraphSnapshot
from models.store.tables import RelTables
from training.bench.random_batches import BENCH_FANOUTS
from training.data.load import DataError, load_tables
from training.synth.tables import SyntheticSize, synthetic_tables

T = TypeVar("T")


@dataclass(frozen=True)
class BenchConfig:
    """What to measure.

    Args:
        snapshot: snapshot directory (built there unless ``open_only``).
        data: data directory to load, or ``None`` with ``synthetic`` / ``open_only``.
        spec: its dataset spec file (``None``: ``relserve.toml`` in ``data`` if present, else the H&M layout).
        synthetic: build from numpy-synthesised full-size tables instead of CSVs.
        open_only: skip loading and building; open the existing snapshot.
        batch_sizes: seeds per ``sample()`` call.
        fanouts: sampler fanouts per hop.
        seconds: time spent sampling per (seed type, strategy, batch size).
    """

    snapshot: Path
    data: Path | None = None
    spec: Path | None = None
    synthetic: bool = False
    open_only: bool = False
    batch_sizes: tuple[int, ...] = (1, 16, 128)
    fanouts: tuple[int, ...] = BENCH_FANOUTS
    seconds: float = 2.0


def resident_mib() -> float:
    """This process's resident memory in MiB (Linux), or NaN where ``/proc`` is absent."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return float("nan")
    return pages * 4096 / 2**20


def timed(label: str, work: Callable[[], T]) -> T:
    """Run ``work``, print how long it took, return its result."""
    start = time.perf_counter()
    result = work()
    print(f"{label:<28} {time.perf_counter() - start:8.3f} s", flush=True)
    return result


def measure(
    sampler: TemporalSampler, seed_type: str, size: int, seconds: float, generator: torch.Generator
) -> tuple[float, float]:
    """Sample random seeds at the serving seed time for ``seconds``; returns (calls/s, nodes per tree)."""
    snapshot = sampler.snapshot
    times = torch.full((size,), snapshot.end_time)

    def draw() -> int:
        seeds = torch.randint(snapshot.num_nodes[seed_type], (size,), generator=generator)
        return sum(sampler.sample(seed_type, seeds, times, generator=generator).num_nodes().values())

    warm_until = time.perf_counter() + seconds / 10
    while time.perf_counter() < warm_until:  # first touch of the mapped pages, allocator warm-up
        draw()
    calls, nodes, start = 0, 0, time.perf_counter()
    while calls < 3 or time.perf_counter() - start < seconds:
        nodes += draw()
        calls += 1
    return calls / (time.perf_counter() - start), nodes / (calls * size)


def sampler_throughput(snapshot: GraphSnapshot, config: BenchConfig) -> None:
    """Print batches/s, seeds/s and mean subgraph size per seed type, strategy and batch size."""
    print(f"\nsampler, fanouts {config.fanouts}, seed time = end_time, {torch.get_num_threads()} threads")
    print(f"{'seed type':<10}{'strategy':<9}{'batch':>6}{'batches/s':>11}{'seeds/s':>11}{'nodes/tree':>12}")
    generator = torch.Generator().manual_seed(0)
    for seed_type in NODE_TYPES:
        for strategy in ("last", "uniform"):
            sampler = TemporalSampler(snapshot, SamplerConfig(fanouts=config.fanouts, strategy=strategy))
            for size in config.batch_sizes:
                rate, nodes = measure(sampler, seed_type, size, config.seconds, generator)
                print(f"{seed_type:<10}{strategy:<9}{size:>6}{rate:>11.1f}{rate * size:>11.0f}{nodes:>12.1f}",
                      flush=True)


def run(config: BenchConfig) -> None:
    if not config.open_only:
        if config.synthetic:
            tables: RelTables = timed("synthesise tables (numpy)", lambda: synthetic_tables(SyntheticSize()))
        else:
            tables = timed("load data", lambda: load_tables(config.data, spec=config.spec))
        print(f"{'rows':<28} {len(tables.customers):,} customers, {len(tables.articles):,} articles, "
              f"{len(tables.transactions):,} transactions")
        timed("build snapshot", lambda: GraphSnapshot.build(tables, config.snapshot))
        del tables
    before = resident_mib()
    snapshot = timed("open snapshot", lambda: GraphSnapshot.open(config.snapshot))
    print(f"{'resident memory added':<28} {resident_mib() - before:8.1f} MiB (arrays stay memory-mapped)")
    timed("verify fingerprint (rehash)", snapshot.verify)
    sampler_throughput(snapshot, config)


def parse_args(argv: list[str] | None) -> BenchConfig:
    parser = OneLineErrors(prog="python -m training.bench.data", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", type=Path, help="data directory (H&M CSVs, or what its relserve.toml says)")
    source.add_argument("--synthetic", action="store_true", help="numpy-made full-size tables instead")
    source.add_argument("--open-only", action="store_true", help="reuse the snapshot in --snapshot")
    parser.add_argument("--spec", type=Path, metavar="FILE", help="dataset spec of --data (TOML)")
    parser.add_argument("--snapshot", type=Path, required=True, help="snapshot directory")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16, 128])
    parser.add_argument("--fanouts", type=int, nargs="+", default=list(BENCH_FANOUTS),
                        help="sampler fanouts per hop (default: %(default)s; training.fit samples 12 4)")
    parser.add_argument("--seconds", type=float, default=2.0, help="sampling time per configuration")
    args = parser.parse_args(argv)
    if args.data is not None and not args.data.is_dir():
        parser.error(f"--data {args.data}: not a directory")
    if min(args.batch_sizes) < 1 or min(args.fanouts) < 1 or args.seconds <= 0:
        parser.error("--batch-sizes, --fanouts and --seconds must be positive")
    return BenchConfig(snapshot=args.snapshot, data=args.data, spec=args.spec, synthetic=args.synthetic,
                       open_only=args.open_only, batch_sizes=tuple(args.batch_sizes),
                       fanouts=tuple(args.fanouts), seconds=args.seconds)


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    try:
        run(config)
    except (DataError, ValueError, OSError) as exc:  # SnapshotError is a ValueError
        print(f"python -m training.bench.data: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
