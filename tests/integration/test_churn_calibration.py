"""The served churn probability is the bundle's calibrated one, not the network's raw sigmoid."""

from __future__ import annotations

import json

import pytest
import requests
import safetensors.torch
import torch

from models.runtime.bundle import CONFIG_FILE, METRICS_FILE, WEIGHTS_FILE
from models.runtime.inference import TaskInference
from models.schema import CUSTOMER

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_http_answers_are_the_bundle_s_platt_scaled_probabilities(server, artifacts, snapshot) -> None:
    bundle = artifacts / "churn"
    weights = safetensors.torch.load((bundle / WEIGHTS_FILE).read_bytes())
    scale = float(weights["head.calibration_scale"])
    bias = float(weights["head.calibration_bias"])
    recorded = json.loads((bundle / CONFIG_FILE).read_text())["training"]["calibration"]
    assert (recorded["scale"], recorded["bias"]) == pytest.approx((scale, bias))
    assert abs(scale - 1) + abs(bias) > 0.01, "the fixture's calibration is the identity: nothing is tested"
    assert "reliability_test" in json.loads((bundle / METRICS_FILE).read_text())

    # the network's raw probability, from the same bundle with its calibration switched off
    inference = TaskInference.from_bundle(bundle, snapshot, compile="none")
    inference.model.head.calibration_scale.fill_(1.0)
    inference.model.head.calibration_bias.fill_(0.0)
    indices = list(range(0, snapshot.num_nodes[CUSTOMER], max(1, snapshot.num_nodes[CUSTOMER] // 8)))[:8]
    raw = inference.run(torch.tensor(indices, dtype=torch.long)).values.double()
    expected = torch.sigmoid(scale * torch.logit(raw) + bias).tolist()

    answers = []
    for i in indices:
        response = requests.post(f"{server.url}/predict/churn", timeout=60,
                                 json={"customer_id": snapshot.ids[CUSTOMER][i].decode()})
        assert response.status_code == 200, response.text
        answers.append(response.json()["churn_probability"])
    assert answers == pytest.approx(expected, rel=1e-4, abs=1e-5)
    assert answers != pytest.approx(raw.tolist(), rel=1e-3, abs=1e-3)  # not the uncalibrated sigmoid
