"""The serving-at-scale benchmark's tools: untrained bundles load and serve; memory by mapping adds up."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from models.registry import TASKS
from models.runtime.bundle import load_bundle, read_config
from models.runtime.inference import TaskInference
from models.store.snapshot import GraphSnapshot
from serve.bench.proc import memory
from training.bench.untrained import main as untrained_main
from training.synth.tables import SyntheticSize, synthetic_tables

SMALL = SyntheticSize(num_customers=60, num_articles=25, num_transactions=1500, num_days=60)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("artifacts")
    GraphSnapshot.build(synthetic_tables(SMALL, seed=4), directory / "snapshot", progress=False)
    assert untrained_main(["--artifacts", str(directory), "--max-batch-size", "4"]) == 0
    return directory


@pytest.mark.parametrize("task", list(TASKS))
def test_untrained_bundle_loads_and_predicts(artifacts: Path, task: str) -> None:
    snapshot = GraphSnapshot.open(artifacts / "snapshot")
    config = read_config(artifacts / task)
    assert config.training["untrained"] is True and config.max_batch_size == 4
    load_bundle(artifacts / task, snapshot)
    inference = TaskInference.from_bundle(artifacts / task, snapshot, compile="none", max_batch_size=4)
    result = inference.run(torch.tensor([0, 1, 2]))
    assert (result.values if result.values is not None else result.scores).shape[0] == 3


def test_untrained_rejects_unknown_task(artifacts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        untrained_main(["--artifacts", str(artifacts), "--tasks", "nope"])
    assert "unknown nope" in capsys.readouterr().err


def test_memory_counts_touched_snapshot_pages(tmp_path: Path) -> None:
    snapshot_dir = tmp_path / "snap"
    snapshot_dir.mkdir()
    np.save(snapshot_dir / "big.npy", np.ones(4 << 20, dtype=np.float32))  # 16 MiB
    before = memory(os.getpid(), snapshot_dir)
    mapped = np.load(snapshot_dir / "big.npy", mmap_mode="r")
    assert float(mapped.sum()) == 4 << 20  # touches every page
    after = memory(os.getpid(), snapshot_dir)
    assert before["snapshot"] < 1 and after["snapshot"] >= 15
    assert after["private"] == pytest.approx(after["rss"] - after["snapshot"])
