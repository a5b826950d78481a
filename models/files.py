"""Atomic file writes (torch-free): a reader sees the old file or the new one, never half of one;
``fsync`` of a path, file or directory (what makes a write or a rename durable); and where files
that live only as long as a server go (:func:`memory_dir`)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


@contextmanager
def atomic_open(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file to stream into; it replaces ``path`` only when the block ends without an error.

    The temporary name carries the process id and a random suffix, so several processes writing
    the same file (two workers of one task saving one compile cache) never write into each
    other's temporary file; the last rename wins and every rename installs a complete file. On an
    error (or Ctrl-C) the temporary file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(path: str | Path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename."""
    with atomic_open(path) as f:
        f.write(data.encode() if isinstance(data, str) else data)


def fsync_path(path: str | Path) -> None:
    """Flush ``path`` to disk: a file's contents, or a directory's entries (a new or renamed name)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


SHARED_MEMORY = Path("/dev/shm")


def memory_dir() -> Path | None:
    """``/dev/shm`` where it exists and is writable (memory: never written back to a disk), else ``None``.

    Files that processes of one server write all the time and nobody keeps (the metrics every
    answer updates, the published graph versions) go there: on a disk, each write to a page that
    writeback has cleaned waits for the file system, and on a journaling one that can mean waiting
    for the journal commit that the ingestion log's ``fdatasync`` starts.
    """
    if SHARED_MEMORY.is_dir() and os.access(SHARED_MEMORY, os.W_OK):
        return SHARED_MEMORY
    return None
