"""Server configuration: one dataclass, filled from the command line of ``python -m serve``."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from models.cli import OneLineErrors, count_or_auto
from models.registry import TASK_NAMES
from serve.ingest import config as ingest_config
from serve.ingest.config import IngestConfig
from serve.layout import MAX_PROCESSES, choose_layout, describe, machine_cores
from serve.versions import models_config
from serve.versions.models_config import ModelsConfig

TASKS = TASK_NAMES
HOSTS = ("127.0.0.1", "0.0.0.0", "::")
COMPILE_STRATEGIES = ("none", "dynamic", "buckets")
PROG = "python -m serve"
MAX_BATCH = 1024  # the bucket ladder is fitted and compiled up to it at start-up


def available_cores() -> int:
    """Cores this process may run on: its affinity mask and a container's CPU quota."""
    return machine_cores()


@dataclass
class ServeConfig:
    """Everything ``python -m serve`` needs to start.

    Args:
        artifacts: directory of task bundles (``<task>/``) and the graph snapshot (``snapshot/``).
        host: interface to bind (LitServe accepts only the three of :data:`HOSTS`).
        port: TCP port, 1024..65535.
        tasks: tasks to serve; ``None``: every task with a bundle in ``artifacts``.
        max_batch_size: most requests per inference batch (1 disables batching).
        batch_timeout_s: how long a batch waits to fill after its first request (0: greedy).
        compile: ``none`` (eager), ``dynamic`` or ``buckets`` (static shapes).
        cuda_graphs: ``mode="reduce-overhead"`` over the static buckets; needs CUDA.
        accelerator: ``cpu``, ``cuda`` or ``auto`` (CUDA when available).
        workers_per_task: inference worker processes per task; ``None``: derived from the cores
            (:mod:`serve.layout`), as are ``api_servers`` and ``threads``.
        api_servers: uvicorn processes answering HTTP; ``None``: derived.
        threads: torch threads per worker; ``None``: derived.
        max_queue: per task, most requests in flight (queued + predicting) before 503. With a
            few ms per batch of 32, 128 in flight is well under a second of queueing.
        request_timeout_s: longest a request may wait in the queue before 504.
        deadline_s: longest a request may take in all before 504; ``None``: the request timeout
            plus 5 s, so it only fires for requests lost with a dead worker.
        max_payload_bytes: largest request body (413 beyond).
        retry_after_s: ``Retry-After`` of an overload 503.
        drain_timeout_s: on SIGTERM, how long to wait for requests in flight before stopping.
        log_level: uvicorn / LitServe log level.
        compile_cache_dir: where workers keep compile caches; ``None``: beside each bundle when
            writable, else the per-user cache (``$XDG_CACHE_HOME/relserve``), so read-only
            artifacts still start warm after the first start.
        fast_queue: answers go from workers to API servers over ZeroMQ (LitServe's
            ``fast_queue``) instead of a Manager queue; see docs/decisions.md, "Answers over ZeroMQ,
            for real".
        ingest: ingestion settings (``--state-dir`` and ``--ingest-*``); ``None``: no write routes.
        models: model versions (``--model-version``, ``--model-poll``, ``--force``).
    """

    artifacts: Path
    host: str = "127.0.0.1"
    port: int = 8000
    tasks: tuple[str, ...] | None = None
    max_batch_size: int = 32
    batch_timeout_s: float = 0.0
    compile: str = "buckets"
    cuda_graphs: bool = False
    accelerator: str = "auto"
    workers_per_task: int | None = None
    api_servers: int | None = None
    threads: int | None = None
    max_queue: int = 128
    request_timeout_s: float = 10.0
    deadline_s: float | None = None
    max_payload_bytes: int = 131_072  # a list of 1,000 ids of MAX_ID_BYTES ASCII characters fits
    retry_after_s: int = 1
    drain_timeout_s: float = 25.0
    log_level: str = "warning"
    compile_cache_dir: Path | None = None
    fast_queue: bool = True
    ingest: IngestConfig | None = None
    models: ModelsConfig = field(default_factory=ModelsConfig)

    def __post_init__(self) -> None:
        self.artifacts = Path(self.artifacts)
        checks = [
            (self.host in HOSTS, f"--host must be one of {', '.join(HOSTS)}, got {self.host!r}"),
            (1024 <= self.port <= 65535, f"--port must be in 1024..65535, got {self.port}"),
            (self.tasks is None or (bool(self.tasks) and set(self.tasks) <= set(TASKS)),
             f"--tasks must name some of {', '.join(TASKS)}, got {self.tasks}"),
            (1 <= self.max_batch_size <= MAX_BATCH, f"--max-batch-size must be in 1..{MAX_BATCH}"),
            (self.batch_timeout_s >= 0, "--batch-timeout must not be negative"),
            (self.compile in COMPILE_STRATEGIES, f"--compile must be one of {', '.join(COMPILE_STRATEGIES)}"),
            (not self.cuda_graphs or self.compile == "buckets", "--cuda-graphs needs --compile buckets"),
            (self.accelerator in ("auto", "cpu", "cuda"), "--accelerator must be auto, cpu or cuda"),
            (not (self.cuda_graphs and self.accelerator == "cpu"), "--cuda-graphs needs --accelerator cuda"),
            (all(n is None or 1 <= n <= MAX_PROCESSES for n in (self.workers_per_task, self.api_servers)),
             f"--workers-per-task and --api-servers must be in 1..{MAX_PROCESSES}"),
            (self.threads is None or 1 <= self.threads <= available_cores(),
             f"--threads must be in 1..{available_cores()} (the cores this process may use)"),
            (self.max_queue >= 1, "--max-queue must be at least 1"),
            (self.request_timeout_s > 0, "--request-timeout must be positive"),
            (self.batch_timeout_s < self.request_timeout_s,
             "--batch-timeout must be below --request-timeout"),
            (self.deadline_s is None or self.deadline_s > self.request_timeout_s,
             "--deadline must exceed --request-timeout"),
            (self.max_payload_bytes >= 256, "--max-payload-bytes must be at least 256"),
            (self.retry_after_s >= 0 and self.drain_timeout_s >= 0,
             "--retry-after and --drain-timeout must not be negative"),
        ]
        times = {"--batch-timeout": self.batch_timeout_s, "--request-timeout": self.request_timeout_s,
                 "--deadline": self.deadline_s or 0.0, "--drain-timeout": self.drain_timeout_s}
        finite = [(math.isfinite(seconds), f"{flag} must be a finite number of seconds")
                  for flag, seconds in times.items()]
        for ok, message in finite + checks:
            if not ok:
                raise ValueError(message)

    @property
    def request_deadline_s(self) -> float:
        return self.deadline_s or self.request_timeout_s + 5.0

    def with_layout(self, num_tasks: int, accelerator: str) -> tuple[ServeConfig, str]:
        """This configuration with the automatic layout values filled in for this machine, and the
        start-up line that says which layout it is and why.

        Args:
            num_tasks: tasks served.
            accelerator: ``cpu`` or ``cuda`` (resolved).
        """
        cores = available_cores()
        layout = choose_layout(cores, num_tasks, accelerator, self.workers_per_task, self.api_servers,
                               self.threads)
        given = {flag: str(value) for flag, value in (("--workers-per-task", self.workers_per_task),
                                                      ("--api-servers", self.api_servers),
                                                      ("--threads", self.threads)) if value is not None}
        resolved = replace(self, workers_per_task=layout.workers_per_task, api_servers=layout.api_servers,
                           threads=layout.threads)
        return resolved, describe(layout, cores, num_tasks, accelerator, given)


