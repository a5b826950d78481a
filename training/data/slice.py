"""Cut a small, dense slice out of a dataset: the most active customers of the last weeks.

``python -m training.data.slice --data DIR [--spec FILE] --out OUT --customers 300 --weeks 16``

Reads the dataset through its spec (``DIR/relserve.toml``, ``--spec``, else the H&M layout), keeps
the transaction lines of the last ``weeks`` weeks that pass the spec's filter, then only those of
the ``customers`` customers with the most such lines (ties to the smaller id), the rows of the
customers and articles files that they name, and the tables joined onto the lines whole. Each file
is written under the same relative path and in the same format (CSV, CSV.gz, Parquet; columns and
values as they are), and the spec file is copied beside them, so the slice is the same data, only
less of it, read by the same spec. Used by the CI test that trains on real data in minutes.
"""

from __future__ import annotations

import gzip
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from models.cli import OneLineErrors
from training.data.common import (
    DataError,
    codec,
    convert_options,
    csv_delimiter,
    parse_options,
    read_header,
    read_options,
)
from training.data.files import PARQUET, SHEET, SourceFile, resolve_files
from training.data.ids import id_text
from training.data.lines import transaction_lines
from training.data.spec import DatasetSpec
from training.data.spec_file import SPEC_FILE, find_spec


def read_raw(file: SourceFile) -> pa.Table:
    """Every column of ``file`` as it is: Parquet types kept, CSV fields as text (empty: null).

    Raises:
        DataError: ``file`` is a spreadsheet or in a zip archive, which are read but not written.
    """
    if file.archive is not None:
        raise DataError(f"{file.archive.name}: a slice writes each file in its own format, and zip archives "
                        "are read, not written: unzip it (and name its files in the spec) first")
    if file.format == SHEET:
        raise DataError(f"{file.name}: a slice writes each file in its own format, and spreadsheets are "
                        "read, not written: save the sheet as CSV (and name that file in the spec) first")
    if file.format == PARQUET:
        return pq.read_table(file.path)
    header = read_header(file.path, file.encoding)
    return pa_csv.read_csv(file.path, read_options=read_options(encoding=file.encoding),
                           parse_options=parse_options(file.path, file.encoding),
                           convert_options=convert_options(dict.fromkeys(header, pa.string())))


