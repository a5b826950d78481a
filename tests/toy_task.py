"""A fourth task defined outside relserve, for tests: a customer's spend over the next 7 days.

Importing this module registers the task (:func:`models.registry.register_task`); the processes a
test starts (the server and its workers, the batch scorer) import it through
``RELSERVE_TASK_MODULES=tests.toy_task``. Everything task-specific is here (the entry, its label
function, head, a metric, a baseline and an answer field); the rest is relserve's own code, reused
by reference: the MAE, the LightGBM baseline and the temporal-feature search.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch.nn.functional as F
from torch import Tensor, nn

from models.graph.temporal_features import active_within
from models.registry import REGRESSION, TASKS, AnswerField, TaskSpec, register_task
from models.schema import CUSTOMER
from models.store.tables import Transactions
from training.tasks.day_windows import day_slice, seed_groups, seen_mask, sort_by_day
from training.tasks.metrics import Scored
from training.tasks.table import TaskTable

NAME = "spend"
POPULATION_DAYS = 28
HERE = __name__ + ":"


def spend_labels(tx: Transactions, num_nodes: Mapping[str, int], cutoff: int, window: int) -> tuple:
    """Customers who bought in the 28 days up to ``t``; label = their spend over ``(t, t + window]``."""
    n = num_nodes[CUSTOMER]
    recent = day_slice(tx, cutoff - POPULATION_DAYS + 1, cutoff)
    entity = np.flatnonzero(seen_mask(tx.customer[recent], n)).astype(np.int64)
    rows = day_slice(tx, cutoff + 1, cutoff + window)
    spend = np.bincount(tx.customer[rows], weights=tx.price[rows], minlength=n)
    return entity, spend[entity].astype(np.float32)


class SpendHead(nn.Module):
    """Spend from a customer's embedding: a linear layer, trained with L1, served clamped at zero.

    Args:
        hidden: embedding width.
        head_hidden: unused (every head is built with it).
    """

    seed_types = (CUSTOMER,)

    def __init__(self, hidden: int, head_hidden: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden, 1)

    def forward(self, emb: Tensor, seed_type: str) -> Tensor:
        """``(S, hidden)`` -> ``(S,)`` spend (unclamped)."""
        return self.linear(emb).squeeze(-1)

    @staticmethod
    def predict(output: Tensor) -> Tensor:
        """``(S,)`` spend, ``>= 0``."""
        return output.clamp(min=0.0)

    @staticmethod
    def loss(output: Tensor, target: Tensor, weight: Tensor) -> Tensor:
        """Weighted L1."""
        per_row = F.l1_loss(output, target, reduction="none")
        return (per_row * weight).sum() / weight.sum().clamp(min=1.0)


def total_ratio(scored: Scored) -> float:
    """Predicted over actual total spend (1: calibrated in aggregate)."""
    return float(np.sum(scored.predictions) / max(float(np.sum(scored.table.label)), 1e-9))


def spend_last_week(tx: Transactions, table: TaskTable) -> np.ndarray:
    """Next week's spend = the customer's spend in the 7 days before the seed time."""
    tx = sort_by_day(tx)
    pred = np.empty(len(table), dtype=np.float64)
    for seed_time, rows in seed_groups(table.seed_time):
        week = day_slice(tx, seed_time - 7, seed_time - 1)
        size = max(int(table.entity[rows].max()), int(tx.customer[week].max(initial=0))) + 1
        spend = np.bincount(tx.customer[week], weights=tx.price[week], minlength=size)
        pred[rows] = spend[table.entity[rows]]
    return pred


def active_last_28_days(snapshot, node_type: str, ids: Tensor, seed_time: Tensor) -> Tensor:
    """Whether the customer is in the task's population at ``seed_time``."""
    return active_within(snapshot, node_type, ids, seed_time, POPULATION_DAYS)


SPEC = TaskSpec(
    name=NAME, task_type=REGRESSION, entity_type=CUSTOMER, id_field="customer_id", value_field="spend_7d",
    window_days=7, head=HERE + "SpendHead", labels=HERE + "spend_labels",
    metrics={"mae": "training.tasks.metrics:mae_metric", "total_ratio": HERE + "total_ratio"},
    primary_metric="mae", higher_is_better=False, load_share=0,
    baselines={"last_week": HERE + "spend_last_week",
               "lightgbm": "training.tasks.gbdt_model:lightgbm_entity"},
    question="a customer's summed spend over the next 7 days",
    recipe={"epochs": 1, "hidden": 16, "fanouts": (4, 2), "max_steps_per_epoch": 3, "min_steps_per_epoch": 3},
    answer_fields=(AnswerField("active_last_28d", bool, "bought in the 28 days before the snapshot's end",
                               HERE + "active_last_28_days"),),
)

if NAME not in TASKS:  # a test may have registered it already in this process
    register_task(SPEC)
