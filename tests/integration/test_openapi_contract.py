"""``/openapi.json`` is the contract: requests generated from it are answered, and none with a 5xx.

For every operation the server documents, schemathesis draws a few requests from its schemas
(path and query parameters, the JSON body) and they are sent to a real ``python -m serve
--state-dir`` (eager: nothing here depends on compiled shapes; a server of its own, because the
generated customers and articles are really ingested). Every answer must be below 500, and a
request with a body must be refused only for what no schema can state: an id the graph does not
hold (404, or an ingestion problem of reason ``unknown_id``, ``exists``, ``late``, ``future``), a
``batch_id`` already used for another batch (409; drawn values repeat across examples), an
id whose non-ASCII text is longer in UTF-8 bytes than ``maxLength`` characters, or a body over the
byte limit. An integral number is sent as an integer: JSON Schema's ``integer`` admits ``5.0``,
which the ingestion rules refuse (a prediction body takes it; tests/unit/test_openapi_schemas.py).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings

from serve.bench.process import ServerProcess
from serve.config import ServeConfig
from tests.ingest_helpers import WRITE_KEY
from tests.integration.conftest import SERVER_ARGS
from tests.unit.test_openapi_schemas import as_integers

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLES = 12  # per operation: enough to cover each branch of a schema, few enough for seconds
DATA_REASONS = {"unknown_id", "exists", "late", "future"}
HEADERS = {"Authorization": f"Bearer {WRITE_KEY}", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def contract_server(artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    state = tmp_path_factory.mktemp("contract-state")
    with ServerProcess(artifacts, *SERVER_ARGS, "--compile", "none", "--state-dir", str(state),
                       log_path=state.parent / "contract-serve.log",
                       env={"RELSERVE_WRITE_KEY": WRITE_KEY}) as server:
        server.wait_ready(timeout=900)
        yield server


def acceptable(path: str, status: int, sent: bytes, answer: requests.Response) -> bool:
    """Whether a schema-valid body was accepted, or refused as no schema can rule out (module docstring)."""
    if status == 200:
        return True
    if status == 413:
        return len(sent) > ServeConfig.max_payload_bytes
    if status == 404:
        return path.startswith("/predict/")
    if status == 409:
        return path.startswith("/ingest/") and "already used" in answer.json()["detail"]
    if status != 422:
        return False
    if path.startswith("/predict/"):
        return "bytes in UTF-8" in answer.json()["detail"]
    problems = answer.json().get("problems", [])
    return bool(problems) and all(p["reason"] in DATA_REASONS or "bytes of UTF-8" in p["problem"]
                                  for p in problems)


def sender(url: str, session: requests.Session, operation: Any, seen: Counter) -> Callable[[], None]:
    """A hypothesis test sending ``operation``'s generated requests to ``url`` and counting the statuses."""

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(operation.as_strategy())
    def send(case: Any) -> None:
        body = as_integers(case.body) if isinstance(case.body, dict | list) else None
        data = None if body is None else json.dumps(body).encode()
        query = {k: json.dumps(v) if isinstance(v, bool) else v for k, v in (case.query or {}).items()}
        answer = session.request(case.method, url + case.formatted_path, params=query, data=data,
                                 timeout=60, headers=HEADERS)
        where = (case.method, case.formatted_path, body, answer.status_code, answer.text[:300])
        assert answer.status_code < 500, where
        if data is not None:
            assert acceptable(case.path, answer.status_code, data, answer), where
        seen[answer.status_code] += 1

    return send


def test_generated_requests_are_answered_and_refused_only_for_data(contract_server):
    spec = requests.get(f"{contract_server.url}/openapi.json", timeout=30).json()
    session = requests.Session()
    outcomes: dict[str, Counter] = {}
    for result in schemathesis.openapi.from_dict(spec).get_all_operations():
        operation = result.ok()
        sender(contract_server.url, session, operation, outcomes.setdefault(operation.label, Counter()))()
    with_bodies = {"POST /predict/churn", "POST /predict/sales", "POST /predict/purchase",
                   "POST /ingest/transactions", "POST /ingest/customers", "POST /ingest/articles"}
    assert with_bodies <= set(outcomes), sorted(outcomes)
    # Generated bodies are accepted, not only refused for data: the node routes create new ids.
    for name in with_bodies - {"POST /ingest/transactions"}:  # generated ids are never known customers
        assert outcomes[name][200] > 0, (name, outcomes[name])
