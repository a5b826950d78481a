"""``python -m training.compact --artifacts A --state-dir S``: fold the ingestion log into a snapshot version.

Opens the snapshot being served (the state directory's current version, else ``A/snapshot``),
applies every batch of the log after the sequence it holds (the same
:class:`models.store.live.LiveGraph` a worker builds), writes the result as a new version in
``S/snapshots/``, switches ``S/snapshots/current`` to it atomically and removes versions no live
process holds (:mod:`models.store.versions`). Workers move to the new version on their own; the log
is left whole (batches up to the version's sequence are no longer needed once every worker has
moved, see docs/fresh-graph.md).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from models.cli import OneLineErrors


def main(argv: list[str] | None = None) -> int:
    parser = OneLineErrors(prog="python -m training.compact",
                           description="Fold a state directory's ingestion log into a new snapshot version.")
    parser.add_argument("--artifacts", type=Path, required=True,
                        help="the served artifacts (bundles, snapshot/)")
    parser.add_argument("--state-dir", type=Path, required=True, help="the server's state directory")
    parser.add_argument("--ingest-log", default="wal",
                        help="the log: wal (S/wal, the default) or redis://host:port[/db][?stream=NAME]")
    args = parser.parse_args(argv)

    from models.store.live import LiveGraph
    from models.store.snapshot import SnapshotError
    from models.store.versions import compact, open_current
    from serve.ingest.config import IngestConfig
    from serve.ingest.log import LogError

    started = time.perf_counter()
    try:
        base, lease = open_current(args.artifacts, args.state_dir)
    except SnapshotError as exc:
        parser.exit(1, f"{parser.prog}: error: {exc}\n")
    try:
        graph = LiveGraph(base)
        log = IngestConfig(state_dir=args.state_dir, log=args.ingest_log).open_log()
        try:
            while batches := log.read(graph.sequence):
                graph.apply_many(batches)
        finally:
            log.close()
        if graph.sequence == base.sequence:
            print(f"{base.directory}: holds the whole log (sequence {base.sequence}); nothing to compact")
            return 0
        folded = graph.delta_edges
        done = compact(graph.view(), args.state_dir)
    except (LogError, ValueError) as exc:
        parser.exit(1, f"{parser.prog}: error: {exc}\n")
    finally:
        if lease is not None:
            lease.release()
    removed = f"; removed {len(done.removed)} unused version(s)" if done.removed else ""
    print(f"{done.directory}: log sequence {done.sequence} ({folded:,} transactions folded into "
          f"{base.num_transactions:,}) in {time.perf_counter() - started:.1f}s, written in "
          f"{done.seconds:.1f}s; now current{removed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
