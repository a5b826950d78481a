"""Loading through a spec: ids of any shape, CSV / CSV.gz / Parquet alike, times, filters, values, errors."""

from __future__ import annotations

import gzip
import re
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

from models.schema import day_number
from training.data.load import DataError, load_tables
from training.data.slice import slice_dataset

SPEC = """[transactions]
file = "{file}"
customer = "Customer ID"
article = "StockCode"
time = "InvoiceDate"
{extra}
"""


def write(directory: Path, table: pa.Table, file_format: str = "csv", spec_extra: str = "",
          name: str = "orders") -> Path:
    """``table`` as ``directory/name.<file_format>`` with a relserve.toml deriving both node tables."""
    directory.mkdir(parents=True, exist_ok=True)
    file = f"{name}.{file_format}"
    if file_format == "parquet":
        pq.write_table(table, directory / file)
    else:
        pa_csv.write_csv(table, directory / "plain.csv")
        data = (directory / "plain.csv").read_bytes()
        (directory / "plain.csv").unlink()
        (directory / file).write_bytes(gzip.compress(data) if file_format == "csv.gz" else data)
    (directory / "relserve.toml").write_text(SPEC.format(file=file, extra=spec_extra))
    return directory


def orders(**columns: list) -> pa.Table:
    base = {"Customer ID": ["c1", "c2", "c1"], "StockCode": ["85123A", "POST", "85123A"],
            "InvoiceDate": ["2010-12-01 07:45:00", "2010-12-01 23:59:59", "2010-12-02 00:00:00"],
            "Price": [2.55, 18.0, 2.55], "Quantity": [6, 1, -6], "Invoice": ["489434", "489435", "C489436"]}
    return pa.table(base | columns)


def load(directory: Path, **kwargs):
    return load_tables(directory, progress=False, **kwargs)


def decoded(ids: np.ndarray) -> list[str]:
    return [bytes(i).decode() for i in ids]


@pytest.mark.parametrize("file_format", ["csv", "parquet"])
def test_integer_customer_ids_and_sku_article_ids(tmp_path: Path, file_format: str) -> None:
    table = orders(**{"Customer ID": [13085, 7, 13085], "StockCode": ["85123A", "0108775015", "85123A"]})
    tables = load(write(tmp_path, table, file_format))
    customers, articles, tx = tables.customers, tables.articles, tables.transactions
    assert decoded(customers.ids) == ["13085", "7"] and customers.ids.dtype == np.dtype("S5")
    assert decoded(articles.ids) == ["0108775015", "85123A"]  # leading zero and letters kept
    assert customers.lookup(["13085", "7", "1308"]).tolist() == [0, 1, -1]
    assert decoded(customers.ids[tx.customer]) == ["13085", "7", "13085"]
    assert decoded(articles.ids[tx.article]) == ["85123A", "0108775015", "85123A"]


def test_uuid_and_unicode_ids(tmp_path: Path) -> None:
    people = [str(uuid.UUID(int=k * 7919)) for k in (3, 1, 2)]
    skus = ["Tasse-ß", "茶碗", "mug"]
    tables = load(write(tmp_path, orders(**{"Customer ID": people, "StockCode": skus}), "parquet"))
    assert decoded(tables.customers.ids) == sorted(people) and tables.customers.ids.dtype == np.dtype("S36")
    assert tables.articles.lookup(skus).tolist() == [0, 2, 1]  # bytewise UTF-8 order: 'T' < 'm' < '茶'
    assert decoded(tables.articles.ids[tables.transactions.article]) == skus


def test_whole_floats_as_ids_are_integers(tmp_path: Path) -> None:
    """A pandas export of integer ids with gaps writes 13085.0: the id is 13085, in either format."""
    for file_format, ids in (("csv", ["13085.0", "7.0", "13085.0"]), ("parquet", [13085.0, 7.0, 13085.0])):
        tables = load(write(tmp_path / file_format, orders(**{"Customer ID": ids}), file_format))
        assert decoded(tables.customers.ids) == ["13085", "7"]


def test_csv_gzip_and_parquet_give_equal_tables(tmp_path: Path) -> None:
    extra = ('price = "Price"\nquantity = "Quantity"\nfilter = ["Quantity > 0"]\n'
             '[customers]\nfrom = "transactions"')
    table = orders(Country=["UK", "FR", "UK"])
    loaded = [load(write(tmp_path / f, table, f, extra + '\nfeatures = ["Country"]\n'))
              for f in ("csv", "csv.gz", "parquet")]
    for other in loaded[1:]:
        for name in ("customers", "articles"):
            a, b = getattr(loaded[0], name), getattr(other, name)
            for field in ("ids", "categorical", "numeric"):
                np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        for field in ("customer", "article", "day", "price"):
            expected = getattr(loaded[0].transactions, field)
            np.testing.assert_array_equal(expected, getattr(other.transactions, field))


