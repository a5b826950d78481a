"""Compaction writes the live graph as the snapshot a rebuild would write; versions switch atomically and
are removed only when no live process holds them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from models.graph.temporal_features import temporal_features
from models.schema import ARTICLE, CUSTOMER
from models.store.compact import materialize
from models.store.live import LiveGraph
from models.store.records import IngestBatch
from models.store.snapshot import GraphSnapshot
from models.store.versions import (
    CURRENT_FILE,
    SNAPSHOTS_DIR,
    Lease,
    compact,
    current_snapshot_dir,
    open_current,
    remove_unused,
)
from tests.unit.test_live_graph import CUT, graphs  # noqa: F401 (the fixture)


def test_a_compacted_live_graph_is_the_rebuilt_snapshot(graphs, tmp_path: Path) -> None:  # noqa: F811
    live, rebuilt = graphs
    compacted = materialize(live.view(), tmp_path / "compacted")
    assert compacted.fingerprint == rebuilt.fingerprint  # the same arrays, byte for byte
    assert compacted.sequence == live.sequence
    assert LiveGraph(compacted).sequence == live.sequence  # a graph over it resumes after it


def test_new_nodes_take_their_sorted_place(graphs, tmp_path: Path) -> None:  # noqa: F811
    live, _ = graphs
    fresh = LiveGraph(live.base)
    fresh.apply(IngestBatch(1, "customers", {"customer_id": ["0-first", "zz-last"]}))
    fresh.apply(IngestBatch(2, "articles", {"article_id": ["0000000001"]}))
    fresh.apply(IngestBatch(3, "transactions", {
        "day": [CUT + 1, CUT + 1, CUT + 2], "customer_id": ["zz-last", "0-first", "zz-last"],
        "article_id": ["0000000001", live.base.ids[ARTICLE][3].decode(), "0000000001"],
        "price": [0.01, 0.02, 0.03]}))
    compacted = materialize(fresh.view(), tmp_path / "compacted")
    view = fresh.view()
    assert compacted.num_nodes == view.num_nodes and compacted.num_transactions == view.num_transactions
    assert compacted.ids[CUSTOMER][0] == b"0-first" and compacted.ids[CUSTOMER][-1] == b"zz-last"
    for node_type, names in ((CUSTOMER, ["0-first", "zz-last", live.base.ids[CUSTOMER][5].decode()]),
                             (ARTICLE, ["0000000001", live.base.ids[ARTICLE][3].decode()])):
        old = torch.from_numpy(fresh.lookup(node_type, names))
        new = torch.from_numpy(compacted.lookup(node_type, names))
        for t in (CUT + 1, CUT + 3):
            time_old, time_new = torch.full_like(old, t), torch.full_like(new, t)
            torch.testing.assert_close(temporal_features(view, node_type, old, time_old),
                                       temporal_features(compacted, node_type, new, time_new))
        assert torch.equal(view.categorical[node_type].index_select(0, old),
                           compacted.categorical[node_type].index_select(0, new))


def test_versions_switch_atomically_and_go_when_unused(graphs, tmp_path: Path) -> None:  # noqa: F811
    live, _ = graphs
    artifacts, state = tmp_path / "artifacts", tmp_path / "state"
    assert current_snapshot_dir(artifacts, state) == artifacts / "snapshot"
    first = compact(live.view(), state)
    assert current_snapshot_dir(artifacts, state) == first.directory
    assert (state / SNAPSHOTS_DIR / CURRENT_FILE).read_text().strip() == first.directory.name
    opened, lease = open_current(artifacts, state)
    assert opened.directory == first.directory and lease is not None
    # a lease of a process that has exited does not keep a version
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    (state / SNAPSHOTS_DIR / "leases" / f"{first.directory.name}.{dead}.0000").touch()
    second = compact(LiveGraph(opened).view(), state)
    assert current_snapshot_dir(artifacts, state) == second.directory
    assert first.directory.is_dir() and first.directory not in second.removed  # still leased by us
    lease.release()
    assert remove_unused(state) == (first.directory,) and not first.directory.exists()
    assert GraphSnapshot.open(second.directory).fingerprint == opened.fingerprint
    assert not any(p.name.startswith(".building") for p in (state / SNAPSHOTS_DIR).iterdir())
    assert Lease.hold(artifacts / "snapshot") is None  # the artifacts' snapshot is never leased or removed
    assert os.listdir(state / SNAPSHOTS_DIR / "leases") == []
    assert np.array_equal(GraphSnapshot.open(second.directory).ids[CUSTOMER], live.base.ids[CUSTOMER])


def test_the_compact_command_folds_the_write_ahead_log(graphs, tmp_path: Path, capsys) -> None:  # noqa: F811
    from models.store.log.wal import WriteAheadLog
    from training.compact import main

    live, _ = graphs
    artifacts, state = tmp_path / "artifacts", tmp_path / "state"
    shutil.copytree(live.base.directory, artifacts / "snapshot")
    customer, article = live.base.ids[CUSTOMER][2].decode(), live.base.ids[ARTICLE][4].decode()
    batches = [IngestBatch(n, "transactions", {"day": [CUT + n], "customer_id": [customer],
                                               "article_id": [article], "price": [0.01 * n]})
               for n in (1, 2, 3)]
    wal = WriteAheadLog(state / "wal")
    for batch in batches:
        wal.append(batch, batch.sequence - 1)
    wal.close()
    assert main(["--artifacts", str(artifacts), "--state-dir", str(state)]) == 0
    assert "log sequence 3 (3 transactions folded" in capsys.readouterr().out
    version = GraphSnapshot.open(current_snapshot_dir(artifacts, state))
    expected = LiveGraph(live.base)
    expected.apply_many(batches)
    assert version.sequence == 3
    assert version.fingerprint == materialize(expected.view(), tmp_path / "expected").fingerprint
    assert main(["--artifacts", str(artifacts), "--state-dir", str(state)]) == 0
    assert "nothing to compact" in capsys.readouterr().out
