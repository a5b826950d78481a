"""Purchase ranking in two parts and the repeat shift chosen on validation: the merged parts rank as the
head does at every shift, the shift travels in the bundle, and calibration reports what it set."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from models.graph.features import table_specs
from models.nn.config import ModelConfig
from models.nn.model import TaskModel
from models.nn.ranking import merge_ranked
from models.runtime.inference import TaskInference
from models.store.snapshot import GraphSnapshot
from training.bench.random_batches import random_purchase_extras, random_tables
from training.fit.calibrate import SHIFTS, calibrated_metrics, choose_shift
from training.fit.data import task_splits
from training.fit.evaluate import evaluate_model
from training.tasks.day_windows import sort_by_day

TABLES = random_tables(300, 80)
CONFIG = ModelConfig(hidden=32, head_hidden=16, embedding_dim=8)


def _head():
    torch.manual_seed(0)
    return TaskModel("purchase", table_specs(TABLES), CONFIG).eval().head


@pytest.mark.parametrize("shift", [0.0, -2.0, 0.7, 3.0, 1e4])
def test_merged_parts_rank_as_the_head_does_at_every_shift(shift: float) -> None:
    head = _head()
    query, keys = head(torch.randn(6, 32), "customer"), head(torch.randn(80, 32), "article")
    history = random_purchase_extras(TABLES, 6, seed=3).history
    with torch.no_grad():
        parts = head.rank_parts(query, keys, 12, history)
        head.repeat_shift.fill_(shift)
        expected_scores, _ = head.rank(query, keys, 12, history)
        merged = merge_ranked(parts, shift, 12)
        # float32 can round two scores plus a huge shift to one value; either order of a tie is a top-k
        merged_scores = head.scores(query, keys, history).gather(1, merged)
    assert torch.equal(merged_scores, expected_scores)
    assert (merged.sort(dim=1).values.diff(dim=1) != 0).all()  # twelve distinct articles per row
    assert torch.isinf(parts.repeat[~history.mask]).all()
    # the dot-product part never holds a history article (those are scored by the repeat score)
    owned = history.mask.unsqueeze(1)
    in_history = (parts.top_articles.unsqueeze(-1) == history.article.unsqueeze(1)) & owned
    assert not (in_history.any(dim=-1) & torch.isfinite(parts.top)).any()


def test_a_huge_shift_ranks_every_history_article_first() -> None:
    head = _head()
    query, keys = head(torch.randn(6, 32), "customer"), head(torch.randn(80, 32), "article")
    history = random_purchase_extras(TABLES, 6, seed=4).history
    with torch.no_grad():
        head.repeat_shift.fill_(1e4)
        _, ranked = head.rank(query, keys, 12, history)
    for row in range(6):
        owned = set(history.article[row][history.mask[row]].tolist())
        first = ranked[row, : min(len(owned), 12)].tolist()
        assert set(first) <= owned


def test_choose_shift_prefers_the_smallest_of_the_tied_best() -> None:
    flat = {shift: {"map@12": 0.18} for shift in SHIFTS}
    assert choose_shift(flat, "map@12") == 0.0
    clear = {0.0: {"map@12": 0.029}, 4.0: {"map@12": 0.036}, 8.0: {"map@12": 0.0494}, 1e4: {"map@12": 0.0483}}
    assert choose_shift(clear, "map@12") == 8.0
    near = {0.0: {"map@12": 0.100}, 2.0: {"map@12": 0.1200}, 6.0: {"map@12": 0.1201}}
    assert choose_shift(near, "map@12") == 2.0


def test_the_shift_is_saved_and_older_weights_without_it_load_as_zero() -> None:
    torch.manual_seed(0)
    model = TaskModel("purchase", table_specs(TABLES), CONFIG)
    model.head.repeat_shift.fill_(6.0)
    state = model.state_dict()
    assert float(state["head.repeat_shift"]) == 6.0
    fresh = TaskModel("purchase", table_specs(TABLES), CONFIG)
    fresh.load_state_dict(state, strict=True)
    assert float(fresh.head.repeat_shift) == 6.0
    older = {name: value for name, value in state.items() if name != "head.repeat_shift"}
    fresh.load_state_dict(older, strict=True)
    assert float(fresh.head.repeat_shift) == 0.0


def test_calibration_sets_the_chosen_shift_and_reports_its_metrics(trained_artifacts: Path) -> None:
    snapshot = GraphSnapshot.open(trained_artifacts / "snapshot")
    table = task_splits("purchase", sort_by_day(snapshot.transactions()), snapshot)["val"]
    inference = TaskInference.from_bundle(trained_artifacts / "purchase", snapshot, compile="none")
    metrics, tried = calibrated_metrics(inference, table)
    assert set(tried) == set(SHIFTS)
    shift = float(inference.model.head.repeat_shift)
    assert shift == choose_shift(tried, "map@12") and metrics == tried[shift]
    np.testing.assert_allclose(evaluate_model(inference, table)["map@12"], metrics["map@12"], rtol=1e-6)
