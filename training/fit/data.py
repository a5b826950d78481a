"""The graph snapshot training reads (built from the dataset's files, or a server's live graph), and
the task tables built from it.

``<out>/snapshot/`` is built from the dataset's files on the first run and reused by later runs
(training another task into the same artifacts keeps one snapshot, so every bundle there matches
it). A ``source.json`` beside the arrays records the size and sha256 of the files it was built from
(and of the spec file, if any; see :func:`training.fit.dataset.source_signature`), so a snapshot of
other data is refused instead of silently reused.

With a server's state directory as ``--data`` (the retrain loop), the snapshot is that server's
live graph: its current snapshot version plus every batch of its log (:mod:`models.store.log.replay`),
written to a temporary directory for the run and removed after it; ``<out>/snapshot`` and the state
directory are only read.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from models.runtime.bundle import SNAPSHOT_DIR
from models.store.compact import materialize
from models.store.log.format import LogError
from models.store.log.replay import replayed_graph
from models.store.snapshot import GraphSnapshot, SnapshotError
from models.store.tables import Transactions
from training.data.load import DataError, load_tables
from training.data.spec import DatasetSpec
from training.fit import distributed
from training.fit.config import FitConfig, FitError
from training.fit.dataset import dataset_spec, source_signature
from training.tasks.definitions import TASKS
from training.tasks.table import TaskTable, concat_tables

SOURCE_FILE = "source.json"


def prepare_snapshot(data_dir: Path, out: Path, rebuild: bool = False, progress: bool = True,
                     spec: DatasetSpec | None = None) -> GraphSnapshot:
    """Open ``<out>/snapshot`` if it was built from these files, else build it there.

    Args:
        data_dir: the data directory.
        out: artifacts directory.
        rebuild: build even if a snapshot exists (bundles of other tasks there become stale).
        progress: progress bars on stderr.
        spec: the dataset's spec (default: the data directory's, see
            :func:`training.data.spec_file.find_spec`).

    Raises:
        FitError: a bad spec, unreadable files, or an existing snapshot that is corrupt or built
            from other data.
    """
    spec = dataset_spec(data_dir, None) if spec is None else spec
    directory = out / SNAPSHOT_DIR
    signature = source_signature(data_dir, spec)
    if directory.exists() and not rebuild:
        try:
            recorded = json.loads((directory / SOURCE_FILE).read_text())
        except (OSError, ValueError):
            recorded = None
        if recorded != signature:
            raise FitError(f"{directory} was not built from the CSV files in {data_dir} (its {SOURCE_FILE} "
                           "differs or is missing); use --rebuild-snapshot or another --out")
        try:
            return GraphSnapshot.open(directory)
        except SnapshotError as exc:
            raise FitError(f"{exc}; use --rebuild-snapshot") from None
    try:
        tables = load_tables(data_dir, progress=progress, spec=spec)
    except DataError as exc:
        raise FitError(str(exc)) from None
    (directory / SOURCE_FILE).unlink(missing_ok=True)
    snapshot = GraphSnapshot.build(tables, directory, progress=progress)
    (directory / SOURCE_FILE).write_text(json.dumps(signature, indent=2) + "\n")
    return snapshot


@contextmanager
def training_snapshot(config: FitConfig, spec: DatasetSpec) -> Iterator[GraphSnapshot]:
    """The snapshot ``config`` trains on, open while the ``with`` block runs (see the module docstring).

    Raises:
        FitError: as :func:`prepare_snapshot`, or a state directory whose graph cannot be read.
    """
    if not config.from_state_dir:
        with distributed.main_first():
            snapshot = prepare_snapshot(config.data, config.out, config.rebuild_snapshot, config.progress,
                                        spec)
        yield snapshot
        return
    with tempfile.TemporaryDirectory(prefix="relserve-retrain-") as work:
        yield served_graph(config.data, config.out, config.ingest_log, Path(work))


def served_graph(state_dir: Path, artifacts: Path, ingest_log: str, work: Path) -> GraphSnapshot:
    """The graph a server on ``artifacts`` with ``state_dir`` serves, written as a snapshot in ``work``.

    Raises:
        FitError: the artifacts hold no snapshot, or the log cannot be read or applied.
    """
    try:
        with replayed_graph(artifacts, state_dir, ingest_log, who="training.fit") as (graph, _):
            return materialize(graph.view(), work / SNAPSHOT_DIR)
    except (SnapshotError, LogError, ValueError) as exc:
        raise FitError(f"--data {state_dir} is a server's state directory and --out {artifacts} must be the "
                       f"artifacts that server serves: {exc}") from None


def task_splits(task: str, tx: Transactions, snapshot: GraphSnapshot, max_train_cutoffs: int = 0,
                max_val_rows: int = 0, seed: int = 0, weeks_back: int = 0) -> dict[str, TaskTable]:
    """The ``train`` (all kept cutoffs in one table), ``val`` and ``test`` tables of ``task``.

    ``val`` keeps at most ``max_val_rows`` rows (``0``: all), a random subset fixed by ``seed``:
    it is scored after every epoch, the model and the baselines on the same rows. ``weeks_back``
    moves the validation and test weeks that many weeks earlier
    (:func:`training.tasks.cutoffs.split_cutoffs`).

    Raises:
        FitError: the data is too short for a training, validation and test week.
    """
    try:
        splits = TASKS[task].splits(tx, snapshot.num_nodes, max_train_cutoffs=max_train_cutoffs,
                                    weeks_back=weeks_back)
    except ValueError as exc:
        raise FitError(f"{task}: {exc}") from None
    tables = {split: concat_tables(parts) for split, parts in splits.items()}
    for split, table in tables.items():
        if len(table) == 0:
            raise FitError(f"{task}: the {split} split has no rows (too little activity in the data)")
    if max_val_rows:
        tables["val"] = tables["val"].sample(max_val_rows, seed)
    return tables
