"""``python -m training.fit``: bundles that reproduce their metrics; metrics.json; CLI errors."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from models.graph.sampler import SamplerConfig, TemporalSampler
from models.runtime.bundle import (
    CONFIG_FILE,
    METRICS_FILE,
    SNAPSHOT_DIR,
    WEIGHTS_FILE,
    BundleError,
    load_bundle,
)
from models.runtime.inference import TaskInference
from models.runtime.quality import baseline_warning, beats_baselines
from models.store.snapshot import GraphSnapshot
from training.data.load import load_tables
from training.fit.batches import TrainBatches
from training.fit.config import FitConfig, TaskRecipe
from training.fit.data import task_splits
from training.fit.evaluate import evaluate_model
from training.fit.report import results_table
from training.fit.run import main
from training.synth.cli import SynthConfig, generate
from training.tasks.baselines import BASELINES
from training.tasks.definitions import TASKS
from training.tasks.metrics import with_nmae
from training.tasks.table import TaskTable

REPO = Path(__file__).resolve().parents[2]


def run_fit(*args: str) -> int:
    """``main`` as the CLI runs it: the exit code, also for argparse's ``SystemExit``."""
    try:
        return main([*args, "--quiet"])
    except SystemExit as exc:
        return int(exc.code)


def one_error_line(capsys: pytest.CaptureFixture) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_writes_a_bundle_per_task_beside_the_snapshot(trained_artifacts: Path) -> None:
    assert (trained_artifacts / SNAPSHOT_DIR / "meta.json").is_file()
    for task in TASKS:
        for name in (WEIGHTS_FILE, CONFIG_FILE, METRICS_FILE):
            assert (trained_artifacts / task / name).is_file(), f"{task}/{name}"
        config = json.loads((trained_artifacts / task / CONFIG_FILE).read_text())
        assert config["task"] == task and config["max_batch_size"] == 32
        assert config["training"]["epochs"] == 1 and config["training"]["compile"] == "none"
        training = config["training"]
        assert training["steps_run"] == training["epochs_run"] * training["steps_per_epoch"] > 0
        assert training["steps_per_epoch"] <= training["max_steps_per_epoch"]
        assert training["stopped_by_time_budget"] is False and training["time_budget_seconds"] is None


@pytest.mark.parametrize("task", list(TASKS))
def test_metrics_json_has_the_agreed_form(trained_artifacts: Path, task: str) -> None:
    doc = json.loads((trained_artifacts / task / METRICS_FILE).read_text())
    spec = TASKS[task]
    extra = {"churn": ["paired_test", "calibration", "reliability_test"],
             "sales": ["target_std", "paired_test"]}.get(task, ["paired_test"])
    assert list(doc) == ["task", "primary", "higher_is_better", "beats_baselines", "val", "test", *extra]
    assert (doc["task"], doc["primary"], doc["higher_is_better"]) == (
        task, spec.primary_metric, spec.higher_is_better)
    beats = beats_baselines(spec.primary_metric, spec.higher_is_better, doc["val"])
    assert doc["beats_baselines"] is beats  # judged on validation, where the model was selected
    assert (baseline_warning(doc) is None) is beats
    for split in ("val", "test"):
        assert set(doc[split]) == {"model", "baselines"}
        assert set(doc[split]["baselines"]) == set(BASELINES[task])
        for metrics in (doc[split]["model"], *doc[split]["baselines"].values()):
            assert set(metrics) == set(spec.metrics) | ({"nmae"} if task == "sales" else set())
            assert all(isinstance(v, float) and math.isfinite(v) for v in metrics.values())
    # the test week's difference from each baseline, with its paired bootstrap error
    assert set(doc["paired_test"]) == set(BASELINES[task])
    for name, paired in doc["paired_test"].items():
        primary = spec.primary_metric
        assert paired["difference"] == pytest.approx(doc["test"]["model"][primary]
                                                     - doc["test"]["baselines"][name][primary])
        assert paired["rounds"] > 1 and math.isfinite(paired["se"]) and paired["se"] >= 0


