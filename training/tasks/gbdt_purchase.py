"""Purchase candidates and their pair features for the gradient-boosted re-ranker.

At a seed time ``s`` each customer's candidates are its own articles of the last 364 days (the
:data:`OWN` most recent, then most often bought) plus the :data:`POPULAR` most-bought articles
of the last 7 days before ``s``. Each (customer, article) pair is described by how often and how
long ago this customer bought this article, the article's sales and buyers over the windows of
:mod:`training.tasks.gbdt_features`, its popularity rank and the customer's own aggregates.
Everything reads only days ``< s``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.arrays import unique_sorted
from models.schema import ARTICLE, CUSTOMER
from models.store.tables import Transactions
from training.tasks.day_windows import day_slice, popular_articles
from training.tasks.gbdt_features import (
    NO_HISTORY_DAYS,
    EntityColumns,
    categorical_positions,
    entity_features,
    feature_names,
)

OWN = 50
POPULAR = 50
PAIR_NAMES = ["pair_rows_364d", "pair_spend_364d", "pair_days_since", "pair_rows_28d", "popular_rank"]


@dataclass
class Candidates:
    """Candidate pairs of one seed time, grouped by customer (customers ascending).

    Args:
        customer: ``(P,)`` int64 customer of each pair.
        article: ``(P,)`` int64 candidate article.
        features: ``(P, F)`` float64 pair features (see :func:`pair_feature_names`).
    """

    customer: np.ndarray
    article: np.ndarray
    features: np.ndarray


def pair_feature_names(columns: EntityColumns | None) -> list[str]:
    """Names of :attr:`Candidates.features`' columns."""
    return PAIR_NAMES + [f"c_{n}" for n in feature_names(CUSTOMER, columns)] + [
        f"a_{n}" for n in feature_names(ARTICLE, columns)]


def pair_categorical(columns: EntityColumns | None) -> list[int]:
    """Positions of the customer's and the article's categorical columns among the pair features."""
    customer_start = len(PAIR_NAMES)
    article_start = customer_start + len(feature_names(CUSTOMER, columns))
    return categorical_positions(CUSTOMER, columns, customer_start) + categorical_positions(
        ARTICLE, columns, article_start)


def candidates(tx: Transactions, customers: np.ndarray, seed_time: int, num_articles: int,
               columns: EntityColumns | None) -> Candidates:
    """Candidate pairs and features for ``customers`` (unique, ascending) at ``seed_time``.

    Args:
        tx: transactions sorted by day.
        customers: ``(n,)`` int64 unique ascending customer indices.
        seed_time: only days ``< seed_time`` are read.
        num_articles: number of articles (pair keys are ``customer * num_articles + article``).
        columns: the entity table columns, or ``None`` to leave them out.
    """
    year = day_slice(tx, seed_time - 364, seed_time - 1)
    c, a = tx.customer[year], tx.article[year]
    day, price = tx.day[year].astype(np.int64), tx.price[year].astype(np.float64)
    keep = np.isin(c, customers)
    key = c[keep] * num_articles + a[keep]
    pair_key, inverse = np.unique(key, return_inverse=True)
    rows = np.bincount(inverse).astype(np.float64)
    spend = np.bincount(inverse, weights=price[keep])
    last = np.full(len(pair_key), -NO_HISTORY_DAYS, dtype=np.int64)
    np.maximum.at(last, inverse, day[keep])
    recent = np.bincount(inverse, weights=(day[keep] >= seed_time - 28).astype(np.float64),
                         minlength=len(pair_key))

    # own candidates: per customer, most recent first, then most bought, at most OWN
    owner = pair_key // num_articles
    order = np.lexsort((-rows, -last, owner))
    starts = np.flatnonzero(np.r_[True, owner[order][1:] != owner[order][:-1]])
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    own = order[rank < OWN]

    popular = popular_articles(tx, seed_time, POPULAR)
    pop_key = (customers[:, None] * num_articles + popular[None, :]).ravel()
    all_key = unique_sorted(np.concatenate([pair_key[own], pop_key]))
    cand_c, cand_a = np.divmod(all_key, num_articles)

    # pair history of each candidate (zero when the customer never bought it)
    at = np.searchsorted(pair_key, all_key)
    seen = at < len(pair_key)
    seen[seen] = pair_key[at[seen]] == all_key[seen]

    def lookup(values: np.ndarray, default: float) -> np.ndarray:
        out = np.full(len(all_key), default, dtype=np.float64)
        out[seen] = values[at[seen]]
        return out

    pop_rank = np.full(num_articles, POPULAR, dtype=np.float64)
    pop_rank[popular] = np.arange(len(popular))
    pair = np.stack([lookup(rows, 0.0), lookup(spend, 0.0), seed_time - lookup(last, -NO_HISTORY_DAYS),
                     lookup(recent, 0.0), pop_rank[cand_a]], axis=1)
    pair[:, 2] = np.minimum(pair[:, 2], NO_HISTORY_DAYS)

    cust_feat = entity_features(tx, CUSTOMER, customers, seed_time, columns)
    art_ids = unique_sorted(cand_a)
    art_feat = entity_features(tx, ARTICLE, art_ids, seed_time, columns)
    features = np.concatenate([
        pair,
        cust_feat[np.searchsorted(customers, cand_c)],
        art_feat[np.searchsorted(art_ids, cand_a)],
    ], axis=1)
    return Candidates(cand_c.astype(np.int64), cand_a.astype(np.int64), features)


def pair_labels(cands: Candidates, entity: np.ndarray, target_ptr: np.ndarray, target_items: np.ndarray,
                num_articles: int) -> np.ndarray:
    """``(P,)`` float64 1 where the candidate is among the row's target articles.

    Args:
        entity: ``(n,)`` the table's customers; row ``i`` owns
            ``target_items[target_ptr[i]:target_ptr[i + 1]]``.
    """
    truth = np.repeat(entity, np.diff(target_ptr)) * num_articles + target_items
    return np.isin(cands.customer * num_articles + cands.article, truth).astype(np.float64)


def top_k(cands: Candidates, scores: np.ndarray, customers: np.ndarray, k: int) -> np.ndarray:
    """``(len(customers), k)`` int64 best-scored candidates per customer, ``-1`` padded."""
    order = np.lexsort((cands.article, -scores, cands.customer))
    owner = cands.customer[order]
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]]) if len(owner) else np.zeros(0, np.int64)
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    keep = rank < k
    out = np.full((len(customers), k), -1, dtype=np.int64)
    out[np.searchsorted(customers, owner[keep]), rank[keep]] = cands.article[order][keep]
    return out
