"""Pacing of a worker's follower: its steps and its key refreshes each take a bounded share of the time,
batches arriving meanwhile are applied together and keyed by one refresh, and a worker never reports
keys that do not cover what it says."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from models.store.snapshot import GraphSnapshot
from serve.ingest import progress
from serve.ingest.config import IngestConfig
from serve.ingest.follower import open_follower
from serve.ingest.metrics import FollowerMetrics
from serve.ingest.pacing import Pacer, StepClock
from serve.ingest.service import open_ingestor
from tests.ingest_helpers import build_snapshot, transaction_rows


@pytest.fixture(scope="module")
def snapshot(tiny_csv_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> GraphSnapshot:
    return build_snapshot(tiny_csv_dir, tmp_path_factory.mktemp("artifacts") / "snapshot")


def burn(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_the_pause_keeps_the_share_and_idle_polls_stay_short() -> None:
    pacer = Pacer(share=0.25, poll_s=0.05)
    assert pacer.pause(0.1, worked=True) == pytest.approx(0.3)  # 0.1 s of work in every 0.4 s
    assert pacer.pause(0.001, worked=False) == 0.05
    assert pacer.pause(0.1, worked=False) == pytest.approx(0.3)  # even looking cost that much
    assert pacer.pause(0.1, worked=True) == pytest.approx(0.3)
    assert pacer.pause(5.0, worked=True) == pytest.approx(0.3)  # one slow step: the median holds
    assert pacer.pause(0.3, worked=True) == pytest.approx(0.6)  # median of 0.1, 0.1, 5, 0.3: 0.2
    assert pacer.pause(0.3, worked=True) == pytest.approx(0.9)  # a lasting change is followed
    assert Pacer(share=1.0).pause(0.5, worked=True) == 0.0  # unpaced: step again at once
    with pytest.raises(ValueError, match="share"):
        Pacer(share=0.0)


def test_the_step_clock_counts_wall_time_less_what_is_excluded() -> None:
    clock = StepClock()
    clock.start()
    time.sleep(0.05)  # a step that waits for the GIL or a core still holds the worker back
    clock.exclude(0.02)
    assert 0.025 <= clock.stop() < 0.5


def test_a_stream_of_batches_is_applied_in_few_steps_and_keyed_in_few_refreshes(
        tmp_path: Path, snapshot: GraphSnapshot) -> None:
    config = IngestConfig(state_dir=tmp_path / "state", poll_s=0.01, follow_share=0.1, key_share=0.1)
    writer = open_ingestor(config, snapshot.directory)
    follower = open_follower(config, "purchase", snapshot.directory.parent)
    registry = CollectorRegistry()
    follower.metrics = FollowerMetrics("purchase", registry)
    keyed: list[int] = []  # the sequence each refresh covered
    served: list[int] = []  # what each report said is served keys included

    def refresh() -> bool:  # a refresh that costs 40 ms of CPU whenever the graph moved
        if keyed and keyed[-1] == follower.graph.sequence:
            return False
        burn(0.04)
        keyed.append(follower.graph.sequence)
        return True

    def report() -> None:
        report_file()
        served.append(progress.read_all(config.state_dir)[0].served)

    report_file = follower.report
    follower.refresh = refresh
    follower.report = report
    follower.start()
    try:
        started = time.monotonic()
        for i in range(20):  # a batch every 20 ms: faster than a refresh + its pause (~0.4 s)
            writer.ingest("transactions", transaction_rows(snapshot, 1, day_offset=1 + i % 3))
            time.sleep(0.02)
        deadline = time.monotonic() + 10
        while (progress.read_all(config.state_dir)[0].served != 20) and time.monotonic() < deadline:
            time.sleep(0.01)
        elapsed = time.monotonic() - started
    finally:
        follower.stop()
    assert served[-1] == 20 and keyed[-1] == 20
    assert set(served) <= {0, *keyed}  # never ahead of the keys
    # ~0.4 s between refreshes over a ~0.45 s stream: a handful of refreshes, not one per batch
    assert len(keyed) <= 6, keyed
    assert elapsed < 3.0
    lags = registry.get_sample_value("relserve_ingest_visible_lag_seconds_count", {"task": "purchase"})
    assert lags == 20.0  # every batch observed once, when the worker's graph held it
    keys_lags = registry.get_sample_value("relserve_article_keys_lag_seconds_count", {"task": "purchase"})
    assert keys_lags == len([k for k in keyed if k > 0])  # one per refresh that covered new batches