@pytest.mark.parametrize("task", list(TASKS))
def test_loaded_bundle_reproduces_its_recorded_test_metrics(trained_artifacts: Path, task: str) -> None:
    snapshot = GraphSnapshot.open(trained_artifacts / SNAPSHOT_DIR)
    doc = json.loads((trained_artifacts / task / METRICS_FILE).read_text())
    test = task_splits(task, snapshot.transactions(), snapshot)["test"]
    inference = TaskInference.from_bundle(trained_artifacts / task, snapshot, compile="none")
    metrics = evaluate_model(inference, test)
    if "target_std" in doc:  # sales: NMAE beside MAE
        metrics = with_nmae(metrics, doc["target_std"])
    assert metrics == pytest.approx(doc["test"]["model"], rel=1e-6, abs=1e-9)


def test_rerun_reuses_the_snapshot_and_refuses_other_data(trained_artifacts: Path, tmp_path: Path,
                                                          capsys) -> None:
    out = Path(shutil.copytree(trained_artifacts, tmp_path / "artifacts"))
    other = tmp_path / "other_csv"
    generate(SynthConfig(customers=300, articles=80, days=60, seed=3), other)
    assert run_fit("--data", str(other), "--task", "churn", "--out", str(out)) == 2
    assert "was not built from the CSV files" in one_error_line(capsys)
    # a bundle of the original data still loads; one checked against another snapshot does not
    other_snapshot = GraphSnapshot.build(load_tables(other, progress=False), tmp_path / "other_snapshot",
                                         progress=False)
    load_bundle(out / "churn", GraphSnapshot.open(out / SNAPSHOT_DIR))
    with pytest.raises(BundleError, match="has other feature columns than the bundle was trained on"):
        load_bundle(out / "churn", other_snapshot)


def test_a_corrupt_snapshot_is_refused(trained_artifacts: Path, tiny_csv_dir: Path, tmp_path: Path,
                                       capsys) -> None:
    out = Path(shutil.copytree(trained_artifacts, tmp_path / "artifacts"))
    (out / SNAPSHOT_DIR / "customer.ids.npy").write_bytes(b"not numpy")
    assert run_fit("--data", str(tiny_csv_dir), "--task", "churn", "--out", str(out)) == 2
    assert "corrupt or truncated" in one_error_line(capsys)


@pytest.fixture(scope="module")
def short_csv_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("short_csv")
    generate(SynthConfig(customers=100, articles=30, days=20, seed=0), out)
    return out


@pytest.mark.parametrize("case, expected", [
    ("no_data_dir", "no such directory"),
    ("no_csvs", "customers.csv not found"),
    ("bad_task", "invalid choice: 'returns'"),
    ("out_is_a_file", "exists and is not a directory"),
    ("too_short", "need at least"),
    ("bad_epochs", "--epochs must be at least 1"),
    ("bad_budget", "--time-budget must be a positive number of minutes"),
])
def test_cli_errors_are_one_line_and_exit_2(case: str, expected: str, tiny_csv_dir: Path, short_csv_dir: Path,
                                            tmp_path: Path, capsys) -> None:
    data, task, out, extra = str(tiny_csv_dir), "churn", str(tmp_path / "out"), []
    if case == "no_data_dir":
        data = str(tmp_path / "missing")
    elif case == "no_csvs":
        data = str(tmp_path)
    elif case == "bad_task":
        task = "returns"
    elif case == "out_is_a_file":
        (tmp_path / "file").write_text("x")
        out = str(tmp_path / "file")
    elif case == "too_short":
        data = str(short_csv_dir)
    elif case == "bad_budget":
        extra = ["--time-budget", "0"]
    else:
        extra = ["--epochs", "0"]
    assert run_fit("--data", data, "--task", task, "--out", out, *extra) == 2
    assert expected in one_error_line(capsys)


