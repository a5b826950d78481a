"""What a customer's lines of an article were worth (the purchase history's ``value``) equals a
plain-loop computation, and the repeat score reads it only when its head is built to."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from models.feature_definitions import HISTORY_SLOTS, NUM_PAIR_VALUE
from models.graph.features import table_specs
from models.graph.history import snapshot_history
from models.nn.config import ModelConfig
from models.nn.model import TaskModel
from models.store.snapshot import GraphSnapshot
from training.bench.random_batches import random_purchase_extras, random_tables
from training.synth.tables import tables_from_purchases

CUSTOMERS, ARTICLES, SEED_TIME = 6, 30, 60


def test_value_matches_plain_loops(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    customer, article = rng.integers(0, CUSTOMERS, 400), rng.integers(0, ARTICLES, 400)
    day = rng.integers(10, 80, 400)
    tables = tables_from_purchases(customer, article, day, CUSTOMERS, ARTICLES)
    snapshot = GraphSnapshot.build(tables, tmp_path, progress=False)
    price = tables.transactions.price.astype(np.float64)
    unit = price.mean()  # the snapshot's mean line price
    history = snapshot_history(snapshot, torch.arange(CUSTOMERS), torch.full((CUSTOMERS,), SEED_TIME))
    assert history.value.shape == (CUSTOMERS, HISTORY_SLOTS, NUM_PAIR_VALUE)
    for i in range(CUSTOMERS):
        mine = (customer == i) & (day < SEED_TIME)
        total, filled = price[mine].sum() / unit, int(history.mask[i].sum())
        assert filled == len(np.unique(article[mine])) and not history.value[i, filled:].any()
        for slot in range(filled):
            lines = mine & (article == int(history.article[i, slot]))
            worth = price[lines].sum() / unit
            expected = torch.tensor([math.log1p(worth), worth / total, math.log1p(worth / lines.sum())])
            torch.testing.assert_close(history.value[i, slot], expected.float(), rtol=1e-4, atol=1e-5)


def test_the_repeat_score_reads_the_value_only_when_built_to() -> None:
    tables = random_tables(300, 80)
    history = random_purchase_extras(tables, 4, seed=1).history
    worth_more = history._replace(value=history.value + 1.0)
    query = torch.randn(4, 9)
    for pair_value in (True, False):
        torch.manual_seed(0)
        config = ModelConfig(hidden=32, head_hidden=16, embedding_dim=8, pair_value=pair_value)
        head = TaskModel("purchase", table_specs(tables), config).eval().head
        before, after = head.repeat_score(query, history), head.repeat_score(query, worth_more)
        assert torch.equal(before[history.mask], after[history.mask]) != pair_value
        rows, slots = history.mask.nonzero(as_tuple=True)  # the ranking path scores the same
        torch.testing.assert_close(head._history_scores(query, worth_more, rows, slots), after[history.mask])


def test_bundles_written_before_it_load_without_it() -> None:
    assert ModelConfig().pair_value
    assert not ModelConfig.from_dict({"hidden": 32}).pair_value
