"""Turn a pyarrow CSV error into a :class:`DataError` that says on which line the problem is.

pyarrow's multithreaded reader reports a bad value or a short row without its line number.
Bad input is rare and reading is fast, so on error the file is scanned again, cheaply (one
column as text, or one thread for a malformed row), to find the line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from training.data.common import (
    UTF8,
    DataError,
    codec,
    convert_options,
    data_line,
    encoding_advice,
    encoding_name,
    open_binary,
    parse_options,
    read_options,
    show,
)

CONVERSION = re.compile(r"CSV column #(\d+): CSV conversion error to ([^:]+): invalid value '(.*)'$", re.S)
_TYPE_WORDS = {"date32[day]": "a date (YYYY-MM-DD)", "float": "a number", "double": "a number"}

# A number a decimal-point reading cannot take but a decimal-comma one can (12,50 or 1.234,5 and
# around them a currency), and what to set then.
DECIMAL_COMMA = re.compile(r"\D{0,4}[+-]?[0-9.]*[0-9],[0-9]+\D{0,4}")
DECIMAL_COMMA_ADVICE = " (a decimal comma? set decimal = \",\" in the spec's table of this file)"


@contextmanager
def located_errors(path: Path, header: list[str], words: Mapping[str, str] | None = None,
                   encoding: str = UTF8) -> Iterator[None]:
    """Re-raise pyarrow's ``ArrowInvalid`` from reading ``path`` as a :class:`DataError` with a line.

    Args:
        path: the CSV file read.
        header: its column names.
        words: column -> what its values must be (``a number``), instead of the arrow type's words.
        encoding: the file's text encoding.
    """
    try:
        yield
    except pa.ArrowInvalid as err:
        raise explain(path, header, str(err), words, encoding) from err


def explain(path: Path, header: list[str], message: str, words: Mapping[str, str] | None = None,
            encoding: str = UTF8) -> DataError:
    """The :class:`DataError` for pyarrow's ``message`` about ``path``."""
    if "invalid UTF8" in message:
        return _not_text(path, encoding)
    if "CSV parse error" in message:
        return _malformed_row(path, header, message, encoding)
    match = CONVERSION.search(message)
    if match and int(match[1]) < len(header):
        column = header[int(match[1])]
        what = (words or {}).get(column) or _TYPE_WORDS.get(match[2], match[2])
        return _bad_value(path, column, what, match[3], encoding)
    return DataError(f"{path.name}: {message}")


def _not_text(path: Path, encoding: str) -> DataError:
    """The first line of ``path`` that is not ``encoding`` text, and what to set."""
    with open_binary(path) as f:
        for number, line in enumerate(f, start=1):
            try:
                line.decode(codec(encoding))
            except UnicodeDecodeError as err:
                name = encoding_name(encoding)
                return DataError(f"{path.name}: line {number} is not {name} text ({err.reason}, "
                                 f"{show(line[max(0, err.start - 20):err.end + 20])}): {encoding_advice()}")
    return DataError(f"{path.name}: not {encoding_name(encoding)} text: {encoding_advice()}")


def _malformed_row(path: Path, header: list[str], message: str, encoding: str) -> DataError:
    """Find the first row with the wrong number of fields; one thread, so pyarrow knows its line."""
    found: list[pa_csv.InvalidRow] = []

    def keep_first(row: pa_csv.InvalidRow) -> str:
        found.append(row)
        return "error"

    reader_args = {
        "read_options": read_options(use_threads=False, encoding=encoding),
        "parse_options": parse_options(path, encoding, invalid_row_handler=keep_first),
        "convert_options": convert_options({header[0]: pa.string()}),
    }
    try:
        for _ in pa_csv.open_csv(path, **reader_args):
            pass
    except pa.ArrowInvalid:
        pass
    if not found:
        return DataError(f"{path.name}: {message}")
    row = found[0]
    where = f"line {row.number}" if row.number is not None else "a row"
    return DataError(
        f"{path.name}: {where} has {row.actual_columns} fields, expected {row.expected_columns}: "
        f"{show(row.text)}"
    )


def _bad_value(path: Path, column: str, words: str, value: str, encoding: str) -> DataError:
    """Find the first line whose ``column`` holds the unparseable ``value``."""
    what = f"cannot parse {column} value {show(value)} as {words}"
    if words == "a number" and DECIMAL_COMMA.fullmatch(value):
        what += DECIMAL_COMMA_ADVICE
    offset = 0
    try:
        for batch in pa_csv.open_csv(path, read_options=read_options(encoding=encoding),
                                     parse_options=parse_options(path, encoding),
                                     convert_options=convert_options({column: pa.string()})):
            hit = pc.index(batch.column(0), value).as_py()
            if hit >= 0:
                return DataError(f"{path.name}: line {data_line(path, offset + hit, encoding)}: {what}")
            offset += batch.num_rows
    except pa.ArrowInvalid:
        pass
    return DataError(f"{path.name}: column {column}: {what}")
