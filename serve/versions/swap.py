"""Hot swap inside an inference worker: a new model version is loaded, warmed up and checked in a background
thread, then switched to between two batches.

:class:`ModelSlot` holds the worker's :class:`Served` model. ``predict`` reads it once per batch, so a batch
runs on one model from start to end and its answers name that model's version; requests in flight when the
switch happens finish on the old model. The slot's thread follows the task's orders
(:mod:`serve.versions.model_control`: the start-up choice, the admin route, a promotion by a poller) and,
every ``--model-poll`` seconds, looks for new versions in the repository, which the deployment guard
(:mod:`serve.versions.guard`) may hold back. A version is loaded like the first one (the compile cache beside
it included), its weights checked for NaN, every bucket compiled and run, and one real batch predicted (the
smoke test); a version that fails any of it is refused with a logged reason and a metric, and the old version
keeps serving. Once the old model's last batch is done, its compiled graphs are evicted
(:mod:`serve.versions.compiled_regions`) and its memory is freed. Loading and checking one version is
:mod:`serve.versions.model_load`.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serve.gil import FAST_SWITCHING
from serve.versions.compiled_regions import ForwardGate, allow_swaps, evict_region, return_free_memory
from serve.versions.guard import Verdict, judge
from serve.versions.model_control import ModelControl, Order, WorkerState, log, log_to_stderr
from serve.versions.model_load import Refused, Served, load_version
from serve.versions.model_metrics import ModelMetrics
from serve.versions.models_config import DEFAULT_POLL_S
from serve.versions.repository import ModelVersion, RepositoryError, find_version, task_versions

VERSION_HEADER = "X-Model-Version"  # on every prediction answer: the version that computed it
ORDER_POLL_S = 0.25  # how often a worker looks for a new order: one small file read
RELEASE_TIMEOUT_S = 60.0  # the old model's last batch has long finished by then


@dataclass(frozen=True)
class SwapSettings:
    """What a worker needs to follow model versions (small and picklable).

    Args:
        control_dir: the server's :class:`serve.versions.model_control.ModelControl` directory.
        artifacts: the model repository.
        version: the version the worker starts with.
        poll_s: seconds between looks for new versions (0: no polling).
        pinned: the version was pinned at start-up; new versions are not promoted by polling.
        force: promote polled versions past the deployment guard (``--force``).
        held_back: ``(version, reason)`` of the versions the start-up choice passed over.
    """

    control_dir: str
    artifacts: str
    version: int
    poll_s: float = DEFAULT_POLL_S
    pinned: bool = False
    force: bool = False
    held_back: tuple[tuple[int, str], ...] = field(default_factory=tuple)


class ModelSlot:
    """A worker's serving model and the thread that swaps it (see the module docstring).

    Args:
        api: the worker's LitAPI; the slot sets its ``served`` and ``inference`` attributes (a new
            model reads the same graph: a live graph follows ingestion by itself, see serve.graph).
        served: the model loaded in ``setup()``.
        settings: how to follow versions (``None``: the version never changes).
        load: ``(bundle directory, graph) -> TaskInference``, loaded as ``setup()`` loads the first.
    """

    def __init__(self, api: Any, served: Served, settings: SwapSettings | None,
                 load: Callable[[Path, Any], Any]) -> None:
        self.api = api
        self.task: str = api.task
        self.settings = settings
        self.load = load
        self.gate = ForwardGate()
        self.region = self.gate.wrap(served.inference)
        self.baseline = self.gate.graphs_not_loaded()
        api.served, api.inference = served, served.inference
        self.control = ModelControl(settings.control_dir) if settings else None
        self.metrics: ModelMetrics | None = None
        self.state: WorkerState | None = None
        self.seen = served.version
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def recompiles(self) -> int:
        """Graphs compiled since the first warm-up other than by loading versions (should stay 0)."""
        return self.gate.graphs_not_loaded() - self.baseline

    def start(self) -> None:
        """Report the serving version and start following orders and the repository."""
        if self.settings is None:
            return
        log_to_stderr()
        allow_swaps()
        served = self.api.served
        self.metrics = ModelMetrics(self.task)
        held_back = {str(v): why for v, why in self.settings.held_back}
        self.state = WorkerState(self.task, os.getpid(), served.version, served.loaded_at,
                                 forced=served.forced, held_back=held_back)
        with contextlib.suppress(RepositoryError, OSError):
            self.seen = max([served.version, *(v.version for v in self._versions())])
        self.control.report(self.state)
        self._thread = threading.Thread(target=self._run, name=f"relserve-models-{self.task}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _versions(self) -> list[ModelVersion]:
        return task_versions(Path(self.settings.artifacts), self.task)

    def _run(self) -> None:
        self.gate.loader = threading.get_ident()
        next_poll = time.monotonic() + self.settings.poll_s
        while not self._stop.wait(ORDER_POLL_S):
            try:
                order = self.control.current_order(self.task)
                if order is not None and order.id > self.state.order:
                    self._follow(order)
                elif self.settings.poll_s > 0 and not self.settings.pinned and time.monotonic() >= next_poll:
                    next_poll = time.monotonic() + self.settings.poll_s
                    self._poll()
            except Exception:  # the thread must outlive any one bad step; the old model keeps serving
                log.exception("worker %s (%s): following model versions failed", os.getpid(), self.task)

    def _report(self, **changes: Any) -> None:
        for name, value in changes.items():
            setattr(self.state, name, value)
        self.control.report(self.state)

    def _poll(self) -> None:
        """Order the newest complete version that appeared since the last look, if the guard allows it."""
        versions = self._versions()
        # A version without all its files is being written (or was abandoned: a newer one passes it by).
        ready = [v for v in versions if v.version > self.seen and v.complete]
        if not ready:
            return
        self.seen = ready[-1].version
        candidate = next((v for v in versions if v.version == self.api.served.version), None)
        promoted = None
        for version in ready:
            verdict = Verdict(True) if self.settings.force else judge(version, candidate)
            if verdict.promote:
                candidate = promoted = version
                continue
            self.metrics.refused("guard")
            self.state.held_back[str(version.version)] = f"not promoted: {verdict.reason}"
            log.warning("worker %s (%s): %s not promoted automatically: %s (load it with "
                        "POST /admin/models/%s/load?version=%d&force=true)", os.getpid(), self.task,
                        version.directory, verdict.reason, self.task, version.version)
        self.control.report(self.state)
        if promoted is not None:
            log.info("worker %s (%s): new version %d found in %s", os.getpid(), self.task, promoted.version,
                     promoted.directory.parent)
            self.control.order(self.task, promoted.version, force=self.settings.force, source="poll")

    def _follow(self, order: Order) -> None:
        """Serve ``order.version``: load, warm up, check, switch; or refuse it and keep the old one."""
        if order.version == self.api.served.version:
            self._report(order=order.id, outcome="serving", reason=None)
            return
        self._report(loading=order.version, loading_since=time.time())
        started = time.perf_counter()
        try:
            with FAST_SWITCHING:  # Dynamo's tracing is pure Python: see serve.gil
                artifacts = Path(self.settings.artifacts)
                version = find_version(artifacts, self.task, order.version)
                if version is None:
                    raise Refused("load", f"no version {order.version} in {artifacts / self.task}")
                served, region = load_version(self.load, self.gate, version, self.api.inference.snapshot,
                                              order.force)
        except (Refused, RepositoryError) as e:
            reason = getattr(e, "reason", "load")
            self.metrics.refused(reason)
            self.state.held_back[str(order.version)] = f"refused: {e}"
            self._report(loading=None, loading_since=None, order=order.id, outcome="refused", reason=str(e))
            log.warning("worker %s (%s): version %d refused (%s), version %d keeps serving: %s", os.getpid(),
                        self.task, order.version, reason, self.api.served.version, e)
            return
        seconds = time.perf_counter() - started
        released, model_class, old_region, old_version = self._switch(served, region)
        self.metrics.swapped(seconds)
        self.state.held_back.pop(str(order.version), None)
        self._report(version=served.version, loaded_at=served.loaded_at, forced=served.forced, loading=None,
                     loading_since=None, order=order.id, outcome="serving", reason=None, swap_seconds=seconds)
        log.info("worker %s (%s): now serving version %d (was %d; loaded and warmed up in %.1f s, %s)",
                 os.getpid(), self.task, served.version, old_version, seconds, order.source)
        if released.wait(RELEASE_TIMEOUT_S):
            with self.gate.exclusive():
                evicted = evict_region(model_class, old_region)
            return_free_memory()
            log.info("worker %s (%s): version %d freed (%d compiled graphs evicted)", os.getpid(), self.task,
                     old_version, evicted)
        else:
            log.warning("worker %s (%s): version %d is still referenced %.0f s after the switch; its "
                        "compiled graphs stay cached", os.getpid(), self.task, old_version, RELEASE_TIMEOUT_S)

    def _switch(self, served: Served, region: int | None) -> tuple[threading.Event, type, int | None, int]:
        """Make ``served`` the model of every next batch; returns an event set once the old model is
        gone (its last batch done), its class and region, and its version."""
        api, old = self.api, self.api.served
        inference, previous = served.inference, old.inference
        api.served, api.inference = served, inference
        released = threading.Event()
        weakref.finalize(previous, released.set)
        old_region, self.region = self.region, region
        return released, type(previous.model), old_region, old.version
