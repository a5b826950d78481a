"""Stream the transactions table of a spec as groups of typed purchase lines, filtered.

Each group holds the rows of a few million lines that meet every ``filter`` condition: the
customer and article ids as text, the day number, the row's value (the price, the price times the
quantity, the amount, or 1.0 for count-only data) and where each row is in its file. Only one
group is held at a time; the files are read in blocks (CSV) or batches (Parquet).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from models.progress import progress_bar
from training.data.common import DataError, show
from training.data.conditions import row_mask
from training.data.convert import FLOAT32, FLOAT64, TEXT, ColumnRead, ConversionError
from training.data.files import SourceFile, resolve_files, table_label
from training.data.ids import ID, id_text
from training.data.joins import open_joins, source_file
from training.data.sources import read_batches
from training.data.spec import TransactionsSpec
from training.data.times import TimeForm, check_epoch_days, time_form

# Rows per group: a group is mapped to node indices at once (see training.data.transactions);
# ~0.35 GB of id text per group at H&M size.
GROUP_ROWS = 4_000_000


@dataclass
class LineGroup:
    """Consecutive purchase lines of one file that passed the filter.

    Args:
        file: the file they are from.
        rows: ``(n,)`` int64 0-based data rows in the file (for messages).
        customer: ``(n,)`` text customer ids (null where the field is empty).
        article: ``(n,)`` text article ids.
        day: ``(n,)`` int32 days since 1970-01-01.
        value: ``(n,)`` float32 value of the line.
        extra: the extra columns asked for, ``n`` rows.
    """

    file: SourceFile
    rows: np.ndarray
    customer: pa.ChunkedArray
    article: pa.ChunkedArray
    day: np.ndarray
    value: np.ndarray
    extra: pa.Table


def value_note(spec: TransactionsSpec) -> str:
    """One line saying what a line's value is."""
    if spec.price and spec.quantity:
        return f"transactions: value of a line = {spec.price} * {spec.quantity}"
    if spec.price or spec.amount:
        return f"transactions: value of a line = {spec.price or spec.amount}"
    return "transactions: no price or amount column: every line counts 1.0 (sales cannot be trained)"


def _reads(spec: TransactionsSpec, form_read: ColumnRead,
           extra: Mapping[str, ColumnRead]) -> dict[str, ColumnRead]:
    reads = {spec.customer: ID, spec.article: ID, spec.time: form_read}
    if spec.price:
        reads[spec.price] = FLOAT64 if spec.quantity else FLOAT32
    if spec.amount:
        reads[spec.amount] = FLOAT32
    if spec.quantity:
        reads[spec.quantity] = FLOAT64
    for condition in spec.filter:
        numeric = all(c.numeric for c in spec.filter if c.column == condition.column)
        reads.setdefault(condition.column, FLOAT64 if numeric else TEXT)
    for name, read in extra.items():
        reads.setdefault(name, read)
    return reads


def transaction_lines(data_dir: Path, spec: TransactionsSpec, extra: Mapping[str, ColumnRead] | None = None,
                      progress: bool = True, desc: str = "",
                      note: Callable[[str], object] | None = None) -> Iterator[LineGroup]:
    """The filtered purchase lines of ``spec``'s files, group by group, in file order.

    Args:
        data_dir: the data directory the file names are under.
        spec: the transactions table.
        extra: more columns to read (attributes of a derived table) and how.
        progress: show a bar over the bytes of the files on stderr when it is a terminal.
        desc: the bar's label (default: the file name or glob).
        note: receives, after the last group, the count of lines each joined table dropped.

    Raises:
        DataError: a missing file or column, no rows at all, an empty time or value, a value that
            does not parse, a filter comparing text as a number, or a bad joined table
            (:func:`training.data.joins.open_joins`).
    """
    files = resolve_files(data_dir, spec.file, spec.options)
    label = table_label(spec.file, files)
    form = time_form(source_file(data_dir, files[0], spec.join, spec.time), spec.time, spec.time_format)
    channel = (spec.channel,) if spec.channel else ()
    joins = open_joins(data_dir, spec.join, files[0], label, _reads(spec, form.column_read(), extra or {}),
                       channel)
    reads = joins.lines
    for file in files:
        file.require((*reads, *(() if spec.join else channel)))
    total = sum(f.path.stat().st_size for f in files)
    rows_read = rows_kept = 0
    with progress_bar(total=total, desc=desc or label, unit="B", unit_scale=True, enabled=progress) as bar:
        for file in files:
            start = bar.n
            batches = read_batches(file, reads, lambda done, start=start: bar.update(start + done - bar.n))
            for group, row_offset in row_groups(batches):
                rows_read += group.num_rows
                rows = np.arange(row_offset, row_offset + group.num_rows, dtype=np.int64)
                lines = _typed(file, spec, *joins.apply(group, rows), form, list(extra or {}))
                rows_kept += len(lines.rows)
                yield lines
            bar.update(start + file.path.stat().st_size - bar.n)
    if rows_read == 0:
        raise DataError(f"{label}: no data rows (only a header)")
    unmatched = joins.notes(label)
    if rows_kept == 0:
        why = f" ({'; '.join(unmatched)})" if unmatched else ""
        raise DataError(f"{label}: none of the {rows_read:,} rows passes the filter{why}")
    if note is not None:
        for line in unmatched:
            note(line)


