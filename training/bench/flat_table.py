"""The same data as one flat table: an H&M-layout dataset joined into order lines, with its spec.

Each transaction row gets its customer's and its article's feature columns inline (the shape of
most shop exports); the ``relserve.toml`` written beside it derives the customers and articles
back from the lines (``from = "transactions"``). Ids and values are copied as text, so loading the
flat table gives what the three tables give for the customers and articles that bought or were
bought (``tests/unit/test_spec_flat.py``; ``training.bench.load_spec`` times both).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from models.schema import (
    ARTICLE_CATEGORICAL,
    ARTICLE_NUMERIC,
    ARTICLES_CSV,
    CUSTOMER_CATEGORICAL,
    CUSTOMER_NUMERIC,
    CUSTOMERS_CSV,
    TRANSACTIONS_CSV,
)
from training.data.common import data_file, read_header
from training.data.spec_file import SPEC_FILE

FORMATS = ("csv", "csv.gz", "parquet", "xlsx")  # xlsx: written with openpyxl (the dev extra)
_FEATURES = {"customer_id": (CUSTOMER_CATEGORICAL, CUSTOMER_NUMERIC),
             "article_id": (ARTICLE_CATEGORICAL, ARTICLE_NUMERIC)}


def read_text(path: Path) -> pa.Table:
    """Every column of a CSV file as text (empty fields are null)."""
    header = read_header(path)
    options = pa_csv.ConvertOptions(column_types=dict.fromkeys(header, pa.string()), null_values=[""],
                                    strings_can_be_null=True)
    return pa_csv.read_csv(path, convert_options=options)


def flat_lines(source: Path) -> pa.Table:
    """The transactions of the H&M-layout ``source`` with their customer's and article's features."""
    lines = read_text(data_file(source, TRANSACTIONS_CSV))
    for name, key in ((CUSTOMERS_CSV, "customer_id"), (ARTICLES_CSV, "article_id")):
        table = read_text(data_file(source, name))
        categorical, numeric = _FEATURES[key]
        rows = table.select(list(categorical + numeric)).take(pc.index_in(lines[key], value_set=table[key]))
        for column in rows.column_names:
            lines = lines.append_column(column, rows[column])
    return lines


def _write_sheet(lines: pa.Table, path: Path) -> None:
    """``lines`` as the one sheet of a workbook, every cell text as read (a spreadsheet of an export)."""
    import openpyxl  # the dev extra: only this benchmark writes workbooks

    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("order lines")
    sheet.append(lines.column_names)
    for row in zip(*(lines[c].to_pylist() for c in lines.column_names), strict=True):
        sheet.append(row)
    book.save(path)


def flat_spec(file_name: str) -> str:
    """The ``relserve.toml`` of the flat table ``file_name``."""
    sections = [f'[transactions]\nfile = "{file_name}"\ncustomer = "customer_id"\narticle = "article_id"\n'
                'time = "t_dat"\nprice = "price"\n']
    for table, key in (("customers", "customer_id"), ("articles", "article_id")):
        categorical, numeric = _FEATURES[key]
        features = [f'{c} = "categorical"' for c in categorical] + [f'{c} = "numeric"' for c in numeric]
        header = f'[{table}]\nfrom = "transactions"\n\n[{table}.features]\n'
        sections.append(header + "\n".join(features) + "\n")
    return "\n".join(sections)


def write_flat(source: Path, out: Path, file_format: str = "csv") -> Path:
    """Write ``out/order_lines.<file_format>`` and ``out/relserve.toml`` for the data in ``source``.

    Args:
        source: an H&M-layout directory (plain or gzipped CSV files).
        out: the directory to write (created).
        file_format: one of :data:`FORMATS`.

    Returns:
        ``out``.
    """
    if file_format not in FORMATS:
        raise ValueError(f"file_format must be one of {', '.join(FORMATS)}, got {file_format!r}")
    out.mkdir(parents=True, exist_ok=True)
    lines = flat_lines(source)
    name = f"order_lines.{file_format}"
    if file_format == "parquet":
        pq.write_table(lines, out / name, row_group_size=1 << 17)
    elif file_format == "xlsx":
        _write_sheet(lines, out / name)
    else:
        with pa.output_stream(out / name, compression="gzip" if file_format == "csv.gz" else None) as stream:
            pa_csv.write_csv(lines, stream, pa_csv.WriteOptions(quoting_style="needed"))
    (out / SPEC_FILE).write_text(flat_spec(name))
    return out
