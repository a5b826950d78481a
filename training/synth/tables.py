"""Random :class:`RelTables` built straight from numpy, for tests and benchmarks that need no CSVs.

Not a realistic data generator (see the CSV generator for that): ids have the real widths,
purchases follow skewed (Zipf-like) customer and article popularity so degrees look like
retail data, and a full-size table set (31.8M rows) is made in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.schema import (
    ARTICLE_CATEGORICAL,
    ARTICLE_ID_LEN,
    ARTICLE_NUMERIC,
    CUSTOMER_CATEGORICAL,
    CUSTOMER_ID_LEN,
    CUSTOMER_NUMERIC,
    day_number,
)
from models.store.tables import NodeTable, RelTables, Transactions

HEX_DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


@dataclass(frozen=True)
class SyntheticSize:
    """Table sizes and time span; the defaults are the real H&M sizes."""

    num_customers: int = 1_371_980
    num_articles: int = 105_542
    num_transactions: int = 31_788_324
    first_day: int = day_number("2018-09-20")
    num_days: int = 734
    cardinality: int = 8


def synthetic_tables(size: SyntheticSize, seed: int = 0) -> RelTables:
    """Random tables of ``size``; the same ``seed`` gives the same tables.

    Popularity exponents are set so that at full size the busiest customer has ~2k and the
    busiest article ~50k purchases, as in the real data.
    """
    rng = np.random.default_rng(seed)
    count = size.num_transactions
    return tables_from_purchases(
        customer=_skewed_choice(size.num_customers, count, 0.35, rng),
        article=_skewed_choice(size.num_articles, count, 0.5, rng),
        day=np.sort(rng.integers(size.first_day, size.first_day + size.num_days, count)).astype(np.int32),
        num_customers=size.num_customers,
        num_articles=size.num_articles,
        cardinality=size.cardinality,
        seed=seed,
    )


def tables_from_purchases(
    customer: np.ndarray,
    article: np.ndarray,
    day: np.ndarray,
    num_customers: int,
    num_articles: int,
    cardinality: int = 8,
    seed: int = 0,
) -> RelTables:
    """Tables with exactly the given purchases, and random ids, features and prices.

    Args:
        customer: ``(T,)`` dense customer index of each purchase.
        article: ``(T,)`` dense article index of each purchase.
        day: ``(T,)`` day of each purchase.
        num_customers: ``N_customer`` (customers without purchases are allowed).
        num_articles: ``N_article``.
        cardinality: number of values of every categorical column.
        seed: random seed of the ids, features and prices.
    """
    rng = np.random.default_rng(seed)
    customers = _node_table(
        _customer_ids(num_customers, rng), CUSTOMER_CATEGORICAL, CUSTOMER_NUMERIC, cardinality, rng
    )
    articles = _node_table(
        _article_ids(num_articles, rng), ARTICLE_CATEGORICAL, ARTICLE_NUMERIC, cardinality, rng
    )
    transactions = Transactions(
        customer=np.asarray(customer, dtype=np.int64),
        article=np.asarray(article, dtype=np.int64),
        day=np.asarray(day, dtype=np.int32),
        price=rng.gamma(2.0, 0.014, len(customer)).astype(np.float32),
    )
    return RelTables(customers=customers, articles=articles, transactions=transactions)


def _skewed_choice(num: int, count: int, exponent: float, rng: np.random.Generator) -> np.ndarray:
    """``count`` draws from ``[0, num)`` with popularity ~ 1 / rank**exponent over a random ranking.

    Inverse-CDF sampling of the continuous power law on ``[1, num + 1)`` (``exponent < 1``):
    closed form, so 30M draws take about a second.
    """
    power = 1.0 - exponent
    rank = (1.0 + rng.random(count) * ((num + 1) ** power - 1.0)) ** (1.0 / power)
    return rng.permutation(num)[np.minimum(rank.astype(np.int64) - 1, num - 1)]


def _customer_ids(num: int, rng: np.random.Generator) -> np.ndarray:
    raw = rng.integers(0, 256, (num, CUSTOMER_ID_LEN // 2), dtype=np.uint8)
    hex_chars = np.stack([HEX_DIGITS[raw >> 4], HEX_DIGITS[raw & 15]], axis=2).reshape(num, -1)
    ids = np.unique(hex_chars.view(f"S{CUSTOMER_ID_LEN}").reshape(-1))
    if len(ids) != num:  # a 256-bit collision: not going to happen, but never return a short table
        raise RuntimeError("duplicate random customer ids")
    return ids


def _article_ids(num: int, rng: np.random.Generator) -> np.ndarray:
    numbers = 100_000_000 + np.sort(rng.choice(900_000_000, size=num, replace=False))
    return np.char.zfill(numbers.astype(f"S{ARTICLE_ID_LEN}"), ARTICLE_ID_LEN)


def _node_table(
    ids: np.ndarray,
    categorical: tuple[str, ...],
    numeric: tuple[str, ...],
    cardinality: int,
    rng: np.random.Generator,
) -> NodeTable:
    num = len(ids)
    numeric_names = tuple(n for name in numeric for n in (name, f"{name}_missing"))
    missing = rng.random((num, len(numeric))) < 0.1
    values = np.where(missing, 0.0, rng.standard_normal((num, len(numeric))))
    features = np.stack([values, missing], axis=2).reshape(num, -1).astype(np.float32)
    return NodeTable(
        ids=ids,
        categorical=rng.integers(0, cardinality + 1, (num, len(categorical))).astype(np.int64),
        numeric=features,
        categorical_names=categorical,
        numeric_names=numeric_names,
        cardinalities=(cardinality,) * len(categorical),
    )
