"""Overload and faults on a real server: bounded admission, fast 503s, a lost batch's 504, stop at start-up.

Uses its own small server (churn and sales, eager, a 2.5 s batch window with room for 8 but at
most 4 churn requests in flight), so a flood is guaranteed to find every slot taken. The flood
test runs before the kill test, which restarts the churn worker. The last test starts (and
stops) a server of its own. Tests wait on events (a gauge, a status code, a process exiting) and
assert on what happened (statuses, counters, the order of the answers), never on measured time; how
fast a 503 comes back is ``python -m serve.bench``'s to measure.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from models.schema import ARTICLE, CUSTOMER
from serve.bench.process import ServerProcess, http_status
from tests.integration.waits import metric, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MAX_QUEUE = 4
FLOOD = 40
RETRY_AFTER = "2"
BATCH_WINDOW_S = 2.5
REQUEST_TIMEOUT_S = 4.0
DEADLINE_S = 8.0


@pytest.fixture(scope="module")
def small_server(artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(artifacts, "--tasks", "churn,sales", "--compile", "none", "--max-batch-size", "8",
                       "--batch-timeout", str(BATCH_WINDOW_S), "--max-queue", str(MAX_QUEUE),
                       "--retry-after", RETRY_AFTER, "--request-timeout", str(REQUEST_TIMEOUT_S),
                       "--deadline", str(DEADLINE_S),
                       log_path=tmp_path_factory.mktemp("overload") / "serve.log") as process:
        process.wait_ready(timeout=300)
        yield process


def predict(server: ServerProcess, task: str, body: dict) -> requests.Response:
    return requests.post(f"{server.url}/predict/{task}", json=body, timeout=60)


def test_a_flood_past_max_queue_gets_fast_503s_with_retry_after_then_recovers(small_server, snapshot):
    churn = {"customer_id": snapshot.ids[CUSTOMER][0].decode()}
    rejected_before = metric(small_server, "relserve_rejected_total", task="churn", reason="overloaded")
    start = threading.Barrier(FLOOD + 1)
    answered: list[int] = []  # statuses in the order the answers came back

    def send(_: int) -> requests.Response:
        start.wait()
        response = predict(small_server, "churn", churn)
        answered.append(response.status_code)
        return response

    gauge: list[float] = []
    flooding = threading.Event()

    def watch() -> None:  # the in-flight gauge, sampled for the whole flood
        while not flooding.is_set():
            gauge.append(metric(small_server, "relserve_inflight_requests", task="churn"))

    watcher = threading.Thread(target=watch)
    with ThreadPoolExecutor(FLOOD) as pool:
        futures = [pool.submit(send, i) for i in range(FLOOD)]
        watcher.start()
        start.wait()
        wait_for(lambda: metric(small_server, "relserve_rejected_total", task="churn",
                                reason="overloaded") > rejected_before, "503 of the flood")
        other_task = predict(small_server, "sales", {"article_id": snapshot.ids[ARTICLE][0].decode()})
        results = [f.result() for f in futures]
    flooding.set()
    watcher.join(60)

    statuses = [r.status_code for r in results]
    assert set(statuses) <= {200, 503} and statuses.count(503) >= FLOOD // 2, statuses
    assert max(gauge) <= MAX_QUEUE, gauge
    assert other_task.status_code == 200  # the bound is per task
    shed = [r for r in results if r.status_code == 503]
    assert all(r.headers["Retry-After"] == RETRY_AFTER for r in shed)
    assert all("overloaded" in r.json()["detail"] for r in shed)
    # A 503 does not wait for the batch window that holds the admitted requests: every one came back first.
    assert answered == sorted(answered, reverse=True), answered
    rejected = metric(small_server, "relserve_rejected_total", task="churn", reason="overloaded")
    assert rejected - rejected_before == len(shed)
    for _ in range(3):  # recovered: each request alone is admitted and answered
        assert predict(small_server, "churn", churn).status_code == 200
    assert metric(small_server, "relserve_inflight_requests", task="churn") == 0
    assert http_status(small_server.url + "/health") == 200


def test_a_killed_worker_costs_only_its_batch_a_504_while_the_server_keeps_answering(small_server, snapshot):
    churn = {"customer_id": snapshot.ids[CUSTOMER][1].decode()}
    sales = {"article_id": snapshot.ids[ARTICLE][1].decode()}
    churn_worker = small_server.worker_pids()[0]
    lost: dict[str, requests.Response] = {}
    deadlines = metric(small_server, "relserve_rejected_total", task="churn", reason="deadline")
    held = threading.Thread(target=lambda: lost.update(churn=predict(small_server, "churn", churn)))
    held.start()
    # The worker took the request off its queue and holds it while the batch window runs.
    wait_for(lambda: metric(small_server, "relserve_inflight_requests", task="churn") == 1
             and metric(small_server, "relserve_queue_depth", task="churn") == 0, "held request")
    os.kill(churn_worker, signal.SIGKILL)
    health, deadline = [], time.monotonic() + 120
    while time.monotonic() < deadline and health[-2:] != [503, 200]:
        status = http_status(small_server.url + "/health")
        if not health or health[-1] != status:
            health.append(status)
            if status == 503:  # in the gap: the other task still answers
                assert predict(small_server, "sales", sales).status_code == 200
        time.sleep(0.05)
    assert health[-2:] == [503, 200], f"/health went {health}"
    held.join(60)
    response = lost["churn"]
    # the deadline, not an earlier failure (the request timeout, a broken connection), answered it
    assert response.status_code == 504 and response.json()["detail"] == f"no answer within {DEADLINE_S:g} s"
    assert metric(small_server, "relserve_rejected_total", task="churn", reason="deadline") == deadlines + 1
    assert predict(small_server, "churn", churn).status_code == 200
    assert churn_worker not in small_server.worker_pids()


def test_sigterm_during_start_up_exits_0_and_leaves_no_process(artifacts, tmp_path):
    # Compiling can take minutes; a stop must not wait for it, nor leave the workers behind.
    with ServerProcess(artifacts, "--tasks", "churn", "--max-batch-size", "8", log_path=tmp_path / "serve.log"
                       ) as starting:
        wait_for(starting.worker_pids, "inference worker")
        assert http_status(starting.url + "/health") != 200, starting.log()
        assert starting.terminate(timeout=60) == 0, starting.log()[-2000:]
        wait_for(lambda: starting.group_pids() == [], "empty process group")
