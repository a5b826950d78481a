"""Bundles record their input definitions: a changed window, version or snapshot column is refused
with one line naming it; an unchanged or old-format bundle loads; ``python -m serve`` says the same."""

from __future__ import annotations

import dataclasses
import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import models.feature_definitions as definitions
import models.runtime.bundle_inputs as bundle_inputs
from models.feature_definitions import (
    FEATURE_DEFINITION_V1,
    FEATURE_VERSION,
    NUM_TEMPORAL,
    feature_definition,
    snapshot_schema,
)
from models.graph.features import table_specs
from models.graph.sampler import SamplerConfig, TemporalSampler
from models.nn.config import ModelConfig
from models.nn.model import TaskModel
from models.runtime.bundle import (
    CONFIG_FILE,
    SNAPSHOT_DIR,
    BundleConfig,
    BundleError,
    load_bundle,
    save_bundle,
)
from models.runtime.bundle_inputs import differences
from models.runtime.inference import fitted_ladder
from models.schema import CUSTOMER
from models.store.snapshot import GraphSnapshot
from models.store.tables import RelTables
from training.synth.tables import SyntheticSize, synthetic_tables

REPO = Path(__file__).resolve().parents[2]
TASK = "churn"


@pytest.fixture(scope="module")
def tables() -> RelTables:
    return synthetic_tables(SyntheticSize(num_customers=60, num_articles=25, num_transactions=900,
                                          num_days=30), seed=1)


