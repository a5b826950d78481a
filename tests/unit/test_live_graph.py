"""The live graph (base snapshot + applied batches) reads exactly like a snapshot rebuilt from the same rows.

Every reader of the graph is compared over every node and several seed days: the CSR rows, the
temporal features, the sampler's trees (with and without a per-day limit), the purchase history,
article popularity and the churn population; late rows (before the base's last day) included.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import models.store.live_csr as live_csr
from models.graph.history import snapshot_history, snapshot_popularity
from models.graph.sampler import SamplerConfig, TemporalSampler
from models.graph.temporal_features import active_within, mean_price, temporal_features
from models.schema import ARTICLE, CUSTOMER, NODE_TYPES
from models.store.keyed import keyed_csr
from models.store.live import BatchError, LiveGraph, SequenceGap
from models.store.records import IngestBatch
from models.store.snapshot import GraphSnapshot
from models.store.tables import RelTables, Transactions
from training.synth.tables import tables_from_purchases

CUSTOMERS, ARTICLES, CUT = 40, 30, 150


def _subset(tx: Transactions, index: np.ndarray) -> Transactions:
    return Transactions(tx.customer[index], tx.article[index], tx.day[index], tx.price[index])


def _batches(tables: RelTables, tx: Transactions, size: int, first: int = 1) -> list[IngestBatch]:
    customer_ids = [i.decode() for i in tables.customers.ids]
    article_ids = [i.decode() for i in tables.articles.ids]
    batches = []
    for n, start in enumerate(range(0, len(tx), size)):
        part = slice(start, start + size)
        batches.append(IngestBatch(first + n, "transactions", {
            "day": [int(d) for d in tx.day[part]],
            "customer_id": [customer_ids[c] for c in tx.customer[part]],
            "article_id": [article_ids[a] for a in tx.article[part]],
            "price": [float(p) for p in tx.price[part]],
            "sales_channel_id": [2] * len(tx.day[part]),
        }))
    return batches


@pytest.fixture(scope="module", params=["merged", "overlay"])
def graphs(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> tuple[LiveGraph, GraphSnapshot]:
    """The live graph (read from merged arrays, or through the overlay alone) and the rebuild."""
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "overlay":
            patch.setattr(live_csr, "MERGED_MAX_EDGES", -1)
        return _graphs(tmp_path_factory)


def _graphs(tmp_path_factory: pytest.TempPathFactory) -> tuple[LiveGraph, GraphSnapshot]:
    rng = np.random.default_rng(3)
    size = 1500
    customer = rng.integers(0, CUSTOMERS - 2, size)  # the last two customers never buy
    # a popular article, so that days with several sales of one article exist
    article = np.where(rng.random(size) < 0.2, 0, rng.integers(0, ARTICLES - 2, size))
    day = np.sort(rng.integers(100, 160, size))
    tables = tables_from_purchases(customer, article, day, CUSTOMERS, ARTICLES, seed=1)
    tx = tables.transactions
    base_rows = np.flatnonzero(tx.day <= CUT)
    later = np.flatnonzero(tx.day > CUT)
    # Late rows (ingested after later days, dated on and before the base's last day) and rows in
    # an order other than by day: the live graph must place each in its day, after that day's rows.
    late = np.concatenate([base_rows[-60:][::3], base_rows[400:430]])
    base_rows = np.setdiff1d(base_rows, late)
    ingested = np.concatenate([later[:200], late, later[200:][::-1]])
    root = tmp_path_factory.mktemp("live")
    base = GraphSnapshot.build(RelTables(tables.customers, tables.articles, _subset(tx, base_rows)),
                               root / "base", progress=False)
    rebuilt_tx = _subset(tx, np.concatenate([base_rows, ingested]))
    rebuilt = GraphSnapshot.build(RelTables(tables.customers, tables.articles, rebuilt_tx),
                                  root / "rebuilt", progress=False)
    live = LiveGraph(base)
    batches = _batches(tables, _subset(tx, ingested), 37)
    assert live.apply(batches[0]) and not live.apply(batches[0])  # a repeated batch is a no-op
    live.apply_many(batches[1:5])
    for batch in batches[5:]:
        live.apply(batch)
    return live, rebuilt


TIMES = (120, CUT, CUT + 1, 155, 161, 170)


def _rows(csr, nodes: torch.Tensor, time: torch.Tensor) -> list[list[tuple[int, int]]]:
    start, end = csr.row_bounds_before(nodes, time)
    out = []
    for s, e in zip(start.tolist(), end.tolist(), strict=True):
        pos = torch.arange(s, e)
        out.append(list(zip(csr.col.index_select(0, pos).tolist(), csr.day.index_select(0, pos).tolist(),
                            strict=True)))
    return out


def test_the_live_graph_counts_and_days_match_the_rebuild(graphs) -> None:
    live, rebuilt = graphs
    view = live.view()
    ingested = rebuilt.num_transactions - live.base.num_transactions
    assert live.sequence == -(-ingested // 37) and live.delta_edges == ingested
    assert live.now_day == rebuilt.end_time == view.end_time
    assert view.num_transactions == rebuilt.num_transactions
    assert (view.min_day, view.max_day) == (rebuilt.min_day, rebuilt.max_day)
    assert mean_price(view) == pytest.approx(mean_price(rebuilt), rel=1e-12)


@pytest.mark.parametrize("node_type", NODE_TYPES)
def test_every_row_and_feature_matches_the_rebuild(graphs, node_type: str) -> None:
    live, rebuilt = graphs
    view = live.view()
    nodes = torch.arange(rebuilt.num_nodes[node_type])
    for t in TIMES:
        time = torch.full_like(nodes, t)
        want = _rows(keyed_csr(rebuilt, node_type), nodes, time)
        assert _rows(keyed_csr(view, node_type), nodes, time) == want
        torch.testing.assert_close(temporal_features(view, node_type, nodes, time),
                                   temporal_features(rebuilt, node_type, nodes, time), atol=1e-6, rtol=1e-6)
        assert torch.equal(active_within(view, node_type, nodes, time, 7),
                           active_within(rebuilt, node_type, nodes, time, 7))


@pytest.mark.parametrize("per_day", [0, 2])
@pytest.mark.parametrize("seed_type", NODE_TYPES)
def test_the_sampler_draws_the_same_trees(graphs, per_day: int, seed_type: str) -> None:
    live, rebuilt = graphs
    config = SamplerConfig((3, 2), "last", per_day)
    seeds = torch.arange(rebuilt.num_nodes[seed_type])
    for t in TIMES:
        time = torch.full_like(seeds, t)
        got = TemporalSampler(rebuilt, config).sample(seed_type, seeds, time, graph=live.view())
        want = TemporalSampler(rebuilt, config).sample(seed_type, seeds, time)
        for name in ("node_ids", "node_time", "batch", "edge_index"):
            for key, value in getattr(want, name).items():
                assert torch.equal(getattr(got, name)[key], value), (t, name, key)


def test_the_purchase_history_and_popularity_match(graphs) -> None:
    live, rebuilt = graphs
    view = live.view()
    customers = torch.arange(CUSTOMERS)
    articles = torch.arange(ARTICLES)
    for t in TIMES:
        got = snapshot_history(view, customers, torch.full_like(customers, t))
        want = snapshot_history(rebuilt, customers, torch.full_like(customers, t))
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(snapshot_popularity(view, articles, torch.full_like(articles, t)),
                                   snapshot_popularity(rebuilt, articles, torch.full_like(articles, t)))


def test_new_nodes_are_appended_found_and_bought(graphs, tmp_path: Path) -> None:
    live, _ = graphs
    base = live.base
    fresh = LiveGraph(base)
    fresh.apply(IngestBatch(1, "customers", {"customer_id": ["new-customer"], "FN": [1.0], "age": [30]}))
    fresh.apply(IngestBatch(2, "articles", {"article_id": ["0999999999"], "product_type_no": [253]}))
    fresh.apply(IngestBatch(3, "customers", {"customer_id": [4242]}))  # an integer id is its digits
    assert fresh.lookup(CUSTOMER, ["4242", 4242, b"4242"]).tolist() == [base.num_nodes[CUSTOMER] + 1] * 3
    customer = int(fresh.lookup(CUSTOMER, ["new-customer"])[0])
    article = int(fresh.lookup(ARTICLE, ["0999999999"])[0])
    assert (customer, article) == (base.num_nodes[CUSTOMER], base.num_nodes[ARTICLE])
    view = fresh.view()
    assert view.ids[CUSTOMER][customer] == b"new-customer"
    # no vocabulary in this snapshot: categorical values are "missing", numeric ones missing with the flag
    assert view.categorical[CUSTOMER].index_select(0, torch.tensor([customer])).tolist() == [[0] * 4]
    assert view.numeric[CUSTOMER].index_select(0, torch.tensor([customer])).tolist() == [[0.0, 1.0]]
    nodes = torch.tensor([0, customer])  # a graph with new nodes and no new edge yet
    for per_day in (0, 2):
        tree = TemporalSampler(base, SamplerConfig((3, 2), "last", per_day)).sample(
            CUSTOMER, nodes, torch.full_like(nodes, CUT + 1), graph=view)
        assert tree.node_ids[CUSTOMER].tolist()[:2] == [0, customer]
    features = temporal_features(view, CUSTOMER, nodes, torch.full_like(nodes, CUT + 1))
    assert torch.equal(features[0], temporal_features(base, CUSTOMER, nodes[:1], torch.tensor([CUT + 1]))[0])
    assert features[1, -1] == 0  # no history
    existing = base.ids[CUSTOMER][0].decode()
    fresh.apply(IngestBatch(4, "transactions", {
        "day": [CUT + 1, CUT + 2], "customer_id": ["new-customer", existing],
        "article_id": ["0999999999", "0999999999"], "price": [0.05, 0.02]}))
    view = fresh.view()
    nodes = torch.tensor([customer])
    assert _rows(keyed_csr(view, CUSTOMER), nodes, torch.tensor([CUT + 3])) == [[(article, CUT + 1)]]
    buyers = _rows(keyed_csr(view, ARTICLE), torch.tensor([article]), torch.tensor([CUT + 3]))
    assert buyers == [[(customer, CUT + 1), (0, CUT + 2)]]
    history = snapshot_history(view, nodes, torch.tensor([CUT + 3]))
    assert history.article[0, 0] == article and history.mask[0, 0]
    assert fresh.now_day == CUT + 3


def test_bad_batches_change_nothing(graphs) -> None:
    live, _ = graphs
    fresh = LiveGraph(live.base)
    good = {"day": [CUT + 1], "customer_id": [live.base.ids[CUSTOMER][0].decode()],
            "article_id": [live.base.ids[ARTICLE][0].decode()], "price": [0.01]}
    with pytest.raises(BatchError, match="row 0: customer_id 'nobody' is not a known customer"):
        fresh.apply(IngestBatch(1, "transactions", good | {"customer_id": ["nobody"]}))
    with pytest.raises(BatchError, match="row 0: price"):
        fresh.apply(IngestBatch(1, "transactions", good | {"price": [float("nan")]}))
    with pytest.raises(SequenceGap):
        fresh.apply(IngestBatch(2, "transactions", good))
    assert fresh.sequence == 0 and fresh.delta_edges == 0 and fresh.view().changed is False
    assert fresh.apply(IngestBatch(1, "transactions", good)) and fresh.delta_edges == 1


def test_a_clock_moves_the_seed_day(graphs) -> None:
    live, _ = graphs
    today = [live.base.max_day - 5]
    clocked = LiveGraph(live.base, clock=lambda: today[0])
    assert clocked.now_day == clocked.view().end_time == live.base.max_day + 1  # never before the data
    today[0] = live.base.max_day + 30
    assert clocked.now_day == clocked.view().end_time == live.base.max_day + 30
    customer = torch.tensor([0])
    aged = temporal_features(clocked.view(), CUSTOMER, customer, torch.tensor([clocked.now_day]))
    assert torch.equal(aged, temporal_features(live.base, CUSTOMER, customer, torch.tensor([today[0]])))
