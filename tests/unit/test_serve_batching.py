"""serve.batching.BlockingBatchedLoop on a real queue (LitServe internals: serve.litserve_compat)."""

from __future__ import annotations

import threading
import time
from queue import Queue

import litserve as ls
import pytest

from serve.batching import BlockingBatchedLoop
from serve.litserve_compat import (
    SENTINEL,
    LitAPIStatus,
    LoopResponseType,
    MessageTransport,
    StopLoopError,
    set_restart_workers,
    set_worker_id,
)


class RecordingTransport(MessageTransport):
    def __init__(self) -> None:
        self.sent: list[tuple] = []

    def send(self, item, consumer_id: int) -> None:
        self.sent.append((consumer_id, item))

    async def areceive(self, timeout=None, consumer_id=None) -> dict:
        raise NotImplementedError


def make_loop(max_batch_size: int = 3, batch_timeout: float = 0.0, request_timeout: float = 30.0):
    api = ls.LitAPI(max_batch_size=max_batch_size, batch_timeout=batch_timeout, loop=BlockingBatchedLoop())
    api.request_timeout = request_timeout
    loop = api.loop
    loop.idle_wakeup_s = 0.05
    set_restart_workers(loop, True)  # LitServe then sends START per request; this loop must not
    return api, loop


def request(uid: str, age_s: float = 0.0) -> tuple:
    return (0, uid, time.monotonic() - age_s, {"x": uid})


def test_an_idle_queue_returns_an_empty_batch_after_the_wakeup():
    api, loop = make_loop()
    started = time.monotonic()
    assert loop.get_batch_requests(api, Queue(), RecordingTransport()) == ([], [])
    assert 0.04 < time.monotonic() - started < 1.0


def test_queued_requests_form_batches_in_order_up_to_the_max():
    api, loop = make_loop(max_batch_size=3)
    queue, transport = Queue(), RecordingTransport()
    for i in range(5):
        queue.put(request(f"u{i}"))
    first, timed_out = loop.get_batch_requests(api, queue, transport)
    second, _ = loop.get_batch_requests(api, queue, transport)
    assert [uid for _, uid, _ in first] == ["u0", "u1", "u2"] and timed_out == []
    assert [uid for _, uid, _ in second] == ["u3", "u4"]
    assert transport.sent == []  # no START round trips


def test_answers_still_go_out_and_start_messages_do_not():
    _, loop = make_loop()
    transport = RecordingTransport()
    set_worker_id(loop, 0)
    loop.put_response(transport, 0, "u0", (), LitAPIStatus.START, LoopResponseType.REGULAR)
    loop.put_response(transport, 1, "u1", {"ok": 1}, LitAPIStatus.OK, LoopResponseType.REGULAR)
    assert transport.sent == [(1, ("u1", ({"ok": 1}, LitAPIStatus.OK, LoopResponseType.REGULAR, 0)))]


def test_a_batch_window_collects_requests_arriving_after_the_first():
    api, loop = make_loop(max_batch_size=8, batch_timeout=0.3)
    queue = Queue()
    queue.put(request("early"))
    threading.Timer(0.05, queue.put, args=(request("late"),)).start()
    batch, _ = loop.get_batch_requests(api, queue, RecordingTransport())
    assert [uid for _, uid, _ in batch] == ["early", "late"]


def test_requests_past_the_queue_timeout_are_reported_not_batched():
    api, loop = make_loop(request_timeout=1.0)
    queue = Queue()
    queue.put(request("stale", age_s=5.0))
    queue.put(request("fresh"))
    batch, timed_out = loop.get_batch_requests(api, queue, RecordingTransport())
    assert [uid for _, uid, _ in batch] == ["fresh"] and timed_out == [(0, "stale")]


def test_the_shutdown_sentinel_stops_the_loop():
    api, loop = make_loop()
    queue = Queue()
    queue.put(SENTINEL)
    with pytest.raises(StopLoopError):
        loop.get_batch_requests(api, queue, RecordingTransport())
