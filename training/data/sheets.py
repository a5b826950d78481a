"""Spreadsheets as published (``.xlsx``, ``.xlsm``, ``.xlsb``, ``.xls``, ``.ods``): one sheet read as a
table of text, as a CSV export of it would hold.

Shops and public repositories publish exports as workbooks (the UCI Online Retail files are
``.xlsx``, one sheet per year). A sheet is read whole with calamine (a Rust reader: about a second
per 100,000 rows, where a pure-Python reader takes ten times that), kept for the next read of the
same file, and each column turned into text the way a spreadsheet's own CSV export writes it: whole
numbers without decimals (Excel stores every number as a float: invoice ``489434.0`` is
``489434``), other numbers in their shortest form (``2.55``), dates and times in ISO form
(``2009-12-01 07:45:00``), an empty cell missing. From there the values are read as a CSV file's are
(:mod:`training.data.convert`). The first row holds the column names.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from training.data.common import DataError

if TYPE_CHECKING:
    from python_calamine import CalamineWorkbook

SHEET_SUFFIXES = (".xlsx", ".xlsm", ".xlsb", ".xls", ".ods")
_CHUNK_ROWS = 65_536


def _text(value: object) -> str | None:
    if isinstance(value, str):
        return value or None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return str(int(value)) if value.is_integer() and abs(value) < 2**63 else repr(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):  # a time of day without a date
        return str(value)
    return None if value is None else str(value)


def _workbook(path: Path) -> CalamineWorkbook:
    from python_calamine import CalamineWorkbook  # imported on first use: most data is not a workbook

    try:
        return CalamineWorkbook.from_path(str(path))
    except Exception as err:  # calamine raises its own error types per format
        raise DataError(f"{Path(path).name}: not a readable spreadsheet ({err})") from None


@lru_cache(maxsize=2)
def _read(path: Path, mtime_ns: int, sheet: str | None) -> tuple[list[str], dict[str, pa.Array]]:
    book = _workbook(path)
    names = list(book.sheet_names)
    if sheet is not None and sheet not in names:
        raise DataError(f"{path.name}: no sheet {sheet!r} (sheets: {', '.join(map(repr, names))})")
    if not names:
        raise DataError(f"{path.name}: the workbook has no sheet")
    rows = book.get_sheet_by_name(sheet if sheet is not None else names[0]).iter_rows()
    first = next(rows, None)
    if first is None or not any(_text(v) for v in first):
        raise DataError(f"{path.name}: sheet {sheet or names[0]!r} is empty (expected a header row)")
    header = [_text(v) or "" for v in first]
    named = [(k, name) for k, name in enumerate(header) if name]
    parts: dict[str, list[pa.Array]] = {name: [] for _, name in named}
    while chunk := list(itertools.islice(rows, _CHUNK_ROWS)):  # Python cells for a chunk at a time
        for k, name in named:
            cells = [_text(row[k]) if k < len(row) else None for row in chunk]
            parts[name].append(pa.array(cells, pa.string()))
    columns = {name: pa.concat_arrays(p) if p else pa.array([], pa.string()) for name, p in parts.items()}
    return header, columns


def sheet_table(path: Path, sheet: str | None) -> tuple[list[str], dict[str, pa.Array]]:
    """The header of ``sheet`` of the workbook ``path`` (``None``: its first sheet) and each named
    column as text, ``null`` where a cell is empty.

    Raises:
        DataError: not a readable workbook, no such sheet, or an empty one.
    """
    path = Path(path)
    return _read(path, path.stat().st_mtime_ns, sheet)


def sheet_names(path: Path) -> list[str]:
    """The names of the workbook's sheets, in order.

    Raises:
        DataError: not a readable workbook.
    """
    return list(_workbook(path).sheet_names)
