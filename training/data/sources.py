"""The files of a table: found by name or glob, read as delimited text (plain or gzip), Parquet or a
spreadsheet's sheet by extension, with the table's :class:`training.data.spec.FileOptions`.

A CSV file is parsed in blocks (its delimiter read off the header, its text transcoded from its
encoding) and a Parquet file in batches of its row groups, so a table of any size streams through a
bounded amount of memory; a sheet is read whole (:mod:`training.data.sheets`). Every column is read
with a :class:`training.data.convert.ColumnRead`, so every format gives the same arrow types.
Positions in messages are ``line N`` in a CSV file (the header is line 1) and ``row N`` in a
Parquet file or a sheet.
"""

from __future__ import annotations

import glob
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from training.data.common import (
    DataError,
    check_columns,
    convert_options,
    data_file,
    is_gzip,
    line_number,
    parse_options,
    read_header,
    read_options,
    show,
)
from training.data.convert import TEXT, ColumnRead, ConversionError
from training.data.locate import located_errors
from training.data.sheets import SHEET_SUFFIXES, sheet_table
from training.data.spec import FileOptions

CSV, PARQUET, SHEET = "csv", "parquet", "sheet"
# Delimited text by any of its usual names (the delimiter is read off the header line).
_FORMATS = {".csv": CSV, ".csv.gz": CSV, ".tsv": CSV, ".tsv.gz": CSV, ".txt": CSV, ".txt.gz": CSV,
            ".parquet": PARQUET, ".pq": PARQUET, **dict.fromkeys(SHEET_SUFFIXES, SHEET)}
PARQUET_BATCH_ROWS = 1 << 20


@dataclass(frozen=True)
class SourceFile:
    """One input file.

    Args:
        path: where it is.
        format: :data:`CSV`, :data:`PARQUET` or :data:`SHEET`.
        options: how it is written past its name (encoding, sheet, decimal mark).
    """

    path: Path
    format: str
    options: FileOptions = field(default_factory=FileOptions)

    @property
    def encoding(self) -> str:
        return self.options.encoding

    @property
    def sheet(self) -> str | None:
        return self.options.sheet

    @property
    def name(self) -> str:
        return self.path.name

    def where(self, row: int) -> str:
        """The position of 0-based data row ``row``: ``line N`` (CSV), ``row N`` (Parquet; a sheet's
        row as the spreadsheet numbers it, the header being row 1)."""
        if self.format == SHEET:
            return f"row {int(row) + 2}"
        return f"line {line_number(row)}" if self.format == CSV else f"row {int(row) + 1}"

    def columns(self) -> list[str]:
        """The column names (the CSV header, the Parquet schema or the sheet's first row)."""
        if self.format == CSV:
            return read_header(self.path, self.encoding)
        if self.format == SHEET:
            return sheet_table(self.path, self.sheet)[0]
        try:
            return list(pq.read_schema(self.path).names)
        except (pa.ArrowInvalid, OSError) as err:
            raise DataError(f"{self.name}: not a readable Parquet file ({err})") from None

    def require(self, columns: tuple[str, ...]) -> None:
        """:class:`DataError` naming every column of ``columns`` the file lacks."""
        check_columns(self.path, self.columns(), tuple(dict.fromkeys(columns)))


def file_format(path: Path) -> str:
    """:data:`CSV` or :data:`PARQUET` from the name's extension; :class:`DataError` otherwise."""
    name = path.name.lower()
    for suffix, kind in _FORMATS.items():
        if name.endswith(suffix):
            return kind
    raise DataError(f"{path.name}: unknown file type (use .csv, .tsv or .txt, gzipped or not, .parquet, or a "
                    "spreadsheet: .xlsx, .xls, .ods)")


def resolve_files(data_dir: Path, pattern: str, options: FileOptions | None = None) -> list[SourceFile]:
    """The files ``pattern`` names under ``data_dir`` (or absolute): one name (``name`` or ``name.gz``)
    or a glob (``orders/*.parquet``), matches in sorted order; read as ``options`` say.

    Raises:
        DataError: nothing matches, or a match has an unknown extension.
    """
    if not glob.has_magic(pattern):
        path = data_file(data_dir, pattern)
        return [SourceFile(path, file_format(path), options or FileOptions())]
    matches = glob.glob(str(Path(data_dir) / pattern), recursive=True)
    paths = sorted(p for p in map(Path, matches) if p.is_file())
    if not paths:
        raise DataError(f"{pattern}: no file matches it in {data_dir}")
    return [SourceFile(p, file_format(p), options or FileOptions()) for p in paths]


def table_label(pattern: str, files: list[SourceFile]) -> str:
    """How messages name a table: its file's name, or the glob when it has several files."""
    return files[0].name if len(files) == 1 else pattern


def _csv_options(reads: Mapping[str, ColumnRead]) -> pa_csv.ConvertOptions:
    options = convert_options({name: read.csv_type for name, read in reads.items()})
    formats = [r.timestamp_format for r in reads.values() if r.timestamp_format]
    if formats:
        options.timestamp_parsers = formats
    return options


def _words(reads: Mapping[str, ColumnRead]) -> dict[str, str]:
    return {name: read.words for name, read in reads.items()}


