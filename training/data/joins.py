"""Tables joined onto the transaction lines: an order header that holds the customer and the time of
each order's lines, and tables joined onto it in turn.

Many shops export order lines (order, article, price) apart from their orders (order, customer,
time, status). ``join = [{ file = "orders.csv", on = "order_id" }]`` in ``[transactions]``
(docs/dataset-spec.md) adds the orders' columns to every line: a joined table holds one row per
value of its key column (``id``, by default the ``on`` column's name), and a line takes the row
whose key its ``on`` column holds, in the lines file or in a table joined before. A line whose
``on`` value the table lacks (or leaves empty) is dropped and counted. Every column the spec names
(customer, article, time, values, filters, features of derived tables) is read from the first of
the lines file and the joined tables, in the spec's order, that has it. Joined tables are read
whole; the lines stream past them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from training.data.common import DataError, show
from training.data.convert import ColumnRead
from training.data.files import SourceFile, resolve_files, table_label
from training.data.ids import ID, fixed_width, id_text
from training.data.origins import RowOrigins
from training.data.sources import read_table
from training.data.spec import JoinSpec


@dataclass
class JoinedTable:
    """One joined table, read: its key per row (text, distinct) and the columns the spec reads from it.

    Args:
        spec: its ``file``, ``on`` and ``id``.
        label: its file's name (or the spec's glob), for messages.
        keys: ``(R,)`` text keys.
        columns: ``R`` rows of the columns read from it (the key column left out).
        dropped: lines dropped so far for a missing or empty ``on`` value.
    """

    spec: JoinSpec
    label: str
    keys: pa.Array
    columns: pa.Table
    dropped: int = 0


@dataclass
class Joins:
    """The joined tables of a transactions spec, in order, and what is read from the lines files.

    Args:
        lines: the columns read from the lines files and how.
        tables: the joined tables.
    """

    lines: dict[str, ColumnRead]
    tables: list[JoinedTable] = field(default_factory=list)

    def apply(self, group: pa.Table, rows: np.ndarray) -> tuple[pa.Table, np.ndarray]:
        """``group`` (lines, one per row of ``rows``) with every joined table's columns added, its
        lines without a match dropped (and counted)."""
        for table in self.tables:
            if group.num_rows == 0:
                break
            position = pc.index_in(id_text(group[table.spec.on]), value_set=table.keys)
            found = pc.is_valid(position).to_numpy(zero_copy_only=False)
            table.dropped += int((~found).sum())
            if not found.all():
                group, rows, position = group.filter(pa.array(found)), rows[found], position.filter(found)
            taken = table.columns.take(position)
            for name in taken.column_names:
                group = group.append_column(name, taken[name])
        return group, rows

    def notes(self, lines_label: str) -> list[str]:
        """One line per joined table that dropped lines."""
        return [f"transactions: {t.dropped:,} lines of {lines_label} dropped: their {t.spec.on} is not in "
                f"{t.label}" for t in self.tables if t.dropped]


def source_file(data_dir: Path, lines: SourceFile, joins: tuple[JoinSpec, ...], column: str) -> SourceFile:
    """The first file, of the lines file and the joined tables, that has ``column``.

    Raises:
        DataError: none has it (with joins; without, the lines file is returned as it is).
    """
    if column in lines.columns() or not joins:
        return lines
    files = [resolve_files(data_dir, join.file, join.options) for join in joins]
    for group in files:
        if column in group[0].columns():
            return group[0]
    raise _missing(column, [lines.name, *(table_label(j.file, f) for j, f in zip(joins, files, strict=True))])


def _missing(column: str, labels: list[str]) -> DataError:
    joined = f" (nor has {' or '.join(labels[1:])})" if len(labels) > 1 else ""
    return DataError(f"{labels[0]}: missing column {column}{joined}")


def open_joins(data_dir: Path, joins: tuple[JoinSpec, ...], lines: SourceFile, lines_label: str,
               reads: Mapping[str, ColumnRead], checked: tuple[str, ...] = ()) -> Joins:
    """Where each column of ``reads`` (and of ``checked``, which must only exist) is read, and the
    joined tables read with theirs.

    Raises:
        DataError: a column in none of the files, a join key missing where it must be, a joined
            table without rows, or one whose key repeats or is empty.
    """
    if not joins:
        return Joins(dict(reads))
    files = [resolve_files(data_dir, j.file, j.options) for j in joins]
    headers = [set(lines.columns()), *(set(f[0].columns()) for f in files)]
    labels = [lines_label, *(table_label(j.file, f) for j, f in zip(joins, files, strict=True))]
    per_source: list[dict[str, ColumnRead]] = [{} for _ in headers]

    def place(column: str, read: ColumnRead | None, before: int) -> None:
        """Read ``column`` from the first of the sources ``0 .. before - 1`` that has it."""
        source = next((k for k in range(before) if column in headers[k]), None)
        if source is None:
            raise _missing(column, labels[:before])
        if read is not None:
            per_source[source].setdefault(column, read)

    for k, join in enumerate(joins):
        place(join.on, ID, k + 1)  # the lines' key: in the lines or a table joined before
        if join.id not in headers[k + 1]:
            raise DataError(f"{labels[k + 1]}: no column {show(join.id)} (the key of join[{k}])")
    for column, read in reads.items():
        place(column, read, len(headers))
    for column in checked:
        place(column, None, len(headers))
    tables = [_read_joined(join, group, labels[k + 1], per_source[k + 1])
              for k, (join, group) in enumerate(zip(joins, files, strict=True))]
    return Joins(per_source[0], tables)


def _read_joined(join: JoinSpec, files: list[SourceFile], label: str,
                 reads: dict[str, ColumnRead]) -> JoinedTable:
    parts = [read_table(file, {join.id: ID} | reads) for file in files]
    table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    if table.num_rows == 0:
        raise DataError(f"{label}: no data rows (only a header)")
    keys = id_text(table[join.id].combine_chunks())
    empty = pc.fill_null(pc.equal(keys, ""), True)
    if pc.any(empty).as_py():
        origins = RowOrigins.of(join.file, files, [p.num_rows for p in parts])
        raise DataError(f"{origins.where(int(pc.index(empty, True).as_py()))}: empty {join.id} (the key the "
                        "lines are joined on)")
    stored = np.sort(fixed_width(keys))
    repeats = np.flatnonzero(stored[1:] == stored[:-1])
    if repeats.size:
        value = stored[repeats[0]].decode("utf-8", "replace")
        raise DataError(f"{label}: {join.id} {show(value)} occurs more than once: a joined table holds one "
                        f"row per {join.id} (join it on a column whose values are distinct there)")
    return JoinedTable(join, label, keys, table.select(list(reads)))
