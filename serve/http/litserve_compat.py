"""Every LitServe name this project uses beyond LitServe's public API, in one module.

Read from **litserve 0.2.19** (``pip show litserve``; pyproject.toml pins ``>=0.2.19,<0.3``).
Public API here means what ``litserve`` and ``litserve.loops`` export (``LitAPI``, ``LitServer``,
``BatchedLoop``); everything below is underscore-prefixed or undocumented, read from the 0.2.19
sources, and may change in any release. An upgrade checks this file against the new sources
(``litserve/server.py``, ``litserve/loops/base.py``, ``litserve/utils.py``) and touches no other:
serve/ and the tests import these names from here only.

What each one is for:

* :func:`collate_requests`, :data:`SENTINEL`, :class:`StopLoopError`: the batched loop's queue
  reader (``serve.http.batching``) reuses LitServe's batch collection, its shutdown sentinel and stop signal.
* :class:`LitAPIStatus`, :class:`LoopResponseType`, :class:`WorkerSetupStatus`: the status values
  LitServe passes between API servers, workers and the main process.
* :class:`MessageTransport`: the worker-to-API-server transport interface (tests fake it);
  :class:`ZMQTransport`, the one ``fast_queue=True`` selects.
* the server accessors: the drain (:mod:`serve.http.drain`) sets LitServe's shutdown event and marks
  workers failed; a failed start-up stops the workers and the Manager; ``/metrics`` reads queue depths.
* :class:`LitServer`: LitServe's server with four fixes. (1) ``fast_queue=True`` is silently
  ignored in 0.2.19: ``LitServer.__init__`` passes ``transport_config=`` to ``TransportConfig``,
  whose field is ``transport_type``, so pydantic drops it and every server uses the Manager-queue
  transport; and were it honoured, the factory passes the broker's two addresses to
  ``ZMQTransport`` swapped, so no answer would arrive (LitServe issue 751, PR 752, open). Here the
  transport type is set by its real name and the transport is rebuilt with the addresses by name.
  (2) The transport is :class:`ZMQAnswers`: API servers receive without ``zmq.asyncio``, and its
  ``close`` in the main process, which never opened a socket (only workers and API servers do),
  does nothing; LitServe's ``ZMQTransport.close`` raises ``ValueError`` there, first thing in the
  graceful shutdown, before any worker or API server is stopped (exit 1 and orphans). (3) Its
  request queues put from a thread (:class:`BackgroundPutQueue`) and are :class:`RequestQueue`
  objects, which take many puts and give a whole batch in one round trip to the Manager each.
  (4) The main process alone answers SIGINT and SIGTERM (:mod:`serve.processes`): an API
  server's uvicorn handlers wait for its release (``lifespan``), and the graceful shutdown
  releases the children and ends the worker monitor before stopping them
  (``_perform_graceful_shutdown``).
* :func:`inject_context` replaces the batched loop's ``_inject_context``, which ran
  ``inspect.signature`` on every hook call (2 per request and 3 per batch, ~10 us each) only to
  learn whether the hook takes a ``context`` argument; here that answer is cached per function.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import pickle
import queue
import threading
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from multiprocessing.managers import SyncManager
from queue import Empty, SimpleQueue
from typing import Any

import litserve as ls
import zmq
from litserve.loops import simple_loops
from litserve.loops.base import _SENTINEL_VALUE as SENTINEL
from litserve.loops.base import _StopLoopError as StopLoopError
from litserve.loops.base import collate_requests
from litserve.transport.base import MessageTransport
from litserve.transport.factory import TransportConfig
from litserve.transport.zmq_transport import ZMQTransport
from litserve.utils import LitAPIStatus, LoopResponseType, WorkerSetupStatus

from serve.processes import defer_handlers_to_main, defer_to_main, release_children, signals_held

LITSERVE_VERSION_READ = "0.2.19"
log = logging.getLogger(__name__)

__all__ = [
    "LITSERVE_VERSION_READ",
    "SENTINEL",
    "BackgroundPutQueue",
    "LitAPIStatus",
    "LitServer",
    "LoopResponseType",
    "MessageTransport",
    "RequestQueue",
    "StopLoopError",
    "WorkerSetupStatus",
    "ZMQTransport",
    "collate_requests",
    "inference_workers",
    "inject_context",
    "manager",
    "request_queue",
    "set_restart_workers",
    "set_worker_id",
    "shutdown_event",
    "workers_setup_status",
]


class RequestQueue(queue.Queue):
    """A request queue (in the Manager process) that moves many items per round trip.

    Every call on a Manager queue is a round trip to the Manager process: a worker took a batch of
    ``n`` requests with ``n + 1`` of them (the first ``get``, ``n - 1`` ``get_nowait`` and the one
    that finds the queue empty), a sixth of a busy worker's time.
    :meth:`get_batch` hands a worker what is queued in one; :meth:`put_many` takes what an API
    server's sender thread has gathered in one.
    """

    def put_many(self, items: list) -> None:
        """Put ``items`` in order (the queue is unbounded)."""
        with self.not_empty:
            for item in items:
                self._put(item)
            self.unfinished_tasks += len(items)
            self.not_empty.notify(len(items))

    def get_batch(self, timeout: float, most: int) -> list:
        """Wait up to ``timeout`` seconds for an item, then take it and what else is queued, up to
        ``most`` in all (``[]``: none came)."""
        with self.not_empty:
            if not self.not_empty.wait_for(self._qsize, timeout):
                return []
            items = [self._get() for _ in range(min(most, self._qsize()))]
            self.not_full.notify(len(items))
            return items


SyncManager.register("RequestQueue", RequestQueue)


class BackgroundPutQueue:
    """A Manager queue whose ``put`` returns at once; a thread of the putting process sends it.

    LitServe's request handler calls ``request_queue.put`` on a Manager proxy inside the API
    server's event loop: a blocking round trip to the Manager process per request, during which
    that API server parses, validates and answers nothing. Here ``put`` appends to an in-process
    queue and one sender thread per process does the round trips in order (the socket wait
    releases the GIL, so the event loop runs meanwhile); what queued up during a round trip goes in
    the next one together when the queue takes :meth:`RequestQueue.put_many`. ``get``, ``qsize``
    and the rest go to the Manager queue itself, and a pickled copy (what a spawned worker
    receives) is the plain proxy.
    """

    def __init__(self, queue: Any) -> None:
        self._queue = queue
        self._pid: int | None = None
        self._pending: SimpleQueue | None = None

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        if self._pid != os.getpid():  # first put in this (forked) process: threads do not survive fork
            self._pending, self._pid = SimpleQueue(), os.getpid()
            threading.Thread(target=self._send, args=(self._pending,), name="relserve-queue-put",
                             daemon=True).start()
        self._pending.put(item)

    def _send(self, pending: SimpleQueue) -> None:
        many = hasattr(self._queue, "put_many")
        while True:
            items = [pending.get()]
            while many and not pending.empty():
                items.append(pending.get())
            try:
                if many:
                    self._queue.put_many(items)
                else:
                    self._queue.put(items[0])
            except (OSError, EOFError) as e:  # the Manager is gone (shutting down); the deadline answers
                log.warning("%d request(s) not queued: %s", len(items), e)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)

    def __reduce__(self) -> Any:
        return self._queue.__reduce__()


class AnswerBatch(list):
    """The answers of one worker batch for one API server, sent as one ZeroMQ message: each is
    LitServe's ``(uid, (data, status, response type, worker id))``. One pickle and one send per
    batch instead of per answer (a send wakes libzmq's I/O thread: a quarter of a busy worker's
    time went to sending answers one by one)."""


class ZMQAnswers(ZMQTransport):
    """LitServe's ZeroMQ answer transport, received in the API server without ``zmq.asyncio``.

    ``zmq.asyncio`` waits on libzmq's edge-triggered notification descriptor, and a wake-up it
    misses (pyzmq issue 2173) stalls the answer until the next message arrives: under load that
    put p99 at 190-220 ms against 80-90 ms over the Manager queue. Here the API server reads a
    plain SUB socket: it drains what has arrived, then waits for the descriptor (level-triggered,
    as asyncio watches it) or a recheck timer, whichever comes first, so a missed wake-up costs at
    most the timer. The timer starts at :attr:`recheck_s` after each answer and doubles up to
    :attr:`idle_recheck_s` while nothing arrives, so an idle server wakes 20 times a second, not
    500. Workers publish as in LitServe, or a batch's answers as one :class:`AnswerBatch`
    (:meth:`send_many`), which :meth:`areceive` hands out one at a time. Also skips LitServe's
    ``__ping__`` message, which is not a pickle, and closes quietly in a process that never opened
    a socket.
    """

    recheck_s: float = 0.002
    idle_recheck_s: float = 0.05

    def __init__(self, backend_address: str, frontend_address: str) -> None:
        super().__init__(backend_address, frontend_address)
        self._sub: zmq.Socket | None = None
        self._recheck = self.recheck_s
        self._received: deque = deque()  # the rest of the last AnswerBatch received

    def setup(self, operation: int, consumer_id: int | None = None) -> None:
        if operation != zmq.SUB:
            super().setup(operation, consumer_id)
            return
        self._sub = zmq.Context.instance().socket(zmq.SUB)
        self._sub.connect(self.frontend_address)
        self._sub.setsockopt_string(zmq.SUBSCRIBE, f"{consumer_id}|")

    def send_many(self, items: list, consumer_id: int) -> None:
        """Publish ``items`` (LitServe answers for API server ``consumer_id``) as one message."""
        self.send(items[0] if len(items) == 1 else AnswerBatch(items), consumer_id)

    async def areceive(self, consumer_id: int | None = None, timeout: float | None = None) -> Any:
        if self._received:
            return self._received.popleft()
        if self._sub is None:
            self.setup(zmq.SUB, consumer_id)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            try:
                message = self._sub.recv(zmq.NOBLOCK)
            except zmq.Again:
                if deadline is not None and loop.time() >= deadline:
                    raise Empty from None
                await self._readable(loop)
                continue
            self._recheck = self.recheck_s
            payload = message.split(b"|", 1)[1]
            if payload == b"__ping__":
                continue
            item = pickle.loads(payload)
            if isinstance(item, AnswerBatch):
                self._received.extend(item[1:])
                return item[0]
            return item

    async def _readable(self, loop: asyncio.AbstractEventLoop) -> None:
        ready = loop.create_future()

        def wake(by_timer: bool) -> None:
            if not ready.done():
                ready.set_result(by_timer)

        fd = self._sub.getsockopt(zmq.FD)
        loop.add_reader(fd, wake, False)
        timer = loop.call_later(self._recheck, wake, True)
        try:
            if await ready:
                self._recheck = min(2 * self._recheck, self.idle_recheck_s)
        finally:
            loop.remove_reader(fd)
            timer.cancel()

    def close(self, **kwargs: Any) -> None:
        if self._sub is not None:
            self._sub.close(linger=0)
            self._sub = None
        elif self._zmq is not None:
            super().close(**kwargs)

    def __reduce__(self) -> Any:
        return ZMQAnswers, (self.backend_address, self.frontend_address)


class LitServer(ls.LitServer):
    """``litserve.LitServer`` whose ``fast_queue=True`` takes effect and shuts down (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        given = kwargs.get("callbacks") or []
        kwargs["callbacks"] = [*(given if isinstance(given, list) else [given]), _WorkerSignals()]
        super().__init__(*args, **kwargs)
        self.transport_config = TransportConfig(transport_type="zmq" if self.use_zmq else "mp")

    def launch_inference_worker(self, lit_api: ls.LitAPI) -> list:
        with signals_held():  # until the worker's own handlers are in place (_WorkerSignals)
            return super().launch_inference_worker(lit_api)

    def launch_single_inference_worker(self, lit_api: ls.LitAPI, worker_id: int) -> Any:
        with signals_held():
            return super().launch_single_inference_worker(lit_api, worker_id)

    def _init_manager(self, num_api_servers: int) -> Any:
        manager = super()._init_manager(num_api_servers)
        config = self.transport_config
        if isinstance(self._transport, ZMQTransport):  # the broker runs; connect to it the right way round
            self._transport = ZMQAnswers(backend_address=config.backend_address,
                                         frontend_address=config.frontend_address)
        for path in list(self.litapi_request_queues):
            self.litapi_request_queues[path] = BackgroundPutQueue(manager.RequestQueue())
        return manager

    @asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        # In an API server, where uvicorn has just replaced the signal handlers with its own
        # graceful exit: the main process orders it (serve.processes), not the group's signal.
        defer_handlers_to_main()
        async with super().lifespan(app):
            yield

    def _perform_graceful_shutdown(self, *args: Any, **kwargs: Any) -> None:
        release_children()  # the terminate() calls that follow must take effect
        _stop_monitor(self)
        super()._perform_graceful_shutdown(*args, **kwargs)


class _WorkerSignals(ls.Callback):
    """In an inference worker, before ``setup()``: SIGINT and SIGTERM wait for the main process's
    order (:func:`serve.processes.defer_to_main`)."""

    def on_before_setup(self, *args: Any, **kwargs: Any) -> None:
        defer_to_main()


def _stop_monitor(server: ls.LitServer) -> None:
    """End LitServe's worker monitor before the workers and the Manager go.

    The monitor reads the Manager's shutdown event every ``monitor_internal`` (2) seconds: woken
    after the Manager is shut down, it fails on it (a traceback); woken after a worker's
    ``terminate()``, it restarts that worker, which nothing stops. It looks the event up on the
    server each round, so a local event already set ends it without a Manager call.
    """
    monitors = [t for t in threading.enumerate() if t.name == "litserve-monitoring"]
    if not monitors or threading.current_thread() in monitors:
        return
    ended = threading.Event()
    ended.set()
    server._shutdown_event = ended
    for monitor in monitors:
        monitor.join(server.monitor_internal + 5)


def shutdown_event(server: ls.LitServer) -> Any | None:
    """The Manager event whose ``set()`` makes ``LitServer.run`` shut down (``None`` before run)."""
    return server._shutdown_event


def workers_setup_status(server: ls.LitServer) -> Any:
    """``{"<task>_<worker id>": WorkerSetupStatus}``, a Manager dict (exists once run() started)."""
    return server.workers_setup_status


def inference_workers(server: ls.LitServer) -> list:
    """The inference worker processes (exists once run() started)."""
    return getattr(server, "inference_workers", [])


def manager(server: ls.LitServer) -> Any | None:
    """LitServe's ``multiprocessing.Manager`` (request queues, setup status), ``None`` before run."""
    return getattr(server.transport_config, "manager", None)


def request_queue(server: ls.LitServer, api_path: str) -> Any:
    """The request queue of one API path (exists once run() started)."""
    return server.litapi_request_queues[api_path]


def set_restart_workers(loop: Any, restart: bool) -> None:
    """What ``inference_worker`` sets on a loop; with it on, LitServe sends a START per request."""
    loop._restart_workers = restart


def set_worker_id(loop: Any, worker_id: int) -> None:
    """The worker id a loop stamps on its responses (a worker reads it from ``LITSERVE_WORKER_ID``)."""
    loop._worker_id = worker_id


_TAKES_CONTEXT: dict[Any, bool] = {}


def inject_context(context: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)``, with ``context=context`` when ``func`` has a ``context`` parameter:
    LitServe's ``_inject_context`` with the signature looked at once per function, not per call."""
    key = getattr(func, "__func__", func)  # a bound method is a new object at every attribute access
    takes = _TAKES_CONTEXT.get(key)
    if takes is None:
        takes = _TAKES_CONTEXT[key] = "context" in inspect.signature(func).parameters
    return func(*args, **kwargs, context=context) if takes else func(*args, **kwargs)


# The batched and single loops look the name up in their module at each call.
simple_loops._inject_context = inject_context
