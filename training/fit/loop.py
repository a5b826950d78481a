"""Epochs of compiled training steps with a tensor learning-rate schedule and no host syncs per step.

The published PyG + ``torch.compile`` recipe: the learning rate lives in a tensor that the
schedule overwrites in place (a Python float would be a constant baked into the compiled
optimizer and recompile every change), the step returns its loss on the device, the losses are
summed there, and the host reads the sum once per epoch.
"""

from __future__ import annotations

import math
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch

from models.graph.buckets import BucketLadder
from models.nn.inputs import ModelInputs
from models.nn.model import TaskModel
from models.progress import on_terminal, progress_bar
from models.runtime.compile import CompileConfig, compiled_graph_count
from models.runtime.train_step import TrainStep, tensor_lr_adam
from models.schema import ARTICLE
from training.fit import distributed
from training.fit.averaging import WeightAverage
from training.fit.batches import TrainBatches


@dataclass(frozen=True)
class LRSchedule:
    """Linear warm-up to ``peak``, then cosine decay to ``peak * final_ratio`` at ``total_steps``.

    Args:
        peak: the largest learning rate.
        total_steps: steps of the whole run.
        warmup_fraction: share of the steps spent warming up.
        final_ratio: learning rate at the last step relative to ``peak``.
    """

    peak: float
    total_steps: int
    warmup_fraction: float = 0.05
    final_ratio: float = 0.05

    def __call__(self, step: int) -> float:
        warmup = max(1, round(self.warmup_fraction * self.total_steps))
        if step < warmup:
            return self.peak * (step + 1) / warmup
        progress = (step - warmup) / max(1, self.total_steps - warmup)
        floor = self.peak * self.final_ratio
        return floor + (self.peak - floor) * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))


def training_ladders(batches: TrainBatches, num_samples: int = 8) -> list[BucketLadder]:
    """Bucket ladders fitted on ``num_samples`` batches of the training batch size, one per seed type
    the step runs (purchase also pads its positive articles' trees)."""
    generator = torch.Generator().manual_seed(12345)
    size = min(batches.batch_size, len(batches.table))
    rows = [torch.randint(len(batches.table), (size,), generator=generator) for _ in range(num_samples)]
    samples = [batches.batch(r) for r in rows]
    max_sizes, most = batches.sampler.max_sizes, batches.batch_size
    ladders = [BucketLadder.fitted([s.inputs for s in samples], max_sizes, batches.seed_type, most)]
    if isinstance(samples[0].target, ModelInputs):
        ladders.append(BucketLadder.fitted([s.target for s in samples], max_sizes, ARTICLE,
                                           most + batches.negatives))
    return ladders


class Trainer:
    """Trains ``model`` on ``batches`` with Adam, the learning rate following ``schedule``; under
    ``torchrun`` in DistributedDataParallel (:mod:`training.fit.distributed`).

    Args:
        model: the task model.
        batches: the training batches of one epoch.
        schedule: learning rate per step; its ``total_steps`` should be ``epochs * len(batches)``.
        epochs: number of epochs (for the progress bars).
        weight_decay: Adam weight decay.
        compile: ``none``, ``dynamic`` or ``buckets`` (ladders fitted on training batches).
        progress: one tqdm bar per epoch on stderr when it is a terminal, else one line per epoch.
        average_half_life: half-life in epochs of the weight average that :meth:`averaged` puts in
            the model (:mod:`training.fit.averaging`; ``0``: no average, the last step's weights).
    """

    def __init__(self, model: TaskModel, batches: TrainBatches, schedule: LRSchedule, epochs: int,
                 weight_decay: float = 0.0, compile: str = "none", progress: bool = True,
                 average_half_life: float = 0.0) -> None:
        self.model = model
        self.batches = batches
        self.schedule = schedule
        self.epochs = epochs
        self.optimizer = tensor_lr_adam(model.parameters(), schedule(0), weight_decay)
        self.ladders = training_ladders(batches) if compile == "buckets" else []
        wrap = distributed.wrap if distributed.world_size() > 1 else None
        self.step = TrainStep(model, self.optimizer, CompileConfig(compile), self.ladders, wrap)
        self.progress = progress
        self.steps_done = 0
        self.graphs_per_epoch: list[int] = []
        self.average = (WeightAverage(model.parameters(), len(batches), average_half_life)
                        if average_half_life > 0 else None)

    def averaged(self) -> AbstractContextManager[None]:
        """The model holds the averaged weights inside the block (the trained ones without an average)."""
        return nullcontext() if self.average is None else self.average.swapped()

    def run_epoch(self, epoch: int) -> float:
        """Train one epoch; returns its mean loss (the one host sync of the epoch)."""
        graphs_before = compiled_graph_count()
        total = torch.zeros((), device=self.step.device)
        desc, started = f"{self.model.task} epoch {epoch + 1}/{self.epochs}", time.perf_counter()
        bar = progress_bar(self.batches, desc=desc, unit="step", enabled=self.progress, leave=True,
                           dynamic_ncols=True)
        for batch in bar:
            for group in self.optimizer.param_groups:
                group["lr"].fill_(self.schedule(self.steps_done))
            total += self.step(*batch)
            self.steps_done += 1
            if self.average is not None:
                self.average.update()
        mean_loss = float(distributed.mean(total)) / max(1, len(self.batches))
        bar.set_postfix(loss=f"{mean_loss:.4f}")
        bar.close()
        if self.progress and not on_terminal():  # what the bar would have ended on, as one line
            seconds = time.perf_counter() - started
            print(f"{desc}: {len(self.batches)} steps in {seconds:.1f} s "
                  f"({len(self.batches) / max(seconds, 1e-9):.2f} steps/s), loss {mean_loss:.4f}",
                  file=sys.stderr, flush=True)
        self.graphs_per_epoch.append(compiled_graph_count() - graphs_before)
        return mean_loss
