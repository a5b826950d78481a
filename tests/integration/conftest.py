"""Integration fixtures: real bundles trained on tiny data, and a real ``python -m serve`` process.

Training (1 epoch of each task on ``tiny_csv_dir``) and the server's compile + warm-up take a
while, so both are session-scoped and every integration test shares them.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from models.store.snapshot import GraphSnapshot
from serve.bench.process import ServerProcess
from tests.built_once import built_once
from tests.integration.waits import wait_for

REPO = Path(__file__).resolve().parents[2]
MAX_BATCH = 8  # a short bucket ladder: the server compiles every bucket of every task at start-up
SERVER_ARGS = ("--max-batch-size", str(MAX_BATCH))


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory, tiny_csv_dir: Path) -> Path:
    """Bundles of all three tasks plus the snapshot, from ``python -m training.fit`` (1 eager epoch)."""

    def train(out: Path) -> None:
        command = [sys.executable, "-m", "training.fit", "--data", str(tiny_csv_dir), "--task", "all",
                   "--out", str(out), "--epochs", "1", "--compile", "none",
                   "--serve-batch-size", str(MAX_BATCH), "--quiet"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=1200, cwd=REPO)
        assert result.returncode == 0, f"training.fit failed:\n{result.stderr[-3000:]}"

    return built_once(tmp_path_factory, "artifacts", train)


@pytest.fixture(scope="session")
def snapshot(artifacts: Path) -> GraphSnapshot:
    return GraphSnapshot.open(artifacts / "snapshot")


@pytest.fixture(scope="session")
def server(artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for all tasks, ready (every bucket compiled and warmed), stopped at the end with
    SIGTERM: it exits 0, its processes go, and the resource tracker (the last to go) finds nothing
    leaked (a compiled worker's progress-bar lock was a named semaphore: serve.processes)."""
    log_path = tmp_path_factory.mktemp("server") / "serve.log"
    with ServerProcess(artifacts, *SERVER_ARGS, log_path=log_path) as process:
        process.wait_ready(timeout=900)
        yield process
        assert process.terminate() == 0
        wait_for(lambda: process.group_pids() == [], "the server's processes gone", 60)
        assert "leaked" not in process.log(), process.log()[-3000:]


@pytest.fixture(scope="session")
def post(server: ServerProcess) -> Callable[..., requests.Response]:
    """``post(task, body)`` -> the server's response (JSON body unless ``data=`` is given)."""
    session = requests.Session()

    def call(task: str, body: object = None, **kwargs: object) -> requests.Response:
        if body is not None:
            kwargs["json"] = body
        return session.post(f"{server.url}/predict/{task}", timeout=60, **kwargs)

    return call
