"""``python -m serve --artifacts DIR``: serve every task bundle in DIR over HTTP.

Order matters here. Bundles are checked in this process first, so a bad path or a corrupt
bundle is one line on stderr and a non-zero exit instead of a worker traceback.
``PROMETHEUS_MULTIPROC_DIR`` is prepared before anything imports prometheus_client, which
picks its storage at import. Spawned workers import this module again (as ``__mp_main__``),
so its top-level imports stay light: the rest is imported inside :func:`main`.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
from pathlib import Path

from models.cli import CliError
from models.files import memory_dir
from serve.config import PROG, ServeConfig, parse_args
from serve.private_dirs import private_dir

METRICS_ENV = "PROMETHEUS_MULTIPROC_DIR"


class StartupError(CliError):
    """Cannot start; the message is the one line shown, ``exit_code`` the status."""


def resolve_accelerator(config: ServeConfig) -> str:
    """``cpu`` or ``cuda``; refuses CUDA-only options without a CUDA device (exit 2)."""
    import torch

    has_cuda = torch.cuda.is_available()
    if (config.cuda_graphs or config.accelerator == "cuda") and not has_cuda:
        flag = "--cuda-graphs" if config.cuda_graphs else "--accelerator cuda"
        raise StartupError(f"{flag} needs a CUDA device, and torch {torch.__version__} sees none", 2)
    if config.accelerator == "auto":
        return "cuda" if has_cuda else "cpu"
    return config.accelerator


def prepare_metrics_dir() -> tuple[Path, bool]:
    """A fresh multiprocess metrics directory in the environment; ``(dir, created here)``.

    Files of an earlier run would be summed into this one's metrics, so a given directory is
    emptied; without one, each server gets its own temporary directory, in memory where the
    machine has ``/dev/shm`` (:func:`models.files.memory_dir`): every answer writes to these files.
    """
    given = os.environ.get(METRICS_ENV)
    if not given:
        path = private_dir("relserve-metrics-", memory_dir())
        os.environ[METRICS_ENV] = str(path)
        return path, True
    path = Path(given)
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("*.db"):
        stale.unlink()
    return path, False


def check_port(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as e:
            raise StartupError(f"cannot listen on {host}:{port}: {e.strerror}") from e


def start(config: ServeConfig) -> int:
    """Check everything, build the server and serve until SIGINT or SIGTERM (blocks); the exit code."""
    from serve.versions.bundles import ArtifactsError, choose_bundles, find_bundles, quality_warnings

    try:
        bundles = find_bundles(config.artifacts, config.tasks)
    except ArtifactsError as e:
        raise StartupError(str(e), 2) from e
    from serve.ingest.server import prepare  # keys, state directory, log recovery

    try:
        for warning in prepare(config.ingest, config.artifacts):
            print(f"{PROG}: warning: {warning}", file=sys.stderr, flush=True)
    except ValueError as e:
        raise StartupError(str(e), 2) from e
    accelerator = resolve_accelerator(config)
    check_port(config.host, config.port)
    try:  # the version of each task (serve.versions.repository), loaded and checked
        bundles, warnings = choose_bundles(config.artifacts, config.tasks, config.models)
    except ArtifactsError as e:
        raise StartupError(str(e)) from e
    for warning in warnings + quality_warnings(bundles):
        print(f"{PROG}: warning: {warning}", file=sys.stderr, flush=True)
    config, layout = config.with_layout(len(bundles), accelerator)
    print(f"{PROG}: {layout}", file=sys.stderr, flush=True)
    from serve.http.app import build_server  # imports prometheus_client: after prepare_metrics_dir()

    built = build_server(config, bundles, accelerator)
    from serve.http.drain import Drain

    drain = Drain(built.server, built.admission, config.drain_timeout_s)  # before any child starts
    tasks = ", ".join(f"{b.task} (version {b.version})" for b in bundles)
    ingesting = "" if config.ingest is None else f", ingesting into {config.ingest.state_dir}"
    print(f"{PROG}: serving {tasks} on http://{config.host}:{config.port} ({accelerator}, compile="
          f"{config.compile}, max batch {config.max_batch_size}{ingesting}); /health turns 200 once "
          "warmed up",
          file=sys.stderr, flush=True)
    failed = None
    try:
        built.run()
    finally:
        failed = drain.failed_start()  # a worker that could not start stopped the server
        drain.close()
    if failed is not None:
        print(f"{PROG}: error: {failed}", file=sys.stderr, flush=True)
        return 1
    return drain.exit_code


def _stop_before_serving(signum: int, frame: object) -> None:
    # Until the server is built nothing runs that needs draining (serve.http.drain replaces this).
    raise SystemExit(128 + signum if signum == signal.SIGINT else 0)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the process exit code."""
    signal.signal(signal.SIGTERM, _stop_before_serving)
    signal.signal(signal.SIGINT, _stop_before_serving)
    config = parse_args(argv)
    metrics_dir, created = prepare_metrics_dir()
    try:
        return start(config)
    except StartupError as e:
        return e.report(PROG)
    except RuntimeError as e:  # LitServe: "One or more workers failed to start"
        print(f"{PROG}: error: {e} (see the worker log above)", file=sys.stderr)
        return 1
    finally:
        if created:
            shutil.rmtree(metrics_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
