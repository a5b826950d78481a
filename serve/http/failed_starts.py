"""A worker that cannot start stops the server with one line, instead of being restarted forever.

LitServe restarts a dead inference worker for as long as the server runs (``restart_workers``), so
a worker whose ``setup`` fails every time (its bundle removed or corrupted after start-up, a model
that no longer fits in memory) was started again every few seconds, forever, while its task
answered nothing and ``/health`` stayed 503 with nothing saying why. Each start of a worker records
its outcome in the main process's stop-orders directory (:mod:`serve.processes`); after
:data:`MAX_FAILED_STARTS` failed starts in a row of one worker, the worker writes why and sends
SIGTERM to the main process, which drains and stops as on any SIGTERM (:mod:`serve.http.drain`) and
then exits with status 1 and that line, so a supervisor (systemd, Kubernetes) sees a failed service.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

from models.files import atomic_write
from serve.processes import stop_orders

MAX_FAILED_STARTS = 3
REASON_FILE = "failed-start"


@contextlib.contextmanager
def counted_start(worker: str) -> Iterator[None]:
    """Run a worker's start-up, counting the failed ones in a row (see the module docstring).

    Args:
        worker: names the worker across its restarts, e.g. ``"churn worker 0"``.
    """
    orders = stop_orders()
    if orders is None:
        yield
        return
    main_pid, directory = orders[0], orders[1].parent
    count_file = directory / f"failed-starts-{worker.replace(' ', '-')}"
    try:
        yield
    except Exception as exc:
        with contextlib.suppress(OSError, ValueError):
            failed = int(count_file.read_text()) + 1 if count_file.exists() else 1
            count_file.write_text(str(failed))
            if failed >= MAX_FAILED_STARTS:
                reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:500]
                atomic_write(directory / REASON_FILE, (
                    f"the {worker} failed to start {failed} times in a row ({reason}); "
                    "stopped the server").encode())
                os.kill(main_pid, signal.SIGTERM)
        raise
    else:
        count_file.unlink(missing_ok=True)


def failed_start_reason(directory: Path) -> str | None:
    """In the main process: why a worker stopped the server (read before the directory goes)."""
    try:
        return (directory / REASON_FILE).read_text()
    except OSError:
        return None
