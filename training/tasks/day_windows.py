"""Day-range windows over the transactions table.

Tasks and baselines read many windows of days (a label week, a history week, everything
before a seed time). With the rows sorted by day each window is a contiguous slice found by
binary search, so a window costs its own size instead of a pass over all 31.8M rows.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from models.store.tables import Transactions


def is_sorted_by_day(tx: Transactions) -> bool:
    """Whether ``tx.day`` is non-decreasing (the real H&M file already is)."""
    return bool(np.all(tx.day[1:] >= tx.day[:-1]))


def sort_by_day(tx: Transactions) -> Transactions:
    """The same transactions ordered by day; returns ``tx`` itself when already sorted.

    The sort is stable, so rows of one day keep their file order (later row = later purchase).
    """
    if is_sorted_by_day(tx):
        return tx
    order = np.argsort(tx.day, kind="stable")
    return Transactions(
        customer=tx.customer[order], article=tx.article[order], day=tx.day[order], price=tx.price[order]
    )


def day_slice(tx: Transactions, first_day: int, last_day: int) -> slice:
    """Rows with ``first_day <= day <= last_day`` (both inclusive) of day-sorted transactions.

    Args:
        tx: transactions sorted by day (see :func:`sort_by_day`).
        first_day: first day of the window.
        last_day: last day of the window; an empty slice when ``last_day < first_day``.
    """
    start = int(np.searchsorted(tx.day, first_day, side="left"))
    stop = int(np.searchsorted(tx.day, last_day, side="right"))
    return slice(start, max(start, stop))


def seen_mask(index: np.ndarray, size: int) -> np.ndarray:
    """``(size,)`` bool, True at every value that occurs in ``index``."""
    mask = np.zeros(size, dtype=bool)
    mask[index] = True
    return mask


def seed_groups(seed_time: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """``(seed_time, rows)`` for each distinct value of a table's ``(N,)`` ``seed_time``."""
    times, inverse = np.unique(seed_time, return_inverse=True)
    for i, t in enumerate(times):
        yield int(t), np.flatnonzero(inverse == i)


def popular_articles(tx: Transactions, seed_time: int, k: int) -> np.ndarray:
    """The up to ``k`` most-bought articles (rows counted) of the 7 days before ``seed_time``.

    ``tx`` is day-sorted. Ties go to the lower article index; articles with no sale are left out.
    """
    week = day_slice(tx, seed_time - 7, seed_time - 1)
    counts = np.bincount(tx.article[week])
    top = np.argsort(-counts, kind="stable")[:k]
    return top[counts[top] > 0].astype(np.int64)
