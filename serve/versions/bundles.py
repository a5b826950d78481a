"""Find and check the task bundles in the main process, before any worker starts.

A bundle that fails in a worker's ``setup()`` would either abort start-up with a traceback or,
with ``restart_workers``, be restarted forever behind a 503 ``/health``. So every bundle is
loaded once here (weights and config checked against the snapshot, nothing compiled) and a
problem becomes one readable line.

Each task may hold several versions (:mod:`serve.versions.repository`): :func:`find_bundles` names the newest,
and :func:`choose_bundles` picks the one the server starts with (pinned, or the newest the
deployment guard of :mod:`serve.versions.guard` allows that loads).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from models.registry import TASK_NAMES as TASKS
from models.runtime.bundle import (
    CONFIG_FILE,
    METRICS_FILE,
    SNAPSHOT_DIR,
    WEIGHTS_FILE,
    BundleError,
    load_bundle,
)
from models.runtime.quality import baseline_warning
from models.store.snapshot import GraphSnapshot, SnapshotError
from serve.versions.guard import choose
from serve.versions.models_config import ModelsConfig
from serve.versions.repository import ModelVersion, RepositoryError, task_versions


class ArtifactsError(ValueError):
    """The artifacts directory cannot be served."""


@dataclass(frozen=True)
class TaskBundle:
    """A bundle: version ``version`` of ``task`` in ``bundle_dir``, over the snapshot in ``snapshot_dir``.

    ``held_back``: ``(version, reason)`` of the task's versions the start-up choice passed over.
    """

    task: str
    bundle_dir: Path
    snapshot_dir: Path
    version: int = 1
    held_back: tuple[tuple[int, str], ...] = ()


def find_bundles(artifacts: Path, tasks: tuple[str, ...] | None = None) -> list[TaskBundle]:
    """The bundles to serve: ``tasks``, or every task with a bundle in ``artifacts``.

    Raises:
        ArtifactsError: no such directory, no snapshot, a requested task without a bundle, or none.
    """
    artifacts = Path(artifacts)
    if not artifacts.is_dir():
        raise ArtifactsError(f"artifacts directory {artifacts} does not exist "
                             "(write one with python -m training.fit)")
    snapshot_dir = artifacts / SNAPSHOT_DIR
    if not snapshot_dir.is_dir():
        raise ArtifactsError(f"{artifacts} has no {SNAPSHOT_DIR}/ directory (the graph snapshot)")
    try:
        found = {t: versions for t in TASKS if (versions := task_versions(artifacts, t))}
    except RepositoryError as e:
        raise ArtifactsError(str(e)) from None
    missing = sorted(set(tasks or ()) - set(found))
    if missing:
        raise ArtifactsError(f"{artifacts} has no bundle for {', '.join(missing)} "
                             f"(no <task>/{CONFIG_FILE} or <task>/<version>/{CONFIG_FILE})")
    chosen = [t for t in found if tasks is None or t in tasks]
    if not chosen:
        raise ArtifactsError(f"{artifacts} holds no task bundle (<task>/{CONFIG_FILE} for any of {TASKS})")
    return [TaskBundle(t, found[t][-1].directory, snapshot_dir, found[t][-1].version) for t in chosen]


def choose_bundles(artifacts: Path, tasks: tuple[str, ...] | None, models: ModelsConfig
                   ) -> tuple[list[TaskBundle], list[str]]:
    """The version of each task the server starts with, loaded and checked as :func:`check_bundles`
    does, and the warnings to print (a pin or a fallback the deployment guard objects to).

    Raises:
        ArtifactsError: as :func:`find_bundles`; a pin for a task not served, or a pinned version that
            is missing or broken; a task none of whose versions loads.
    """
    bundles = find_bundles(artifacts, tasks)
    unknown = sorted({task for task, _ in models.pins} - {b.task for b in bundles})
    if unknown:
        raise ArtifactsError(f"--model-version names {', '.join(unknown)}, which this server does not serve")
    snapshot_dir = bundles[0].snapshot_dir
    snapshot = _open_snapshot(snapshot_dir)

    def check(version: ModelVersion) -> str | None:
        try:
            check_bundle(TaskBundle(version.task, version.directory, snapshot_dir, version.version), snapshot)
        except ArtifactsError as e:
            return str(e).removeprefix(f"cannot serve {version.task}: ")
        return None

    chosen, warnings = [], []
    for bundle in bundles:
        try:
            versions = task_versions(artifacts, bundle.task)
            choice = choose(versions, check, models.pin(bundle.task), models.force)
        except RepositoryError as e:
            raise ArtifactsError(f"cannot serve {bundle.task}: {e}") from None
        warnings += [choice.warning] if choice.warning else []
        chosen.append(TaskBundle(bundle.task, choice.version.directory, bundle.snapshot_dir,
                                 choice.version.version, tuple(sorted(choice.held_back.items()))))
    return chosen, warnings


def _open_snapshot(snapshot_dir: Path) -> GraphSnapshot:
    try:
        snapshot = GraphSnapshot.open(snapshot_dir)
        snapshot.verify()
    except SnapshotError as e:
        raise ArtifactsError(f"cannot serve: {e}") from e
    return snapshot


def check_bundles(bundles: list[TaskBundle]) -> None:
    """Load every bundle on the CPU: config, weights, and fingerprint against the snapshot.

    The snapshot's arrays are hashed once against the fingerprint in its ``meta.json``: opening
    only checks shapes and dtypes, so a flipped byte inside an array would otherwise be served as
    data. Hashing reads every array, which also puts them in the page cache the workers share.
    Weights are checked against the sha256 in ``config.json`` by :func:`models.runtime.bundle.load_bundle`;
    non-finite values are refused here too, since a diverged training run saves them with a valid
    checksum.

    Raises:
        ArtifactsError: with the first problem found, naming the file.
    """
    snapshots: dict[Path, GraphSnapshot] = {}
    for bundle in bundles:
        try:
            if bundle.snapshot_dir not in snapshots:
                snapshots[bundle.snapshot_dir] = GraphSnapshot.open(bundle.snapshot_dir)
                snapshots[bundle.snapshot_dir].verify()
        except SnapshotError as e:
            raise ArtifactsError(f"cannot serve {bundle.task}: {e}") from e
        check_bundle(bundle, snapshots[bundle.snapshot_dir])


def check_bundle(bundle: TaskBundle, snapshot: GraphSnapshot) -> None:
    """Load one bundle on the CPU against an opened (and verified) snapshot; see :func:`check_bundles`."""
    try:
        config, model = load_bundle(bundle.bundle_dir, snapshot)
    except BundleError as e:
        raise ArtifactsError(f"cannot serve {bundle.task}: {e}") from e
    broken = next((name for name, t in model.state_dict().items() if not torch.isfinite(t).all()), None)
    if broken is not None:
        raise ArtifactsError(f"cannot serve {bundle.task}: {bundle.bundle_dir / WEIGHTS_FILE}: {broken} "
                             "holds NaN or infinite values (corrupt weights)")
    if config.task != bundle.task:
        raise ArtifactsError(f"{bundle.bundle_dir / CONFIG_FILE}: a {config.task} bundle, "
                             f"not {bundle.task}")


def quality_warnings(bundles: list[TaskBundle]) -> list[str]:
    """One line per bundle whose ``metrics.json`` says the model does not beat its best baseline
    on validation (``"beats_baselines": false``); a missing or unreadable file says nothing."""
    warnings = []
    for bundle in bundles:
        try:
            document = json.loads((bundle.bundle_dir / METRICS_FILE).read_text())
            warning = baseline_warning(document)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if warning:
            warnings.append(warning)
    return warnings
