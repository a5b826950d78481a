"""``python -m training.compact --artifacts A --state-dir S``: fold the ingestion log into a snapshot version.

Opens the snapshot being served (the state directory's current version, else ``A/snapshot``),
applies every batch of the log after the sequence it holds (the same
:class:`models.store.live.LiveGraph` a worker builds, replayed as a worker replays it, a batch the
graph refuses stepped over with a warning: :mod:`models.store.log.replay`), writes the result as a
new version in ``S/snapshots/``, switches ``S/snapshots/current`` to it atomically and removes
versions no live process holds (:mod:`models.store.versions`). Workers move to the new version
on their own; the log is left whole (batches up to the version's sequence are no longer needed
once every worker has moved, see docs/fresh-graph.md).
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

    from models.store.log.format import LogError
    from models.store.log.replay import replayed_graph
    from models.store.snapshot import SnapshotError
    from models.store.versions import compact

    started = time.perf_counter()
    try:
        replayed = replayed_graph(args.artifacts, args.state_dir, args.ingest_log, who=parser.prog)
        with replayed as (graph, done):
            for sequence, why in done.skipped.items():
                print(f"{parser.prog}: warning: skipped log batch {sequence}, as every worker does: {why}",
                      file=sys.stderr)
            base = graph.base
            if graph.sequence == base.sequence:
                print(f"{base.directory}: holds the whole log (sequence {base.sequence}); nothing to compact")
                return 0
            folded = graph.delta_edges
            compacted = compact(graph.view(), args.state_dir)
    except (SnapshotError, LogError, ValueError) as exc:
        parser.exit(1, f"{parser.prog}: error: {exc}\n")
    removed = f"; removed {len(compacted.removed)} unused version(s)" if compacted.removed else ""
    print(f"{compacted.directory}: log sequence {compacted.sequence} ({folded:,} transactions folded into "
          f"{base.num_transactions:,}) in {time.perf_counter() - started:.1f}s, written in "
          f"{compacted.seconds:.1f}s; now current{removed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