def write_raw(table: pa.Table, file: SourceFile, path: Path) -> None:
    """``table`` to ``path`` in ``file``'s format, delimiter and encoding (gzip for a ``.gz`` name)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if file.format == PARQUET:
        pq.write_table(table, path)
        return
    sink = pa.BufferOutputStream()
    options = pa_csv.WriteOptions(quoting_style="needed", delimiter=csv_delimiter(file.path, file.encoding))
    pa_csv.write_csv(table, sink, options)
    data = sink.getvalue().to_pybytes().decode("utf-8").encode(codec(file.encoding))
    path.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)


def _relative(source: Path, file: SourceFile) -> Path:
    try:
        return file.path.resolve().relative_to(source.resolve())
    except ValueError:
        raise DataError(f"{file.path}: the spec names a file outside {source}; a slice is written "
                        "under the same relative paths") from None


def slice_dataset(source: Path, out: Path, customers: int, weeks: int,
                  spec: DatasetSpec | Path | None = None) -> dict[str, int]:
    """Write the slice of the dataset in ``source`` into ``out``.

    Args:
        source: the data directory.
        out: the directory to write the slice (and the spec file, if there is one) into.
        customers: how many of the most active customers to keep.
        weeks: how many weeks, counted back from the last transaction day, to keep.
        spec: the spec or a spec file; ``None``: ``source/relserve.toml`` if present, else H&M.

    Returns:
        Rows written per file, by its path relative to ``out``.

    Raises:
        DataError: as the loader, or a file outside ``source``.
    """
    source, out = Path(source), Path(out)
    if not isinstance(spec, DatasetSpec):
        spec = find_spec(source, spec)
    lines = _recent_lines(source, spec, weeks)
    customer = lines.customer.to_numpy(zero_copy_only=False)
    ids, counts = np.unique(customer, return_counts=True)
    keep = np.isin(customer, ids[np.lexsort((ids, -counts))[:customers]])
    written: dict[str, int] = {}
    for k, file in enumerate(lines.files):
        table = read_raw(file).take(pa.array(lines.row[keep & (lines.file == k)]))
        written[str(_relative(source, file))] = _write(table, file, source, out)
    referenced = {spec.customers.table: lines.customer.filter(pa.array(keep)),
                  spec.articles.table: lines.article.filter(pa.array(keep))}
    for node in (spec.customers, spec.articles):
        if node.file is None:
            continue
        for file in resolve_files(source, node.file, node.options):
            table = read_raw(file)
            named = pc.is_in(id_text(table[node.id].combine_chunks()), value_set=referenced[node.table])
            written[str(_relative(source, file))] = _write(table.filter(named), file, source, out)
    for join in spec.transactions.join:  # an order header: whole (its rows are the lines' keys)
        for file in resolve_files(source, join.file, join.options):
            written[str(_relative(source, file))] = _write(read_raw(file), file, source, out)
    if spec.path is not None:
        shutil.copyfile(spec.path, out / SPEC_FILE)
    return written


def _write(table: pa.Table, file: SourceFile, source: Path, out: Path) -> int:
    write_raw(table, file, out / _relative(source, file))
    return table.num_rows


@dataclass
class _Lines:
    """The filtered lines of the last weeks.

    Args:
        files: the transactions files, in reading order.
        file: ``(n,)`` each line's file number in ``files``.
        row: ``(n,)`` each line's 0-based data row in its file.
        customer: ``(n,)`` text customer ids.
        article: ``(n,)`` text article ids.
    """

    files: list[SourceFile]
    file: np.ndarray
    row: np.ndarray
    customer: pa.Array
    article: pa.Array


def _recent_lines(source: Path, spec: DatasetSpec, weeks: int) -> _Lines:
    files: dict[Path, SourceFile] = {}
    parts: dict[str, list] = {"file": [], "row": [], "customer": [], "article": [], "day": []}
    for group in transaction_lines(source, spec.transactions, progress=False):
        number = list(files).index(group.file.path) if group.file.path in files else len(files)
        files.setdefault(group.file.path, group.file)
        parts["file"].append(np.full(len(group.rows), number, dtype=np.int64))
        parts["row"].append(group.rows)
        parts["customer"].append(group.customer.combine_chunks())
        parts["article"].append(group.article.combine_chunks())
        parts["day"].append(group.day)
    day = np.concatenate(parts["day"])
    recent = np.flatnonzero(day > day.max() - 7 * weeks)
    return _Lines(list(files.values()), np.concatenate(parts["file"])[recent],
                  np.concatenate(parts["row"])[recent], pa.concat_arrays(parts["customer"]).take(recent),
                  pa.concat_arrays(parts["article"]).take(recent))


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = OneLineErrors(prog="python -m training.data.slice",
                           description="Write the most active customers of a dataset's last weeks, "
                                       "in its own files and spec.")
    parser.add_argument("--data", type=Path, required=True, help="data directory")
    parser.add_argument("--spec", type=Path, default=None, metavar="FILE",
                        help="dataset spec (default: DATA/relserve.toml if present, else the H&M layout)")
    parser.add_argument("--out", type=Path, required=True, help="directory to write the slice into")
    parser.add_argument("--customers", type=int, default=300, help="most active customers kept")
    parser.add_argument("--weeks", type=int, default=16, help="weeks kept, back from the last day")
    args = parser.parse_args(argv)
    if args.customers < 1 or args.weeks < 1:
        parser.error("--customers and --weeks must be at least 1")
    try:
        written = slice_dataset(args.data, args.out, args.customers, args.weeks, args.spec)
    except DataError as exc:
        parser.exit(1, f"{parser.prog}: error: {exc}\n")
    for name, rows in written.items():
        print(f"{args.out / name}: {rows:,} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
