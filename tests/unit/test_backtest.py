"""``python -m training.bench.backtest``: the aggregation on made-up weeks, bad arguments, a tiny run."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from training.bench.backtest import main
from training.bench.backtest_stats import pooled_calibration, report, summarize

REPO = Path(__file__).resolve().parents[2]
TINY_FIT = ("--epochs", "1", "--max-steps-per-epoch", "3", "--threads", "1", "--quiet")
PRIMARY = {"churn": ("auroc", True), "sales": ("mae", False)}


def made_up_week(back: int, churn: tuple[float, float], sales: tuple[float, float]) -> dict[str, Any]:
    """A record of one week: (model, lightgbm) per task, churn with one-bin reliability tables."""
    def doc(metric: str, values: tuple[float, float], brier: bool) -> dict[str, Any]:
        extra = {"brier": 0.1 + back / 100} if brier else {}
        gbdt = {metric: values[1], **extra}
        test = {"model": {metric: values[0], **extra}, "baselines": {"lightgbm": gbdt}}
        return {"training": {"test_week_start": f"2020-0{9 - back}-01"}, "test": test}

    tasks = {"churn": doc("auroc", churn, True), "sales": doc("mae", sales, False)}
    tasks["churn"]["reliability_test"] = {
        name: [{"low": 0.8, "high": 0.9, "rows": 10 * (back + 1), "predicted": 0.85,
                "observed": 0.85 + sign * 0.05}] for name, sign in (("model", 1), ("lightgbm", -1))}
    return {"dataset": "shop", "weeks_back": back, "ok": True, "wall_s": 60.0, "cpu_s": 100.0, "tasks": tasks}


RUNS = [made_up_week(0, (0.80, 0.75), (0.020, 0.025)), made_up_week(1, (0.70, 0.72), (0.030, 0.025)),
        made_up_week(2, (0.90, 0.85), (0.010, 0.015)),
        {"dataset": "shop", "weeks_back": 3, "ok": False, "tasks": {}}]


def test_summary_counts_the_weeks_won_and_orders_them_oldest_first() -> None:
    churn, sales = (summarize(RUNS, PRIMARY)["shop"][task] for task in ("churn", "sales"))
    assert [w.weeks_back for w in churn.weeks] == [2, 1, 0]
    assert churn.wins == {"lightgbm": 2} and sales.wins == {"lightgbm": 2}  # lower MAE wins for sales
    assert churn.systems["model"].mean == pytest.approx(0.80) and churn.systems["model"].n == 3
    gbdt_mean = (0.025 + 0.025 + 0.015) / 3
    assert sales.margin_of_means["lightgbm"] == pytest.approx(100 * (gbdt_mean - 0.020) / gbdt_mean)
    assert churn.margins["lightgbm"].mean == pytest.approx(
        (100 * 0.05 / 0.75 + 100 * -0.02 / 0.72 + 100 * 0.05 / 0.85) / 3)
    # pooled over 10 + 20 + 30 rows in one bin: |0.85 - 0.90| for the model; Brier weighted by rows
    assert churn.pooled["model"]["ece"] == pytest.approx(0.05) and churn.pooled["model"]["rows"] == 60
    assert churn.pooled["model"]["brier"] == pytest.approx((0.10 * 10 + 0.11 * 20 + 0.12 * 30) / 60)
    assert sales.pooled == {}
    text = report(RUNS, PRIMARY)
    assert "shop: backtest, 3 of 4 runs ok" in text and "2 of 3 weeks" in text
    assert "pooled over 60 test rows, model: ECE 0.0500" in text


def test_the_margin_of_the_means_gets_an_interval_from_the_weeks_paired_errors() -> None:
    runs = [made_up_week(0, (0.80, 0.75), (0.020, 0.025)), made_up_week(1, (0.70, 0.72), (0.030, 0.025))]
    errors = {0: (0.01, 0.002), 1: (0.03, 0.001)}  # per week: churn's and sales' standard errors
    for run in runs:
        for task, se in zip(("churn", "sales"), errors[run["weeks_back"]], strict=True):
            doc = run["tasks"][task]
            test = doc["test"]
            metric = next(iter(test["model"]))
            difference = test["model"][metric] - test["baselines"]["lightgbm"][metric]
            doc["paired_test"] = {"lightgbm": {"difference": difference, "se": se, "rounds": 200}}
    churn, sales = (summarize(runs, PRIMARY)["shop"][task] for task in ("churn", "sales"))
    # churn: differences +0.05 and -0.02, mean +0.015; se of the mean sqrt(0.01^2 + 0.03^2) / 2
    half = 1.96 * (0.01 ** 2 + 0.03 ** 2) ** 0.5 / 2 * 100 / 0.735
    paired = churn.paired["lightgbm"]
    assert paired["margin_pct"] == pytest.approx(100 * 0.015 / 0.735)
    assert paired["margin_pct"] == pytest.approx(churn.margin_of_means["lightgbm"])
    assert paired["high_pct"] - paired["margin_pct"] == pytest.approx(half)
    # week 0 won by 5 standard errors, week 1 lost by less than 2: one clear win, no clear loss
    assert (paired["clear_wins"], paired["clear_losses"]) == (1, 0)
    # sales: lower MAE is better, so a model MAE below LightGBM's is a positive margin
    assert sales.paired["lightgbm"]["margin_pct"] == pytest.approx(sales.margin_of_means["lightgbm"])
    assert (sales.paired["lightgbm"]["clear_wins"], sales.paired["lightgbm"]["clear_losses"]) == (1, 1)
    text = report(runs, PRIMARY)
    assert f"{paired['low_pct']:+.2f}..{paired['high_pct']:+.2f}%" in text and "1/0 of 2" in text
    # records written before the paired errors: no interval, the rest unchanged
    assert summarize(RUNS, PRIMARY)["shop"]["churn"].paired == {}
    assert "95 % interval" not in report(RUNS, PRIMARY)


def test_pooled_ece_adds_the_bins_before_comparing() -> None:
    # two weeks miscalibrated in opposite directions in the same bin cancel when pooled
    low = [{"low": 0.5, "rows": 10, "predicted": 0.5, "observed": 0.4}]
    high = [{"low": 0.5, "rows": 10, "predicted": 0.5, "observed": 0.6}]
    assert pooled_calibration([low, high]) == {"ece": pytest.approx(0.0), "rows": 20}
    assert pooled_calibration([low])["ece"] == pytest.approx(0.1)


def error_line(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


def test_bad_arguments_fail_in_one_line(tmp_path: Path, tiny_csv_dir: Path,
                                        capsys: pytest.CaptureFixture) -> None:
    data, out = str(tiny_csv_dir), str(tmp_path / "out")
    assert "unknown task churm" in error_line(["--data", data, "--out", out, "--tasks", "churm"], capsys)
    assert "--weeks" in error_line(["--data", data, "--out", out, "--weeks", "0"], capsys)
    assert "--jobs" in error_line(["--data", data, "--out", out, "--jobs", "0"], capsys)
    shifted = ["--data", data, "--out", out, "--fit-args", "--test-weeks-back 2"]
    assert "--test-weeks-back" in error_line(shifted, capsys)
    assert "no such directory" in error_line(["--data", str(tmp_path / "nope"), "--out", out], capsys)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_two_weeks_of_churn_on_tiny_data_end_to_end(tmp_path: Path, tiny_csv_dir: Path) -> None:
    # tiny data: 14 training weeks before the last week's validation week, 13 before the next, 12 ...
    out = tmp_path / "backtest"
    done = subprocess.run([sys.executable, "-m", "training.bench.backtest", "--data", str(tiny_csv_dir),
                           "--weeks", "3", "--min-train-weeks", "13", "--tasks", "churn", "--jobs", "2",
                           "--out", str(out),
                           "--", *TINY_FIT], cwd=REPO, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "running 2" in done.stdout
    doc = json.loads((out / "backtest.json").read_text())
    runs = doc["runs"]
    assert [(r["weeks_back"], r["task"], r["ok"]) for r in runs] == [(0, "churn", True), (1, "churn", True)]
    starts = [dt.date.fromisoformat(r["tasks"]["churn"]["training"]["test_week_start"]) for r in runs]
    assert starts[0] - starts[1] == dt.timedelta(days=7)
    assert all(set(r["tasks"]) == {"churn"} for r in runs)
    assert all(r["tasks"]["churn"]["reliability_test"]["model"] for r in runs)
    summary = doc["summary"][str(tiny_csv_dir)]["churn"]
    assert [w["weeks_back"] for w in summary["weeks"]] == [1, 0]
    assert set(summary["wins"]) == {"lightgbm", "recency_frequency"}
    assert "model" in summary["pooled_calibration"]
    assert set(summary["paired"]) == {"lightgbm", "recency_frequency"}  # every week has its errors
    assert "95 % interval" in done.stdout
    assert report(runs, {"churn": ("auroc", True)}) in done.stdout
    assert not (out / "runs").exists()  # the shared snapshot is removed at the end
