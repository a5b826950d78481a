"""The real-data slice: the most active customers of the last weeks, every reference kept."""

from __future__ import annotations

from pathlib import Path

from test_load_csv import A1, A2, C1, C2, C3, load, write_dataset

from training.data.slice import slice_dataset


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
