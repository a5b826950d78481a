"""Checkpoint bundles: save/load round trip, schema check, and refusing anything but safetensors."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest
import torch

from models.feature_definitions import snapshot_schema
from models.graph.features import table_specs
from models.graph.sampler import SamplerConfig, TemporalSampler
from models.nn.config import ModelConfig
from models.nn.model import TaskModel
from models.runtime.bundle import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    BundleConfig,
    BundleError,
    compile_cache_dirs,
    compile_cache_path,
    load_bundle,
    read_config,
    save_bundle,
    user_cache_dir,
)
from models.runtime.inference import TaskInference, fitted_ladder
from models.store.snapshot import GraphSnapshot
from training.synth.tables import SyntheticSize, synthetic_tables

SIZE = SyntheticSize(num_customers=60, num_articles=25, num_transactions=900, num_days=30)
SMALL_MODEL = ModelConfig(hidden=16, head_hidden=16, embedding_dim=8, time_channels=4)
SAMPLER = SamplerConfig((4, 3), "uniform")


def _snapshot(tmp_path_factory: pytest.TempPathFactory, seed: int) -> GraphSnapshot:
    tables = synthetic_tables(SIZE, seed=seed)
    return GraphSnapshot.build(tables, tmp_path_factory.mktemp("snap"), progress=False)


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> GraphSnapshot:
    return _snapshot(tmp_path_factory, seed=1)


def _bundle_config(task: str, snapshot: GraphSnapshot) -> BundleConfig:
    entity = TaskModel(task, table_specs(snapshot), SMALL_MODEL).head.seed_types[0]
    serving = TemporalSampler(snapshot, SamplerConfig(SAMPLER.fanouts, "last"))
    return BundleConfig(task=task, model=SMALL_MODEL, sampler=SAMPLER, specs=table_specs(snapshot),
                        ladders={entity: fitted_ladder(snapshot, serving, entity, 4)}, max_batch_size=4,
                        fingerprint=snapshot.fingerprint, snapshot_schema=snapshot_schema(snapshot),
                        training={"epochs": 1})


@pytest.fixture(scope="module", params=["churn", "sales", "purchase"])
def saved(request: pytest.FixtureRequest, snapshot: GraphSnapshot,
          tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TaskModel]:
    """A bundle of an untrained model of each task, and the model it was saved from."""
    torch.manual_seed(0)
    model = TaskModel(request.param, table_specs(snapshot), SMALL_MODEL).eval()
    directory = tmp_path_factory.mktemp(request.param)
    save_bundle(directory, _bundle_config(request.param, snapshot), model, {"task": request.param})
    return directory, model


def test_round_trip_restores_config_weights_and_predictions(saved, snapshot: GraphSnapshot) -> None:
    directory, model = saved
    config, loaded = load_bundle(directory, snapshot)
    assert len(config.weights_sha256) == 64
    expected = _bundle_config(model.task, snapshot).to_dict() | {"weights_sha256": config.weights_sha256}
    assert config.to_dict() == expected
    assert set(loaded.state_dict()) == set(model.state_dict())
    for name, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name
    entity = torch.arange(5)
    original = TaskInference(config, model, snapshot, compile="none").run(entity)
    restored = TaskInference.from_bundle(directory, snapshot, compile="none").run(entity)
    for field in ("values", "scores", "articles"):
        expected, actual = getattr(original, field), getattr(restored, field)
        assert (expected is None and actual is None) or torch.equal(expected, actual), field
    assert json.loads((directory / "metrics.json").read_text()) == {"task": model.task}


def test_a_bundle_binds_to_the_snapshot_schema_not_its_content(saved, snapshot, tmp_path_factory) -> None:
    other = _snapshot(tmp_path_factory, seed=2)  # the same columns, other rows (a rebuilt or compacted one)
    assert other.fingerprint != snapshot.fingerprint
    load_bundle(saved[0], other)
    tables = synthetic_tables(SIZE, seed=2)
    first, *rest = tables.customers.cardinalities
    tables.customers.cardinalities = (first + 1, *rest)
    changed = GraphSnapshot.build(tables, tmp_path_factory.mktemp("changed"), progress=False)
    with pytest.raises(BundleError, match="has other feature columns than the bundle was trained on"):
        load_bundle(saved[0], changed)


class _WritesMarker:
    """Unpickling this calls ``open(path, "w")``: proof that a loader ran code from the file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return open, (str(self.path), "w")