def _task_list(value: str) -> tuple[str, ...]:
    tasks = tuple(t.strip() for t in value.split(",") if t.strip())
    unknown = sorted(set(tasks) - set(TASKS))
    if not tasks or unknown:
        raise argparse.ArgumentTypeError(f"unknown task(s) {unknown or value!r}; use {','.join(TASKS)}")
    return tasks


def parse_args(argv: list[str] | None = None) -> ServeConfig:
    """Build a :class:`ServeConfig` from ``argv``; exits 2 with one line on a bad argument."""
    d = ServeConfig(artifacts=Path("."))
    p = OneLineErrors(prog=PROG, description=f"Serve {', '.join(TASKS)} predictions over HTTP.")
    p.add_argument("--artifacts", type=Path, required=True, help="bundles from python -m training.fit")
    p.add_argument("--host", default=d.host, choices=HOSTS)
    p.add_argument("--port", type=int, default=d.port)
    p.add_argument("--tasks", type=_task_list, default=None, help="comma-separated (default: all found)")
    p.add_argument("--max-batch-size", type=int, default=d.max_batch_size)
    p.add_argument("--batch-timeout", type=float, default=d.batch_timeout_s, metavar="S")
    p.add_argument("--compile", default=d.compile, choices=COMPILE_STRATEGIES)
    p.add_argument("--cuda-graphs", action="store_true", help="CUDA Graphs over static buckets (CUDA only)")
    p.add_argument("--accelerator", default=d.accelerator, choices=("auto", "cpu", "cuda"))
    p.add_argument("--workers-per-task", type=count_or_auto, default=None, metavar="N|auto",
                   help="inference processes per task (default: auto, derived from the cores)")
    p.add_argument("--api-servers", type=count_or_auto, default=None, metavar="N|auto",
                   help="HTTP processes (default: auto, derived from the cores)")
    p.add_argument("--threads", type=count_or_auto, default=None, metavar="N|auto",
                   help="torch threads per worker (default: auto, derived from the cores)")
    p.add_argument("--max-queue", type=int, default=d.max_queue,
                   help="per task, requests in flight before 503")
    p.add_argument("--request-timeout", type=float, default=d.request_timeout_s, metavar="S")
    p.add_argument("--deadline", type=float, default=None, metavar="S",
                   help="per request (default: request timeout + 5)")
    p.add_argument("--max-payload-bytes", type=int, default=d.max_payload_bytes)
    p.add_argument("--retry-after", type=int, default=d.retry_after_s, metavar="S")
    p.add_argument("--drain-timeout", type=float, default=d.drain_timeout_s, metavar="S")
    p.add_argument("--compile-cache-dir", type=Path, default=None, metavar="DIR",
                   help="compile caches (default: beside each bundle if writable, else "
                        "$XDG_CACHE_HOME/relserve)")
    p.add_argument("--log-level", default=d.log_level, choices=("debug", "info", "warning", "error"))
    p.add_argument("--transport", default="zmq" if d.fast_queue else "mp", choices=("zmq", "mp"),
                   help="worker-to-API-server answers: ZeroMQ (LitServe fast_queue) or a Manager queue")
    ingest_config.add_arguments(p)
    models_config.add_arguments(p)
    a = p.parse_args(argv)
    if not a.artifacts.is_dir():  # before anything imports torch: a typo should fail at once
        p.error(f"--artifacts {a.artifacts} is not a directory (write one with python -m training.fit)")
    try:
        return ServeConfig(
            artifacts=a.artifacts, host=a.host, port=a.port, tasks=a.tasks, max_batch_size=a.max_batch_size,
            batch_timeout_s=a.batch_timeout, compile=a.compile, cuda_graphs=a.cuda_graphs,
            accelerator=a.accelerator, workers_per_task=a.workers_per_task, api_servers=a.api_servers,
            threads=a.threads, max_queue=a.max_queue, request_timeout_s=a.request_timeout,
            deadline_s=a.deadline, max_payload_bytes=a.max_payload_bytes, retry_after_s=a.retry_after,
            drain_timeout_s=a.drain_timeout, log_level=a.log_level, compile_cache_dir=a.compile_cache_dir,
            fast_queue=a.transport == "zmq", ingest=ingest_config.from_args(a),
            models=models_config.from_args(a),
        )
    except ValueError as e:
        p.error(str(e))
        raise  # unreachable: error() exits
