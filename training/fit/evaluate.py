"""Val/test evaluation: the model through the serving inference path, and every baseline, on one table.

Predictions come from :class:`models.runtime.inference.TaskInference` (``last``-strategy sampling, the
same code the server runs), called with each row's own seed time, so an offline metric is a
measurement of exactly what would be served at that time.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from torch import Tensor

from models.progress import progress_bar
from models.runtime.inference import TaskInference
from models.store.tables import Transactions
from training.tasks.baselines import BASELINES
from training.tasks.definitions import TASKS
from training.tasks.gbdt_features import EntityColumns
from training.tasks.gbdt_model import bind_inputs
from training.tasks.metrics import compute_metrics
from training.tasks.table import TaskTable

Metrics = dict[str, float]


def table_batches(inference: TaskInference, table: TaskTable, batch_size: int, progress: bool,
                  desc: str) -> Iterator[tuple[Tensor, Tensor | None]]:
    """Row positions of ``table`` in batches of one seed time each, with the purchase article keys
    of that time (``None`` for other tasks), under a progress bar of rows scored."""
    bar = progress_bar(total=len(table), desc=desc or f"{inference.task} evaluation", unit="row", leave=False,
                       enabled=progress and len(table) > 4 * batch_size, dynamic_ncols=True)
    for time in np.unique(table.seed_time):
        rows = np.flatnonzero(table.seed_time == time)
        keys = inference.compute_article_keys(int(time)) if TASKS[inference.task].ranks else None
        for start in range(0, len(rows), batch_size):
            chunk = torch.from_numpy(rows[start:start + batch_size])
            yield chunk, keys
            bar.update(len(chunk))
    bar.close()


def padded_to_k(ranked: np.ndarray, k: int) -> np.ndarray:
    """``(n, k' <= k)`` ranked article indices padded to ``(n, k)`` with ``-1`` (no prediction):
    a catalogue of fewer than ``k`` articles."""
    return np.pad(ranked, ((0, 0), (0, k - ranked.shape[1])), constant_values=-1)


def predict_table(inference: TaskInference, table: TaskTable, batch_size: int = 512,
                  progress: bool = False, desc: str = "") -> np.ndarray:
    """Model predictions for every row of ``table``, in batches (memory grows with the answers only).

    Args:
        inference: the task's inference path (any compile strategy).
        table: rows to predict; purchase article keys are computed once per distinct seed time.
        batch_size: rows per forward.
        progress: a progress bar on stderr (rows scored), shown when the table spans several batches.
        desc: the progress bar's label.

    Returns:
        ``(n,)`` float64 churn probabilities or sales, or ``(n, k)`` int64 ranked article indices.
    """
    task = TASKS[inference.task]
    entity = torch.from_numpy(table.entity)
    seed_time = torch.from_numpy(table.seed_time)
    link = task.ranks
    out = np.empty((len(table), task.k) if link else len(table), dtype=np.int64 if link else np.float64)
    for chunk, keys in table_batches(inference, table, batch_size, progress, desc):
        result = inference.run(entity[chunk], k=task.k, seed_time=seed_time[chunk], article_keys=keys)
        if link:
            out[chunk.numpy()] = padded_to_k(result.articles.numpy(), task.k)
        else:
            out[chunk.numpy()] = result.values.double().numpy()
    return out


def evaluate_model(inference: TaskInference, table: TaskTable, batch_size: int = 512,
                   progress: bool = False, desc: str = "") -> Metrics:
    """Every metric of the task for the model's predictions on ``table`` (see :func:`predict_table`)."""
    predictions = predict_table(inference, table, batch_size, progress, desc)
    return compute_metrics(TASKS[inference.task], predictions, table)


def baseline_predictions(task: str, tx: Transactions, table: TaskTable,
                         columns: EntityColumns | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """Each baseline's predictions for ``table`` (LightGBM also reads ``columns`` and ``seed``)."""
    return {name: bind_inputs(baseline, columns, seed)(tx, table)
            for name, baseline in BASELINES[task].items()}


def evaluate_baselines(task: str, tx: Transactions, table: TaskTable,
                       columns: EntityColumns | None = None,
                       predictions: dict[str, np.ndarray] | None = None) -> dict[str, Metrics]:
    """Every metric of ``task`` for each of its baselines on ``table``: of ``predictions`` when
    given (:func:`baseline_predictions`), else of the baselines run here."""
    if predictions is None:
        predictions = baseline_predictions(task, tx, table, columns)
    return {name: compute_metrics(TASKS[task], pred, table) for name, pred in predictions.items()}
