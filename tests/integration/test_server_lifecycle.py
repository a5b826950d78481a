"""Start-up refusals, worker restart and SIGTERM drain of a real server process.

Uses its own small server (churn only, eager, a 3 s batch window so a request stays in flight
long enough to be caught by SIGTERM); the restart test runs before the drain test, which ends it.
Waits are on the events themselves (a gauge, a status code, the process group emptying), each
with a generous deadline, never a fixed sleep.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from models.runtime.bundle import WEIGHTS_FILE
from models.schema import CUSTOMER
from serve.bench.process import ServerProcess, http_status
from tests.integration.waits import metric, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
WINDOW_S = 3.0


@pytest.fixture(scope="module")
def small_server(artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(artifacts, "--tasks", "churn", "--compile", "none", "--batch-timeout", str(WINDOW_S),
                       "--max-batch-size", "4", "--drain-timeout", "20",
                       log_path=tmp_path_factory.mktemp("lifecycle") / "serve.log") as process:
        process.wait_ready(timeout=300)
        yield process


def churn(server: ServerProcess, customer_id: str) -> requests.Response:
    return requests.post(server.url + "/predict/churn", json={"customer_id": customer_id}, timeout=30)


def test_a_corrupt_bundle_is_refused_in_one_line(artifacts, tmp_path):
    broken = tmp_path / "artifacts"
    broken.mkdir()
    (broken / "snapshot").symlink_to(artifacts / "snapshot")
    shutil.copytree(artifacts / "churn", broken / "churn")
    (broken / "churn" / WEIGHTS_FILE).write_bytes(b"\x80\x04 not safetensors")
    result = subprocess.run([sys.executable, "-m", "serve", "--artifacts", str(broken)], capture_output=True,
                            text=True, timeout=120, cwd=REPO)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "cannot serve churn" in result.stderr
    assert WEIGHTS_FILE in result.stderr and "Traceback" not in result.stderr


def test_a_killed_worker_is_restarted_and_serves_again(small_server, snapshot):
    customer_id = snapshot.ids[CUSTOMER][0].decode()
    assert churn(small_server, customer_id).status_code == 200
    workers = small_server.worker_pids()
    assert len(workers) == 1
    os.kill(workers[0], signal.SIGKILL)
    seen, deadline = [], time.monotonic() + 120
    while time.monotonic() < deadline and seen[-2:] != [503, 200]:
        status = http_status(small_server.url + "/health")
        if not seen or seen[-1] != status:
            seen.append(status)
        time.sleep(0.05)
    assert seen[-2:] == [503, 200], f"/health went {seen}"
    assert churn(small_server, customer_id).status_code == 200


def test_sigterm_drains_in_flight_requests_and_exits_0(small_server, snapshot):
    customer_id = snapshot.ids[CUSTOMER][1].decode()
    before = small_server.group_pids()
    answers: dict[str, int] = {}
    events: list[str] = []  # in the order they happened

    def first() -> None:
        answers["first"] = churn(small_server, customer_id).status_code
        events.append("answered")

    held = threading.Thread(target=first)
    held.start()
    # Admitted and held by the batch window (3 s: far longer than one scrape of /metrics).
    wait_for(lambda: metric(small_server, "relserve_inflight_requests", task="churn") == 1, "admission")
    events.append("signalled")  # before the signal: an answer racing it would be listed first
    small_server.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: http_status(small_server.url + "/health") in (503, None), "draining /health")
    late = churn(small_server, customer_id)
    assert late.status_code == 503 and late.json()["detail"] == "shutting down"
    held.join(60)
    assert answers["first"] == 200 and events == ["signalled", "answered"]  # drained, not answered before
    assert small_server.proc.wait(60) == 0
    wait_for(lambda: small_server.group_pids() == [], "empty process group")
    assert len(before) >= 4
