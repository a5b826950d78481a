"""The slice of a dataset: the most active customers of the last weeks, every reference kept, in the
dataset's own files and spec."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from raw_export import ExportStyle, write_export
from test_load_csv import A1, A2, C1, C2, C3, load, write_dataset

from training.data.load import load_tables
from training.data.slice import main, slice_dataset


def test_slice_keeps_the_most_active_customers_of_recent_weeks(tmp_path: Path) -> None:
    rows = [
        f"2020-01-01,{C1},{A1},0.1,1",  # older than the 2 kept weeks
        f"2020-01-20,{C2},{A2},0.2,1",
        f"2020-01-21,{C2},{A2},0.2,2",
        f"2020-01-22,{C3},{A2},0.3,2",
        f"2020-01-23,{C1},{A1},0.4,1",
    ]
    (tmp_path / "src").mkdir()
    write_dataset(tmp_path / "src", transactions=rows)
    counts = slice_dataset(tmp_path / "src", tmp_path / "out", customers=2, weeks=2)
    tables = load(tmp_path / "out")
    # C2 has 2 recent rows; C1 and C3 one each, and the tie goes to the smaller id, C1 (...beef < ...f00d).
    assert {bytes(i).decode() for i in tables.customers.ids} == {C1, C2}
    assert {bytes(i).decode() for i in tables.articles.ids} == {A1, A2}
    assert counts["transactions_train.csv"] == len(tables.transactions.day)
    assert len(tables.transactions.day) == 3  # C1's old row is outside the two weeks


def test_a_raw_shop_export_is_sliced_in_its_own_file_and_spec(tiny_csv_dir: Path, tmp_path: Path) -> None:
    """A flat Parquet export (ids with letters, cancellations, guest lines) sliced through its spec:
    the same file name and format, the spec beside it, only the kept customers' cleaned lines."""
    source = write_export(tiny_csv_dir, tmp_path / "src")
    counts = slice_dataset(source, tmp_path / "out", customers=5, weeks=3)
    assert list(counts) == ["online_retail_II_2010_2011.parquet"]
    assert (tmp_path / "out" / "relserve.toml").read_text() == (source / "relserve.toml").read_text()
    full, part = load_tables(source, progress=False), load_tables(tmp_path / "out", progress=False)
    last = int(full.transactions.day.max())
    recent = full.transactions.day > last - 21
    ids, lines = np.unique(full.customers.ids[full.transactions.customer[recent]], return_counts=True)
    top = ids[np.lexsort((ids, -lines))[:5]]
    assert sorted(part.customers.ids.tolist()) == sorted(top.tolist())
    assert len(part.transactions) == counts["online_retail_II_2010_2011.parquet"] == int(
        np.isin(full.customers.ids[full.transactions.customer], top)[recent].sum())
    raw = pq.read_table(tmp_path / "out" / "online_retail_II_2010_2011.parquet")
    assert raw.schema == pq.read_table(source / "online_retail_II_2010_2011.parquet").schema
    assert any(code[-1].isalpha() for code in raw["StockCode"].to_pylist())


def test_the_command_line_slices_and_says_what_it_wrote(tiny_csv_dir: Path, tmp_path: Path, capsys) -> None:
    source = write_export(tiny_csv_dir, tmp_path / "src", style=ExportStyle("csv"))
    out = tmp_path / "out"
    assert main(["--data", str(source), "--out", str(out), "--customers", "3", "--weeks", "2"]) == 0
    assert "online_retail_II_2010_2011.csv: " in capsys.readouterr().out
    assert len(load_tables(out, progress=False).customers.ids) == 3
    with pytest.raises(SystemExit) as exit_info:
        main(["--data", str(tmp_path / "missing"), "--out", str(tmp_path / "x")])
    assert exit_info.value.code == 1
    assert "transactions_train.csv: directory does not exist" in capsys.readouterr().err
