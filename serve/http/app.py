"""Assemble the LitServer: one API per task bundle, admission control, metrics, error shape.

Process layout (``python -m serve``): the main process (socket, worker monitor, SIGTERM drain),
LitServe's Manager process (the request queues), spawned inference workers per task and forked
uvicorn API servers that validate bodies, apply :class:`serve.http.admission.Admission` and answer HTTP;
how many of each, and their torch threads, :mod:`serve.layout` derives from the cores.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import litserve as ls
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.middleware.gzip import GZipMiddleware

from serve.config import ServeConfig
from serve.graph.owner_keys import RankingTask
from serve.graph.supervisor import GraphOwnerProcess
from serve.http import litserve_compat as compat
from serve.http.admission import Admission, AdmissionState
from serve.http.apis import API_CLASSES, WorkerSettings
from serve.http.errors import ERROR_RESPONSES, http_error_handler, validation_error_handler
from serve.http.metrics import LiveGauges, metrics_route
from serve.ingest import server as ingestion
from serve.ingest.auth import Credentials, KeyAuth
from serve.processes import release_children
from serve.versions import admin as model_admin
from serve.versions.bundles import TaskBundle

METRICS_PATH = "/metrics"


@dataclass
class BuiltServer:
    """A configured, not yet running server and the shared state its drain needs (:mod:`serve.http.drain`)."""

    server: ls.LitServer
    admission: AdmissionState
    config: ServeConfig
    accelerator: str
    background: ingestion.BackgroundProcess | None = None
    owner: GraphOwnerProcess | None = None

    def run(self) -> None:
        """Serve until shut down (blocks).

        Raises:
            RuntimeError: a worker's ``setup()`` failed before any worker was ready.
        """
        try:
            if self.owner is not None:
                self.owner.start()  # before the workers: their setup() waits for its first version
            if self.background is not None:
                self.background.start()
            self.server.run(host=self.config.host, port=self.config.port,
                            num_api_servers=self.config.api_servers, generate_client_file=False,
                            log_level=self.config.log_level, access_log=False)
        except RuntimeError:
            # LitServe gives up start-up ("One or more workers failed to start") without stopping
            # the workers still in setup() or its Manager; the interpreter would wait for them.
            self._stop_children()
            if not self.admission.draining.value:  # not a start-up stopped by a signal (serve.http.drain)
                raise
        finally:
            if self.background is not None:
                self.background.stop()
            if self.owner is not None:
                self.owner.stop()

    def _stop_children(self) -> None:
        release_children()  # they ignore SIGTERM until now (serve.processes)
        workers = compat.inference_workers(self.server)
        for worker in workers:
            worker.terminate()
        deadline = time.monotonic() + 5  # one for all: a stuck worker must not delay the next one's kill()
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
            if worker.is_alive():
                worker.kill()
        manager = compat.manager(self.server)
        if manager is not None:
            manager.shutdown()


def new_litserver(apis: list[ls.LitAPI], config: ServeConfig, accelerator: str,
                  middlewares: list | None = None) -> ls.LitServer:
    """The LitServer options of ``config`` (shared with ``serve.bench.ceiling_server``)."""
    return compat.LitServer(
        apis, accelerator=accelerator, devices=1 if accelerator == "cuda" else "auto",
        workers_per_device=config.workers_per_task, timeout=config.request_timeout_s,
        max_payload_size=config.max_payload_bytes, restart_workers=True, fast_queue=config.fast_queue,
        middlewares=middlewares or [])


def build_server(config: ServeConfig, bundles: list[TaskBundle], accelerator: str) -> BuiltServer:
    """A LitServer serving ``bundles`` as configured.

    Args:
        config: server settings.
        bundles: checked task bundles (see :func:`serve.versions.bundles.find_bundles`).
        accelerator: ``"cpu"`` or ``"cuda"`` (resolved, never ``"auto"``: LitServe's own
            detection only finds CUDA if torch happens to be imported already).
    """
    config, _ = config.with_layout(len(bundles), accelerator)  # a no-op when the caller resolved it
    threads = config.threads
    control, versions = model_admin.start_up(config, bundles)  # model versions (serve.versions.swap)
    apis = [API_CLASSES[b.task](WorkerSettings(
        bundle_dir=str(b.bundle_dir), snapshot_dir=str(b.snapshot_dir), compile=config.compile,
        cuda_graphs=config.cuda_graphs, max_batch_size=config.max_batch_size,
        batch_timeout_s=config.batch_timeout_s, threads=threads,
        compile_cache_dir=config.compile_cache_dir and str(config.compile_cache_dir),
        ingest=config.ingest, models=versions[b.task])) for b in bundles]
    admission = AdmissionState({api.api_path: config.max_queue for api in apis})
    server = new_litserver(apis, config, accelerator, middlewares=[
        (Admission, {"state": admission, "deadline_s": config.request_deadline_s,
                     "retry_after_s": config.retry_after_s})])
    app = server.app
    # Compressing ~100-byte JSON answers costs CPU and saves nothing.
    app.user_middleware = [m for m in app.user_middleware if m.cls is not GZipMiddleware]
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(HTTPException, http_error_handler)
    _document_errors(app, {api.api_path for api in apis})
    collectors, background, owner = [_live_gauges(server, admission)], None, None
    credentials = Credentials.from_env()
    if config.ingest is not None:
        keyed = [b.task for b in bundles if API_CLASSES[b.task].task_spec.ranks]  # ranking tasks
        service = ingestion.install(app, config.ingest, bundles[0].snapshot_dir, bool(keyed),
                                    draining=lambda: bool(admission.draining.value))
        collectors.append(ingestion.gauges(service, [b.task for b in bundles], keyed))
        artifacts = bundles[0].snapshot_dir.parent
        background = ingestion.BackgroundProcess(config.ingest, artifacts)
        ranking = [RankingTask(b.task, str(b.bundle_dir), versions[b.task], config.compile != "none")
                   for b in bundles if b.task in keyed]
        owner = GraphOwnerProcess(config.ingest, artifacts, admission.graph_down, ranking, threads)
    if config.ingest is not None or credentials.read is not None:
        # Outermost: credentials are checked before admission counts a request or a body is read.
        app.add_middleware(KeyAuth, credentials=credentials, read_paths=frozenset(admission.limits),
                           guard_writes=config.ingest is not None)
    collectors.append(model_admin.install(app, control, config, bundles, credentials))
    app.add_api_route(METRICS_PATH, metrics_route(*collectors), methods=["GET"], include_in_schema=False)
    return BuiltServer(server, admission, config, accelerator, background, owner)


def _live_gauges(server: ls.LitServer, admission: AdmissionState) -> LiveGauges:
    def in_flight(path: str) -> Any:
        return lambda: admission.in_flight[path].value

    def queued(path: str) -> Any:
        # The queues exist once run() starts; the API servers are forked after that.
        return lambda: compat.request_queue(server, path).qsize()

    tasks = {path.rsplit("/", 1)[-1]: path for path in admission.limits}
    return LiveGauges({
        "relserve_inflight_requests": ("Admitted requests not yet answered (queued or predicting).",
                                       {task: in_flight(path) for task, path in tasks.items()}),
        "relserve_queue_depth": ("Requests waiting in the task's queue for a worker.",
                                 {task: queued(path) for task, path in tasks.items()}),
    })


def _document_errors(app: Any, paths: set[str]) -> None:
    """Re-register the prediction routes with their error answers in OpenAPI.

    LitServe adds its routes without ``responses=`` and FastAPI resolves those when a route is
    built, so the documented answers need a fresh route with the same endpoint and dependencies.
    """
    for route in list(app.router.routes):
        if isinstance(route, APIRoute) and route.path in paths:
            app.router.routes.remove(route)
            app.add_api_route(route.path, route.endpoint, methods=["POST"], dependencies=route.dependencies,
                              responses=ERROR_RESPONSES, summary=f"Predict {route.path.rsplit('/', 1)[-1]}")