@pytest.mark.parametrize(("delimiter", "name"),
                         [(";", "orders.csv"), ("\t", "orders.tsv"), ("|", "orders.txt.gz")])
def test_the_delimiter_is_read_off_the_header(tmp_path: Path, delimiter: str, name: str) -> None:
    """Semicolons (spreadsheets in many locales), tabs and bars read as commas do; a delimiter quoted
    inside a field stays in it."""
    extra = 'price = "Price"\n[customers]\nfrom = "transactions"\nfeatures = ["Country"]\n'
    table = orders(Country=["Korea, Republic of", "FR;BE", "Korea, Republic of"])
    expected = load(write(tmp_path / "comma", table, "csv", extra))
    directory = write(tmp_path / "other", table, "csv", extra)
    sink = pa.BufferOutputStream()
    pa_csv.write_csv(table, sink, pa_csv.WriteOptions(delimiter=delimiter))
    data = sink.getvalue().to_pybytes()
    (directory / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    if name != "orders.csv":
        (directory / "orders.csv").unlink()
    spec = (directory / "relserve.toml").read_text().replace('"orders.csv"', f'"{name}"')
    (directory / "relserve.toml").write_text(spec)
    loaded = load(directory)
    for field in ("customer", "article", "day", "price"):
        np.testing.assert_array_equal(getattr(expected.transactions, field),
                                      getattr(loaded.transactions, field))
    np.testing.assert_array_equal(expected.customers.categorical, loaded.customers.categorical)
    assert loaded.customers.cardinalities == (2,)  # "Korea, Republic of" and "FR;BE", each one value


@pytest.mark.parametrize(("times", "spec_extra"), [
    (["2010-12-01 07:45:00", "2010-12-01T23:59:59.123456", "2010-12-02"], ""),
    (["2010-12-01", "2010-12-01", "2010-12-02"], ""),
    (["1/12/2010 7:45", "01/12/2010 23:59", "2/12/2010 0:00"], 'time_format = "%d/%m/%Y %H:%M"'),
    (["1291189500", "1291247999", "1291248000"], ""),  # epoch seconds
    (["2010-12-01T07:45:00Z", "2010-12-02T01:59:59+02:00", "2010-12-01T22:00:00-02:00"], ""),  # UTC days
], ids=["iso-datetime", "iso-date", "format", "epoch", "zoned"])
def test_times_with_time_of_day_bucket_to_days(tmp_path: Path, times: list[str], spec_extra: str) -> None:
    day = load(write(tmp_path, orders(InvoiceDate=times), spec_extra=spec_extra)).transactions.day
    first = day_number("2010-12-01")
    assert day.dtype == np.int32 and day.tolist() == [first, first, first + 1]


def test_parquet_timestamps_and_dates_are_read_as_they_are(tmp_path: Path) -> None:
    times = ["2010-12-01T07:45", "2010-12-01T23:59", "2010-12-02T00:00"]
    stamps = pa.array(np.array(times, "datetime64[ms]"))
    for name, column in (("stamps", stamps), ("dates", stamps.cast(pa.date32()))):
        day = load(write(tmp_path / name, orders(InvoiceDate=column), "parquet")).transactions.day
        assert day.tolist() == [day_number("2010-12-01")] * 2 + [day_number("2010-12-02")]


def test_filters_drop_the_right_rows(tmp_path: Path) -> None:
    table = orders(**{"Customer ID": ["c1", None, "c1", "c2"], "StockCode": ["A", "B", "C", "D"],
                      "InvoiceDate": ["2010-12-01"] * 4, "Price": [1.0, 2.0, 3.0, 0.0],
                      "Quantity": [1, 1, -1, 2],
                      "Invoice": ["1", "2", "C3", "4"]})
    conditions = '"Customer ID != null", "Quantity > 0", "Price > 0", "Invoice !~ ^C"'
    tables = load(write(tmp_path, table, spec_extra=f'price = "Price"\nfilter = [{conditions}]'))
    assert decoded(tables.articles.ids) == ["A"] and tables.transactions.price.tolist() == [1.0]
    for conditions, kept in (("\"StockCode == 'D'\"", ["D"]),
                             ('"Quantity == 1", "Invoice ~ ^[0-9]+$"', ["A"]),
                             ('"StockCode ~ [CD]", "Price <= 2"', ["D"])):
        extra = f"filter = [{conditions}, \"Customer ID != null\"]"
        assert decoded(load(write(tmp_path / "more", table, spec_extra=extra)).articles.ids) == kept


@pytest.mark.parametrize(("spec_extra", "values"), [
    ('price = "Price"', [2.55, 18.0, 2.55]),
    ('price = "Price"\nquantity = "Quantity"', [2.55 * 6, 18.0, -2.55 * 6]),
    ('amount = "Price"', [2.55, 18.0, 2.55]),
    ("", [1.0, 1.0, 1.0]),
], ids=["price", "price-times-quantity", "amount", "count-only"])
def test_the_value_of_a_line(tmp_path: Path, spec_extra: str, values: list[float]) -> None:
    price = load(write(tmp_path, orders(), spec_extra=spec_extra)).transactions.price
    assert price.dtype == np.float32
    np.testing.assert_allclose(price, values, rtol=1e-6)


@pytest.mark.parametrize(("file_format", "column", "value", "expected"), [
    ("csv", "Customer ID", "x" * 129, "orders.csv: line 3: Customer ID 'xxxx"),
    ("csv", "InvoiceDate", "2010-13-45 10:00", "orders.csv: line 3: cannot parse InvoiceDate value "
                                               "'2010-13-45 10:00' as a date or date and time"),
    ("parquet", "Price", "cheap", "orders.parquet: row 2: cannot parse Price value 'cheap' as a number"),
    ("csv", "Customer ID", None, "orders.csv: line 3: empty Customer ID"),
], ids=["long-id", "bad-time", "parquet-bad-number", "empty-id"])
def test_errors_name_the_file_and_the_row(tmp_path: Path, file_format: str, column: str, value: object,
                                          expected: str) -> None:
    table = orders(Price=["2.55", "18", "2.55"])
    values = table[column].to_pylist()
    values[1] = value
    table = table.set_column(table.schema.get_field_index(column), column, pa.array(values, pa.string()))
    with pytest.raises(DataError) as err:
        load(write(tmp_path, table, file_format, spec_extra='price = "Price"'))
    assert str(err.value).startswith(expected)
    if column == "Customer ID" and value:
        assert str(err.value).endswith("is 129 bytes, longer than 128")


@pytest.mark.parametrize("file_format", ["csv", "parquet"])
@pytest.mark.parametrize("scale", [1, 1000, 1_000_000, 1_000_000_000], ids=["s", "ms", "us", "ns"])
def test_epoch_times_in_the_unit_their_size_says(tmp_path: Path, file_format: str, scale: int) -> None:
    # 2010-12-01 07:45, 2010-12-01 23:59:59 and 2010-12-02 00:00 in seconds, times the unit's scale
    seconds = [1291189500, 1291247999, 1291248000]
    table = orders(InvoiceDate=[s * scale for s in seconds])
    day = load(write(tmp_path, table, file_format)).transactions.day
    first = day_number("2010-12-01")
    assert day.tolist() == [first, first, first + 1]


@pytest.mark.parametrize(("times", "message"), [
    ([1291189500, 1291247999, 1291248000000],
     "line 2: InvoiceDate is read as epoch milliseconds (the unit of the first values) and falls outside the "
     "years 1971..2200"),
    ([-3_000_000_000] * 3, "line 2: InvoiceDate is read as epoch seconds (the unit of the first values) and "
                           "falls outside the years 1900..2200"),
])
def test_one_epoch_unit_for_the_whole_column(tmp_path: Path, times: list[int], message: str) -> None:
    # Seconds among milliseconds would land in January 1970; seconds before 1900 are no sale's time.
    with pytest.raises(DataError, match=re.escape(message)):
        load(write(tmp_path, orders(InvoiceDate=times)))


def test_a_timestamp_feature_in_epoch_milliseconds(tmp_path: Path) -> None:
    extra = '\n[customers]\nfile = "customers.csv"\nid = "Customer ID"\nfeatures = { since = "timestamp" }\n'
    write(tmp_path, orders(), spec_extra=extra)
    since = [1262304000000, 1263168000000]  # 2010-01-01 and 2010-01-11, in milliseconds
    pa_csv.write_csv(pa.table({"Customer ID": ["c1", "c2"], "since": since}), tmp_path / "customers.csv")
    assert load(tmp_path).customers.numeric.tolist() == [[-1.0, 0.0], [1.0, 0.0]]  # 10 days apart


@pytest.mark.parametrize("file_format", ["csv", "parquet"])
def test_integer_day_numbers_with_their_day_0(tmp_path: Path, file_format: str) -> None:
    spec = 'time_format = "days since 2019-12-31"'  # day 1 is 2020-01-01
    day = load(write(tmp_path, orders(InvoiceDate=[1, 1, 711]), file_format, spec)).transactions.day
    first = day_number("2020-01-01")
    assert day.dtype == np.int32 and day.tolist() == [first, first, first + 710]


@pytest.mark.parametrize("file_format", ["csv", "parquet"])
def test_spreadsheet_serial_dates_as_day_numbers(tmp_path: Path, file_format: str) -> None:
    spec = 'time_format = "days since 1899-12-30"'  # Excel's day 0
    table = orders(InvoiceDate=[40148.31, 40148.99, 40149.0])
    day = load(write(tmp_path, table, file_format, spec)).transactions.day
    first = day_number("2009-12-01")
    assert day.tolist() == [first, first, first + 1]


@pytest.mark.parametrize("file_format", ["csv", "parquet"])
def test_small_integers_are_not_taken_for_epoch_seconds(tmp_path: Path, file_format: str) -> None:
    # Inferred as epoch seconds, day numbers 1..711 would all be 1970-01-01: every line on one day.
    expected = r"InvoiceDate holds small numbers \(1 \.\. 711\): .* 'days since YYYY-MM-DD'"
    with pytest.raises(DataError, match=expected):
        load(write(tmp_path, orders(InvoiceDate=[1, 5, 711]), file_format))


def test_a_timestamp_feature_in_day_numbers(tmp_path: Path) -> None:
    extra = ('\n[customers]\nfile = "customers.csv"\nid = "Customer ID"\n'
             'time_format = "days since 2019-12-31"\nfeatures = { since = "timestamp" }\n')
    write(tmp_path, orders(), spec_extra=extra)
    pa_csv.write_csv(pa.table({"Customer ID": ["c1", "c2"], "since": [1, 11]}), tmp_path / "customers.csv")
    customers = load(tmp_path).customers
    # read as epoch seconds both would be day 0 and the feature constant; as days they are 10 apart
    assert customers.numeric_names == ("since", "since_missing")
    assert customers.numeric.tolist() == [[-1.0, 0.0], [1.0, 0.0]]


@pytest.mark.parametrize("time_format", ["days since 2019-13-45", "days since yesterday", "days since"])
def test_a_day_0_that_is_no_date_is_refused_with_the_spec(tmp_path: Path, time_format: str) -> None:
    with pytest.raises(DataError, match="after 'days since' give the date of day 0 as YYYY-MM-DD"):
        load(write(tmp_path, orders(InvoiceDate=[1, 5, 711]), spec_extra=f'time_format = "{time_format}"'))


def test_a_time_of_no_known_form_asks_for_a_format(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="cannot infer the form of time column InvoiceDate from '12/1/2010 "):
        load(write(tmp_path, orders(InvoiceDate=["12/1/2010 7:45"] * 3)))


def test_a_filter_that_keeps_nothing_says_so(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"^orders.csv: none of the 3 rows passes the filter$"):
        load(write(tmp_path, orders(), spec_extra='filter = ["Quantity > 100"]'))


def test_a_decimal_comma_is_named_in_the_error(tmp_path: Path) -> None:
    (tmp_path / "orders.csv").write_text("Customer ID;StockCode;InvoiceDate;Price\nc1;A;2010-12-01;12,50\n")
    (tmp_path / "relserve.toml").write_text(SPEC.format(file="orders.csv", extra='price = "Price"'))
    with pytest.raises(DataError, match=re.escape("orders.csv: line 2: cannot parse Price value '12,50' as a "
                                                  "number (a decimal comma? set decimal = ")):
        load(tmp_path)


def test_numbers_with_a_decimal_comma(tmp_path: Path) -> None:
    """A continental export: semicolons, decimal commas, dots grouping thousands, in the lines (price,
    a filter) and in a customers file (a numeric feature); ids and dates with dots stay as they are."""
    (tmp_path / "orders.csv").write_text(
        "Customer ID;StockCode;InvoiceDate;Price\n"
        "1.001;85.123;2010-12-01;12,50\n1.002;POST;2010-12-01;1.234,5\n1.001;85.123;2010-12-02;-3\n"
        "1.002;POST;2010-12-02;0,99\n")
    (tmp_path / "customers.csv").write_text("id;spend\n1.001;2.000,25\n1.002;17,5\n")
    extra = ('price = "Price"\ndecimal = ","\nfilter = ["Price > 0"]\n[customers]\nfile = "customers.csv"\n'
             'id = "id"\ndecimal = ","\nfeatures = { spend = "numeric" }\n')
    (tmp_path / "relserve.toml").write_text(SPEC.format(file="orders.csv", extra=extra))
    tables = load(tmp_path)
    assert tables.transactions.price.tolist() == pytest.approx([12.5, 1234.5, 0.99])
    assert decoded(tables.customers.ids) == ["1.001", "1.002"] and decoded(tables.articles.ids) == ["85.123",
                                                                                                    "POST"]
    spend = tables.customers.numeric[:, 0]
    assert spend[0] > spend[1]  # 2000.25 against 17.5, standardised


def test_a_decimal_mark_other_than_point_or_comma_is_refused(tmp_path: Path) -> None:
    write(tmp_path, orders(), spec_extra='decimal = "\'"')
    with pytest.raises(DataError, match=r"\[transactions\] decimal: the decimal mark must be"):
        load(tmp_path)


def test_text_in_another_encoding(tmp_path: Path) -> None:
    """A Latin-1 export (a byte that is no UTF-8 deep in the file) is refused with its line and what to
    set; with ``encoding`` it reads as its UTF-8 copy does, and a slice writes it back in Latin-1."""
    rows = "".join(f"c{i % 7};A{i % 5};2010-12-0{1 + i % 3};1.5;plain\n" for i in range(3000))
    text = "Customer ID;StockCode;InvoiceDate;Price;Description\n" + rows + "c1;B;2010-12-02;2.0;CAFÉ SET\n"
    features = '\n[articles]\nfrom = "transactions"\nfeatures = ["Description"]\n'
    for name, data, extra in (("utf8", text.encode(), 'price = "Price"'),
                              ("latin", text.encode("latin-1"), 'price = "Price"\nencoding = "latin-1"')):
        (tmp_path / name).mkdir()
        (tmp_path / name / "orders.csv").write_bytes(data)
        (tmp_path / name / "relserve.toml").write_text(SPEC.format(file="orders.csv", extra=extra) + features)
    expected, loaded = load(tmp_path / "utf8"), load(tmp_path / "latin")
    np.testing.assert_array_equal(expected.articles.categorical, loaded.articles.categorical)
    assert loaded.articles.cardinalities == (2,)
    spec = (tmp_path / "latin" / "relserve.toml").read_text()
    (tmp_path / "latin" / "relserve.toml").write_text(spec.replace('encoding = "latin-1"\n', ""))
    with pytest.raises(DataError, match=r"^orders.csv: line 3002 is not UTF-8 text \(.*\): set encoding = "
                                        r"'latin-1' \(or the file's own"):
        load(tmp_path / "latin")
    (tmp_path / "latin" / "relserve.toml").write_text(spec)
    slice_dataset(tmp_path / "latin", tmp_path / "slice", customers=2, weeks=1)
    assert "CAF\xc9".encode("latin-1") in (tmp_path / "slice" / "orders.csv").read_bytes()
    assert len(load(tmp_path / "slice").customers.ids) == 2


def test_an_unknown_encoding_is_refused_with_the_spec(tmp_path: Path) -> None:
    write(tmp_path, orders(), spec_extra='encoding = "klingon"')
    with pytest.raises(DataError, match=r"\[transactions\] encoding: unknown text encoding 'klingon'"):
        load(tmp_path)


def test_excels_unicode_text_export(tmp_path: Path) -> None:
    """Excel's "Unicode text" export: UTF-16 with a byte-order mark, tab-delimited."""
    extra = 'price = "Price"\nencoding = "utf-16"\n'
    table = orders(Country=["Österreich", "France", "Österreich"])
    expected = load(write(tmp_path / "utf8", table, "csv", 'price = "Price"\n'))
    directory = write(tmp_path / "utf16", table, "csv", extra)
    sink = pa.BufferOutputStream()
    pa_csv.write_csv(table, sink, pa_csv.WriteOptions(delimiter="\t", quoting_style="none"))
    (directory / "orders.txt").write_bytes(sink.getvalue().to_pybytes().decode().encode("utf-16"))
    (directory / "orders.csv").unlink()
    spec = (directory / "relserve.toml").read_text().replace('"orders.csv"', '"orders.txt"')
    (directory / "relserve.toml").write_text(spec)
    loaded = load(directory)
    for field in ("customer", "article", "day", "price"):
        np.testing.assert_array_equal(getattr(expected.transactions, field),
                                      getattr(loaded.transactions, field))
