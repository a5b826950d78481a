"""docs/dataset-spec.md's examples are specs the loader takes as the page describes them.

Every ```toml block of the page parses; the grocery example (several tables, partial attribute
files, day-first times) loads small files written here in its shape, with the note the page shows,
and so does the continental one (Latin-1, semicolons, decimal commas, a joined receipts file).
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

from models.schema import day_number
from training.data.load import load_tables
from training.data.spec_file import SPEC_FILE, read_spec

DOC = Path(__file__).resolve().parents[2] / "docs" / "dataset-spec.md"
BLOCKS = re.findall(r"```toml\n(.*?)```", DOC.read_text(), re.S)


def csv_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pa_csv.write_csv(table, sink)
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("block", BLOCKS, ids=[f"example {k + 1}" for k in range(len(BLOCKS))])
def test_every_example_parses(block: str, tmp_path: Path) -> None:
    (tmp_path / SPEC_FILE).write_text(block)
    read_spec(tmp_path / SPEC_FILE)


def test_the_grocery_example_loads_as_described(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    block = next(b for b in BLOCKS if "loyalty_members.parquet" in b)
    (tmp_path / SPEC_FILE).write_text(block)
    (tmp_path / "orders").mkdir()
    accounts = [f"A-{k:06d}" for k in range(30)]
    eans = [f"{4006040018200 + k:013d}" for k in range(12)] + ["0712345678911"]
    for month in (10, 11):
        rows = range(120)
        lines = pa.table({
            "account": [accounts[(r * 7 + month) % 30] for r in rows],
            "ean": [eans[(r * 5 + month) % 13] for r in rows],
            "delivered": [f"{1 + r % 28:02d}.{month}.2023 18:05" for r in rows],
            "line_total_eur": [0.0 if r % 17 == 0 else 1.5 + r % 9 for r in rows],
            "status": ["cancelled" if r % 11 == 0 else "delivered" for r in rows],
        })
        (tmp_path / "orders" / f"lines-2023-{month}.csv.gz").write_bytes(gzip.compress(csv_bytes(lines)))
    members = [*accounts[::3], "A-999999"]
    pq.write_table(pa.table({
        "account_no": members, "member_since": [f"01.0{1 + k % 9}.2019" for k in range(len(members))],
        "household": [1 + k % 4 for k in range(len(members))], "tier": ["gold", "silver"] * 5 + ["gold"],
    }), tmp_path / "loyalty_members.parquet")
    listed = eans[:10]
    (tmp_path / "catalogue.csv").write_bytes(csv_bytes(pa.table({
        "ean": listed, "aisle": [f"aisle {k % 3}" for k in range(10)], "brand": ["x", "y"] * 5,
        "organic": [k % 2 for k in range(10)], "pack_size_g": [250 + 50 * k for k in range(10)]})))
    tables = load_tables(tmp_path, progress=True)
    note = capsys.readouterr().err
    assert "customers: 20 of 30 ids have no row in loyalty_members.parquet: empty features; " \
           "1 rows of it name no id of the transactions: dropped" in note
    assert "articles: 3 of 13 ids have no row in catalogue.csv: empty features" in note
    assert bytes(tables.articles.ids[0]).decode() == "0712345678911"  # leading zero kept
    since = tables.customers.numeric[:, tables.customers.numeric_names.index("member_since_missing")]
    assert int((since == 0).sum()) == 10
    kept = [r for r in range(120) if r % 17 and r % 11]  # delivered, and not free
    assert len(tables.transactions) == 2 * len(kept)
    assert tables.transactions.day.min() == day_number("2023-10-01")  # 01.10.2023, day first


def test_the_continental_example_loads_as_described(tmp_path: Path) -> None:
    block = next(b for b in BLOCKS if "positionen.csv" in b)
    (tmp_path / SPEC_FILE).write_text(block)
    lines = ["Beleg;Artikel;Bezeichnung;Menge;Einzelpreis"]
    receipts = ["Beleg;Datum;Kunde;Land"]
    for k in range(60):
        beleg = f"S{5000 + k}" if k % 15 == 14 else f"{5000 + k}"
        customer = "" if k % 20 == 7 else 100 + k % 9
        receipts.append(f"{beleg};{1 + k % 28:02d}.{10 + k % 3}.2023 18:05;{customer};Österreich")
        lines += [f"{beleg};{4711 + (k * 3 + j) % 11};\"Käse; würzig\";{1 + j};{'1.234,50' if j else '2,99'}"
                  for j in range(2)]
    (tmp_path / "positionen.csv").write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    (tmp_path / "belege.csv").write_bytes(("\n".join(receipts) + "\n").encode("latin-1"))
    (tmp_path / "kunden.csv").write_bytes("Kundennummer;Segment;Umsatzziel\n100;Großhandel;2.000,25\n"
                                          "101;Privat;17,5\n".encode("latin-1"))
    tables = load_tables(tmp_path, progress=False)
    kept = [k for k in range(60) if k % 15 != 14 and k % 20 != 7]  # not cancelled, a customer
    assert len(tables.transactions) == 2 * len(kept)
    assert sorted(set(tables.transactions.price.tolist())) == pytest.approx([2.99, 2469.0])  # 1.234,50 x 2
    assert tables.transactions.day.min() == day_number("2023-10-01")
    assert tables.customers.categorical_names == ("Segment",) and tables.customers.cardinalities == (2,)
