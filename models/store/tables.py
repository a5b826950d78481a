"""Typed in-memory tables: what the CSV loader produces and the graph snapshot consumes.

Ids are dense int indices into ``NodeTable.ids``, which holds the original string ids
sorted bytewise, so an id's index is its rank and lookups are a binary search
(:meth:`NodeTable.lookup`) over an array that can stay memory-mapped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class NodeTable:
    """One entity table (customers or articles) as feature arrays.

    Args:
        ids: ``(N,)`` fixed-width bytes (``S64`` customers, ``S10`` articles), sorted ascending, unique.
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

    def lookup(self, ids: np.ndarray | list[str] | list[bytes]) -> np.ndarray:
        """Dense indices for string ids; ``-1`` where an id is unknown.

        Args:
            ids: ``(K,)`` ids as ``str`` or ``bytes``.

        Returns:
            ``(K,)`` int64 indices into this table.
        """
        return lookup_sorted(self.ids, ids)


def lookup_sorted(sorted_ids: np.ndarray, ids: np.ndarray | list[str] | list[bytes]) -> np.ndarray:
    """Binary-search ``ids`` in a sorted fixed-width bytes array; ``-1`` for unknown ids.

    An id longer than the array's width is unknown (numpy would silently truncate it).
    """
    width = sorted_ids.dtype.itemsize
    raw = [i.encode("utf-8", "replace") if isinstance(i, str) else bytes(i) for i in ids]
    fits = np.fromiter((len(r) <= width for r in raw), dtype=bool, count=len(raw))
    query = np.asarray([r if f else b"" for r, f in zip(raw, fits, strict=True)], dtype=sorted_ids.dtype)
    if len(sorted_ids) == 0 or len(query) == 0:
        return np.full(len(query), -1, dtype=np.int64)
    pos = np.searchsorted(sorted_ids, query)
    pos_c = np.minimum(pos, len(sorted_ids) - 1)
    found = fits & (pos < len(sorted_ids)) & (sorted_ids[pos_c] == query)
    return np.where(found, pos_c, -1).astype(np.int64)


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
    """The three H&M tables, typed and indexed."""

    customers: NodeTable
    articles: NodeTable
    transactions: Transactions
