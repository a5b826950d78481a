"""``GET /models`` and ``POST /admin/models/{task}/load``: which model versions serve, and changing them.

``GET /models`` (open, like ``/metrics``) answers ``{"models": {task: {...}}}``: the serving version,
its directory, ``metrics.json`` summary and training snapshot, when it was loaded, whether every
worker is warm, a load under way, each worker's version, the versions in the repository and those
held back (by the deployment guard, or refused as broken) with the reason.

``POST /admin/models/{task}/load?version=N[&force=true][&wait=false][&timeout=S]`` needs the write
key (``Authorization: Bearer $RELSERVE_WRITE_KEY``, compared with :func:`hmac.compare_digest`):
401 without credentials, 403 with a wrong one, and 403 naming the variable when the server was
started without a write key (the route is there, but nothing can use it). Then:

* 404: the task is not served, or has no version N;
* 409: the deployment guard holds version N back (the reason, and ``force=true`` to override);
* 200: every worker serves version N (at once if it already did); the body is the task's entry;
* 422: a worker refused version N (it does not load, fails its checksum or its smoke prediction);
  the old version keeps serving;
* 202: ``wait=false``, or still loading after ``timeout`` seconds (default 600): see ``/models``.

Loading happens in every worker of the task in the background (:mod:`serve.versions.swap`); requests keep
being answered by the old version until each worker switches. Rollback is loading an older version.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Query
from starlette.requests import Request
from starlette.responses import JSONResponse

from serve.ingest.auth import WRITE_KEY_ENV, Credentials
from serve.versions.bundles import TaskBundle
from serve.versions.guard import judge
from serve.versions.model_control import ModelControl, log, log_to_stderr, order_outcome
from serve.versions.model_metrics import ModelGauges, ModelMetrics
from serve.versions.models_config import ModelsConfig
from serve.versions.repository import RepositoryError, describe, find_version, iso_time, task_versions
from serve.versions.swap import SwapSettings

if TYPE_CHECKING:
    from serve.config import ServeConfig

MODELS_PATH = "/models"
LOAD_PATH = "/admin/models/{task}/load"
WAIT_POLL_S = 0.05
DEFAULT_TIMEOUT_S = 600.0


@dataclass
class ModelAdmin:
    """What the routes read: the control directory, the repository, and per task its worker count.

    Args:
        control: the server's control directory.
        artifacts: the model repository.
        workers: task -> inference workers serving it.
        models: the version settings the server started with.
        credentials: the bearer keys (the write key guards the load route).
    """

    control: ModelControl
    artifacts: Path
    workers: dict[str, int]
    models: ModelsConfig
    credentials: Credentials

    def entry(self, task: str) -> dict[str, Any]:
        """The task's ``/models`` entry."""
        states = self.control.workers(task)
        order = self.control.current_order(task)
        serving = min((s.version for s in states), default=order.version if order else None)
        try:
            versions = task_versions(self.artifacts, task)
        except RepositoryError:
            versions = []
        current = next((v for v in versions if v.version == serving), None)
        loading = next((s for s in states if s.loading is not None), None)
        held_back: dict[str, str] = {}
        for state in states:
            held_back.update(state.held_back)
        return {
            **(describe(current) if current else {"version": serving}),
            "loaded_at": iso_time(max((s.loaded_at for s in states if s.version == serving), default=None)),
            "warm": len(states) >= self.workers[task],
            "forced": any(s.forced for s in states if s.version == serving),
            "loading": None if loading is None else {"version": loading.loading,
                                                     "since": iso_time(loading.loading_since)},
            "last_order": None if order is None else {"version": order.version, "source": order.source,
                                                      "force": order.force, "at": iso_time(order.at)},
            "workers": [{"pid": s.pid, "version": s.version, "loaded_at": iso_time(s.loaded_at),
                         "loading": s.loading, "swap_seconds": s.swap_seconds} for s in states],
            "versions": [v.version for v in versions],
            "held_back": dict(sorted(held_back.items(), key=lambda item: int(item[0]))),
            "pinned": self.models.pin(task) is not None,
        }

    async def list_models(self, request: Request) -> JSONResponse:
        return JSONResponse({"models": {task: self.entry(task) for task in self.workers}})

    def _refusal(self, request: Request) -> JSONResponse | None:
        if self.credentials.write is None:
            return JSONResponse({"detail": f"the admin routes need a write key: start the server with "
                                           f"{WRITE_KEY_ENV} (or {WRITE_KEY_ENV}_FILE) set"}, status_code=403)
        header = request.headers.get("authorization")
        refusal = self.credentials.refusal(None if header is None else header.encode("latin-1"), "write")
        if refusal is None:
            return None
        status, detail = refusal
        headers = {"WWW-Authenticate": 'Bearer realm="relserve"'} if status == 401 else None
        return JSONResponse({"detail": detail}, status_code=status, headers=headers)

    async def load(self, request: Request, task: str, version: int = Query(ge=1),
                   force: bool = False, wait: bool = True,
                   timeout: float = Query(DEFAULT_TIMEOUT_S, gt=0, le=3600)) -> JSONResponse:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        if task not in self.workers:
            return JSONResponse({"detail": f"this server does not serve {task!a} "
                                           f"(it serves {', '.join(self.workers)})"}, status_code=404)
        try:
            candidate = find_version(self.artifacts, task, version)
            available = [v.version for v in task_versions(self.artifacts, task)]
        except RepositoryError as e:
            return JSONResponse({"detail": str(e)}, status_code=409)
        if candidate is None:
            return JSONResponse({"detail": f"no version {version} of {task} in {self.artifacts / task} "
                                           f"(versions: {', '.join(map(str, available))})"}, status_code=404)
        states = self.control.workers(task)
        serving = min((s.version for s in states), default=None)
        if (serving == version and all(s.version == version and s.loading is None for s in states)
                and len(states) >= self.workers[task]):
            return JSONResponse({"task": task, "version": version, "outcome": "serving", "changed": False})
        if not force:
            current = None if serving is None else find_version(self.artifacts, task, serving)
            verdict = judge(candidate, current)
            if not verdict.promote:
                ModelMetrics(task).refused("guard")
                log.warning("admin: %s version %d not loaded: %s", task, version, verdict.reason)
                return JSONResponse({"detail": f"{verdict.reason}; add force=true to load it anyway",
                                     "task": task, "version": version, "serving": serving}, status_code=409)
        order = self.control.order(task, version, force=force, source="admin")
        log.info("admin: %s version %d ordered%s (serving %s)", task, version, " with force" if force else "",
                 serving)
        deadline = time.monotonic() + timeout
        while wait and time.monotonic() < deadline:
            outcome = order_outcome(self.control.workers(task), order, self.workers[task])
            if outcome is not None:
                return self._answer(task, version, outcome)
            await asyncio.sleep(WAIT_POLL_S)
        detail = "loading in the background" if not wait else f"still loading after {timeout:g} s"
        return JSONResponse({"task": task, "version": version, "outcome": "loading",
                             "detail": f"{detail}: see GET {MODELS_PATH}"}, status_code=202)

    def _answer(self, task: str, version: int, outcome: dict[str, Any]) -> JSONResponse:
        if outcome["outcome"] == "serving":
            return JSONResponse({"task": task, "version": version, "outcome": "serving", "changed": True,
                                 "model": self.entry(task)})
        if outcome["outcome"] == "superseded":
            return JSONResponse({"detail": "a later order for this task came first: see GET /models",
                                 "task": task, "version": version}, status_code=409)
        return JSONResponse({"detail": outcome["reason"], "task": task, "version": version,
                             "serving": self.entry(task)["version"]}, status_code=422)


