"""Validation-time calibration of the purchase ranking: the shift between repeat and dot-product scores.

The purchase head scores a customer's own past articles with its repeat score and every other
article with a dot product (:class:`models.nn.heads.PurchaseHead`). Training sees only in-batch
negatives, a few hundred articles, so nothing ties the two scales together over a whole catalogue:
among 105k articles the best dot products of strangers can outscore every article the customer
keeps buying, which cost more than a third of the full-size MAP@12 (docs/decisions.md, "The
repeat shift, chosen on validation"). After each epoch the validation rows are scored once, kept in two parts
(:class:`models.nn.ranking.RankParts`), and merged for every shift of :data:`SHIFTS`; the head keeps the
best shift, so it travels in the bundle's weights and the server ranks with it. On data where the
scales already agree the metric is flat in the shift and the smallest one within
:data:`TIE_TOLERANCE` of the best is kept, which is 0.
"""

from __future__ import annotations

import numpy as np
import torch

from models.nn.ranking import RankParts, merge_ranked
from models.runtime.inference import TaskInference
from training.fit.evaluate import Metrics, padded_to_k, table_batches
from training.tasks.definitions import TASKS
from training.tasks.metrics import compute_metrics
from training.tasks.table import TaskTable

SHIFTS = (0.0, -0.5, 0.5, -1.0, 1.0, -2.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 1e4)
"""Candidate shifts, smallest magnitude first (1e4 ranks every history article above every other)."""
TIE_TOLERANCE = 0.005
"""A shift within this fraction of the best primary metric counts as tied with it."""


def choose_shift(results: dict[float, Metrics], primary: str) -> float:
    """The smallest-magnitude shift whose ``primary`` metric is within :data:`TIE_TOLERANCE` of the best."""
    best = max(metrics[primary] for metrics in results.values())
    tied = [shift for shift, metrics in results.items() if metrics[primary] >= best * (1 - TIE_TOLERANCE)]
    return min(tied, key=abs)


def calibrated_metrics(inference: TaskInference, table: TaskTable, batch_size: int = 512,
                       progress: bool = False, desc: str = "") -> tuple[Metrics, dict[float, Metrics]]:
    """Score ``table`` once, set the purchase head's ``repeat_shift`` to the best of :data:`SHIFTS`.

    Args:
        inference: the purchase task's inference path (its model's head is updated in place).
        table: validation rows.
        batch_size: rows per forward.
        progress: a progress bar on stderr.
        desc: the progress bar's label.

    Returns:
        The metrics at the chosen shift (what :func:`training.fit.evaluate.evaluate_model` now
        returns for ``table``, ties aside) and the metrics at every shift tried.
    """
    task = TASKS[inference.task]
    entity, seed_time = torch.from_numpy(table.entity), torch.from_numpy(table.seed_time)
    order, parts = [], []
    for chunk, keys in table_batches(inference, table, batch_size, progress, desc):
        parts.append(inference.rank_parts(entity[chunk], seed_time[chunk], keys, task.k))
        order.append(chunk.numpy())
    rows = RankParts.cat(parts)
    inverse = np.argsort(np.concatenate(order))  # batches come grouped by seed time
    results = {}
    for shift in SHIFTS:
        ranked = padded_to_k(merge_ranked(rows, shift, task.k).numpy()[inverse], task.k)
        results[shift] = compute_metrics(task, ranked, table)
    shift = choose_shift(results, task.primary_metric)
    inference.model.head.repeat_shift.fill_(shift)
    return results[shift], results