def _typed(file: SourceFile, spec: TransactionsSpec, group: pa.Table, rows: np.ndarray, form: TimeForm,
           extra: list[str]) -> LineGroup:
    if spec.filter:
        keep = _filter_mask(file, spec, group, rows)
        if not keep.all():
            group, rows = group.filter(pa.array(keep)), rows[keep]
    value_columns = [c for c in (spec.price, spec.amount, spec.quantity) if c]
    for column in (spec.time, *value_columns):
        _require_present(file, group[column], column, rows)
    day = form.days(group[spec.time])
    if form.epoch:
        check_epoch_days(file, spec.time, day, rows, form.unit)
    if spec.price and spec.quantity:
        value = (group[spec.price].to_numpy() * group[spec.quantity].to_numpy()).astype(np.float32)
    elif spec.price or spec.amount:
        value = group[spec.price or spec.amount].to_numpy()
    else:
        value = np.ones(group.num_rows, dtype=np.float32)
    return LineGroup(file, rows, id_text(group[spec.customer]), id_text(group[spec.article]), day, value,
                     group.select(extra))


def _filter_mask(file: SourceFile, spec: TransactionsSpec, group: pa.Table, rows: np.ndarray) -> np.ndarray:
    keep = np.ones(group.num_rows, dtype=bool)
    for condition in spec.filter:
        column = group[condition.column]
        if condition.numeric and not pa.types.is_floating(column.type):
            column = _as_numbers(file, condition.column, column, rows)
        elif not condition.numeric and not pa.types.is_string(column.type):
            column = column.cast(pa.string())
        keep &= row_mask(column, condition).to_numpy(zero_copy_only=False)
    return keep


def _as_numbers(file: SourceFile, name: str, column: pa.ChunkedArray, rows: np.ndarray) -> pa.Array:
    try:
        return FLOAT64.convert(column.combine_chunks())
    except ConversionError as err:
        raise DataError(f"{file.name}: {file.where(int(rows[err.row]))}: the filter compares {name} as a "
                        f"number, but it holds {show(err.value)}") from None


def _require_present(file: SourceFile, column: pa.ChunkedArray, name: str, rows: np.ndarray) -> None:
    if column.null_count:
        row = int(pc.index(pc.is_null(column), True).as_py())
        raise DataError(f"{file.name}: {file.where(int(rows[row]))}: empty {name}")


def row_groups(batches: Iterable[pa.RecordBatch]) -> Iterator[tuple[pa.Table, int]]:
    """Consecutive batches joined into tables of at least ``GROUP_ROWS`` rows, with their first row."""
    pending: list[pa.RecordBatch] = []
    pending_rows = row_offset = 0
    for batch in batches:
        pending.append(batch)
        pending_rows += batch.num_rows
        if pending_rows >= GROUP_ROWS:
            yield pa.Table.from_batches(pending), row_offset
            row_offset += pending_rows
            pending, pending_rows = [], 0
    if pending:
        yield pa.Table.from_batches(pending), row_offset
