"""GET /models and POST /admin/models/{task}/load over real HTTP (uvicorn in a thread, no model): a fake
worker follows the orders as serve.versions.swap does, so every answer of the route is reached quickly."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError

from serve.http.errors import validation_error_handler
from serve.ingest.auth import Credentials
from serve.versions.admin import ModelAdmin, add_routes
from serve.versions.model_control import ModelControl, WorkerState
from serve.versions.models_config import ModelsConfig
from tests.ingest_helpers import READ_KEY, WRITE_KEY, served_in_thread
from tests.unit.test_model_versions import write_version

WRITE = {"Authorization": f"Bearer {WRITE_KEY}"}
BROKEN = 3  # the fake worker refuses this version, as a worker refuses one that does not load


class FakeWorker:
    """Follows the churn orders like serve.versions.swap.ModelSlot, in a thread, without loading anything."""

    def __init__(self, control: ModelControl) -> None:
        self.control = control
        self.state = WorkerState("churn", os.getpid(), 1, time.time())
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        self.control.report(self.state)
        while not self.stop.wait(0.02):
            order = self.control.current_order("churn")
            if order is None or order.id <= self.state.order:
                continue
            self.state.order = order.id
            if order.version == BROKEN:
                self.state.outcome, self.state.reason = "refused", "weights.safetensors: checksum differs"
            else:
                self.state.version, self.state.outcome, self.state.reason = order.version, "serving", None
                self.state.forced = order.force
            self.control.report(self.state)


@pytest.fixture
def admin(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A served churn with versions 1 (serving), 2 (better), 3 (broken), 4 (worse on validation)."""
    artifacts = tmp_path / "artifacts"
    for version, val in ((1, 0.7), (2, 0.75), (3, 0.8), (4, 0.65)):
        write_version(artifacts / "churn" / str(version), val=val)
    control = ModelControl(tmp_path / "control")
    control.order("churn", 1, source="start-up")
    worker = FakeWorker(control)
    worker.thread.start()
    keys = getattr(request, "param", (WRITE_KEY.encode(), READ_KEY.encode()))
    app = FastAPI()
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    add_routes(app, ModelAdmin(control, artifacts, {"churn": 1}, ModelsConfig(), Credentials(*keys)))
    with served_in_thread(app) as url:
        yield url
        worker.stop.set()


def load(url: str, query: str, headers: dict | None = WRITE) -> requests.Response:
    return requests.post(f"{url}/admin/models/churn/load?{query}", headers=headers, timeout=30)


def test_models_lists_the_serving_version_with_its_metrics(admin: str) -> None:
    body = requests.get(f"{admin}/models", timeout=10).json()
    churn = body["models"]["churn"]
    assert churn["version"] == 1 and churn["warm"] and churn["loading"] is None
    assert churn["versions"] == [1, 2, 3, 4] and churn["metrics"]["val"]["model"] == 0.7
    assert churn["last_order"]["source"] == "start-up" and churn["workers"][0]["version"] == 1


def test_loading_switches_refuses_and_is_guarded(admin: str) -> None:
    answer = load(admin, "version=2")
    assert answer.status_code == 200 and answer.json()["model"]["version"] == 2
    assert load(admin, "version=2").json() == {"task": "churn", "version": 2, "outcome": "serving",
                                               "changed": False}
    refused = load(admin, f"version={BROKEN}")
    assert refused.status_code == 422 and "checksum" in refused.json()["detail"]
    assert refused.json()["serving"] == 2
    worse = load(admin, "version=4")
    assert worse.status_code == 409 and "worse than the serving version 2" in worse.json()["detail"]
    assert "force=true" in worse.json()["detail"]
    forced = load(admin, "version=4&force=true")
    assert forced.status_code == 200 and forced.json()["model"]["forced"]
    assert load(admin, "version=1&wait=false").status_code == 202


@pytest.mark.parametrize(("query", "status", "detail"), [
    ("version=9", 404, "no version 9 of churn"),
    ("version=0", 422, "version"),
    ("version=x", 422, "version"),
    ("", 422, "version"),
])
def test_bad_loads_name_the_problem(admin: str, query: str, status: int, detail: str) -> None:
    answer = load(admin, query)
    assert answer.status_code == status and detail in answer.json()["detail"]
    other = requests.post(f"{admin}/admin/models/sales/load?version=1", headers=WRITE, timeout=10)
    assert other.status_code == 404 and "does not serve 'sales'" in other.json()["detail"]


def test_the_load_route_needs_the_write_key(admin: str) -> None:
    missing = load(admin, "version=2", headers=None)
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
    assert load(admin, "version=2", headers={"Authorization": "Bearer nope"}).status_code == 403
    assert load(admin, "version=2", headers={"Authorization": f"Bearer {READ_KEY}"}).status_code == 403
    assert requests.get(f"{admin}/models", timeout=10).json()["models"]["churn"]["version"] == 1


@pytest.mark.parametrize("admin", [(None, None)], indirect=True)
def test_without_a_write_key_the_load_route_says_how_to_set_one(admin: str) -> None:
    answer = load(admin, "version=2")
    assert answer.status_code == 403 and "RELSERVE_WRITE_KEY" in answer.json()["detail"]
