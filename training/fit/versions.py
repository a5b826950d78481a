"""Writing a bundle as the next version of a task in the model repository (docs/model-repository.md).

The bundle is written under a name the server ignores (``<task>/.<N>.partial-<pid>``), compile cache
included, and renamed to ``<task>/<N>/`` once whole: a polling server never sees half a version.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from serve.versions.repository import RepositoryError, task_versions
from training.fit.config import FitError


@dataclass(frozen=True)
class NextVersion:
    """Version ``version`` of a task, being written in ``staging`` and published as ``directory``."""

    version: int
    staging: Path
    directory: Path

    @classmethod
    def of(cls, artifacts: Path, task: str) -> NextVersion:
        """The version after every version of ``task`` in ``artifacts`` (1 for a new task).

        Raises:
            FitError: the task directory cannot be read as versions.
        """
        try:
            versions = task_versions(artifacts, task)
        except RepositoryError as exc:
            raise FitError(str(exc)) from None
        number = versions[-1].version + 1 if versions else 1
        root = Path(artifacts) / task
        staging = root / f".{number}.partial-{os.getpid()}"
        if staging.exists():
            shutil.rmtree(staging)
        return cls(number, staging, root / str(number))

    def publish(self) -> Path:
        """Rename the finished bundle into place; returns its directory.

        Raises:
            FitError: another process published this version number meanwhile (the bundle is left in
                ``staging``).
        """
        try:
            self.directory.mkdir()  # fails if taken: a rename onto an empty directory would not
            os.replace(self.staging, self.directory)
        except FileExistsError:
            raise FitError(f"{self.directory} appeared while training (another training run?); the new "
                           f"bundle is in {self.staging}") from None
        return self.directory
