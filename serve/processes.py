"""The server's processes: whether one is still running, and who reacts to SIGINT and SIGTERM.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group, and systemd's default
``KillMode=control-group`` sends SIGTERM to every process of the unit: the main process, LitServe's
Manager, the inference workers, the API servers and the background process all receive it at
once. Left to their defaults they stop in no order (an API server first, the Manager before the
drain could read it), so only the main process acts on these signals: it drains (see
:mod:`serve.http.drain`), then releases its children (:meth:`StopOrders.release`) and stops them itself.
A child ignores the group's signal until then, or until the main process is gone (``kill -9``),
after which a signal stops it as before.

The main process names a flag file and its own pid in ``RELSERVE_STOP_ORDERS``; every child
inherits the environment, forked or spawned, so no handle has to be passed down to it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing import resource_tracker
from pathlib import Path
from types import FrameType
from typing import Any

from serve.private_dirs import private_dir, start_time

STOP_ORDERS_ENV = "RELSERVE_STOP_ORDERS"
PR_SET_NAME = 15  # prctl(2)
OWNER_NAME, BACKGROUND_NAME = "relserve-graph", "relserve-bg"
GROUP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
Handler = Callable[[int, FrameType | None], Any]


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie, exited but not yet reaped by its
    parent, counts as gone), read from ``/proc/PID/stat``."""
    return start_time(pid) is not None


class StopOrders:
    """The main process's side: it alone handles SIGINT and SIGTERM, and says when children may stop.

    Use :func:`give_stop_orders`; :func:`release_children` releases them from anywhere.

    Args:
        on_signal: called in the main process for every SIGINT or SIGTERM, with the signal.
    """

    def __init__(self, on_signal: Callable[[int], None]) -> None:
        self.pid = os.getpid()
        self._dir = private_dir("relserve-stop-")
        self.flag = self._dir / "released"
        self._on_signal = on_signal
        os.environ[STOP_ORDERS_ENV] = f"{self.pid}:{self.flag}"
        for signum in GROUP_SIGNALS:
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if os.getpid() != self.pid:  # a forked child (the Manager, an API server) inherited this handler
            _child_handler(signum, frame)
            return
        self._on_signal(signum)

    def release(self) -> None:
        """From now on a SIGINT or SIGTERM stops a child (the main process is about to send them)."""
        self.flag.touch()

    def close(self) -> None:
        """Remove the flag (the main process is done with its children; one still running is
        released when the main process exits)."""
        shutil.rmtree(self._dir, ignore_errors=True)
        os.environ.pop(STOP_ORDERS_ENV, None)


_orders: list[StopOrders] = []  # the main process's, once given


def give_stop_orders(on_signal: Callable[[int], None]) -> StopOrders:
    """Handle SIGINT and SIGTERM in this (main) process only, before it starts any child.

    Args:
        on_signal: called for every SIGINT or SIGTERM the main process receives, with the signal.
    """
    orders = StopOrders(on_signal)
    _orders[:] = [orders]
    return orders


def release_children() -> None:
    """Let the children stop on SIGINT or SIGTERM: called by whatever is about to stop them."""
    for orders in _orders:
        if os.getpid() == orders.pid:
            orders.release()


def stop_orders() -> tuple[int, Path] | None:
    """In a child: the main process's pid and its release flag, or ``None`` outside a server."""
    orders = os.environ.get(STOP_ORDERS_ENV)
    if not orders:
        return None
    pid, flag = orders.split(":", 1)
    return int(pid), Path(flag)


def _released() -> bool:
    orders = stop_orders()
    return orders is None or orders[1].exists() or not alive(orders[0])


def _child_handler(signum: int, frame: FrameType | None) -> None:
    if _released():
        signal.signal(signum, signal.SIG_DFL)  # what a child did on this signal before
        os.kill(os.getpid(), signum)


@contextmanager
def signals_held() -> Iterator[None]:
    """Block SIGINT in this thread while it spawns a child.

    The mask survives ``exec``, so the child starts with SIGINT blocked until it calls
    :func:`defer_to_main`: a Ctrl-C during its imports (seconds of torch) waits for its handler
    instead of a ``KeyboardInterrupt`` traceback; one sent here waits until the block ends.
    multiprocessing starts its resource tracker the same way. SIGTERM keeps its default there:
    it ends a child that has nothing to clean up yet at once, as the main process's
    ``terminate()`` wants (held, it would wait for a ``kill()`` seconds later).
    """
    # Starting multiprocessing's resource tracker (the first spawn does) unblocks both signals.
    resource_tracker.ensure_running()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def name_process(name: str) -> None:
    """Set this process's name as ``ps`` and ``/proc/PID/comm`` show it (Linux; at most 15 bytes), so
    that tools tell the server's own helper processes (the graph owner, the background process) from
    LitServe's spawned inference workers, which share their command line."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def set_thread_niceness(nice: int) -> bool:
    """Give the calling thread (and the threads it starts from now on) the niceness ``nice``; whether
    it could (a lower one than the process's needs ``CAP_SYS_NICE`` (root), or an ``RLIMIT_NICE`` of
    at least ``20 - nice``: ``docker run --ulimit nice=25``). Linux sets a niceness per thread."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except OSError:
        return False
    return True


def keep_progress_bars_in_process() -> None:
    """In a spawned child (an inference worker, the graph owner, the background process), before
    anything draws a progress bar: give tqdm a thread lock. Its default lock is a multiprocessing
    one, which a spawned process makes as a named semaphore for the resource tracker to unlink; a
    child stopped by a signal never unlinks it, so every stop of a server that compiled (Inductor
    waits on its kernels under a tqdm bar) ended with "resource_tracker: There appear to be N
    leaked semaphore objects". A child's bars share no terminal line with another process's, so a
    thread lock is all they need."""
    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())


def defer_to_main() -> None:
    """In a spawned child, first thing: ignore SIGINT and SIGTERM until the main process releases
    its children, then unblock SIGINT (:func:`signals_held`).

    Outside a server whose main process gives stop orders (no ``RELSERVE_STOP_ORDERS``) it only
    unblocks them: the signals keep their default effect.
    """
    if os.environ.get(STOP_ORDERS_ENV):
        for signum in GROUP_SIGNALS:
            signal.signal(signum, _child_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])


def defer_handlers_to_main() -> None:
    """In a child that installed handlers of its own (uvicorn's graceful exit in an API server):
    keep them, but let them run only once the main process has released its children."""
    if not os.environ.get(STOP_ORDERS_ENV):
        return
    for signum in GROUP_SIGNALS:
        own = signal.getsignal(signum)
        if callable(own):
            signal.signal(signum, _deferred(own))


def _deferred(own: Handler) -> Handler:
    def handler(signum: int, frame: FrameType | None) -> None:
        if _released():
            own(signum, frame)

    return handler
