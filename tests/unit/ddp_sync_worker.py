"""Run under ``torchrun`` by ``test_fit_distributed.py``: one epoch of DDP training steps per task on
``DATA`` (argv[1]), then rank 0 prints, per task, the largest weight difference between the ranks
and how far the weights moved. Not a test module itself (pytest collects ``test_*.py`` only)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist

from models.graph.features import table_specs
from models.graph.sampler import SamplerConfig, TemporalSampler
from models.nn.model import TaskModel
from training.fit import distributed
from training.fit.batches import TrainBatches
from training.fit.config import RECIPES
from training.fit.data import prepare_snapshot, task_splits
from training.fit.loop import LRSchedule, Trainer
from training.tasks.definitions import TASKS


def flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def main(data: Path, out: Path) -> None:
    distributed.init_from_env()
    with distributed.main_first():
        snapshot = prepare_snapshot(data, out, progress=False)
    tx = snapshot.transactions()
    for task, recipe in RECIPES.items():
        torch.manual_seed(0)
        model = TaskModel(task, table_specs(snapshot), recipe.model_config())
        start = flat(model).clone()
        # uniform sampling with a seed per rank: the ranks' trees (and so their gradients) differ
        sampler = TemporalSampler(snapshot, SamplerConfig(recipe.fanouts, "uniform"))
        batches = TrainBatches(snapshot, task_splits(task, tx, snapshot)["train"], sampler,
                               TASKS[task].entity_type, 64, 0, 4)
        Trainer(model, batches, LRSchedule(0.003, len(batches)), 1, progress=False).run_epoch(0)
        weights = flat(model)
        gathered = [torch.empty_like(weights) for _ in range(distributed.world_size())]
        dist.all_gather(gathered, weights)
        if distributed.is_main():
            spread = max(float((g - gathered[0]).abs().max()) for g in gathered)
            print(f"{task} spread {spread} moved {float((weights - start).abs().max())}", flush=True)
    distributed.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
