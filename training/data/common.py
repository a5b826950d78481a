"""Shared pieces of the H&M CSV readers: the error type, header checks and pyarrow options.

Line numbers in messages count the header as line 1 and assume one record per line, which
holds for the H&M files (no quoted field spans lines); "line 2" is the first data row.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import re
from pathlib import Path
from typing import IO

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv

# pyarrow parses in blocks of this many bytes; one block is the unit of work of one thread.
BLOCK_SIZE = 16 << 20
DELIMITERS = (",", ";", "\t", "|")  # the first wins a tie


class DataError(ValueError):
    """An input file is missing or malformed; the message names the file and what is wrong."""


SCAN_BYTES = 1 << 24  # what data_line reads at a time


def line_number(row: int) -> int:
    """The 1-based file line of the 0-based data row ``row`` (the header is line 1), when no quoted
    field before it spans lines (:func:`data_line` counts those)."""
    return int(row) + 2


def data_line(path: Path, row: int, encoding: str = "utf-8") -> int:
    """The line of CSV ``path`` on which 0-based data row ``row`` starts, counting the line breaks
    inside quoted fields before it (a product description may span lines). Reads the file up to that
    row, so only a message about the row calls it: a row ends at a newline outside quotes, and a
    quote doubled inside a quoted field toggles twice, so counting quotes tells which is which."""
    if codecs.lookup(encoding).name.startswith("utf-16"):  # two-byte newlines: not worth the count
        return line_number(row)
    ends_left, newlines, quoted = int(row) + 1, 0, 0  # the header's end, then one per row before it
    with open_binary(path) as f:
        while chunk := f.read(SCAN_BYTES):
            data = np.frombuffer(chunk, np.uint8)
            breaks = np.flatnonzero(data == 10)
            if quoted or 34 in chunk:
                parity = (np.cumsum(data == 34) + quoted) % 2
                ends, quoted = breaks[parity[breaks] == 0], int(parity[-1])
            else:
                ends = breaks
            if len(ends) >= ends_left:
                return newlines + int(np.searchsorted(breaks, ends[ends_left - 1])) + 2
            ends_left, newlines = ends_left - len(ends), newlines + len(breaks)
    return line_number(row)


def show(value: object, limit: int = 80) -> str:
    """``repr`` of a value from a file, shortened so one message stays one readable line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def data_file(data_dir: Path, name: str) -> Path:
    """``data_dir / name``, else its gzipped ``name.gz``; :class:`DataError` if neither is a file.

    Error messages then name the file that was read (``customers.csv.gz: line 3: ...``).
    """
    path = Path(data_dir) / name
    if path.is_file():
        return path
    zipped = path.with_name(name + ".gz")
    if zipped.is_file():
        return zipped
    where = "directory does not exist" if not Path(data_dir).is_dir() else "file not found"
    raise DataError(f"{name}: {where} (looked for {path} and {zipped.name})")


def is_gzip(path: Path) -> bool:
    return path.suffix == ".gz"


UTF8 = "utf-8"


def codec(encoding: str) -> str:
    """Python's codec name for ``encoding``; UTF-8 as ``utf-8-sig`` (a byte-order mark dropped)."""
    name = codecs.lookup(encoding).name
    return "utf-8-sig" if name == UTF8 else name


def encoding_name(encoding: str) -> str:
    """How messages name ``encoding``: ``UTF-8``, or as the spec wrote it."""
    return "UTF-8" if codecs.lookup(encoding).name == UTF8 else encoding


def encoding_advice(section: str = "the spec's table of this file") -> str:
    return f"set encoding = 'latin-1' (or the file's own, e.g. 'cp1252') in {section}"


def open_binary(path: Path) -> IO[bytes]:
    """``path``'s bytes, decompressing a ``.gz`` file."""
    return gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")


