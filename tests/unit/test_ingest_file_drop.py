"""The file drop: CSV, NDJSON and Parquet files go in (customers before the transactions that need
them) and move to done/; a bad file moves to failed/ beside its error and appends nothing; a big file
goes in as several batches, and one cut short by a crash is completed without duplicates."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from models.store.snapshot import GraphSnapshot
from serve.ingest.config import IngestConfig
from serve.ingest.file_drop import FileDrop
from serve.ingest.service import open_ingestor
from tests.ingest_helpers import build_snapshot, transaction_rows

HEADER = ("t_dat", "customer_id", "article_id", "price", "sales_channel_id")


@pytest.fixture(scope="module")
def snapshot(tiny_csv_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> GraphSnapshot:
    return build_snapshot(tiny_csv_dir, tmp_path_factory.mktemp("snapshot"))


@pytest.fixture()
def config(tmp_path: Path) -> IngestConfig:
    return IngestConfig(state_dir=tmp_path / "state", ingest_dir=tmp_path / "drop", max_rows=4)


def csv_text(rows: list[dict]) -> str:
    return ",".join(HEADER) + "\n" + "".join(",".join(str(r[c]) for c in HEADER) + "\n" for r in rows)


def rows_in_log(config: IngestConfig) -> list[tuple]:
    batches = config.open_log().read(0, limit=1000)
    return [(b.kind, tuple(sorted(b.rows))) for b in batches for _ in range(len(b))]


def drop(config: IngestConfig, snapshot: GraphSnapshot) -> FileDrop:
    return FileDrop(config.ingest_dir, open_ingestor(config, snapshot.directory))


def test_files_of_every_format_go_in_and_move_to_done(config: IngestConfig, snapshot: GraphSnapshot) -> None:
    files = drop(config, snapshot)
    base = config.ingest_dir
    day = transaction_rows(snapshot, 1)[0]["t_dat"]
    # Dropped first, but taken after the customers and articles it buys.
    (base / "transactions" / "buys.csv").write_text(csv_text(
        [{"t_dat": day, "customer_id": "new-c", "article_id": "new-a", "price": 0.5, "sales_channel_id": 1},
         *transaction_rows(snapshot, 2)]))
    (base / "customers" / "people.ndjson").write_text(json.dumps({"customer_id": "new-c", "age": 30}) + "\n")
    articles = pa.table({"article_id": ["new-a"], "colour_group_code": [9]})
    pq.write_table(articles, base / "articles" / "a.parquet")
    (base / "transactions" / ".hidden.csv").write_text("x")
    (base / "transactions" / "partial.csv.part").write_text("x")
    assert files.scan() == 3
    assert [kind for kind, _ in rows_in_log(config)] == ["customers", "articles"] + ["transactions"] * 3
    assert sorted(p.name for p in (base / "transactions" / "done").iterdir()) == ["buys.csv"]
    assert (base / "articles" / "done" / "a.parquet").exists()
    assert {p.name for p in (base / "transactions").iterdir() if p.is_file()} == {".hidden.csv",
                                                                                 "partial.csv.part"}


def test_a_bad_file_moves_to_failed_with_its_error_and_appends_nothing(config, snapshot) -> None:
    files = drop(config, snapshot)
    rows = transaction_rows(snapshot, 6)
    rows[5]["customer_id"] = "nobody"
    (config.ingest_dir / "transactions" / "bad.csv").write_text(csv_text(rows))
    assert files.scan() == 0
    failed = config.ingest_dir / "transactions" / "failed"
    error = json.loads((failed / "bad.csv.error.json").read_text())
    assert (failed / "bad.csv").exists() and error["problems"][0]["row"] == 5
    assert "rows[5].customer_id: unknown customer 'nobody'" in error["detail"]
    assert config.open_log().last_sequence() == 0


def test_a_big_file_goes_in_as_batches_and_a_cut_short_one_is_completed_once(config, snapshot) -> None:
    rows = transaction_rows(snapshot, 10)
    files = drop(config, snapshot)
    path = config.ingest_dir / "transactions" / "big.csv"
    path.write_text(csv_text(rows))
    # A look that died after its first batch: that batch (with the file's key) is already in the log.
    first = files.pending()[0][1]
    content = hashlib.sha256(first.read_bytes()).hexdigest()[:32]
    files.ingestor.ingest("transactions", [{k: str(v) for k, v in r.items()} for r in rows[:4]],
                          key=f"file:{content}:0", text=True)
    assert files.scan() == 1
    batches = config.open_log().read(0)
    assert [len(b) for b in batches] == [4, 4, 2]
    assert sorted(c for b in batches for c in b.rows["customer_id"]) == sorted(r["customer_id"] for r in rows)
    # The same content dropped again is ingested once.
    again = config.ingest_dir / "transactions" / "again.csv"
    again.write_text(csv_text(rows))
    os.utime(again, (time.time() + 5, time.time() + 5))
    assert files.scan() == 1 and config.open_log().last_sequence() == 3
    assert (config.ingest_dir / "transactions" / "done" / "again.csv").exists()
