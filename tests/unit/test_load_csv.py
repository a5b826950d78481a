"""The CSV loader on small hand-written files: typed round trip, ordering, and every error message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from models.schema import ARTICLE_COLUMNS, CUSTOMER_COLUMNS, TRANSACTION_COLUMNS, day_number
from training.data import common as csv_common
from training.data import lines as csv_lines
from training.data.load import DataError, UnknownReferenceWarning, load_tables

C1, C2, C3 = (f"{n:064x}" for n in (0xBEEF, 0x00AA, 0xF00D))  # file order is not id order
A1, A2 = "0108775015", "0200000001"
ARTICLE_FEATURES = ",".join(["5"] * (len(ARTICLE_COLUMNS) - 4))  # product_type_no .. garment_group_name

CUSTOMERS = [
    f"{C1},1.0,1.0,ACTIVE,Regularly,30,{'a' * 64}",
    f"{C2},,,,None,,",  # every optional field empty; "None" is a value, not a missing field
    f"{C3},,1.0,PRE-CREATE,NONE,50,{'b' * 64}",
]
ARTICLES = [
    f'{A2},200000,Top,{ARTICLE_FEATURES},"Soft top, with a comma"',
    f"{A1},108775,Strap top,{ARTICLE_FEATURES},",
]
TRANSACTIONS = [
    f"2020-09-20,{C3},{A1},0.0508474576271186,2",
    f"2020-09-21,{C1},{A2},0.0338813559322034,1",
    f"2020-09-22,{C3},{A2},0.0169322033898305,2",
]


def write_dataset(
    directory: Path,
    customers: list[str] = CUSTOMERS,
    articles: list[str] = ARTICLES,
    transactions: list[str] = TRANSACTIONS,
) -> Path:
    for name, header, rows in (
        ("customers.csv", CUSTOMER_COLUMNS, customers),
        ("articles.csv", ARTICLE_COLUMNS, articles),
        ("transactions_train.csv", TRANSACTION_COLUMNS, transactions),
    ):
        (directory / name).write_text("\n".join([",".join(header), *rows]) + "\n")
    return directory


def load(directory: Path, **kwargs: bool):
    return load_tables(directory, progress=False, **kwargs)


def test_typed_round_trip(tmp_path: Path) -> None:
    tables = load(write_dataset(tmp_path))
    customers, articles, tx = tables.customers, tables.articles, tables.transactions
    assert customers.ids.dtype == np.dtype("S64") and articles.ids.dtype == np.dtype("S10")
    assert customers.ids.tolist() == sorted(c.encode() for c in (C1, C2, C3))
    assert articles.ids.tolist() == [A1.encode(), A2.encode()]  # leading zero kept
    assert customers.lookup([C1, C2, C3]).tolist() == [1, 0, 2]

    assert customers.ids[tx.customer].tolist() == [C3.encode(), C1.encode(), C3.encode()]
    assert articles.ids[tx.article].tolist() == [A1.encode(), A2.encode(), A2.encode()]
    assert tx.day.dtype == np.int32 and tx.day.tolist() == [day_number("2020-09-20") + k for k in range(3)]
    assert tx.price.dtype == np.float32
    np.testing.assert_allclose(tx.price, [0.0508474576271186, 0.0338813559322034, 0.0169322033898305])
    assert tx.customer.dtype == np.int64 and tx.article.dtype == np.int64


def test_categorical_codes_and_missing_fields(tmp_path: Path) -> None:
    customers = load(write_dataset(tmp_path)).customers
    assert customers.categorical_names == ("FN", "Active", "club_member_status", "fashion_news_frequency")
    assert customers.categorical.dtype == np.int64
    # Rows in id order C2, C1, C3; codes follow the sorted values, 0 = empty field.
    assert customers.categorical.tolist() == [[0, 0, 0, 2], [1, 1, 1, 3], [0, 1, 2, 1]]
    assert customers.cardinalities == (1, 1, 2, 3)


def test_age_standardised_with_missing_flag(tmp_path: Path) -> None:
    customers = load(write_dataset(tmp_path)).customers
    assert customers.numeric_names == ("age", "age_missing")
    assert customers.numeric.dtype == np.float32 and customers.numeric.shape == (3, 2)
    np.testing.assert_allclose(customers.numeric, [[0.0, 1.0], [-1.0, 0.0], [1.0, 0.0]])


def test_article_features(tmp_path: Path) -> None:
    articles = load(write_dataset(tmp_path)).articles
    assert articles.categorical.shape == (2, 11) and (articles.categorical == 1).all()
    assert articles.numeric.shape == (2, 0) and articles.numeric_names == ()


@pytest.mark.parametrize("name", ["customers.csv", "articles.csv", "transactions_train.csv"])
def test_missing_file(tmp_path: Path, name: str) -> None:
    (write_dataset(tmp_path) / name).unlink()
    with pytest.raises(DataError, match=f"^{name}: file not found"):
        load(tmp_path)


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"^customers\.csv: directory does not exist"):
        load(tmp_path / "nowhere")


def test_missing_column_named_with_found_columns(tmp_path: Path) -> None:
    write_dataset(tmp_path)
    (tmp_path / "transactions_train.csv").write_text("t_dat,customer,article_id,price\n2020-01-01,x,y,0.1\n")
    with pytest.raises(DataError) as err:
        load(tmp_path)
    assert str(err.value) == (
        "transactions_train.csv: missing column customer_id; "
        "found columns: t_dat, customer, article_id, price"
    )


@pytest.mark.parametrize("text", ["", ",".join(CUSTOMER_COLUMNS) + "\n"], ids=["empty", "header-only"])
def test_empty_file(tmp_path: Path, text: str) -> None:
    (write_dataset(tmp_path) / "customers.csv").write_text(text)
    with pytest.raises(DataError, match=r"^customers.csv: (file is empty|no data rows)"):
        load(tmp_path)


def test_header_only_transactions(tmp_path: Path) -> None:
    write_dataset(tmp_path, transactions=[])
    with pytest.raises(DataError, match=r"^transactions_train.csv: no data rows \(only a header\)$"):
        load(tmp_path)


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (
            f"2020-13-01,{C1},{A1},0.1,1",
            "line 3: cannot parse t_dat value '2020-13-01' as a date (YYYY-MM-DD)",
        ),
        (f"2020-09-21,{C1},{A1},0,1x,1", "line 3 has 6 fields, expected 5: "),
        (f"2020-09-21,{C1},{A1},cheap,1", "line 3: cannot parse price value 'cheap' as a number"),
        (f"2020-09-21,{C1},{A1},,1", "line 3: empty price"),
        (f",{C1},{A1},0.1,1", "line 3: empty t_dat"),
    ],
    ids=["bad-date", "extra-field", "bad-price", "empty-price", "empty-date"],
)
def test_bad_transaction_row(tmp_path: Path, row: str, expected: str) -> None:
    write_dataset(tmp_path, transactions=[TRANSACTIONS[0], row, TRANSACTIONS[1]])
    with pytest.raises(DataError) as err:
        load(tmp_path)
    assert str(err.value).startswith(f"transactions_train.csv: {expected}")


def test_bad_age_names_line_and_value(tmp_path: Path) -> None:
    write_dataset(tmp_path, customers=[CUSTOMERS[0], f"{C2},,,,,forty,"])
    with pytest.raises(DataError) as err:
        load(tmp_path)
    assert str(err.value) == "customers.csv: line 3: cannot parse age value 'forty' as a number"


def test_duplicate_id(tmp_path: Path) -> None:
    write_dataset(tmp_path, customers=[*CUSTOMERS, CUSTOMERS[1]])
    with pytest.raises(DataError) as err:
        load(tmp_path)
    assert str(err.value) == (
        f"customers.csv: 1 customer_id value occurs more than once (first: '{C2}' at lines 3 and 5)"
    )


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (
            [ARTICLES[0], f"10877501500,1,x,{ARTICLE_FEATURES},"],
            "line 3: article_id '10877501500' is 11 bytes, longer than 10",
        ),
        ([ARTICLES[0], f",1,x,{ARTICLE_FEATURES},"], "line 3: empty article_id"),
    ],
    ids=["too-long", "empty"],
)
def test_bad_article_id(tmp_path: Path, rows: list[str], expected: str) -> None:
    write_dataset(tmp_path, articles=rows)
    with pytest.raises(DataError) as err:
        load(tmp_path)
    assert str(err.value).startswith(f"articles.csv: {expected}")


def test_unknown_references_counted_and_raised(tmp_path: Path) -> None:
    stranger, lost = "f" * 64, "0999999999"
    rows = [*TRANSACTIONS, f"2020-09-22,{stranger},{A1},0.1,1", f"2020-09-22,{stranger},{lost},0.1,1"]
    write_dataset(tmp_path, transactions=rows)
    with pytest.raises(DataError) as err:
        load(tmp_path)
    assert str(err.value) == (
        f"transactions_train.csv: 2 rows reference an unknown customer_id (first at line 5: '{stranger}'); "
        f"1 row references an unknown article_id (first at line 6: '{lost}')"
    )


def test_not_strict_drops_unknown_rows_with_a_warning(tmp_path: Path) -> None:
    rows = [TRANSACTIONS[0], f"2020-09-22,{'f' * 64},{A1},0.1,1", *TRANSACTIONS[1:]]
    write_dataset(tmp_path, transactions=rows)
    with pytest.warns(UnknownReferenceWarning, match="1 row references an unknown customer_id") as record:
        tables = load(tmp_path, strict=False)
    refs = record[0].message.references
    assert (refs.customer.count, refs.article.count, refs.rows_dropped) == (1, 0, 1)
    assert refs.customer.first_line == 3
    tx = tables.transactions
    assert tables.customers.ids[tx.customer].tolist() == [C3.encode(), C1.encode(), C3.encode()]
    assert tx.day.tolist() == [day_number("2020-09-20") + k for k in range(3)]


def test_lines_counted_across_batches_and_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many tiny blocks mapped in several groups: indices and line numbers stay right."""
    monkeypatch.setattr(csv_common, "BLOCK_SIZE", 512)
    monkeypatch.setattr(csv_lines, "GROUP_ROWS", 7)
    rows = [TRANSACTIONS[k % 3] for k in range(100)]
    write_dataset(tmp_path, transactions=rows)
    tx = load(tmp_path).transactions
    assert len(tx) == 100 and tx.customer.tolist() == [[2, 1, 2][k % 3] for k in range(100)]

    rows[61] = f"2020-09-22,{C1},0999999999,0.1,1"
    rows[83] = f"2020-09-22,{C1},{A1},0.1.2,1"
    write_dataset(tmp_path, transactions=rows)
    with pytest.raises(DataError, match=r"^transactions_train\.csv: line 85: cannot parse price value '0\.1"):
        load(tmp_path)
    rows[83] = TRANSACTIONS[0]
    write_dataset(tmp_path, transactions=rows)
    with pytest.raises(DataError, match=r"1 row references an unknown article_id \(first at line 63: "):
        load(tmp_path)


def test_generator_output_loads(tiny_csv_dir: Path) -> None:
    tables = load(tiny_csv_dir)
    for table in (tables.customers, tables.articles):
        assert len(table) > 0 and (table.ids[1:] > table.ids[:-1]).all()
        assert table.categorical.min() >= 0
        assert (table.categorical.max(axis=0, initial=0) <= np.asarray(table.cardinalities, int)).all()
        assert np.isfinite(table.numeric).all()
    assert {len(i) for i in tables.articles.ids} == {10}
    tx = tables.transactions
    assert len(tx) > 0
    assert tx.customer.min() >= 0 and tx.customer.max() < len(tables.customers)
    assert tx.article.min() >= 0 and tx.article.max() < len(tables.articles)
    assert (tx.price > 0).all() and tx.day.dtype == np.int32
