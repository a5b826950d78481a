"""Text files as shops export them: numbers with a currency sign or code, thousands grouped, a decimal
comma; quoted fields that span lines."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from training.data import common
from training.data.convert import plain_numbers
from training.data.load import DataError, load_tables

SPEC = """[transactions]
file = "{file}"
customer = "Customer ID"
article = "StockCode"
time = "InvoiceDate"
price = "Price"
filter = ["Price > 0"]
{extra}
"""
ROWS = 3000
PRICES = [1234.5, 3.0, 7.0, 12.0, 0.99]


def written(i: int) -> str:
    """Row ``i``'s price as an export might write it (its value is ``PRICES[i % 5]``)."""
    return ["$1,234.50", "£3", " 7 ", "12.00 USD", "0.99"][i % 5]


def export(directory: Path, price: list[str], extra: str = "", delimiter: str = ",",
           customers: str | None = None) -> Path:
    directory.mkdir()
    rows = "".join(f"c{i % 11}{delimiter}A{i % 7}{delimiter}2010-12-0{1 + i % 3}{delimiter}\"{p}\"\n"
                   for i, p in enumerate(price))
    (directory / "orders.csv").write_text(f"Customer ID{delimiter}StockCode{delimiter}InvoiceDate"
                                          f"{delimiter}Price\n" + rows)
    if customers is not None:
        (directory / "customers.csv").write_text(customers)
        extra += ('\n[customers]\nfrom = "transactions"\nfile = "customers.csv"\nid = "id"\n'
                  'features = { spend = "numeric" }\n')
    (directory / "relserve.toml").write_text(SPEC.format(file="orders.csv", extra=extra))
    return directory


def load(directory: Path):
    return load_tables(directory, progress=False)


def assert_same(expected, loaded) -> None:
    for name in ("customer", "article", "day", "price"):
        np.testing.assert_array_equal(getattr(expected.transactions, name),
                                      getattr(loaded.transactions, name))
    np.testing.assert_array_equal(expected.customers.numeric, loaded.customers.numeric)


def test_plain_numbers_reads_each_form() -> None:
    values = pa.array(["$1,234.50", "1,234.50 USD", "-£3", "$-3", "EUR 12", " 7 ", "1'234.5", "0,250",
                       "12,50", "x", None])
    assert plain_numbers(values, ".").to_pylist() == ["1234.50", "1234.50", "-3", "-3", "12", "7", "1234.5",
                                                      "0,250", "12,50", "x", None]
    values = pa.array(["1.234,50 €", "1\u00a0234,5", "12,50", "-3 EUR", "0,250", "1,234.50", "x"])
    assert plain_numbers(values, ",").to_pylist() == ["1234.50", "1234.5", "12.50", "-3", "0.250", "1,234.50",
                                                      "x"]


