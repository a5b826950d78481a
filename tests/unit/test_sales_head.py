"""The sales head's recent-sales path: it reads the seed's own weekly sales exactly, starts at zero,
moves the output linearly, and compiles without a graph break on snapshot inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.feature_definitions import NUM_TEMPORAL, WINDOWS_DAYS, window_spend
from models.graph.features import gather_inputs, table_specs
from models.graph.sampler import TemporalSampler
from models.graph.temporal_features import mean_price
from models.nn.config import ModelConfig
from models.nn.inputs import ModelInputs
from models.nn.model import TaskModel
from models.schema import ARTICLE
from models.store.snapshot import GraphSnapshot
from models.store.tables import RelTables
from training.synth.tables import SyntheticSize, synthetic_tables

SMALL = SyntheticSize(num_customers=60, num_articles=30, num_transactions=3000, num_days=400)


@pytest.fixture(scope="module")
def tables() -> RelTables:
    return synthetic_tables(SMALL, seed=7)


@pytest.fixture(scope="module")
def snapshot(tables: RelTables, tmp_path_factory: pytest.TempPathFactory) -> GraphSnapshot:
    return GraphSnapshot.build(tables, tmp_path_factory.mktemp("snapshot"), progress=False)


@pytest.fixture(scope="module")
def inputs(snapshot: GraphSnapshot) -> ModelInputs:
    seeds = torch.arange(12)
    times = torch.full_like(seeds, snapshot.min_day + 200)
    return gather_inputs(snapshot, TemporalSampler(snapshot).sample(ARTICLE, seeds, times))


def _model(snapshot: GraphSnapshot) -> TaskModel:
    torch.manual_seed(0)
    config = ModelConfig(hidden=16, head_hidden=8, log_target=False)  # the raw-space head: linear in sales
    return TaskModel("sales", table_specs(snapshot), config).eval()


def test_window_spend_is_the_raw_spend_per_window(tables: RelTables, snapshot: GraphSnapshot,
                                                  inputs: ModelInputs) -> None:
    tx = tables.transactions
    price = tx.price.astype(np.float64)
    seed_time = snapshot.min_day + 200
    features = inputs.num[ARTICLE][:12, -NUM_TEMPORAL:]
    before = tx.day < seed_time
    want = [[price[(tx.article == a) & before & (tx.day >= seed_time - w)].sum() for w in WINDOWS_DAYS]
            for a in range(12)]
    got = window_spend(features).double() * mean_price(snapshot)
    torch.testing.assert_close(got, torch.tensor(want), rtol=1e-4, atol=1e-4)
    assert (got > 0).any()


def test_recent_sales_path_starts_at_zero_and_is_linear(snapshot: GraphSnapshot, inputs: ModelInputs) -> None:
    model = _model(snapshot)
    head = model.head
    head.spend_unit.fill_(0.5)
    with torch.no_grad():
        emb = model.gnn(inputs.cat, inputs.num, inputs.rel_time, inputs.edge_index, inputs.seed_type,
                        inputs.seed_rows)
        mlp_only = head.mlp(emb).squeeze(-1)
        torch.testing.assert_close(model(inputs), mlp_only)  # the recent-sales weights start at zero
        head.recent.weight.zero_()
        head.recent.weight[0, 0] = 1.0  # the last 7 days, one week
        gate = 2 * torch.sigmoid(head.carry_over(emb)).squeeze(-1)
        last_week = window_spend(inputs.num[ARTICLE][:12, -NUM_TEMPORAL:])[:, 0]
        torch.testing.assert_close(model(inputs), mlp_only + gate * 0.5 * last_week)


def test_sales_forward_on_snapshot_inputs_has_no_graph_breaks(snapshot: GraphSnapshot,
                                                              inputs: ModelInputs) -> None:
    explanation = torch._dynamo.explain(_model(snapshot))(inputs)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1
