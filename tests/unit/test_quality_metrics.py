"""NMAE beside MAE, the calibration metrics (ECE, Brier, reliability), Platt scaling and the churn
head's calibration buffers (saved, loaded, and absent from old bundles)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from models.nn.heads import ChurnHead
from training.bench.seed_stats import dataset_table, summarize
from training.fit.probability import fit_platt
from training.fit.report import metrics_document, split_result
from training.tasks.calibration import brier, ece, reliability, reliability_text
from training.tasks.cutoffs import split_cutoffs
from training.tasks.metrics import target_std, with_nmae


def test_nmae_is_mae_over_the_training_targets_std_and_sits_beside_mae() -> None:
    std = target_std(np.array([0.0, 2.0, 4.0]))  # population std: sqrt(8 / 3)
    assert std == pytest.approx(math.sqrt(8 / 3))
    out = with_nmae({"mae": 0.5, "rmse": 1.0}, std)
    assert list(out) == ["mae", "nmae", "rmse"] and out["nmae"] == pytest.approx(0.5 / std)
    assert math.isnan(with_nmae({"mae": 0.5}, 0.0)["nmae"])
    with pytest.raises(ValueError):
        target_std(np.array([]))


def test_metrics_document_adds_nmae_to_every_system_of_sales_only() -> None:
    split = split_result({"mae": 0.2, "rmse": 0.4}, {"last_week": {"mae": 0.4, "rmse": 0.8}})
    doc = metrics_document("sales", split, split, target_std=2.0)
    assert doc["target_std"] == 2.0
    assert doc["test"]["model"]["nmae"] == pytest.approx(0.1)
    assert doc["val"]["baselines"]["last_week"]["nmae"] == pytest.approx(0.2)
    churn = split_result({"auroc": 0.7}, {"lightgbm": {"auroc": 0.6}})
    assert "target_std" not in metrics_document("churn", churn, churn, target_std=2.0)


def test_ece_brier_and_reliability_hand_computed() -> None:
    label = np.array([0, 1, 1, 0, 1], dtype=np.float64)
    prob = np.array([0.05, 0.15, 0.95, 0.9, 1.0])
    assert brier(label, prob) == pytest.approx((0.05**2 + 0.85**2 + 0.05**2 + 0.9**2 + 0.0) / 5)
    table = reliability(label, prob)
    assert [(r["low"], r["rows"]) for r in table] == [(0.0, 1), (0.1, 1), (0.9, 3)]  # 1.0 in the last bin
    assert table[2]["predicted"] == pytest.approx((0.95 + 0.9 + 1.0) / 3)
    assert table[2]["observed"] == pytest.approx(2 / 3)
    expected = (0.05 + 0.85 + 3 * abs((0.95 + 0.9 + 1.0) / 3 - 2 / 3)) / 5
    assert ece(label, prob) == pytest.approx(expected)
    assert reliability_text(table).splitlines()[-1].split()[:2] == ["0.9-1.0", "3"]
    assert ece(np.array([0.0, 1.0]), np.array([0.0, 1.0])) == 0.0  # perfectly calibrated
    with pytest.raises(ValueError, match="probabilities"):
        ece(label, prob + 0.5)


def test_platt_scaling_recovers_a_known_scale_and_bias() -> None:
    rng = np.random.default_rng(0)
    logit = rng.normal(0.0, 2.0, 200_000)
    label = (rng.random(len(logit)) < 1 / (1 + np.exp(-(0.5 * logit - 1.0)))).astype(np.float64)
    scale, bias = fit_platt(logit, label)
    assert scale == pytest.approx(0.5, abs=0.02) and bias == pytest.approx(-1.0, abs=0.03)
    calibrated = 1 / (1 + np.exp(-(scale * logit + bias)))
    raw = 1 / (1 + np.exp(-logit))
    assert ece(label, calibrated) < 0.01 < ece(label, raw)
    # one class, perfectly separable: finite, and the ranking is kept (scale > 0)
    scale, bias = fit_platt(np.array([1.0, 2.0, 3.0]), np.ones(3))
    assert math.isfinite(bias) and scale > 0


def test_churn_head_serves_the_calibrated_probability_and_old_bundles_load_uncalibrated() -> None:
    head = ChurnHead(8, 0)
    logits = torch.tensor([-2.0, 0.0, 3.0])
    torch.testing.assert_close(head.predict(logits), torch.sigmoid(logits))  # identity by default
    head.calibration_scale.fill_(0.5)
    head.calibration_bias.fill_(-1.0)
    torch.testing.assert_close(head.predict(logits), torch.sigmoid(0.5 * logits - 1.0))
    state = head.state_dict()
    reloaded = ChurnHead(8, 0)
    reloaded.load_state_dict(state, strict=True)
    torch.testing.assert_close(reloaded.predict(logits), head.predict(logits))
    old = {k: v for k, v in state.items() if not k.startswith("calibration_")}  # written before calibration
    reloaded.load_state_dict(old, strict=True)
    torch.testing.assert_close(reloaded.predict(logits), torch.sigmoid(logits))


def test_split_cutoffs_move_back_by_whole_weeks() -> None:
    now = split_cutoffs(100, 150)
    back = split_cutoffs(100, 150, weeks_back=2)
    assert back["test"] == [now["test"][0] - 14] and back["val"] == [now["val"][0] - 14]
    assert back["train"] == [t for t in now["train"] if t <= back["val"][0] - 7]
    with pytest.raises(ValueError, match="2 more weeks after the test week"):
        split_cutoffs(0, 27, weeks_back=2)
    with pytest.raises(ValueError):
        split_cutoffs(100, 150, weeks_back=-1)


def test_the_seeds_table_prints_nmae_beside_mae() -> None:
    def run(seed: int, model: float) -> dict:
        test = {"model": {"mae": model, "nmae": model / 0.5},
                "baselines": {"lightgbm": {"mae": 0.03, "nmae": 0.06}}}
        return {"dataset": "shop", "seed": seed, "ok": True, "wall_s": 1.0, "cpu_s": 1.0, "peak_rss_mib": 1.0,
                "tasks": {"sales": {"test": test}}}

    runs = [run(0, 0.02), run(1, 0.022)]
    sales = summarize(runs)["shop"]["sales"]
    assert sales.companion["model"].mean == pytest.approx(0.042) and sales.companion["lightgbm"].std == 0.0
    assert sales.as_json()["nmae"]["model"]["n"] == 2
    line = next(line for line in dataset_table("shop", runs, summarize(runs)["shop"]).splitlines()
                if line.startswith("sales"))
    assert line.endswith("nmae 0.0420 ± 0.0028")
