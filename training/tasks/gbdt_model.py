"""The gradient-boosted baseline of each task: LightGBM on hand-built seed-time features.

For a table at cutoff ``c`` (seed time ``c + 1``) the model trains on the tables of the cutoffs
``c - 14, c - 21, ...`` (at most :data:`MAX_TRAIN_CUTOFFS`) and early-stops on the table of
``c - 7``: every label it learns from ends at or before ``c``, so on the test week it is trained
on the training cutoffs and stopped on the validation week, and on the validation week it never
sees that week's labels. Fixed seeds, deterministic, at most :data:`MAX_ROUNDS` rounds, one
thread (two threads on two busy cores ran 8x slower).

Memory and time stay bounded at full H&M size: each fitting table keeps at most
:data:`MAX_FIT_ROWS` rows (purchase: :data:`MAX_FIT_CUSTOMERS` customers, about 100 candidate
pairs each), a fixed random subset, and purchase scores its customers :data:`PREDICT_CHUNK` at a
time. Smaller data (the demo and the real dataset in the repository) is used whole.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import partial

import lightgbm as lgb
import numpy as np

from models.registry import BINARY, LINK, REGRESSION
from models.schema import ARTICLE, CUSTOMER
from models.store.tables import Transactions
from training.tasks.day_windows import seed_groups, sort_by_day
from training.tasks.definitions import TASKS
from training.tasks.gbdt_features import EntityColumns, categorical_positions, entity_features
from training.tasks.gbdt_purchase import candidates, pair_categorical, pair_labels, top_k
from training.tasks.table import TaskTable

MAX_TRAIN_CUTOFFS = 8
MAX_PAIR_CUTOFFS = 4  # purchase trains on ~100 candidate pairs per customer, so on fewer weeks
MIN_HISTORY_DAYS = 7
MAX_ROUNDS = 300
EARLY_STOP = 30
MAX_FIT_ROWS = 100_000
MAX_FIT_CUSTOMERS = 10_000
PREDICT_CHUNK = 10_000
PARAMS = {"learning_rate": 0.1, "num_leaves": 31, "max_bin": 63, "min_data_in_leaf": 20,
          "feature_fraction": 0.9, "lambda_l2": 1.0, "num_threads": 1, "deterministic": True,
          "force_row_wise": True,
          "verbose": -1}
OBJECTIVES = {BINARY: {"objective": "binary", "metric": "auc"},  # per task type of models.registry
              REGRESSION: {"objective": "l1", "metric": "l1"},
              LINK: {"objective": "binary", "metric": "map", "eval_at": [12]}}
FALLBACKS = {BINARY: 0.5, REGRESSION: 0.0}  # an entity's prediction when too little history precedes it


def _history(tx: Transactions, seed_time: int) -> Transactions:
    """The rows with ``day < seed_time`` (day-sorted): all the baseline may read."""
    stop = int(np.searchsorted(tx.day, seed_time, side="left"))
    return Transactions(tx.customer[:stop], tx.article[:stop], tx.day[:stop], tx.price[:stop])


def _fit_cutoffs(past: Transactions, cutoff: int,
                 most: int = MAX_TRAIN_CUTOFFS) -> tuple[list[int], int] | None:
    """``(training cutoffs, early-stopping cutoff)`` before ``cutoff``, or ``None`` if too short."""
    first = int(past.day.min(initial=cutoff)) + MIN_HISTORY_DAYS - 1
    train = list(range(cutoff - 14, first - 1, -7))[:most]
    return (train[::-1], cutoff - 7) if train else None


def _train(task: str, x: np.ndarray, y: np.ndarray, x_val: np.ndarray, y_val: np.ndarray,
           categorical: list[int], groups: tuple[np.ndarray, np.ndarray] | None = None,
           seed: int = 0) -> lgb.Booster:
    params = PARAMS | OBJECTIVES[TASKS[task].task_type] | {"seed": seed}
    train = lgb.Dataset(x, y, categorical_feature=categorical or "auto", free_raw_data=False,
                        group=None if groups is None else groups[0])
    valid = lgb.Dataset(x_val, y_val, reference=train, group=None if groups is None else groups[1])
    return lgb.train(params, train, MAX_ROUNDS, valid_sets=[valid],
                     callbacks=[lgb.early_stopping(EARLY_STOP, first_metric_only=True, verbose=False)])


def _num_nodes(past: Transactions, table: TaskTable, task: str) -> dict[str, int]:
    entity_type = TASKS[task].entity_type
    sizes = {CUSTOMER: int(past.customer.max(initial=0)) + 1, ARTICLE: int(past.article.max(initial=0)) + 1}
    sizes[entity_type] = max(sizes[entity_type], int(table.entity.max(initial=0)) + 1)
    return sizes


def _node_baseline(task: str, tx: Transactions, table: TaskTable, columns: EntityColumns | None,
                   fallback: float, seed: int) -> np.ndarray:
    """One regressor/classifier on entity features per seed time of ``table``."""
    tx, entity_type = sort_by_day(tx), TASKS[task].entity_type
    pred = np.full(len(table), fallback, dtype=np.float64)
    for seed_time, rows in seed_groups(table.seed_time):
        past = _history(tx, seed_time)
        entity = table.entity[rows]
        plan = _fit_cutoffs(past, seed_time - 1)
        if plan is None:
            continue
        sizes = _num_nodes(past, table.subset(rows), task)

        def features(t: TaskTable, p: Transactions = past) -> np.ndarray:
            return entity_features(p, entity_type, t.entity, int(t.seed_time[0]), columns)

        fit_tables = [TASKS[task].make_table(past, sizes, c).sample(MAX_FIT_ROWS, seed) for c in plan[0]]
        fit_tables = [t for t in fit_tables if len(t)]
        val_table = TASKS[task].make_table(past, sizes, plan[1]).sample(MAX_FIT_ROWS, seed)
        if not fit_tables or not len(val_table):
            continue
        x = np.concatenate([features(t) for t in fit_tables])
        y = np.concatenate([t.label for t in fit_tables]).astype(np.float64)
        model = _train(task, x, y, features(val_table), val_table.label.astype(np.float64),
                       categorical_positions(entity_type, columns), seed=seed)
        pred[rows] = model.predict(entity_features(past, entity_type, entity, seed_time, columns),
                                   num_iteration=model.best_iteration)
    return pred


def lightgbm_entity(tx: Transactions, table: TaskTable, columns: EntityColumns | None = None, *,
                    task: str, seed: int = 0) -> np.ndarray:
    """A probability (binary tasks) or value (regression, L1 loss) from LightGBM on the entity's
    seed-time features, trained on ``task``'s labels; ``(n,)`` float64. ``seed`` fixes LightGBM's
    feature subsets and the training rows drawn."""
    return _node_baseline(task, tx, table, columns, FALLBACKS[TASKS[task].task_type], seed)


def _pair_set(past: Transactions, t: TaskTable, num_articles: int, columns: EntityColumns | None,
              seed: int):
    t = t.sample(MAX_FIT_CUSTOMERS, seed)
    cands = candidates(past, t.entity, int(t.seed_time[0]), num_articles, columns)
    labels = pair_labels(cands, t.entity, t.target_ptr, t.target_items, num_articles)
    return cands, labels


def lightgbm_ranking(tx: Transactions, table: TaskTable, columns: EntityColumns | None = None,
                     k: int = 12, *, task: str, seed: int = 0) -> np.ndarray:
    """Top-``k`` articles: own-history and popular candidates re-ranked by LightGBM, trained on
    ``task``'s labels (customers and the articles they buy); ``(n, k)`` int64. ``seed`` fixes
    LightGBM's feature subsets and the training customers drawn."""
    tx = sort_by_day(tx)
    pred = np.full((len(table), k), -1, dtype=np.int64)
    for seed_time, rows in seed_groups(table.seed_time):
        past = _history(tx, seed_time)
        customers, inverse = np.unique(table.entity[rows], return_inverse=True)
        plan = _fit_cutoffs(past, seed_time - 1, MAX_PAIR_CUTOFFS)
        if plan is None:
            continue
        sizes = _num_nodes(past, table.subset(rows), task)
        num_articles = sizes[ARTICLE]
        fit_sets = [_pair_set(past, TASKS[task].make_table(past, sizes, c), num_articles, columns, seed)
                    for c in plan[0]]
        val_cands, val_y = _pair_set(past, TASKS[task].make_table(past, sizes, plan[1]), num_articles,
                                     columns, seed)
        x = np.concatenate([c.features for c, _ in fit_sets])
        y = np.concatenate([labels for _, labels in fit_sets])
        groups = (np.concatenate([np.unique(c.customer, return_counts=True)[1] for c, _ in fit_sets]),
                  np.unique(val_cands.customer, return_counts=True)[1])
        model = _train(task, x, y, val_cands.features, val_y, pair_categorical(columns), groups, seed)
        del x, y, fit_sets, val_cands
        ranked = np.empty((len(customers), k), dtype=np.int64)
        for start in range(0, len(customers), PREDICT_CHUNK):
            chunk = customers[start:start + PREDICT_CHUNK]
            cands = candidates(past, chunk, seed_time, num_articles, columns)
            scores = model.predict(cands.features, num_iteration=model.best_iteration)
            ranked[start:start + len(chunk)] = top_k(cands, scores, chunk, k)
        pred[rows] = ranked[inverse]
    return pred


def bind_inputs(baseline: Callable[..., np.ndarray], columns: EntityColumns | None,
                seed: int = 0) -> Callable[..., np.ndarray]:
    """``baseline`` with the entity columns and the seed bound where it takes them (the LightGBM
    ones; the rule ones take neither)."""
    takes = inspect.signature(baseline).parameters
    bound = {"columns": columns} if "columns" in takes and columns is not None else {}
    if "seed" in takes:
        bound["seed"] = seed
    return partial(baseline, **bound) if bound else baseline
