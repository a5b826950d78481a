"""A flat order-lines table equals the same data given as three tables; derived and inferred features."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from test_spec_load import decoded, load, orders, write

from models.schema import ARTICLES_CSV, CUSTOMERS_CSV, TRANSACTIONS_CSV
from models.store.tables import RelTables
from training.bench.flat_table import read_text, write_flat
from training.data import derive, lines, sources
from training.data.common import data_file
from training.data.load import load_tables

REAL = Path(__file__).resolve().parents[2] / "data" / "real" / "online-retail-2010"


def referenced_only(source: Path, out: Path) -> Path:
    """The H&M-layout ``source`` without customers and articles that no transaction names (a flat
    table cannot hold them), as plain CSV files in ``out``."""
    out.mkdir()
    lines = read_text(data_file(source, TRANSACTIONS_CSV))
    for name, key in ((CUSTOMERS_CSV, "customer_id"), (ARTICLES_CSV, "article_id")):
        table = read_text(data_file(source, name))
        table = table.filter(pc.is_in(table[key], value_set=lines[key].unique()))
        pa_csv.write_csv(table, out / name, pa_csv.WriteOptions(quoting_style="needed"))
    pa_csv.write_csv(lines, out / TRANSACTIONS_CSV, pa_csv.WriteOptions(quoting_style="needed"))
    return out


def assert_equal_tables(a: RelTables, b: RelTables) -> None:
    for name in ("customers", "articles"):
        x, y = getattr(a, name), getattr(b, name)
        for field in ("ids", "categorical", "numeric"):
            assert getattr(x, field).dtype == getattr(y, field).dtype, (name, field)
            np.testing.assert_array_equal(getattr(x, field), getattr(y, field), err_msg=f"{name}.{field}")
        assert (x.categorical_names, x.numeric_names, x.cardinalities) == (
            y.categorical_names, y.numeric_names, y.cardinalities)
    for field in ("customer", "article", "day", "price"):
        np.testing.assert_array_equal(getattr(a.transactions, field), getattr(b.transactions, field))


def test_the_real_data_as_one_flat_parquet_table(tmp_path: Path) -> None:
    """Online Retail II (converted copy): every customer and article has transactions."""
    flat = load(write_flat(REAL, tmp_path / "flat", "parquet"))
    assert_equal_tables(load(REAL), flat)


@pytest.mark.parametrize("file_format", ["csv", "csv.gz", "xlsx"])
def test_the_synthetic_data_as_one_flat_csv(small_csv_dir: Path, tmp_path: Path, file_format: str) -> None:
    three = load(referenced_only(small_csv_dir, tmp_path / "three"))
    assert three.customers.numeric.any()  # ages present: the standardisation is compared too
    assert_equal_tables(three, load(write_flat(small_csv_dir, tmp_path / "flat", file_format)))


@pytest.mark.parametrize("small_groups", [False, True], ids=["one-group", "merged-groups"])
def test_a_derived_attribute_is_the_most_frequent_value_ties_first(tmp_path: Path, small_groups: bool,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    if small_groups:  # Parquet batches of 2 lines, each its own group, partial counts merged after each
        monkeypatch.setattr(sources, "PARQUET_BATCH_ROWS", 2)
        monkeypatch.setattr(lines, "GROUP_ROWS", 2)
        monkeypatch.setattr(derive, "COMPACT_ROWS", 1)
    table = pa.table({"Customer ID": ["a", "a", "a", "b", "b", "c"], "StockCode": ["x"] * 6,
                      "InvoiceDate": ["2010-12-01"] * 6, "Country": ["FR", "UK", "UK", "DE", "ES", None]})
    extra = '[customers]\nfrom = "transactions"\nfeatures = { Country = "categorical" }'
    customers = load(write(tmp_path, table, "parquet" if small_groups else "csv", spec_extra=extra)).customers
    assert decoded(customers.ids) == ["a", "b", "c"]
    # a -> UK (2 of its 3 lines), b -> DE (a tie with ES: seen first), c -> none; codes: DE 1, UK 2
    assert customers.categorical[:, 0].tolist() == [2, 1, 0] and customers.cardinalities == (2,)


def test_a_glob_of_parts_reads_like_one_file(tmp_path: Path) -> None:
    table = orders(Country=["UK", "FR", "UK"])
    extra = 'price = "Price"\n[customers]\nfrom = "transactions"\nfeatures = ["Country"]'
    whole = load(write(tmp_path / "whole", table, "parquet", extra))
    parts = write(tmp_path / "parts", table.slice(0, 2), "parquet", extra, name="part-0")
    pq.write_table(table.slice(2), parts / "part-1.parquet")
    (parts / "relserve.toml").write_text((parts / "relserve.toml").read_text().replace("part-0.parquet",
                                                                                         "part-*.parquet"))
    assert_equal_tables(whole, load(parts))


def test_node_tables_of_their_own_with_inferred_feature_types(tmp_path: Path, capsys) -> None:
    items = pa.table({
        "sku": ["85123A", "POST", "22423"],
        "size": [1, 2, 1],  # few distinct integers: categorical
        "weight": [0.5, 1.25, None],  # numbers: numeric
        "launched": ["2009-01-01", "2010-06-30 10:00:00", None],  # ISO times: timestamp (a day number)
        "description": ["WHITE HANGING HEART T-LIGHT HOLDER", "POSTAGE TO ANY COUNTRY OF EUROPE",
                        "REGENCY CAKESTAND 3 TIER"],  # long and distinct: free text, skipped
        "colour": ["white", "none", "white"],
    })
    pq.write_table(items, tmp_path / "items.parquet")
    extra = '[articles]\nfile = "items.parquet"\nid = "sku"\n'
    table = orders(StockCode=["85123A", "POST", "22423"])
    articles = load_tables(write(tmp_path, table, spec_extra=extra), progress=True).articles
    assert articles.categorical_names == ("size", "colour")
    assert articles.numeric_names == ("weight", "weight_missing", "launched", "launched_missing")
    assert decoded(articles.ids) == ["22423", "85123A", "POST"]
    assert articles.categorical.tolist() == [[1, 2], [1, 2], [2, 1]]
    assert articles.numeric[:, [1, 3]].tolist() == [[1, 1], [0, 0], [0, 0]]  # 22423: no weight, no launch
    assert articles.numeric[1, 2] < 0 < articles.numeric[2, 2]  # launched earlier, later (standardised days)
    note = capsys.readouterr().err
    assert "articles: description skipped, its values look like free text" in note
