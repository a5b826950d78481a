"""The LightGBM baseline: features equal plain loops, it never reads the future, and it learns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from models.store.tables import Transactions
from training.data.load import load_tables
from training.tasks.baselines import BASELINES
from training.tasks.cutoffs import split_cutoffs
from training.tasks.day_windows import sort_by_day
from training.tasks.definitions import TASKS
from training.tasks.gbdt_features import WINDOWS, EntityColumns, history_features, history_names
from training.tasks.gbdt_model import bind_inputs
from training.tasks.metrics import compute_metrics

LIGHTGBM = {task: BASELINES[task]["lightgbm"] for task in ("churn", "sales", "purchase")}


def test_history_features_equal_plain_loops() -> None:
    rng = np.random.default_rng(0)
    n = 3000
    tx = sort_by_day(Transactions(rng.integers(0, 30, n), rng.integers(0, 20, n),
                                  rng.integers(0, 500, n).astype(np.int32), rng.random(n).astype(np.float32)))
    seed = 400
    sides = (("customer", tx.customer, tx.article), ("article", tx.article, tx.customer))
    for node_type, own, other in sides:
        got = history_features(tx, node_type, np.arange(30 if node_type == "customer" else 20), seed)
        names = history_names(node_type)
        for e in range(got.shape[0]):
            mine = [i for i in range(n) if own[i] == e and tx.day[i] < seed]  # the seed day itself excluded
            days = [int(tx.day[i]) for i in mine]
            expected = {"days_since_last": seed - max(days) if days else 10_000,
                        "first_seen_days": seed - min(days) if days else 0}
            for w in WINDOWS:
                inside = [i for i in mine if tx.day[i] >= seed - w]
                expected[f"rows_{w}d"] = len(inside)
                expected[f"spend_{w}d"] = sum(float(tx.price[i]) for i in inside)
            year = [i for i in mine if tx.day[i] >= seed - 364]
            expected[names[-3]] = len({int(other[i]) for i in year})
            expected["active_days_364d"] = len({int(tx.day[i]) for i in year})
            for name, value in expected.items():
                assert got[e, names.index(name)] == pytest.approx(value, rel=1e-5), (node_type, e, name)


@pytest.fixture(scope="module")
def small(small_csv_dir: Path) -> tuple[Transactions, EntityColumns, dict[str, int], dict[str, list[int]]]:
    tables = load_tables(small_csv_dir, progress=False)
    tx = sort_by_day(tables.transactions)
    nodes = {"customer": tables.customers, "article": tables.articles}
    columns = EntityColumns({t: n.categorical for t, n in nodes.items()},
                            {t: n.numeric for t, n in nodes.items()})
    num_nodes = {"customer": len(tables.customers), "article": len(tables.articles)}
    return tx, columns, num_nodes, split_cutoffs(int(tx.day.min()), int(tx.day.max()))


@pytest.mark.slow
@pytest.mark.parametrize("task", ["churn", "sales", "purchase"])
def test_lightgbm_never_reads_the_future(small, task: str) -> None:
    tx, columns, num_nodes, cutoffs = small
    table = TASKS[task].make_table(tx, num_nodes, cutoffs["val"][0])
    seed_time = int(table.seed_time[0])
    before = LIGHTGBM[task](tx, table, columns)
    # Arbitrary purchases on and after the seed day: every entity buys the same article daily.
    rng = np.random.default_rng(1)
    days = np.arange(seed_time, seed_time + 10)
    m = 5000
    extra = Transactions(rng.integers(0, num_nodes["customer"], m), rng.integers(0, num_nodes["article"], m),
                         rng.choice(days, m).astype(tx.day.dtype), (rng.random(m) * 9).astype(tx.price.dtype))
    future = Transactions(*(np.concatenate([getattr(tx, f), getattr(extra, f)])
                            for f in ("customer", "article", "day", "price")))
    np.testing.assert_array_equal(LIGHTGBM[task](future, table, columns), before)


@pytest.mark.slow
def test_lightgbm_beats_the_trivial_baselines_on_generated_data(small) -> None:
    tx, columns, num_nodes, cutoffs = small
    scores = {}
    for task in ("churn", "sales", "purchase"):
        table = TASKS[task].make_table(tx, num_nodes, cutoffs["test"][0])
        metric = TASKS[task].primary_metric
        scores[task] = {name: compute_metrics(TASKS[task], fn(tx, table), table)[metric]
                        for name, fn in BASELINES[task].items()}
        scores[task]["lightgbm_with_columns"] = compute_metrics(
            TASKS[task], LIGHTGBM[task](tx, table, columns), table)[metric]
        if task == "sales":
            scores[task]["zero"] = compute_metrics(TASKS[task], np.zeros(len(table)), table)[metric]
    assert scores["churn"]["lightgbm_with_columns"] > 0.6, scores
    assert scores["sales"]["lightgbm_with_columns"] < scores["sales"]["zero"], scores
    assert scores["purchase"]["lightgbm_with_columns"] > scores["purchase"]["popular"], scores


@pytest.mark.slow
def test_capped_fitting_and_chunked_scoring_bound_memory_and_still_predict(small, monkeypatch) -> None:
    """At full size the re-ranker fits on a subset of customers and scores them in chunks: chunking
    changes nothing, and a capped fit still returns a full, valid ranking for every row."""
    import training.tasks.gbdt_model as gbdt

    tx, columns, num_nodes, cutoffs = small
    table = TASKS["purchase"].make_table(tx, num_nodes, cutoffs["test"][0])
    whole = LIGHTGBM["purchase"](tx, table, columns)
    monkeypatch.setattr(gbdt, "PREDICT_CHUNK", 7)
    np.testing.assert_array_equal(LIGHTGBM["purchase"](tx, table, columns), whole)
    monkeypatch.setattr(gbdt, "MAX_FIT_CUSTOMERS", 40)
    monkeypatch.setattr(gbdt, "MAX_FIT_ROWS", 40)
    capped = LIGHTGBM["purchase"](tx, table, columns)
    assert capped.shape == whole.shape and (capped >= 0).all() and (capped < num_nodes["article"]).all()
    assert not np.array_equal(capped, whole)  # the cap took effect
    churn = TASKS["churn"].make_table(tx, num_nodes, cutoffs["test"][0])
    assert np.isfinite(LIGHTGBM["churn"](tx, churn, columns)).all()


def test_the_run_seed_reaches_lightgbm_and_only_lightgbm(small) -> None:
    tx, columns, num_nodes, cutoffs = small
    table = TASKS["churn"].make_table(tx, num_nodes, cutoffs["val"][0])
    baselines = BASELINES["churn"]
    one, again = (bind_inputs(baselines["lightgbm"], columns, 1)(tx, table) for _ in range(2))
    np.testing.assert_array_equal(one, again)  # a seed is a draw, fixed
    assert not np.array_equal(one, bind_inputs(baselines["lightgbm"], columns, 0)(tx, table))
    rule = next(fn for name, fn in baselines.items() if name != "lightgbm")
    assert bind_inputs(rule, columns, 1) is rule  # the rules take neither columns nor a seed
