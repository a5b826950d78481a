"""A raw shop export, read through the shipped Online Retail II spec, trained, served and batch-scored:
ids as the shop has them everywhere a user sees one.

The export (:mod:`raw_export`) is typed as awkwardly as real exports are: the customer number a
float with NaN for guest lines, the invoice date a Parquet timestamp. One training run (1 eager
epoch) and one eager server for the module.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import requests
from raw_export import REPO, ExportStyle, write_export

from loadtest.id_pool import IdPool
from serve.bench.process import ServerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXPORT = "online_retail_II_2010_2011.parquet"


def run(module: str, *args: str) -> None:
    result = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                            timeout=1200, cwd=REPO)
    assert result.returncode == 0, f"{module} failed:\n{result.stderr[-3000:]}"


@pytest.fixture(scope="module")
def data(tiny_csv_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    style = ExportStyle(float_customers=True, timestamp_dates=True)
    return write_export(tiny_csv_dir, tmp_path_factory.mktemp("shop"), style=style)


@pytest.fixture(scope="module")
def shop_ids(data: Path) -> dict[str, set[str]]:
    """The customer numbers and stock codes of the cleaned lines, as the shop writes them."""
    raw = pq.read_table(data / EXPORT)
    kept = raw.filter(pc.and_(pc.invert(pc.is_nan(raw["Customer ID"])),
                              pc.invert(pc.starts_with(raw["Invoice"], "C"))))
    kept = kept.filter(pc.and_(pc.greater(kept["Quantity"], 0), pc.greater(kept["Price"], 0)))
    return {"customer": {str(int(c)) for c in kept["Customer ID"].to_pylist()},
            "article": set(kept["StockCode"].to_pylist())}


@pytest.fixture(scope="module")
def artifacts(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("shop_artifacts")
    run("training.fit", "--data", str(data), "--task", "all", "--out", str(out), "--epochs", "1",
        "--compile", "none", "--serve-batch-size", "8", "--quiet")
    return out


@pytest.fixture(scope="module")
def server(artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    log_path = tmp_path_factory.mktemp("shop_server") / "serve.log"
    with ServerProcess(artifacts, "--max-batch-size", "8", "--compile", "none",
                       log_path=log_path) as process:
        process.wait_ready(timeout=900)
        yield process


def post(server: ServerProcess, task: str, body: dict) -> requests.Response:
    return requests.post(f"{server.url}/predict/{task}", json=body, timeout=60)


def test_a_customer_number_is_answered_as_a_number_or_as_text(server: ServerProcess) -> None:
    as_number, as_text = post(server, "churn", {"customer_id": 12346}), post(server, "churn",
                                                                             {"customer_id": "12346"})
    assert as_number.status_code == as_text.status_code == 200, as_number.text
    assert as_number.json() == as_text.json() and as_text.json()["customer_id"] == "12346"
    assert post(server, "churn", {"customer_id": "12346.0"}).status_code == 404  # the id is 12346


def test_answers_name_the_shop_s_stock_codes(server: ServerProcess, shop_ids: dict[str, set[str]]) -> None:
    code = next(c for c in sorted(shop_ids["article"]) if c.endswith("A"))
    sales = post(server, "sales", {"article_id": code})
    assert sales.status_code == 200 and sales.json()["article_id"] == code
    answer = post(server, "purchase", {"customer_id": 12346, "k": 20}).json()
    ranked = [a["article_id"] for a in answer["articles"]]
    assert len(ranked) == 20 and set(ranked) <= shop_ids["article"]


def test_batch_scores_and_the_load_test_use_the_shop_s_ids(artifacts: Path, shop_ids: dict[str, set[str]],
                                                           tmp_path: Path) -> None:
    run("serve.score", "--artifacts", str(artifacts), "--task", "all", "--out", str(tmp_path),
        "--compile", "none", "--quiet")
    with open(tmp_path / "purchase.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["customer_id", "prediction"]  # the Kaggle submission layout
    assert {r["customer_id"] for r in rows} == shop_ids["customer"]
    assert all(set(r["prediction"].split(" ")) <= shop_ids["article"] for r in rows)
    with open(tmp_path / "sales.csv", newline="") as f:
        assert {r["article_id"] for r in csv.DictReader(f)} == shop_ids["article"]
    pool = IdPool.from_snapshot(artifacts / "snapshot")
    assert set(pool.customers) == shop_ids["customer"] and set(pool.articles) == shop_ids["article"]
    assert not set(pool.unknown_articles) & shop_ids["article"]
