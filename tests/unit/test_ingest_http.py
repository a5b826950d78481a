"""The ingestion routes over real HTTP (uvicorn in a thread, no model): credentials, every refusal and
its status, idempotent retries, the three body formats, ``?sync=true`` and ``GET /ingest/status``.
Every refused batch leaves the log's sequence where it was."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException

from models.store.shared_header import GraphHeader, Published, shared_dir
from models.store.shared_publisher import remove_shared
from models.store.snapshot import GraphSnapshot
from serve.http.errors import http_error_handler, validation_error_handler
from serve.ingest.auth import CredentialError, Credentials, KeyAuth
from serve.ingest.config import IngestConfig
from serve.ingest.limits import BodyLimit
from serve.ingest.routes import add_routes
from serve.ingest.service import IngestService
from tests.ingest_helpers import (
    READ_KEY,
    WRITE_KEY,
    build_snapshot,
    free_port,
    served_in_thread,
    transaction_rows,
)

WRITE = {"Authorization": f"Bearer {WRITE_KEY}"}
DRAINING = [False]


@pytest.fixture(scope="module")
def snapshot(tiny_csv_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> GraphSnapshot:
    return build_snapshot(tiny_csv_dir, tmp_path_factory.mktemp("snapshot"))


def serve_app(config: IngestConfig, snapshot: GraphSnapshot) -> Iterator[str]:
    app = FastAPI()
    service = IngestService(config, snapshot.directory, keyed=True)
    add_routes(app, service, draining=lambda: DRAINING[0])
    app.add_api_route("/predict/churn", lambda: {"ok": True}, methods=["POST"])
    app.add_exception_handler(HTTPException, http_error_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_middleware(BodyLimit, max_size=16_384, ingest_max_size=config.max_bytes)
    app.add_middleware(KeyAuth, credentials=Credentials(WRITE_KEY.encode(), READ_KEY.encode()),
                       read_paths=frozenset({"/predict/churn"}), guard_writes=True)
    with served_in_thread(app) as url:
        yield url


@pytest.fixture()
def url(tmp_path: Path, snapshot: GraphSnapshot) -> Iterator[str]:
    config = IngestConfig(state_dir=tmp_path / "state", max_rows=5, max_bytes=2048, sync_timeout_s=0.3)
    yield from serve_app(config, snapshot)


def sequence(url: str) -> int:
    return requests.get(f"{url}/ingest/status", headers=WRITE, timeout=10).json()["log_sequence"]


def post(url: str, rows: object, headers: dict | None = None, kind: str = "transactions",
         **kwargs: object) -> requests.Response:
    if "data" not in kwargs and "json" not in kwargs:
        kwargs["json"] = {"rows": rows}
    return requests.post(f"{url}/ingest/{kind}", headers={**WRITE, **(headers or {})}, timeout=10, **kwargs)


@pytest.mark.parametrize(("path", "authorization", "status", "says"), [
    ("/ingest/transactions", None, 401, "missing credentials"),
    ("/ingest/transactions", "Basic dzp3", 401, "missing credentials"),
    ("/ingest/transactions", "Bearer wrong", 403, "invalid credentials"),
    ("/ingest/transactions", f"Bearer {READ_KEY}", 403, "may read but not write"),
    ("/ingest/status", f"Bearer {READ_KEY}", 403, "may read but not write"),
    ("/predict/churn", None, 401, "missing credentials"),
    ("/predict/churn", "Bearer wrong", 403, "invalid credentials"),
    ("/predict/churn", f"Bearer {READ_KEY}", 200, None),
    ("/predict/churn", f"bearer {WRITE_KEY}", 200, None),
])
def test_credentials(url: str, snapshot: GraphSnapshot, path: str, authorization: str | None, status: int,
                     says: str | None) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    method = requests.get if path == "/ingest/status" else requests.post
    body = {"rows": transaction_rows(snapshot, 1)}
    response = method(f"{url}{path}", headers=headers, json=body, timeout=10)
    assert response.status_code == status, response.text
    if says is not None:
        assert says in response.json()["detail"]
        assert ("www-authenticate" in response.headers) == (status == 401)
    assert sequence(url) == 0


def test_keys_come_from_the_environment_or_a_file(tmp_path: Path) -> None:
    (tmp_path / "key").write_text("from-file\n")
    assert Credentials.from_env({"RELSERVE_WRITE_KEY_FILE": str(tmp_path / "key")}).write == b"from-file"
    assert Credentials.from_env({}) == Credentials(None, None)
    for env in ({"RELSERVE_WRITE_KEY": ""}, {"RELSERVE_READ_KEY": "has space"},
                {"RELSERVE_WRITE_KEY": "a", "RELSERVE_WRITE_KEY_FILE": "f"},
                {"RELSERVE_WRITE_KEY_FILE": str(tmp_path / "missing")}):
        with pytest.raises(CredentialError):
            Credentials.from_env(env)


def test_a_batch_is_acknowledged_with_its_sequence(url: str, snapshot: GraphSnapshot) -> None:
    response = post(url, transaction_rows(snapshot, 3))
    assert response.status_code == 200 and response.json() == {"accepted": 3, "sequence": 1}
    assert post(url, transaction_rows(snapshot, 2, start=4)).json() == {"accepted": 2, "sequence": 2}


@pytest.mark.parametrize("case", ["415", "413 bytes", "413 chunked", "413 rows", "422 row", "422 body",
                                  "422 sync", "422 key", "422 batch_id"])
def test_every_refusal_leaves_the_log_unchanged(url: str, snapshot: GraphSnapshot, case: str) -> None:
    post(url, transaction_rows(snapshot, 1))
    rows = transaction_rows(snapshot, 2, start=3)
    bad = {**rows[1], "price": "free"}
    big = json.dumps({"rows": transaction_rows(snapshot, 20)}).encode()
    response = {
        "415": lambda: post(url, None, data=b"t_dat\n", headers={"Content-Type": "text/plain"}),
        "413 bytes": lambda: post(url, None, data=big, headers={"Content-Type": "application/json"}),
        "413 chunked": lambda: post(url, None, data=iter([big[:3000], big[3000:]]),
                                    headers={"Content-Type": "application/json"}),
        "413 rows": lambda: post(url, transaction_rows(snapshot, 6)),
        "422 row": lambda: post(url, [rows[0], bad]),
        "422 body": lambda: post(url, None, data=b'{"rows": [', headers={"Content-Type": "application/json"}),
        "422 sync": lambda: post(url, rows, params={"sync": "perhaps"}),
        "422 key": lambda: post(url, rows, headers={"Idempotency-Key": "x" * 300}),
        "422 batch_id": lambda: post(url, None, json={"rows": rows, "batch_id": "a"},
                                     headers={"Idempotency-Key": "b"}),
    }[case]()
    assert response.status_code == int(case[:3]), response.text
    assert isinstance(response.json()["detail"], str)
    if case == "422 row":
        assert response.json()["detail"].startswith("rows[1].price: must be a number")
        assert response.json()["problems"] == [
            {"row": 1, "field": "price", "problem": "must be a number, got str", "reason": "invalid"}]
    assert sequence(url) == 1


def test_a_retried_batch_is_answered_again_and_appended_once(url: str, snapshot: GraphSnapshot) -> None:
    rows = transaction_rows(snapshot, 2)
    first = post(url, rows, headers={"Idempotency-Key": "order-7"})
    retry = post(url, rows, headers={"Idempotency-Key": "order-7"})
    assert first.json() == retry.json() == {"accepted": 2, "sequence": 1}
    assert "idempotent-replayed" not in first.headers and retry.headers["idempotent-replayed"] == "true"
    by_body = post(url, None, json={"rows": rows, "batch_id": "order-7"})
    assert by_body.json()["sequence"] == 1
    other = post(url, transaction_rows(snapshot, 1), headers={"Idempotency-Key": "order-7"})
    assert other.status_code == 409 and "already used" in other.json()["detail"]
    assert sequence(url) == 1


def test_ndjson_and_csv_bodies(url: str, snapshot: GraphSnapshot) -> None:
    rows = transaction_rows(snapshot, 2)
    ndjson = "\n".join(json.dumps(r) for r in rows).encode()
    answer = post(url, None, data=ndjson, headers={"Content-Type": "application/x-ndjson"})
    assert answer.json()["accepted"] == 2
    header = list(rows[0])
    csv = ",".join(header) + "\n" + "\n".join(",".join(str(r[c]) for c in header) for r in rows) + "\n"
    answer = post(url, None, data=csv.encode(), headers={"Content-Type": "text/csv; charset=utf-8"})
    assert answer.json() == {"accepted": 2, "sequence": 2}


def test_sync_waits_for_the_graph_and_the_keys(url: str, snapshot: GraphSnapshot, tmp_path: Path) -> None:
    late = post(url, transaction_rows(snapshot, 1), params={"sync": "true"})
    assert late.status_code == 504 and "within 0.3 s (--sync-timeout)" in late.json()["detail"]
    assert late.json()["sequence"] == 1 and "durable as sequence 1" in late.json()["detail"]
    # This process stands in for the graph owner: its header says what is published.
    directory = shared_dir(tmp_path / "state")
    owner = GraphHeader(directory, create=True)
    try:
        owner.publish(Published(1, 2, 0, 2, os.getpid(), 0.0, 1, 2, snapshot.directory))  # graph and keys
        assert post(url, transaction_rows(snapshot, 1, start=2), params={"sync": "true"}).status_code == 200
        status = requests.get(f"{url}/ingest/status", headers=WRITE, timeout=10).json()
        assert status["log_sequence"] == status["visible_sequence"] == 2
        assert status["graph"]["sequence"] == status["graph"]["keys_sequence"] == 2
        owner.publish(Published(2, 3, 0, 3, os.getpid(), 0.0, 1, 2, snapshot.directory))  # keys not yet
        assert post(url, transaction_rows(snapshot, 1, start=3), params={"sync": "true"}).status_code == 504
        status = requests.get(f"{url}/ingest/status", headers=WRITE, timeout=10).json()
        assert (status["applied_sequence"], status["visible_sequence"]) == (3, 2)
        assert status["graph"]["keys_sequence"] == 2
    finally:
        remove_shared(directory)


def test_draining_refuses_new_batches(url: str, snapshot: GraphSnapshot) -> None:
    DRAINING[0] = True
    try:
        assert post(url, transaction_rows(snapshot, 1)).status_code == 503
    finally:
        DRAINING[0] = False
    assert sequence(url) == 0


def test_an_unreachable_broker_is_a_503(tmp_path: Path, snapshot: GraphSnapshot) -> None:
    config = IngestConfig(state_dir=tmp_path / "state", log=f"redis://127.0.0.1:{free_port()}/0")
    for url in serve_app(config, snapshot):
        response = post(url, transaction_rows(snapshot, 1))
        assert response.status_code == 503 and "unavailable" in response.json()["detail"]
        assert response.headers["retry-after"] == "1"
