"""Ingestion wired into ``python -m serve``: start-up checks, routes, middlewares, gauges, file drop.

:func:`prepare` runs in the main process before anything is built (a bad key, an unwritable state
directory or an unreachable broker is one line and exit 2, and a torn WAL record is dropped here,
with a warning, before any worker replays the log). :func:`install` adds the routes and the
per-route body limit to the app before LitServe forks its API servers; :class:`BackgroundProcess`
runs the file drop and periodic compaction in a process of their own.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI
from litserve.middlewares import MaxSizeMiddleware
from starlette.middleware import Middleware

from models.store.log.format import LogError
from serve.ingest import progress
from serve.ingest.auth import WRITE_KEY_ENV, CredentialError, Credentials
from serve.ingest.config import WAL, IngestConfig
from serve.ingest.limits import BodyLimit
from serve.ingest.metrics import IngestGauges, IngestMetrics
from serve.ingest.routes import add_routes
from serve.ingest.service import IngestService
from serve.processes import release_children, signals_held

log = logging.getLogger("relserve.ingest")


def prepare(config: IngestConfig | None, artifacts: Path) -> list[str]:
    """Check credentials and the state directory, recover the log; returns warnings to print.

    Raises:
        ValueError: why the server cannot start (one line).
    """
    if not log.handlers:  # the main process: warnings (a dropped torn record) go to stderr, prefixed
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("python -m serve: warning: %(message)s"))
        handler.setLevel(logging.WARNING)
        log.addHandler(handler)
    try:
        credentials = Credentials.from_env()
    except CredentialError as e:
        raise ValueError(str(e)) from None
    if config is None:
        return []
    if credentials.write is None:
        raise ValueError(f"--state-dir turns the /ingest routes on, and they need a write key: set "
                         f"{WRITE_KEY_ENV} (or {WRITE_KEY_ENV}_FILE)")
    state = config.state_dir.resolve()
    if state == artifacts.resolve() or artifacts.resolve() in state.parents:
        raise ValueError(f"--state-dir {config.state_dir} must not be inside --artifacts (keep the "
                         "artifacts read-only)")
    try:
        state.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"--state-dir {config.state_dir}: {e.strerror}") from None
    if not os.access(state, os.W_OK):
        raise ValueError(f"--state-dir {config.state_dir} is not writable")
    warnings = []
    try:
        ingest_log = config.open_log()
        if config.log == WAL:
            ingest_log.recover()  # a torn last record is dropped here, with a warning
        else:
            ingest_log.last_sequence()
            warnings += [w for w in [ingest_log.durability_warning()] if w]
        ingest_log.close()
    except (LogError, OSError) as e:
        raise ValueError(f"ingestion log: {e}") from None
    return warnings


def install(app: FastAPI, config: IngestConfig, snapshot_dir: Path, keyed: bool,
            draining: Callable[[], bool]) -> IngestService:
    """Add the ``/ingest`` routes and the per-route body limit to ``app``; returns the service whose
    :class:`IngestGauges` the metrics route exports."""
    for i, middleware in enumerate(app.user_middleware):
        if middleware.cls is MaxSizeMiddleware:
            limit = middleware.kwargs.get("max_size")
            app.user_middleware[i] = Middleware(BodyLimit, max_size=limit, ingest_max_size=config.max_bytes)
    service = IngestService(config, snapshot_dir, keyed)
    IngestMetrics()  # every series with known labels at 0 before the first row (this process's files)
    add_routes(app, service, draining)
    return service


def gauges(service: IngestService, tasks: list[str], ranking: list[str]) -> IngestGauges:
    return IngestGauges(lambda: progress.read_progress(service.config.state_dir), tasks, ranking,
                        service.log_sequence)


class BackgroundProcess:
    """The file drop and periodic compaction (:mod:`serve.ingest.background`), in a spawned process
    of their own; it exits when the server's main process is gone, even after a ``kill -9``."""

    def __init__(self, config: IngestConfig, artifacts: Path) -> None:
        self.config = config
        self.artifacts = artifacts
        self.process: mp.process.BaseProcess | None = None

    def start(self) -> None:
        if self.config.ingest_dir is None and self.config.compact_every_s is None:
            return
        from serve.ingest.background import serve_background

        self.process = mp.get_context("spawn").Process(
            target=serve_background, args=(self.config, str(self.artifacts), os.getpid()),
            name="relserve-background", daemon=True)
        with signals_held():  # until serve_background's own handlers are in place
            self.process.start()

    def stop(self) -> None:
        if self.process is not None and self.process.is_alive():
            release_children()  # it ignores SIGTERM until released (serve.processes)
            self.process.terminate()
            self.process.join(5)
