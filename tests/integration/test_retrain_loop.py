"""The retrain loop end to end, as the README's recipe runs it: a week of rows ingested into a running
server, ``python -m training.fit --data STATE_DIR`` (a small budget) writes the next version of every
task, and the server loads it by itself while it keeps answering.

The server is eager (``--compile none``) and ``--force``: a one-epoch model trained on the tiny data
need not beat its baselines, and the deployment guard is tested in test_model_repository.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from models.registry import TASK_NAMES, TASKS
from models.store.snapshot import GraphSnapshot
from serve.bench.process import ServerProcess
from tests.ingest_helpers import CUT, WRITE_KEY, transaction_batches
from tests.integration.conftest import REPO, SERVER_ARGS
from tests.integration.waits import wait_for
from training.snapshot import main as build_snapshot

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WRITE = {"Authorization": f"Bearer {WRITE_KEY}"}
COLUMNS = {"day": "t_dat", "customer_id": "customer_id", "article_id": "article_id", "price": "price",
           "sales_channel_id": "sales_channel_id"}


def _rows(columns: dict[str, list]) -> list[dict]:
    """A log batch's columns back as the API's rows (days as dates)."""
    from models.schema import day_to_date

    count = len(columns["day"])
    return [{COLUMNS[name]: (day_to_date(values[i]).isoformat() if name == "day" else values[i])
             for name, values in columns.items()} for i in range(count)]


def _versions(server: ServerProcess) -> dict[str, int]:
    models = requests.get(f"{server.url}/models", timeout=30).json()["models"]
    return {task: m["version"] for task, m in models.items() if m["loading"] is None}


def _answer_versions(server: ServerProcess, snapshot: GraphSnapshot) -> dict[str, str]:
    versions = {}
    for task in TASK_NAMES:
        entity = TASKS[task].entity_type
        body = {TASKS[task].id_field: snapshot.ids[entity][0].decode()}
        answer = requests.post(f"{server.url}/predict/{task}", json=body, timeout=60)
        assert answer.status_code == 200, answer.text
        versions[task] = answer.headers["x-model-version"]
    return versions


def test_ingest_retrain_and_the_server_swaps_by_itself(tiny_csv_dir: Path, trained_artifacts: Path,
                                                       tmp_path: Path) -> None:
    artifacts, state = tmp_path / "artifacts", tmp_path / "state"
    cut = ["--data", str(tiny_csv_dir), "--out", str(artifacts), "--until", CUT, "--quiet"]
    assert build_snapshot(cut) == 0
    for task in TASK_NAMES:
        shutil.copytree(trained_artifacts / task, artifacts / task)
    snapshot = GraphSnapshot.open(artifacts / "snapshot")
    with ServerProcess(artifacts, *SERVER_ARGS, "--compile", "none", "--state-dir", str(state),
                       "--model-poll", "1", "--force", log_path=tmp_path / "serve.log",
                       env={"RELSERVE_WRITE_KEY": WRITE_KEY}) as server:
        server.wait_ready(timeout=900)
        assert _answer_versions(server, snapshot) == {task: "1" for task in TASK_NAMES}

        batches = transaction_batches(tiny_csv_dir, CUT, 150)
        for batch in batches:
            response = requests.post(f"{server.url}/ingest/transactions", params={"sync": "true"},
                                     headers=WRITE, json={"rows": _rows(batch.rows)}, timeout=120)
            assert response.status_code == 200, response.text

        command = [sys.executable, "-m", "training.fit", "--data", str(state), "--out", str(artifacts),
                   "--task", "all", "--epochs", "1", "--max-steps-per-epoch", "2", "--compile", "none",
                   "--serve-batch-size", SERVER_ARGS[1], "--quiet"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=1200, cwd=REPO)
        assert result.returncode == 0, result.stderr[-3000:]

        for task in TASK_NAMES:
            config = json.loads((artifacts / task / "2" / "config.json").read_text())
            assert config["training"]["log_sequence"] == len(batches)  # trained on every ingested row
        wait_for(lambda: _versions(server) == dict.fromkeys(TASK_NAMES, 2), "version 2 serving everywhere")
        assert _answer_versions(server, snapshot) == {task: "2" for task in TASK_NAMES}
        assert "Traceback" not in server.log()