def _first_line(path: Path, encoding: str = UTF8) -> str:
    """The header line, decoded from the file's first block: a line ends at a decoded newline, which in
    UTF-16 (Excel's "Unicode text" export) is two bytes."""
    try:
        with open_binary(path) as f:
            block = f.read(1 << 16)
    except (gzip.BadGzipFile, EOFError) as err:
        raise DataError(f"{path.name}: not a readable gzip file ({err})") from err
    decoded = codecs.getincrementaldecoder(codec(encoding))(errors="replace").decode(block)
    first = decoded.split("\n", 1)[0] + ("\n" if "\n" in decoded else "")
    if "\ufffd" in first:
        raise DataError(f"{path.name}: line 1 is not {encoding_name(encoding)} text: {encoding_advice()}")
    if not first.strip():
        raise DataError(f"{path.name}: file is empty (expected a header line)")
    return first


def sniff_delimiter(header: str) -> str:
    """The field delimiter of a CSV file from its header line: whichever of comma, semicolon, tab
    and bar occurs most outside quotes (a comma on a tie, or when none does). Spreadsheets in many
    locales export with semicolons, databases often with tabs or bars."""
    outside = re.sub(r'"[^"]*"', "", header)
    return max(DELIMITERS, key=outside.count)


def csv_delimiter(path: Path, encoding: str = UTF8) -> str:
    """:func:`sniff_delimiter` of ``path``'s header line."""
    return sniff_delimiter(_first_line(path, encoding))


def parse_options(path: Path, encoding: str = UTF8, **options) -> pa_csv.ParseOptions:
    """pyarrow's parse options for ``path``: its delimiter (and ``options``). A quoted field may span
    lines (a product description with line breaks): without saying so, pyarrow's reader loses step at
    the first such field past its first block."""
    return pa_csv.ParseOptions(delimiter=csv_delimiter(path, encoding), newlines_in_values=True, **options)


def read_header(path: Path, encoding: str = UTF8) -> list[str]:
    """The column names on the first line of ``path``; :class:`DataError` if the file is empty."""
    first = _first_line(path, encoding)
    return next(csv.reader([first], delimiter=sniff_delimiter(first)))


def check_columns(path: Path, header: list[str], required: tuple[str, ...]) -> None:
    """:class:`DataError` naming every column of ``required`` that ``header`` lacks."""
    missing = [c for c in required if c not in header]
    if missing:
        raise DataError(
            f"{path.name}: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
            f"found columns: {', '.join(header)}"
        )


def read_options(use_threads: bool = True, encoding: str = UTF8) -> pa_csv.ReadOptions:
    """pyarrow's read options: blocks of :data:`BLOCK_SIZE`, text in ``encoding`` (transcoded)."""
    name = codecs.lookup(encoding).name
    return pa_csv.ReadOptions(use_threads=use_threads, block_size=BLOCK_SIZE,
                              encoding="utf8" if name == UTF8 else name)


def convert_options(column_types: dict[str, pa.DataType]) -> pa_csv.ConvertOptions:
    """Read only ``column_types``' columns, with exactly those types; only an empty field is missing.

    pyarrow's default null markers include ``NA``, ``null`` and ``nan``, which are values here.
    """
    return pa_csv.ConvertOptions(
        column_types=column_types,
        include_columns=list(column_types),
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=True,
    )


def first_null_row(column: pa.ChunkedArray | pa.Array) -> int | None:
    """0-based index of the first null of ``column``, or ``None``."""
    if column.null_count == 0:
        return None
    nulls = column.is_null()
    if isinstance(nulls, pa.ChunkedArray):
        nulls = nulls.combine_chunks()
    return int(nulls.to_numpy(zero_copy_only=False).argmax())


def require_present(path: Path, column: pa.ChunkedArray | pa.Array, name: str, row_offset: int = 0) -> None:
    """:class:`DataError` at the first empty field of a column that must always have a value."""
    row = first_null_row(column)
    if row is not None:
        raise DataError(f"{path.name}: line {data_line(path, row_offset + row)}: empty {name}")
