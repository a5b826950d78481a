"""The graph owner over a real log and live graph, in this process: it replays the log before its
first version, applies waiting batches together, steps over a batch the graph refuses, follows a
compaction, paces the article keys, and a worker's :class:`SharedGraph` and :class:`KeyFollower`
read what it published.

Key refreshes are paced on a :class:`tests.fake_clock.FakeClock`: the test asserts on which step
keyed what, never on seconds measured on a loaded machine (``python -m serve.bench.ingest`` measures
how long a stream takes to be served)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from prometheus_client import CollectorRegistry

from models.schema import CUSTOMER
from models.store.records import IngestBatch
from models.store.shared_codec import dump
from models.store.shared_graph import SharedGraph
from models.store.shared_header import shared_dir
from models.store.shared_publisher import remove_shared
from models.store.snapshot import GraphSnapshot
from serve.graph import owner as owner_module
from serve.graph import owner_keys
from serve.graph.keys import KeyFollower
from serve.graph.owner import GraphOwner
from serve.graph.owner_keys import KeyMaker, RankingTask
from serve.ingest import progress
from serve.ingest.background import compact_once
from serve.ingest.config import IngestConfig
from serve.ingest.metrics import FollowerMetrics
from serve.ingest.service import open_ingestor
from tests.fake_clock import FakeClock
from tests.ingest_helpers import build_snapshot, transaction_rows


@pytest.fixture(scope="module")
def snapshot(tiny_csv_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> GraphSnapshot:
    return build_snapshot(tiny_csv_dir, tmp_path_factory.mktemp("artifacts") / "snapshot")


@pytest.fixture()
def config(tmp_path: Path) -> Iterator[IngestConfig]:
    config = IngestConfig(state_dir=tmp_path / "state", poll_s=0.01, key_share=0.1)
    yield config
    remove_shared(shared_dir(config.state_dir))


def owner_of(config: IngestConfig, snapshot: GraphSnapshot, ranking: list | None = None) -> GraphOwner:
    owner = GraphOwner(config, snapshot.directory.parent, ranking)
    owner.metrics = FollowerMetrics("graph", CollectorRegistry())
    return owner


def test_the_log_is_replayed_before_the_first_version_and_waiting_batches_go_together(
        config: IngestConfig, snapshot: GraphSnapshot) -> None:
    writer = open_ingestor(config, snapshot.directory)
    writer.ingest("customers", [{"customer_id": "early"}])
    owner = owner_of(config, snapshot)
    try:
        owner.catch_up()
        reader = SharedGraph(owner.publisher.directory, wait_s=5)
        assert (reader.sequence, owner.publisher.version) == (1, 1)
        assert reader.lookup(CUSTOMER, ["early"])[0] >= 0
        for i in range(5):
            writer.ingest("transactions", transaction_rows(snapshot, 1, day_offset=1 + i % 3))
        assert owner.step() and owner.publisher.version == 2  # five batches, one version
        assert reader.sequence == 6 and reader.delta_edges == 5
        assert not owner.step() and owner.publisher.version == 2  # nothing new: nothing published
    finally:
        owner.close()


def test_a_batch_the_graph_refuses_is_stepped_over(config: IngestConfig, snapshot: GraphSnapshot,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    log = config.open_log()
    bad = IngestBatch(0, "transactions", {"day": [snapshot.max_day], "customer_id": ["nobody"],
                                          "article_id": ["nothing"], "price": [0.1], "sales_channel_id": [1]})
    log.append(bad, 0)  # past the write side's validation, as a bug would
    open_ingestor(config, snapshot.directory).ingest("transactions", transaction_rows(snapshot, 1))
    owner = owner_of(config, snapshot)
    try:
        with caplog.at_level(logging.ERROR, logger="relserve.ingest"):
            owner.catch_up()
        assert owner.graph.sequence == 2 and owner.graph.delta_edges == 1
        assert "skipping log batch 1" in caplog.text
    finally:
        owner.close()


def test_a_compaction_is_followed_and_readers_move_with_it(config: IngestConfig,
                                                           snapshot: GraphSnapshot) -> None:
    artifacts = snapshot.directory.parent
    writer = open_ingestor(config, snapshot.directory)
    writer.ingest("customers", [{"customer_id": "kept"}])
    writer.ingest("transactions", transaction_rows(snapshot, 4))
    owner = owner_of(config, snapshot)
    try:
        owner.catch_up()
        reader = SharedGraph(owner.publisher.directory, wait_s=5)
        first_base = reader.base
        done = compact_once(config, artifacts)
        assert done is not None and done.sequence == 2
        writer.ingest("transactions", transaction_rows(snapshot, 1, day_offset=2))
        assert owner.step()
        assert owner.graph.base.sequence == 2 and (owner.graph.sequence, owner.graph.delta_edges) == (3, 1)
        assert reader.base is not first_base and reader.base.sequence == 2
        assert (reader.sequence, reader.delta_edges) == (3, 1) and reader.lookup(CUSTOMER, ["kept"])[0] >= 0
    finally:
        owner.close()


def test_keys_are_paced_and_a_worker_adopts_the_ones_of_its_model(
        config: IngestConfig, snapshot: GraphSnapshot, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock().install(monkeypatch, owner_keys)
    writer = open_ingestor(config, snapshot.directory)
    bundle, other = tmp_path / "purchase" / "1", tmp_path / "purchase" / "2"
    owner = owner_of(config, snapshot, [RankingTask("purchase", str(bundle))])
    keyed: list[int] = []  # the sequence each refresh covered

    def write_keys(task: str, view, path: Path) -> None:  # costs 40 ms: the next is due 0.36 s later
        clock.advance(0.04)
        keyed.append(view.sequence)
        dump({"task": task, "model_version": 1, "bundle": str(bundle.resolve()),
              "keys": torch.full((3, 2), float(view.sequence)), "popularity": torch.zeros(3, 1),
              "sequence": view.sequence, "seed_day": view.end_time,
              "base_dir": str(Path(view.base.directory).resolve())}, path)

    owner.keys.load = lambda bundle, graph: SimpleNamespace()
    owner.keys.write_keys = write_keys
    try:
        owner.catch_up()
        assert keyed == [0]
        for i in range(5):  # the clock stands still: every batch arrives before the keys are due
            writer.ingest("transactions", transaction_rows(snapshot, 1, day_offset=1 + i % 3))
            owner.step()
        assert owner.graph.sequence == 5 and keyed == [0]  # rows published, keys paced
        assert progress.read_progress(config.state_dir).visible(keyed=True) == 0  # the keys lag
        clock.advance(0.4)  # past the 0.36 s pause
        assert owner.step() and keyed == [0, 5]  # one refresh for all five batches
        assert owner.publisher.keys == (2, 5)
        assert progress.read_progress(config.state_dir).visible(keyed=True) == 5

        graph = SharedGraph(owner.publisher.directory)
        keys, _, version = graph.published_keys("purchase", bundle)
        assert version[1:] == (5, owner.graph.now_day) and float(keys[0, 0]) == 5
        assert graph.published_keys("purchase", bundle) is None  # nothing newer: nothing again
        refreshed: list[bool] = []
        model = SimpleNamespace(task="purchase", bundle_dir=other, follow_published_keys=lambda: False,
                                article_keys_stale=lambda: True,
                                refresh_article_keys=lambda: refreshed.append(True) or True)
        metrics = FollowerMetrics("purchase", CollectorRegistry())
        follower = KeyFollower(lambda: model, graph, metrics, 0.01, 0.1)
        follower.step()  # a hot swap the owner has not followed: this worker keys its own model
        assert refreshed == [True]
        model.bundle_dir = bundle
        follower.step()  # the owner keys this model: nothing computed here
        assert refreshed == [True]
    finally:
        owner.close()


def test_the_key_forward_is_compiled_once_batches_stream_and_only_where_asked(
        config: IngestConfig, snapshot: GraphSnapshot, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[tuple[str, int]] = []  # (task, sequence of the version it compiles on)

    class Recorder:
        def __init__(self, inference, view) -> None:
            self.inference = inference
            self.done, self.seconds = threading.Event(), None
            started.append((inference.task, view.sequence))

        def start(self) -> Recorder:
            return self

    monkeypatch.setattr(owner_keys, "KeyCompiler", Recorder)
    writer = open_ingestor(config, snapshot.directory)
    models = {"compiled": SimpleNamespace(task="compiled"), "eager": SimpleNamespace(task="eager")}
    owner = owner_of(config, snapshot, [RankingTask("compiled", str(tmp_path / "a"), compile=True),
                                        RankingTask("eager", str(tmp_path / "b"))])
    owner.keys.load = lambda bundle, graph: models["compiled" if bundle.name == "a" else "eager"]
    owner.keys.write_keys = lambda task, view, path: path.write_bytes(b"")
    owner.keys.pacer.share = 1.0  # no pause between refreshes
    registry = CollectorRegistry()
    owner.keys.metrics = {"compiled": FollowerMetrics("compiled", registry),
                          "eager": FollowerMetrics("eager", CollectorRegistry())}

    def compiles(outcome: str) -> float | None:
        return registry.get_sample_value("relserve_article_key_compiles_total",
                                         {"task": "compiled", "outcome": outcome})

    try:
        owner.catch_up()
        owner.step()
        assert started == []  # a server that never ingests never compiles
        writer.ingest("transactions", transaction_rows(snapshot, 1, day_offset=1))
        owner.step()
        assert started == [("compiled", 1)]  # on the version holding the first batch
        assert (compiles("started"), compiles("done")) == (1.0, None)  # what serve.bench.ingest waits on
        compiler = owner.keys.compilers["compiled"]
        compiler.seconds = 1.0
        compiler.done.set()
        writer.ingest("transactions", transaction_rows(snapshot, 1, day_offset=1))
        owner.step()
        assert started == [("compiled", 1)]  # once per model
        owner.step()
        assert (compiles("started"), compiles("done"), compiles("failed")) == (1.0, 1.0, None)  # counted once
        models["compiled"] = SimpleNamespace(task="compiled")  # a hot swap loads another model
        owner.keys.models["compiled"] = (2, models["compiled"])
        writer.ingest("transactions", transaction_rows(snapshot, 1, day_offset=1))
        owner.step()
        assert len(started) == 2 and started[1][0] == "compiled"
        owner.keys.compilers["compiled"].done.set()  # a failed compile (no seconds)
        owner.step()
        assert (compiles("started"), compiles("done"), compiles("failed")) == (2.0, 1.0, 1.0)
    finally:
        owner.close()


def test_the_keys_follow_the_model_version_the_workers_are_ordered_to_serve(
        config: IngestConfig, snapshot: GraphSnapshot, tmp_path: Path) -> None:
    from serve.versions.model_control import ModelControl
    from serve.versions.swap import SwapSettings

    control = ModelControl(tmp_path / "control")
    control.order("purchase", 1, source="start-up")
    settings = SwapSettings(control_dir=str(control.root), artifacts=str(tmp_path / "repository"), version=1)
    owner = owner_of(config, snapshot)
    maker = KeyMaker([RankingTask("purchase", str(snapshot.directory), settings)], owner.publisher, 1.0, 0.01)
    loaded: list[Path] = []
    maker.load = lambda bundle, graph: loaded.append(Path(bundle))
    try:
        assert maker._follow_models(owner.graph) and loaded == [snapshot.directory]
        assert not maker._follow_models(owner.graph)
        control.order("purchase", 7)  # a version the repository does not hold: the start-up one stays
        assert not maker._follow_models(owner.graph) and maker.models["purchase"][0] == 1
    finally:
        owner.close()


def test_the_owner_benchmark_prints_each_step(snapshot: GraphSnapshot, capsys: pytest.CaptureFixture) -> None:
    from serve.bench import graph_owner

    graph_owner.main(["--artifacts", str(snapshot.directory.parent), "--rows", "300", "--batch-rows", "100",
                      "--key-refreshes", "0"])
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert [int(r[0].replace(",", "")) for r in rows] == [100, 300]  # delta rows at the marks
    assert all(float(v) >= 0 for r in rows for v in r[1:])
    with pytest.raises(SystemExit):
        graph_owner.main(["--artifacts", str(snapshot.directory), "--rows", "10"])  # no snapshot/ in it


def test_an_idle_owner_waits_on_the_log_and_an_append_wakes_it(config: IngestConfig,
                                                                snapshot: GraphSnapshot) -> None:
    """With nothing new the owner does not look every poll (10 ms here) but waits on the WAL's
    doorbell, up to ``IDLE_WAIT_S``; an append wakes it (counts of steps, not seconds, are asserted:
    the machine may be loaded)."""
    writer = open_ingestor(config, snapshot.directory)
    owner = owner_of(config, snapshot)
    steps, step = [], owner.step
    owner.step = lambda: steps.append(1) or step()
    stop = threading.Event()
    try:
        owner.catch_up()
        thread = threading.Thread(target=owner.run, args=(lambda: not stop.is_set(),))
        started = time.monotonic()
        thread.start()
        stop.wait(1.0)
        stepped = len(steps)
        waited = time.monotonic() - started  # more than 1 s on a loaded machine
        assert 1 <= stepped <= waited / owner_module.IDLE_WAIT_S + 2  # not waited / config.poll_s
        writer.ingest("transactions", transaction_rows(snapshot, 3, day_offset=1))
        for _ in range(500):  # applied first, then published: wait for both
            if owner.graph.sequence == 1 and owner.publisher.version == 2:
                break
            stop.wait(0.01)
        assert owner.graph.sequence == 1 and owner.publisher.version == 2
    finally:
        stop.set()
        thread.join(10)
        owner.close()
