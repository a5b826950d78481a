"""The transactions table as :class:`models.store.tables.Transactions`: ids mapped to dense node indices.

Ids are mapped with ``pyarrow.compute.index_in`` against the sorted id arrays of the node tables;
that call hashes the whole id set (1.37M customers: ~0.4 s) every time, so lines are mapped in
large groups (:data:`training.data.lines.GROUP_ROWS`). A line naming an id that is not in
its node table is an error, or (``strict=False``) dropped and counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from models.store.tables import NodeTable, Transactions
from training.data.common import DataError, show
from training.data.files import resolve_files, table_label
from training.data.lines import LineGroup, transaction_lines
from training.data.spec import TransactionsSpec


@dataclass
class UnknownIds:
    """Lines whose ``column`` names an id missing from its node table.

    Args:
        column: the id column.
        count: how many lines.
        first_line: file line (CSV) or row (Parquet) of the first such line (``0`` when none).
        first_value: its id.
        first_where: its position as written in messages (``line 5``, ``part-1.parquet row 3``).
    """

    column: str
    count: int = 0
    first_line: int = 0
    first_value: str = ""
    first_where: str = ""

    def add(self, indices: pa.ChunkedArray, group: LineGroup, ids: pa.ChunkedArray, name_file: bool) -> None:
        """Count the nulls of ``index_in`` output ``indices``; remember the first one."""
        if indices.null_count and not self.count:
            k = int(pc.index(pc.is_null(indices), True).as_py())
            position = group.file.where(int(group.rows[k]))
            self.first_line = int(position.split()[1])
            self.first_where = f"{group.file.name} {position}" if name_file else position
            self.first_value = ids[k].as_py() or ""
        self.count += indices.null_count

    def describe(self) -> str:
        rows = "row references" if self.count == 1 else "rows reference"
        first = f"first at {self.first_where}: {show(self.first_value)}"
        return f"{self.count} {rows} an unknown {self.column} ({first})"


@dataclass
class UnknownReferences:
    """Transaction lines naming a customer or article absent from the node tables.

    Args:
        customer: lines with an unknown customer id.
        article: lines with an unknown article id.
        rows_dropped: lines left out of the result (either id unknown); ``0`` in strict mode.
        label: the transactions file (or glob), starting the message.
    """

    customer: UnknownIds = field(default_factory=lambda: UnknownIds("customer_id"))
    article: UnknownIds = field(default_factory=lambda: UnknownIds("article_id"))
    rows_dropped: int = 0
    label: str = ""

    def __bool__(self) -> bool:
        return bool(self.customer.count or self.article.count)

    def message(self) -> str:
        """One line, e.g. ``transactions_train.csv: 3 rows reference an unknown customer_id (...)``."""
        parts = [u.describe() for u in (self.customer, self.article) if u.count]
        return f"{self.label}: " + "; ".join(parts)


def read_purchases(data_dir: Path, spec: TransactionsSpec, customers: NodeTable, articles: NodeTable,
                   strict: bool = True, progress: bool = True,
                   note: Callable[[str], object] | None = None) -> tuple[Transactions, UnknownReferences]:
    """Every kept purchase line with its customer and article as dense indices into the node tables.

    Args:
        data_dir: the data directory the spec's file names are under.
        spec: the transactions table.
        customers: the loaded customers; customer ids are looked up in ``customers.ids``.
        articles: the loaded articles.
        strict: raise on lines naming an unknown id; if ``False`` drop those lines and report them
            in the returned :class:`UnknownReferences`.
        progress: show a tqdm bar over the bytes of the files on stderr.
        note: receives the count of lines each joined table dropped (:mod:`training.data.joins`).

    Returns:
        The ``(T,)`` columns in file order, and what was unknown.

    Raises:
        DataError: see :func:`training.data.lines.transaction_lines`, and (``strict``) an unknown id.
    """
    id_sets = (id_strings(customers.ids), id_strings(articles.ids))
    files = resolve_files(data_dir, spec.file, spec.options)
    unknown = UnknownReferences(UnknownIds(spec.customer), UnknownIds(spec.article),
                                label=table_label(spec.file, files))
    parts: list[tuple[np.ndarray, ...]] = []
    for group in transaction_lines(data_dir, spec, progress=progress, note=note):
        parts.append(_map_group(group, id_sets, unknown, name_file=len(files) > 1))
        unknown.rows_dropped += len(group.rows) - len(parts[-1][0])
    if unknown and strict:
        raise DataError(unknown.message())
    customer, article = (np.concatenate([p[k] for p in parts], dtype=np.int64) for k in (0, 1))
    day = np.concatenate([p[2] for p in parts]).astype(np.int32, copy=False)
    price = np.concatenate([p[3] for p in parts]).astype(np.float32, copy=False)
    return Transactions(customer, article, day, price), unknown


def _map_group(group: LineGroup, id_sets: tuple[pa.Array, pa.Array], unknown: UnknownReferences,
               name_file: bool) -> tuple[np.ndarray, ...]:
    """``(customer, article, day, value)`` of the group's lines whose ids are known; counts the rest."""
    customer = pc.index_in(group.customer, value_set=id_sets[0])
    article = pc.index_in(group.article, value_set=id_sets[1])
    unknown.customer.add(customer, group, group.customer, name_file)
    unknown.article.add(article, group, group.article, name_file)
    columns = (
        pc.fill_null(customer, -1).to_numpy(),
        pc.fill_null(article, -1).to_numpy(),
        group.day,
        group.value,
    )
    if customer.null_count or article.null_count:
        known = (columns[0] >= 0) & (columns[1] >= 0)
        columns = tuple(c[known] for c in columns)
    return columns


def id_strings(ids: np.ndarray) -> pa.Array:
    """A fixed-width bytes id array (``S<w>``) as an arrow string array, for ``index_in``."""
    width = ids.dtype.itemsize
    ids = np.ascontiguousarray(ids)
    if len(ids) and ids.view(np.uint8).reshape(-1, width)[:, -1].all():  # no id is shorter than w
        full = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(ids), [None, pa.py_buffer(ids)])
        return full.cast(pa.binary()).cast(pa.string())
    return pa.array(ids.astype(object), pa.binary()).cast(pa.string())
