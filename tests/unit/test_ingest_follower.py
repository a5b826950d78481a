"""A worker's follower over a real live graph: it replays the log before serving, applies new batches
in a thread, refreshes what depends on the graph, reports its sequence, and steps over a batch the
graph refuses."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from models.schema import CUSTOMER
from models.store.live import LiveGraph
from models.store.records import IngestBatch
from models.store.snapshot import GraphSnapshot
from serve.ingest import follower as follower_module
from serve.ingest import progress
from serve.ingest.background import compact_once
from serve.ingest.config import IngestConfig
from serve.ingest.follower import Follower, open_follower
from serve.ingest.metrics import FollowerMetrics
from serve.ingest.service import open_ingestor
from tests.fake_clock import FakeClock
from tests.ingest_helpers import build_snapshot, transaction_rows


@pytest.fixture(scope="module")
def snapshot(tiny_csv_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> GraphSnapshot:
    return build_snapshot(tiny_csv_dir, tmp_path_factory.mktemp("artifacts") / "snapshot")


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    """Poll ``condition`` until true; the timeout only turns a hang into a failure."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def reported(config: IngestConfig) -> int | None:
    reports = progress.read_all(config.state_dir)
    return reports[0].sequence if reports else None


def test_replays_before_serving_then_follows_and_reports(tmp_path: Path, snapshot: GraphSnapshot) -> None:
    config = IngestConfig(state_dir=tmp_path / "state", poll_s=0.01)
    writer = open_ingestor(config, snapshot.directory)
    writer.ingest("customers", [{"customer_id": "early"}])
    writer.ingest("transactions", transaction_rows(snapshot, 3))
    follower = open_follower(config, "churn", snapshot.directory.parent)
    assert follower.graph.sequence == 2 and follower.graph.lookup(CUSTOMER, ["early"])[0] >= 0
    assert reported(config) is None  # not serving yet: nothing reported before start()
    registry = CollectorRegistry()
    follower.metrics = FollowerMetrics("churn", registry)
    refreshes = []

    def refresh() -> bool:  # called every poll; says it refreshed only the first time
        refreshes.append(follower.graph.sequence)
        return len(refreshes) == 1

    follower.refresh = refresh
    follower.start()
    try:
        wait_for(lambda: reported(config) == 2)
        writer.ingest("transactions", transaction_rows(snapshot, 2, day_offset=2))
        wait_for(lambda: reported(config) == 3)
        assert follower.graph.now_day == snapshot.max_day + 3
        report = progress.read_all(config.state_dir)[0]
        assert report.delta_rows == 5 + 1 and report.task == "churn"
        lag = registry.get_sample_value("relserve_ingest_visible_lag_seconds_count", {"task": "churn"})
        assert lag == 1.0  # the replayed batches are not lag samples
        assert registry.get_sample_value("relserve_ingest_applied_batches_total", {"task": "churn"}) == 1.0
        assert registry.get_sample_value("relserve_article_key_refreshes_total", {"task": "churn"}) == 1.0
        wait_for(lambda: 3 in refreshes)  # the keys' refresh follows the report, paced
    finally:
        follower.stop()
    assert reported(config) is None


def test_rows_are_served_at_once_while_the_keys_follow_on_their_own_pacing(
        tmp_path: Path, snapshot: GraphSnapshot, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock().install(monkeypatch, follower_module)
    config = IngestConfig(state_dir=tmp_path / "state", key_share=0.1)
    writer = open_ingestor(config, snapshot.directory)
    follower = open_follower(config, "purchase", snapshot.directory.parent)
    registry = CollectorRegistry()
    follower.metrics = FollowerMetrics("purchase", registry)
    keyed = [follower.graph.sequence]

    def refresh() -> bool:  # a refresh taking 10 s: at a share of 0.1 the next is due 90 s after it
        if keyed[-1] == follower.graph.sequence:
            return False
        clock.advance(10.0)
        keyed.append(follower.graph.sequence)
        return True

    def report() -> progress.WorkerProgress:
        return progress.read_all(config.state_dir)[0]

    follower.refresh = refresh
    try:
        writer.ingest("transactions", transaction_rows(snapshot, 2))
        assert follower.step() == 1 and report().served == 1  # a first refresh is due at once
        writer.ingest("transactions", transaction_rows(snapshot, 2, day_offset=1))
        assert follower.step() == 1
        assert (report().sequence, report().served) == (2, 1)  # the rows at once, the keys not yet
        assert progress.visible_sequence([report()], {"purchase": 1}) == 1
        assert progress.visible_sequence([report()], {"purchase": 1}, keys=False) == 2
        clock.advance(89.0)
        assert follower.step() == 0 and report().served == 1  # 89 of the 90 s: still paced
        clock.advance(2.0)
        assert follower.step() == 0 and report().served == 2  # past them: the keys cover the rows
        assert keyed == [0, 1, 2]
        lags = registry.get_sample_value("relserve_article_keys_lag_seconds_sum", {"task": "purchase"})
        assert lags >= 100  # the second batch waited for the paced refresh (90 s) and its own (10 s)
    finally:
        follower.stop()


def test_a_batch_the_graph_refuses_is_stepped_over(tmp_path: Path, snapshot: GraphSnapshot,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    config = IngestConfig(state_dir=tmp_path / "state")
    log = config.open_log()
    bad = IngestBatch(0, "transactions", {"day": [snapshot.max_day], "customer_id": ["nobody"],
                                          "article_id": ["nothing"], "price": [0.1], "sales_channel_id": [1]})
    log.append(bad, 0)  # past the write side's validation, as a bug would
    writer = open_ingestor(config, snapshot.directory)
    writer.ingest("transactions", transaction_rows(snapshot, 1))
    follower = Follower(config.open_log(), LiveGraph(snapshot),
                        progress.ProgressFile(config.state_dir, "sales"),
                        FollowerMetrics("sales", CollectorRegistry()))
    with caplog.at_level(logging.ERROR, logger="relserve.ingest"):
        while follower.step():
            pass
    assert follower.graph.sequence == 2 and follower.graph.delta_edges == 1
    assert "skipping log batch 1" in caplog.text


def test_a_compaction_is_followed_to_the_new_version(tmp_path: Path, snapshot: GraphSnapshot) -> None:
    artifacts = snapshot.directory.parent
    config = IngestConfig(state_dir=tmp_path / "state", compact_every_s=60)
    writer = open_ingestor(config, snapshot.directory)
    writer.ingest("customers", [{"customer_id": "kept"}])
    writer.ingest("transactions", transaction_rows(snapshot, 4))
    follower = open_follower(config, "purchase", artifacts)
    switched = []
    follower.switch = switched.append
    assert follower.step() == 0 and switched == []  # nothing compacted yet

    done = compact_once(config, artifacts)
    assert done is not None and done.sequence == 2 and compact_once(config, artifacts) is None
    writer.ingest("transactions", transaction_rows(snapshot, 1, day_offset=2))
    follower.step()
    assert switched == [follower.graph] and follower.graph.base.sequence == 2
    # The new version, and the log after it.
    assert follower.graph.sequence == 3 and follower.graph.delta_edges == 1
    assert follower.graph.lookup(CUSTOMER, ["kept"])[0] >= 0
    report = progress.read_all(config.state_dir)[0]
    assert (report.sequence, report.snapshot_version, report.delta_rows) == (3, 2, 1)
    follower.stop()
