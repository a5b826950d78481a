"""Reading a table's files (:mod:`training.data.files`): delimited text (plain or gzip), Parquet or a
spreadsheet's sheet, with the table's :class:`training.data.spec.FileOptions`.

A CSV file is parsed in blocks (its delimiter read off the header, its text transcoded from its
encoding) and a Parquet file in batches of its row groups, so a table of any size streams through a
bounded amount of memory; a sheet is read whole (:mod:`training.data.sheets`). Every column is read
with a :class:`training.data.convert.ColumnRead`, so every format gives the same arrow types.
Positions in messages are ``line N`` in a CSV file (the header is line 1) and ``row N`` in a
Parquet file or a sheet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from training.data.common import DataError, convert_options, is_gzip, parse_options, read_options, show
from training.data.convert import TEXT, ColumnRead, ConversionError, plain_numbers
from training.data.files import CSV, PARQUET, PARQUET_BATCH_ROWS, SHEET, SourceFile
from training.data.locate import CONVERSION, DECIMAL_COMMA, DECIMAL_COMMA_ADVICE, located_errors
from training.data.sheets import sheet_table


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
        yield from _text_batches(file, reads, dict.fromkeys(reads, TEXT), on_bytes)
        return
    reported = 0

    def report(position: int) -> None:  # progress never goes back when the file is read again
        nonlocal reported
        if position > reported:
            reported = position
            on_bytes(position)

    done = 0
    try:
        for batch in _csv_batches(file, reads, report, numbers_refused=True):
            yield batch
            done += batch.num_rows
        return
    except FormattedNumber:
        pass
    # The CSV reader refused a number as the export writes it ($1,234.50): the rest of the file with
    # its numbers as text, converted as Parquet's text is (plain_numbers).
    yield from _text_batches(file, reads, _numbers_as_text(reads), report, skip=done)


class FormattedNumber(Exception):
    """A numeric column's value the CSV reader cannot parse but :func:`plain_numbers` may."""


def _numeric(read: ColumnRead) -> bool:
    return read.csv_type is not None and pa.types.is_floating(read.csv_type)


def _numbers_as_text(reads: Mapping[str, ColumnRead]) -> dict[str, ColumnRead]:
    return {name: TEXT if _numeric(read) else read for name, read in reads.items()}


def _text_batches(file: SourceFile, reads: Mapping[str, ColumnRead], as_text: Mapping[str, ColumnRead],
                  on_bytes: Callable[[int], object], skip: int = 0) -> Iterator[pa.RecordBatch]:
    """``file``'s batches read as ``as_text`` says, each column read as text converted as ``reads``
    says, from data row ``skip`` on."""
    row = 0
    for batch in _csv_batches(file, as_text, on_bytes):
        if row + batch.num_rows <= skip:
            row += batch.num_rows
            continue
        if row < skip:
            batch, row = batch.slice(skip - row), skip
        yield pa.RecordBatch.from_arrays([_convert(file, name, batch.column(name), read, row)
                                          if as_text[name] is TEXT else batch.column(name)
                                          for name, read in reads.items()], names=list(reads))
        row += batch.num_rows


def _csv_batches(file: SourceFile, reads: Mapping[str, ColumnRead], on_bytes: Callable[[int], object],
                 numbers_refused: bool = False) -> Iterator[pa.RecordBatch]:
    """``file``'s batches; with ``numbers_refused`` a numeric column's value the reader cannot parse
    raises :class:`FormattedNumber` instead of a :class:`DataError`."""
    source = pa.OSFile(str(file.path))
    stream = pa.CompressedInputStream(source, "gzip") if is_gzip(file.path) else source
    with source, located_errors(file.path, file.columns(), _words(reads), file.encoding):
        try:
            reader = pa_csv.open_csv(stream, read_options=read_options(encoding=file.encoding),
                                     parse_options=parse_options(file.path, file.encoding),
                                     convert_options=_csv_options(reads))
            for batch in reader:
                yield batch
                on_bytes(source.tell())
        except pa.ArrowInvalid as err:
            if numbers_refused and _numeric_refused(file, reads, str(err)):
                raise FormattedNumber from err
            raise


def _numeric_refused(file: SourceFile, reads: Mapping[str, ColumnRead], message: str) -> bool:
    match = CONVERSION.search(message)
    header = file.columns()
    if match is None or int(match[1]) >= len(header):
        return False
    read = reads.get(header[int(match[1])])
    return read is not None and _numeric(read)


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
        values = plain_numbers(values, ",")
    try:
        return read.convert(values)
    except ConversionError as err:
        what = f"cannot parse {name} value {show(err.value)} as {read.words}"
        if file.options.decimal == "." and read.words == "a number" and DECIMAL_COMMA.fullmatch(err.value):
            what += DECIMAL_COMMA_ADVICE
        raise DataError(f"{file.name}: {file.where(row_offset + err.row)}: {what}") from None


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
    if file.format == CSV and file.options.decimal == ".":
        file.require(tuple(reads))
        with located_errors(file.path, file.columns(), _words(reads), file.encoding):
            try:
                return pa_csv.read_csv(file.path, read_options=read_options(encoding=file.encoding),
                                       parse_options=parse_options(file.path, file.encoding),
                                       convert_options=_csv_options(reads))
            except pa.ArrowInvalid as err:  # a number as the export writes it ($1,234.50): as text
                if not _numeric_refused(file, reads, str(err)):
                    raise
        batches = list(_text_batches(file, reads, _numbers_as_text(reads), lambda _: None))
    else:
        batches = list(read_batches(file, reads))
    schema = batches[0].schema if batches else None
    return pa.Table.from_batches(batches, schema) if batches else _empty(reads)


def _empty(reads: Mapping[str, ColumnRead]) -> pa.Table:
    return pa.table({name: pa.array([], read.csv_type) for name, read in reads.items()})
