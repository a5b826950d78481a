"""Cut a small, dense slice out of an H&M-layout dataset: the most active customers of the last weeks.

Used by the CI test that trains on real data in minutes: keep the transactions of the last
``weeks`` weeks, then only those of the ``customers`` customers with the most rows there (ties to
the smaller id), and the customer and article rows they reference. Columns are copied as text,
so the slice is the same data, only less of it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from models.schema import ARTICLES_CSV, CUSTOMERS_CSV, TRANSACTIONS_CSV
from training.data.common import data_file, read_header


def _read_text(path: Path) -> pa.Table:
    """Every column of ``path`` as text, empty fields kept as empty strings."""
    header = read_header(path)
    options = pa_csv.ConvertOptions(column_types=dict.fromkeys(header, pa.string()),
                                    strings_can_be_null=False)
    return pa_csv.read_csv(path, convert_options=options)


def slice_dataset(source: Path, out: Path, customers: int, weeks: int) -> dict[str, int]:
    """Write the slice of ``source`` (``X.csv`` or ``X.csv.gz``) as plain CSV files into ``out``.

    Args:
        source: directory of the three files.
        out: directory to write ``customers.csv``, ``articles.csv``, ``transactions_train.csv`` into.
        customers: how many of the most active customers to keep.
        weeks: how many weeks, counted back from the last transaction day, to keep.

    Returns:
        Rows written per file name.
    """
    tx = _read_text(data_file(source, TRANSACTIONS_CSV))
    day = pc.strptime(tx["t_dat"], format="%Y-%m-%d", unit="s").cast(pa.date32()).to_numpy().astype(np.int64)
    recent = day > day.max() - 7 * weeks
    tx = tx.filter(pa.array(recent))
    ids, counts = np.unique(tx["customer_id"].to_numpy(zero_copy_only=False), return_counts=True)
    keep = ids[np.lexsort((ids, -counts))[:customers]]
    tx = tx.filter(pc.is_in(tx["customer_id"], pa.array(keep)))
    tables = {
        CUSTOMERS_CSV: _read_text(data_file(source, CUSTOMERS_CSV)),
        ARTICLES_CSV: _read_text(data_file(source, ARTICLES_CSV)),
    }
    tables[CUSTOMERS_CSV] = tables[CUSTOMERS_CSV].filter(pc.is_in(tables[CUSTOMERS_CSV]["customer_id"],
                                                                   tx["customer_id"].unique()))
    tables[ARTICLES_CSV] = tables[ARTICLES_CSV].filter(pc.is_in(tables[ARTICLES_CSV]["article_id"],
                                                                 tx["article_id"].unique()))
    tables[TRANSACTIONS_CSV] = tx
    out.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        pa_csv.write_csv(table, out / name, pa_csv.WriteOptions(quoting_style="needed"))
    return {name: table.num_rows for name, table in tables.items()}
