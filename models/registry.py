"""The task registry: every fact about a task that more than one part of relserve needs.

Training (labels, metrics, baselines, recipes), the bundle, the server (routes, request and answer
fields), batch scoring, the load test and the benchmarks all read :data:`TASKS`; nothing else names
a task. A task is one :class:`TaskSpec`. The code that differs between tasks (label function, head
class, baselines, metrics, extra answer fields) is named in it by reference, ``"package.module:attribute"``
as in Python entry points, and imported on first use (:meth:`TaskSpec.resolve`), so this module
stays torch-free (command-line tools check a ``--task`` before they import torch) and a leaf.

A task defined outside relserve is added with :func:`register_task`. The processes relserve starts
(the server and its spawned LitServe workers, ``python -m serve.score``, ``python -m training.fit``)
learn of it from the environment variable ``RELSERVE_TASK_MODULES``: comma-separated module names,
imported when the registry is first read, each registering its tasks on import, e.g.
``RELSERVE_TASK_MODULES=mypackage.tasks python -m serve --artifacts artifacts``. Register before
the server modules are imported: they build one route per task at import.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Iterator, KeysView, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from models.schema import ARTICLE, CUSTOMER

BINARY = "binary_classification"
REGRESSION = "regression"
LINK = "link_prediction"
MODULES_VARIABLE = "RELSERVE_TASK_MODULES"

T = TypeVar("T")


class TaskReferenceError(LookupError):
    """A registry entry names code (``"package.module:attribute"``) that cannot be imported."""


def resolve(reference: str, owner: str = "registry") -> Any:
    """The object ``reference`` (``"package.module:attribute"``) names, imported once and cached.

    Args:
        reference: module path, a colon, and an attribute (dotted for nested ones).
        owner: who names it, for the error message (e.g. ``"task churn"``).

    Raises:
        TaskReferenceError: naming ``owner`` and ``reference`` when it does not resolve.
    """
    _check_reference(reference, owner)
    try:
        return _import(reference)
    except (ImportError, AttributeError) as exc:
        raise TaskReferenceError(f"{owner}: cannot resolve {reference!r}: {exc}") from exc


@functools.cache
def _import(reference: str) -> Any:
    module, _, attribute = reference.partition(":")
    return functools.reduce(getattr, attribute.split("."), importlib.import_module(module))


def _check_reference(reference: str, owner: str) -> None:
    module, colon, attribute = reference.partition(":")
    if not (colon and module and attribute and ":" not in attribute):
        raise TaskReferenceError(f"{owner}: {reference!r} is not a reference 'package.module:attribute'")


@dataclass(frozen=True)
class AnswerField:
    """A field of a task's answer beside its prediction, computed per entity at its seed time.

    Args:
        name: the field in the HTTP answer and in the batch-scoring files.
        dtype: its Python type: ``bool``, ``int`` or ``float``.
        description: what it says (API docs).
        compute: reference to ``(snapshot, entity_type, entity (B,), seed_time (B,)) -> (B,) Tensor``.
    """

    name: str
    dtype: type
    description: str
    compute: str


DEFAULT_K = 12
"""A ranking task's ``k`` unless its registry entry sets one (:attr:`TaskSpec.k`)."""


