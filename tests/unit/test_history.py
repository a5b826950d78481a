"""Purchase history features equal a plain-loop computation, at window edges and without leakage."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from models.feature_definitions import HISTORY_SLOTS, NUM_PAIR
from models.feature_definitions import PAIR_WINDOWS as WINDOWS
from models.graph.history import popular_now, snapshot_history, snapshot_popularity
from models.nn.config import ModelConfig
from models.schema import ARTICLE
from models.store.keyed import keyed_csr
from models.store.snapshot import GraphSnapshot
from training.synth.tables import tables_from_purchases

CUSTOMERS, ARTICLES = 12, 40


@pytest.fixture(scope="module")
def purchases() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    size = 900
    customer = rng.integers(0, CUSTOMERS - 1, size)  # the last customer never buys
    article = rng.integers(0, ARTICLES - 4, size)  # articles 36.. only in the edge cases below
    day = rng.integers(100, 160, size)
    # Window edges: purchases exactly 1, 7, 28 days before and on the seed day 150 of customer 0.
    extra = np.array([[0, 36, 149], [0, 37, 143], [0, 38, 122], [0, 39, 150], [0, 36, 150]])
    return (np.r_[customer, extra[:, 0]], np.r_[article, extra[:, 1]], np.r_[day, extra[:, 2]])


@pytest.fixture(scope="module")
def snapshot(purchases, tmp_path_factory: pytest.TempPathFactory) -> GraphSnapshot:
    tables = tables_from_purchases(*purchases, CUSTOMERS, ARTICLES)
    return GraphSnapshot.build(tables, Path(tmp_path_factory.mktemp("snap")), progress=False)


def log1p(x: float) -> float:
    return math.log1p(x)


def brute_popularity(purchases, article: int, time: int) -> list[float]:
    _, articles, days = purchases
    sold = [int(d) for a, d in zip(articles, days, strict=True) if a == article and d < time]
    counts = [sum(d >= time - w for d in sold) for w in (*WINDOWS, 1)]
    since = min(time - max(sold), 366) if sold else 366
    return [log1p(c) for c in counts] + [log1p(since)]


def brute_history(purchases, customer: int, time: int) -> list[tuple[int, list[float]]]:
    """Per customer, newest distinct articles first, with their features, by plain loops."""
    customers, articles, days = purchases
    rows = enumerate(zip(customers, articles, days, strict=True))
    events = [(int(d), pos, int(a)) for pos, (c, a, d) in rows if c == customer and d < time]
    events.sort()  # the CSR's (day, input position) order; a later position the same day is later
    latest: dict[int, int] = {}
    for index, (_, _, a) in enumerate(events):
        latest[a] = index
    ordered = sorted(latest, key=lambda a: -latest[a])[:HISTORY_SLOTS]
    out = []
    for rank, a in enumerate(ordered):
        mine = [d for d, _, b in events if b == a]
        in_window = [sum(d >= time - w for d in mine) for w in WINDOWS]
        row = [log1p(len(mine)), log1p(time - max(mine)), log1p(time - min(mine))]
        gap = (max(mine) - min(mine)) / (len(mine) - 1) if len(mine) > 1 else 0.0
        row += [log1p(gap), log1p((time - max(mine)) / max(gap, 1.0))] if len(mine) > 1 else [0.0, 0.0]
        row += [log1p(n) for n in in_window] + [float(n > 0) for n in in_window]
        row += [rank / HISTORY_SLOTS, len(mine) / len(events), log1p(len(events)), log1p(len(latest)),
                log1p(time - events[-1][0]), float(rank == 0)]
        row += [log1p(sum(d >= time - w for d, _, _ in events)) for w in WINDOWS]
        out.append((a, row + brute_popularity(purchases, a, time)))
    return out


def test_history_matches_plain_loops(snapshot, purchases) -> None:
    customer = torch.tensor([0, 0, 0, 1, 5, CUSTOMERS - 1, 2, 0])
    time = torch.tensor([150, 151, 101, 160, 130, 150, 99, 200])
    history = snapshot_history(snapshot, customer, time)
    assert history.features.shape == (8, HISTORY_SLOTS, NUM_PAIR)
    for i, (c, t) in enumerate(zip(customer.tolist(), time.tolist(), strict=True)):
        expected = brute_history(purchases, c, t)
        n = len(expected)
        assert history.mask[i].tolist() == [True] * n + [False] * (HISTORY_SLOTS - n)
        assert history.article[i, :n].tolist() == [a for a, _ in expected]
        if n:
            torch.testing.assert_close(history.features[i, :n], torch.tensor([f for _, f in expected]))
        assert not history.features[i, n:].any()


def test_seed_day_purchases_are_excluded(snapshot, purchases) -> None:
    history = snapshot_history(snapshot, torch.tensor([0, 0]), torch.tensor([150, 151]))
    before, after = history.article[0][history.mask[0]].tolist(), history.article[1][history.mask[1]].tolist()
    assert 39 not in before and after[:2] == [36, 39]  # bought on day 150: visible from seed time 151 only
    assert before[0] == 36 and history.features[0, 0, 0].item() == pytest.approx(math.log(2))  # once
    assert history.features[1, 0, 0].item() == pytest.approx(math.log(3))  # the seed day's purchase too
    # 7 and 28 days before the seed time are the windows' first days; 29 days before is outside.
    for article, in_7, in_28 in ((37, 1.0, 1.0), (38, 0.0, 1.0)):
        slot = before.index(article)
        assert history.features[0, slot, 8:10].tolist() == [in_7, in_28]
    late = snapshot_history(snapshot, torch.tensor([0]), torch.tensor([151]))
    slot = late.article[0].tolist().index(38)
    assert late.features[0, slot, 9].item() == 0.0


def test_popularity_matches_plain_loops(snapshot, purchases) -> None:
    article = torch.arange(ARTICLES)
    for t in (100, 123, 150, 161):
        got = snapshot_popularity(snapshot, article, torch.full((ARTICLES,), t))
        expected = torch.tensor([brute_popularity(purchases, a, t) for a in range(ARTICLES)])
        torch.testing.assert_close(got, expected)


def test_a_shared_popularity_table_gives_the_same_history(snapshot) -> None:
    customer, time = torch.arange(CUSTOMERS), torch.full((CUSTOMERS,), 140)
    table = snapshot_popularity(snapshot, torch.arange(ARTICLES), torch.full((ARTICLES,), 140))
    direct = snapshot_history(snapshot, customer, time)
    for a, b in zip(direct, snapshot_history(snapshot, customer, time, table), strict=True):
        assert torch.equal(a, b)


def brute_popular(purchases, time: int, count: int) -> list[int]:
    """The ``count`` articles sold most often in the 7 days before ``time`` (ties: lower index first)."""
    _, articles, days = purchases
    sold = [sum(1 for a, d in zip(articles, days, strict=True) if a == x and time - 7 <= d < time)
            for x in range(ARTICLES)]
    return sorted(range(ARTICLES), key=lambda x: (-sold[x], x))[:count]


def test_last_weeks_best_sellers_follow_the_history_as_candidates(snapshot, purchases) -> None:
    customer = torch.tensor([0, 1, CUSTOMERS - 1, 4])
    time = torch.tensor([150, 150, 150, 123])
    times = torch.tensor([123, 150])
    popular = popular_now(keyed_csr(snapshot, ARTICLE), times, 6)
    assert [row.tolist() for row in popular] == [brute_popular(purchases, t, 6) for t in (123, 150)]
    candidates = popular.index_select(0, torch.tensor([1, 1, 1, 0]))
    plain = snapshot_history(snapshot, customer, time)
    history = snapshot_history(snapshot, customer, time, candidates=candidates)
    assert history.features.shape == (4, HISTORY_SLOTS + 6, NUM_PAIR)
    for a, b in zip(plain, history, strict=True):  # the history's slots are unchanged
        assert torch.equal(a, b[:, :HISTORY_SLOTS])
    windows = len(WINDOWS)
    for i, (c, t) in enumerate(zip(customer.tolist(), time.tolist(), strict=True)):
        events = [(d, a) for cc, a, d in zip(*purchases, strict=True) if cc == c and d < t]
        bought = {a for _, a in events}
        for j, article in enumerate(candidates[i].tolist()):
            slot = HISTORY_SLOTS + j
            if article in bought:  # already in the history: an empty slot
                assert not history.mask[i, slot] and not history.features[i, slot].any()
                continue
            assert history.mask[i, slot] and history.article[i, slot] == article
            recent = log1p(t - max(d for d, _ in events)) if events else 0.0
            expected = [0.0] * (5 + 2 * windows)  # the pair's own columns: never bought
            expected += [1.0 + j / 6, 0.0, log1p(len(events)), log1p(len(bought)), recent, 0.0]
            expected += [log1p(sum(d >= t - w for d, _ in events)) for w in WINDOWS]
            expected += brute_popularity(purchases, article, t)
            torch.testing.assert_close(history.features[i, slot], torch.tensor(expected))
            assert not history.value[i, slot].any()
            assert torch.equal(history.codes[i, slot], snapshot.categorical[ARTICLE][article])
    assert history.mask[2, HISTORY_SLOTS:].all()  # a customer who never bought: every candidate


def test_bundles_written_before_the_candidates_rank_their_history_alone() -> None:
    assert ModelConfig().popular_candidates > 0
    assert ModelConfig.from_dict({"hidden": 32}).popular_candidates == 0
