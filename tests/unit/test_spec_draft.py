"""Drafting a spec from a shop's files (``python -m training.data.draft``).

Each shop below is written by the test in its own shape (the raw Online Retail export, with dates as a
US or a European export writes them; an order-lines file joined to its order header with partial
customer and product files; a loyalty panel counting days) from the project's generator; the draft
must load the same lines as a spec written by hand, and every refusal is one line.
"""

from __future__ import annotations

import datetime as dt
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from raw_export import export_table, shipped_spec, write_zipped_workbook

from training.data.common import DataError
from training.data.draft import draft_spec, main
from training.data.load import load_tables
from training.data.spec_file import SPEC_FILE, parse_spec


def write_csv(table: pa.Table, path: Path) -> None:
    pa_csv.write_csv(table, path, pa_csv.WriteOptions(quoting_style="needed"))


def lines(data: Path, spec: Path | None = None) -> tuple[np.ndarray, ...]:
    """Each line's customer and article id, day and value (ids, not indices: a partial table drops
    customers who never bought, so indices differ from a file table's)."""
    tables = load_tables(data, progress=False, spec=spec)
    tx = tables.transactions
    return tables.customers.ids[tx.customer], tables.articles.ids[tx.article], tx.day, tx.price


def assert_same(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> None:
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.fixture(scope="module")
def export(tiny_csv_dir: Path) -> pa.Table:
    return export_table(tiny_csv_dir)


def test_the_raw_export_drafts_to_the_shipped_spec(export: pa.Table, tmp_path: Path) -> None:
    pq.write_table(export, tmp_path / "export.parquet")
    (tmp_path / "shipped.toml").write_text(shipped_spec("export.parquet"))
    assert main(["--data", str(tmp_path)]) == 0
    text = (tmp_path / SPEC_FILE).read_text()
    for line in ('customer = "Customer ID"', 'article = "StockCode"', 'time = "InvoiceDate"',
                 'price = "Price"', 'quantity = "Quantity"', '"Quantity > 0"', '"Price > 0"',
                 'features = ["Country"]'):
        assert line in text
    assert_same(lines(tmp_path, tmp_path / "shipped.toml"), lines(tmp_path))
    drafted = load_tables(tmp_path, progress=False)
    shipped = load_tables(tmp_path, progress=False, spec=tmp_path / "shipped.toml")
    np.testing.assert_array_equal(drafted.customers.categorical, shipped.customers.categorical)


@pytest.mark.parametrize("style", ["%m/%d/%Y %H:%M", "%d/%m/%Y %H:%M"])
def test_day_and_month_are_told_apart_over_the_whole_column(export: pa.Table, tmp_path: Path,
                                                             style: str) -> None:
    """Day and month are told apart by the values where the day is above 12, wherever they are in the
    file (the first lines of an export are often one early day of a month)."""
    days = [int(v[8:10]) for v in export["InvoiceDate"].to_pylist()]
    export = export.take(sorted(range(len(days)), key=lambda k: days[k] > 12))  # ambiguous lines first
    write_csv(export, tmp_path / "iso.csv")
    (tmp_path / "iso.toml").write_text(shipped_spec("iso.csv"))
    times = [dt.datetime.fromisoformat(v) for v in export["InvoiceDate"].to_pylist()]
    written = [f"{t.month}/{t.day}/{t.year} {t.hour}:{t.minute:02d}" if style.startswith("%m")
               else f"{t.day:02d}/{t.month:02d}/{t.year} {t.hour}:{t.minute:02d}" for t in times]
    (tmp_path / "us").mkdir()
    at = export.schema.get_field_index("InvoiceDate")
    restyled = export.set_column(at, "InvoiceDate", pa.array(written))
    write_csv(restyled, tmp_path / "us" / "export.csv")
    assert f'time_format = "{style}"' in draft_spec(tmp_path / "us")
    assert main(["--data", str(tmp_path / "us")]) == 0
    assert_same(lines(tmp_path, tmp_path / "iso.toml"), lines(tmp_path / "us"))


def test_order_lines_join_their_header_and_partial_attribute_files(tiny_csv_dir: Path,
                                                                   tmp_path: Path) -> None:
    """An Olist-style marketplace dump: lines name the order and the product; the order header names
    the customer and the time; customer and product files cover only some ids."""
    tx = pa_csv.read_csv(tiny_csv_dir / "transactions_train.csv",
                         convert_options=pa_csv.ConvertOptions(column_types={"customer_id": pa.string(),
                                                                             "article_id": pa.string()}))
    keys = [f"{c}|{d}" for c, d in zip(tx["customer_id"].to_pylist(), tx["t_dat"].to_pylist(), strict=True)]
    order_of = {k: f"o{n:05d}" for n, k in enumerate(dict.fromkeys(keys))}
    write_csv(pa.table({"order_id": [order_of[k] for k in keys], "product_id": tx["article_id"],
                        "price": tx["price"], "freight_value": pa.array([1.5] * len(keys))}),
              tmp_path / "order_items.csv")
    header = [k.split("|") for k in order_of]
    write_csv(pa.table({"order_id": list(order_of.values()), "customer_id": [c for c, _ in header],
                        "order_status": ["delivered"] * len(header),
                        "order_purchase_timestamp": [f"{d} 10:00:00" for _, d in header],
                        "order_delivered_customer_date": [f"{d} 18:00:00" for _, d in header]}),
              tmp_path / "orders.csv")
    customers = sorted(set(tx["customer_id"].to_pylist()))[::3]
    write_csv(pa.table({"customer_id": customers, "customer_state": ["SP", "RJ", "MG"] * (len(customers) // 3)
                        + ["SP"] * (len(customers) % 3)}), tmp_path / "customers.csv")
    products = sorted(set(tx["article_id"].to_pylist()))[1:]
    write_csv(pa.table({"product_id": products, "product_category_name": ["casa"] * len(products)}),
              tmp_path / "products.csv")
    text = draft_spec(tmp_path)
    spec = parse_spec(tomllib.loads(text), "draft")
    assert spec.transactions.file == "order_items.csv" and spec.transactions.customer == "customer_id"
    assert spec.transactions.time == "order_purchase_timestamp" and spec.transactions.price == "price"
    assert [(j.file, j.on) for j in spec.transactions.join] == [("orders.csv", "order_id")]
    assert (spec.customers.file, spec.articles.file) == ("customers.csv", "products.csv")
    (tmp_path / SPEC_FILE).write_text(text)
    assert_same(lines(tiny_csv_dir), lines(tmp_path))


def test_a_panel_counting_days_gets_an_origin(tiny_csv_dir: Path, tmp_path: Path) -> None:
    """A loyalty panel: households, day numbers 1..N, the line's sales value, a demographics file for
    a third of the households."""
    tx = pa_csv.read_csv(tiny_csv_dir / "transactions_train.csv",
                         convert_options=pa_csv.ConvertOptions(column_types={"customer_id": pa.string(),
                                                                             "article_id": pa.string()}))
    days = np.array([dt.date.fromisoformat(str(d)).toordinal() for d in tx["t_dat"].to_pylist()])
    household = {c: 1000 + n for n, c in enumerate(sorted(set(tx["customer_id"].to_pylist())))}
    write_csv(pa.table({"household_key": [household[c] for c in tx["customer_id"].to_pylist()],
                        "BASKET_ID": pa.array(range(len(days))), "DAY": days - days.min() + 1,
                        "PRODUCT_ID": tx["article_id"], "QUANTITY": pa.array([1] * len(days)),
                        "SALES_VALUE": tx["price"]}), tmp_path / "transaction_data.csv")
    keys = sorted(household.values())[::3]
    write_csv(pa.table({"household_key": keys, "AGE_DESC": ["45-54"] * len(keys)}),
              tmp_path / "hh_demographic.csv")
    text = draft_spec(tmp_path)
    assert 'time_format = "days since 2000-01-01"' in text and 'amount = "SALES_VALUE"' in text
    assert 'file = "hh_demographic.csv"' in text
    (tmp_path / SPEC_FILE).write_text(text)
    expected, drafted = lines(tiny_csv_dir), lines(tmp_path)
    np.testing.assert_array_equal(np.diff(expected[2]), np.diff(drafted[2]))  # the same days, moved
    np.testing.assert_array_equal(expected[3], drafted[3])


def test_refusals_are_one_line(export: pa.Table, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    write_csv(pa.table({"name": ["a"], "colour": ["red"]}), tmp_path / "notes.csv")
    with pytest.raises(SystemExit) as exit_:
        main(["--data", str(tmp_path)])
    err = capsys.readouterr().err
    assert exit_.value.code == 1 and err.count("\n") == 1
    assert ("no file holds (or joins into) a customer, an article and a time column (notes.csv: no "
            "role)") in err
    pq.write_table(export, tmp_path / "export.parquet")
    (tmp_path / SPEC_FILE).write_text("# mine\n")
    with pytest.raises(SystemExit):
        main(["--data", str(tmp_path)])
    assert "relserve.toml exists: pass --force" in capsys.readouterr().err
    assert (tmp_path / SPEC_FILE).read_text() == "# mine\n"
    assert main(["--data", str(tmp_path), "--force"]) == 0
    with pytest.raises(SystemExit):
        main(["--data", str(tmp_path / "nowhere")])
    assert "no such directory" in capsys.readouterr().err


def test_a_shop_folder_without_a_spec_is_pointed_to_the_draft(export: pa.Table, tmp_path: Path) -> None:
    """Without a spec a folder is read as the H&M layout; a folder of other files says how to go on."""
    pq.write_table(export, tmp_path / "export.parquet")
    with pytest.raises(DataError, match=r"no relserve\.toml says which files and columns to read, and "
                                        r"these are not the H&M layout .*python -m training\.data\.draft"):
        load_tables(tmp_path, progress=False)


def test_a_windows_export_gets_its_encoding(export: pa.Table, tmp_path: Path) -> None:
    table = export.set_column(export.schema.get_field_index("Country"), "Country",
                              pa.array(["Curaçao" if c else None for c in export["Country"].to_pylist()]))
    write_csv(table, tmp_path / "utf8.csv")
    (tmp_path / "cp1252").mkdir()
    (tmp_path / "cp1252" / "export.csv").write_bytes((tmp_path / "utf8.csv").read_text().encode("cp1252"))
    text = draft_spec(tmp_path / "cp1252")
    assert 'encoding = "cp1252"' in text
    (tmp_path / "cp1252" / SPEC_FILE).write_text(text)
    plain = text.replace('encoding = "cp1252"', "").replace("export.csv", "utf8.csv")
    (tmp_path / "utf8.toml").write_text(plain)
    assert_same(lines(tmp_path, tmp_path / "utf8.toml"), lines(tmp_path / "cp1252"))


def test_a_continental_back_office_export(tmp_path: Path) -> None:
    """German headers, Latin-1, semicolons, decimal commas with grouped thousands, day-first times,
    lines apart from their receipts: the draft loads what the hand-written spec of
    docs/dataset-spec.md loads (less its cancellation filter: these lines have none)."""
    lines = ["Beleg;Artikel;Bezeichnung;Menge;Einzelpreis"]
    receipts = ["Beleg;Datum;Kunde;Land"]
    for k in range(60):
        customer = "" if k % 20 == 7 else 100 + k % 9
        receipts.append(f"{5000 + k};{1 + k % 28:02d}.{10 + k % 3}.2023 18:05;{customer};"
                        f"{'Österreich' if k % 9 < 5 else 'Schweiz'}")
        lines += [f"{5000 + k};{4711 + (k * 3 + j) % 11};\"Käse; würzig\";{1 + j};"
                  + ("1.234,50" if j else "2,99") for j in range(2)]
    (tmp_path / "positionen.csv").write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    (tmp_path / "belege.csv").write_bytes(("\n".join(receipts) + "\n").encode("latin-1"))
    spec = parse_spec(tomllib.loads(draft_spec(tmp_path)), "draft")
    assert (spec.transactions.file, spec.transactions.customer, spec.transactions.article) == (
        "positionen.csv", "Kunde", "Artikel")
    assert (spec.transactions.time, spec.transactions.time_format) == ("Datum", "%d.%m.%Y %H:%M")
    assert (spec.transactions.price, spec.transactions.quantity) == ("Einzelpreis", "Menge")
    assert spec.transactions.options.decimal == "," and spec.transactions.options.encoding == "cp1252"
    assert [(j.file, j.on) for j in spec.transactions.join] == [("belege.csv", "Beleg")]
    assert [f.column for f in spec.customers.features] == ["Land"]
    assert main(["--data", str(tmp_path)]) == 0
    tables = load_tables(tmp_path, progress=False)
    assert len(tables.transactions) == 2 * sum(k % 20 != 7 for k in range(60))
    assert sorted(set(tables.transactions.price.tolist())) == pytest.approx([2.99, 2469.0])
    assert tables.customers.cardinalities == (2,)


def test_a_downloaded_workbook_in_a_zip(export: pa.Table, tmp_path: Path) -> None:
    """The UCI download: a zip holding one workbook of one sheet per year. The draft reads the first
    sheet and says the workbook has others."""
    write_zipped_workbook(tmp_path / "online_retail_II.zip", "online_retail_II.xlsx",
                          {"Year 2009-2010": export, "Year 2010-2011": export})
    text = draft_spec(tmp_path)
    assert 'file = "online_retail_II.zip/online_retail_II.xlsx"' in text
    assert ("# Note: online_retail_II.zip/online_retail_II.xlsx has 2 sheets ('Year 2009-2010', "
            "'Year 2010-2011'): the first is read") in text
    pq.write_table(export, tmp_path / "export.parquet")
    (tmp_path / "shipped.toml").write_text(shipped_spec("export.parquet"))
    (tmp_path / SPEC_FILE).write_text(text)
    assert_same(lines(tmp_path, tmp_path / "shipped.toml"), lines(tmp_path))


def test_the_time_format_is_the_chosen_columns(export: pa.Table, tmp_path: Path) -> None:
    """A second date column in another form (a payment date written day-first) does not lend the
    chosen time column its format."""
    dates = export["InvoiceDate"].to_pylist()
    paid = [f"{d[8:10]}.{d[5:7]}.{d[:4]}" for d in dates]
    table = export.append_column("Payment Date", pa.array(paid))
    write_csv(table, tmp_path / "export.csv")
    text = draft_spec(tmp_path)
    assert 'time = "InvoiceDate"' in text and "time_format" not in text


def test_an_event_log_keeps_its_purchases(tiny_csv_dir: Path, tmp_path: Path) -> None:
    """A web shop's tracking export: views, carts and purchases in one table, epoch milliseconds."""
    tx = pa_csv.read_csv(tiny_csv_dir / "transactions_train.csv",
                         convert_options=pa_csv.ConvertOptions(column_types={"customer_id": pa.string(),
                                                                             "article_id": pa.string()}))
    millis = [int(dt.datetime.fromisoformat(f"{d} 12:00:00").replace(tzinfo=dt.UTC).timestamp() * 1000)
              for d in tx["t_dat"].to_pylist()]
    n = len(millis)
    events = pa.table({"event_time": millis * 3, "event_type": ["view"] * n + ["cart"] * n + ["purchase"] * n,
                       "product_id": pa.concat_arrays([tx["article_id"].combine_chunks()] * 3),
                       "price": pa.concat_arrays([tx["price"].combine_chunks()] * 3),
                       "user_id": pa.concat_arrays([tx["customer_id"].combine_chunks()] * 3)})
    write_csv(events, tmp_path / "events.csv")
    text = draft_spec(tmp_path)
    assert "\"event_type == 'purchase'\"" in text and 'time = "event_time"' in text
    (tmp_path / SPEC_FILE).write_text(text)
    assert_same(lines(tiny_csv_dir), lines(tmp_path))


def test_monthly_parts_are_one_table(export: pa.Table, tiny_csv_dir: Path, tmp_path: Path) -> None:
    """An export published month by month beside tables of other columns, in a folder and in a zip:
    the parts are read as one table through one glob; the other tables stay their own."""
    months = sorted({d[:7] for d in export["InvoiceDate"].to_pylist()})
    pq.write_table(export, tmp_path / "whole.parquet")
    (tmp_path / "shipped.toml").write_text(shipped_spec("whole.parquet"))
    for shape in ("folder", "zip"):
        data = tmp_path / shape
        (data / "exports").mkdir(parents=True)
        for month in months:
            rows = [k for k, d in enumerate(export["InvoiceDate"].to_pylist()) if d.startswith(month)]
            write_csv(export.take(rows), data / "exports" / f"online_retail_{month}.csv")
        write_csv(pa.table({"StockCode": ["85001A"], "Colour": ["red"]}), data / "exports" / "products.csv")
        if shape == "zip":
            with zipfile.ZipFile(data / "dump.zip", "w") as archive:
                for part in sorted((data / "exports").iterdir()):
                    archive.write(part, f"exports/{part.name}")
                    part.unlink()
            (data / "exports").rmdir()
        spec = parse_spec(tomllib.loads(draft_spec(data)), "draft")
        prefix = "dump.zip/exports/" if shape == "zip" else "exports/"
        pattern = spec.transactions.file
        assert len(months) > 1 and pattern.endswith("*.csv")
        assert pattern.startswith(f"{prefix}online_retail_20")
        assert spec.articles.file == f"{prefix}products.csv"
        assert main(["--data", str(data)]) == 0
        assert_same(lines(tmp_path, tmp_path / "shipped.toml"), lines(data))
