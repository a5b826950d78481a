"""Pacing of a worker's follower: its steps and its key refreshes each take a bounded share of the time,
batches arriving meanwhile are applied together and keyed by one refresh, and a worker never reports
keys that do not cover what it says.

The follower's clock is a :class:`tests.fake_clock.FakeClock`: costs and pauses are what the test
sets, so it asserts on which step did what, never on seconds measured on a loaded machine (how long
the stream takes to be served is ``python -m serve.bench.ingest``'s measure)."""

from __future__ import annotations

import time as real_time
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from models.store.snapshot import GraphSnapshot
from serve.ingest import follower as follower_module
from serve.ingest import pacing, progress
from serve.ingest.config import IngestConfig
from serve.ingest.follower import open_follower
from serve.ingest.metrics import FollowerMetrics
from serve.ingest.pacing import Pacer, StepClock
from serve.ingest.service import open_ingestor
from tests.fake_clock import FakeClock
from tests.ingest_helpers import build_snapshot, transaction_rows


@pytest.fixture(scope="module")
def snapshot(tiny_csv_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> GraphSnapshot:
    return build_snapshot(tiny_csv_dir, tmp_path_factory.mktemp("artifacts") / "snapshot")


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Poll ``condition`` (on the real clock) until true; the timeout only turns a hang into a failure."""
    deadline = real_time.monotonic() + timeout
    while not condition():
        assert real_time.monotonic() < deadline, f"no {what} within {timeout:.0f} s"
        real_time.sleep(0.01)


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


def test_the_step_clock_counts_wall_time_less_what_is_excluded(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock().install(monkeypatch, pacing)
    step = StepClock()
    step.start()
    clock.advance(0.05)  # a step that waits for the GIL or a core still holds the worker back
    step.exclude(0.02)
    assert step.stop() == pytest.approx(0.03)
    step.start()  # a new step forgets what the last one excluded
    clock.advance(0.01)
    assert step.stop() == pytest.approx(0.01)


def test_batches_waiting_in_the_log_are_applied_together_in_one_step(tmp_path: Path,
                                                                    snapshot: GraphSnapshot) -> None:
    config = IngestConfig(state_dir=tmp_path / "state")
    writer = open_ingestor(config, snapshot.directory)
    follower = open_follower(config, "sales", snapshot.directory.parent)
    reports: list[int] = []
    follower.report = lambda: reports.append(follower.graph.sequence)
    for i in range(5):
        writer.ingest("transactions", transaction_rows(snapshot, 1, day_offset=1 + i % 3))
    assert follower.step() == 5 and reports == [5]  # one rebuild, one report
    assert follower.step() == 0 and reports == [5]
    follower.stop()


def test_a_stream_of_batches_is_served_at_once_and_keyed_by_one_refresh_when_due(
        tmp_path: Path, snapshot: GraphSnapshot, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock().install(monkeypatch, follower_module, pacing)
    config = IngestConfig(state_dir=tmp_path / "state", poll_s=0.01, follow_share=0.1, key_share=0.1)
    writer = open_ingestor(config, snapshot.directory)
    follower = open_follower(config, "purchase", snapshot.directory.parent)
    registry = CollectorRegistry()
    follower.metrics = FollowerMetrics("purchase", registry)
    keyed: list[int] = [follower.graph.sequence]  # the sequence each refresh covered
    served: list[int] = []  # what each report said is served keys included

    def refresh() -> bool:  # a refresh costing 40 ms whenever the graph moved: the next is due 0.36 s later
        if keyed[-1] == follower.graph.sequence:
            return False
        clock.advance(0.04)
        keyed.append(follower.graph.sequence)
        return True

    def report() -> None:
        report_file()
        served.append(progress.read_all(config.state_dir)[0].served)

    def worker() -> progress.WorkerProgress:
        return progress.read_all(config.state_dir)[0]

    report_file = follower.report
    follower.refresh = refresh
    follower.report = report
    follower.start()
    try:
        writer.ingest("transactions", transaction_rows(snapshot, 1, day_offset=1))
        wait_for(lambda: worker().served == 1, "the first batch keyed at once (not paced after idling)")
        for i in range(1, 20):  # the clock stands still: every batch arrives before the keys are due
            writer.ingest("transactions", transaction_rows(snapshot, 1, day_offset=1 + i % 3))
        wait_for(lambda: worker().sequence == 20, "every row applied")
        assert worker().served == 1 and keyed == [0, 1]  # rows served, keys paced
        clock.advance(0.4)  # past the 0.36 s pause
        wait_for(lambda: worker().served == 20, "the keys refreshed once due")
    finally:
        follower.stop()
    assert keyed == [0, 1, 20]  # one refresh for the 19 batches that arrived meanwhile
    assert set(served) <= set(keyed)  # never ahead of the keys
    lags = registry.get_sample_value("relserve_ingest_visible_lag_seconds_count", {"task": "purchase"})
    assert lags == 20.0  # every batch observed once, when the worker's graph held it
    keys_lags = registry.get_sample_value("relserve_article_keys_lag_seconds_count", {"task": "purchase"})
    assert keys_lags == 2  # one per refresh that covered new batches