@dataclass(frozen=True)
class TaskSpec:
    """One predictive task over the H&M transactions.

    Args:
        name: registry key; also the route :attr:`path` and the metrics' ``task`` label.
        task_type: :data:`BINARY`, :data:`REGRESSION` or :data:`LINK` (a ranked list of articles).
        entity_type: node type of the seeds, i.e. what a request names.
        id_field: request and answer field carrying the entity id.
        value_field: answer field with the prediction (for :data:`LINK`, the list of ranked items).
        window_days: days after the cutoff the label covers, ``(t, t + window_days]``.
        head: reference to the head class (see :mod:`models.nn.heads`).
        metrics: metric name -> reference to a ``Scored -> float`` function (see
            :mod:`training.tasks.metrics`), in the order reports list them.
        primary_metric: the metric used for model selection, one of ``metrics``.
        higher_is_better: direction of ``primary_metric``.
        labels: reference to the label function ``(day-sorted transactions, num_nodes, cutoff,
            window_days) -> (entity, label)`` (see :mod:`training.tasks.definitions`).
        baselines: report name -> reference to a baseline ``(transactions, table) -> predictions``;
            a ``task`` or ``k`` parameter gets this entry's (see :mod:`training.tasks.baselines`).
        load_share: percent of the load test's requests that go to this task.
        question: what the prediction answers, in one line (API docs, README).
        recipe: ``training.fit``'s :class:`TaskRecipe` fields that differ from the defaults.
        k: length of the ranked list scored by link-prediction metrics, and the ``k`` a request that
            sends none is answered with (:data:`DEFAULT_K` unless the entry says otherwise).
        answer_fields: fields every answer carries beside the prediction.
    """

    name: str
    task_type: str
    entity_type: str
    id_field: str
    value_field: str
    window_days: int
    head: str
    metrics: Mapping[str, str]
    primary_metric: str
    higher_is_better: bool
    labels: str
    baselines: Mapping[str, str]
    load_share: int
    question: str
    recipe: Mapping[str, Any] = field(default_factory=dict)
    k: int = DEFAULT_K
    answer_fields: tuple[AnswerField, ...] = ()

    def __post_init__(self) -> None:
        if self.primary_metric not in self.metrics:
            raise ValueError(f"task {self.name}: primary metric {self.primary_metric} "
                             f"not in {tuple(self.metrics)}")
        for name in ("recipe", "baselines", "metrics"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        for reference in (self.head, self.labels, *self.metrics.values(), *self.baselines.values(),
                          *(f.compute for f in self.answer_fields)):
            _check_reference(reference, f"task {self.name}")

    @property
    def path(self) -> str:
        """The HTTP route of the task's predictions."""
        return f"/predict/{self.name}"

    @property
    def ranks(self) -> bool:
        """Whether the answer is a ranked list of ``k`` articles rather than one number."""
        return self.task_type == LINK

    def resolve(self, reference: str) -> Any:
        """What ``reference`` names (see :func:`resolve`); errors name this task."""
        return resolve(reference, f"task {self.name}")

    def head_class(self) -> type:
        """The head class."""
        return self.resolve(self.head)

    def label_function(self) -> Callable[..., tuple]:
        """The label function."""
        return self.resolve(self.labels)

    def metric_functions(self) -> dict[str, Callable[..., float]]:
        """Every metric by name, in report order."""
        return {name: self.resolve(reference) for name, reference in self.metrics.items()}

    def baseline_functions(self) -> dict[str, Callable[..., Any]]:
        """Every baseline by report name."""
        return {name: self.resolve(reference) for name, reference in self.baselines.items()}


_ENTRIES: dict[str, TaskSpec] = {}
_modules_loaded = False


def _load_task_modules() -> None:
    """Import the modules of ``RELSERVE_TASK_MODULES`` once, on the registry's first read."""
    global _modules_loaded
    if _modules_loaded:
        return
    _modules_loaded = True  # first: a module that reads the registry while registering does not recurse
    for module in filter(None, (name.strip() for name in os.environ.get(MODULES_VARIABLE, "").split(","))):
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise TaskReferenceError(f"{MODULES_VARIABLE}: cannot import {module!r}: {exc}") from exc


class _Derived(Mapping[str, T], Generic[T]):
    """Each registered task's name -> ``build(spec)``, built once per entry; live (see :func:`derived`)."""

    def __init__(self, build: Callable[[TaskSpec], T]) -> None:
        self._build = build
        self._made: dict[str, tuple[TaskSpec, T]] = {}

    def __getitem__(self, name: str) -> T:
        _load_task_modules()
        spec = _ENTRIES[name]
        made = self._made.get(name)
        if made is None or made[0] is not spec:
            made = self._made[name] = (spec, self._build(spec))
        return made[1]

    def __iter__(self) -> Iterator[str]:
        _load_task_modules()
        return iter(tuple(_ENTRIES))

    def __len__(self) -> int:
        _load_task_modules()
        return len(_ENTRIES)


def derived(build: Callable[[TaskSpec], T]) -> Mapping[str, T]:
    """A read-only mapping from each task's name to ``build(spec)``, built on first access to the
    entry and kept while it stays registered (so it follows :func:`register_task`)."""
    return _Derived(build)


TASKS: Mapping[str, TaskSpec] = derived(lambda spec: spec)
"""Every task by name, in the order tables and reports list them (registration order); live."""

TASK_NAMES: KeysView[str] = TASKS.keys()
"""The names of :data:`TASKS` (a live view)."""


def register_task(spec: TaskSpec) -> TaskSpec:
    """Add ``spec`` to :data:`TASKS` (after the tasks already there); returns it.

    Raises:
        ValueError: a task of that name is registered already.
    """
    if spec.name in _ENTRIES:
        raise ValueError(f"task {spec.name!r} is registered already")
    _ENTRIES[spec.name] = spec
    return spec


def unregister_task(name: str) -> TaskSpec:
    """Remove task ``name`` (e.g. a test's own task, afterwards); returns its entry."""
    return _ENTRIES.pop(task_spec(name).name)


def task_spec(name: str) -> TaskSpec:
    """The spec of task ``name``; ``ValueError`` naming the known tasks otherwise."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; use one of {', '.join(TASK_NAMES)}")
    return TASKS[name]


_LABELS, _HEADS, _METRICS = "training.tasks.definitions:", "models.nn.heads:", "training.tasks.metrics:"
_BASELINES, _LIGHTGBM = "training.tasks.baselines:", "training.tasks.gbdt_model:"
_CALIBRATION = "training.tasks.calibration:"
_HISTORY = "models.runtime.answer_history:history_count"


def _history(what: str) -> AnswerField:
    """``history``: how many past events of the entity the model saw (0: a cold start)."""
    return AnswerField("history", int, f"{what} before the prediction time, which the model saw (0: none, "
                       "a cold start answered from the entity's attributes alone)", _HISTORY)


for _spec in (
    TaskSpec(
        name="churn", task_type=BINARY, entity_type=CUSTOMER, id_field="customer_id",
        value_field="churn_probability", window_days=7, head=_HEADS + "ChurnHead",
        metrics={"auroc": _METRICS + "auroc_metric",
                 "average_precision": _METRICS + "average_precision_metric",
                 # is the answer a probability? (docs/results.md, "Calibration")
                 "ece": _CALIBRATION + "ece_metric", "brier": _CALIBRATION + "brier_metric"},
        primary_metric="auroc", higher_is_better=True, labels=_LABELS + "churn_labels", load_share=25,
        baselines={"recency_frequency": _BASELINES + "churn_recency_frequency",
                   "lightgbm": _LIGHTGBM + "lightgbm_entity"},
        # its validation AUROC still rose with the learning rate up to 0.01 on the real data and held
        # on the demo (docs/decisions.md, "Churn learns at 0.01")
        recipe={"lr": 0.01},
        question="probability that a customer buys nothing in the next 7 days",
        answer_fields=(AnswerField(
            "active_last_7d", bool, "bought in the last 7 days of the snapshot: the population the churn "
            "model is trained on (false: the probability is an extrapolation outside it)",
            "models.graph.temporal_features:active_last_7_days"), _history("the customer's purchases")),
    ),
    TaskSpec(
        name="sales", task_type=REGRESSION, entity_type=ARTICLE, id_field="article_id",
        value_field="sales_7d", window_days=7, head=_HEADS + "SalesHead",
        metrics={"mae": _METRICS + "mae_metric", "rmse": _METRICS + "rmse_metric"}, primary_metric="mae",
        higher_is_better=False, labels=_LABELS + "sales_labels", load_share=15,
        baselines={"last_week": _BASELINES + "sales_last_week", "lightgbm": _LIGHTGBM + "lightgbm_entity"},
        # twice the default steps: the log1p head was still improving at 120 (docs/decisions.md,
        # "Sales in log space"); an epoch is ~3 s on the dev data. A moving average of the weights
        # is validated and kept: the epoch-to-epoch noise of a small validation week decided which
        # epoch was kept ("Sales validates a moving average of its weights")
        recipe={"max_steps_per_epoch": 240, "average_half_life": 0.5},
        question="an article's summed sales price over the next 7 days",
        answer_fields=(_history("the article's sales"),),
    ),
    TaskSpec(
        name="purchase", task_type=LINK, entity_type=CUSTOMER, id_field="customer_id",
        value_field="articles", window_days=7, head=_HEADS + "PurchaseHead",
        metrics={"map@12": _METRICS + "map_at_k", "precision@12": _METRICS + "precision_at_k",
                 "recall@12": _METRICS + "recall_at_k"}, primary_metric="map@12",
        higher_is_better=True, labels=_LABELS + "purchase_labels", load_share=60,
        baselines={"popular": _BASELINES + "purchase_popular", "repeat": _BASELINES + "purchase_repeat",
                   "lightgbm": _LIGHTGBM + "lightgbm_ranking"},
        question="the k articles a customer most likely buys next",
        answer_fields=(_history("the customer's purchases"),),
    ),
):
    register_task(_spec)
