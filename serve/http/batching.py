"""A batched loop whose idle worker sleeps instead of polling the request queue.

LitServe's ``collate_requests`` polls the Manager queue: with ``batch_timeout == 0`` it spins
on ``get_nowait()`` (most of a core per idle API), with ``batch_timeout > 0`` it calls
``get(timeout=0.001)`` about a thousand times a second. Three batched APIs on two cores cannot
afford either. Here the worker blocks in one ``get`` until a request arrives, then hands that
request plus the live queue to LitServe's own ``collate_requests``, so the batch window starts at
the first arrival and LitServe's START messages and queue-timeout (504) handling are unchanged.
With ``batch_timeout == 0`` a batch is whatever queued up while the previous batch ran. From the
server's :class:`serve.http.litserve_compat.RequestQueue` that batch comes in one round trip to the
Manager process instead of one per request.

It also drops LitServe's per-request START message (sent with ``restart_workers=True``): it
only tells the main process's worker monitor which worker holds a request, and that monitor
looks for requests in a response buffer that lives in the API servers, so it never finds one.
Each START is one more round trip through the Manager process per request; requests lost with
a dead worker are answered by :class:`serve.http.admission.Admission`'s deadline instead.

And it sends a batch's answers together: over ZeroMQ (:class:`serve.http.litserve_compat.ZMQAnswers`)
they are kept as the loop puts them and published as one message per API server when the loop
comes back for its next batch, before it waits; the Manager-queue transport sends each at once.

Depends on LitServe's ``collate_requests`` and ``BatchedLoop.get_batch_requests`` (see
:mod:`serve.http.litserve_compat`; tests/unit/test_serve_batching.py covers it).
"""

from __future__ import annotations

import time
from queue import Empty, Queue
from typing import Any

from litserve.loops import BatchedLoop

from serve.http.litserve_compat import LitAPIStatus, collate_requests


class _TakenThenQueue:
    """A view of ``queue`` that yields items already taken first and notes when each was queued;
    without a queue, ``Empty`` once they are given out."""

    def __init__(self, taken: list, queue: Queue | None) -> None:
        self._items = taken[::-1]  # popped from the end
        self._queue = queue
        self.queued_at: list[float] = []

    def _taken(self, item: Any) -> Any:
        if isinstance(item, tuple) and len(item) == 4 and isinstance(item[2], float):
            self.queued_at.append(item[2])  # LitServe's (queue id, uid, time.monotonic(), payload)
        return item

    def _next(self, block: bool, timeout: float | None) -> Any:
        if self._items:
            return self._items.pop()
        if self._queue is None:
            raise Empty
        return self._queue.get(block, timeout)

    def get_nowait(self) -> Any:
        return self._taken(self._next(False, None))

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        return self._taken(self._next(block, timeout))


class BlockingBatchedLoop(BatchedLoop):
    """``BatchedLoop`` that waits for the first request in a blocking ``get``.

    Use as ``LitAPI(max_batch_size=N, batch_timeout=T, loop=BlockingBatchedLoop())``. If the API
    has a ``queue_waits(seconds)`` method, it gets each batch's queueing delays: from the API
    server's put to the batch leaving the queue (CLOCK_MONOTONIC is one clock for all processes).
    """

    # An idle worker wakes up this often, so the loop stays responsive to process shutdown.
    idle_wakeup_s: float = 1.0

    def __init__(self) -> None:
        super().__init__()
        self._answers: dict[int, list] = {}  # per API server, the answers not sent yet

    def get_batch_requests(self, lit_api: Any, request_queue: Queue, transport: Any) -> tuple[list, list]:
        self.send_answers(transport)
        view = self._queued(lit_api, request_queue)
        if view is None:
            return [], []
        batch = collate_requests(self, lit_api, view, transport)
        record = getattr(lit_api, "queue_waits", None)
        if record is not None and view.queued_at:
            now = time.monotonic()
            record([now - queued for queued in view.queued_at])
        return batch

    def _queued(self, lit_api: Any, request_queue: Any) -> _TakenThenQueue | None:
        """What the next batch is collated from, once a request arrived (``None``: none did).

        From a :class:`serve.http.litserve_compat.RequestQueue`, what is queued comes in one round
        trip; a greedy batch (``batch_timeout == 0``) is that and no more, one with a window also
        waits on the queue for late arrivals."""
        if hasattr(request_queue, "get_batch"):
            taken = request_queue.get_batch(self.idle_wakeup_s, lit_api.max_batch_size)
            late = None if lit_api.batch_timeout == 0 else request_queue
            return _TakenThenQueue(taken, late) if taken else None
        try:
            return _TakenThenQueue([request_queue.get(timeout=self.idle_wakeup_s)], request_queue)
        except Empty:
            return None

    def put_response(self, transport: Any, response_queue_id: int, uid: str, response_data: Any,
                     status: LitAPIStatus, response_type: Any) -> None:
        if status == LitAPIStatus.START:
            return
        if not hasattr(transport, "send_many"):
            super().put_response(transport, response_queue_id, uid, response_data, status, response_type)
            return
        # LitServe's answer message, as LitLoop.put_response builds it
        answer = (uid, (response_data, status, response_type, self.worker_id))
        self._answers.setdefault(response_queue_id, []).append(answer)

    def send_answers(self, transport: Any) -> None:
        """Send every answer kept since the last call, one message per API server."""
        answers, self._answers = self._answers, {}
        for consumer_id, items in answers.items():
            transport.send_many(items, consumer_id)