def test_the_module_entry_point_exits_2_without_a_traceback(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "training.fit", "--data", str(tmp_path / "none"),
                             "--task", "churn", "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, cwd=REPO, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"python -m training.fit: error: --data {tmp_path / 'none'}: no such directory"]


@pytest.mark.slow
def test_buckets_compile_trains_without_recompiles_after_the_first_epoch(tiny_csv_dir: Path,
                                                                         tmp_path: Path) -> None:
    out = tmp_path / "artifacts"
    assert run_fit("--data", str(tiny_csv_dir), "--task", "churn", "--out", str(out), "--epochs", "2",
                   "--compile", "buckets") == 0
    training = json.loads((out / "churn" / CONFIG_FILE).read_text())["training"]
    first, second = training["graphs_compiled_per_epoch"]
    assert 1 <= first <= training["training_buckets"] and second == 0
    snapshot = GraphSnapshot.open(out / SNAPSHOT_DIR)
    _, model = load_bundle(out / "churn", snapshot)
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_the_warning_names_the_best_baseline_on_validation() -> None:
    split = {"model": {"mae": 0.05}, "baselines": {"last_week": {"mae": 0.04}, "zero": {"mae": 0.06}}}
    doc = {"task": "sales", "primary": "mae", "higher_is_better": False, "beats_baselines": False,
           "val": split, "test": split}
    assert baseline_warning(doc) == ("the sales model does not beat the best baseline on validation: "
                                     "mae 0.0500 vs last_week 0.0400")
    assert baseline_warning({**doc, "beats_baselines": True}) is None


def test_the_results_table_says_how_far_ahead_the_model_is_on_the_test_week_and_how_sure() -> None:
    split = {"model": {"mae": 0.05}, "baselines": {"last_week": {"mae": 0.06}, "zero": {"mae": 0.04}}}
    doc = {"task": "sales", "primary": "mae", "higher_is_better": False, "val": split, "test": split,
           "paired_test": {"last_week": {"difference": -0.01, "se": 0.002, "rounds": 200},
                           "zero": {"difference": 0.01, "se": 0.003, "rounds": 200}}}
    test = results_table([doc], "test").splitlines()
    assert test[0].endswith("model ahead ± se") and test[2].split() == ["model", "0.0500"]
    # lower MAE is better: a model MAE 0.01 below last_week's is 0.01 ahead, above zero's 0.01 behind
    assert test[3].split() == ["last_week", "0.0600", "+0.0100", "±", "0.0020"]
    assert test[4].split() == ["zero", "0.0400", "-0.0100", "±", "0.0030", "<"]
    assert "ahead" not in results_table([doc], "val")  # validation has no paired errors
    del doc["paired_test"]
    assert "ahead" not in results_table([doc], "test")  # documents written before them


def test_beating_the_baselines_means_strictly_better_than_each_in_the_metric_s_direction() -> None:
    split = {"model": {"mae": 0.05}, "baselines": {"last_week": {"mae": 0.06}, "zero": {"mae": 0.07}}}
    assert beats_baselines("mae", False, split)
    assert not beats_baselines("mae", True, split)  # the same numbers where higher is better
    tied = {**split, "baselines": {**split["baselines"], "mean": {"mae": 0.05}}}
    assert not beats_baselines("mae", False, tied)


def test_the_step_budget_and_the_batch_adapt_to_the_table_size() -> None:
    recipe = TaskRecipe()
    assert recipe.batch_size(200_000, 256) == 256 and recipe.batch_size(2_000, 256) == 66
    assert recipe.batch_size(100, 256) == 32 and recipe.batch_size(100, 16) == 16
    # the step budget: fixed up to growth_rows, then the square root of the rows, at most max_growth
    assert recipe.steps_per_epoch(1_000) == recipe.steps_per_epoch(recipe.growth_rows) == 120
    assert recipe.steps_per_epoch(4 * recipe.growth_rows) == 240
    assert recipe.steps_per_epoch(10_605_000) == recipe.steps_per_epoch(10**9) == 600
    given = FitConfig(Path(), Path(), ("sales",), max_steps_per_epoch=50).recipe("sales")
    assert given.steps_per_epoch(10**9) == 50  # a user's --max-steps-per-epoch is taken as given
    rows = 10_000
    table = TaskTable(np.arange(rows), np.repeat(np.arange(10), rows // 10), None,
                      label=np.zeros(rows, dtype=np.float32))
    capped = TrainBatches(None, table, None, "customer", 256, seed=0, max_steps=5)
    assert len(capped) == 5 and len(TrainBatches(None, table, None, "customer", 256)) == 40
    seen = []
    capped.batch = lambda r, positives=None: seen.append(r)  # record the rows, skip the sampling
    list(capped)
    rows_drawn = torch.cat(seen).numpy()
    assert len(rows_drawn) == 5 * 256 == len(set(rows_drawn.tolist()))
    assert len(set(table.seed_time[rows_drawn].tolist())) == 10  # drawn from every cutoff


def test_purchase_batches_bring_catalogue_negatives_with_their_sampling_correction(
        trained_artifacts: Path) -> None:
    snapshot = GraphSnapshot.open(trained_artifacts / SNAPSHOT_DIR)
    table = task_splits("purchase", snapshot.transactions(), snapshot)["train"]
    sampler = TemporalSampler(snapshot, SamplerConfig((4, 2), "last"))
    batches = TrainBatches(snapshot, table, sampler, "customer", 16, seed=0, negatives=6)
    positives = batches.draw_positives()
    rows = torch.arange(16)
    batch = batches.batch(rows, positives)
    extras, articles = batch.extras, snapshot.num_nodes["article"]
    assert batch.inputs.num_seeds == 16 and batch.target.num_seeds == 22 == len(batch.log_q)
    assert extras.negative.tolist() == [False] * 16 + [True] * 6
    assert torch.equal(extras.article[:16], positives.article[:16])
    # log_q: the draws of each (article, seed time) as a positive plus its expected catalogue draws
    seed_time = table.seed_time[:16]
    times, rows_at = np.unique(table.seed_time, return_counts=True)
    drawn = {}
    for a, t in zip(positives.article.numpy(), table.seed_time, strict=True):
        drawn[(a, t)] = drawn.get((a, t), 0) + 1
    for j in range(16):
        t = int(seed_time[j])
        expected = drawn[(int(extras.article[j]), t)] + 6 * rows_at[times == t][0] / (16 * articles)
        assert batch.log_q[j].item() == pytest.approx(math.log(expected), rel=1e-5)
    assert (batch.log_q[16:] < batch.log_q[:16].max()).all()
    # without negatives: the in-batch softmax as before, log_q the plain log of the draws
    plain = TrainBatches(snapshot, table, sampler, "customer", 16, seed=0).batch(rows, positives)
    assert plain.target.num_seeds == 16 and plain.extras.negative is None
    assert plain.log_q.tolist() == pytest.approx(
        [math.log(drawn[(int(a), int(t))]) for a, t in zip(positives.article[:16], seed_time, strict=True)])


def test_the_plan_is_said_before_training_and_the_time_budget_stops_between_epochs(
        tiny_csv_dir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "artifacts"
    assert main(["--data", str(tiny_csv_dir), "--task", "churn", "--out", str(out), "--epochs", "3",
                 "--max-steps-per-epoch", "2", "--time-budget", "0.001"]) == 0
    err = capsys.readouterr().err
    plan = next(line for line in err.splitlines() if "estimate: at most" in line)
    assert plan.startswith("churn: at most 3 epochs x 2 steps of ") and "= 6 steps" in plan
    assert err.index(plan) < err.index("churn epoch 1:")  # said before the first epoch
    assert "would not fit in the time budget" in err
    training = json.loads((out / "churn" / CONFIG_FILE).read_text())["training"]
    assert (training["epochs_run"], training["steps_run"], training["best_epoch"]) == (1, 2, 1)
    assert training["stopped_by_time_budget"] is True and training["time_budget_seconds"] < 1
    assert (out / "churn" / METRICS_FILE).is_file()


def test_validation_keeps_a_fixed_random_subset_of_at_most_max_val_rows(trained_artifacts: Path) -> None:
    snapshot = GraphSnapshot.open(trained_artifacts / SNAPSHOT_DIR)
    tx = snapshot.transactions()
    full = task_splits("churn", tx, snapshot)
    capped = task_splits("churn", tx, snapshot, max_val_rows=50, seed=3)
    assert len(full["val"]) > 50 and len(capped["val"]) == 50 and len(capped["test"]) == len(full["test"])
    again = task_splits("churn", tx, snapshot, max_val_rows=50, seed=3)["val"]
    assert np.array_equal(again.entity, capped["val"].entity)
    pairs = set(zip(full["val"].entity.tolist(), full["val"].label.tolist(), strict=True))
    assert set(zip(capped["val"].entity.tolist(), capped["val"].label.tolist(), strict=True)) <= pairs
