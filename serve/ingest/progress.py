"""How far the server serves the log: the graph owner's published version and the purchase keys.

Every answer reads the graph owner's latest published version (:mod:`serve.graph`), so its
sequence, read from the owner's mapped header, is how far every worker's graph reaches. The
purchase article keys are refreshed by each worker of a ranking task on its own pacing
(:mod:`serve.graph.keys`); such a worker writes ``STATE_DIR/workers/<task>.<pid>.json``
(``keys_sequence``, and the ``sequence``, ``delta_rows`` and ``snapshot_version`` of its graph) after
each refresh, by rename, so a reader never sees half a file. The API servers read both to answer
``?sync=true`` (the owner and every keyed worker at or past a sequence) and ``GET /ingest/status``,
and ``/metrics`` reads them at scrape time. Files of dead workers are ignored (their pid is gone) and
the directory is emptied when the server starts.
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
from models.store.shared_header import HEADER_FILE, GraphHeader, Published, shared_dir
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


@dataclass(frozen=True)
class Progress:
    """How far the server serves the log: the graph owner's published version, and the article
    keys of each live worker of a ranking task."""

    graph: Published | None
    workers: list[WorkerProgress]

    @property
    def applied(self) -> int:
        """The last batch every answer reads (``0``: nothing published yet)."""
        return 0 if self.graph is None else self.graph.sequence

    def visible(self, keyed: dict[str, int]) -> int:
        """The last batch served fully, article keys included (what ``?sync=true`` waits for): per
        ranking task, ``keyed[task]`` live workers must have reported, else 0."""
        lowest = self.applied
        for task, count in keyed.items():
            sequences = sorted((r.keys_sequence or 0 for r in self.workers if r.task == task), reverse=True)
            if len(sequences) < count:
                return 0
            lowest = min(lowest, sequences[count - 1])  # extra files: a replaced worker not yet reaped
        return lowest


_headers: dict[Path, GraphHeader] = {}


def read_progress(state_dir: str | Path) -> Progress:
    """The owner's current version (from its mapped header) and the keyed workers' reports."""
    directory = shared_dir(Path(state_dir))
    header = _headers.get(directory)
    if header is None or not (directory / HEADER_FILE).exists():
        try:
            header = _headers[directory] = GraphHeader(directory)
        except FileNotFoundError:
            return Progress(None, read_all(state_dir))
    return Progress(header.read(), read_all(state_dir))


async def wait_visible(state_dir: str | Path, keyed: dict[str, int], sequence: int, timeout_s: float,
                       poll_s: float = 0.01) -> bool:
    """Wait until the server serves ``sequence`` fully; ``False`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while read_progress(state_dir).visible(keyed) < sequence:
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(poll_s)
    return True
