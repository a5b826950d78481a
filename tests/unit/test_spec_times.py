"""Dates and times written as one number (``20101201``, ``20101201074500``), as some exports write them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from training.data.load import DataError, load_tables

SPEC = """[transactions]
file = "{file}"
customer = "customer"
article = "article"
time = "time"

[customers]
from = "transactions"
file = "people.csv"
id = "id"
features = {{ joined = "timestamp" }}
"""
ISO = ["2010-12-01", "2010-12-01 07:45:00", "2010-12-15 23:59:59", "2011-01-05 00:00:00"]


def dataset(directory: Path, times: list, joined: list[str], parquet: bool = False) -> Path:
    directory.mkdir()
    table = pa.table({"customer": ["c1", "c2", "c1", "c3"], "article": ["A", "B", "B", "A"], "time": times})
    if parquet:
        pq.write_table(table, directory / "orders.parquet")
    else:
        rows = "".join(f"{c},{a},{t}\n" for c, a, t in zip(*table.to_pydict().values(), strict=True))
        (directory / "orders.csv").write_text("customer,article,time\n" + rows)
    people = "".join(f"c{i + 1},{d}\n" for i, d in enumerate(joined))
    (directory / "people.csv").write_text("id,joined\n" + people)
    (directory / "relserve.toml").write_text(SPEC.format(file="orders.parquet" if parquet else "orders.csv"))
    return directory


def load(directory: Path):
    return load_tables(directory, progress=False)


@pytest.mark.parametrize("parquet", [False, True])
def test_dates_as_one_number_read_as_dates(tmp_path: Path, parquet: bool) -> None:
    expected = load(dataset(tmp_path / "iso", ISO, ["2009-03-15", "2010-01-31", ""]))
    days = [20101201, 20101201, 20101215, 20110105]
    for name, times in (("day", days), ("second", [20101201000000, 20101201074500, 20101215235959,
                                                   20110105000000])):
        loaded = load(dataset(tmp_path / name, times if parquet else [str(t) for t in times],
                              ["20090315", "20100131", ""], parquet))
        np.testing.assert_array_equal(expected.transactions.day, loaded.transactions.day)
        np.testing.assert_array_equal(expected.customers.numeric, loaded.customers.numeric)


def test_a_number_that_is_no_date_stays_an_epoch_time(tmp_path: Path) -> None:
    """20101301 has no month 13: the column is not dates, and as epoch seconds it falls in 1970."""
    with pytest.raises(DataError, match="time column time holds small numbers"):
        load(dataset(tmp_path / "bad", ["20101201", "20101301", "20101215", "20110105"], ["", "", ""]))
