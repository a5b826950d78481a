"""What enters the server: bounded in-flight requests, drain on shutdown, and a per-request deadline.

LitServe's queues are unbounded, its ``timeout`` only drops requests still queued when a worker
takes them, and a request whose worker dies is never answered. :class:`Admission` is one pure
ASGI middleware in front of the prediction routes that

* answers ``503`` + ``Retry-After`` at once, without reading the body, when a task already has
  its bound of requests in flight (queued or predicting), so overload sheds instead of queueing;
* answers ``503`` + ``Connection: close`` to new requests (and ``/health``) once draining, so a
  load balancer moves on while the requests in flight finish;
* answers ``415`` to a body not sent as JSON (or without a Content-Type), before FastAPI turns
  it into a puzzling 422;
* answers ``504`` to a request without a response after ``deadline_s`` (a request lost with its
  worker), and records every prediction request's status and latency.

The shared counters in :class:`AdmissionState` must be created in the main process before
LitServe forks its API servers: Starlette builds middlewares lazily in each forked process, so
counters made in ``__init__`` would be per process and the bound would multiply.
"""

from __future__ import annotations

import asyncio
import email.message
import functools
import gc
import json
import multiprocessing as mp
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from serve.http.metrics import RequestMetrics

HEALTH_PATH = "/health"


@dataclass
class AdmissionState:
    """Counters shared by every API server process.

    Args:
        limits: per prediction path, e.g. ``"/predict/churn"``, the most requests in flight.
    """

    limits: dict[str, int]
    in_flight: dict[str, Any] = field(init=False)
    draining: Any = field(init=False)
    graph_down: Any = field(init=False)  # 1 while the graph owner restarts (serve.graph.supervisor)

    def __post_init__(self) -> None:
        self.in_flight = {path: mp.Value("i", 0) for path in self.limits}
        self.draining = mp.Value("b", 0)
        self.graph_down = mp.Value("b", 0)

    def total_in_flight(self) -> int:
        return sum(value.value for value in self.in_flight.values())

    def start_draining(self) -> None:
        self.draining.value = 1


@functools.lru_cache(maxsize=256)  # parsing a header with email.message costs ~20 us per request
def _is_json(content_type: str) -> bool:
    """Whether FastAPI parses a body of this type as JSON, by its own rule (RFC 2045 parsing)."""
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json"
                                                                 or subtype.endswith("+json"))


def _content_type(scope: Scope) -> str | None:
    # The first one, as Starlette's request.headers.get() reads it.
    raw = next((value for name, value in scope["headers"] if name == b"content-type"), None)
    return None if raw is None else raw.decode("latin-1")


async def _answer(send: Send, status: int, detail: str,
                  headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


class Admission:
    """ASGI middleware guarding the paths of ``state.limits`` (see the module docstring).

    Args:
        app: the wrapped application.
        state: shared counters, built in the main process.
        deadline_s: longest a prediction request may take before it is answered 504; set it
            past LitServe's queue timeout plus the slowest batch, so it only fires for lost requests.
        retry_after_s: ``Retry-After`` of an overload 503.
        metrics: where requests are recorded (built in this process if ``None``).
    """

    def __init__(self, app: ASGIApp, state: AdmissionState, deadline_s: float, retry_after_s: int = 1,
                 metrics: RequestMetrics | None = None) -> None:
        self.app = app
        self.state = state
        self.deadline_s = deadline_s
        self.retry_after = str(retry_after_s).encode()
        self.metrics = metrics or RequestMetrics(tasks=[path.rsplit("/", 1)[-1] for path in state.limits])
        self._heap_frozen = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._heap_frozen:
            # Once, in the API server process: the objects alive now (imports, app, torch) move out
            # of the collector's reach. Full collections over them took 100-200 ms each under load
            # and set the p99 (docs/decisions.md, "`gc.freeze()` after setup").
            gc.freeze()
            self._heap_frozen = True
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == HEALTH_PATH and self.state.draining.value:
            await _answer(send, 503, "shutting down", ((b"connection", b"close"),))
            return
        if path == HEALTH_PATH and self.state.graph_down.value:
            await _answer(send, 503, "the live graph's owner is starting; answers come from the last "
                                     "published graph meanwhile")
            return
        if path not in self.state.limits or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        task = path.rsplit("/", 1)[-1]
        started = time.perf_counter()
        status = await self._admit(scope, receive, send, path, task)
        self.metrics.answered(task, status, time.perf_counter() - started)

    async def _admit(self, scope: Scope, receive: Receive, send: Send, path: str, task: str) -> int:
        if self.state.draining.value:
            self.metrics.rejected(task, "draining")
            await _answer(send, 503, "shutting down", ((b"connection", b"close"),))
            return 503
        content_type = _content_type(scope)
        # FastAPI reads a body without a Content-Type as bytes, which fails validation with a 422.
        if content_type is None or not _is_json(content_type):
            got = "none" if content_type is None else repr(content_type[:100])
            await _answer(send, 415, f"Content-Type must be application/json, got {got}")
            return 415
        limit, in_flight = self.state.limits[path], self.state.in_flight[path]
        with in_flight.get_lock():
            admitted = in_flight.value < limit
            if admitted:
                in_flight.value += 1
        if not admitted:
            self.metrics.rejected(task, "overloaded")
            await _answer(send, 503, f"overloaded: {limit} {task} requests in flight; retry later",
                          ((b"retry-after", self.retry_after),))
            return 503
        try:
            return await self._run_with_deadline(scope, receive, send, task)
        finally:
            with in_flight.get_lock():
                in_flight.value -= 1

    async def _run_with_deadline(self, scope: Scope, receive: Receive, send: Send, task: str) -> int:
        status: int | None = None

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            async with asyncio.timeout(self.deadline_s):
                await self.app(scope, receive, recording_send)
        except TimeoutError:
            if status is not None:  # the response had started: nothing clean left to send
                raise
            self.metrics.rejected(task, "deadline")
            await _answer(send, 504, f"no answer within {self.deadline_s:g} s")
            return 504
        return 500 if status is None else status
