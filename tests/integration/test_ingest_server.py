"""Ingestion through a real ``python -m serve --state-dir`` process: the write routes are absent without
it; with it, credentials guard both sides, a purchase changes the next answer, new customers and
articles can be created, bought and scored, refusals leave the log alone, the file drop feeds the
graph, a killed worker comes back serving every acknowledged row, and the metrics say so.

The server is eager (``--compile none``): ingestion changes no shape, and compiling three tasks would
only slow the test down.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from models.registry import TASKS as TASK_SPECS
from models.schema import ARTICLE, CUSTOMER
from models.store.records import KINDS
from models.store.snapshot import GraphSnapshot
from serve.bench.metrics_read import scrape, series, value
from serve.bench.process import ServerProcess
from serve.ingest.background import compact_once
from serve.ingest.config import IngestConfig
from serve.ingest.problems import REASONS
from tests.ingest_helpers import READ_KEY, WRITE_KEY, node_ids, transaction_rows
from tests.integration.conftest import SERVER_ARGS
from tests.integration.waits import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WRITE = {"Authorization": f"Bearer {WRITE_KEY}"}
READ = {"Authorization": f"Bearer {READ_KEY}"}
TASKS = ["churn", "sales", "purchase"]


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("state")


@pytest.fixture(scope="module")
def drop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("drop")


@pytest.fixture(scope="module")
def ingesting(artifacts: Path, state: Path, drop: Path) -> Iterator[ServerProcess]:
    with ServerProcess(artifacts, *SERVER_ARGS, "--compile", "none", "--state-dir", str(state),
                       "--ingest-dir", str(drop), log_path=state.parent / "serve.log",
                       env={"RELSERVE_WRITE_KEY": WRITE_KEY, "RELSERVE_READ_KEY": READ_KEY}) as server:
        server.wait_ready(timeout=900)
        yield server


def ingest(server: ServerProcess, kind: str, rows: list[dict], **params: str) -> requests.Response:
    return requests.post(f"{server.url}/ingest/{kind}", params=params, headers=WRITE, json={"rows": rows},
                         timeout=60)


def predict(server: ServerProcess, task: str, body: dict) -> requests.Response:
    return requests.post(f"{server.url}/predict/{task}", headers=READ, json=body, timeout=60)


def status(server: ServerProcess) -> dict:
    return requests.get(f"{server.url}/ingest/status", headers=WRITE, timeout=10).json()


# First in the module: it needs the fresh server, before any test has ingested or refused a row.
def test_every_ingestion_series_is_exported_at_zero_before_the_first_row(ingesting: ServerProcess) -> None:
    text = scrape(ingesting.url)
    assert status(ingesting)["log_sequence"] == 0
    rejected = series(text, "relserve_ingest_rejected_rows_total")
    for kind in KINDS:
        assert series(text, "relserve_ingest_rows_total")[(("kind", kind),)] == 0
        assert series(text, "relserve_ingest_append_seconds_count")[(("kind", kind),)] == 0
        for reason in REASONS:
            assert rejected[(("kind", kind), ("reason", reason))] == 0
    assert series(text, "relserve_compactions_total") == {(): 0}


def test_without_a_state_dir_there_are_no_write_routes(server: ServerProcess,
                                                       snapshot: GraphSnapshot) -> None:
    routes = (("post", "/ingest/transactions"), ("post", "/ingest/customers"), ("get", "/ingest/status"))
    for method, path in routes:
        response = requests.request(method, server.url + path, json={"rows": transaction_rows(snapshot, 1)},
                                    headers=WRITE, timeout=30)
        assert response.status_code == 404, (path, response.text)
    assert requests.post(f"{server.url}/predict/churn", timeout=30,
                         json={"customer_id": node_ids(snapshot, CUSTOMER, 1)[0]}).status_code == 200


@pytest.mark.parametrize(("path", "headers", "status_code"), [
    ("/ingest/transactions", {}, 401), ("/ingest/transactions", {"Authorization": "Bearer nope"}, 403),
    ("/ingest/transactions", READ, 403), ("/predict/churn", {}, 401),
    ("/predict/churn", {"Authorization": "Bearer nope"}, 403), ("/predict/churn", READ, 200),
    ("/predict/churn", WRITE, 200),
])
def test_credentials_on_a_real_server(ingesting: ServerProcess, snapshot: GraphSnapshot, path: str,
                                      headers: dict, status_code: int) -> None:
    before = status(ingesting)["log_sequence"]
    body = ({"rows": transaction_rows(snapshot, 1)} if path.startswith("/ingest")
            else {"customer_id": node_ids(snapshot, CUSTOMER, 1)[0]})
    response = requests.post(ingesting.url + path, headers=headers, json=body, timeout=60)
    assert response.status_code == status_code, response.text
    assert status(ingesting)["log_sequence"] == before


def test_a_purchase_changes_the_next_answer(ingesting: ServerProcess, snapshot: GraphSnapshot) -> None:
    buyer = node_ids(snapshot, CUSTOMER, 1, start=17)[0]
    churn_before = predict(ingesting, "churn", {"customer_id": buyer}).json()
    purchase_before = predict(ingesting, "purchase", {"customer_id": buyer, "k": 12}).json()
    article = next(a for a in node_ids(snapshot, ARTICLE, 50)
                   if a not in {x["article_id"] for x in purchase_before["articles"]})
    row = {**transaction_rows(snapshot, 1)[0], "customer_id": buyer, "article_id": article}
    answer = ingest(ingesting, "transactions", [row], sync="true")
    assert answer.status_code == 200, answer.text
    churn_after = predict(ingesting, "churn", {"customer_id": buyer}).json()
    purchase_after = predict(ingesting, "purchase", {"customer_id": buyer, "k": 12}).json()
    assert churn_after["churn_probability"] != churn_before["churn_probability"]
    assert churn_after["active_last_7d"] is True
    assert purchase_after != purchase_before
    assert status(ingesting)["visible_sequence"] >= answer.json()["sequence"]


def test_new_customers_and_articles_are_created_bought_and_scored(ingesting: ServerProcess,
                                                                  snapshot: GraphSnapshot) -> None:
    assert predict(ingesting, "churn", {"customer_id": "walk-in-1"}).status_code == 404
    customer = {"customer_id": "walk-in-1", "age": 29, "FN": 1.0}
    assert ingest(ingesting, "customers", [customer]).status_code == 200
    article = {"article_id": "0999000001", "colour_group_code": 9}
    assert ingest(ingesting, "articles", [article]).status_code == 200
    buys = [{**transaction_rows(snapshot, 1, day_offset=2)[0], "customer_id": "walk-in-1",
             "article_id": "0999000001"},
            *[{**r, "article_id": "0999000001"}
              for r in transaction_rows(snapshot, 5, day_offset=2, start=30)]]
    assert ingest(ingesting, "transactions", buys, sync="true").status_code == 200
    churn = predict(ingesting, "churn", {"customer_id": "walk-in-1"})
    assert churn.status_code == 200 and churn.json()["active_last_7d"] is True
    sales = predict(ingesting, "sales", {"article_id": "0999000001"})
    assert sales.status_code == 200, sales.text
    ranked = predict(ingesting, "purchase", {"customer_id": "walk-in-1", "k": 100}).json()["articles"]
    assert "0999000001" in {a["article_id"] for a in ranked}


@pytest.mark.parametrize(("kind", "rows", "status_code"), [
    ("transactions", "late", 422), ("transactions", "unknown article", 422), ("customers", "existing", 422),
    ("articles", "empty", 422),
])
def test_bad_batches_leave_the_graph_unchanged(ingesting: ServerProcess, snapshot: GraphSnapshot, kind: str,
                                               rows: str, status_code: int) -> None:
    before = status(ingesting)
    good = transaction_rows(snapshot, 2, day_offset=2, start=40)
    bad = {"late": [*good, transaction_rows(snapshot, 1, day_offset=-60)[0]],
           "unknown article": [*good, {**good[0], "article_id": "no-such-article"}],
           "existing": [{"customer_id": node_ids(snapshot, CUSTOMER, 1)[0]}], "empty": []}[rows]
    response = ingest(ingesting, kind, bad)
    assert response.status_code == status_code and "rows" in response.json()["detail"]
    after = status(ingesting)
    assert after["log_sequence"] == before["log_sequence"]
    assert after["graph"]["delta_rows"] == before["graph"]["delta_rows"]


def test_the_file_drop_feeds_the_graph(ingesting: ServerProcess, snapshot: GraphSnapshot, drop: Path) -> None:
    rows = transaction_rows(snapshot, 8, day_offset=2, start=60)
    header = list(rows[0])
    text = ",".join(header) + "\n" + "".join(",".join(str(r[c]) for c in header) + "\n" for r in rows)
    before = status(ingesting)["log_sequence"]
    (drop / "transactions" / "night.csv.part").write_text(text)
    os.replace(drop / "transactions" / "night.csv.part", drop / "transactions" / "night.csv")
    wait_for(lambda: (drop / "transactions" / "done" / "night.csv").exists(), "the file in done/", 60)
    wait_for(lambda: status(ingesting)["visible_sequence"] > before, "the file's batch served", 60)


def test_a_killed_worker_comes_back_serving_every_acknowledged_row(ingesting: ServerProcess,
                                                                   snapshot: GraphSnapshot) -> None:
    assert ingest(ingesting, "transactions", transaction_rows(snapshot, 3, day_offset=2, start=80),
                  sync="true").status_code == 200
    def purchase_worker() -> int | None:
        return next((pid for pid, role in ingesting.roles(list(TASK_SPECS)).items()
                     if role == "worker:purchase"), None)

    victim = purchase_worker()
    os.kill(victim, signal.SIGKILL)
    # Acknowledged while the worker is gone: durable at once, served by the new worker once it is up.
    rows = transaction_rows(snapshot, 2, day_offset=2, start=90)
    late = ingest(ingesting, "transactions", rows)
    assert late.status_code == 200

    def caught_up() -> bool:
        back = purchase_worker() not in (None, victim) and requests.get(f"{ingesting.url}/health").ok
        return back and status(ingesting)["visible_sequence"] >= late.json()["sequence"]

    wait_for(caught_up, "a new purchase worker, the log served", 300)
    # The new worker maps the owner's latest version at start: its first answers read the late rows.
    answer = predict(ingesting, "purchase", {"customer_id": rows[0]["customer_id"], "k": 12})
    assert answer.status_code == 200 and answer.json()["articles"]


def test_ingestion_metrics(ingesting: ServerProcess, snapshot: GraphSnapshot) -> None:
    ingest(ingesting, "transactions", transaction_rows(snapshot, 2, day_offset=2, start=100), sync="true")
    ingest(ingesting, "transactions", [{"t_dat": "yesterday"}])
    text = scrape(ingesting.url)
    assert value(text, "relserve_ingest_rows_total", kind="transactions") >= 2
    assert value(text, "relserve_ingest_rejected_rows_total", kind="transactions", reason="invalid") >= 1
    assert value(text, "relserve_ingest_requests_total", kind="transactions", status="422") >= 1
    assert value(text, "relserve_auth_failures_total", scope="write", status="401") >= 0
    assert value(text, "relserve_ingest_visible_lag_seconds_count", task="graph") >= 1  # the owner's
    for task in TASKS:
        assert value(text, "relserve_ingest_applied_sequence", task=task) >= 1
        assert value(text, "relserve_ingest_delta_rows", task=task) >= 2
    assert value(text, "relserve_ingest_log_sequence") == status(ingesting)["log_sequence"]
    assert value(text, "relserve_article_key_refreshes_total", task="purchase") >= 1


def test_compaction_moves_every_worker_to_the_new_version_without_a_failed_request(
        ingesting: ServerProcess, snapshot: GraphSnapshot, artifacts: Path, state: Path) -> None:
    """Last in the module: from here on the workers serve a compacted version."""
    customers = [*node_ids(snapshot, CUSTOMER, 5, start=17), "walk-in-1"]
    bodies = [("churn", {"customer_id": c}) for c in customers] + \
             [("purchase", {"customer_id": c, "k": 12}) for c in customers] + \
             [("sales", {"article_id": a}) for a in ["0999000001", *node_ids(snapshot, ARTICLE, 3)]]
    def keyed() -> bool:  # the answers compared below read keys that cover every ingested batch
        now = status(ingesting)
        return now["visible_sequence"] == now["log_sequence"]

    wait_for(keyed, "the purchase keys covering the log", 120)
    before = [predict(ingesting, task, body).json() for task, body in bodies]
    statuses, stop = [], threading.Event()

    def hammer() -> None:
        session = requests.Session()
        while not stop.is_set():
            for task, body in bodies:
                statuses.append(session.post(f"{ingesting.url}/predict/{task}", headers=READ, json=body,
                                             timeout=60).status_code)

    client = threading.Thread(target=hammer)
    client.start()
    try:
        done = compact_once(IngestConfig(state_dir=state), artifacts)
        assert done is not None and done.sequence == status(ingesting)["log_sequence"]

        def moved() -> bool:
            now = status(ingesting)
            return (now["graph"]["snapshot_version"] == done.sequence and now["graph"]["delta_rows"] == 0
                    and now["visible_sequence"] == done.sequence)

        wait_for(moved, "the graph and the purchase keys on the new version", 120)
    finally:
        stop.set()
        client.join(60)
    assert statuses and set(statuses) == {200}
    after = [predict(ingesting, task, body).json() for task, body in bodies]
    for (task, _), old, new in zip(bodies, before, after, strict=True):
        if task == "purchase":
            old_ranks, new_ranks = old["articles"], new["articles"]
            assert [a["article_id"] for a in new_ranks] == [a["article_id"] for a in old_ranks]
            assert [a["score"] for a in new_ranks] == pytest.approx([a["score"] for a in old_ranks], abs=1e-5)
        else:
            field = TASK_SPECS[task].value_field
            assert new[field] == pytest.approx(old[field], abs=1e-5), (task, old, new)
