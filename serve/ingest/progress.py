"""How far each inference worker has applied the log: one small file per worker in ``STATE_DIR/workers/``.

A worker writes ``<task>.<pid>.json`` (``sequence``, ``keys_sequence``, ``delta_rows``,
``snapshot_version``) after every step that changed what it serves, by rename, so a reader never
sees half a file. ``sequence`` is the last batch its graph holds (every answer reads it: churn, sales,
the purchase customer's own history and query); ``keys_sequence`` the last batch its purchase article
keys were computed with, which a purchase worker refreshes on its own pacing
(:mod:`serve.ingest.pacing`); both are equal for a task without keys. The API servers read them to
answer ``?sync=true`` (every worker of every task at or past a sequence, keys included) and
``GET /ingest/status``, and ``/metrics`` reads them at scrape time. Files of dead workers are
ignored (their pid is gone) and the directory is emptied when the server starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from models.files import atomic_write
from serve.processes import alive

WORKERS_DIR = "workers"  # also a mark of a state directory (models.store.log.replay)


@dataclass(frozen=True)
class WorkerProgress:
    """One worker's last report."""

    task: str
    pid: int
    sequence: int
    delta_rows: int = 0
    snapshot_version: int = 0
    updated: float = 0.0
    keys_sequence: int | None = None  # None: equal to ``sequence`` (a task without keys)

    @property
    def served(self) -> int:
        """The last batch the worker serves fully, article keys included."""
        return self.sequence if self.keys_sequence is None else min(self.sequence, self.keys_sequence)


def workers_dir(state_dir: str | Path) -> Path:
    return Path(state_dir) / WORKERS_DIR


def reset(state_dir: str | Path) -> None:
    """Empty the directory (server start: no worker has reported yet)."""
    directory = workers_dir(state_dir)
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)


class ProgressFile:
    """The file a worker of ``task`` reports through."""

    def __init__(self, state_dir: str | Path, task: str) -> None:
        self.task = task
        self.pid = os.getpid()
        self.path = workers_dir(state_dir) / f"{task}.{self.pid}.json"
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, sequence: int, delta_rows: int = 0, snapshot_version: int = 0,
              keys_sequence: int | None = None) -> None:
        report = WorkerProgress(self.task, self.pid, sequence, delta_rows, snapshot_version, time.time(),
                                keys_sequence)
        atomic_write(self.path, json.dumps(asdict(report)))

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)



def read_all(state_dir: str | Path) -> list[WorkerProgress]:
    """The reports of live workers."""
    reports = []
    for path in workers_dir(state_dir).glob("*.json"):
        with contextlib.suppress(OSError, ValueError, TypeError):
            report = WorkerProgress(**json.loads(path.read_text()))
            if alive(report.pid):
                reports.append(report)
    return reports


def visible_sequence(reports: list[WorkerProgress], expected: dict[str, int], keys: bool = True) -> int:
    """The highest sequence every worker serves: per task, ``expected[task]`` live workers must have
    reported, else 0 (a worker still starting serves nothing yet). ``keys``: article keys included
    (what ``?sync=true`` waits for); ``False``: in every worker's graph."""
    lowest = None
    for task, count in expected.items():
        mine = [r for r in reports if r.task == task]
        sequences = sorted((r.served if keys else r.sequence for r in mine), reverse=True)
        if len(sequences) < count:
            return 0
        task_low = sequences[count - 1]  # extra files: a replaced worker not yet reaped
        lowest = task_low if lowest is None else min(lowest, task_low)
    return lowest or 0


async def wait_visible(state_dir: str | Path, expected: dict[str, int], sequence: int, timeout_s: float,
                       poll_s: float = 0.01) -> bool:
    """Wait until every worker serves ``sequence``; ``False`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while visible_sequence(read_all(state_dir), expected) < sequence:
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(poll_s)
    return True
