"""A worker that fails to start again and again stops the server with one line and status 1.

LitServe restarts a dead worker forever; here the churn bundle is broken after start-up and the
worker killed, so every restart fails in ``setup``: after three failed starts in a row the server
drains, stops, and says why (``serve.http.failed_starts``).
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from models.runtime.bundle import WEIGHTS_FILE
from serve.bench.process import ServerProcess
from serve.http.failed_starts import MAX_FAILED_STARTS
from tests.integration.waits import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_worker_that_cannot_start_stops_the_server_in_one_line(artifacts: Path, tmp_path: Path) -> None:
    copy = tmp_path / "artifacts"
    copy.mkdir()
    (copy / "snapshot").symlink_to(artifacts / "snapshot")
    shutil.copytree(artifacts / "churn", copy / "churn")
    server = ServerProcess(copy, "--tasks", "churn", "--compile", "none", "--max-batch-size", "4",
                           "--drain-timeout", "5", log_path=tmp_path / "serve.log")
    with server:
        server.wait_ready(timeout=300)
        (copy / "churn" / WEIGHTS_FILE).write_bytes(b"\x80\x04 not safetensors")
        os.kill(server.worker_pids()[0], signal.SIGKILL)
        status = wait_for(lambda: server.proc.poll() is not None and [server.proc.returncode],
                          "server exit after the failed restarts", timeout=300)
        log = server.log()
    assert status == [1], log[-3000:]
    errors = [line for line in log.splitlines() if line.startswith("python -m serve: error")]
    assert len(errors) == 1, log[-3000:]
    expected = (f"python -m serve: error: the churn worker 0 failed to start {MAX_FAILED_STARTS} "
                "times in a row")
    assert errors[0].startswith(expected + " (BundleError: "), errors[0]
    assert WEIGHTS_FILE in errors[0] and errors[0].endswith("); stopped the server"), errors[0]
    assert log.count("Error setting up worker") == MAX_FAILED_STARTS, log[-3000:]
