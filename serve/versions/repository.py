"""The model repository: every trained version of every task, as directories under the artifacts.

Layout (docs/model-repository.md)::

    artifacts/
      snapshot/             the graph snapshot every version serves on
      churn/
        1/                  a version: a bundle (config.json, weights.safetensors, metrics.json, ...)
        2/
      sales/                the single-bundle layout of earlier releases: read as version 1
        config.json ...

A version is a directory named by a positive integer; anything else (``.3.partial``, ``old``) is
ignored, so a new version is written under another name and renamed into place. A version is
*complete* once its ``config.json``, ``weights.safetensors`` and ``metrics.json`` exist: the
server's poller only looks at complete versions. Versions are never changed in place.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from models.runtime.bundle import CONFIG_FILE, METRICS_FILE, WEIGHTS_FILE

LEGACY_VERSION = 1
VERSION_NAME = re.compile(r"[1-9][0-9]{0,8}")


class RepositoryError(ValueError):
    """A task directory that cannot be read as versions (one line naming it)."""


@dataclass(frozen=True)
class ModelVersion:
    """Version ``version`` of ``task``, a bundle in ``directory``."""

    task: str
    version: int
    directory: Path

    @property
    def complete(self) -> bool:
        """Whether every file a version needs is there (written by ``training.fit``)."""
        return all((self.directory / name).is_file() for name in (CONFIG_FILE, WEIGHTS_FILE, METRICS_FILE))

    def metrics(self) -> dict[str, Any] | None:
        """The parsed ``metrics.json`` (``None``: missing or unreadable)."""
        return _read_json(self.directory / METRICS_FILE)

    def config(self) -> dict[str, Any] | None:
        """The parsed ``config.json`` as JSON (``None``: missing or unreadable); not checked."""
        return _read_json(self.directory / CONFIG_FILE)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def task_versions(artifacts: Path, task: str) -> list[ModelVersion]:
    """Every version directory of ``task`` with a ``config.json``, oldest first.

    Raises:
        RepositoryError: the task directory holds a bundle of its own (version 1 of the single-bundle
            layout) and a ``1/`` directory too, so version 1 is ambiguous.
    """
    root = Path(artifacts) / task
    if not root.is_dir():
        return []
    found = {}
    if (root / CONFIG_FILE).is_file():
        found[LEGACY_VERSION] = ModelVersion(task, LEGACY_VERSION, root)
    for child in root.iterdir():
        if not (VERSION_NAME.fullmatch(child.name) and (child / CONFIG_FILE).is_file()):
            continue
        version = int(child.name)
        if version in found:
            raise RepositoryError(f"{root} holds a bundle of its own (version {LEGACY_VERSION}) and a "
                                  f"{child.name}/ directory: move the top-level bundle into {child.name}/ "
                                  "or rename the directory")
        found[version] = ModelVersion(task, version, child)
    return [found[v] for v in sorted(found)]


def find_version(artifacts: Path, task: str, version: int) -> ModelVersion | None:
    """Version ``version`` of ``task`` (``None``: not in the repository)."""
    return next((v for v in task_versions(artifacts, task) if v.version == version), None)


def iso_time(seconds: float | None) -> str | None:
    """A Unix time as ISO 8601 UTC to the second (``None`` stays ``None``)."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def metrics_summary(document: dict[str, Any] | None) -> dict[str, Any] | None:
    """What ``/models`` shows of a ``metrics.json``: the primary metric of the model and of each
    baseline on validation and test, and ``beats_baselines`` (``None`` for a missing or malformed file)."""
    if document is None:
        return None
    try:
        primary = document["primary"]
        splits = {name: {"model": document[name]["model"][primary],
                         "baselines": {b: m[primary] for b, m in document[name]["baselines"].items()}}
                  for name in ("val", "test") if name in document}
        return {"primary": primary, "higher_is_better": bool(document["higher_is_better"]),
                "beats_baselines": document.get("beats_baselines"), **splits}
    except (KeyError, TypeError, AttributeError):
        return None


def trained_on(version: ModelVersion) -> dict[str, Any] | None:
    """The training snapshot's fingerprint, the rows trained and validated on, and when the bundle
    was written (``None``: no readable ``config.json``)."""
    config = version.config()
    if config is None:
        return None
    training = config.get("training") if isinstance(config.get("training"), dict) else {}
    try:
        written = (version.directory / CONFIG_FILE).stat().st_mtime
    except OSError:
        written = None
    return {"snapshot_fingerprint": config.get("fingerprint"), "train_rows": training.get("train_rows"),
            "val_rows": training.get("val_rows"), "written_at": iso_time(written)}


def describe(version: ModelVersion) -> dict[str, Any]:
    """A version as ``/models`` lists it: number, directory, metrics summary, training snapshot."""
    return {"version": version.version, "directory": str(version.directory),
            "metrics": metrics_summary(version.metrics()), "trained_on": trained_on(version)}
