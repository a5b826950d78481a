"""``python -m training.snapshot --data DIR --out ARTIFACTS``: build (or rebuild) ``ARTIFACTS/snapshot``
alone from the dataset's files, without training.

``--until YYYY-MM-DD`` keeps the transactions up to and including that day; the customers and articles
tables stay whole (every node the files list), so bundles trained on the full data load over it, and
the later days can be ingested into a server started on it (docs/fresh-graph.md). Transactions keep
their file order, so rows of one day are in the order a rebuild from all the files would give them.

The new snapshot is written beside the old one and renamed into place, so a server that maps the old
files keeps reading them until it restarts. ``encodings.json`` records the node tables'
vocabularies and numeric statistics (:mod:`training.snapshot_encodings`) for customers and articles
added at serving time.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from models.cli import OneLineErrors
from models.schema import day_number, day_to_date


def main(argv: list[str] | None = None) -> int:
    parser = OneLineErrors(prog="python -m training.snapshot",
                           description="Build (or rebuild) ARTIFACTS/snapshot alone from a dataset.")
    parser.add_argument("--data", type=Path, required=True, help="data directory (the dataset's files)")
    parser.add_argument("--out", type=Path, required=True, help="artifacts directory; writes OUT/snapshot")
    parser.add_argument("--spec", type=Path, default=None, metavar="FILE",
                        help="dataset spec (default: DATA/relserve.toml if present, else the H&M layout)")
    parser.add_argument("--until", default=None, metavar="YYYY-MM-DD",
                        help="keep only the transactions of this day and before")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    try:
        until = None if args.until is None else day_number(args.until)
    except ValueError:
        parser.error(f"--until {args.until!r} is not a date YYYY-MM-DD")

    from models.runtime.bundle import SNAPSHOT_DIR
    from models.store.snapshot import GraphSnapshot
    from models.store.tables import RelTables, Transactions
    from training.data.load import DataError, load_tables
    from training.fit.config import FitError
    from training.fit.data import SOURCE_FILE
    from training.fit.dataset import dataset_spec, source_signature
    from training.snapshot_encodings import write_encodings

    started = time.perf_counter()
    try:
        spec = dataset_spec(args.data, args.spec)
        tables = load_tables(args.data, progress=not args.quiet, spec=spec)
        signature = source_signature(args.data, spec)
    except (DataError, FitError) as exc:
        parser.exit(1, f"{parser.prog}: error: {exc}\n")
    if until is not None:
        tx = tables.transactions
        keep = np.flatnonzero(tx.day <= until)
        if not len(keep):
            parser.exit(1, f"{parser.prog}: error: no transaction on or before {args.until}\n")
        tables = RelTables(tables.customers, tables.articles, Transactions(
            tx.customer[keep], tx.article[keep], tx.day[keep], tx.price[keep]))
        signature = {**signature, "until": args.until}  # so training.fit never takes it for the files
    target = args.out / SNAPSHOT_DIR
    staging = args.out / f".{SNAPSHOT_DIR}.building-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    snapshot = GraphSnapshot.build(tables, staging, progress=not args.quiet)
    (staging / SOURCE_FILE).write_text(json.dumps(signature, indent=2) + "\n")
    write_encodings(staging, args.data, spec, tables)
    replace_directory(staging, target)
    snapshot = GraphSnapshot.open(target)
    print(f"{target}: {snapshot.num_nodes['customer']:,} customers, {snapshot.num_nodes['article']:,} "
          f"articles, {snapshot.num_transactions:,} transactions, {day_to_date(snapshot.min_day)}.."
          f"{day_to_date(snapshot.max_day)} ({time.perf_counter() - started:.1f}s)")
    return 0


def replace_directory(staging: Path, target: Path) -> None:
    """Rename ``staging`` to ``target``; an old ``target`` is moved aside first and then deleted (a
    process that maps its files keeps them until it closes them)."""
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    if target.exists():
        target.rename(old)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
