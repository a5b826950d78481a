"""How long a task's training will take, said before it starts, and the wall-clock budget that bounds it.

Before the first epoch :func:`estimate_task` times a few real training steps on a throwaway copy
of the model (the random state of the epoch's batches is restored, so the run trains exactly as
it would without the probe) and a slice of the validation evaluation, and extrapolates: the log
line says how many steps will run and about how long the task takes at most. :class:`TimeBudget`
splits ``--time-budget`` across the tasks still to train and tells the epoch loop when the next
epoch would no longer fit.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass

import numpy as np
import torch

from models.nn.model import TaskModel
from models.runtime.compile import CompileConfig
from models.runtime.inference import TaskInference
from models.runtime.train_step import TrainStep, tensor_lr_adam
from training.fit.batches import TrainBatches
from training.fit.evaluate import predict_table
from training.tasks.table import TaskTable

PROBE_STEPS = 3
PROBE_ROWS = 256


def minutes(seconds: float) -> str:
    """``"42 s"`` or ``"3.5 min"``: a duration as a person reads it."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


@dataclass(frozen=True)
class Estimate:
    """The planned work of one task and its extrapolated duration.

    Args:
        epochs: most epochs.
        steps_per_epoch: batches per epoch.
        batch_size: rows per batch.
        step_seconds: measured seconds per training step (sampling included).
        epoch_setup_seconds: measured once-per-epoch work of the batches (purchase: drawing positives).
        val_rows: validation rows scored after every epoch.
        val_seconds: estimated seconds of one validation pass.
        test_seconds: estimated seconds of the final test pass.
    """

    epochs: int
    steps_per_epoch: int
    batch_size: int
    step_seconds: float
    epoch_setup_seconds: float
    val_rows: int
    val_seconds: float
    test_seconds: float

    @property
    def epoch_seconds(self) -> float:
        return self.epoch_setup_seconds + self.steps_per_epoch * self.step_seconds + self.val_seconds

    @property
    def total_seconds(self) -> float:
        return self.epochs * self.epoch_seconds + self.test_seconds

    def line(self, task: str) -> str:
        steps = self.epochs * self.steps_per_epoch
        return (f"{task}: at most {self.epochs} epochs x {self.steps_per_epoch} steps of {self.batch_size} "
                f"rows = {steps:,} steps (~{self.step_seconds * 1000:.0f} ms each), validation on "
                f"{self.val_rows:,} rows after each epoch (~{minutes(self.val_seconds)}); "
                f"estimate: at most ~{minutes(self.total_seconds)} (early stopping usually ends sooner)")


def _time_steps(model: TaskModel, batches: TrainBatches, steps: int) -> tuple[float, float]:
    """Seconds per training step (sampling, forward, backward, Adam) on a copy of ``model``, and the
    seconds of the once-per-epoch work of the batches."""
    rng_state, generator_state = batches.rng.bit_generator.state, batches.generator.get_state()
    probe = copy.deepcopy(model)
    step = TrainStep(probe, tensor_lr_adam(probe.parameters(), 1e-9), CompileConfig("none"))
    rows = torch.from_numpy(np.random.default_rng(0).integers(0, len(batches.table), batches.batch_size))
    started = time.perf_counter()
    # purchase draws every row's positive once per epoch (seconds on millions of rows), not per step
    positives = batches.draw_positives() if batches.table.is_link else None
    per_epoch = time.perf_counter() - started
    step(*batches.batch(rows, positives))  # the first step allocates Adam's state: not what a step costs
    started = time.perf_counter()
    for _ in range(steps):
        step(*batches.batch(rows, positives))
    seconds = (time.perf_counter() - started) / steps
    batches.rng.bit_generator.state = rng_state
    batches.generator.set_state(generator_state)
    return seconds, per_epoch


def _eval_seconds(inference: TaskInference, table: TaskTable, batch_size: int) -> float:
    """Estimated seconds to score all of ``table`` from a timed slice of ``PROBE_ROWS`` rows (for
    purchase the article keys are computed once per distinct seed time, so they are timed apart)."""
    if len(table) == 0:
        return 0.0
    rows = table.subset(np.arange(min(PROBE_ROWS, len(table))))
    started = time.perf_counter()
    predict_table(inference, rows, batch_size, progress=False)
    sliced = time.perf_counter() - started
    if not table.is_link:
        return sliced * len(table) / len(rows)
    started = time.perf_counter()
    inference.compute_article_keys(int(table.seed_time[0]))
    keys = min(time.perf_counter() - started, sliced)
    times = len(np.unique(table.seed_time))
    return times * keys + (sliced - keys) * len(table) / len(rows)


def estimate_task(model: TaskModel, batches: TrainBatches, inference: TaskInference, val: TaskTable,
                  test: TaskTable, epochs: int, eval_batch_size: int) -> Estimate:
    """Time :data:`PROBE_STEPS` training steps and a slice of evaluation, and extrapolate."""
    was_training = model.training
    step_seconds, epoch_setup = _time_steps(model, batches, PROBE_STEPS)
    model.eval()
    per_val = _eval_seconds(inference, val, eval_batch_size)
    per_test = per_val * len(test) / max(1, len(val))  # training.fit never gets an empty val table
    model.train(was_training)
    return Estimate(epochs, len(batches), batches.batch_size, step_seconds, epoch_setup, len(val), per_val,
                    per_test)


class TimeBudget:
    """``--time-budget`` shared by the tasks of one run: each task may use an equal share of what
    is left when it starts, so a task that stops early leaves its time to the next ones.

    Args:
        seconds: the whole run's budget (``None``: unbounded).
        tasks: number of tasks the run trains.
    """

    def __init__(self, seconds: float | None, tasks: int) -> None:
        self.deadline = None if seconds is None else time.monotonic() + seconds
        self.tasks_left = tasks
        self.task_deadline: float | None = None

    def start_task(self) -> float | None:
        """Open the next task's share; returns its seconds (``None``: unbounded)."""
        if self.deadline is None:
            return None
        share = max(0.0, self.deadline - time.monotonic()) / max(1, self.tasks_left)
        self.tasks_left -= 1
        self.task_deadline = time.monotonic() + share
        return share

    def allows(self, next_epoch_seconds: float, reserve_seconds: float = 0.0) -> bool:
        """Whether one more epoch of ``next_epoch_seconds`` (plus ``reserve_seconds`` for the test
        pass) still fits in the current task's share."""
        if self.task_deadline is None:
            return True
        return time.monotonic() + next_epoch_seconds + reserve_seconds <= self.task_deadline
