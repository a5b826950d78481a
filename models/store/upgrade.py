"""``python -m models.store.upgrade DIR``: store the prefix arrays in a snapshot built without them.

Snapshots written before :mod:`models.store.snapshot_prefix` existed still open and serve, but every
process then computes those arrays privately on first use (minutes and ~1.5 GB per process at
H&M size). This adds them in place once; the fingerprint, and so every bundle's match, is unchanged.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from models.cli import OneLineErrors


def main(argv: list[str] | None = None) -> int:
    parser = OneLineErrors(prog="python -m models.store.upgrade", description=__doc__.splitlines()[0])
    parser.add_argument("snapshot", type=Path, help="snapshot directory (e.g. artifacts/snapshot)")
    args = parser.parse_args(argv)
    from models.store.snapshot import GraphSnapshot, SnapshotError, add_prefix

    started = time.perf_counter()
    try:
        had = GraphSnapshot.open(args.snapshot).prefix is not None
        snapshot = add_prefix(args.snapshot)
    except SnapshotError as exc:
        parser.exit(1, f"{parser.prog}: error: {exc}\n")
    if had:
        print(f"{snapshot}: already has its prefix arrays; nothing to do")
        return 0
    print(f"{snapshot}: prefix arrays stored in {time.perf_counter() - started:.1f}s "
          f"(fingerprint {snapshot.fingerprint[:12]} unchanged)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
