"""SIGINT (a terminal's Ctrl-C) and SIGTERM (systemd's ``KillMode=control-group``) sent to the whole
process group of a real ``python -m serve --state-dir`` under light traffic: predictions from two
clients and a stream of ingested batches.

Every process receives the signal at once; only the main process may act on it. Checked: the
requests in flight are answered, later ones refused with ``503`` (or, once the server is gone, by
the connection), nothing else; the exit status is 130 / 0; no traceback or leaked resource in the
server's output; the process group empties; the log holds each acknowledged batch exactly once
and reads back whole. A 1 s batch window keeps predictions in flight whenever the signal lands.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from models.registry import TASKS
from models.store.log.wal import WriteAheadLog
from models.store.snapshot import GraphSnapshot
from serve.bench.process import ServerProcess
from tests.ingest_helpers import WRITE_KEY, node_ids, transaction_rows
from tests.integration.waits import metric, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WRITE = {"Authorization": f"Bearer {WRITE_KEY}"}
SERVED = ("churn", "sales")
EXIT_STATUS = {signal.SIGINT: 130, signal.SIGTERM: 0}


@dataclass
class Outcome:
    """One request: when it was sent and answered, and how (a status code or an exception name)."""

    sent_at: float
    answered_at: float
    result: int | str
    body: dict = field(default_factory=dict)


class Traffic:
    """Predictions from two clients and one ingestion client, each paced, until :meth:`stop`."""

    def __init__(self, server: ServerProcess, snapshot: GraphSnapshot) -> None:
        self.server = server
        self.bodies = {task: [{spec.id_field: i} for i in node_ids(snapshot, spec.entity_type, 40)]
                       for task, spec in TASKS.items() if task in SERVED}
        self.snapshot = snapshot
        self.predictions: list[Outcome] = []
        self.batches: dict[str, Outcome] = {}  # idempotency key -> outcome
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._predict, args=(SERVED[i % len(SERVED)], i))
                         for i in range(2)] + [threading.Thread(target=self._ingest)]

    def start(self) -> Traffic:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(120)

    def _call(self, session: requests.Session, path: str, **kwargs: object) -> Outcome:
        sent = time.monotonic()
        try:
            answer = session.post(self.server.url + path, timeout=60, **kwargs)
        except requests.RequestException as e:
            return Outcome(sent, time.monotonic(), type(e).__name__)
        body = answer.json() if answer.headers.get("content-type", "").startswith("application/json") else {}
        return Outcome(sent, time.monotonic(), answer.status_code, body)

    def _predict(self, task: str, client: int) -> None:
        session, i = requests.Session(), client
        while not self._stop.is_set():
            outcome = self._call(session, f"/predict/{task}", json=self.bodies[task][i % 40])
            self.predictions.append(outcome)
            if isinstance(outcome.result, str):
                return  # the server is gone
            i += 2
            self._stop.wait(0.05)

    def _ingest(self) -> None:
        session, i = requests.Session(), 0
        while not self._stop.is_set():
            key = f"signal-{i}"
            rows = transaction_rows(self.snapshot, 2, start=(3 * i) % 300)
            outcome = self._call(session, "/ingest/transactions", json={"rows": rows},
                                 headers={**WRITE, "Idempotency-Key": key})
            self.batches[key] = outcome
            if isinstance(outcome.result, str):
                return
            i += 1
            self._stop.wait(0.1)


def refused_cleanly(outcome: Outcome) -> bool:
    """A ``503`` saying the server is shutting down."""
    return outcome.result == 503 and "shutting down" in str(outcome.body.get("detail", ""))


def check_answers(traffic: Traffic, signalled_at: float) -> None:
    """In flight at the signal: answered; sent before it: answered or refused; after it: also the
    connection refused or closed once the server is gone. Never another status."""
    before = [o for o in traffic.predictions if o.sent_at < signalled_at]
    assert all(o.result == 200 or refused_cleanly(o) for o in before), \
        f"a request sent before the signal: {[o.result for o in before if o.result != 200]}"
    assert any(o.result == 200 and o.answered_at > signalled_at for o in before), "nothing in flight drained"
    after = [o for o in traffic.predictions if o.sent_at >= signalled_at]
    assert all(o.result == 200 or refused_cleanly(o) or isinstance(o.result, str) for o in after), \
        f"answers after the signal: {sorted({str(o.result) for o in after})}"
    batches = traffic.batches.values()
    assert all(o.result == 200 or refused_cleanly(o)
               or (isinstance(o.result, str) and o.sent_at >= signalled_at) for o in batches), \
        f"ingestion answers: {sorted({str(o.result) for o in batches})}"


def check_log(traffic: Traffic, state: Path) -> None:
    """Every acknowledged batch in the log once, under its sequence; no refused one; nothing torn."""
    wal = WriteAheadLog(state / "wal")
    batches = wal.read(0, limit=100_000)
    assert [b.sequence for b in batches] == list(range(1, len(batches) + 1))
    assert wal.recover() == len(batches)  # nothing torn at the end
    by_key = {b.key: b for b in batches}
    assert len(by_key) == len(batches), "a batch was appended twice"
    acknowledged = {key: o.body["sequence"] for key, o in traffic.batches.items() if o.result == 200}
    assert acknowledged and all(by_key[key].sequence == sequence for key, sequence in acknowledged.items())
    refused = {key for key, o in traffic.batches.items() if o.result == 503}
    assert not refused & set(by_key), "a refused batch was appended"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_the_whole_group_drains_and_stops_every_process(artifacts: Path, snapshot: GraphSnapshot,
                                                                    tmp_path: Path, signum: int) -> None:
    state = tmp_path / "state"
    server = ServerProcess(artifacts, "--tasks", ",".join(SERVED), "--compile", "none", "--max-batch-size",
                           "8", "--batch-timeout", "1", "--drain-timeout", "30", "--state-dir", str(state),
                           env={"RELSERVE_WRITE_KEY": WRITE_KEY}, log_path=tmp_path / "serve.log").start()
    traffic = None
    try:
        server.wait_ready(timeout=600)
        group = server.group_pids()
        traffic = Traffic(server, snapshot).start()
        wait_for(lambda: sum(o.result == 200 for o in list(traffic.batches.values())) >= 3
                 and sum(o.result == 200 for o in list(traffic.predictions)) >= 3, "traffic answered")
        wait_for(lambda: sum(metric(server, "relserve_inflight_requests", task=t) for t in SERVED) >= 1,
                 "a prediction in flight")
        os.killpg(server.proc.pid, signum)  # every process of the group, as a terminal or systemd does
        signalled_at = time.monotonic()
        assert server.proc.wait(120) == EXIT_STATUS[signum]
        traffic.stop()
        wait_for(lambda: server.group_pids() == [], "an empty process group")
    finally:
        if traffic is not None:
            traffic.stop()
        server.stop()
    assert len(group) >= len(SERVED) + 3  # main, Manager, workers, API server, resource tracker
    check_answers(traffic, signalled_at)
    output = server.log()
    for sign in ("Traceback", "leaked", "KeyboardInterrupt", "EOFError"):
        assert sign not in output, f"{sign!r} in the server's output:\n{output[-3000:]}"
    check_log(traffic, state)
