"""Order lines joined to their orders: ``join`` in ``[transactions]``.

The raw export of the shop is cut as a normalised database exports it: order lines (invoice, stock
code, quantity, price), an order header (invoice, date, the order's own customer key, status) and a
customers table mapping that key to the person (``customer_unique_id``: the Olist layout), the
country there. Read through a spec with two joins, it gives the same transactions and nodes as the
flat table through the shipped spec; lines whose order the header lacks are dropped and counted.
"""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from raw_export import export_table, shipped_spec

from training.data.common import DataError
from training.data.load import load_tables
from training.data.slice import slice_dataset
from training.data.spec_file import SPEC_FILE, SpecError, find_spec, parse_spec
from training.fit.dataset import source_signature

JOINED_SPEC = """[transactions]
file = "lines.parquet"
join = [{ file = "orders.csv", on = "Invoice" },
        { file = "customers.csv", on = "order_customer", id = "key" }]
customer = "Customer ID"
article = "StockCode"
time = "InvoiceDate"
price = "Price"
quantity = "Quantity"
filter = ["status == 'delivered'", "Customer ID > 0", "Invoice !~ ^C", "Quantity > 0", "Price > 0"]

[customers]
from = "transactions"
features = { Country = "categorical" }

[articles]
from = "transactions"
"""


@pytest.fixture(scope="module")
def export(tiny_csv_dir: Path) -> pa.Table:
    """The raw export, a guest checkout's line on an invoice of its own (one customer per order)."""
    table = export_table(tiny_csv_dir)
    guest = pc.is_null(table["Customer ID"])
    invoice = pc.if_else(guest, pc.binary_join_element_wise("G", table["Invoice"], ""), table["Invoice"])
    return table.set_column(0, "Invoice", invoice)


def write_flat(export: pa.Table, directory: Path) -> Path:
    directory.mkdir(parents=True)
    pq.write_table(export, directory / "export.parquet")
    (directory / SPEC_FILE).write_text(shipped_spec("export.parquet"))
    return directory


def write_joined(export: pa.Table, directory: Path, orders_kept: slice = slice(None)) -> Path:
    """The export as lines, orders (one row per invoice, ``orders_kept`` of them) and customers."""
    directory.mkdir(parents=True)
    pq.write_table(export.select(["Invoice", "StockCode", "Description", "Quantity", "Price"]),
                   directory / "lines.parquet")
    invoices = export["Invoice"].to_numpy(zero_copy_only=False)
    _, first = np.unique(invoices, return_index=True)
    header = export.take(pa.array(np.sort(first)))
    people = header["Customer ID"]
    # Each order has a key of its own; the customers table maps it to the person (and country).
    keys = pa.array([f"o-{k}" for k in range(header.num_rows)])
    orders = pa.table({"Invoice": header["Invoice"], "InvoiceDate": header["InvoiceDate"],
                       "order_customer": keys, "status": ["delivered"] * header.num_rows})
    pa_csv.write_csv(orders.slice(orders_kept.start or 0, orders_kept.stop), directory / "orders.csv")
    pa_csv.write_csv(pa.table({"key": keys, "Customer ID": people, "Country": header["Country"]}),
                     directory / "customers.csv")
    (directory / SPEC_FILE).write_text(JOINED_SPEC)
    return directory


def test_joined_tables_give_what_the_flat_table_gives(export: pa.Table, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    flat = load_tables(write_flat(export, tmp_path / "flat"), progress=False)
    joined = load_tables(write_joined(export, tmp_path / "joined"), progress=True)
    for name in ("customer", "article", "day", "price"):
        assert np.array_equal(getattr(flat.transactions, name), getattr(joined.transactions, name)), name
    assert np.array_equal(flat.customers.ids, joined.customers.ids)
    assert np.array_equal(flat.articles.ids, joined.articles.ids)
    assert np.array_equal(flat.customers.categorical, joined.customers.categorical)  # Country, joined twice
    assert "dropped" not in capsys.readouterr().err


def test_lines_without_their_order_are_dropped_and_counted(export: pa.Table, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture) -> None:
    full = load_tables(write_joined(export, tmp_path / "full"), progress=False)
    cut = load_tables(write_joined(export, tmp_path / "cut", slice(20, None)), progress=True)
    lines = pq.read_table(tmp_path / "cut" / "lines.parquet")
    missing = set(np.unique(lines["Invoice"].to_numpy(zero_copy_only=False))[:20])
    dropped = int(pc.sum(pc.is_in(lines["Invoice"], pa.array(sorted(missing)))).as_py())
    assert dropped > 0
    note = capsys.readouterr().err
    assert f"{dropped:,} lines of lines.parquet dropped: their Invoice is not in orders.csv" in note
    assert len(cut.transactions.day) < len(full.transactions.day)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: (d / "orders.csv").write_text((d / "orders.csv").read_text().replace("InvoiceDate", "date")),
     "lines.parquet: missing column InvoiceDate (nor has orders.csv or customers.csv)"),
    (lambda d: (d / "customers.csv").write_text((d / "customers.csv").read_text().replace('"key"', '"k"')),
     "customers.csv: no column 'key' (the key of join[1])"),
    (lambda d: (d / "orders.csv").write_text((d / "orders.csv").read_text()
                                             + (d / "orders.csv").read_text().splitlines()[1] + "\n"),
     "orders.csv: Invoice '489434' occurs more than once: a joined table holds one row per Invoice"),
])
def test_bad_joined_tables_are_refused_in_one_line(export: pa.Table, tmp_path: Path, edit,
                                                   message: str) -> None:
    directory = write_joined(export, tmp_path / "data")
    edit(directory)
    with pytest.raises(DataError, match="^" + re.escape(message)):
        load_tables(directory, progress=False)


