"""``training.fit`` under ``torchrun``: each rank's part of every batch, the single-process defaults,
and a real 2-process gloo run that writes one loadable bundle per task."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from models.graph.sampler import SamplerConfig, TemporalSampler
from models.runtime.bundle import CONFIG_FILE, METRICS_FILE, SNAPSHOT_DIR
from models.runtime.inference import TaskInference
from models.store.snapshot import GraphSnapshot
from training.fit import distributed
from training.fit.batches import TrainBatches
from training.fit.data import prepare_snapshot, task_splits
from training.fit.evaluate import evaluate_model
from training.tasks.definitions import TASKS
from training.tasks.metrics import with_nmae

REPO = Path(__file__).resolve().parents[2]


def test_each_rank_trains_its_own_part_of_every_one_process_batch(tiny_csv_dir: Path, tmp_path: Path) -> None:
    snapshot = prepare_snapshot(tiny_csv_dir, tmp_path, progress=False)
    table = task_splits("churn", snapshot.transactions(), snapshot)["train"]
    sampler = TemporalSampler(snapshot, SamplerConfig((4,), "last"))
    order = torch.randperm(len(table), generator=torch.Generator().manual_seed(0))[:7 * 50 + 3]

    def shards(rank: int, world: int) -> list[torch.Tensor]:
        batches = TrainBatches(snapshot, table, sampler, "customer", 50, shard=(rank, world))
        return list(batches.shards(order))

    single = shards(0, 1)
    assert [len(rows) for rows in single] == [50] * 7 + [3]
    for world in (2, 3, 4):
        parts = [shards(rank, world) for rank in range(world)]
        assert all(len(p) == len(single) for p in parts), "every rank must run the same number of steps"
        for step, rows in enumerate(single[:-1]):
            mine = [p[step] for p in parts]
            assert torch.equal(torch.cat(mine), rows), "the ranks' parts are the one-process batch, disjoint"
            assert max(map(len, mine)) - min(map(len, mine)) <= 1
        last = [p[-1] for p in parts]  # 3 rows: a 4th rank gets a row from the epoch's start
        assert all(len(rows) >= 1 for rows in last)
        assert set(torch.cat(last).tolist()) >= set(single[-1].tolist())


def test_without_torchrun_there_is_one_process_and_no_group() -> None:
    assert not distributed.launched() and not distributed.init_from_env()
    assert distributed.shard() == (0, 1) and distributed.is_main()
    assert distributed.device() == torch.device("cpu")
    module = torch.nn.Linear(2, 2)
    assert distributed.wrap(module) is module
    value = torch.tensor(3.0)
    assert distributed.mean(value) is value
    assert distributed.from_main(lambda: {"auroc": 0.5}) == {"auroc": 0.5}


def torchrun(*args: str) -> subprocess.CompletedProcess:
    """``torchrun --standalone --nproc-per-node 2 ARGS`` from the repository root; ``--standalone``
    rendezvouses on a free local port, so parallel test runs never collide."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                           "2", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.slow
def test_ddp_averages_gradients_so_the_ranks_keep_identical_weights(tiny_csv_dir: Path,
                                                                    tmp_path: Path) -> None:
    proc = torchrun(str(REPO / "tests" / "unit" / "ddp_sync_worker.py"), str(tiny_csv_dir), str(tmp_path))
    lines = proc.stdout.strip().splitlines()
    assert [line.split()[0] for line in lines] == list(TASKS)
    for line in lines:
        _, _, spread, _, moved = line.split()
        assert float(spread) == 0.0 and float(moved) > 1e-4, line


@pytest.mark.slow
def test_two_gloo_processes_train_one_model_and_rank0_alone_writes(tiny_csv_dir: Path,
                                                                   tmp_path: Path) -> None:
    out = tmp_path / "artifacts"
    proc = torchrun("-m", "training.fit", "--data", str(tiny_csv_dir), "--task", "all", "--out", str(out),
                    "--epochs", "3", "--patience", "1", "--max-steps-per-epoch", "3", "--threads", "1")
    assert proc.stdout.count("churn (test)") == 1, "only rank 0 reports"
    snapshot = GraphSnapshot.open(out / SNAPSHOT_DIR)
    for task in TASKS:
        assert proc.stderr.count(f"wrote {out / task} ") == 1, "only rank 0 writes the bundle"
        training = json.loads((out / task / CONFIG_FILE).read_text())["training"]
        assert training["processes"] == 2 and training["steps_per_epoch"] == 3
        doc = json.loads((out / task / METRICS_FILE).read_text())
        test = task_splits(task, snapshot.transactions(), snapshot)["test"]
        inference = TaskInference.from_bundle(out / task, snapshot, compile="none")
        metrics = evaluate_model(inference, test)
        if "target_std" in doc:  # a task scored by MAE also records NMAE beside it
            metrics = with_nmae(metrics, doc["target_std"])
        assert metrics == pytest.approx(doc["test"]["model"], rel=1e-6, abs=1e-9)
