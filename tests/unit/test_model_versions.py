"""Model versions without a model: the repository layout, the deployment guard, the start-up choice,
the control directory the server's processes share, and the command-line options."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from serve.config import parse_args
from serve.versions.bundles import ArtifactsError, find_bundles
from serve.versions.guard import choose, judge
from serve.versions.model_control import ModelControl, WorkerState, order_outcome
from serve.versions.models_config import ModelsConfig
from serve.versions.repository import RepositoryError, describe, find_version, metrics_summary, task_versions

FINGERPRINT = "f" * 64


def write_version(directory: Path, val: float = 0.7, beats: bool = True, fingerprint: str = FINGERPRINT,
                  val_rows: int = 50, metrics: bool = True) -> Path:
    """A bundle directory with the files the repository reads (the weights are never opened here)."""
    directory.mkdir(parents=True)
    training = {"train_rows": 600, "val_rows": val_rows}
    config = {"task": "churn", "fingerprint": fingerprint, "training": training}
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "weights.safetensors").write_bytes(b"")
    if metrics:
        split = {"model": {"auroc": val}, "baselines": {"recency_frequency": {"auroc": 0.6}}}
        (directory / "metrics.json").write_text(json.dumps({
            "task": "churn", "primary": "auroc", "higher_is_better": True, "beats_baselines": beats,
            "val": split, "test": split}))
    return directory


def test_versions_are_numbered_directories_and_the_single_bundle_layout_is_version_1(tmp_path: Path) -> None:
    art = tmp_path
    write_version(art / "churn" / "2")
    write_version(art / "churn" / "10", metrics=False)
    write_version(art / "churn" / ".11.partial")
    write_version(art / "churn" / "old")
    (art / "churn" / "3").mkdir()  # no config.json: not a version
    assert [v.version for v in task_versions(art, "churn")] == [2, 10]
    assert [v.complete for v in task_versions(art, "churn")] == [True, False]
    write_version(art / "sales")
    assert [(v.version, v.directory) for v in task_versions(art, "sales")] == [(1, art / "sales")]
    write_version(art / "sales" / "1")
    with pytest.raises(RepositoryError, match="holds a bundle of its own"):
        task_versions(art, "sales")
    assert task_versions(art, "purchase") == [] and find_version(art, "churn", 4) is None


def test_find_bundles_names_each_tasks_newest_version(tmp_path: Path) -> None:
    (tmp_path / "snapshot").mkdir()
    write_version(tmp_path / "churn" / "1")
    write_version(tmp_path / "churn" / "3")
    write_version(tmp_path / "sales")
    bundles = {b.task: (b.version, b.bundle_dir) for b in find_bundles(tmp_path)}
    assert bundles == {"churn": (3, tmp_path / "churn" / "3"), "sales": (1, tmp_path / "sales")}
    write_version(tmp_path / "sales" / "1")
    with pytest.raises(ArtifactsError, match="holds a bundle of its own"):
        find_bundles(tmp_path)


def test_models_lists_the_metrics_summary_and_the_training_snapshot(tmp_path: Path) -> None:
    write_version(tmp_path / "churn" / "1", val=0.75)
    entry = describe(find_version(tmp_path, "churn", 1))
    assert entry["metrics"] == {"primary": "auroc", "higher_is_better": True, "beats_baselines": True,
                                "val": {"model": 0.75, "baselines": {"recency_frequency": 0.6}},
                                "test": {"model": 0.75, "baselines": {"recency_frequency": 0.6}}}
    trained_on = entry["trained_on"]
    assert trained_on["snapshot_fingerprint"] == FINGERPRINT and trained_on["val_rows"] == 50
    assert metrics_summary({"primary": "auroc"}) is None and metrics_summary(None) is None


def versions(tmp_path: Path, *specs: dict) -> list:
    for number, spec in enumerate(specs, start=1):
        write_version(tmp_path / "churn" / str(number), **spec)
    return task_versions(tmp_path, "churn")


def test_the_guard_holds_back_a_loser_to_the_baselines_and_a_worse_comparable_version(tmp_path: Path) -> None:
    one, two, three, four, five = versions(tmp_path, {"val": 0.7}, {"beats": False}, {"val": 0.65},
                                           {"val": 0.6, "fingerprint": "e" * 64}, {"metrics": False})
    assert judge(one, None).promote
    assert "does not beat its baselines" in judge(two, one).reason
    verdict = judge(three, one)
    assert not verdict.promote
    assert "worse than the serving version 1 on the same validation week" in verdict.reason
    assert "auroc 0.6500 vs 0.7000" in verdict.reason
    assert judge(four, one).promote, "trained on other data: another validation week, not comparable"
    assert judge(five, one).promote, "no metrics.json: nothing says it is worse"


def test_start_up_replays_the_versions_as_the_poller_would_and_skips_broken_ones(tmp_path: Path) -> None:
    found = versions(tmp_path, {"val": 0.7}, {"val": 0.8}, {"val": 0.75}, {"beats": False})
    choice = choose(found, lambda v: None)
    assert choice.version.version == 2 and set(choice.held_back) == {3, 4} and choice.warning is None
    choice = choose(found, lambda v: "bad weights" if v.version == 2 else None)
    assert choice.version.version == 3 and choice.held_back[2] == "cannot be served: bad weights"
    assert choose(found, lambda v: None, force=True).version.version == 4
    assert choose(found, lambda v: None, pin=1).version.version == 1
    with pytest.raises(RepositoryError, match="no such version"):
        choose(found, lambda v: None, pin=9)
    with pytest.raises(RepositoryError, match="--model-version churn=1: bad weights"):
        choose(found, lambda v: "bad weights", pin=1)
    with pytest.raises(RepositoryError, match=r"no version loads \(version 4: bad weights\)"):
        choose(found, lambda v: "bad weights")


def test_when_no_version_passes_the_guard_the_newest_that_loads_serves(tmp_path: Path) -> None:
    found = versions(tmp_path, {"beats": False}, {"beats": False})
    choice = choose(found, lambda v: None)
    assert choice.version.version == 2 and "no version passes the deployment guard" in choice.warning
    assert choose(found[:1], lambda v: None).warning is None, "one version: nothing to choose from"


def test_orders_and_worker_states_go_through_the_control_directory(tmp_path: Path) -> None:
    control = ModelControl(tmp_path)
    first = control.order("churn", 1, source="start-up")
    second = control.order("churn", 2, force=True)
    assert second.id > first.id and control.current_order("churn") == second and second.force
    me = WorkerState("churn", os.getpid(), 1, 0.0)
    control.report(me)
    dead = WorkerState("churn", 2**22 + 12345, 1, 0.0)  # no such process: ignored
    control.report(dead)
    assert [s.pid for s in control.workers("churn")] == [os.getpid()] and control.workers("sales") == []
    assert order_outcome(control.workers("churn"), second, expected=1) is None
    refused = WorkerState("churn", os.getpid(), 1, 0.0, order=second.id, outcome="refused", reason="bad")
    control.report(refused)
    assert order_outcome(control.workers("churn"), second, 1) == {"outcome": "refused", "reason": "bad"}
    control.report(WorkerState("churn", os.getpid(), 2, 0.0, order=second.id))
    assert order_outcome(control.workers("churn"), second, 1) == {"outcome": "serving"}
    assert order_outcome(control.workers("churn"), first, 1) == {"outcome": "superseded"}
    assert order_outcome(control.workers("churn"), second, 2) is None, "a worker still starting"


def test_model_version_options() -> None:
    config = parse_args(["--artifacts", ".", "--model-version", "churn=2,sales=1", "--model-version",
                         "purchase=3", "--model-poll", "0", "--force"]).models
    assert config == ModelsConfig((("churn", 2), ("sales", 1), ("purchase", 3)), 0.0, True)
    assert config.pin("sales") == 1 and ModelsConfig().pin("churn") is None
    assert parse_args(["--artifacts", "."]).models == ModelsConfig()


@pytest.mark.parametrize("args, message", [
    (["--model-version", "churn"], "expected TASK=VERSION"),
    (["--model-version", "nope=1"], "expected TASK=VERSION"),
    (["--model-version", "churn=0"], "a version from 1"),
    (["--model-version", "churn=1", "--model-version", "churn=2"], "names a task twice"),
    (["--model-poll", "-1"], "--model-poll must be 0"),
])
def test_bad_model_version_options_exit_2_with_one_line(args: list, message: str, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        parse_args(["--artifacts", ".", *args])
    err = capsys.readouterr().err
    assert info.value.code == 2 and message in err and err.count("\n") == 1
