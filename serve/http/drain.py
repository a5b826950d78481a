"""Stopping ``python -m serve`` on SIGINT or SIGTERM, sent to the main process or its whole group.

Only the main process acts on the signal (:mod:`serve.processes`: the children ignore it until
released). It refuses new requests (``503`` and ``/health`` ``503``, :mod:`serve.http.admission`), lets
the requests in flight finish for up to ``--drain-timeout`` seconds, then releases its children
and starts LitServe's graceful shutdown (the API servers, then the workers, then the Manager).
A second signal cuts the wait short. The exit status is ``0`` after SIGTERM and ``130``
(``128 + SIGINT``, what a shell reports for Ctrl-C) after SIGINT.
"""

from __future__ import annotations

import gc
import signal
import threading
import time

import litserve as ls

from serve.http import litserve_compat as compat
from serve.http.admission import AdmissionState
from serve.http.failed_starts import failed_start_reason
from serve.http.litserve_compat import WorkerSetupStatus
from serve.processes import StopOrders, give_stop_orders


class Drain:
    """Handles SIGINT and SIGTERM for a built, not yet running server (installed on creation).

    Args:
        server: the LitServer about to run.
        admission: its admission state (draining flag, requests in flight).
        timeout_s: how long to wait for the requests in flight (``--drain-timeout``).
    """

    poll_s = 0.02

    def __init__(self, server: ls.LitServer, admission: AdmissionState, timeout_s: float) -> None:
        self.server = server
        self.admission = admission
        self.timeout_s = timeout_s
        self.signal: int | None = None
        self._hurry = threading.Event()
        self.orders: StopOrders = give_stop_orders(self._on_signal)

    @property
    def exit_code(self) -> int:
        """``130`` after SIGINT, ``0`` otherwise."""
        return 128 + signal.SIGINT if self.signal == signal.SIGINT else 0

    def failed_start(self) -> str | None:
        """Why a worker stopped the server (:mod:`serve.http.failed_starts`), or ``None``; read it
        before :meth:`close`."""
        return failed_start_reason(self.orders.flag.parent)

    def _on_signal(self, signum: int) -> None:
        if self.signal is not None:
            self._hurry.set()  # a second Ctrl-C: stop without waiting for the requests in flight
            return
        self.signal = signum
        # A Manager proxy belongs to one thread, and the main thread is blocked in
        # _shutdown_event.wait() on one: the drain talks to the Manager from a thread of its own.
        threading.Thread(target=self.drain_and_stop, name="relserve-drain", daemon=True).start()

    def drain_and_stop(self) -> None:
        """Refuse new requests, wait for those in flight (up to the timeout), then shut down."""
        self.admission.start_draining()
        deadline = time.monotonic() + self.timeout_s
        while self.admission.total_in_flight() > 0 and time.monotonic() < deadline:
            if self._hurry.wait(self.poll_s):
                break
        while compat.shutdown_event(self.server) is None:  # a signal before run() made the event
            time.sleep(0.05)
        if not self._any_worker_ready():
            # LitServe's run() is still waiting for a first ready worker, which may take minutes
            # of compiling; marking the workers failed makes it give up now (BuiltServer.run).
            status = compat.workers_setup_status(self.server)
            for worker in list(status.keys()):
                status[worker] = WorkerSetupStatus.ERROR
        compat.shutdown_event(self.server).set()  # LitServe's graceful shutdown (it releases the children)

    def _any_worker_ready(self) -> bool:
        return any(s == WorkerSetupStatus.READY for s in compat.workers_setup_status(self.server).values())

    def close(self) -> None:
        """Remove the stop orders (after the server stopped), just before the process exits."""
        self.orders.close()
        # The interpreter's last collections walk everything this process built (bundles checked,
        # torch, FastAPI): 5 s of exit on 2 busy cores. The memory goes back with the process anyway.
        gc.freeze()
