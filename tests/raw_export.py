"""A shop export in the raw Online Retail II columns, written by tests, read through the shipped spec.

:func:`write_export` turns a synthetic H&M-layout dataset into one flat table of invoice lines as
the UCI file has them (``Invoice, StockCode, Description, Quantity, InvoiceDate, Price, Customer ID,
Country``): stock codes with letters (``85123A``), 5-digit customer numbers, quantities, and the
lines a data scientist cleans away (cancellations, guest checkouts without a customer, a free
sample). It copies ``data/real/online-retail-ii/relserve.toml`` beside it with only its file name
changed, as a user would for another year of the same shop. Options type the columns as other
exports do: the customer number as a float with NaN for a missing one, the date as a timestamp.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from training.bench.flat_table import read_text

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "data" / "real" / "online-retail-ii"
SHIPPED_FILE = "online_retail_II_2009_2010.parquet"
COUNTRIES = ("United Kingdom", "France", "EIRE", "Germany")


@dataclass(frozen=True)
class ExportStyle:
    """How the export types its columns.

    Args:
        file_format: ``parquet`` or ``csv``.
        float_customers: the customer number as float64, NaN where missing (a CSV writes it
            ``13085`` and ``nan``).
        timestamp_dates: the invoice date as a Parquet timestamp instead of text.
    """

    file_format: str = "parquet"
    float_customers: bool = False
    timestamp_dates: bool = False


def stock_code(k: int) -> str:
    """The k-th article's stock code: letters as the shop has them (``85123A``, ``79323P``)."""
    return (f"{85000 + k}A", f"{20000 + k}", f"{79000 + k}P")[k % 3]


def export_table(hm_dir: Path) -> pa.Table:
    """The lines of the H&M-layout ``hm_dir`` in the raw columns, with a cancellation after every
    50th line, a guest line after every 40th and a free sample after every 60th."""
    tx = read_text(hm_dir / "transactions_train.csv")
    customers = sorted(set(tx["customer_id"].to_pylist()))
    articles = sorted(set(tx["article_id"].to_pylist()))
    number = {c: 12346 + k for k, c in enumerate(customers)}
    code = {a: stock_code(k) for k, a in enumerate(articles)}
    rows: list[tuple] = []
    for i, (day, customer, article, price) in enumerate(zip(
            tx["t_dat"].to_pylist(), tx["customer_id"].to_pylist(), tx["article_id"].to_pylist(),
            tx["price"].to_pylist(), strict=True)):
        line = (f"{489434 + i}", code[article], 1 + i % 6, f"{day} {7 + i % 12:02d}:45:00",
                round(float(price) * 100, 2), number[customer])
        rows.append(line)
        if i % 50 == 49:
            rows.append((f"C{489434 + i}", line[1], -line[2], line[3], line[4], line[5]))
        if i % 40 == 39:
            rows.append((f"{489434 + i}", line[1], 2, line[3], line[4], None))
        if i % 60 == 59:
            rows.append((f"{489434 + i}", line[1], 1, line[3], 0.0, line[5]))
    invoice, stock, quantity, date, unit_price, customer_no = map(list, zip(*rows, strict=True))
    return pa.table({
        "Invoice": invoice, "StockCode": stock, "Description": [f"ITEM {s}" for s in stock],
        "Quantity": pa.array(quantity, pa.int64()), "InvoiceDate": date, "Price": unit_price,
        "Customer ID": pa.array(customer_no, pa.int64()),
        "Country": [None if c is None else COUNTRIES[c % len(COUNTRIES)] for c in customer_no],
    })


def restyled(table: pa.Table, style: ExportStyle) -> pa.Table:
    """``table`` with its customer number and date typed as ``style`` says."""
    if style.float_customers:
        numbers = table["Customer ID"].to_numpy(zero_copy_only=False).astype(np.float64)  # None -> NaN
        table = table.set_column(table.schema.get_field_index("Customer ID"), "Customer ID",
                                 pa.array(numbers, pa.float64(), from_pandas=False))
    if style.timestamp_dates:
        dates = table["InvoiceDate"].cast(pa.timestamp("us"))
        table = table.set_column(table.schema.get_field_index("InvoiceDate"), "InvoiceDate", dates)
    return table


def write_export(hm_dir: Path, out: Path, name: str = "online_retail_II_2010_2011",
                 style: ExportStyle = ExportStyle()) -> Path:
    """Write the export of ``hm_dir`` as ``out/<name>.<format>`` and the shipped spec naming it."""
    out.mkdir(parents=True, exist_ok=True)
    table = restyled(export_table(hm_dir), style)
    file = f"{name}.{style.file_format}"
    if style.file_format == "parquet":
        pq.write_table(table, out / file)
    else:
        pa_csv.write_csv(table, out / file, pa_csv.WriteOptions(quoting_style="needed"))
    (out / "relserve.toml").write_text(shipped_spec(file))
    return out


def shipped_spec(file: str, extra: str = "") -> str:
    """The shipped spec's text with only its file name changed to ``file`` (and ``extra`` lines,
    such as ``sheet = "..."``, first in its ``[transactions]``)."""
    spec = (SHIPPED / "relserve.toml").read_text()
    assert SHIPPED_FILE in spec
    return spec.replace(SHIPPED_FILE, file).replace("[transactions]\n", f"[transactions]\n{extra}", 1)


def write_zipped_workbook(path: Path, member: str, sheets: dict[str, pa.Table | None]) -> Path:
    """A zip at ``path`` holding one workbook ``member``, a sheet per entry of ``sheets`` in order:
    a table's rows under its header, or (``None``) one line of notes (the UCI download's shape)."""
    import zipfile

    import openpyxl

    book = openpyxl.Workbook()
    for k, (title, table) in enumerate(sheets.items()):
        sheet = book.active if k == 0 else book.create_sheet()
        sheet.title = title
        if table is None:
            sheet.append(["not this sheet"])
            continue
        sheet.append(table.column_names)
        for row in zip(*(table[c].to_pylist() for c in table.column_names), strict=True):
            sheet.append(list(row))
    workbook = path.with_name(f".{member}")
    book.save(workbook)
    with zipfile.ZipFile(path, "w") as archive:
        archive.write(workbook, member)
    workbook.unlink()
    return path
