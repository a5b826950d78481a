"""The stored prefix arrays equal the in-memory computation; snapshots without them still work."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from models.graph.temporal_features import temporal_features
from models.schema import ARTICLE, CUSTOMER, NODE_TYPES
from models.store.snapshot import GraphSnapshot, SnapshotError, add_prefix
from models.store.snapshot_prefix import FIELDS, array_name, in_memory_prefix
from models.store.upgrade import main as upgrade_main
from training.synth.tables import SyntheticSize, synthetic_tables

SMALL = SyntheticSize(num_customers=60, num_articles=25, num_transactions=3000, num_days=400)


@pytest.fixture(scope="module")
def snapshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("snapshot")
    GraphSnapshot.build(synthetic_tables(SMALL, seed=3), directory, progress=False)
    return directory


def _strip_prefix(directory: Path) -> None:
    """Turn a snapshot into one written before the prefix arrays were stored."""
    meta = json.loads((directory / "meta.json").read_text())
    del meta["prefix"]
    (directory / "meta.json").write_text(json.dumps(meta))
    for path in directory.glob("*.prefix_*.npy"):
        path.unlink()


@pytest.fixture
def old_snapshot(snapshot_dir: Path, tmp_path: Path) -> Path:
    directory = Path(shutil.copytree(snapshot_dir, tmp_path / "old"))
    _strip_prefix(directory)
    return directory


def test_stored_arrays_equal_the_in_memory_computation(snapshot_dir: Path) -> None:
    snapshot = GraphSnapshot.open(snapshot_dir)
    assert snapshot.prefix is not None
    fresh = in_memory_prefix(snapshot.adjacency, snapshot.price.numpy())
    assert snapshot.prefix.mean_price == fresh.mean_price
    for t in NODE_TYPES:
        stored, computed = snapshot.prefix.edges[t], fresh.edges[t]
        assert (stored.min_day, stored.span) == (computed.min_day, computed.span)
        for field in FIELDS:
            assert torch.equal(getattr(stored, field), getattr(computed, field)), (t, field)
        # memory-mapped, and the smallest exact dtypes at this size
        assert isinstance(np.load(snapshot_dir / f"{array_name(t, 'key')}.npy", mmap_mode="r"), np.memmap)
        assert stored.spend.dtype == torch.float64
        assert stored.day_starts.dtype == stored.key.dtype == torch.int32


def test_old_snapshot_computes_them_in_memory_with_the_same_features(
        snapshot_dir: Path, old_snapshot: Path, caplog: pytest.LogCaptureFixture) -> None:
    new, old = GraphSnapshot.open(snapshot_dir), GraphSnapshot.open(old_snapshot)
    assert old.prefix is None
    assert old.fingerprint == new.fingerprint  # bundles of either match the other
    old.verify()
    ids = torch.arange(new.num_nodes[CUSTOMER])
    for seed_time in (new.min_day + 40, new.end_time):
        times = torch.full_like(ids, seed_time)
        with caplog.at_level(logging.WARNING, logger="models.graph.temporal_features"):
            got = temporal_features(old, CUSTOMER, ids, times)
        assert torch.equal(got, temporal_features(new, CUSTOMER, ids, times))
    articles = torch.arange(new.num_nodes[ARTICLE])
    end = torch.full_like(articles, new.end_time)
    got = temporal_features(old, ARTICLE, articles, end)
    assert torch.equal(got, temporal_features(new, ARTICLE, articles, end))
    warnings = [r.getMessage() for r in caplog.records if "no stored prefix arrays" in r.getMessage()]
    assert len(warnings) == 1 and "models.store.upgrade" in warnings[0]  # once per snapshot and process


def test_upgrade_adds_identical_arrays_and_keeps_the_fingerprint(snapshot_dir: Path, old_snapshot: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    before = GraphSnapshot.open(old_snapshot).fingerprint
    assert upgrade_main([str(old_snapshot)]) == 0
    assert "unchanged" in capsys.readouterr().out
    upgraded = GraphSnapshot.open(old_snapshot)
    assert upgraded.fingerprint == before
    upgraded.verify()
    for name in (array_name(t, f) for t in NODE_TYPES for f in FIELDS):
        added, built = (np.load(d / f"{name}.npy") for d in (old_snapshot, snapshot_dir))
        assert added.dtype == built.dtype and np.array_equal(added, built), name
    assert upgrade_main([str(old_snapshot)]) == 0  # a second run leaves the mapped files alone
    assert "nothing to do" in capsys.readouterr().out


def test_upgrade_of_a_missing_snapshot_is_one_line(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        upgrade_main([str(tmp_path / "nowhere")])
    assert info.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("python -m models.store.upgrade: error:") and "\n" not in err


def test_corrupt_prefix_array_is_refused(snapshot_dir: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(snapshot_dir, tmp_path / "copy"))
    name = array_name(ARTICLE, "spend")
    spend = np.load(copy / f"{name}.npy")
    spend[7] += 1.0
    np.save(copy / f"{name}.npy", spend)
    with pytest.raises(SnapshotError, match="prefix arrays do not match"):
        GraphSnapshot.open(copy).verify()
    np.save(copy / f"{name}.npy", spend.astype(np.float32))
    with pytest.raises(SnapshotError, match=name):
        GraphSnapshot.open(copy)
    (copy / f"{name}.npy").unlink()
    with pytest.raises(SnapshotError, match=f"{name}.npy: missing"):
        GraphSnapshot.open(copy)
    with pytest.raises(SnapshotError, match="no such directory"):
        add_prefix(copy / "nowhere")
