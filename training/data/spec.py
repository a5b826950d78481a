"""The dataset spec: which of the user's files and columns play relserve's roles.

A spec names the transactions table (who bought what, when, for how much) and the customers and
articles tables, each either a file of its own or derived from the transactions table. It is
read from a TOML file (:mod:`training.data.spec_file`; the reference is docs/dataset-spec.md);
:data:`HM_SPEC` is the built-in default, the Kaggle H&M layout, written out in data/specs/hm.toml.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from models.schema import (
    ARTICLE_CATEGORICAL,
    ARTICLE_ID_LEN,
    ARTICLE_NUMERIC,
    ARTICLES_CSV,
    CUSTOMER_CATEGORICAL,
    CUSTOMER_ID_LEN,
    CUSTOMER_NUMERIC,
    CUSTOMERS_CSV,
    MAX_ID_BYTES,
    TRANSACTIONS_CSV,
)
from training.data.conditions import Condition

AUTO, CATEGORICAL, NUMERIC, TIMESTAMP, TEXT = "auto", "categorical", "numeric", "timestamp", "text"
FEATURE_TYPES = (CATEGORICAL, NUMERIC, TIMESTAMP, TEXT)
FROM_TRANSACTIONS = "transactions"


@dataclass(frozen=True)
class FileOptions:
    """How a table's files are written, past what their names say.

    Args:
        encoding: the text encoding of CSV files (a Python codec name).
        sheet: the sheet of a spreadsheet (``None``: its first).
        decimal: the decimal mark of numbers in CSV files: ``.``, or ``,`` (then ``.`` groups
            thousands: ``1.234,5`` is 1234.5).
    """

    encoding: str = "utf-8"
    sheet: str | None = None
    decimal: str = "."


@dataclass(frozen=True)
class Feature:
    """A feature column of a customers or articles table.

    Args:
        column: the column's name.
        type: one of :data:`FEATURE_TYPES`, or :data:`AUTO` to infer it from the values.
    """

    column: str
    type: str = AUTO


@dataclass(frozen=True)
class NodeSpec:
    """The customers or the articles table.

    Args:
        table: ``customers`` or ``articles`` (the spec's table name, for messages).
        file: a file name or glob under the data directory; ``None`` when the table is derived from
            the transactions table (one row per id, each attribute its most frequent value).
        id: the id column (of the file; of the transactions table when derived).
        features: the feature columns in order; ``None``: every column of the file but the id
            (a derived table then has no features).
        max_id_bytes: the longest id accepted, in UTF-8 bytes (at most :data:`MAX_ID_BYTES`).
        ids_from_transactions: the ids are those the transactions name (always so for a derived
            table); with a ``file`` the features come from the file where it has the id (a partial
            attribute table: ids missing from it get empty features, ids only in it are dropped).
        time_format: a ``strptime`` format of the table's ``timestamp`` columns; ``None``: ISO dates
            and times or integer epoch seconds.
        options: how its files are written (encoding, sheet, decimal mark).
    """

    table: str
    file: str | None
    id: str
    features: tuple[Feature, ...] | None = None
    max_id_bytes: int = MAX_ID_BYTES
    ids_from_transactions: bool = False
    time_format: str | None = None
    options: FileOptions = FileOptions()

    @property
    def derived(self) -> bool:
        """Whether the table is derived from the transactions table (no file of its own)."""
        return self.file is None

    @property
    def partial(self) -> bool:
        """Whether the table's ids are the transactions' and its features come from a file."""
        return self.file is not None and self.ids_from_transactions


@dataclass(frozen=True)
class JoinSpec:
    """A table joined onto the transaction lines (:mod:`training.data.joins`).

    Args:
        file: a file name or glob under the data directory.
        on: the lines' column (or a table's joined before) holding the key.
        id: the table's key column, one row per value; by default named as ``on``.
        options: how its files are written (encoding, sheet, decimal mark).
    """

    file: str
    on: str
    id: str
    options: FileOptions = FileOptions()


@dataclass(frozen=True)
class TransactionsSpec:
    """The transactions table: one row per purchase line.

    Args:
        file: a file name or glob under the data directory (``.csv``, ``.csv.gz``, ``.parquet``).
        customer: the customer id column.
        article: the article id column.
        time: the date or timestamp column; bucketed to days.
        time_format: a ``strptime`` format of ``time``; ``None``: inferred (ISO date or date and
            time, or integer epoch seconds).
        price: the unit price column (the row's value, times ``quantity`` when given).
        amount: the line total column (the row's value as it is); at most one of price and amount.
        quantity: the quantity column; only with ``price``.
        channel: the sales channel column (checked to exist; the model does not read it yet).
        filter: conditions every kept row meets (see :mod:`training.data.conditions`).
        join: tables whose columns every line takes by key (an order header), in order.
        options: how its files are written (encoding, sheet, decimal mark).
    """

    file: str
    customer: str
    article: str
    time: str
    time_format: str | None = None
    price: str | None = None
    amount: str | None = None
    quantity: str | None = None
    channel: str | None = None
    filter: tuple[Condition, ...] = ()
    join: tuple[JoinSpec, ...] = ()
    options: FileOptions = FileOptions()

    @property
    def has_amount(self) -> bool:
        """Whether rows carry a money value; without one every row counts 1.0 (count-only data)."""
        return self.price is not None or self.amount is not None


@dataclass(frozen=True)
class DatasetSpec:
    """A whole dataset.

    Args:
        transactions: the transactions table.
        customers: the customers table.
        articles: the articles table.
        origin: where the spec came from (its file's name, or the built-in layout), for messages.
        path: the spec file, ``None`` for the built-in layout.
    """

    transactions: TransactionsSpec
    customers: NodeSpec
    articles: NodeSpec
    origin: str = "built-in H&M layout"
    path: Path | None = None


def _typed(categorical: tuple[str, ...], numeric: tuple[str, ...]) -> tuple[Feature, ...]:
    return tuple(Feature(c, CATEGORICAL) for c in categorical) + tuple(Feature(c, NUMERIC) for c in numeric)


HM_SPEC = DatasetSpec(
    transactions=TransactionsSpec(
        file=TRANSACTIONS_CSV, customer="customer_id", article="article_id", time="t_dat",
        time_format="%Y-%m-%d", price="price",  # sales_channel_id is not required: no model reads it
    ),
    customers=NodeSpec("customers", CUSTOMERS_CSV, "customer_id",
                       _typed(CUSTOMER_CATEGORICAL, CUSTOMER_NUMERIC), CUSTOMER_ID_LEN),
    articles=NodeSpec("articles", ARTICLES_CSV, "article_id",
                      _typed(ARTICLE_CATEGORICAL, ARTICLE_NUMERIC), ARTICLE_ID_LEN),
)
"""The Kaggle H&M layout: ``transactions_train.csv``, ``customers.csv``, ``articles.csv`` (or ``.gz``)."""
