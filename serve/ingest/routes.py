"""The ingestion routes: ``POST /ingest/{transactions,customers,articles}`` and ``GET /ingest/status``.

A batch is answered ``200 {"accepted": N, "sequence": K}`` once it is durable in the log; with
``?sync=true`` only once every inference worker serves it (article keys included), or ``504`` after
``--sync-timeout`` (the batch is durable all the same; a retry with its key answers at once). A retried
``Idempotency-Key`` (or body ``batch_id``) answers the first batch's ``accepted`` and ``sequence`` with
``Idempotent-Replayed: true``. Refusals: 409 (the key was used for another batch), 413 (too many
rows or bytes), 415 (Content-Type), 422 (bad rows, each named by index and field), 503 (shutting
down, or the log unreachable: nothing appended). The credentials are checked before any of this,
by :class:`serve.ingest.auth.KeyAuth`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Query
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from models.store.log.format import LogError
from models.store.records import KINDS
from models.store.snapshot import GraphSnapshot
from serve.ingest import progress
from serve.ingest.bodies import parse_body
from serve.ingest.body_schema import body_models, openapi_body
from serve.ingest.problems import BatchRejected, Problem
from serve.ingest.service import IngestService, node_columns

KEY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"


class IngestAnswer(BaseModel):
    """A batch acknowledged: durable in the log (and, with ``?sync=true``, served by every worker)."""

    accepted: int = Field(description="Rows in the batch.")
    sequence: int = Field(description="The batch's position in the log; a graph that serves it serves "
                                      "every batch before it.")


class IngestError(BaseModel):
    """A refused batch: ``detail`` names the row index and field of each problem (the first five)."""

    detail: str
    problems: list[dict[str, Any]] = Field(default_factory=list)


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": IngestError, "description": description} for status, description in (
        (401, "No credentials: send Authorization: Bearer <RELSERVE_WRITE_KEY>."),
        (403, "Credentials not valid for writing."),
        (409, "The Idempotency-Key was already used for a different batch."),
        (413, "Too many rows (--ingest-max-rows) or bytes (--ingest-max-bytes)."),
        (415, "Content-Type is not application/json, application/x-ndjson or text/csv."),
        (422, "A row or the body is invalid; nothing was appended."),
        (503, "Shutting down, or the log is unavailable; nothing was appended."),
        (504, "?sync=true: durable, but not served by every worker within --sync-timeout."),
    )
}


def _refused(exc: BatchRejected) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status)


def add_routes(app: FastAPI, service: IngestService, draining: Callable[[], bool]) -> None:
    """Register the routes on ``app`` (in the main process, before the API servers fork)."""
    bodies = body_models(node_columns(GraphSnapshot.open(service.snapshot_dir)), service.config.max_rows)
    for kind in KINDS:
        app.add_api_route(f"/ingest/{kind}", _endpoint(kind, service, draining), methods=["POST"],
                          response_model=IngestAnswer, responses=ERRORS, summary=f"Ingest {kind}",
                          description=__doc__.split("\n\n", 1)[1], openapi_extra=openapi_body(bodies[kind]))

    async def status() -> dict[str, Any]:
        now = progress.read_progress(service.config.state_dir)
        graph = now.graph and {"version": now.graph.version, "pid": now.graph.pid,
                               "sequence": now.graph.sequence, "delta_rows": now.graph.delta_rows,
                               "snapshot_version": now.graph.snapshot_version}
        if graph is not None:
            graph["keys_sequence"] = now.graph.keys_sequence
        return {"log_sequence": await run_in_threadpool(service.log_sequence),
                "visible_sequence": now.visible(service.keyed), "applied_sequence": now.applied,
                "graph": graph}

    app.add_api_route("/ingest/status", status, methods=["GET"],
                      summary="How far the log is, and how far the graph and the article keys serve it")


def _endpoint(kind: str, service: IngestService, draining: Callable[[], bool]) -> Callable:
    async def ingest(request: Request, sync: bool = Query(False, description="answer once every worker "
                                                                             "serves the batch")) -> Response:
        started = time.perf_counter()
        response = await _ingest(kind, request, sync, service, draining)
        service.metrics.answered(kind, response.status_code, time.perf_counter() - started)
        return response

    ingest.__name__ = f"ingest_{kind}"
    return ingest


async def _ingest(kind: str, request: Request, sync: bool, service: IngestService,
                  draining: Callable[[], bool]) -> Response:
    if draining():
        return JSONResponse({"detail": "shutting down"}, status_code=503, headers={"Connection": "close"})
    try:
        parsed = parse_body(await request.body(), request.headers.get("content-type"))
        key = request.headers.get(KEY_HEADER)
        if key is not None and parsed.batch_id is not None and key != parsed.batch_id:
            raise BatchRejected([Problem(None, "batch_id", f"differs from the {KEY_HEADER} header")])
        ingestor = await run_in_threadpool(service.ingestor)
        accepted = await run_in_threadpool(ingestor.ingest, kind, parsed.rows, key or parsed.batch_id,
                                           parsed.text)
    except BatchRejected as e:
        return _refused(e)
    except LogError as e:
        detail = f"the ingestion log is unavailable, nothing was appended ({e}); retry"
        return JSONResponse({"detail": detail}, status_code=503, headers={"Retry-After": "1"})
    answer = {"accepted": accepted.accepted, "sequence": accepted.sequence}
    headers = {REPLAYED_HEADER: "true"} if accepted.replayed else {}
    if sync and not await progress.wait_visible(service.config.state_dir, service.keyed,
                                                accepted.sequence, service.config.sync_timeout_s):
        detail = (f"durable as sequence {accepted.sequence}, but not served by every worker within "
                  f"{service.config.sync_timeout_s:g} s (--sync-timeout); GET /ingest/status shows how far "
                  "each is")
        return JSONResponse({"detail": detail, **answer}, status_code=504, headers=headers)
    return JSONResponse(answer, headers=headers)
