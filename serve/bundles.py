"""Find and check the task bundles in the main process, before any worker starts.

A bundle that fails in a worker's ``setup()`` would either abort start-up with a traceback or,
with ``restart_workers``, be restarted forever behind a 503 ``/health``. So every bundle is
loaded once here (weights and config checked against the snapshot, nothing compiled) and a
problem becomes one readable line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

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
from serve.config import TASKS


class ArtifactsError(ValueError):
    """The artifacts directory cannot be served."""


@dataclass(frozen=True)
class TaskBundle:
    """A checked bundle: ``task`` served from ``bundle_dir`` over the snapshot in ``snapshot_dir``."""

    task: str
    bundle_dir: Path
    snapshot_dir: Path


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
    found = [t for t in TASKS if (artifacts / t / CONFIG_FILE).is_file()]
    missing = sorted(set(tasks or ()) - set(found))
    if missing:
        raise ArtifactsError(f"{artifacts} has no bundle for {', '.join(missing)} "
                             f"(no <task>/{CONFIG_FILE})")
    chosen = [t for t in found if tasks is None or t in tasks]
    if not chosen:
        raise ArtifactsError(f"{artifacts} holds no task bundle (<task>/{CONFIG_FILE} for any of {TASKS})")
    return [TaskBundle(t, artifacts / t, snapshot_dir) for t in chosen]


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
            config, model = load_bundle(bundle.bundle_dir, snapshots[bundle.snapshot_dir])
        except (BundleError, SnapshotError) as e:
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
