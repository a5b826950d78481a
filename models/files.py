"""Atomic file writes (torch-free): a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def atomic_write(path: str | Path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename.

    The temporary name carries the process id and a random suffix, so several processes writing
    the same file (two workers of one task saving one compile cache) never write into each
    other's temporary file; the last rename wins and every rename installs a complete file.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