@pytest.fixture(scope="module")
def artifacts(tables: RelTables, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``<dir>/snapshot/`` and an untrained ``<dir>/churn/`` bundle of it (treat as read-only)."""
    root = tmp_path_factory.mktemp("artifacts")
    snapshot = GraphSnapshot.build(tables, root / SNAPSHOT_DIR, progress=False)
    torch.manual_seed(0)
    model = TaskModel(TASK, table_specs(snapshot), ModelConfig(hidden=16, head_hidden=16, embedding_dim=8))
    sampler = TemporalSampler(snapshot, SamplerConfig((4, 3), "last"))
    config = BundleConfig(task=TASK, model=model.config, sampler=sampler.config, specs=table_specs(snapshot),
                          ladders={CUSTOMER: fitted_ladder(snapshot, sampler, CUSTOMER, 4)}, max_batch_size=4,
                          fingerprint=snapshot.fingerprint, snapshot_schema=snapshot_schema(snapshot))
    save_bundle(root / TASK, config, model.eval())
    return root


def copy_with(artifacts: Path, tmp_path: Path, edit=None) -> Path:
    """A copy of the artifacts whose bundle's ``config.json`` went through ``edit(dict)``."""
    root = Path(shutil.copytree(artifacts, tmp_path / "artifacts"))
    if edit is not None:
        path = root / TASK / CONFIG_FILE
        config = json.loads(path.read_text())
        edit(config)
        path.write_text(json.dumps(config))
    return root


def snapshot_with(tables: RelTables, tmp_path: Path, **change) -> GraphSnapshot:
    """A snapshot of ``tables`` whose customer table has ``change`` applied (other columns, say)."""
    other = dataclasses.replace(tables, customers=dataclasses.replace(tables.customers, **change))
    return GraphSnapshot.build(other, tmp_path / "snap", progress=False)


def refusal(bundle: Path, snapshot: GraphSnapshot) -> str:
    with pytest.raises(BundleError) as info:
        load_bundle(bundle, snapshot)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{bundle / CONFIG_FILE}: ")
    return message


def test_a_bundle_records_the_definitions_and_loads_unchanged(artifacts: Path) -> None:
    snapshot = GraphSnapshot.open(artifacts / SNAPSHOT_DIR)
    config, _ = load_bundle(artifacts / TASK, snapshot)
    assert config.feature_definition == feature_definition()
    assert config.snapshot_schema == snapshot_schema(snapshot)
    assert config.snapshot_schema[CUSTOMER]["numeric"] == ["age", "age_missing"]


def test_a_changed_window_in_the_code_is_named(artifacts: Path, monkeypatch) -> None:
    monkeypatch.setattr(definitions, "WINDOWS_DAYS", (7, 28))
    message = refusal(artifacts / TASK, GraphSnapshot.open(artifacts / SNAPSHOT_DIR))
    assert ("feature definition differs from this code (bundle != code): "
            "temporal windows_days (7, 14, 28, 91, 364) != (7, 28); retrain the bundle") in message


@pytest.mark.parametrize("edit, expected", [
    (lambda c: c["feature_definition"].update(version=FEATURE_VERSION + 1),
     f"version {FEATURE_VERSION + 1} != {FEATURE_VERSION}"),
    (lambda c: c["feature_definition"]["temporal"].update(log_scale=0.5), "temporal log_scale 0.5 != 0.25"),
    (lambda c: c["feature_definition"]["temporal"]["names"].remove("has_history"),
     f"temporal names {NUM_TEMPORAL - 1} != {NUM_TEMPORAL} names "
     "(only in the bundle: none; only here: has_history)"),
    (lambda c: c["feature_definition"]["history"].update(pair_windows=[7, 28]),
     "history pair_windows (7, 28) != (7, 28, 91)"),
])
def test_a_changed_recorded_definition_is_named(artifacts: Path, tmp_path: Path, edit, expected) -> None:
    root = copy_with(artifacts, tmp_path, edit)
    message = refusal(root / TASK, GraphSnapshot.open(root / SNAPSHOT_DIR))
    assert "feature definition differs from this code" in message and expected in message


@pytest.mark.parametrize("change, expected", [
    # the same widths under other names: the counts alone (the bundle's specs) cannot tell these apart
    (dict(numeric_names=("height", "height_missing")),
     "customer numeric columns 2 != 2 names (only in the bundle: age, age_missing; only here: height, "
     "height_missing)"),
    (dict(cardinalities=(8, 8, 8, 9)), "customer cardinalities (8, 8, 8, 8) != (8, 8, 8, 9)"),
    (dict(categorical_names=("FN", "Active", "club_member_status", "postal_code")),
     "customer categorical columns 4 != 4 names (only in the bundle: fashion_news_frequency; "
     "only here: postal_code)"),
])
def test_a_snapshot_with_other_columns_is_named(artifacts: Path, tables: RelTables, tmp_path: Path,
                                                change: dict, expected: str) -> None:
    snapshot = snapshot_with(tables, tmp_path, **change)
    message = refusal(artifacts / TASK, snapshot)
    assert f"snapshot {snapshot.directory} has other feature columns than the bundle was trained" in message
    assert expected in message


def old_format(config: dict) -> None:
    del config["feature_definition"], config["snapshot_schema"]


def test_an_old_bundle_loads_as_version_1_while_the_code_equals_it(artifacts: Path, tmp_path: Path,
                                                                   monkeypatch) -> None:
    root = copy_with(artifacts, tmp_path, old_format)
    snapshot = GraphSnapshot.open(root / SNAPSHOT_DIR)
    monkeypatch.setattr(bundle_inputs, "feature_definition", lambda: FEATURE_DEFINITION_V1)
    config, _ = load_bundle(root / TASK, snapshot)
    assert config.feature_definition is None and config.snapshot_schema is None
    monkeypatch.undo()
    message = refusal(root / TASK, snapshot)
    assert ("bundle written before feature definitions were recorded, so read as version 1, which differs "
            f"from this code (bundle != code): version 1 != {FEATURE_VERSION}") in message


def test_an_old_bundle_over_a_snapshot_of_other_widths_names_them(artifacts: Path, tables: RelTables,
                                                                  tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(bundle_inputs, "feature_definition", lambda: FEATURE_DEFINITION_V1)
    root = copy_with(artifacts, tmp_path, old_format)
    snapshot = snapshot_with(tables, tmp_path, cardinalities=(8, 8, 8, 9))
    message = refusal(root / TASK, snapshot)
    assert "feature columns differ from snapshot" in message
    assert "customer cardinalities (8, 8, 8, 8) != (8, 8, 8, 9)" in message


def test_version_1_is_written_out_and_a_changed_definition_bumps_the_version() -> None:
    if FEATURE_VERSION == 1:
        assert differences(FEATURE_DEFINITION_V1, feature_definition()) == "", "change FEATURE_VERSION too"
    else:
        assert FEATURE_DEFINITION_V1["version"] == 1 and feature_definition() != FEATURE_DEFINITION_V1
    assert json.loads(json.dumps(feature_definition())) == feature_definition()


@pytest.mark.slow  # imports torch in a fresh process
def test_serve_refuses_a_mismatched_bundle_in_one_line(artifacts: Path, tmp_path: Path) -> None:
    newer = FEATURE_VERSION + 1
    root = copy_with(artifacts, tmp_path, lambda c: c["feature_definition"].update(version=newer))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = subprocess.run([sys.executable, "-m", "serve", "--artifacts", str(root), "--port", str(port)],
                            capture_output=True, text=True, timeout=300, cwd=REPO)
    lines = result.stderr.splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr[-3000:]
    assert lines[0].startswith("python -m serve: error: cannot serve churn: "), lines[0]
    assert "Traceback" not in result.stdout
    assert f"feature definition differs from this code (bundle != code): version {newer} != " in lines[0]
