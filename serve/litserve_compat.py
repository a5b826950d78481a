"""Every LitServe name this project uses beyond LitServe's public API, in one module.

Read from **litserve 0.2.19** (``pip show litserve``; pyproject.toml pins ``>=0.2.19,<0.3``).
Public API here means what ``litserve`` and ``litserve.loops`` export (``LitAPI``, ``LitServer``,
``BatchedLoop``); everything below is underscore-prefixed or undocumented, read from the 0.2.19
sources, and may change in any release. An upgrade checks this file against the new sources
(``litserve/server.py``, ``litserve/loops/base.py``, ``litserve/utils.py``) and touches no other:
serve/ and the tests import these names from here only.

What each one is for:

* :func:`collate_requests`, :data:`SENTINEL`, :class:`StopLoopError`: the batched loop's queue
  reader (``serve.batching``) reuses LitServe's batch collection, its shutdown sentinel and stop signal.
* :class:`LitAPIStatus`, :class:`LoopResponseType`, :class:`WorkerSetupStatus`: the status values
  LitServe passes between API servers, workers and the main process.
* :class:`MessageTransport`: the worker-to-API-server transport interface (tests fake it).
* the server accessors: the SIGTERM drain sets LitServe's shutdown event and marks workers failed;
  a failed start-up stops the workers and the Manager; ``/metrics`` reads queue depths.
* :class:`LitServer`: LitServe's server with one shutdown fix. With ``fast_queue=True`` its
  graceful shutdown first closes the ZeroMQ transport of the main process, which never opened a
  socket (only workers and API servers do), and ``ZMQTransport.close`` then raises ``ValueError``
  before any worker or API server is stopped: the process exits 1 and leaves orphans.
"""

from __future__ import annotations

from typing import Any

import litserve as ls
from litserve.loops.base import _SENTINEL_VALUE as SENTINEL
from litserve.loops.base import _StopLoopError as StopLoopError
from litserve.loops.base import collate_requests
from litserve.transport.base import MessageTransport
from litserve.transport.zmq_transport import ZMQTransport
from litserve.utils import LitAPIStatus, LoopResponseType, WorkerSetupStatus

LITSERVE_VERSION_READ = "0.2.19"

__all__ = [
    "LITSERVE_VERSION_READ", "SENTINEL", "LitAPIStatus", "LitServer", "LoopResponseType", "MessageTransport",
    "StopLoopError", "WorkerSetupStatus", "collate_requests", "inference_workers", "manager",
    "request_queue", "set_restart_workers", "set_worker_id", "shutdown_event", "workers_setup_status",
]


class LitServer(ls.LitServer):
    """``litserve.LitServer`` whose shutdown also works with ``fast_queue=True`` (module docstring)."""

    def _perform_graceful_shutdown(self, manager: Any, uvicorn_workers: dict,
                                   shutdown_reason: str = "normal") -> None:
        transport = getattr(self, "_transport", None)
        if isinstance(transport, ZMQTransport) and transport._zmq is None:
            transport.close = lambda **kwargs: None  # nothing opened in this process, nothing to close
        super()._perform_graceful_shutdown(manager, uvicorn_workers, shutdown_reason)


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
