"""Spreadsheets as published: the raw export as a workbook, typed as Excel types it.

Invoice numbers and all-digit stock codes are numbers in a sheet (``489434.0``), cancellations and
codes with letters text, dates real dates, a guest's customer number an empty cell. Read through the
shipped spec with only ``file`` and ``sheet`` set, the sheet gives what the Parquet export gives.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import numpy as np
import openpyxl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from raw_export import export_table, shipped_spec

from training.data.common import DataError
from training.data.load import load_tables
from training.data.slice import slice_dataset
from training.data.spec_file import SPEC_FILE

SHEET = "Year 2010-2011"


def excel_value(column: str, value: object) -> object:
    if value is None:
        return None
    if column in ("Invoice", "StockCode") and str(value).isdigit():
        return int(value)
    if column == "InvoiceDate":
        return dt.datetime.fromisoformat(str(value))
    return value


def write_workbook(table: pa.Table, path: Path) -> None:
    book = openpyxl.Workbook()
    book.active.title = "Notes"
    book.active.append(["Exported by the shop's back office"])
    sheet = book.create_sheet(SHEET)
    sheet.append(table.column_names)
    columns = [table[c].to_pylist() for c in table.column_names]
    for row in zip(*columns, strict=True):
        sheet.append([excel_value(c, v) for c, v in zip(table.column_names, row, strict=True)])
    book.save(path)


@pytest.fixture(scope="module")
def export(tiny_csv_dir: Path) -> pa.Table:
    return export_table(tiny_csv_dir)


def test_a_sheet_reads_as_the_parquet_export(export: pa.Table, tmp_path: Path) -> None:
    (tmp_path / "parquet").mkdir()
    pq.write_table(export, tmp_path / "parquet" / "export.parquet")
    (tmp_path / "parquet" / SPEC_FILE).write_text(shipped_spec("export.parquet"))
    (tmp_path / "sheet").mkdir()
    write_workbook(export, tmp_path / "sheet" / "export.xlsx")
    (tmp_path / "sheet" / SPEC_FILE).write_text(shipped_spec("export.xlsx", f'sheet = "{SHEET}"\n'))
    expected = load_tables(tmp_path / "parquet", progress=False)
    loaded = load_tables(tmp_path / "sheet", progress=False)
    for name in ("customer", "article", "day", "price"):
        np.testing.assert_array_equal(getattr(expected.transactions, name),
                                      getattr(loaded.transactions, name))
    for name in ("customers", "articles"):
        np.testing.assert_array_equal(getattr(expected, name).ids, getattr(loaded, name).ids)
        np.testing.assert_array_equal(getattr(expected, name).categorical, getattr(loaded, name).categorical)
    assert any(bytes(i).decode().isdigit() for i in loaded.articles.ids)  # 20001, not 20001.0


def test_sheet_errors_are_one_line(export: pa.Table, tmp_path: Path) -> None:
    write_workbook(export.slice(0, 50), tmp_path / "export.xlsx")
    (tmp_path / SPEC_FILE).write_text(shipped_spec("export.xlsx", 'sheet = "Year 2011"\n'))
    with pytest.raises(DataError, match=re.escape("export.xlsx: no sheet 'Year 2011' (sheets: 'Notes', "
                                                  f"'{SHEET}')")):
        load_tables(tmp_path, progress=False)
    (tmp_path / SPEC_FILE).write_text(shipped_spec("export.xlsx"))  # the first sheet: the notes
    with pytest.raises(DataError, match=r"export\.xlsx: missing column InvoiceDate; found columns: Exported"):
        load_tables(tmp_path, progress=False)
    (tmp_path / SPEC_FILE).write_text(shipped_spec("export.xlsx", f'sheet = "{SHEET}"\n'))
    with pytest.raises(DataError, match="spreadsheets are read, not written: save the sheet as CSV"):
        slice_dataset(tmp_path, tmp_path / "slice", customers=2, weeks=1)


def test_a_bad_cell_is_named_by_its_row(export: pa.Table, tmp_path: Path) -> None:
    table = export.slice(0, 20)
    write_workbook(table, tmp_path / "export.xlsx")
    book = openpyxl.load_workbook(tmp_path / "export.xlsx")
    book[SHEET].cell(row=8, column=table.column_names.index("Price") + 1).value = "free"
    book.save(tmp_path / "export.xlsx")
    (tmp_path / SPEC_FILE).write_text(shipped_spec("export.xlsx", f'sheet = "{SHEET}"\n'))
    with pytest.raises(DataError, match=re.escape("export.xlsx: row 8: cannot parse Price value 'free'")):
        load_tables(tmp_path, progress=False)