def test_currency_and_grouping_after_the_first_blocks(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain numbers for most of the file, then the export's own forms: the reader takes the blocks it
    can and reads the rest as text, to what a plain file gives (a filter on the price included; a
    missing number written NULL or N/A is empty)."""
    monkeypatch.setattr(common, "BLOCK_SIZE", 1 << 12)  # many blocks before the first formatted price
    plain = [repr(PRICES[i % 5]) for i in range(ROWS)]
    formatted = plain[:-500] + [written(i) for i in range(ROWS - 500, ROWS)] + ["-$3.00", "NULL"]
    spend = "id,spend\nc1,\"1,234.5\"\nc2,$17.50\nc3,0.5\nc4,N/A\n"
    customers = "id,spend\nc1,1234.5\nc2,17.5\nc3,0.5\nc4,\n"
    expected = load(export(tmp_path / "plain", [*plain, "-3", ""], customers=customers))
    loaded = load(export(tmp_path / "formatted", formatted, customers=spend))
    assert_same(expected, loaded)
    assert loaded.transactions.price[-5:].tolist() == pytest.approx(PRICES)


def test_a_decimal_comma_with_currency_and_spaces(tmp_path: Path) -> None:
    plain = [repr(PRICES[i % 5]) for i in range(30)]
    comma = [["1\u00a0234,50 €", "3 €", "7", "EUR 12,00", "0,99"][i % 5] for i in range(30)]
    expected = load(export(tmp_path / "plain", plain))
    loaded = load(export(tmp_path / "comma", comma, extra='decimal = ","', delimiter=";"))
    assert_same(expected, loaded)


def test_numbers_as_text_in_parquet(tmp_path: Path) -> None:
    expected = load(export(tmp_path / "plain", [repr(PRICES[i % 5]) for i in range(30)]))
    (tmp_path / "parquet").mkdir()
    table = pa.table({"Customer ID": [f"c{i % 11}" for i in range(30)],
                      "StockCode": [f"A{i % 7}" for i in range(30)],
                      "InvoiceDate": [f"2010-12-0{1 + i % 3}" for i in range(30)],
                      "Price": [written(i) for i in range(30)]})
    pq.write_table(table, tmp_path / "parquet" / "orders.parquet")
    (tmp_path / "parquet" / "relserve.toml").write_text(SPEC.format(file="orders.parquet", extra=""))
    assert_same(expected, load(tmp_path / "parquet"))


def test_a_value_no_form_explains_is_named_with_its_line(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "BLOCK_SIZE", 1 << 12)
    price = [repr(PRICES[i % 5]) for i in range(ROWS)] + ["$3.50", "free"]
    with pytest.raises(DataError, match=rf"^orders.csv: line {ROWS + 3}: cannot parse Price value 'free' "
                                        "as a number$"):
        load(export(tmp_path / "bad", price))
    with pytest.raises(DataError, match=r"^orders.csv: line 3: cannot parse Price value '12,50 €' as a "
                                        r"number \(a decimal comma\? set decimal = "):
        load(export(tmp_path / "comma", ["1.5", "12,50 €"]))


def test_quoted_fields_that_span_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A products file whose descriptions hold line breaks, past the reader's first block."""
    monkeypatch.setattr(common, "BLOCK_SIZE", 1 << 12)
    products = "".join(f'A{i},"Mug {i}\nwith a handle, blue",kitchen{i % 3}\n' for i in range(2000))
    directory = export(tmp_path / "lines", [repr(PRICES[i % 5]) for i in range(ROWS)])
    (directory / "products.csv").write_text("id,description,category\n" + products)
    spec = (directory / "relserve.toml").read_text()
    (directory / "relserve.toml").write_text(spec + '\n[articles]\nfile = "products.csv"\nid = "id"\n'
                                             'features = ["category", "description"]\n')
    articles = load(directory).articles
    assert len(articles.ids) == 2000 and articles.cardinalities == (3,)
    assert np.bincount(articles.categorical[:, 0]).tolist() == [0, 667, 667, 666]
    # a message names the line the row starts on, counting the breaks inside quotes before it
    (directory / "products.csv").write_text("id,description,category\n" + products + ',"Mug\n",kitchen0\n')
    with pytest.raises(DataError, match=r"^products\.csv: line 4002: empty id"):
        load(directory)


def test_a_decimal_comma_file_encodes_for_new_nodes_as_it_loads(tmp_path: Path) -> None:
    """encodings.json (how served new customers are encoded) reads a decimal-comma customers file's
    numbers as the loader did: the same mean, not a column skipped."""
    from training.fit.dataset import dataset_spec
    from training.snapshot_encodings import table_encodings

    directory = export(tmp_path / "comma", ["1,5", "2", "3,25"], extra='decimal = ","', delimiter=";")
    (directory / "customers.csv").write_text("id;spend;tier\nc0;2.000,25;1,5\nc1;17,5;2\n")
    spec_text = (directory / "relserve.toml").read_text()
    (directory / "relserve.toml").write_text(spec_text + '\n[customers]\nfrom = "transactions"\nfile = '
                                             '"customers.csv"\nid = "id"\ndecimal = ","\nfeatures = { spend '
                                             '= "numeric", tier = "categorical" }\n')
    tables = load(directory)
    encodings = table_encodings(directory, dataset_spec(directory, None).customers, tables.customers)
    assert encodings["numeric"]["spend"]["mean"] == pytest.approx((2000.25 + 17.5) / 2)
    assert encodings["categorical"]["tier"] == ["1.5", "2"]


@pytest.mark.parametrize("scan_bytes", [7, 1 << 24])
def test_data_lines_count_breaks_inside_quotes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               scan_bytes: int) -> None:
    """Quotes doubled inside a quoted field, CRLF line ends, gzip, and reads that end mid-field."""
    monkeypatch.setattr(common, "SCAN_BYTES", scan_bytes)
    rows = ['a,"one\r\nline ""two""\r\n",x', 'b,plain,y', 'c,"say ""hi""",z', 'd,"\n\n",w', "e,last,v"]
    text = "id,text,code\r\n" + "\r\n".join(rows) + "\r\n"
    plain = tmp_path / "t.csv"
    plain.write_bytes(text.encode())
    zipped = tmp_path / "t.csv.gz"
    zipped.write_bytes(gzip.compress(text.encode()))
    for path in (plain, zipped):
        assert [common.data_line(path, r) for r in range(5)] == [2, 5, 6, 7, 10]
