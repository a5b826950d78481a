"""The CSV loader on gzipped files: ``X.csv.gz`` reads like ``X.csv`` and errors still name the file."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from test_load_csv import C1, TRANSACTIONS, load, write_dataset

from training.data.load import DataError

NAMES = ("customers.csv", "articles.csv", "transactions_train.csv")


def gzip_files(directory: Path, names: tuple[str, ...] = NAMES) -> Path:
    """Replace each ``name`` in ``directory`` by ``name.gz`` with the same bytes compressed."""
    for name in names:
        plain = directory / name
        (directory / f"{name}.gz").write_bytes(gzip.compress(plain.read_bytes()))
        plain.unlink()
    return directory


@pytest.mark.parametrize("names", [NAMES, ("transactions_train.csv",)], ids=["all", "transactions-only"])
def test_gzipped_loads_like_plain(tmp_path: Path, names: tuple[str, ...]) -> None:
    plain_dir, zipped_dir = tmp_path / "plain", tmp_path / "zipped"
    plain_dir.mkdir()
    zipped_dir.mkdir()
    plain = load(write_dataset(plain_dir))
    zipped = load(gzip_files(write_dataset(zipped_dir), names))
    for a, b in zip((plain.customers, plain.articles), (zipped.customers, zipped.articles), strict=True):
        np.testing.assert_array_equal(a.ids, b.ids)
        np.testing.assert_array_equal(a.categorical, b.categorical)
        np.testing.assert_array_equal(a.numeric, b.numeric)
    for col in ("customer", "article", "day", "price"):
        np.testing.assert_array_equal(getattr(plain.transactions, col), getattr(zipped.transactions, col))


def test_plain_file_preferred_over_gz(tmp_path: Path) -> None:
    write_dataset(tmp_path)
    (tmp_path / "customers.csv.gz").write_bytes(b"not gzip at all")
    assert len(load(tmp_path).customers.ids) == 3


def test_gz_value_error_names_the_gz_file_and_line(tmp_path: Path) -> None:
    gzip_files(write_dataset(tmp_path, transactions=[TRANSACTIONS[0], f"2020-09-21,{C1},0108775015,cheap,1"]))
    with pytest.raises(DataError) as err:
        load(tmp_path)
    assert str(err.value) == "transactions_train.csv.gz: line 3: cannot parse price value 'cheap' as a number"


def test_gz_malformed_row_names_the_gz_file_and_line(tmp_path: Path) -> None:
    gzip_files(write_dataset(tmp_path, transactions=[TRANSACTIONS[0], f"2020-09-21,{C1},0108775015,0,1x,1"]))
    with pytest.raises(DataError) as err:
        load(tmp_path)
    assert str(err.value).startswith("transactions_train.csv.gz: line 3 has 6 fields, expected 5: ")


def test_corrupt_gz_names_the_file(tmp_path: Path) -> None:
    write_dataset(tmp_path)
    (tmp_path / "articles.csv").unlink()
    (tmp_path / "articles.csv.gz").write_bytes(b"plain text, not gzip\n")
    with pytest.raises(DataError) as err:
        load(tmp_path)
    assert str(err.value).startswith("articles.csv.gz: not a readable gzip file")


def test_missing_file_names_both_forms(tmp_path: Path) -> None:
    write_dataset(tmp_path)
    (tmp_path / "articles.csv").unlink()
    with pytest.raises(DataError) as err:
        load(tmp_path)
    assert str(err.value).startswith("articles.csv: file not found")
    assert "articles.csv.gz" in str(err.value)


def test_real_data_in_repository_loads_as_is() -> None:
    """The shipped real dataset: outlier prices, non-product codes and featureless customers are data."""
    real = Path(__file__).resolve().parents[2] / "data" / "real" / "online-retail-2010"
    tables = load(real)
    tx = tables.transactions
    assert (len(tables.customers.ids), len(tables.articles.ids), len(tx.day)) == (4266, 4009, 393160)
    assert tx.price.max() > 100 * np.median(tx.price)  # postage and bank charges, far above the rest
    assert np.bincount(tx.customer).max() > 1000  # wholesale customers with huge histories
