"""Where the graph owner says which live-graph version is current: one small memory-mapped file.

The owner (:mod:`serve.graph`) writes every version of the live graph to ``v<N>.graph`` in the
machine's shared directory (:func:`shared_dir`, in ``/dev/shm`` where it exists) and then publishes
``N`` here; a worker compares :meth:`GraphHeader.version` (one 8-byte read of a mapped page, no
system call) with the version it holds before each answer, and opens the new file only when it
moved. Fields are read under a sequence lock: the owner makes the lock word odd, writes, then makes
it even again; a reader retries while it is odd or it changed during the read.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from models.files import memory_dir

HEADER_FILE = "head"
SIZE = 4096
_FIELDS = struct.Struct("<QQqqqqdqq")  # lock, version, sequence, snapshot, delta rows, pid, time, keys
_KEYS_AT = struct.calcsize("<QQqqqqd")  # offset of keys_version in _FIELDS
_PATH = struct.Struct("<H")
_PATH_AT = _FIELDS.size
MAX_PATH = SIZE - _PATH_AT - _PATH.size
SHARED_PREFIX = f"relserve-{os.getuid()}-"  # the shared directories in /dev/shm, one per state directory


class HeaderBusy(RuntimeError):
    """The header stayed mid-write longer than a reader waits."""


def shared_dir(state_dir: Path) -> Path:
    """The directory of one server's published versions: in ``/dev/shm`` (memory, never written to
    disk) when it exists, else ``STATE_DIR/graph``; one per state directory."""
    shm = memory_dir()
    if shm is not None:
        digest = hashlib.sha1(str(Path(state_dir).resolve()).encode()).hexdigest()[:16]
        return shm / f"{SHARED_PREFIX}{digest}"
    return Path(state_dir) / "graph"


def version_file(directory: Path, version: int) -> Path:
    return Path(directory) / f"v{version}.graph"


def keys_file(directory: Path, number: int, task: str) -> Path:
    """A ranking task's article keys, published as number ``number`` (:attr:`Published.keys_version`)."""
    return Path(directory) / f"k{number}-{task}.keys"


@dataclass(frozen=True)
class Published:
    """One published version.

    Args:
        version: its number (``v<version>.graph``), increasing for the life of the directory.
        sequence: the last log batch it holds.
        snapshot_version: its base snapshot's log sequence.
        delta_rows: transactions and nodes it holds past the base.
        pid: the owner process that published it.
        updated: when (Unix time).
        keys_version: the number of the ranking tasks' article keys files current now (``0``: none;
            :func:`keys_file`).
        keys_sequence: the last log batch those keys cover.
        base_dir: its base snapshot's directory.
    """

    version: int
    sequence: int
    snapshot_version: int
    delta_rows: int
    pid: int
    updated: float
    keys_version: int
    keys_sequence: int
    base_dir: Path


class GraphHeader:
    """The mapped header of :func:`shared_dir` (see the module docstring)."""

    def __init__(self, directory: Path, create: bool = False) -> None:
        self.directory = Path(directory)
        path = self.directory / HEADER_FILE
        if create:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            if os.fstat(fd).st_size < SIZE:
                os.ftruncate(fd, SIZE)
        else:
            fd = os.open(path, os.O_RDONLY)
        try:
            self.inode = os.fstat(fd).st_ino
            self._map = mmap.mmap(fd, SIZE, access=mmap.ACCESS_WRITE if create else mmap.ACCESS_READ)
        finally:
            os.close(fd)

    def version(self) -> int:
        """The current version's number (``0``: none yet); cheap enough to call per answer."""
        return struct.unpack_from("<Q", self._map, 8)[0]

    def keys_version(self) -> int:
        """The current article keys' number (``0``: none yet); as cheap as :meth:`version`."""
        return struct.unpack_from("<q", self._map, _KEYS_AT)[0]

    def read(self, wait_s: float = 0.05) -> Published | None:
        """The current version (``None``: nothing published yet).

        Raises:
            HeaderBusy: the header stayed mid-write for ``wait_s`` (an owner killed while writing it
                leaves it so until the next owner publishes: keep what you hold meanwhile).
        """
        deadline = time.monotonic() + wait_s
        while True:
            lock = struct.unpack_from("<Q", self._map, 0)[0]
            if lock % 2:
                if time.monotonic() > deadline:
                    raise HeaderBusy(f"{self.directory}: the graph header is being written")
                time.sleep(0)
                continue
            fields = _FIELDS.unpack_from(self._map, 0)
            (length,) = _PATH.unpack_from(self._map, _PATH_AT)
            path = bytes(self._map[_PATH_AT + _PATH.size:_PATH_AT + _PATH.size + min(length, MAX_PATH)])
            if struct.unpack_from("<Q", self._map, 0)[0] == lock:
                break
        if not fields[1]:
            return None
        return Published(*fields[1:], base_dir=Path(path.decode()))

    def publish(self, published: Published) -> None:
        """Make ``published`` current (the owner only; its file must be complete)."""
        path = str(published.base_dir).encode()
        if len(path) > MAX_PATH:
            raise ValueError(f"snapshot path longer than {MAX_PATH} bytes: {published.base_dir}")
        lock = struct.unpack_from("<Q", self._map, 0)[0]
        lock += lock % 2  # a writer killed mid-write left it odd
        # Packed before the lock is taken: between odd and even only memory copies run, nothing that
        # allocates (a garbage collection there would keep every reader waiting).
        record = bytearray(_PATH_AT + _PATH.size + len(path))
        _FIELDS.pack_into(record, 0, lock + 1, published.version, published.sequence,
                          published.snapshot_version, published.delta_rows, published.pid, published.updated,
                          published.keys_version, published.keys_sequence)
        _PATH.pack_into(record, _PATH_AT, len(path))
        record[_PATH_AT + _PATH.size:] = path
        body = memoryview(record)[8:]
        struct.pack_into("<Q", self._map, 0, lock + 1)
        self._map[8:len(record)] = body
        struct.pack_into("<Q", self._map, 0, lock + 2)

    def close(self) -> None:
        self._map.close()
