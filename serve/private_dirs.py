"""A server's private temporary directories, and what a killed server left of them.

The main process makes a few directories of its own (the multiprocess metrics in ``/dev/shm``, the
stop orders' flag, the model-control directory, the published graph versions of ``--state-dir``)
and removes them when it exits. ``SIGKILL`` (the kernel's OOM killer, ``kill -9``) gives it no
chance, so each directory holds a file naming the process that made it, with that process's start
time (a pid alone may be reused); a server that makes a directory of the same kind first removes
those whose maker is gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

OWNER_FILE = "relserve.owner"  # "<pid> <start time in clock ticks after boot>"


def start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot, ``/proc/PID/stat``); ``None``: no such
    process, or a zombie (exited, not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[-1].split()
    except OSError:
        return None
    if len(fields) < 20 or fields[0] == b"Z":
        return None
    return int(fields[19])


def maker(path: Path) -> tuple[int, int] | None:
    """``(pid, start time)`` of the process that made directory ``path`` (``None``: not named, as in
    an older server's directory or one being made right now)."""
    try:
        pid, started = (int(part) for part in (Path(path) / OWNER_FILE).read_text().split())
    except (OSError, ValueError):
        return None
    return pid, started


def _owner_gone(path: Path) -> bool:
    """Whether ``path`` names its maker and that process is gone (unknown: not gone)."""
    made_by = maker(path)
    return made_by is not None and start_time(made_by[0]) != made_by[1]


def sweep(prefix: str, parent: Path) -> list[Path]:
    """Remove this user's directories ``parent/prefix*`` whose maker is gone; returns them."""
    removed = []
    for path in Path(parent).glob(f"{prefix}*"):
        with contextlib.suppress(OSError):
            if path.is_dir() and path.stat().st_uid == os.getuid() and _owner_gone(path):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


def claim(path: Path) -> Path:
    """Make ``path`` (if missing) and name this process as its maker; returns it."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / OWNER_FILE).write_text(f"{os.getpid()} {start_time(os.getpid())}")
    return path


def private_dir(prefix: str, parent: Path | None = None) -> Path:
    """A new private directory ``parent/prefix*`` (default: the system's temporary directory) that
    names this process as its maker, after removing the ones of the same prefix a killed process
    left (:func:`sweep`). The caller removes it when done."""
    parent = Path(parent or tempfile.gettempdir())
    sweep(prefix, parent)
    return claim(Path(tempfile.mkdtemp(prefix=prefix, dir=parent)))
