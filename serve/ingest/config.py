"""Ingestion settings of ``python -m serve`` (``--state-dir`` and the ``--ingest-*`` options).

Imported by :mod:`serve.config`, which spawned workers import again: only the standard library at
the top here.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from models.store.log.format import Log

WAL = "wal"  # as models.store.log.WAL, which imports numpy: not here (see above)
CLOCKS = ("data", "wall")
# The defaults of the settings the graph owner (serve.graph, serve.ingest.pacing) takes too.
DEFAULT_POLL_S = 0.05
# The graph owner's pacing (serve.ingest.pacing): every CPU-second it spends is taken from answers on
# a busy machine, so it steps as rarely as a lag target of 0.8 s allows (a batch served within ~1 s
# at p99 on the 2-core demo benchmark), and at most 0.3 of its time, the purchase keys (its costliest
# work) at most half of that. Throughput while ingesting there: 0.85-0.91 of without with the
# target, 0.82-0.87 with the share alone (BENCHMARKS.md, "Ingestion under load").
DEFAULT_FOLLOW_SHARE = 0.3
DEFAULT_KEY_SHARE = 0.5
DEFAULT_LAG_TARGET_S = 0.8


@dataclass(frozen=True)
class IngestConfig:
    """Ingestion is on when a server has one of these (small and picklable: workers get it too).

    Args:
        state_dir: the server's writable state (the WAL, the workers' progress files), apart from
            the read-only artifacts; created if missing.
        log: ``wal`` (the local write-ahead log in ``state_dir/wal``) or a ``redis://`` / ``rediss://`` URL
            (:mod:`models.store.log.redis_log`)
            (a Redis stream shared by replicas).
        ingest_dir: a directory watched for files to ingest (``None``: no file drop).
        lateness_days: rows dated more than this before the graph's latest day are refused.
        max_rows: most rows per batch (413 beyond).
        max_bytes: largest ingestion body (413 beyond).
        sync_timeout_s: longest ``?sync=true`` waits for every worker (504 after).
        poll_s: how often the graph owner looks for new batches in a Redis log (the local WAL
            wakes it at each append; idle, it looks at least every
            :data:`serve.graph.owner.IDLE_WAIT_S`).
        file_poll_s: how often the file drop looks for new files.
        clock: ``data`` (answers are for the day after the latest transaction) or ``wall`` (for
            tomorrow, UTC, when that is later: seed-time features age on days without sales).
        compact_every_s: fold the log into a new snapshot version this often (``None``: never; use
            ``python -m training.compact``).
        follow_share: largest share of its time the graph owner works (applying the log,
            publishing, and the key refreshes its steps run); batches arriving meanwhile are applied
            together (:mod:`serve.ingest.pacing`). Lower: less taken from answers, longer lag; ``1``:
            a step as soon as something is new.
        key_share: largest share of its time the graph owner spends recomputing the article keys
            of the whole catalogue (the rows themselves are served from the next step); lower: less
            taken from answers, staler keys.
        lag_target_s: the graph owner steps as rarely as serving a batch within this many seconds
            allows (:mod:`serve.ingest.pacing`); ``0``: as often as ``follow_share`` allows.
    """

    state_dir: Path
    log: str = WAL
    ingest_dir: Path | None = None
    lateness_days: int = 7
    max_rows: int = 10_000
    max_bytes: int = 8 << 20
    sync_timeout_s: float = 10.0
    poll_s: float = DEFAULT_POLL_S
    file_poll_s: float = 1.0
    clock: str = "data"
    compact_every_s: float | None = None
    follow_share: float = DEFAULT_FOLLOW_SHARE
    key_share: float = DEFAULT_KEY_SHARE
    lag_target_s: float = DEFAULT_LAG_TARGET_S

    def __post_init__(self) -> None:
        checks = [
            (self.log == WAL or self.log.startswith(("redis://", "rediss://")),
             f"--ingest-log must be {WAL} or redis[s]://[[user]:password@]host[:port][/db][?stream=NAME]"),
            (self.lateness_days >= 0, "--ingest-lateness-days must not be negative"),
            (1 <= self.max_rows <= 1_000_000, "--ingest-max-rows must be in 1..1000000"),
            (1024 <= self.max_bytes <= 1 << 30, "--ingest-max-bytes must be in 1024..1073741824"),
            (math.isfinite(self.sync_timeout_s) and self.sync_timeout_s > 0,
             "--sync-timeout must be positive"),
            (math.isfinite(self.poll_s) and 0.001 <= self.poll_s <= 10,
             "--ingest-poll must be in 0.001..10 s"),
            (math.isfinite(self.file_poll_s) and self.file_poll_s > 0, "--ingest-dir-poll must be positive"),
            (self.clock in CLOCKS, f"--clock must be one of {', '.join(CLOCKS)}"),
            (self.compact_every_s is None
             or (math.isfinite(self.compact_every_s) and self.compact_every_s >= 1),
             "--compact-every must be at least 1 s"),
            (math.isfinite(self.follow_share) and 0.01 <= self.follow_share <= 1,
             "--ingest-share must be in 0.01..1"),
            (math.isfinite(self.key_share) and 0.01 <= self.key_share <= 1,
             "--key-share must be in 0.01..1"),
            (self.lag_target_s == 0 or 0.05 <= self.lag_target_s <= 3600,
             "--ingest-lag-target must be 0 (off) or in 0.05..3600 s"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    def open_log(self) -> Log:
        """A fresh connection to the log (one per process: never share one across a fork)."""
        from models.store.log import open_log

        return open_log(self.log, self.state_dir)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = IngestConfig(state_dir=Path("."))
    group = parser.add_argument_group("ingestion (on with --state-dir; docs/ingestion.md)")
    group.add_argument("--state-dir", type=Path, default=None, metavar="DIR",
                       help="writable state: the write-ahead log, snapshot versions, key progress; turns "
                            "the /ingest routes on (they need RELSERVE_WRITE_KEY)")
    group.add_argument("--ingest-log", default=d.log, metavar="URL",
                       help="wal (in --state-dir) or redis[s]://[[user]:password@]host[:port][/db]"
                            "[?stream=NAME], shared by replicas")
    group.add_argument("--ingest-dir", type=Path, default=None, metavar="DIR",
                       help="file drop: CSV/Parquet/NDJSON files in DIR/{customers,articles,transactions}/ "
                            "are ingested and moved to done/")
    group.add_argument("--ingest-lateness-days", type=int, default=d.lateness_days, metavar="N",
                       help="refuse transactions dated more than N days before the graph's latest day")
    group.add_argument("--ingest-max-rows", type=int, default=d.max_rows, metavar="N",
                       help="most rows per batch (413 beyond)")
    group.add_argument("--ingest-max-bytes", type=int, default=d.max_bytes, metavar="N",
                       help="largest ingestion body in bytes (413 beyond)")
    group.add_argument("--sync-timeout", type=float, default=d.sync_timeout_s, metavar="S",
                       help="longest ?sync=true waits for every worker to serve a batch")
    group.add_argument("--ingest-poll", type=float, default=d.poll_s, metavar="S",
                       help="how often the graph owner looks for new batches in a Redis log (an "
                            "append to the local WAL wakes it at once)")
    group.add_argument("--clock", default=d.clock, choices=CLOCKS,
                       help="seed day of answers: the day after the latest transaction (data), or "
                            "tomorrow UTC when later (wall)")
    group.add_argument("--ingest-share", type=float, default=d.follow_share, metavar="F",
                       help="largest share of its time the graph owner works (applying the log, "
                            "publishing, refreshing keys); batches arriving meanwhile are applied together "
                            "(default %(default)g; 1: no pause; lower: less taken from answers, longer "
                            "ingest-to-visible lag)")
    group.add_argument("--ingest-lag-target", type=float, default=d.lag_target_s, metavar="S",
                       help="the graph owner steps as rarely as serving each batch within S seconds "
                            "allows, taking that much less from answers (default %(default)g; 0: as "
                            "often as --ingest-share allows, for the lowest lag)")
    group.add_argument("--key-share", type=float, default=d.key_share, metavar="F",
                       help="largest share of its time the graph owner spends recomputing the "
                            "article keys after the graph changed (default %(default)g; 1: after every "
                            "step; lower: less taken from answers, staler keys)")
    group.add_argument("--compact-every", type=float, default=None, metavar="S",
                       help="fold the log into a new snapshot version every S seconds (default: never)")


def from_args(args: argparse.Namespace) -> IngestConfig | None:
    """The settings of parsed arguments; ``None`` without ``--state-dir``.

    Raises:
        ValueError: a bad value, or an ingestion option without ``--state-dir``.
    """
    if args.state_dir is None:
        defaults = (args.ingest_dir is None, args.ingest_log == WAL, args.clock == "data",
                    args.compact_every is None, args.ingest_share == DEFAULT_FOLLOW_SHARE,
                    args.key_share == DEFAULT_KEY_SHARE, args.ingest_lag_target == DEFAULT_LAG_TARGET_S)
        if not all(defaults):
            raise ValueError("--ingest-dir, --ingest-log, --clock, --compact-every, --ingest-share, "
                             "--ingest-lag-target and --key-share need --state-dir")
        return None
    if args.state_dir.exists() and not args.state_dir.is_dir():
        raise ValueError(f"--state-dir {args.state_dir} is not a directory")
    return IngestConfig(state_dir=args.state_dir, log=args.ingest_log, ingest_dir=args.ingest_dir,
                        lateness_days=args.ingest_lateness_days, max_rows=args.ingest_max_rows,
                        max_bytes=args.ingest_max_bytes, sync_timeout_s=args.sync_timeout,
                        poll_s=args.ingest_poll, clock=args.clock, compact_every_s=args.compact_every,
                        follow_share=args.ingest_share, key_share=args.key_share,
                        lag_target_s=args.ingest_lag_target)
