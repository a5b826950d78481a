"""TemporalSampler: no leakage, exact 'last', uniform 'uniform', consistent subgraph structure."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch

from models.graph.sampler import SamplerConfig, TemporalSampler
from models.graph.subgraph import SubgraphBatch
from models.schema import ARTICLE, BOUGHT_BY, BUYS, CUSTOMER, EDGE_TYPES, NODE_TYPES
from models.store.snapshot import GraphSnapshot
from models.store.tables import RelTables
from training.synth.tables import SyntheticSize, synthetic_tables, tables_from_purchases

# Few days, so many purchases share a day and tie-breaking matters.
SMALL = SyntheticSize(num_customers=60, num_articles=25, num_transactions=1500, num_days=30)
OTHER = {CUSTOMER: ARTICLE, ARTICLE: CUSTOMER}


@pytest.fixture(scope="module")
def tables() -> RelTables:
    return synthetic_tables(SMALL, seed=3)


@pytest.fixture(scope="module")
def snapshot(tables: RelTables, tmp_path_factory: pytest.TempPathFactory) -> GraphSnapshot:
    return GraphSnapshot.build(tables, tmp_path_factory.mktemp("snapshot"), progress=False)


def random_seeds(
    snapshot: GraphSnapshot, seed_type: str, num: int, rng: np.random.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    seeds = rng.integers(0, snapshot.num_nodes[seed_type], num)
    times = rng.integers(snapshot.min_day - 2, snapshot.end_time + 3, num)
    return torch.from_numpy(seeds), torch.from_numpy(times)


def purchases_by_node(tables: RelTables) -> dict[str, dict[int, list[tuple[int, int, int]]]]:
    """Per node type and node, its purchases as ``(day, input position, neighbour)``."""
    tx = tables.transactions
    adjacency: dict[str, dict[int, list[tuple[int, int, int]]]] = {t: defaultdict(list) for t in NODE_TYPES}
    rows = zip(tx.customer.tolist(), tx.article.tolist(), tx.day.tolist(), strict=True)
    for position, (customer, article, day) in enumerate(rows):
        adjacency[CUSTOMER][customer].append((day, position, article))
        adjacency[ARTICLE][article].append((day, position, customer))
    return adjacency


def reference_last(
    tables: RelTables, fanouts: tuple[int, ...], seed_type: str, seeds: list[int], times: list[int],
    per_day: int = 0,
) -> tuple[dict[str, list[tuple[int, int, int]]], dict[tuple[str, str, str], list[tuple[int, int]]]]:
    """Slow per-node 'last' sampling from the raw purchases: nodes as (id, time, tree), edges as pairs."""
    adjacency = purchases_by_node(tables)
    nodes: dict[str, list[tuple[int, int, int]]] = {t: [] for t in NODE_TYPES}
    edges: dict[tuple[str, str, str], list[tuple[int, int]]] = {e: [] for e in EDGE_TYPES}
    frontier = []
    for tree, (seed, time) in enumerate(zip(seeds, times, strict=True)):
        nodes[seed_type].append((seed, time, tree))
        frontier.append((seed, tree, tree))
    parent_type = seed_type
    for fanout in fanouts:
        child_type = OTHER[parent_type]
        edge_type = BOUGHT_BY if child_type == ARTICLE else BUYS
        next_frontier = []
        for node, tree, parent_local in frontier:
            allowed = sorted(p for p in adjacency[parent_type][node] if p[0] < times[tree])
            if per_day:  # only the last per_day purchases of each day are candidates
                allowed = [p for i, p in enumerate(allowed)
                           if sum(q[0] == p[0] for q in allowed[i + 1:]) < per_day]
            for day, _, child in reversed(allowed[-fanout:]):
                local = len(nodes[child_type])
                nodes[child_type].append((child, day, tree))
                edges[edge_type].append((local, parent_local))
                next_frontier.append((child, tree, local))
        frontier, parent_type = next_frontier, child_type
    return nodes, edges


def as_lists(batch: SubgraphBatch) -> tuple[dict, dict]:
    """The batch in the shapes :func:`reference_last` returns."""
    nodes = {
        t: list(zip(batch.node_ids[t].tolist(), batch.node_time[t].tolist(), batch.batch[t].tolist(),
                    strict=True))
        for t in NODE_TYPES
    }
    edges = {e: [tuple(pair) for pair in batch.edge_index[e].t().tolist()] for e in EDGE_TYPES}
    return nodes, edges


@pytest.mark.parametrize("seed_type", NODE_TYPES)
@pytest.mark.parametrize("fanouts", [(3,), (4, 2), (2, 3, 2)])
def test_last_matches_slow_reference(
    tables: RelTables, snapshot: GraphSnapshot, seed_type: str, fanouts: tuple[int, ...]
) -> None:
    rng = np.random.default_rng(11)
    seeds, times = random_seeds(snapshot, seed_type, 40, rng)
    batch = TemporalSampler(snapshot, SamplerConfig(fanouts=fanouts, strategy="last")).sample(
        seed_type, seeds, times
    )
    assert as_lists(batch) == reference_last(tables, fanouts, seed_type, seeds.tolist(), times.tolist())


@pytest.mark.parametrize("seed_type", NODE_TYPES)
@pytest.mark.parametrize("per_day", [1, 2])
def test_per_day_limit_matches_slow_reference(
    tables: RelTables, snapshot: GraphSnapshot, seed_type: str, per_day: int
) -> None:
    rng = np.random.default_rng(12)
    seeds, times = random_seeds(snapshot, seed_type, 40, rng)
    config = SamplerConfig(fanouts=(4, 3), strategy="last", per_day=per_day)
    batch = TemporalSampler(snapshot, config).sample(seed_type, seeds, times)
    expected = reference_last(tables, (4, 3), seed_type, seeds.tolist(), times.tolist(), per_day)
    assert as_lists(batch) == expected
    unlimited = TemporalSampler(snapshot, SamplerConfig(fanouts=(4, 3), strategy="last")).sample(
        seed_type, seeds, times)
    assert as_lists(batch) != as_lists(unlimited)  # the data has days with several purchases per node


@pytest.mark.parametrize("strategy", ["last", "uniform"])
@pytest.mark.parametrize("seed_type", NODE_TYPES)
def test_no_sampled_edge_at_or_after_its_seed_time(
    tables: RelTables, snapshot: GraphSnapshot, strategy: str, seed_type: str
) -> None:
    """THE leakage test: every sampled edge, at every hop, is strictly before its tree's seed time."""
    purchases = set(zip(tables.transactions.customer.tolist(), tables.transactions.article.tolist(),
                        tables.transactions.day.tolist(), strict=True))
    sampler = TemporalSampler(snapshot, SamplerConfig(fanouts=(5, 4, 3), strategy=strategy))
    rng = np.random.default_rng(5)
    generator = torch.Generator().manual_seed(5)
    sampled_edges = 0
    for _ in range(20):
        seeds, times = random_seeds(snapshot, seed_type, 32, rng)
        batch = sampler.sample(seed_type, seeds, times, generator=generator)
        for src_type, _, dst_type in EDGE_TYPES:
            child, parent = batch.edge_index[(src_type, _, dst_type)]
            day = batch.node_time[src_type][child]
            tree = batch.batch[src_type][child]
            assert torch.all(day < batch.seed_time[tree])
            # node_time is the day of a real purchase between child and parent, so it is the edge's day.
            ids = (batch.node_ids[src_type][child], batch.node_ids[dst_type][parent])
            customer, article = ids if src_type == CUSTOMER else ids[::-1]
            assert set(zip(customer.tolist(), article.tolist(), day.tolist(), strict=True)) <= purchases
            sampled_edges += child.numel()
    assert sampled_edges > 5000  # the data really exercised every hop


