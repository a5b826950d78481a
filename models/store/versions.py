"""Snapshot versions in a server's state directory: compacted snapshots, the ``current`` pointer, leases.

``<state dir>/snapshots/``
    ``<version>/``   one compacted snapshot each (``seq<log sequence>-<unix time>``)
    ``current``      the name of the version to serve, replaced atomically (write, fsync, rename)
    ``leases/``      ``<version>.<pid>.<random>``: a process that has a version open holds a lease

:func:`compact` writes a new version under a temporary name, fsyncs every file and the directory,
renames it into place, then switches ``current``: a reader sees the old version or the complete new
one, never a partial one, also after a crash at any point. :func:`remove_unused` deletes a version
only when it is not ``current`` and no live process holds a lease on it (a lease of a process that
no longer runs does not count), and half-written versions of processes that died. Without
``current`` (no compaction yet) a server serves ``<artifacts>/snapshot``, which is never removed.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from models.files import fsync_path
from models.store.compact import materialize
from models.store.live_view import LiveView
from models.store.snapshot import GraphSnapshot

log = logging.getLogger(__name__)

SNAPSHOTS_DIR = "snapshots"
CURRENT_FILE = "current"
LEASES_DIR = "leases"
_BUILDING = ".building-"


def current_snapshot_dir(artifacts: Path, state_dir: Path | None) -> Path:
    """The snapshot to serve: the state directory's current version, else ``artifacts/snapshot``."""
    if state_dir is not None:
        pointer = Path(state_dir) / SNAPSHOTS_DIR / CURRENT_FILE
        if pointer.is_file():
            return pointer.parent / pointer.read_text().strip()
    return Path(artifacts) / "snapshot"


@dataclass
class Lease:
    """A process's claim on a version (see the module docstring); :meth:`release` it when done."""

    path: Path

    @classmethod
    def hold(cls, version: Path) -> Lease | None:
        """A lease on ``version`` if it lives in a state directory (``None`` for the artifacts' snapshot)."""
        version = Path(version)
        if version.parent.name != SNAPSHOTS_DIR:
            return None
        leases = version.parent / LEASES_DIR
        leases.mkdir(exist_ok=True)
        path = leases / f"{version.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        path.touch()
        return cls(path)

    def release(self) -> None:
        self.path.unlink(missing_ok=True)


@dataclass(frozen=True)
class Compaction:
    """What :func:`compact` did: the new version, the log sequence it holds, and how long it took."""

    directory: Path
    sequence: int
    seconds: float
    removed: tuple[Path, ...]


def compact(view: LiveView, state_dir: Path) -> Compaction:
    """Write ``view`` as a new version, make it current, remove versions no process uses."""
    started = time.perf_counter()
    root = Path(state_dir) / SNAPSHOTS_DIR
    root.mkdir(parents=True, exist_ok=True)
    name = f"seq{view.sequence:010d}-{time.time_ns()}"
    building = root / f"{_BUILDING}{os.getpid()}-{name}"
    materialize(view, building)
    for path in building.iterdir():
        fsync_path(path)
    fsync_path(building)
    building.rename(root / name)
    fsync_path(root)
    pointer = root / f".{CURRENT_FILE}.{os.getpid()}.tmp"
    pointer.write_text(name + "\n")
    fsync_path(pointer)
    os.replace(pointer, root / CURRENT_FILE)
    fsync_path(root)
    return Compaction(root / name, view.sequence, time.perf_counter() - started, remove_unused(state_dir))


def remove_unused(state_dir: Path) -> tuple[Path, ...]:
    """Delete every version that is not current and that no live process holds a lease on."""
    root = Path(state_dir) / SNAPSHOTS_DIR
    if not root.is_dir():
        return ()
    pointer = root / CURRENT_FILE
    current = pointer.read_text().strip() if pointer.is_file() else None
    held = set()
    for lease in (root / LEASES_DIR).glob("*") if (root / LEASES_DIR).is_dir() else ():
        version, pid, _ = [*lease.name.rsplit(".", 2), "", ""][:3]
        if pid.isdigit() and _alive(int(pid)):
            held.add(version)
        else:
            lease.unlink(missing_ok=True)
    removed = []
    for path in root.iterdir():
        if not path.is_dir() or path.name in (LEASES_DIR, current) or path.name in held:
            continue
        if path.name.startswith(_BUILDING):
            pid = path.name[len(_BUILDING):].split("-")[0]
            if pid.isdigit() and _alive(int(pid)):
                continue  # being written
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return tuple(removed)


def open_current(artifacts: Path, state_dir: Path | None) -> tuple[GraphSnapshot, Lease | None]:
    """Open the snapshot to serve and hold a lease on it (release it when switching away).

    The lease is taken before ``current`` is read a second time: a version still current then is
    safe from :func:`remove_unused`, which only runs after ``current`` has moved on."""
    for _ in range(10):
        directory = current_snapshot_dir(artifacts, state_dir)
        lease = Lease.hold(directory)
        if lease is None:
            return GraphSnapshot.open(directory), None
        if current_snapshot_dir(artifacts, state_dir) == directory and directory.is_dir():
            try:
                return GraphSnapshot.open(directory), lease
            except Exception:
                lease.release()
                raise
        lease.release()  # a compaction switched versions meanwhile: take the new one
    raise RuntimeError(f"{state_dir}: the current snapshot version kept changing while opening it")


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
