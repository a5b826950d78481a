"""Stream transactions_train.csv into :class:`models.store.tables.Transactions` with dense node indices.

The file (31.8M rows, 3.5 GB in the real data) is read as a stream of record batches, so
only a group of rows is held as text at once. Ids are mapped to dense indices with
``pyarrow.compute.index_in`` against the sorted id arrays; that call hashes the whole id
set (1.37M customers: ~0.4 s) every time, so batches are mapped in large groups.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from models.progress import progress_bar
from models.schema import TRANSACTIONS_CSV
from models.store.tables import NodeTable, Transactions
from training.data.common import (
    DataError,
    check_columns,
    convert_options,
    data_file,
    is_gzip,
    line_number,
    read_header,
    read_options,
    require_present,
    show,
)
from training.data.locate import located_errors

# Rows mapped per index_in call: amortises the id hashing; ~0.35 GB of id text per group.
GROUP_ROWS = 4_000_000
_TYPES = {"t_dat": pa.date32(), "customer_id": pa.string(), "article_id": pa.string(), "price": pa.float32()}


@dataclass
class UnknownIds:
    """Transactions whose ``column`` names an id missing from its node table.

    Args:
        column: ``customer_id`` or ``article_id``.
        count: how many rows.
        first_line: file line of the first such row (``0`` when ``count == 0``).
        first_value: its id.
    """

    column: str
    count: int = 0
    first_line: int = 0
    first_value: str = ""

    def add(self, indices: pa.ChunkedArray, ids: pa.ChunkedArray, row_offset: int) -> None:
        """Count the nulls of ``index_in`` output ``indices``; remember the first one."""
        if indices.null_count and not self.count:
            row = int(indices.is_null().combine_chunks().to_numpy(zero_copy_only=False).argmax())
            self.first_line, self.first_value = line_number(row_offset + row), ids[row].as_py() or ""
        self.count += indices.null_count

    def describe(self) -> str:
        rows = "row references" if self.count == 1 else "rows reference"
        first = f"first at line {self.first_line}: {show(self.first_value)}"
        return f"{self.count} {rows} an unknown {self.column} ({first})"


@dataclass
class UnknownReferences:
    """Transactions rows that name a customer or article absent from the node tables.

    Args:
        customer: rows with an unknown ``customer_id``.
        article: rows with an unknown ``article_id``.
        rows_dropped: rows left out of the result (either id unknown); ``0`` in strict mode.
    """

    customer: UnknownIds = field(default_factory=lambda: UnknownIds("customer_id"))
    article: UnknownIds = field(default_factory=lambda: UnknownIds("article_id"))
    rows_dropped: int = 0

    def __bool__(self) -> bool:
        return bool(self.customer.count or self.article.count)

    def message(self) -> str:
        """One line, e.g. ``transactions_train.csv: 3 rows reference an unknown customer_id (...)``."""
        parts = [u.describe() for u in (self.customer, self.article) if u.count]
        return f"{TRANSACTIONS_CSV}: " + "; ".join(parts)


def read_transactions(
    data_dir: Path, customers: NodeTable, articles: NodeTable, strict: bool = True, progress: bool = True
) -> tuple[Transactions, UnknownReferences]:
    """Load every purchase with its customer and article as dense indices into the node tables.

    Args:
        data_dir: directory holding ``transactions_train.csv``.
        customers: the loaded customers; ``customer_id`` is looked up in ``customers.ids``.
        articles: the loaded articles.
        strict: raise on rows naming an unknown id; if ``False`` drop those rows and
            report them in the returned :class:`UnknownReferences`.
        progress: show a tqdm bar over the file's bytes on stderr when it is a terminal.

    Returns:
        The ``(T,)`` columns in file order, and what was unknown.

    Raises:
        DataError: missing file or column, no rows, an empty or unparseable date or price,
            or (``strict``) an unknown customer or article.
    """
    path = data_file(data_dir, TRANSACTIONS_CSV)
    header = read_header(path)
    check_columns(path, header, tuple(_TYPES))
    id_sets = (id_strings(customers.ids), id_strings(articles.ids))
    unknown = UnknownReferences()
    parts: list[tuple[np.ndarray, ...]] = []
    rows_read = 0
    source = pa.OSFile(str(path))
    # The bar follows the bytes read from disk, compressed or not.
    stream = pa.CompressedInputStream(source, "gzip") if is_gzip(path) else source
    bar = progress_bar(total=path.stat().st_size, desc=path.name, unit="B", unit_scale=True, enabled=progress)
    with source, bar, located_errors(path, header):
        reader = pa_csv.open_csv(stream, read_options=read_options(), convert_options=convert_options(_TYPES))
        for group, row_offset in _row_groups(reader, lambda: bar.update(source.tell() - bar.n)):
            parts.append(_map_group(path, group, row_offset, id_sets, unknown))
            rows_read = row_offset + group.num_rows
        bar.update(bar.total - bar.n)
    if rows_read == 0:
        raise DataError(f"{path.name}: no data rows (only a header)")
    if unknown and strict:
        raise DataError(unknown.message())
    unknown.rows_dropped = rows_read - sum(len(p[0]) for p in parts)
    customer, article = (np.concatenate([p[k] for p in parts], dtype=np.int64) for k in (0, 1))
    day, price = (np.concatenate([p[k] for p in parts]) for k in (2, 3))
    return Transactions(customer, article, day, price), unknown


def _row_groups(
    batches: Iterable[pa.RecordBatch], after_batch: Callable[[], object]
) -> Iterator[tuple[pa.Table, int]]:
    """Consecutive batches joined into tables of at least ``GROUP_ROWS`` rows, with their first row."""
    pending: list[pa.RecordBatch] = []
    pending_rows = row_offset = 0
    for batch in batches:
        pending.append(batch)
        pending_rows += batch.num_rows
        after_batch()
        if pending_rows >= GROUP_ROWS:
            yield pa.Table.from_batches(pending), row_offset
            row_offset += pending_rows
            pending, pending_rows = [], 0
    if pending:
        yield pa.Table.from_batches(pending), row_offset


def _map_group(
    path: Path,
    group: pa.Table,
    row_offset: int,
    id_sets: tuple[pa.Array, pa.Array],
    unknown: UnknownReferences,
) -> tuple[np.ndarray, ...]:
    """``(customer, article, day, price)`` of one group's rows whose ids are known; counts the rest."""
    require_present(path, group["t_dat"], "t_dat", row_offset)
    require_present(path, group["price"], "price", row_offset)
    customer = pc.index_in(group["customer_id"], value_set=id_sets[0])
    article = pc.index_in(group["article_id"], value_set=id_sets[1])
    unknown.customer.add(customer, group["customer_id"], row_offset)
    unknown.article.add(article, group["article_id"], row_offset)
    columns = (
        pc.fill_null(customer, -1).to_numpy(),
        pc.fill_null(article, -1).to_numpy(),
        group["t_dat"].cast(pa.int32()).to_numpy(),
        group["price"].to_numpy(),
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
