"""How far the server serves the log: what the graph owner published, read from its mapped header.

Every answer reads the graph owner's latest published version (:mod:`serve.graph`), so its sequence
is how far every worker's graph reaches (``applied``); the owner's published article keys, which
every purchase answer adopts before it ranks, reach ``keys_sequence``. The API servers read both to
answer ``?sync=true`` (``visible``: the graph and, when a ranking task is served, the keys at or past
a sequence) and ``GET /ingest/status``, and ``/metrics`` reads them at scrape time. Nothing is
reported by the workers themselves.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

from models.store.shared_header import HEADER_FILE, GraphHeader, HeaderBusy, Published, shared_dir


@dataclass(frozen=True)
class Progress:
    """The graph owner's current version (``None``: nothing published yet)."""

    graph: Published | None

    @property
    def applied(self) -> int:
        """The last batch every answer reads (``0``: nothing published yet)."""
        return 0 if self.graph is None else self.graph.sequence

    def visible(self, keyed: bool) -> int:
        """The last batch served fully (what ``?sync=true`` waits for): with ``keyed`` (a ranking task
        is served), the article keys must cover it too."""
        if self.graph is None:
            return 0
        return min(self.graph.sequence, self.graph.keys_sequence) if keyed else self.graph.sequence


_headers: dict[Path, GraphHeader] = {}
_last_read: dict[Path, Progress] = {}


def read_progress(state_dir: str | Path) -> Progress:
    """The owner's current version, from its mapped header (kept open per process); while the header
    stays mid-write (an owner descheduled or killed while writing it), the last one this process read:
    the workers keep serving what they hold meanwhile too."""
    directory = shared_dir(Path(state_dir))
    header = _headers.get(directory)
    try:
        inode = (directory / HEADER_FILE).stat().st_ino
    except FileNotFoundError:
        return Progress(None)
    if header is None or header.inode != inode:  # none yet, or a new server's owner made it again
        try:
            header = _headers[directory] = GraphHeader(directory)
        except FileNotFoundError:
            return Progress(None)
    try:
        now = _last_read[directory] = Progress(header.read())
    except HeaderBusy:
        return _last_read.get(directory, Progress(None))
    return now


async def wait_visible(state_dir: str | Path, keyed: bool, sequence: int, timeout_s: float,
                       poll_s: float = 0.01) -> bool:
    """Wait until the server serves ``sequence`` fully; ``False`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while read_progress(state_dir).visible(keyed) < sequence:
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(poll_s)
    return True
