"""Load the three H&M CSV files (Kaggle layout) into typed, indexed :class:`models.store.tables.RelTables`.

Every id is read as text (``article_id`` ``0108775015`` keeps its leading zero), entity rows
are sorted by id so that an id's dense index is its rank, and the transactions refer to
customers and articles by those indices. Bad input raises :class:`DataError` with one
message naming the file, the line or column, and the problem.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from models.store.tables import RelTables
from training.data.common import DataError
from training.data.nodes import ARTICLES, CUSTOMERS, read_node_table
from training.data.transactions import UnknownReferences, read_transactions

__all__ = ["DataError", "UnknownReferenceWarning", "UnknownReferences", "load_tables"]


class UnknownReferenceWarning(UserWarning):
    """Transactions naming unknown customers or articles were dropped (``strict=False``).

    Args:
        message: the one-line description.
        references: the counts, also as attribute ``references``.
    """

    def __init__(self, message: str, references: UnknownReferences) -> None:
        super().__init__(message)
        self.references = references


def load_tables(data_dir: Path, progress: bool = True, strict: bool = True) -> RelTables:
    """Read ``customers.csv``, ``articles.csv`` and ``transactions_train.csv`` from ``data_dir``.

    Args:
        data_dir: directory holding the three files.
        progress: show a tqdm bar per file on stderr.
        strict: a transaction naming an unknown customer or article is an error; if ``False``
            such rows are dropped with an :class:`UnknownReferenceWarning` carrying the counts.

    Returns:
        Customers and articles as :class:`models.store.tables.NodeTable` (ids ``S64`` / ``S10``,
        sorted), transactions as :class:`models.store.tables.Transactions` in file order.

    Raises:
        DataError: a file or column is missing, a file has no rows, an id is empty, too long
            or repeated, a date or number cannot be parsed, or (``strict``) a reference is unknown.
    """
    data_dir = Path(data_dir)
    customers = read_node_table(data_dir, CUSTOMERS, progress)
    articles = read_node_table(data_dir, ARTICLES, progress)
    transactions, unknown = read_transactions(data_dir, customers, articles, strict, progress)
    if unknown:
        warnings.warn(
            UnknownReferenceWarning(f"{unknown.message()}; dropped {unknown.rows_dropped} rows", unknown),
            stacklevel=2,
        )
    return RelTables(customers=customers, articles=articles, transactions=transactions)
