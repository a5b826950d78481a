"""How the processes of one server agree on model versions: a small directory of JSON files.

The admin route runs in an API server, the poller and the models in the inference workers, each a
process of its own. They talk through a directory the main process creates at start-up (a private
temporary directory, removed when it exits):

``orders/<task>.json``
    the version the task's workers should serve: ``id`` (increasing), ``version``, ``force``,
    ``source`` (``start-up``, ``poll`` or ``admin``). Written by the main process at start-up, by
    the admin route, and by a worker whose poller promotes a new version; every worker of the task
    follows the newest order (a worker restarted by LitServe catches up with it the same way).
``workers/<task>.<pid>.json``
    each worker's state (:class:`WorkerState`): what it serves, what it is loading, the last order
    it handled and how that went, and the versions it refused and why. ``GET /models``, the admin
    route and the ``relserve_model_version`` gauge read them; files of dead workers are ignored.

Every file is replaced by a rename, so a reader never sees half of one.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from models.files import atomic_write
from serve.private_dirs import private_dir
from serve.processes import alive

ORDERS, WORKERS = "orders", "workers"
log = logging.getLogger("relserve.models")


def log_to_stderr() -> None:
    """Send this process's model-version messages (``relserve.models``) to stderr, info and up."""
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("python -m serve: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


@dataclass(frozen=True)
class Order:
    """Serve ``version`` of the task (``force``: past the deployment guard)."""

    id: int
    version: int
    force: bool = False
    source: str = "admin"
    at: float = 0.0


@dataclass
class WorkerState:
    """One worker's report (see the module docstring); times are Unix seconds."""

    task: str
    pid: int
    version: int
    loaded_at: float
    warm: bool = True
    forced: bool = False
    loading: int | None = None
    loading_since: float | None = None
    order: int = 0
    outcome: str = "serving"
    reason: str | None = None
    held_back: dict[str, str] = field(default_factory=dict)
    swap_seconds: float | None = None
    updated: float = 0.0



class ModelControl:
    """The control directory ``root`` (see the module docstring)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @classmethod
    def create(cls) -> ModelControl:
        """A fresh private directory, removed when this process exits (not when a forked child does)."""
        control = cls(private_dir("relserve-models-"))
        for name in (ORDERS, WORKERS):
            (control.root / name).mkdir()
        owner = os.getpid()
        atexit.register(lambda: os.getpid() == owner and shutil.rmtree(control.root, ignore_errors=True))
        return control

    def order(self, task: str, version: int, force: bool = False, source: str = "admin") -> Order:
        """Tell every worker of ``task`` to serve ``version``; returns the order written."""
        previous = self.current_order(task)
        number = max(time.time_ns(), previous.id + 1 if previous else 0)
        order = Order(number, version, force, source, time.time())
        path = self.root / ORDERS / f"{task}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(asdict(order)))
        return order

    def current_order(self, task: str) -> Order | None:
        """The newest order for ``task`` (``None``: none yet)."""
        with contextlib.suppress(OSError, ValueError, TypeError):
            return Order(**json.loads((self.root / ORDERS / f"{task}.json").read_text()))
        return None

    def report(self, state: WorkerState) -> None:
        """Publish one worker's state."""
        state.updated = time.time()
        path = self.root / WORKERS / f"{state.task}.{state.pid}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(asdict(state)))

    def forget(self, task: str, pid: int) -> None:
        (self.root / WORKERS / f"{task}.{pid}.json").unlink(missing_ok=True)

    def workers(self, task: str | None = None) -> list[WorkerState]:
        """The states of the live workers (of ``task``), oldest pid first."""
        states = []
        for path in (self.root / WORKERS).glob(f"{task or '*'}.*.json"):
            with contextlib.suppress(OSError, ValueError, TypeError):
                state = WorkerState(**json.loads(path.read_text()))
                if alive(state.pid) and (task is None or state.task == task):
                    states.append(state)
        return sorted(states, key=lambda s: s.pid)


def order_outcome(states: list[WorkerState], order: Order, expected: int) -> dict[str, Any] | None:
    """How ``order`` went once ``expected`` workers handled it: ``{"outcome": "serving"}``,
    ``"refused"`` with the first reason, or ``"superseded"`` (a later order came first); ``None``
    while some worker has not finished with it."""
    done = [s for s in states if s.order >= order.id]
    if len(done) < expected or any(s.loading is not None for s in done):
        return None
    mine = [s for s in done if s.order == order.id]
    if not mine:
        return {"outcome": "superseded"}
    refused = [s for s in mine if s.outcome == "refused"]
    if refused:
        return {"outcome": "refused", "reason": refused[0].reason}
    return {"outcome": "serving"}