def start_up(config: ServeConfig, bundles: list[TaskBundle]) -> tuple[ModelControl, dict[str, SwapSettings]]:
    """The server's control directory with each task's start-up version ordered, and the settings
    each task's workers follow versions with."""
    control = ModelControl.create()
    settings = {}
    for bundle in bundles:
        control.order(bundle.task, bundle.version, force=config.models.force, source="start-up")
        settings[bundle.task] = SwapSettings(
            control_dir=str(control.root), artifacts=str(config.artifacts), version=bundle.version,
            poll_s=config.models.poll_s, pinned=config.models.pin(bundle.task) is not None,
            force=config.models.force, held_back=bundle.held_back)
    return control, settings


def install(app: FastAPI, control: ModelControl, config: ServeConfig, bundles: list[TaskBundle],
            credentials: Credentials) -> ModelGauges:
    """Add ``GET /models`` and the load route to ``app`` (before LitServe forks its API servers);
    returns the gauges ``/metrics`` exports."""
    log_to_stderr()
    workers = {b.task: config.workers_per_task for b in bundles}
    add_routes(app, ModelAdmin(control, Path(config.artifacts), workers, config.models, credentials))
    return ModelGauges(control)


def add_routes(app: FastAPI, admin: ModelAdmin) -> None:
    """``GET /models`` and the load route, answered by ``admin``."""
    app.add_api_route(MODELS_PATH, admin.list_models, methods=["GET"], summary="Serving model versions")
    app.add_api_route(LOAD_PATH, admin.load, methods=["POST"], summary="Load a model version (hot swap)")
