"""Typed in-memory tables: what the CSV loader produces and the graph snapshot consumes.

Ids are dense int indices into ``NodeTable.ids``, which holds the original ids (any text of at
most :data:`models.schema.MAX_ID_BYTES` UTF-8 bytes; see :mod:`models.store.ids`) sorted bytewise,
so an id's index is its rank and lookups are a binary search (:meth:`NodeTable.lookup`) over an
array that can stay memory-mapped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from models.store.ids import Id, lookup_sorted


@dataclass
class NodeTable:
    """One entity table (customers or articles) as feature arrays.

    Args:
        ids: ``(N,)`` ``S<w>`` UTF-8 ids (``w`` the longest), sorted ascending, unique, none empty.
        categorical: ``(N, C)`` int64 codes, ``0`` = missing, ``1..cardinality[c]`` = a value.
        numeric: ``(N, F)`` float32, standardised, no NaN (missing -> 0 with a flag column).
        categorical_names: the ``C`` source column names.
        numeric_names: the ``F`` feature names (``age``, ``age_missing``, ...).
        cardinalities: per categorical column, the number of distinct values (codes go up to it).
    """

    ids: np.ndarray
    categorical: np.ndarray
    numeric: np.ndarray
    categorical_names: tuple[str, ...]
    numeric_names: tuple[str, ...]
    cardinalities: tuple[int, ...]

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def lookup(self, ids: np.ndarray | Sequence[Id]) -> np.ndarray:
        """Dense indices for ids; ``-1`` where an id is unknown.

        Args:
            ids: ``(K,)`` ids as ``str``, ``int`` (its decimal digits) or ``bytes`` (see
                :func:`models.store.ids.lookup_sorted`).

        Returns:
            ``(K,)`` int64 indices into this table.
        """
        return lookup_sorted(self.ids, ids)


@dataclass
class Transactions:
    """The transactions table as parallel columns, one row per purchase.

    Args:
        customer: ``(T,)`` int64 dense customer index.
        article: ``(T,)`` int64 dense article index.
        day: ``(T,)`` int32 days since 1970-01-01 (see :func:`models.schema.day_number`).
        price: ``(T,)`` float32.
    """

    customer: np.ndarray
    article: np.ndarray
    day: np.ndarray
    price: np.ndarray

    def __len__(self) -> int:
        return int(self.customer.shape[0])


@dataclass
class RelTables:
    """The customers, articles and transactions tables, typed and indexed."""

    customers: NodeTable
    articles: NodeTable
    transactions: Transactions
