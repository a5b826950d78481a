"""Baselines on hand-made histories, and proof that they never read the future."""

from __future__ import annotations

import numpy as np
import pytest

from models.store.tables import Transactions
from training.tasks.baselines import (
    BASELINES,
    churn_recency_frequency,
    purchase_popular,
    purchase_repeat,
    sales_last_week,
)
from training.tasks.definitions import TASKS
from training.tasks.table import TaskTable, concat_tables

SEED = 111  # cutoff 110: the "last week" is days 104..110

# (customer, article, day, price)
ROWS = [
    (0, 5, 100, 0.1),
    (0, 3, 101, 0.1),
    (0, 5, 102, 0.1),
    (0, 7, 103, 0.1),
    (0, 2, 103, 0.1),  # same day as article 7 but a later row: more recent
    (1, 1, 105, 0.5),
    (1, 1, 106, 0.25),
    (1, 4, 107, 0.125),
    (2, 1, 108, 0.0625),
    (2, 4, 109, 0.5),
    (2, 6, 110, 0.75),
    (3, 9, 111, 0.9),  # at the seed time: invisible to every baseline
]


def make_tx(rows: list[tuple[int, int, int, float]]) -> Transactions:
    c, a, d, p = zip(*rows, strict=True)
    return Transactions(
        np.array(c, dtype=np.int64),
        np.array(a, dtype=np.int64),
        np.array(d, dtype=np.int32),
        np.array(p, dtype=np.float32),
    )


def seeds(entity: list[int], seed_time: int = SEED) -> TaskTable:
    n = len(entity)
    return TaskTable(np.array(entity), np.full(n, seed_time), seed_time - 1, label=np.zeros(n, np.float32))


def test_sales_last_week_sums_days_before_the_seed():
    pred = sales_last_week(make_tx(ROWS), seeds(list(range(10))))
    # days 104..110: a1 0.5 + 0.25 + 0.0625, a4 0.125 + 0.5, a6 0.75; a9's day-111 sale is unseen
    np.testing.assert_allclose(pred, [0, 0.8125, 0, 0, 0.625, 0, 0.75, 0, 0, 0])


def test_popular_ranks_last_week_counts():
    # days 104..110 rows per article: a1 3, a4 2, a6 1 -> padded with -1
    pred = purchase_popular(make_tx(ROWS), seeds([0, 3]), k=6)
    np.testing.assert_array_equal(pred, [[1, 4, 6, -1, -1, -1]] * 2)


def test_repeat_orders_own_history_then_tops_up():
    pred = purchase_repeat(make_tx(ROWS), seeds([3, 0, 1]), k=6)
    # customer 3: nothing before the seed -> popular list
    # customer 0: newest distinct 2 (row after 7 on day 103), 7, 5 (day 102), 3; then popular 1, 4
    # customer 1: 4 (day 107), 1 (day 106); popular 1 and 4 skipped, then 6
    np.testing.assert_array_equal(pred, [[1, 4, 6, -1, -1, -1], [2, 7, 5, 3, 1, 4], [4, 1, 6, -1, -1, -1]])
    assert purchase_repeat(make_tx(ROWS), seeds([0]), k=2).tolist() == [[2, 7]]


def test_churn_rule_hand_computed():
    rows = [(0, 0, 110, 1.0), (0, 0, 100, 1.0), (0, 0, 90, 1.0), (1, 0, 104, 1.0), (2, 0, 110, 1.0)]
    rows += [(2, 0, 82, 1.0), (3, 0, 83, 1.0)]
    score = churn_recency_frequency(make_tx(rows), seeds([0, 1, 2, 3, 4]), weeks=4)
    # seed 111, span days 83..110, week = (110 - day) // 7, score 1 - (a+1)/6 + r/(30*6)
    # c0: weeks 0, 1, 2 -> a=3, r=1;  c1: a=1, r=7;  c2: day 82 is outside -> a=1, r=1
    # c3: day 83 is week 3 -> a=1, r=28;  c4: nothing -> a=0, r=29
    expected = [1 - 4 / 6 + 1 / 180, 1 - 2 / 6 + 7 / 180, 1 - 2 / 6 + 1 / 180, 1 - 2 / 6 + 28 / 180]
    np.testing.assert_allclose(score, [*expected, 1 - 1 / 6 + 29 / 180])
    assert np.argsort(score).tolist() == [0, 2, 1, 3, 4]


def random_rows(rng: np.random.Generator, n: int = 600) -> list[tuple[int, int, int, float]]:
    cols = (rng.integers(0, 40, n), rng.integers(0, 25, n), rng.integers(0, 60, n), rng.random(n))
    return [(int(c), int(a), int(d), float(p)) for c, a, d, p in zip(*cols, strict=True)]


def alter_from(rows: list[tuple[int, int, int, float]], day: int, customers: np.ndarray) -> list:
    """Rows rewritten from ``day`` on (other articles, prices) plus a new purchase per customer."""
    kept = [(c, (a + 7) % 25, d, p * 3) if d >= day else (c, a, d, p) for c, a, d, p in rows]
    return kept + [(int(c), 0, day, 5.0) for c in customers]


@pytest.mark.parametrize("task_name", ["churn", "sales", "purchase"])
def test_baselines_ignore_transactions_at_or_after_the_seed_time(task_name):
    rng = np.random.default_rng(3)
    rows, num_nodes = random_rows(rng), {"customer": 40, "article": 25}
    tables = [TASKS[task_name].make_table(make_tx(rows), num_nodes, t) for t in (30, 37)]
    for baseline in BASELINES[task_name].values():
        parts = []
        for table in tables:
            parts.append(baseline(make_tx(rows), table))
            altered = alter_from(rows, int(table.seed_time[0]), table.entity)
            np.testing.assert_array_equal(baseline(make_tx(altered), table), parts[-1])
        # Rows of several seed times: each part still sees only its own past.
        np.testing.assert_array_equal(baseline(make_tx(rows), concat_tables(tables)), np.concatenate(parts))


def test_baseline_outputs_have_the_scored_shapes():
    rng = np.random.default_rng(4)
    tx, num_nodes = make_tx(random_rows(rng)), {"customer": 40, "article": 25}
    for task_name, baselines in BASELINES.items():
        table = TASKS[task_name].make_table(tx, num_nodes, 40)
        for baseline in baselines.values():
            pred = baseline(tx, table)
            expected = (len(table), TASKS[task_name].k) if table.is_link else (len(table),)
            assert pred.shape == expected
