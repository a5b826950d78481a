"""Hand-built seed-time features of customers and articles for the gradient-boosted baseline.

What a data scientist would compute in SQL at the seed time ``s``, strictly from transactions on
days ``< s``: days since the last purchase, row counts and spend over the last 7, 14, 28, 91 and
364 days, distinct partners (articles a customer bought, customers who bought an article) and
distinct active days over the last 364 days, then the entity's own table columns. Every
aggregate is a ``bincount`` over a day slice, so one seed time costs a few passes over its
history, with no Python loop per entity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.arrays import unique_sorted
from models.schema import CUSTOMER
from models.store.snapshot import GraphSnapshot
from models.store.tables import Transactions
from training.tasks.day_windows import day_slice

WINDOWS = (7, 14, 28, 91, 364)
NO_HISTORY_DAYS = 10_000  # "days since last" of an entity with no purchase before the seed time


@dataclass
class EntityColumns:
    """The entity tables' own columns, per node type (what the snapshot stores).

    Args:
        categorical: per node type, ``(N_t, C_t)`` int64 codes (``0`` = missing).
        numeric: per node type, ``(N_t, F_t)`` float32 features.
    """

    categorical: dict[str, np.ndarray]
    numeric: dict[str, np.ndarray]

    @classmethod
    def from_snapshot(cls, snapshot: GraphSnapshot) -> EntityColumns:
        """The columns a :class:`models.store.snapshot.GraphSnapshot` holds."""
        return cls({t: c.numpy() for t, c in snapshot.categorical.items()},
                   {t: f.numpy() for t, f in snapshot.numeric.items()})

    def width(self, node_type: str) -> tuple[int, int]:
        """``(C_t, F_t)``: how many categorical and numeric columns ``node_type`` has."""
        return self.categorical[node_type].shape[1], self.numeric[node_type].shape[1]

    def rows(self, node_type: str, entity: np.ndarray) -> np.ndarray:
        """``(n, C_t + F_t)`` float64: codes then numeric features of ``entity``."""
        cat = self.categorical[node_type][entity].astype(np.float64)
        return np.concatenate([cat, self.numeric[node_type][entity].astype(np.float64)], axis=1)


def history_names(node_type: str) -> list[str]:
    """Names of the columns :func:`history_features` returns, in order."""
    partner = "articles" if node_type == CUSTOMER else "buyers"
    names = ["days_since_last"]
    for w in WINDOWS:
        names += [f"rows_{w}d", f"spend_{w}d"]
    return [*names, f"distinct_{partner}_364d", "active_days_364d", "first_seen_days"]


def history_features(tx: Transactions, node_type: str, entity: np.ndarray, seed_time: int) -> np.ndarray:
    """Seed-time aggregates of ``entity`` from the rows with ``day < seed_time``.

    Args:
        tx: transactions sorted by day (see :func:`training.tasks.day_windows.sort_by_day`).
        node_type: ``customer`` or ``article``: whose purchases are aggregated.
        entity: ``(n,)`` int64 dense indices.
        seed_time: the seed time ``s``; days ``>= s`` are never read.

    Returns:
        ``(n, len(history_names(node_type)))`` float64.
    """
    owner_of = tx.customer if node_type == CUSTOMER else tx.article
    partner_of = tx.article if node_type == CUSTOMER else tx.customer
    past = slice(0, int(np.searchsorted(tx.day, seed_time, side="left")))
    size = max(int(entity.max(initial=0)), int(owner_of[past].max(initial=0))) + 1
    owner, day = owner_of[past], tx.day[past].astype(np.int64)

    last = np.full(size, -NO_HISTORY_DAYS, dtype=np.int64)
    np.maximum.at(last, owner, day)
    first = np.full(size, seed_time, dtype=np.int64)
    np.minimum.at(first, owner, day)
    columns = [np.minimum(seed_time - last, NO_HISTORY_DAYS)]
    for w in WINDOWS:
        span = day_slice(tx, seed_time - w, seed_time - 1)
        columns.append(np.bincount(owner_of[span], minlength=size).astype(np.float64))
        columns.append(np.bincount(owner_of[span], weights=tx.price[span], minlength=size))
    year = day_slice(tx, seed_time - WINDOWS[-1], seed_time - 1)
    year_owner = owner_of[year]
    stride = int(partner_of[year].max(initial=0)) + 1
    pairs = unique_sorted(year_owner * stride + partner_of[year])
    columns.append(np.bincount(pairs // stride, minlength=size))
    days = unique_sorted(year_owner * WINDOWS[-1] + (seed_time - 1 - tx.day[year].astype(np.int64)))
    columns.append(np.bincount(days // WINDOWS[-1], minlength=size))
    columns.append(seed_time - first)
    return np.stack([np.asarray(c, dtype=np.float64)[entity] for c in columns], axis=1)


def entity_features(tx: Transactions, node_type: str, entity: np.ndarray, seed_time: int,
                    columns: EntityColumns | None) -> np.ndarray:
    """:func:`history_features` followed by the entity's table columns (when ``columns`` is given)."""
    hist = history_features(tx, node_type, entity, seed_time)
    if columns is None:
        return hist
    return np.concatenate([hist, columns.rows(node_type, entity)], axis=1)


def feature_names(node_type: str, columns: EntityColumns | None) -> list[str]:
    """Names of the columns of :func:`entity_features`."""
    names = history_names(node_type)
    if columns is not None:
        n_cat, n_num = columns.width(node_type)
        names += [f"{node_type}_cat{i}" for i in range(n_cat)] + [f"{node_type}_num{i}" for i in range(n_num)]
    return names


def categorical_positions(node_type: str, columns: EntityColumns | None, offset: int = 0) -> list[int]:
    """Column positions (after ``offset`` leading columns) LightGBM should treat as categories."""
    if columns is None:
        return []
    start = offset + len(history_names(node_type))
    return list(range(start, start + columns.width(node_type)[0]))

