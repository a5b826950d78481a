"""Whether a process id still names a running process: the liveness check of the state files that
worker processes leave behind (ingestion progress, model-control reports)."""

from __future__ import annotations


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie, exited but not yet reaped by its
    parent, counts as gone), read from ``/proc/PID/stat``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False