@pytest.mark.parametrize("strategy", ["last", "uniform"])
def test_subgraph_structure(tables: RelTables, snapshot: GraphSnapshot, strategy: str) -> None:
    adjacency = purchases_by_node(tables)
    fanouts = (4, 3)
    sampler = TemporalSampler(snapshot, SamplerConfig(fanouts=fanouts, strategy=strategy))
    seeds, times = random_seeds(snapshot, CUSTOMER, 50, np.random.default_rng(8))
    batch = sampler.sample(CUSTOMER, seeds, times, generator=torch.Generator().manual_seed(8))

    assert torch.equal(batch.node_ids[CUSTOMER][:50], seeds)
    assert torch.equal(batch.node_time[CUSTOMER][:50], times)
    assert torch.equal(batch.batch[CUSTOMER][:50], torch.arange(50))
    assert set(batch.edge_index) == set(EDGE_TYPES)
    picks: dict[tuple[str, int], Counter] = defaultdict(Counter)
    for src_type, rel, dst_type in EDGE_TYPES:
        child, parent = batch.edge_index[(src_type, rel, dst_type)]
        assert batch.edge_index[(src_type, rel, dst_type)].dtype == torch.long
        assert child.numel() == 0 or (child.min() >= 0 and child.max() < batch.num_nodes()[src_type])
        assert parent.numel() == 0 or (parent.min() >= 0 and parent.max() < batch.num_nodes()[dst_type])
        assert torch.equal(batch.batch[src_type][child], batch.batch[dst_type][parent])
        child_ids, child_days = batch.node_ids[src_type][child], batch.node_time[src_type][child]
        for pick in zip(parent.tolist(), child_ids.tolist(), child_days.tolist(), strict=True):
            picks[(dst_type, pick[0])][pick[1:]] += 1
    # Every non-seed node is the child of exactly one edge.
    children = {t: [] for t in NODE_TYPES}
    for src_type, rel, dst_type in EDGE_TYPES:
        children[src_type] += batch.edge_index[(src_type, rel, dst_type)][0].tolist()
    assert sorted(children[CUSTOMER]) == list(range(50, batch.num_nodes()[CUSTOMER]))
    assert sorted(children[ARTICLE]) == list(range(batch.num_nodes()[ARTICLE]))
    # Each parent got min(fanout, allowed) distinct purchases of its own, all before the seed time.
    # Parents: the customer seeds (hop 0) and every article (hop 1); hop-2 customers are leaves.
    parents = [(CUSTOMER, local, fanouts[0]) for local in range(50)]
    parents += [(ARTICLE, local, fanouts[1]) for local in range(batch.num_nodes()[ARTICLE])]
    for node_type, local, fanout in parents:
        node = batch.node_ids[node_type][local].item()
        limit = batch.seed_time[batch.batch[node_type][local]].item()
        allowed = Counter((n, d) for d, _, n in adjacency[node_type][node] if d < limit)
        got = picks[(node_type, local)]
        assert sum(got.values()) == min(fanout, sum(allowed.values()))
        assert not got - allowed