@pytest.mark.parametrize(("join", "message"), [
    ('join = [{ file = "orders.csv" }]', r"\[transactions\] join\[0\] missing required key 'on'"),
    ('join = [{ file = "orders.csv", on = "Invoice", how = "left" }]', r"join\[0\] unknown key 'how'"),
    ('join = "orders.csv"', r"join: must be a list of tables"),
])
def test_bad_join_entries_are_refused_when_the_spec_is_read(join: str, message: str) -> None:
    document = tomllib.loads(re.sub(r"join = \[.*?\]\n", join + "\n", JOINED_SPEC, flags=re.S))
    with pytest.raises(SpecError, match=message):
        parse_spec(document, SPEC_FILE)


def test_one_join_may_be_a_table_of_its_own(tmp_path: Path) -> None:
    document = tomllib.loads(re.sub(r"join = \[.*?\]\n", "", JOINED_SPEC, flags=re.S)
                             + '[transactions.join]\nfile = "orders.csv"\non = "Invoice"\n')
    assert [(j.file, j.on, j.id) for j in parse_spec(document, SPEC_FILE).transactions.join] == [
        ("orders.csv", "Invoice", "Invoice")]


def test_a_slice_keeps_the_joined_tables(export: pa.Table, tmp_path: Path) -> None:
    source = write_joined(export, tmp_path / "data")
    written = slice_dataset(source, tmp_path / "slice", customers=5, weeks=4)
    assert {"lines.parquet", "orders.csv", "customers.csv"} <= set(written)
    shutil.copyfile(source / SPEC_FILE, tmp_path / "slice" / SPEC_FILE)
    tables = load_tables(tmp_path / "slice", progress=False)
    assert len(tables.customers.ids) == 5


def test_the_pages_join_example_loads_as_described(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """docs/dataset-spec.md's order-lines example, on small files in its shape: people ordering
    under a new customer key each time, an item whose order is missing, an order not delivered."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "dataset-spec.md").read_text()
    block = next(b for b in re.findall(r"```toml\n(.*?)```", page, re.S) if "order_items.csv" in b)
    (tmp_path / SPEC_FILE).write_text(block)
    orders = [f"ord{k:03d}" for k in range(40)]
    people = [f"person-{k % 9}" for k in range(40)]
    pa_csv.write_csv(pa.table({
        "order_id": orders, "customer_id": [f"cust{k:03d}" for k in range(40)],
        "order_status": ["canceled" if k % 10 == 3 else "delivered" for k in range(40)],
        "order_purchase_timestamp": [f"2018-0{1 + k % 6}-{1 + k % 27:02d} 10:{k:02d}:00" for k in range(40)],
    }), tmp_path / "orders.csv")
    pa_csv.write_csv(pa.table({
        "customer_id": [f"cust{k:03d}" for k in range(40)], "customer_unique_id": people,
        "customer_state": ["SP", "RJ", "MG"] * 13 + ["SP"]}), tmp_path / "customers.csv")
    items = [(orders[k % 40] if k < 119 else "ord999", f"prod{k % 11}", 10.0 + k % 7) for k in range(120)]
    pa_csv.write_csv(pa.table({"order_id": [i[0] for i in items], "product_id": [i[1] for i in items],
                               "price": [i[2] for i in items]}), tmp_path / "order_items.csv")
    pa_csv.write_csv(pa.table({"product_id": [f"prod{k}" for k in range(8)],
                               "product_category_name": ["cama", "mesa"] * 4,
                               "product_weight_g": [100 * k for k in range(8)]}), tmp_path / "products.csv")
    tables = load_tables(tmp_path, progress=True)
    note = capsys.readouterr().err
    assert "transactions: 1 lines of order_items.csv dropped: their order_id is not in orders.csv" in note
    assert "articles: 3 of 11 ids have no row in products.csv: empty features" in note
    assert [bytes(i).decode() for i in tables.customers.ids] == sorted(set(people))
    delivered = [k for k in range(119) if (k % 40) % 10 != 3]
    assert len(tables.transactions) == len(delivered)


def test_the_fit_signature_covers_the_joined_files(export: pa.Table, tmp_path: Path) -> None:
    directory = write_joined(export, tmp_path / "data")
    assert {"lines.parquet", "orders.csv", "customers.csv", "spec"} <= set(
        source_signature(directory, find_spec(directory)))
