"""The task registry: every fact about a task that more than one part of relserve needs.

Training (labels, metrics, baselines, recipes), the bundle, the server (routes, request and answer
fields), the load test and the benchmarks all read :data:`TASKS`; nothing else names a task. A
fourth task is one :class:`TaskSpec` here, its head class in :mod:`models.nn.heads` and its label
function in :mod:`training.tasks.definitions` (plus baselines, if it has any). Torch-free, so
command-line tools can check a ``--task`` before they import torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from models.schema import ARTICLE, CUSTOMER

BINARY = "binary_classification"
REGRESSION = "regression"
LINK = "link_prediction"


@dataclass(frozen=True)
class TaskSpec:
    """One predictive task over the H&M transactions.

    Args:
        name: registry key; also the route ``POST /predict/<name>`` and the metrics' ``task`` label.
        task_type: :data:`BINARY`, :data:`REGRESSION` or :data:`LINK` (a ranked list of articles).
        entity_type: node type of the seeds, i.e. what a request names.
        id_field: request and answer field carrying the entity id.
        value_field: answer field with the prediction (for :data:`LINK`, the list of ranked items).
        window_days: days after the cutoff the label covers, ``(t, t + window_days]``.
        head: class name of the task head in :mod:`models.nn.heads`.
        metrics: metric names as returned by :func:`training.tasks.metrics.compute_metrics`.
        primary_metric: the metric used for model selection, one of ``metrics``.
        higher_is_better: direction of ``primary_metric``.
        labels: name of the label function in :mod:`training.tasks.definitions`.
        baselines: the baselines it is tested against: report name -> function name in
            :mod:`training.tasks.baselines`.
        recipe: ``training.fit``'s :class:`TaskRecipe` fields that differ from the defaults.
        load_share: percent of the load test's requests that go to this task.
        question: what the prediction answers, in one line (API docs, README).
        k: length of the ranked list scored by link-prediction metrics (and the default ``k``).
    """

    name: str
    task_type: str
    entity_type: str
    id_field: str
    value_field: str
    window_days: int
    head: str
    metrics: tuple[str, ...]
    primary_metric: str
    higher_is_better: bool
    labels: str
    baselines: Mapping[str, str]
    load_share: int
    question: str
    recipe: Mapping[str, Any] = field(default_factory=dict)
    k: int = 12

    def __post_init__(self) -> None:
        if self.primary_metric not in self.metrics:
            raise ValueError(f"task {self.name}: primary metric {self.primary_metric} not in {self.metrics}")
        object.__setattr__(self, "recipe", MappingProxyType(dict(self.recipe)))
        object.__setattr__(self, "baselines", MappingProxyType(dict(self.baselines)))

    @property
    def path(self) -> str:
        """The HTTP route of the task's predictions."""
        return f"/predict/{self.name}"

    @property
    def ranks(self) -> bool:
        """Whether the answer is a ranked list of ``k`` articles rather than one number."""
        return self.task_type == LINK


_SPECS = (
    TaskSpec(
        name="churn", task_type=BINARY, entity_type=CUSTOMER, id_field="customer_id",
        value_field="churn_probability", window_days=7, head="ChurnHead",
        metrics=("auroc", "average_precision"), primary_metric="auroc", higher_is_better=True,
        labels="churn_labels", load_share=25,
        baselines={"recency_frequency": "churn_recency_frequency", "lightgbm": "lightgbm_churn"},
        question="probability that a customer buys nothing in the next 7 days",
    ),
    TaskSpec(
        name="sales", task_type=REGRESSION, entity_type=ARTICLE, id_field="article_id",
        value_field="sales_7d", window_days=7, head="SalesHead",
        metrics=("mae", "rmse"), primary_metric="mae", higher_is_better=False,
        labels="sales_labels", load_share=15,
        baselines={"last_week": "sales_last_week", "lightgbm": "lightgbm_sales"},
        question="an article's summed sales price over the next 7 days",
    ),
    TaskSpec(
        name="purchase", task_type=LINK, entity_type=CUSTOMER, id_field="customer_id",
        value_field="articles", window_days=7, head="PurchaseHead",
        metrics=("map@12", "precision@12", "recall@12"), primary_metric="map@12", higher_is_better=True,
        labels="purchase_labels", load_share=60,
        baselines={"popular": "purchase_popular", "repeat": "purchase_repeat",
                   "lightgbm": "lightgbm_purchase"},
        question="the k articles a customer most likely buys next",
    ),
)

TASKS: Mapping[str, TaskSpec] = MappingProxyType({spec.name: spec for spec in _SPECS})
"""Every task by name, in the order tables and reports list them."""

TASK_NAMES: tuple[str, ...] = tuple(TASKS)


def task_spec(name: str) -> TaskSpec:
    """The spec of task ``name``; ``ValueError`` naming the known tasks otherwise."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; use one of {', '.join(TASK_NAMES)}")
    return TASKS[name]
