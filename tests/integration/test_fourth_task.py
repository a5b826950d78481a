"""One task = one registry entry: a fourth task, defined in the tests only (``tests/toy_task.py``),
trains, evaluates, serves and batch-scores with no edit to relserve.

Training and evaluation run in this process on the registered entry; the server and the batch
scorer are real child processes that learn of the task through ``RELSERVE_TASK_MODULES``.
"""

from __future__ import annotations

import csv
import importlib
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import torch

from models.registry import TASKS, TaskSpec, register_task, unregister_task
from models.runtime.bundle import METRICS_FILE, SNAPSHOT_DIR
from models.runtime.inference import TaskInference
from models.schema import CUSTOMER
from models.store.snapshot import GraphSnapshot
from serve.bench.process import ServerProcess
from training.fit.data import task_splits
from training.fit.evaluate import evaluate_model
from training.fit.run import main
from training.tasks.metrics import with_nmae

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
ENV = {"RELSERVE_TASK_MODULES": "tests.toy_task",
       "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}
MAX_BATCH = "8"
SAMPLE = 24  # customers compared between the server, the offline path and the scored file


@pytest.fixture(scope="module")
def spec() -> Iterator[TaskSpec]:
    """The toy task, registered in this process for this module only."""
    toy = importlib.import_module("tests.toy_task")
    if toy.NAME not in TASKS:
        register_task(toy.SPEC)
    yield toy.SPEC
    unregister_task(toy.NAME)


@pytest.fixture(scope="module")
def toy_artifacts(spec: TaskSpec, tiny_csv_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m training.fit --task <toy>`` (in-process; its entry's recipe keeps it to 3 steps)."""
    out = tmp_path_factory.mktemp("toy_artifacts")
    code = main(["--data", str(tiny_csv_dir), "--task", spec.name, "--out", str(out), "--compile", "none",
                 "--serve-batch-size", MAX_BATCH, "--quiet"])
    assert code == 0, "training.fit failed on the toy task"
    return out


@pytest.fixture(scope="module")
def toy_snapshot(toy_artifacts: Path) -> GraphSnapshot:
    return GraphSnapshot.open(toy_artifacts / SNAPSHOT_DIR)


@pytest.fixture(scope="module")
def toy_server(toy_artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    log_path = tmp_path_factory.mktemp("toy_server") / "serve.log"
    with ServerProcess(toy_artifacts, "--max-batch-size", MAX_BATCH, "--compile", "none", log_path=log_path,
                       env=ENV) as process:
        process.wait_ready(timeout=300)
        yield process


def customers(snapshot: GraphSnapshot) -> list[str]:
    ids = snapshot.ids[CUSTOMER]
    return [ids[i].decode() for i in range(0, len(ids), max(1, len(ids) // SAMPLE))]


def served(server: ServerProcess, spec: TaskSpec, ids: list[str]) -> list[dict]:
    answers = [requests.post(server.url + spec.path, json={spec.id_field: i}, timeout=60) for i in ids]
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    return [a.json() for a in answers]


def test_it_trains_and_evaluates_on_its_own_metrics_and_baselines(spec, toy_artifacts, toy_snapshot):
    doc = json.loads((toy_artifacts / spec.name / METRICS_FILE).read_text())
    assert (doc["task"], doc["primary"], doc["higher_is_better"]) == (spec.name, "mae", False)
    for split in ("val", "test"):
        assert set(doc[split]["baselines"]) == set(spec.baselines) == {"last_week", "lightgbm"}
        for metrics in (doc[split]["model"], *doc[split]["baselines"].values()):
            assert list(spec.metrics) == ["mae", "total_ratio"]
            assert list(metrics) == ["mae", "nmae", "total_ratio"]  # NMAE beside any MAE
            assert all(math.isfinite(v) for v in metrics.values())
    test = task_splits(spec.name, toy_snapshot.transactions(), toy_snapshot)["test"]
    inference = TaskInference.from_bundle(toy_artifacts / spec.name, toy_snapshot, compile="none")
    metrics = with_nmae(evaluate_model(inference, test), doc["target_std"])
    assert metrics == pytest.approx(doc["test"]["model"], rel=1e-6, abs=1e-9)


def test_it_is_served_on_its_path_with_its_answer_field(spec, toy_artifacts, toy_snapshot, toy_server):
    ids = customers(toy_snapshot)
    answers = served(toy_server, spec, ids)
    assert [list(a) for a in answers] == [["customer_id", "spend_7d", "active_last_28d"]] * len(ids)
    inference = TaskInference.from_bundle(toy_artifacts / spec.name, toy_snapshot, compile="none")
    entity = torch.as_tensor(toy_snapshot.lookup(CUSTOMER, ids))
    offline = inference.run(entity)
    assert [a["spend_7d"] for a in answers] == pytest.approx(offline.values.tolist(), rel=1e-4, abs=1e-5)
    assert [a["active_last_28d"] for a in answers] == offline.extras["active_last_28d"].tolist()
    assert {a["active_last_28d"] for a in answers} == {True, False}
    paths = requests.get(toy_server.url + "/openapi.json", timeout=30).json()["paths"]
    assert spec.path in paths and TASKS["churn"].path not in paths  # only the bundles it was given
    unknown = requests.post(toy_server.url + spec.path, json={"customer_id": "0" * 64}, timeout=60)
    assert unknown.status_code == 404


def test_it_is_batch_scored_as_the_server_answers(spec, toy_artifacts, toy_snapshot, toy_server, tmp_path):
    out = tmp_path / f"{spec.name}.csv"
    done = subprocess.run([sys.executable, "-m", "serve.score", "--artifacts", str(toy_artifacts), "--task",
                           spec.name, "--out", str(out), "--compile", "none", "--quiet"],
                          capture_output=True, text=True, timeout=600, cwd=REPO, env={**os.environ, **ENV})
    assert done.returncode == 0, done.stderr[-3000:]
    with open(out, newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == ["customer_id", "spend_7d", "active_last_28d"]
        written = {row["customer_id"]: row for row in reader}
    assert len(written) == toy_snapshot.num_nodes[CUSTOMER]
    ids = customers(toy_snapshot)
    answers = served(toy_server, spec, ids)
    assert [float(written[i]["spend_7d"]) for i in ids] == pytest.approx(
        [a["spend_7d"] for a in answers], rel=1e-4, abs=1e-5)
    flags = [str(a["active_last_28d"]).lower() for a in answers]
    assert [written[i]["active_last_28d"] for i in ids] == flags