def read_batches(file: SourceFile, reads: Mapping[str, ColumnRead],
                 on_bytes: Callable[[int], object] = lambda _: None) -> Iterator[pa.RecordBatch]:
    """Stream ``file``'s columns ``reads`` as record batches, converted alike from either format.

    Args:
        file: the file.
        reads: column name -> how to read it.
        on_bytes: called after each batch with the bytes of the file read so far.

    Raises:
        DataError: a missing column, a malformed row or an unconvertible value, with its position.
    """
    file.require(tuple(reads))
    if file.format == PARQUET:
        yield from _parquet_batches(file, reads, on_bytes)
        return
    if file.format == SHEET:
        yield from _sheet_batches(file, reads, on_bytes)
        return
    if file.options.decimal != ".":  # every column as text, numbers rewritten, then as Parquet's
        row = 0
        for batch in _csv_batches(file, dict.fromkeys(reads, TEXT), on_bytes):
            yield pa.RecordBatch.from_arrays([_convert(file, name, batch.column(name), read, row)
                                              for name, read in reads.items()], names=list(reads))
            row += batch.num_rows
        return
    yield from _csv_batches(file, reads, on_bytes)


def _csv_batches(file: SourceFile, reads: Mapping[str, ColumnRead],
                 on_bytes: Callable[[int], object]) -> Iterator[pa.RecordBatch]:
    source = pa.OSFile(str(file.path))
    stream = pa.CompressedInputStream(source, "gzip") if is_gzip(file.path) else source
    with source, located_errors(file.path, file.columns(), _words(reads), file.encoding):
        reader = pa_csv.open_csv(stream, read_options=read_options(encoding=file.encoding),
                                 parse_options=parse_options(file.path, file.encoding),
                                 convert_options=_csv_options(reads))
        for batch in reader:
            yield batch
            on_bytes(source.tell())


def _parquet_batches(file: SourceFile, reads: Mapping[str, ColumnRead],
                     on_bytes: Callable[[int], object]) -> Iterator[pa.RecordBatch]:
    parquet = pq.ParquetFile(file.path)
    total, done, size = max(parquet.metadata.num_rows, 1), 0, file.path.stat().st_size
    for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=list(reads)):
        columns = [_convert(file, name, batch.column(name), read, done) for name, read in reads.items()]
        yield pa.RecordBatch.from_arrays(columns, names=list(reads))
        done += batch.num_rows
        on_bytes(size * done // total)


def _sheet_batches(file: SourceFile, reads: Mapping[str, ColumnRead],
                   on_bytes: Callable[[int], object]) -> Iterator[pa.RecordBatch]:
    columns = sheet_table(file.path, file.sheet)[1]
    total, size = max(len(next(iter(columns.values()), [])), 1), file.path.stat().st_size
    for start in range(0, total, PARQUET_BATCH_ROWS):
        arrays = [_convert(file, name, columns[name].slice(start, PARQUET_BATCH_ROWS), read, start)
                  for name, read in reads.items()]
        yield pa.RecordBatch.from_arrays(arrays, names=list(reads))
        on_bytes(size * min(start + PARQUET_BATCH_ROWS, total) // total)


def _convert(file: SourceFile, name: str, values: pa.Array, read: ColumnRead, row_offset: int) -> pa.Array:
    numbers = read is TEXT or pa.types.is_floating(read.csv_type)  # not ids, not times
    if file.options.decimal == "," and numbers and pa.types.is_string(values.type):
        values = decimal_comma(values)
    try:
        return read.convert(values)
    except ConversionError as err:
        raise DataError(f"{file.name}: {file.where(row_offset + err.row)}: cannot parse {name} value "
                        f"{show(err.value)} as {read.words}") from None


# A number with a decimal comma, its thousands grouped by dots or not: 1.234,5 / 1234,5 / -12 / 12,50.
_DECIMAL_COMMA = r"^[+-]?([0-9]{1,3}(\.[0-9]{3})+|[0-9]+)(,[0-9]+)?$"


def decimal_comma(values: pa.Array) -> pa.Array:
    """Text numbers written with a decimal comma (``1.234,5``) as with a decimal point (``1234.5``);
    other values as they are."""
    number = pc.fill_null(pc.match_substring_regex(values, _DECIMAL_COMMA), False)
    plain = pc.replace_substring(pc.replace_substring(values, ".", ""), ",", ".")
    return pc.if_else(number, plain, values)


def first_values(file: SourceFile, column: str, rows: int = 4096) -> pa.Array:
    """About the first ``rows`` values of ``column`` as the file holds them (CSV: text), cheaply."""
    file.require((column,))
    if file.format == SHEET:
        return sheet_table(file.path, file.sheet)[1][column].slice(0, rows)
    if file.format == PARQUET:
        batch = next(pq.ParquetFile(file.path).iter_batches(batch_size=rows, columns=[column]), None)
        return batch.column(0) if batch is not None else pa.array([], pa.string())
    options = read_options(use_threads=False, encoding=file.encoding)
    options.block_size = 1 << 20
    with located_errors(file.path, file.columns(), encoding=file.encoding):
        reader = pa_csv.open_csv(file.path, read_options=options,
                                 parse_options=parse_options(file.path, file.encoding),
                                 convert_options=convert_options({column: pa.string()}))
        batch = next(iter(reader), None)
    return batch.column(0).slice(0, rows) if batch is not None else pa.array([], pa.string())


def read_table(file: SourceFile, reads: Mapping[str, ColumnRead]) -> pa.Table:
    """All of ``file``'s columns ``reads`` in one table (for the customers and articles tables)."""
    if file.format in (PARQUET, SHEET) or file.options.decimal != ".":
        batches = list(read_batches(file, reads))
        schema = batches[0].schema if batches else None
        return pa.Table.from_batches(batches, schema) if batches else _empty(reads)
    file.require(tuple(reads))
    with located_errors(file.path, file.columns(), _words(reads), file.encoding):
        return pa_csv.read_csv(file.path, read_options=read_options(encoding=file.encoding),
                               parse_options=parse_options(file.path, file.encoding),
                               convert_options=_csv_options(reads))


def _empty(reads: Mapping[str, ColumnRead]) -> pa.Table:
    return pa.table({name: pa.array([], read.csv_type) for name, read in reads.items()})
