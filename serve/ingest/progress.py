"""How far each inference worker has applied the log: one small file per worker in ``STATE_DIR/workers/``.

A worker writes ``<task>.<pid>.json`` (``sequence``, ``delta_rows``, ``snapshot_version``) after
every step that changed what it serves, by rename, so a reader never sees half a file. The API
servers read them to answer ``?sync=true`` (every worker of every task at or past a sequence) and
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

WORKERS_DIR = "workers"


@dataclass(frozen=True)
class WorkerProgress:
    """One worker's last report."""

    task: str
    pid: int
    sequence: int
    delta_rows: int = 0
    snapshot_version: int = 0
    updated: float = 0.0


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

    def write(self, sequence: int, delta_rows: int = 0, snapshot_version: int = 0) -> None:
        report = WorkerProgress(self.task, self.pid, sequence, delta_rows, snapshot_version, time.time())
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


def visible_sequence(reports: list[WorkerProgress], expected: dict[str, int]) -> int:
    """The highest sequence every worker serves: per task, ``expected[task]`` live workers must have
    reported, else 0 (a worker still starting serves nothing yet)."""
    lowest = None
    for task, count in expected.items():
        sequences = sorted((r.sequence for r in reports if r.task == task), reverse=True)
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
