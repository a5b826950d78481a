"""Task tables on hand-made transactions: exact entities, labels, window edges and cutoffs."""

from __future__ import annotations

import numpy as np
import pytest

from models.store.tables import Transactions
from training.data.load import load_tables
from training.tasks.baselines import BASELINES
from training.tasks.cutoffs import split_cutoffs
from training.tasks.definitions import TASKS
from training.tasks.metrics import compute_metrics
from training.tasks.table import TaskTable, concat_tables

NUM_NODES = {"customer": 6, "article": 5}
CUTOFF = 110  # churn entity window days 104..110, label window days 111..117

# (customer, article, day, price); deliberately not in day order
ROWS = [
    (3, 3, 118, 0.4),  # day t+8: outside every window
    (0, 0, 104, 0.1),  # day t-6: first day of the churn entity window
    (0, 2, 111, 0.25),  # day t+1: first day of the label window
    (0, 2, 111, 0.25),
    (0, 1, 111, 0.5),
    (1, 3, 103, 0.1),  # day t-7: just before the churn entity window
    (1, 3, 112, 0.125),
    (2, 0, 110, 0.3),  # day t: seen by the model, not a label
    (3, 1, 110, 0.2),
    (4, 0, 117, 0.0625),  # day t+7: last day of the label window
    (5, 2, 105, 0.1),
    (5, 2, 117, 0.75),
]


def make_tx(rows: list[tuple[int, int, int, float]]) -> Transactions:
    c, a, d, p = zip(*rows, strict=True)
    return Transactions(
        np.array(c, dtype=np.int64),
        np.array(a, dtype=np.int64),
        np.array(d, dtype=np.int32),
        np.array(p, dtype=np.float32),
    )


def test_churn_entities_and_labels():
    table = TASKS["churn"].make_table(make_tx(ROWS), NUM_NODES, CUTOFF)
    # active in 104..110: customers 0, 2, 3, 5 (1 bought on day 103 only, 4 only later)
    np.testing.assert_array_equal(table.entity, [0, 2, 3, 5])
    # 0 buys on 111 and 5 on 117 (stay); 2 never again, 3 only on day 118 (churn)
    np.testing.assert_array_equal(table.label, [0, 1, 1, 0])
    assert table.label.dtype == np.float32 and table.entity.dtype == np.int64
    np.testing.assert_array_equal(table.seed_time, [CUTOFF + 1] * 4)
    assert table.cutoff == CUTOFF


def test_sales_covers_every_article():
    table = TASKS["sales"].make_table(make_tx(ROWS), NUM_NODES, CUTOFF)
    np.testing.assert_array_equal(table.entity, np.arange(5))
    # days 111..117: a0 0.0625; a1 0.5; a2 0.25 + 0.25 + 0.75; a3 0.125 (day 118 excluded); a4 unsold
    np.testing.assert_allclose(table.label, [0.0625, 0.5, 1.25, 0.125, 0.0])


def test_purchase_targets_are_distinct_articles_in_csr():
    table = TASKS["purchase"].make_table(make_tx(ROWS), NUM_NODES, CUTOFF)
    # buyers in 111..117: 0 -> {1, 2} (2 bought twice), 1 -> {3}, 4 -> {0}, 5 -> {2}
    np.testing.assert_array_equal(table.entity, [0, 1, 4, 5])
    np.testing.assert_array_equal(table.target_ptr, [0, 2, 3, 4, 5])
    np.testing.assert_array_equal(table.target_items, [1, 2, 3, 0, 2])
    assert table.label is None and table.is_link


def test_tables_do_not_depend_on_row_order():
    shuffled = [ROWS[i] for i in np.random.default_rng(0).permutation(len(ROWS))]
    for task in TASKS.values():
        a = task.make_table(make_tx(shuffled), NUM_NODES, CUTOFF)
        b = task.make_table(make_tx(sorted(ROWS, key=lambda r: r[2])), NUM_NODES, CUTOFF)
        for field in ("entity", "label", "target_ptr", "target_items"):
            x, y = getattr(a, field), getattr(b, field)
            assert (x is None and y is None) or np.array_equal(x, y)