def test_uniform_is_uniform_over_allowed_edges(tmp_path: Path) -> None:
    """One customer bought article i on day 100 + i; at seed time 120 the 20 earlier ones are candidates."""
    num_articles, seed_time, fanout, trials = 30, 120, 5, 20_000
    tables = tables_from_purchases(
        customer=np.zeros(num_articles, np.int64), article=np.arange(num_articles),
        day=100 + np.arange(num_articles), num_customers=2, num_articles=num_articles,
    )
    sampler = TemporalSampler(GraphSnapshot.build(tables, tmp_path, progress=False),
                              SamplerConfig(fanouts=(fanout,), strategy="uniform"))
    batch = sampler.sample(CUSTOMER, torch.zeros(trials, dtype=torch.long),
                           torch.full((trials,), seed_time), generator=torch.Generator().manual_seed(0))
    child, parent = batch.edge_index[BOUGHT_BY]
    articles = batch.node_ids[ARTICLE][child]
    assert torch.equal(torch.bincount(parent, minlength=trials), torch.full((trials,), fanout))
    per_tree = articles.reshape(trials, fanout).sort(dim=1).values
    assert torch.all(per_tree[:, 1:] > per_tree[:, :-1])  # without replacement
    assert int(articles.max()) < seed_time - 100
    # Each article is picked with probability 5/20; chi-square with 19 dof, p = 0.001 critical 43.8.
    counts = torch.bincount(articles, minlength=20).double()
    expected = trials * fanout / 20
    assert float(((counts - expected) ** 2 / expected).sum()) < 43.8
    # Pairs too (catches a sampler with right marginals but correlated picks): 190 cells, critical 252.
    pairs = Counter((a, b) for row in per_tree.tolist() for i, a in enumerate(row) for b in row[i + 1:])
    expected_pair = trials * 10 / 190
    assert len(pairs) == 190
    assert sum((c - expected_pair) ** 2 / expected_pair for c in pairs.values()) < 252


def test_uniform_is_reproducible_given_a_generator(snapshot: GraphSnapshot) -> None:
    sampler = TemporalSampler(snapshot, SamplerConfig(strategy="uniform"))
    seeds, times = random_seeds(snapshot, ARTICLE, 16, np.random.default_rng(2))

    def draw(seed: int) -> torch.Tensor:
        batch = sampler.sample(ARTICLE, seeds, times, generator=torch.Generator().manual_seed(seed))
        return batch.node_ids[CUSTOMER]

    assert torch.equal(draw(1), draw(1))
    assert not torch.equal(draw(1), draw(2))


