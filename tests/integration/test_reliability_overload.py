"""Overload and faults on a real server: bounded admission, fast 503s, a lost batch's 504, stop at start-up.

Uses its own small server (churn and sales, eager, a 1.5 s batch window with room for 8 but at
most 4 churn requests in flight), so a flood is guaranteed to find every slot taken. The flood
test runs before the kill test, which restarts the churn worker. The last test starts (and
stops) a server of its own.
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from models.schema import ARTICLE, CUSTOMER
from serve.process import ServerProcess, http_status

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MAX_QUEUE = 4
FLOOD = 40
RETRY_AFTER = "2"
BATCH_WINDOW_S = 1.5
DEADLINE_S = 6.0


@pytest.fixture(scope="module")
def small_server(artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(artifacts, "--tasks", "churn,sales", "--compile", "none", "--max-batch-size", "8",
                       "--batch-timeout", str(BATCH_WINDOW_S), "--max-queue", str(MAX_QUEUE),
                       "--retry-after", RETRY_AFTER, "--request-timeout", "3",
                       "--deadline", str(DEADLINE_S),
                       log_path=tmp_path_factory.mktemp("overload") / "serve.log") as process:
        process.wait_ready(timeout=300)
        yield process


def predict(server: ServerProcess, task: str, body: dict) -> tuple[requests.Response, float]:
    started = time.perf_counter()
    response = requests.post(f"{server.url}/predict/{task}", json=body, timeout=60)
    return response, time.perf_counter() - started


def metric(server: ServerProcess, name: str, **labels: str) -> float:
    text = requests.get(server.url + "/metrics", timeout=30).text
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}{{(.*)}} (\S+)", line)
        if match and dict(re.findall(r'(\w+)="([^"]*)"', match[1])) == labels:
            return float(match[2])
    return 0.0


def test_a_flood_past_max_queue_gets_fast_503s_with_retry_after_then_recovers(small_server, snapshot):
    churn = {"customer_id": snapshot.ids[CUSTOMER][0].decode()}
    rejected_before = metric(small_server, "relserve_rejected_total", task="churn", reason="overloaded")
    start = threading.Barrier(FLOOD + 1)

    def send(_: int) -> tuple[requests.Response, float]:
        start.wait()
        return predict(small_server, "churn", churn)

    with ThreadPoolExecutor(FLOOD) as pool:
        futures = [pool.submit(send, i) for i in range(FLOOD)]
        start.wait()
        time.sleep(BATCH_WINDOW_S / 2)  # every slot taken, the first batch still filling
        in_flight = metric(small_server, "relserve_inflight_requests", task="churn")
        other_task, _ = predict(small_server, "sales", {"article_id": snapshot.ids[ARTICLE][0].decode()})
        results = [f.result() for f in futures]

    statuses = [r.status_code for r, _ in results]
    assert set(statuses) <= {200, 503} and statuses.count(503) >= FLOOD // 2, statuses
    assert 1 <= in_flight <= MAX_QUEUE
    assert other_task.status_code == 200  # the bound is per task
    ok = [seconds for r, seconds in results if r.status_code == 200]
    shed = [(r, seconds) for r, seconds in results if r.status_code == 503]
    assert all(r.headers["Retry-After"] == RETRY_AFTER for r, _ in shed)
    assert all("overloaded" in r.json()["detail"] for r, _ in shed)
    # A 503 does not wait for the batch window; an admitted request does.
    assert statistics.median(s for _, s in shed) < 0.25 and max(s for _, s in shed) < min(ok), (ok, shed)
    rejected = metric(small_server, "relserve_rejected_total", task="churn", reason="overloaded")
    assert rejected - rejected_before == len(shed)
    for _ in range(3):  # recovered: each request alone is admitted and answered
        response, _ = predict(small_server, "churn", churn)
        assert response.status_code == 200
    assert metric(small_server, "relserve_inflight_requests", task="churn") == 0
    assert http_status(small_server.url + "/health") == 200


def start_time(pid: int) -> int:
    """Field 22 of /proc/<pid>/stat: clock ticks from boot to the process's start."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def inference_workers(server: ServerProcess) -> list[int]:
    """The spawned inference workers, oldest first (LitServe starts them in task order)."""
    pids = [pid for pid in server.group_pids() if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    return sorted(pids, key=start_time)


def test_a_killed_worker_costs_only_its_batch_a_504_while_the_server_keeps_answering(small_server, snapshot):
    churn = {"customer_id": snapshot.ids[CUSTOMER][1].decode()}
    sales = {"article_id": snapshot.ids[ARTICLE][1].decode()}
    churn_worker = inference_workers(small_server)[0]
    lost: dict[str, tuple[requests.Response, float]] = {}
    held = threading.Thread(target=lambda: lost.update(churn=predict(small_server, "churn", churn)))
    held.start()
    time.sleep(BATCH_WINDOW_S / 3)  # the worker holds the request while its batch fills
    os.kill(churn_worker, signal.SIGKILL)
    health, deadline = [], time.monotonic() + 120
    while time.monotonic() < deadline and health[-2:] != [503, 200]:
        status = http_status(small_server.url + "/health")
        if not health or health[-1] != status:
            health.append(status)
            if status == 503:  # in the gap: the other task still answers
                assert predict(small_server, "sales", sales)[0].status_code == 200
        time.sleep(0.05)
    assert health[-2:] == [503, 200], f"/health went {health}"
    held.join(60)
    response, seconds = lost["churn"]
    assert response.status_code == 504 and "no answer within" in response.json()["detail"]
    assert DEADLINE_S - 0.5 <= seconds < DEADLINE_S + 10
    assert predict(small_server, "churn", churn)[0].status_code == 200
    assert churn_worker not in inference_workers(small_server)


def test_sigterm_during_start_up_exits_0_at_once_and_leaves_no_process(artifacts, tmp_path):
    # Compiling can take minutes; a stop must not wait for it, nor leave the workers behind.
    with ServerProcess(artifacts, "--tasks", "churn", "--max-batch-size", "8", log_path=tmp_path / "serve.log"
                       ) as starting:
        deadline = time.monotonic() + 120
        while not inference_workers(starting) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert inference_workers(starting) and http_status(starting.url + "/health") != 200, starting.log()
        stopping = time.monotonic()
        assert starting.terminate(timeout=60) == 0, starting.log()[-2000:]
        assert time.monotonic() - stopping < 20
        time.sleep(0.5)
        assert starting.group_pids() == []