def test_labels_match_a_loop_over_random_data():
    rng = np.random.default_rng(1)
    n, num_nodes = 400, {"customer": 30, "article": 12}
    rows = list(
        zip(
            rng.integers(0, 30, n).tolist(),
            rng.integers(0, 12, n).tolist(),
            rng.integers(0, 40, n).tolist(),
            rng.random(n).round(3).tolist(),
            strict=True,
        )
    )
    tx, t = make_tx(rows), 20
    churn = TASKS["churn"].make_table(tx, num_nodes, t)
    active = sorted({c for c, _, d, _ in rows if t - 7 < d <= t})
    later = {c for c, _, d, _ in rows if t < d <= t + 7}
    assert churn.entity.tolist() == active
    assert churn.label.tolist() == [float(c not in later) for c in active]
    sales = TASKS["sales"].make_table(tx, num_nodes, t)
    expect = [sum(p for _, a, d, p in rows if a == art and t < d <= t + 7) for art in range(12)]
    np.testing.assert_allclose(sales.label, expect, rtol=1e-5)
    purchase = TASKS["purchase"].make_table(tx, num_nodes, t)
    bought = {c: sorted({a for c2, a, d, _ in rows if c2 == c and t < d <= t + 7}) for c in sorted(later)}
    assert purchase.entity.tolist() == list(bought)
    assert purchase.target_items.tolist() == [a for items in bought.values() for a in items]


def test_split_cutoffs_placement():
    # data on days 100..150: test labels 144..150, val 137..143, train weekly back from 129
    # while cutoff - 100 + 1 >= 7, i.e. cutoff >= 106
    assert split_cutoffs(100, 150) == {"train": [108, 115, 122, 129], "val": [136], "test": [143]}
    assert split_cutoffs(100, 150, min_history_days=10)["train"] == [115, 122, 129]
    assert split_cutoffs(100, 150, max_train_cutoffs=2)["train"] == [122, 129]
    # 28 days (0..27) is the minimum: history 0..6, then train, val and test label weeks
    assert split_cutoffs(0, 27) == {"train": [6], "val": [13], "test": [20]}
    with pytest.raises(ValueError, match="need at least 28"):
        split_cutoffs(0, 26)


def test_splits_build_one_table_per_cutoff():
    rng = np.random.default_rng(2)
    rows = [
        (int(c), int(a), int(d), 0.5)
        for c, a, d in zip(
            rng.integers(0, 6, 300), rng.integers(0, 5, 300), rng.integers(100, 151, 300), strict=True
        )
    ]
    tx = make_tx(rows)
    for task in TASKS.values():
        splits = task.splits(tx, NUM_NODES, max_train_cutoffs=3)
        assert [[t.cutoff for t in tables] for tables in splits.values()] == [[115, 122, 129], [136], [143]]
        test = splits["test"][0]
        assert np.array_equal(test.entity, task.make_table(tx, NUM_NODES, 143).entity)
        assert (test.seed_time == 144).all()


def test_subset_and_concat_of_link_tables():
    table = TASKS["purchase"].make_table(make_tx(ROWS), NUM_NODES, CUTOFF)
    sub = table.subset(np.array([2, 0]))
    np.testing.assert_array_equal(sub.entity, [4, 0])
    np.testing.assert_array_equal(sub.target_ptr, [0, 1, 3])
    np.testing.assert_array_equal(sub.target_items, [0, 1, 2])
    both = concat_tables([table, sub])
    assert both.cutoff == CUTOFF and len(both) == 6
    np.testing.assert_array_equal(both.target_ptr, [0, 2, 3, 4, 5, 6, 8])
    ptr, items = np.array([0, 1]), np.array([4])
    other = TaskTable(np.array([1]), np.array([9]), 8, target_ptr=ptr, target_items=items)
    assert concat_tables([table, other]).cutoff is None


def test_task_table_validates_shapes():
    with pytest.raises(ValueError, match="exactly one"):
        TaskTable(np.arange(2), np.zeros(2), 1)
    with pytest.raises(ValueError, match="label has shape"):
        TaskTable(np.arange(2), np.zeros(2), 1, label=np.zeros(3))
    with pytest.raises(ValueError, match="target_ptr"):
        TaskTable(np.arange(2), np.zeros(2), 1, target_ptr=np.array([0, 1]), target_items=np.array([3]))


def test_all_splits_from_generated_csv(tiny_csv_dir):
    tables = load_tables(tiny_csv_dir, progress=False)
    tx = tables.transactions
    num_nodes = {"customer": len(tables.customers), "article": len(tables.articles)}
    expected = split_cutoffs(int(tx.day.min()), int(tx.day.max()))
    splits = {name: task.splits(tx, num_nodes) for name, task in TASKS.items()}
    for name, task in TASKS.items():
        assert {s: [t.cutoff for t in ts] for s, ts in splits[name].items()} == expected
        for table in (splits[name]["val"][0], splits[name]["test"][0]):
            assert len(table) > 0
            for baseline in BASELINES[name].values():
                values = compute_metrics(task, baseline(tx, table), table)
                assert tuple(values) == tuple(task.metrics) and np.isfinite(list(values.values())).all()
    # The week that labels the validation purchases is the week that selects the test churners.
    val_buyers, test_churners = splits["purchase"]["val"][0], splits["churn"]["test"][0]
    np.testing.assert_array_equal(val_buyers.entity, test_churners.entity)
