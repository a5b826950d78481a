"""serve.http.batching.BlockingBatchedLoop on a real queue (LitServe internals:
serve.http.litserve_compat)."""

from __future__ import annotations

import threading
import time
from queue import Queue

import litserve as ls
import pytest

from serve.http.batching import BlockingBatchedLoop
from serve.http.litserve_compat import (
    SENTINEL,
    LitAPIStatus,
    LoopResponseType,
    MessageTransport,
    RequestQueue,
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


class RecordingQueue(Queue):
    """A queue that records how it is read and lets ``late`` arrive once the first item is taken."""

    def __init__(self, late: tuple | None = None) -> None:
        super().__init__()
        self.calls: list[tuple[bool, float | None]] = []
        self.late = late
        self.taken = 0

    def get(self, block: bool = True, timeout: float | None = None):
        self.calls.append((block, timeout))
        if self.late is not None and self.taken:
            super().put(self.late)
            self.late = None
        item = super().get(block, timeout)
        self.taken += 1
        return item


def test_an_idle_queue_is_waited_on_in_one_blocking_get_then_gives_an_empty_batch():
    api, loop = make_loop()
    queue = RecordingQueue()
    assert loop.get_batch_requests(api, queue, RecordingTransport()) == ([], [])
    assert queue.calls == [(True, loop.idle_wakeup_s)]  # blocked until the wake-up, never spun


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


class BatchingTransport(RecordingTransport):
    """A transport that takes a batch's answers in one call, as ZMQAnswers does."""

    def send_many(self, items: list, consumer_id: int) -> None:
        self.sent.append((consumer_id, list(items)))


def test_a_batch_s_answers_go_out_together_before_the_loop_waits_again():
    api, loop = make_loop()
    transport = BatchingTransport()
    set_worker_id(loop, 0)
    for uid, server in (("u0", 0), ("u1", 1), ("u2", 0)):
        loop.put_response(transport, server, uid, {"ok": uid}, LitAPIStatus.OK, LoopResponseType.REGULAR)
    loop.put_response(transport, 0, "u3", (), LitAPIStatus.START, LoopResponseType.REGULAR)
    assert transport.sent == []  # kept until the loop comes back for its next batch
    queue = RecordingQueue()
    queue.put(request("u4"))
    batch, _ = loop.get_batch_requests(api, queue, transport)
    answer = lambda uid: (uid, ({"ok": uid}, LitAPIStatus.OK, LoopResponseType.REGULAR, 0))  # noqa: E731
    assert transport.sent == [(0, [answer("u0"), answer("u2")]), (1, [answer("u1")])]
    assert [uid for _, uid, _ in batch] == ["u4"]
    loop.get_batch_requests(api, queue, transport)  # nothing kept: nothing more sent
    assert len(transport.sent) == 2


class CountingRequestQueue(RequestQueue):
    """The server's request queue, in process, counting the calls a worker makes (each would be a
    round trip to the Manager)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def get_batch(self, timeout: float, most: int) -> list:
        self.calls += 1
        return super().get_batch(timeout, most)

    def get(self, block: bool = True, timeout: float | None = None):
        self.calls += 1
        return super().get(block, timeout)


def test_a_greedy_batch_comes_from_the_request_queue_in_one_call():
    api, loop = make_loop(max_batch_size=3)
    queue = CountingRequestQueue()
    queue.put_many([request(f"u{i}") for i in range(5)])
    first, _ = loop.get_batch_requests(api, queue, RecordingTransport())
    assert [uid for _, uid, _ in first] == ["u0", "u1", "u2"] and queue.calls == 1
    second, _ = loop.get_batch_requests(api, queue, RecordingTransport())
    assert [uid for _, uid, _ in second] == ["u3", "u4"] and queue.calls == 2
    assert loop.get_batch_requests(api, queue, RecordingTransport()) == ([], [])  # idle: waits, then empty
    queue.put_many([request("u5"), SENTINEL])
    with pytest.raises(StopLoopError):
        loop.get_batch_requests(api, queue, RecordingTransport())


def test_a_batch_window_on_the_request_queue_still_waits_for_late_requests():
    api, loop = make_loop(max_batch_size=2, batch_timeout=10.0)
    queue = CountingRequestQueue()
    queue.put(request("early"))
    late = threading.Timer(0.2, queue.put, args=(request("late"),))
    late.start()
    batch, _ = loop.get_batch_requests(api, queue, RecordingTransport())
    late.join()
    assert [uid for _, uid, _ in batch] == ["early", "late"]


def test_a_batch_window_collects_requests_arriving_after_the_first():
    # "late" arrives only once the loop has taken "early"; the batch closes when full (2), and the
    # window is long enough that no stall of a loaded machine can close it first.
    api, loop = make_loop(max_batch_size=2, batch_timeout=10.0)
    queue = RecordingQueue(late=request("late"))
    queue.put(request("early"))
    batch, _ = loop.get_batch_requests(api, queue, RecordingTransport())
    assert [uid for _, uid, _ in batch] == ["early", "late"]


def test_requests_past_the_queue_timeout_are_reported_not_batched():
    api, loop = make_loop(request_timeout=60.0)
    queue = Queue()
    queue.put(request("stale", age_s=600.0))
    queue.put(request("fresh"))
    batch, timed_out = loop.get_batch_requests(api, queue, RecordingTransport())
    assert [uid for _, uid, _ in batch] == ["fresh"] and timed_out == [(0, "stale")]


def test_the_shutdown_sentinel_stops_the_loop():
    api, loop = make_loop()
    queue = Queue()
    queue.put(SENTINEL)
    with pytest.raises(StopLoopError):
        loop.get_batch_requests(api, queue, RecordingTransport())