@pytest.mark.parametrize("writer", ["pickle", "torch.save"])
def test_pickled_weights_are_refused_without_running_them(saved, snapshot, tmp_path, writer) -> None:
    bundle = Path(shutil.copytree(saved[0], tmp_path / "bundle"))
    marker = tmp_path / "code_ran"
    payload = {"state": _WritesMarker(marker)}
    if writer == "pickle":
        (bundle / WEIGHTS_FILE).write_bytes(pickle.dumps(payload))
    else:
        torch.save(payload, bundle / WEIGHTS_FILE)
    with pytest.raises(BundleError, match=r"not a readable safetensors file.*refusing"):
        load_bundle(bundle, snapshot)
    assert not marker.exists()


def test_missing_and_broken_files_are_one_line_errors(saved, snapshot, tmp_path) -> None:
    bundle = Path(shutil.copytree(saved[0], tmp_path / "bundle"))
    (bundle / WEIGHTS_FILE).unlink()
    with pytest.raises(BundleError, match=f"{WEIGHTS_FILE}: missing"):
        load_bundle(bundle, snapshot)
    (bundle / CONFIG_FILE).write_text("{not json")
    with pytest.raises(BundleError, match="invalid bundle config"):
        read_config(bundle)
    (bundle / CONFIG_FILE).unlink()
    with pytest.raises(BundleError, match="missing \\(not a relserve bundle directory\\)"):
        load_bundle(bundle, snapshot)


def test_weights_of_another_shape_are_refused(saved, snapshot, tmp_path) -> None:
    bundle = Path(shutil.copytree(saved[0], tmp_path / "bundle"))
    config = json.loads((bundle / CONFIG_FILE).read_text())
    config["model"]["hidden"] = 32
    (bundle / CONFIG_FILE).write_text(json.dumps(config))
    with pytest.raises(BundleError, match=r"weights do not match config\.json"):
        load_bundle(bundle, snapshot)


def test_a_flipped_byte_in_the_weights_is_refused(saved, snapshot, tmp_path) -> None:
    bundle = Path(shutil.copytree(saved[0], tmp_path / "bundle"))
    weights = bytearray((bundle / WEIGHTS_FILE).read_bytes())
    weights[-1] ^= 0x01  # a value's last byte: still valid safetensors of the right shapes
    (bundle / WEIGHTS_FILE).write_bytes(bytes(weights))
    with pytest.raises(BundleError, match=r"checksum differs from config\.json's weights_sha256"):
        load_bundle(bundle, snapshot)


def test_compile_cache_path_changes_with_strategy_and_ladder(saved, snapshot) -> None:
    config = read_config(saved[0])
    path = compile_cache_path(saved[0], "cpu", "buckets", None, config.ladders)
    assert path.parent == saved[0] and path.name.startswith("cpu-buckets-")
    assert path == compile_cache_path(saved[0], "cpu", "buckets", None, config.ladders)
    assert path != compile_cache_path(saved[0], "cpu", "dynamic", None, config.ladders)
    assert path != compile_cache_path(saved[0], "cpu", "buckets", None, {})


def test_the_compile_cache_lives_beside_a_writable_bundle_or_in_the_given_directory(saved, tmp_path) -> None:
    bundle, config = saved[0], read_config(saved[0])
    assert compile_cache_dirs(bundle, config) == ([bundle / "compile_cache"], bundle / "compile_cache")
    reads, write = compile_cache_dirs(bundle, config, tmp_path / "cache")
    assert write == tmp_path / "cache" / f"{config.task}-{config.weights_sha256[:16]}"
    assert reads == [write, bundle / "compile_cache"]  # a read-only bundle may still ship one


def test_the_per_user_compile_cache_follows_xdg_cache_home(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert user_cache_dir() == tmp_path / "relserve"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert user_cache_dir() == Path.home() / ".cache" / "relserve"
