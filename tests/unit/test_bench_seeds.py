"""``python -m training.bench.seeds``: the aggregation on made-up numbers, bad arguments, a tiny real run."""

from __future__ import annotations

import json
import math
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from training.bench.seed_stats import dataset_table, margin, report, summarize
from training.bench.seeds import main

REPO = Path(__file__).resolve().parents[2]
TINY_FIT = ("--epochs", "1", "--max-steps-per-epoch", "3", "--threads", "1", "--quiet")


def made_up_run(seed: int, churn: tuple[float, float, float], sales: tuple[float, float, float],
                ok: bool = True) -> dict[str, Any]:
    """A record as the benchmark writes it: (model, lightgbm, rule) per task on the primary metric."""
    def task(metric: str, rule: str, values: tuple[float, float, float]) -> dict[str, Any]:
        model, gbdt, rule_value = values
        return {"test": {"model": {metric: model},
                         "baselines": {rule: {metric: rule_value}, "lightgbm": {metric: gbdt}}}}

    tasks = {"churn": task("auroc", "recency_frequency", churn), "sales": task("mae", "last_week", sales)}
    return {"dataset": "shop", "seed": seed, "ok": ok, "wall_s": 10.0 + seed, "cpu_s": 20.0,
            "peak_rss_mib": 500.0, "tasks": tasks}


RUNS = [made_up_run(0, (0.80, 0.75, 0.70), (0.020, 0.025, 0.030)),
        made_up_run(1, (0.82, 0.75, 0.70), (0.022, 0.025, 0.030)),
        made_up_run(2, (0.78, 0.75, 0.70), (0.018, 0.025, 0.030)),
        made_up_run(3, (0.10, 0.75, 0.70), (0.900, 0.025, 0.030), ok=False)]  # failed: left out


def test_margin_is_relative_and_positive_when_the_model_is_better() -> None:
    assert margin(0.80, 0.75, higher_is_better=True) == pytest.approx(100 * 0.05 / 0.75)
    assert margin(0.020, 0.025, higher_is_better=False) == pytest.approx(20.0)  # lower MAE is better
    assert margin(0.030, 0.025, higher_is_better=False) == pytest.approx(-20.0)
    assert math.isnan(margin(0.5, 0.0, higher_is_better=True))


def test_summary_is_mean_and_sample_std_over_the_successful_seeds() -> None:
    churn, sales = summarize(RUNS)["shop"]["churn"], summarize(RUNS)["shop"]["sales"]
    assert churn.seeds == (0, 1, 2) and list(churn.systems) == ["model", "lightgbm", "recency_frequency"]
    assert churn.systems["model"].mean == pytest.approx(0.80)
    assert churn.systems["model"].std == pytest.approx(statistics.stdev([0.80, 0.82, 0.78]))
    assert churn.systems["lightgbm"].std == 0.0 and churn.best_rule == "recency_frequency"
    per_seed = [100 * (m - 0.75) / 0.75 for m in (0.80, 0.82, 0.78)]
    assert churn.margins["lightgbm"].mean == pytest.approx(statistics.fmean(per_seed))
    assert churn.margins["lightgbm"].std == pytest.approx(statistics.stdev(per_seed))
    per_seed = [100 * (0.030 - m) / 0.030 for m in (0.020, 0.022, 0.018)]  # MAE: lower is better
    assert sales.margins["last_week"].mean == pytest.approx(100 / 3)
    assert sales.margins["last_week"].std == pytest.approx(statistics.stdev(per_seed))
    assert summarize(RUNS[:1])["shop"]["churn"].systems["model"].std is None  # one seed: no spread


def test_table_prints_the_summary_numbers() -> None:
    table = dataset_table("shop", RUNS, summarize(RUNS)["shop"])
    lines = table.splitlines()
    assert lines[0].startswith("shop: test week, mean ± std over seeds 0, 1, 2 (3 of 4 runs ok)")
    churn = next(i for i, line in enumerate(lines) if line.startswith("churn"))
    assert lines[churn].split()[-4:] == ["model", "0.8000", "±", "0.0200"]
    assert lines[churn + 1].split()[-7:] == ["lightgbm", "0.7500", "±", "0.0000", "+6.67", "±", "2.67"]
    assert "recency_frequency (best rule)" in lines[churn + 2] and lines[churn + 2].endswith("+14.29 ± 2.86")
    assert any(line.split()[-7:] == ["lightgbm", "0.0250", "±", "0.0000", "+20.00", "±", "8.00"]
               for line in lines)
    assert lines[-1] == "per run of --task all: wall 11.0 ± 1.0 s, CPU 20.0 ± 0.0 s, peak memory 500 ± 0 MiB"


