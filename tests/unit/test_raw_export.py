"""The shipped Online Retail II spec reads another export of the same shop with only its file name
changed: whichever way the export types its columns, the cleaned lines and ids are the same."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest
from raw_export import SHIPPED, ExportStyle, export_table, write_export

from models.schema import day_number
from models.store.tables import RelTables
from training.data.load import load_tables
from training.data.spec_file import read_spec

STYLES = {
    "csv, integer customers, text dates": ExportStyle("csv"),
    "parquet, float customers with NaN": ExportStyle(float_customers=True),
    "csv, float customers with nan written out": ExportStyle("csv", float_customers=True),
    "parquet, timestamp dates": ExportStyle(timestamp_dates=True),
    "parquet, float customers, timestamp dates": ExportStyle(float_customers=True, timestamp_dates=True),
}


def decoded(ids: np.ndarray) -> list[str]:
    return [bytes(i).decode() for i in ids]


@pytest.fixture(scope="module")
def reference(tiny_csv_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> RelTables:
    """The export as Parquet with integer customers and text dates (the shipped file's types)."""
    return load_tables(write_export(tiny_csv_dir, tmp_path_factory.mktemp("reference")), progress=False)


def test_the_shipped_spec_cleans_the_export_as_a_data_scientist_would(tiny_csv_dir: Path,
                                                                      reference: RelTables) -> None:
    raw = export_table(tiny_csv_dir)
    kept = raw.filter(pc.and_(pc.and_(pc.is_valid(raw["Customer ID"]), pc.greater(raw["Price"], 0)),
                              pc.invert(pc.starts_with(raw["Invoice"], "C"))))
    assert len(raw) > len(kept) + 100  # cancellations, guest lines and free samples were there
    tx = reference.transactions
    assert len(tx) == len(kept)
    assert decoded(reference.customers.ids[tx.customer]) == [str(c) for c in kept["Customer ID"].to_pylist()]
    assert decoded(reference.articles.ids[tx.article]) == kept["StockCode"].to_pylist()
    assert any(code.endswith("A") for code in decoded(reference.articles.ids))  # letters kept
    expected_value = np.array(kept["Price"].to_pylist()) * np.array(kept["Quantity"].to_pylist())
    np.testing.assert_allclose(tx.price, expected_value, rtol=1e-6)  # value = Price x Quantity
    assert tx.day.tolist() == [day_number(d[:10]) for d in kept["InvoiceDate"].to_pylist()]
    assert reference.customers.categorical_names == ("Country",)


@pytest.mark.parametrize("style", STYLES.values(), ids=STYLES.keys())
def test_every_typing_of_the_same_columns_reads_the_same(tiny_csv_dir: Path, tmp_path: Path,
                                                         reference: RelTables, style: ExportStyle) -> None:
    other = load_tables(write_export(tiny_csv_dir, tmp_path, style=style), progress=False)
    for name in ("customers", "articles"):
        a, b = getattr(reference, name), getattr(other, name)
        np.testing.assert_array_equal(a.ids, b.ids, err_msg=name)
        np.testing.assert_array_equal(a.categorical, b.categorical, err_msg=name)
    for field in ("customer", "article", "day", "price"):
        np.testing.assert_array_equal(getattr(reference.transactions, field),
                                      getattr(other.transactions, field), err_msg=field)


def test_the_shipped_spec_reads_the_shipped_file() -> None:
    spec = read_spec(SHIPPED / "relserve.toml")
    assert (SHIPPED / spec.transactions.file).is_file()
    assert (spec.transactions.price, spec.transactions.quantity) == ("Price", "Quantity")
    assert spec.customers.derived and spec.articles.derived