def test_max_sizes_bound_and_are_reached(tmp_path: Path) -> None:
    """On a complete bipartite graph every fanout fills, so the worst case is the actual size."""
    customers, articles = np.meshgrid(np.arange(6), np.arange(5), indexing="ij")
    tables = tables_from_purchases(customers.ravel(), articles.ravel(), np.full(30, 50),
                                   num_customers=6, num_articles=5)
    sampler = TemporalSampler(GraphSnapshot.build(tables, tmp_path, progress=False),
                              SamplerConfig(fanouts=(4, 3, 2)))
    batch = sampler.sample(CUSTOMER, torch.tensor([0, 3, 5]), torch.full((3,), 51))
    nodes, edges = sampler.max_sizes(CUSTOMER, 3)
    assert nodes == {CUSTOMER: 3 + 36, ARTICLE: 12 + 72}
    assert edges == {BOUGHT_BY: 12 + 72, BUYS: 36}
    assert batch.num_nodes() == nodes
    assert batch.num_edges() == edges


def test_seeds_without_history_and_single_hop(snapshot: GraphSnapshot) -> None:
    sampler = TemporalSampler(snapshot, SamplerConfig(fanouts=(3,)))
    seeds = torch.tensor([0, 1, 2])
    empty = sampler.sample(CUSTOMER, seeds, torch.full((3,), snapshot.min_day))
    assert empty.num_nodes() == {CUSTOMER: 3, ARTICLE: 0}
    assert empty.num_edges() == {BUYS: 0, BOUGHT_BY: 0}
    assert empty.edge_index[BUYS].shape == (2, 0)
    one_hop = sampler.sample(ARTICLE, seeds, torch.full((3,), snapshot.end_time))
    assert one_hop.edge_index[BOUGHT_BY].shape == (2, 0)
    assert one_hop.edge_index[BUYS].shape[1] == one_hop.num_nodes()[CUSTOMER] > 0
    assert sampler.sample(ARTICLE, seeds[:0], seeds[:0]).num_nodes() == {CUSTOMER: 0, ARTICLE: 0}


def test_rejects_bad_arguments(snapshot: GraphSnapshot) -> None:
    sampler = TemporalSampler(snapshot)
    with pytest.raises(ValueError, match="out of range"):
        sampler.sample(ARTICLE, torch.tensor([SMALL.num_articles]), torch.tensor([0]))
    with pytest.raises(ValueError, match="differ"):
        sampler.sample(ARTICLE, torch.tensor([0, 1]), torch.tensor([0]))
    with pytest.raises(ValueError, match="seed_type"):
        sampler.sample("order", torch.tensor([0]), torch.tensor([0]))
    with pytest.raises(ValueError, match="fanouts"):
        SamplerConfig(fanouts=(3, 0))
    with pytest.raises(ValueError, match="strategy"):
        SamplerConfig(strategy="random")  # type: ignore[arg-type]


def _trees(batch: SubgraphBatch) -> list[tuple]:
    """Each seed's tree as nested ``(id, day, sorted children)``, whatever the nodes are shared by."""
    children: dict[tuple[str, int], list[tuple[str, int]]] = defaultdict(list)
    for (src, _, dst), index in batch.edge_index.items():
        for child, parent in index.t().tolist():
            children[(dst, parent)].append((src, child))

    def tree(node_type: str, local: int) -> tuple:
        return (int(batch.node_ids[node_type][local]), int(batch.node_time[node_type][local]),
                sorted(tree(*child) for child in children[(node_type, local)]))

    return [tree(batch.seed_type, i) for i in range(batch.num_seeds)]


@pytest.mark.parametrize("fanouts,per_day", [((3, 2), 0), ((4, 3, 2), 0), ((3, 2), 1)])
@pytest.mark.parametrize("seed_type", [CUSTOMER, ARTICLE])
def test_shared_trees_equal_the_disjoint_trees(snapshot: GraphSnapshot, fanouts: tuple[int, ...],
                                               per_day: int, seed_type: str) -> None:
    sampler = TemporalSampler(snapshot, SamplerConfig(fanouts=fanouts, per_day=per_day))
    seeds = torch.arange(snapshot.num_nodes[seed_type])
    for day in (snapshot.min_day + 3, snapshot.end_time - 5, snapshot.end_time):
        disjoint = sampler.sample(seed_type, seeds, torch.full_like(seeds, day))
        shared = sampler.sample_shared(seed_type, seeds, day)
        assert _trees(shared) == _trees(disjoint)
        assert sum(shared.num_nodes().values()) < sum(disjoint.num_nodes().values())  # shared: fewer
        assert (shared.seed_time == day).all() and not shared.batch[seed_type][seeds.numel():].any()
    with pytest.raises(ValueError, match="strategy='last'"):
        TemporalSampler(snapshot, SamplerConfig(strategy="uniform")).sample_shared(seed_type, seeds, day)