def test_the_test_week_s_row_error_is_the_seeds_mean_paired_error_over_the_baseline() -> None:
    runs = [made_up_run(seed, (0.80, 0.75, 0.70), (0.020, 0.025, 0.030)) for seed in (0, 1)]
    for run, se in zip(runs, (0.010, 0.020), strict=True):
        run["tasks"]["churn"]["paired_test"] = {"lightgbm": {"difference": 0.05, "se": se, "rounds": 200}}
    churn = summarize(runs)["shop"]["churn"]
    # only LightGBM has errors; 1.96 x the mean error 0.015 over LightGBM's 0.75, in %
    assert churn.row_error == {"lightgbm": pytest.approx(1.96 * 0.015 * 100 / 0.75)}
    assert churn.as_json()["row_error_pct"] == churn.row_error
    line = next(line for line in dataset_table("shop", runs, summarize(runs)["shop"]).splitlines()
                if line.strip().startswith("lightgbm") and "0.7500" in line)
    assert line.split()[-1] == "±3.92"
    assert summarize(RUNS)["shop"]["churn"].row_error == {}  # records written before the errors


def error_line(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


def test_bad_arguments_fail_in_one_line(tmp_path: Path, tiny_csv_dir: Path,
                                        capsys: pytest.CaptureFixture) -> None:
    data, out = str(tiny_csv_dir), str(tmp_path / "out")
    assert "no such directory" in error_line(["--data", str(tmp_path / "nope"), "--out", out], capsys)
    assert "customers.csv" in error_line(["--data", str(tmp_path), "--out", out], capsys)
    assert "--seeds" in error_line(["--data", data, "--seeds", "0", "--out", out], capsys)
    assert "sets --data" in error_line(["--data", data, "--out", out, "--fit-args", "--seed 3"], capsys)
    assert "--epochs must be at least 1" in error_line(["--data", data, "--out", out, "--", "--epochs", "0"],
                                                       capsys)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_two_seeds_on_tiny_data_end_to_end(tmp_path: Path, tiny_csv_dir: Path) -> None:
    broken = tmp_path / "broken"  # customers but no articles: training.fit fails at once
    broken.mkdir()
    shutil.copy(tiny_csv_dir / "customers.csv", broken)
    out = tmp_path / "bench"
    done = subprocess.run([sys.executable, "-m", "training.bench.seeds", "--data", str(tiny_csv_dir),
                           "--data", str(broken), "--seeds", "2", "--out", str(out), "--", *TINY_FIT],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stderr  # a run failed
    doc = json.loads((out / "seeds.json").read_text())
    runs = doc["runs"]
    assert [(r["dataset"], r["seed"], r["ok"]) for r in runs] == [
        (str(tiny_csv_dir), 0, True), (str(tiny_csv_dir), 1, True),
        (str(broken), 0, False), (str(broken), 1, False)]
    for run in runs[:2]:
        assert run["wall_s"] > 0 and run["cpu_s"] > 0 and run["peak_rss_mib"] > 50
        assert set(run["tasks"]) == {"churn", "sales", "purchase"}
        assert set(run["tasks"]["purchase"]["test"]["baselines"]) == {"popular", "repeat", "lightgbm"}
    assert "articles.csv" in runs[2]["error"]
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith("[")] == [
        f"[1/4] {tiny_csv_dir} seed 0", f"[2/4] {tiny_csv_dir} seed 1", f"[3/4] {broken} seed 0",
        f"[4/4] {broken} seed 1"]
    assert "FAILED (exit 2)" in lines[3]
    assert report(runs) in done.stdout
    churn = [r["tasks"]["churn"]["test"]["model"]["auroc"] for r in runs[:2]]
    mean, std = statistics.fmean(churn), statistics.stdev(churn)
    assert f"{mean:.4f} ± {std:.4f}" in next(line for line in lines if line.startswith("churn"))
    summary = doc["summary"][str(tiny_csv_dir)]["tasks"]["churn"]
    assert summary["systems"]["model"]["mean"] == pytest.approx(mean)
    assert set(summary["row_error_pct"]) == {"lightgbm", "recency_frequency"}
    assert not (out / "runs").exists()  # artifacts are not kept by default

    # the same seed and thread count train the same model: a plain training.fit repeats the bench's run
    again = tmp_path / "again"
    subprocess.run([sys.executable, "-m", "training.fit", "--data", str(tiny_csv_dir), "--task", "all",
                    "--out", str(again), "--seed", "1", *TINY_FIT],
                   cwd=REPO, check=True, capture_output=True, timeout=300)
    for task, record in runs[1]["tasks"].items():
        assert json.loads((again / task / "metrics.json").read_text())["test"] == record["test"], task
