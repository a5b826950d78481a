"""Temporal aggregates equal a plain-loop computation over the raw transactions, at window edges."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from models.feature_definitions import ACTIVE_WEEKS, FEATURE_NAMES, RECENCY_CAP_DAYS, WINDOWS_DAYS
from models.graph.features import gather_inputs, table_specs
from models.graph.sampler import TemporalSampler
from models.graph.temporal_features import temporal_features
from models.schema import ARTICLE, CUSTOMER
from models.store.keyed import keyed_csr
from models.store.snapshot import GraphSnapshot
from models.store.tables import RelTables
from training.synth.tables import SyntheticSize, synthetic_tables

# Few days and many rows, so most nodes buy several times on one day and on the window edges.
SMALL = SyntheticSize(num_customers=40, num_articles=20, num_transactions=2000, num_days=400)


@pytest.fixture(scope="module")
def tables() -> RelTables:
    return synthetic_tables(SMALL, seed=5)


@pytest.fixture(scope="module")
def snapshot(tables: RelTables, tmp_path_factory: pytest.TempPathFactory) -> GraphSnapshot:
    return GraphSnapshot.build(tables, tmp_path_factory.mktemp("snapshot"), progress=False)


def brute_force(tables: RelTables, node_type: str, node: int, seed_time: int) -> list[float]:
    """The features of one node by plain loops over every transaction (``day < seed_time``)."""
    tx = tables.transactions
    owner = tx.customer if node_type == CUSTOMER else tx.article
    mean_price = float(np.mean(tx.price.astype(np.float64)))
    events = [(int(d), float(p)) for o, d, p in zip(owner, tx.day, tx.price, strict=True)
              if o == node and d < seed_time]
    out = []
    for window in WINDOWS_DAYS:
        inside = [(d, p) for d, p in events if d >= seed_time - window]
        out += [math.log1p(len(inside)) / 4, math.log1p(sum(p for _, p in inside) / mean_price) / 4,
                math.log1p(len({d for d, _ in inside})) / 4]
    out += [math.log1p(len(events)) / 4, math.log1p(len({d for d, _ in events})) / 4]
    cap = math.log1p(RECENCY_CAP_DAYS)
    if events:
        last, first = max(d for d, _ in events), min(d for d, _ in events)
        out += [math.log1p(min(seed_time - last, RECENCY_CAP_DAYS)) / cap,
                math.log1p(min(seed_time - first, RECENCY_CAP_DAYS)) / cap, 1.0]
    else:
        out += [1.0, 0.0, 0.0]
    for n in ACTIVE_WEEKS:  # a customer's weeks with a purchase, [s - 7(k+1), s - 7k) for k < n
        active = sum(any(seed_time - 7 * (k + 1) <= d < seed_time - 7 * k for d, _ in events)
                     for k in range(n))
        out.append(active / n if node_type == CUSTOMER else 0.0)
    return out


@pytest.mark.parametrize("node_type", [CUSTOMER, ARTICLE])
def test_matches_brute_force_at_window_edges(tables: RelTables, snapshot: GraphSnapshot,
                                             node_type: str) -> None:
    tx = tables.transactions
    owner = tx.customer if node_type == CUSTOMER else tx.article
    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(tx), 40)
    ids, times = [], []
    for i in picks:  # seed times on the event's own day, the day after, and each window edge
        day = int(tx.day[i])
        starts = (*WINDOWS_DAYS, *(7 * k for k in range(1, max(ACTIVE_WEEKS) + 1)))
        edges = (*(day + w for w in starts), *(day + w + 1 for w in starts))
        for seed_time in (day, day + 1, *edges):
            ids.append(int(owner[i]))
            times.append(seed_time)
    ids.append(snapshot.num_nodes[node_type] - 1)
    times.append(snapshot.min_day)  # no history at all
    got = temporal_features(snapshot, node_type, torch.tensor(ids), torch.tensor(times))
    assert got.shape == (len(ids), len(FEATURE_NAMES))
    want = torch.tensor([brute_force(tables, node_type, n, t) for n, t in zip(ids, times, strict=True)])
    torch.testing.assert_close(got, want.float(), atol=1e-5, rtol=1e-5)


def test_an_event_on_the_seed_day_is_not_counted(tables: RelTables, snapshot: GraphSnapshot) -> None:
    tx = tables.transactions
    i = int(np.argmax(tx.day))
    customer, day = int(tx.customer[i]), int(tx.day[i])
    on_day = temporal_features(snapshot, CUSTOMER, torch.tensor([customer] * 2), torch.tensor([day, day + 1]))
    assert not torch.equal(on_day[0], on_day[1])
    events_before = int(((tx.customer == customer) & (tx.day < day)).sum())
    assert math.isclose(float(on_day[0, FEATURE_NAMES.index("count_all")]), math.log1p(events_before) / 4,
                        rel_tol=1e-6)


def test_every_sampled_node_gets_its_features_at_its_seed_time(snapshot: GraphSnapshot) -> None:
    sampler = TemporalSampler(snapshot)
    seeds, times = torch.tensor([0, 1, 2]), torch.tensor([snapshot.min_day + 30, snapshot.end_time, 3])
    batch = sampler.sample(CUSTOMER, seeds, times)
    inputs = gather_inputs(snapshot, batch)
    specs = table_specs(snapshot)
    for t in (CUSTOMER, ARTICLE):
        assert inputs.num[t].shape[1] == specs[t].num_numeric
        own = inputs.num[t][:, -len(FEATURE_NAMES):]
        want = temporal_features(snapshot, t, batch.node_ids[t], batch.seed_time[batch.batch[t]])
        torch.testing.assert_close(own, want)


def test_a_batch_equals_each_row_alone(snapshot: GraphSnapshot) -> None:
    # Batches are deduplicated and sorted internally: repeated and shuffled rows keep their own values.
    rng = np.random.default_rng(1)
    ids = torch.from_numpy(rng.integers(0, snapshot.num_nodes[ARTICLE], 64))
    choices = [snapshot.min_day + 100, snapshot.min_day + 101, snapshot.end_time]
    times = torch.from_numpy(rng.choice(choices, 64))
    ids[10:20], times[10:20] = ids[0], times[0]
    batch = temporal_features(snapshot, ARTICLE, ids, times)
    alone = torch.cat([temporal_features(snapshot, ARTICLE, ids[i:i + 1], times[i:i + 1]) for i in range(64)])
    assert torch.equal(batch, alone)
    assert temporal_features(snapshot, ARTICLE, ids[:0], times[:0]).shape == (0, len(FEATURE_NAMES))


@pytest.mark.parametrize("node_type", [CUSTOMER, ARTICLE])
def test_keyed_csr_bounds_equal_the_row_search(snapshot: GraphSnapshot, node_type: str) -> None:
    """The sampler's key search gives the CSR's per-row binary search's bounds, before the first
    day, on every event day and its neighbours, and past the last day."""
    csr = snapshot.adjacency[(node_type, CUSTOMER if node_type == ARTICLE else ARTICLE)]
    days = csr.day.long()
    times = torch.cat([days - 1, days, days + 1, torch.tensor([int(days.min()) - 50, int(days.max()) + 50])])
    nodes = torch.arange(csr.num_rows).repeat_interleave(1 + times.numel() // csr.num_rows)[: times.numel()]
    nodes = nodes[torch.randperm(nodes.numel(), generator=torch.Generator().manual_seed(0))]
    start, end = keyed_csr(snapshot, node_type).row_bounds_before(nodes, times)
    expected_start, expected_end = csr.row_bounds_before(nodes, times)
    assert torch.equal(start, expected_start) and torch.equal(end, expected_end)
    assert (end > start).any() and (end == start).any()
