"""A doorbell beside the local log: a writer rings it after an append, a reader waits on it.

The graph owner used to look at the log 20 times a second whatever happened (each look a few dozen
microseconds of work, and a few hundred once the caches went cold between looks): most of what an
idle server with ``--state-dir`` spent beyond one without. A named pipe lets it sleep until a
batch is appended instead. :meth:`Doorbell.ring` writes one byte without blocking, and does nothing
when no one waits (the reader is not up yet, or the pipe is full of rings not yet heard);
:meth:`Doorbell.wait` blocks until a ring or a timeout and drains what rang. A ring is a hint, never
the only way a batch is found: the reader still reads the log when its wait times out.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
from pathlib import Path

# The writer finds no reader (ENXIO), a full pipe (EAGAIN), no pipe yet (ENOENT): no one to wake.
_NO_ONE = (errno.ENXIO, errno.EAGAIN, errno.ENOENT)


class Doorbell:
    """A named pipe at ``path`` (created by the first waiter).

    Args:
        path: where the pipe lives (beside the log it signals).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    def ring(self) -> None:
        """Wake the waiter, if one waits (never blocks, never raises for want of a waiter)."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno in _NO_ONE:
                return
            raise
        try:
            os.write(fd, b"\0")
        except OSError as e:
            if e.errno not in _NO_ONE:
                raise
        finally:
            os.close(fd)

    def wait(self, timeout: float) -> bool:
        """Block until a ring or ``timeout`` seconds; whether it rang."""
        fd = self._open()
        ready, _, _ = select.select([fd], [], [], max(0.0, timeout))
        if not ready:
            return False
        with contextlib.suppress(BlockingIOError):
            while os.read(fd, 4096):
                pass
        return True

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> int:
        if self._fd is None:
            with contextlib.suppress(FileExistsError):
                os.mkfifo(self.path, 0o600)
            # Read and write: the waiter then always holds a writer itself, so the pipe never reads
            # as closed (which would make every wait return at once) between two ringers.
            self._fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK)
        return self._fd
