"""CI check on real data: on a slice of the shipped real transactions the GNN beats the rule baselines.

Trains ``training.fit`` with its defaults (no per-dataset flags) on the 300 most active customers of
the last 16 weeks of ``data/real/online-retail-ii`` (the raw file, read and sliced through its spec)
and compares test-week primary metrics with the rule baselines of ``metrics.json`` (``lightgbm`` is
a learned baseline, not a rule). A model that ignores history cannot pass: repeat buying is what the
purchase rules score on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training.data.slice import slice_dataset
from training.fit.run import main

REAL = Path(__file__).resolve().parents[2] / "data" / "real" / "online-retail-ii"
RULES = {"churn": ("recency_frequency",), "purchase": ("popular", "repeat")}


@pytest.mark.slow
def test_model_beats_the_rule_baselines_on_a_real_data_slice(tmp_path: Path) -> None:
    data = tmp_path / "slice"
    slice_dataset(REAL, data, customers=300, weeks=16)
    out = tmp_path / "artifacts"
    for task in RULES:
        assert main(["--data", str(data), "--task", task, "--out", str(out), "--compile", "none",
                     "--seed", "0", "--quiet"]) == 0
    for task, rules in RULES.items():
        doc = json.loads((out / task / "metrics.json").read_text())
        metric, test = doc["primary"], doc["test"]
        model = test["model"][metric]
        best_rule = max(test["baselines"][name][metric] for name in rules)
        assert model > best_rule, f"{task}: model {metric} {model:.4f} <= best rule baseline {best_rule:.4f}"
