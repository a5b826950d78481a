"""serve.http.admission.Admission driven as a plain ASGI app: bound, drain, content type, deadline."""

from __future__ import annotations

import asyncio
import gc
import json

import pytest
from prometheus_client import CollectorRegistry

from serve.http.admission import Admission, AdmissionState
from serve.http.metrics import RequestMetrics

PATH = "/predict/churn"


class SlowApp:
    """Answers 200 at once, once ``release()`` was called (``held``), or never (``delay_s`` None);
    counts calls."""

    def __init__(self, delay_s: float | None = 0.0, held: bool = False) -> None:
        self.delay_s = delay_s
        self.calls = 0
        self.held = held
        self._released: asyncio.Event | None = None

    def release(self) -> None:
        self.released.set()

    @property
    def released(self) -> asyncio.Event:
        if self._released is None:  # created in the running event loop
            self._released = asyncio.Event()
        return self._released

    async def __call__(self, scope, receive, send) -> None:
        self.calls += 1
        if self.delay_s is None:
            await asyncio.Event().wait()
        if self.held:
            await self.released.wait()
        await asyncio.sleep(self.delay_s)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


async def call(app, path: str = PATH, method: str = "POST", content_type: bytes | None = b"application/json"):
    headers = [] if content_type is None else [(b"content-type", content_type)]
    scope = {"type": "http", "path": path, "method": method, "headers": headers}
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, json.loads(body) if body else None


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


def make(inner, registry, limit: int = 2, deadline_s: float = 5.0) -> tuple[Admission, AdmissionState]:
    state = AdmissionState({PATH: limit})
    return Admission(inner, state, deadline_s=deadline_s, retry_after_s=3,
                     metrics=RequestMetrics(registry=registry)), state


def test_over_the_bound_answers_503_with_retry_after_at_once(registry):
    inner = SlowApp(held=True)
    admission, state = make(inner, registry, limit=2)

    async def burst():
        calls = [asyncio.create_task(call(admission)) for _ in range(5)]
        for _ in range(10_000):  # the 503s come back while the two admitted are held
            if sum(c.done() for c in calls) == 3:
                break
            await asyncio.sleep(0)
        assert inner.calls == 2 and [c.result()[0] for c in calls if c.done()] == [503] * 3
        inner.release()
        return await asyncio.gather(*calls)

    results = asyncio.run(burst())
    statuses = sorted(status for status, _, _ in results)
    assert statuses == [200, 200, 503, 503, 503]
    rejected = [(h, b) for s, h, b in results if s == 503]
    assert all(h["retry-after"] == "3" and "overloaded" in b["detail"] for h, b in rejected)
    assert inner.calls == 2
    assert state.total_in_flight() == 0
    assert sample(registry, "relserve_rejected_total", task="churn", reason="overloaded") == 3
    assert sample(registry, "relserve_requests_total", task="churn", status="200") == 2
    assert sample(registry, "relserve_request_duration_seconds_count", task="churn", status="503") == 3


def test_draining_refuses_predictions_and_health_but_not_other_routes(registry):
    inner = SlowApp()
    admission, state = make(inner, registry)
    state.start_draining()
    status, headers, body = asyncio.run(call(admission))
    assert (status, headers["connection"], body["detail"]) == (503, "close", "shutting down")
    assert asyncio.run(call(admission, "/health", "GET"))[0] == 503
    assert asyncio.run(call(admission, "/metrics", "GET"))[0] == 200
    assert inner.calls == 1
    assert sample(registry, "relserve_rejected_total", task="churn", reason="draining") == 1


@pytest.mark.parametrize("content_type", [b"application/json", b"application/json; charset=utf-8",
                                          b"application/vnd.api+json", b"APPLICATION/JSON"])
def test_json_content_types_are_admitted(registry, content_type):
    admission, _ = make(SlowApp(), registry)
    assert asyncio.run(call(admission, content_type=content_type))[0] == 200


@pytest.mark.parametrize("content_type", [b"text/plain", b"application/x/y+json", b"application/jsonp"])
def test_other_content_types_get_415_naming_the_type(registry, content_type):
    # application/x/y+json: two slashes, which FastAPI's RFC 2045 parsing reads as text/plain.
    inner = SlowApp()
    admission, state = make(inner, registry)
    status, _, body = asyncio.run(call(admission, content_type=content_type))
    assert status == 415 and content_type.decode() in body["detail"] and "application/json" in body["detail"]
    assert inner.calls == 0 and state.total_in_flight() == 0


@pytest.mark.parametrize("content_type, shown", [(None, "got none"), (b"", "got ''"),
                                                 (b"text/plain" + b"x" * 500, "got 'text/plain")])
def test_a_missing_or_empty_content_type_gets_415_too(registry, content_type, shown):
    # FastAPI reads such a body as bytes, so it would fail validation with a misleading 422.
    inner = SlowApp()
    admission, _ = make(inner, registry)
    status, _, body = asyncio.run(call(admission, content_type=content_type))
    assert status == 415 and shown in body["detail"] and len(body["detail"]) < 200
    assert inner.calls == 0


def test_the_first_content_type_header_decides_as_in_starlette(registry):
    inner = SlowApp()
    admission, _ = make(inner, registry)
    scope = {"type": "http", "path": PATH, "method": "POST",
             "headers": [(b"content-type", b"text/plain"), (b"content-type", b"application/json")]}
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(admission(scope, receive, send))
    assert sent[0]["status"] == 415 and inner.calls == 0


def test_a_request_without_answer_gets_504_at_the_deadline_and_frees_its_slot(registry):
    admission, state = make(SlowApp(None), registry, limit=1, deadline_s=0.1)
    status, _, body = asyncio.run(call(admission))
    assert status == 504 and "0.1 s" in body["detail"]
    assert state.total_in_flight() == 0
    assert sample(registry, "relserve_rejected_total", task="churn", reason="deadline") == 1


def test_unguarded_paths_and_methods_pass_through(registry):
    inner = SlowApp()
    admission, _ = make(inner, registry, limit=0)
    assert asyncio.run(call(admission, "/predict/other"))[0] == 200
    assert asyncio.run(call(admission, PATH, "GET"))[0] == 200
    assert inner.calls == 2 and sample(registry, "relserve_requests_total", task="churn", status="200") == 0


def test_the_first_request_freezes_the_heap_once(registry, monkeypatch):
    """The objects alive at the first request leave the collector's reach (long full collections set
    the p99 under load); objects made later are collected as usual. (Frozen objects can still be
    freed by reference counting, so the frozen count may fall between requests: the test counts
    the freezes themselves.)"""
    gc.unfreeze()
    freezes = []
    real_freeze = gc.freeze
    monkeypatch.setattr(gc, "freeze", lambda: (freezes.append(1), real_freeze())[1])
    admission, _ = make(SlowApp(), registry)
    try:
        assert gc.get_freeze_count() == 0
        assert asyncio.run(call(admission))[0] == 200
        assert len(freezes) == 1 and gc.get_freeze_count() > 0
        assert asyncio.run(call(admission))[0] == 200
        assert len(freezes) == 1  # once
    finally:
        gc.unfreeze()
