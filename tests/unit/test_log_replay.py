"""The one replay of the log (models.store.log.replay) and its one error policy: a batch the graph
refuses is stepped over, the same way by a worker's follower, the write side's view and
``training.compact``; a log out of order is an error."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from models.schema import ARTICLE, CUSTOMER
from models.store.live import LiveGraph
from models.store.log.format import LogError
from models.store.log.replay import replay
from models.store.log.wal import WriteAheadLog
from models.store.records import IngestBatch
from models.store.snapshot import GraphSnapshot
from models.store.versions import current_snapshot_dir
from serve.ingest.view import GraphView
from tests.unit.test_live_graph import CUT, graphs  # noqa: F401 (the fixture)


def batches_with_a_refused_one(base: GraphSnapshot) -> list[IngestBatch]:
    """Three purchases; the second names a customer the graph does not know (a write-side bug)."""
    customer, article = base.ids[CUSTOMER][2].decode(), base.ids[ARTICLE][4].decode()
    return [IngestBatch(n, "transactions", {"day": [CUT + n], "customer_id": [who], "article_id": [article],
                                            "price": [0.01 * n]})
            for n, who in ((1, customer), (2, "nobody"), (3, customer))]


def write_wal(directory: Path, batches: list[IngestBatch]) -> WriteAheadLog:
    wal = WriteAheadLog(directory, sync=False)
    for batch in batches:
        wal.append(batch, batch.sequence - 1)
    return wal


def test_a_refused_batch_is_stepped_over_and_reported(graphs, tmp_path: Path) -> None:  # noqa: F811
    live, _ = graphs
    batches = batches_with_a_refused_one(live.base)
    wal = write_wal(tmp_path / "wal", batches)
    graph = LiveGraph(live.base)
    done = replay(wal, graph)
    assert graph.sequence == 3 and list(done.skipped) == [2] and "nobody" in done.skipped[2]
    assert [b.sequence for b in done.batches] == [1, 2, 3]
    expected = LiveGraph(live.base)
    expected.apply_many([batches[0]])
    expected.skip(2)
    expected.apply_many([batches[2]])
    assert graph.delta_edges == expected.delta_edges == 2
    view = GraphView(live.base)  # the write side reads the same log to the same sequence
    assert view.catch_up(wal) == 3 and view.sequence == 3


def test_reads_bound_one_step_of_a_follower(graphs, tmp_path: Path) -> None:  # noqa: F811
    live, _ = graphs
    wal = write_wal(tmp_path / "wal", batches_with_a_refused_one(live.base))
    graph = LiveGraph(live.base)
    assert [b.sequence for b in replay(wal, graph, reads=1, limit=1).batches] == [1]
    assert graph.sequence == 1


def test_the_compact_command_steps_over_it_as_the_workers_do(graphs, tmp_path: Path, capsys) -> None:  # noqa: F811
    from training.compact import main

    live, _ = graphs
    artifacts, state = tmp_path / "artifacts", tmp_path / "state"
    shutil.copytree(live.base.directory, artifacts / "snapshot")
    write_wal(state / "wal", batches_with_a_refused_one(live.base)).close()
    assert main(["--artifacts", str(artifacts), "--state-dir", str(state)]) == 0
    out, err = capsys.readouterr()
    assert "warning: skipped log batch 2, as every worker does" in err and "log sequence 3" in out
    assert GraphSnapshot.open(current_snapshot_dir(artifacts, state)).sequence == 3


class OutOfOrder:
    """A log that hands back batch 2 first."""

    def read(self, after: int, limit: int = 256) -> list[IngestBatch]:
        return [IngestBatch(2, "transactions", {"day": [], "customer_id": [], "article_id": [], "price": []})]


def test_a_log_out_of_order_is_an_error(graphs) -> None:  # noqa: F811
    live, _ = graphs
    with pytest.raises(LogError, match="out of order"):
        replay(OutOfOrder(), LiveGraph(live.base))
