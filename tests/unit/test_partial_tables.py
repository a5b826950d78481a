"""Attribute tables that cover only some ids: ``from = "transactions"`` with ``file`` and ``id``.

The customers file knows a third of the customers the transactions name (and one who never
bought), the product file misses some codes sold: every id of the transactions is a node, the
file's features where it has them, empty features elsewhere, counted in the loader's note.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from raw_export import export_table

from models.store.live_nodes import ENCODINGS_FILE
from training.data.load import load_tables
from training.data.spec_file import SpecError, parse_spec
from training.snapshot import main as snapshot_main

SPEC = """[transactions]
file = "orders.parquet"
customer = "Customer ID"
article = "StockCode"
time = "InvoiceDate"
price = "Price"
filter = ["Customer ID != null"]

[customers]
from = "transactions"
file = "customers.csv"
id = "customer_no"
features = {{ segment = "categorical", signup = "timestamp" }}
{customer_extra}
[articles]
from = "transactions"
file = "products.csv"
id = "code"
"""


def decoded(ids: np.ndarray) -> list[str]:
    return [bytes(i).decode() for i in ids]


@pytest.fixture(scope="module")
def orders(tiny_csv_dir: Path) -> pa.Table:
    return export_table(tiny_csv_dir)


def write(directory: Path, orders: pa.Table, signup: list[str], customer_extra: str = "") -> dict:
    """The orders, a customers file for every third customer (and one unknown) and a product file
    without every fifth code sold (and one never sold); returns what each file holds."""
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(orders, directory / "orders.parquet")
    customers = sorted({c for c in orders["Customer ID"].to_pylist() if c is not None})
    known = customers[::3]
    pa_csv.write_csv(pa.table({
        "customer_no": [str(c) for c in known] + ["99999"],
        "segment": ["retail" if k % 2 else "wholesale" for k in range(len(known))] + ["staff"],
        "signup": [signup[k % len(signup)] for k in range(len(known) + 1)],
    }), directory / "customers.csv")
    codes = sorted(set(orders["StockCode"].to_pylist()))
    listed = [c for k, c in enumerate(codes) if k % 5] + ["NEVER-SOLD"]
    pa_csv.write_csv(pa.table({"code": listed, "colour": [f"c{k % 4}" for k in range(len(listed))]}),
                     directory / "products.csv")
    (directory / "relserve.toml").write_text(SPEC.format(customer_extra=customer_extra))
    return {"customers": customers, "known": known, "codes": codes, "listed": listed}


def test_ids_come_from_the_transactions_and_features_from_the_file(orders: pa.Table, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    held = write(tmp_path, orders, ["2009-12-01", "2010-03-15", ""])
    tables = load_tables(tmp_path, progress=True)
    customers, articles = tables.customers, tables.articles
    assert decoded(customers.ids) == sorted(str(c) for c in held["customers"])  # 99999 dropped
    assert decoded(articles.ids) == held["codes"]  # every code sold; NEVER-SOLD dropped
    segment = customers.categorical[:, customers.categorical_names.index("segment")]
    known = np.isin(decoded(customers.ids), [str(c) for c in held["known"]])
    assert (segment[known] > 0).all() and (segment[~known] == 0).all()
    signup_missing = customers.numeric[:, customers.numeric_names.index("signup_missing")]
    assert (signup_missing[~known] == 1).all() and (signup_missing[known] == 0).any()
    colour = articles.categorical[:, 0]
    listed = np.isin(decoded(articles.ids), held["listed"])
    assert (colour[listed] > 0).all() and (colour[~listed] == 0).all() and (~listed).sum() > 5
    assert articles.cardinalities == (4,)
    notes = capsys.readouterr().err
    unknown = len(held["customers"]) - len(held["known"])
    assert f"customers: {unknown:,} of {len(held['customers']):,} ids have no row in customers.csv" in notes
    assert "1 rows of it name no id of the transactions: dropped" in notes
    missing_codes = int((~listed).sum())
    assert f"articles: {missing_codes} of {len(held['codes'])} ids have no row in products.csv" in notes


def test_timestamp_columns_of_a_node_table_take_a_time_format(orders: pa.Table, tmp_path: Path) -> None:
    write(tmp_path / "iso", orders, ["2009-12-01", "2010-03-15"])
    write(tmp_path / "uk", orders, ["01/12/2009", "15/03/2010"], 'time_format = "%d/%m/%Y"')
    iso, written = (load_tables(tmp_path / name, progress=False) for name in ("iso", "uk"))
    np.testing.assert_array_equal(iso.customers.numeric, written.customers.numeric)
    assert iso.customers.numeric.any()


def test_a_partial_table_needs_the_file_s_id_column() -> None:
    document = {"transactions": {"file": "o.csv", "customer": "c", "article": "a", "time": "t"},
                "customers": {"from": "transactions", "file": "customers.csv"}}
    with pytest.raises(SpecError, match=r"\[customers\] from = \"transactions\" with a file needs id"):
        parse_spec(document, "relserve.toml")
    document["customers"]["id"] = "customer_no"
    spec = parse_spec(document, "relserve.toml")
    assert spec.customers.partial and not spec.customers.derived
    del document["customers"]["from"]
    assert not parse_spec(document, "relserve.toml").customers.partial  # file alone: today's meaning


def test_new_nodes_encode_as_the_partial_file_was_encoded(orders: pa.Table, tmp_path: Path) -> None:
    """encodings.json reads the file back for the ids the snapshot holds: the dropped row's value
    ('staff', of a customer who never bought) is not in the vocabulary."""
    write(tmp_path / "data", orders, ["2009-12-01"])
    assert snapshot_main(["--data", str(tmp_path / "data"), "--out", str(tmp_path / "art"), "--quiet"]) == 0
    encodings = json.loads((tmp_path / "art" / "snapshot" / ENCODINGS_FILE).read_text())
    assert encodings["customer"]["categorical"]["segment"] == ["retail", "wholesale"]
    assert encodings["article"]["categorical"]["colour"] == ["c0", "c1", "c2", "c3"]


def test_encodings_read_the_file_as_the_spec_says(orders: pa.Table, tmp_path: Path) -> None:
    """The customers file in Latin-1 with semicolons and a decimal comma: encodings.json reads it with
    the table's own settings (it used to read it as UTF-8 and, failing, leave the vocabulary out)."""
    write(tmp_path / "data", orders, ["2009-12-01"],
          customer_extra='encoding = "latin-1"\ndecimal = ","\n')
    text = (tmp_path / "data" / "customers.csv").read_text().replace(",", ";").replace("wholesale", "détail")
    (tmp_path / "data" / "customers.csv").write_bytes(text.encode("latin-1"))
    assert snapshot_main(["--data", str(tmp_path / "data"), "--out", str(tmp_path / "art"), "--quiet"]) == 0
    encodings = json.loads((tmp_path / "art" / "snapshot" / ENCODINGS_FILE).read_text())
    assert encodings["customer"]["categorical"]["segment"] == ["détail", "retail"]
