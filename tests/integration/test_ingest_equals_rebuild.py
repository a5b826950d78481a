"""Ingest equals rebuild: answers on a snapshot of days ..D plus days D+1..D+7 ingested as batches equal
the answers on a snapshot built from days ..D+7, with the same bundles, for every task; also after a
restart (a replay of the log) and after a compaction. And the answers move right after a purchase, and
new customers and articles can be added, bought and scored.

The bundles are ``trained_artifacts`` (trained once on all of ``tiny_csv_dir``, whose snapshot is the
rebuild); the live graph's base is ``python -m training.snapshot --until D`` of the same files.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch

from models.registry import TASKS
from models.runtime.inference import TaskInference
from models.schema import ARTICLE, CUSTOMER, day_to_date
from models.store.live import LiveGraph
from models.store.records import IngestBatch
from models.store.snapshot import GraphSnapshot
from models.store.versions import compact
from tests.ingest_helpers import CUT, transaction_batches
from training.snapshot import main as build_snapshot

BATCH_ROWS = 40
IDS = 60  # entities compared per task


@pytest.fixture(scope="module")
def cut_snapshot(tiny_csv_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> GraphSnapshot:
    out = tmp_path_factory.mktemp("cut")
    assert build_snapshot(["--data", str(tiny_csv_dir), "--out", str(out), "--until", CUT, "--quiet"]) == 0
    return GraphSnapshot.open(out / "snapshot")


@pytest.fixture(scope="module")
def later_batches(tiny_csv_dir: Path) -> list[IngestBatch]:
    return transaction_batches(tiny_csv_dir, CUT, BATCH_ROWS)


@pytest.fixture(scope="module")
def live(cut_snapshot: GraphSnapshot, later_batches: list[IngestBatch]) -> LiveGraph:
    """Base(D) + every later batch, with a restart in the middle (a fresh graph replaying the log)."""
    half = len(later_batches) // 2
    first = LiveGraph(cut_snapshot)
    first.apply_many(later_batches[:half])
    restarted = LiveGraph(cut_snapshot)
    assert restarted.apply_many(later_batches[: half + 1]) == half + 1
    for batch in later_batches[half - 1:]:  # the first two were applied already: no-ops
        restarted.apply(batch)
    assert restarted.sequence == len(later_batches)
    return restarted


def _ids(snapshot: GraphSnapshot, node_type: str) -> list[str]:
    """A fixed spread of ids: the busiest nodes before the cut and evenly spaced others."""
    rowptr = snapshot.adjacency[(node_type, CUSTOMER if node_type == ARTICLE else ARTICLE)].rowptr.numpy()
    busiest = np.argsort(-np.diff(rowptr), kind="stable")[: IDS // 2]
    spread = np.linspace(0, len(rowptr) - 2, IDS // 2).astype(int)
    return [snapshot.ids[node_type][i].decode() for i in sorted({*busiest.tolist(), *spread.tolist()})]


def _answers(inference: TaskInference, ids: list[str]) -> dict[str, object]:
    index, result = inference.run_ids(ids, k=12)
    assert (index >= 0).all()
    out: dict[str, object] = {name: values.tolist() for name, values in result.extras.items()}
    if result.values is not None:
        out["values"] = result.values.tolist()
    else:
        names = result.graph.ids[ARTICLE]
        out["articles"] = [[names[a].decode() for a in row] for row in result.articles.tolist()]
        out["scores"] = result.scores.tolist()
    return out


def _assert_same(got: dict[str, object], want: dict[str, object]) -> None:
    assert got.keys() == want.keys()
    for name in got:
        if name in ("values", "scores"):
            np.testing.assert_allclose(got[name], want[name], atol=1e-5, rtol=0)
        else:
            assert got[name] == want[name], name


@pytest.mark.parametrize("task", list(TASKS))
def test_ingest_equals_rebuild_and_compaction(task: str, trained_artifacts: Path, live: LiveGraph,
                                              tmp_path: Path) -> None:
    rebuilt = GraphSnapshot.open(trained_artifacts / "snapshot")
    assert live.now_day == rebuilt.end_time and live.view().num_transactions == rebuilt.num_transactions
    ids = _ids(rebuilt, TASKS[task].entity_type)
    want = _answers(TaskInference.from_bundle(trained_artifacts / task, rebuilt, compile="none"), ids)
    inference = TaskInference.from_bundle(trained_artifacts / task, live, compile="none")
    inference.refresh_article_keys()
    assert not inference.article_keys_stale()
    _assert_same(_answers(inference, ids), want)
    # after a compaction, on the new version (plus the empty rest of the log)
    version = compact(live.view(), tmp_path / "state")
    compacted = GraphSnapshot.open(version.directory)
    assert compacted.fingerprint == rebuilt.fingerprint
    inference.use_graph(LiveGraph(compacted))
    _assert_same(_answers(inference, ids), want)


@pytest.mark.parametrize("task", list(TASKS))
def test_answers_kept_across_versions_equal_the_rebuild(task: str, trained_artifacts: Path,
                                                        cut_snapshot: GraphSnapshot,
                                                        later_batches: list[IngestBatch]) -> None:
    """A worker keeps its answers' temporal features between requests and graph versions
    (``TaskInference.answer_temporal``); answering after every few batches leaves nothing stale.
    The clock holds the seed day at the rebuild's end, so every version is answered at that one day."""
    rebuilt = GraphSnapshot.open(trained_artifacts / "snapshot")
    ids = _ids(rebuilt, TASKS[task].entity_type)
    want = _answers(TaskInference.from_bundle(trained_artifacts / task, rebuilt, compile="none"), ids)
    graph = LiveGraph(cut_snapshot, clock=lambda: rebuilt.end_time)
    inference = TaskInference.from_bundle(trained_artifacts / task, graph, compile="none")
    for start in range(0, len(later_batches), 3):
        graph.apply_many(later_batches[start:start + 3])
        inference.refresh_article_keys()
        _answers(inference, ids)
    assert graph.now_day == rebuilt.end_time
    assert inference.answer_temporal.computed > 0
    _assert_same(_answers(inference, ids), want)


def _purchase(customer: str, article: str, day: int, sequence: int) -> IngestBatch:
    return IngestBatch(sequence, "transactions", {"day": [day], "customer_id": [customer],
                                                  "article_id": [article], "price": [0.03]})


def test_answers_move_right_after_a_purchase(trained_artifacts: Path, cut_snapshot: GraphSnapshot) -> None:
    graph = LiveGraph(cut_snapshot)
    churn = TaskInference.from_bundle(trained_artifacts / "churn", graph, compile="none")
    purchase = TaskInference.from_bundle(trained_artifacts / "purchase", graph, compile="none")
    purchase.refresh_article_keys()
    customer = _ids(cut_snapshot, CUSTOMER)[-1]
    article = cut_snapshot.ids[ARTICLE][7].decode()
    before = _answers(churn, [customer]), _answers(purchase, [customer])
    graph.apply(_purchase(customer, article, graph.now_day, 1))
    assert purchase.article_keys_stale()
    after_churn = _answers(churn, [customer])  # no wait: the next call reads the new version
    assert after_churn["values"] != before[0]["values"] and after_churn["active_last_7d"] == [True]
    purchase.refresh_article_keys()
    after = _answers(purchase, [customer])
    assert after["articles"] != before[1]["articles"]


def test_new_customers_and_articles_are_scored(trained_artifacts: Path, cut_snapshot: GraphSnapshot,
                                               tiny_csv_dir: Path) -> None:
    graph = LiveGraph(cut_snapshot)
    tasks = {t: TaskInference.from_bundle(trained_artifacts / t, graph, compile="none") for t in TASKS}
    with open(tiny_csv_dir / "customers.csv", newline="") as f:
        customer_row = next(csv.DictReader(f))
    with open(tiny_csv_dir / "articles.csv", newline="") as f:
        article_row = next(csv.DictReader(f))
    graph.apply(IngestBatch(1, "customers", {k: [v or None] for k, v in customer_row.items()}
                            | {"customer_id": ["a-new-customer"]}))
    churn = _answers(tasks["churn"], ["a-new-customer"])
    assert 0.0 <= churn["values"][0] <= 1.0 and churn["active_last_7d"] == [False]
    assert len(_answers(tasks["purchase"], ["a-new-customer"])["articles"][0]) == 12
    graph.apply(IngestBatch(2, "articles", {k: [v or None] for k, v in article_row.items()}
                            | {"article_id": ["0999999001"]}))
    quiet = _answers(tasks["sales"], ["0999999001"])["values"][0]
    buyer = cut_snapshot.ids[CUSTOMER][3].decode()
    day = graph.now_day
    graph.apply(IngestBatch(3, "transactions", {
        "day": [day] * 3, "customer_id": [buyer, "a-new-customer", buyer],
        "article_id": ["0999999001"] * 3, "price": [0.05] * 3}))
    assert graph.now_day == day + 1 and str(day_to_date(day)) > CUT
    assert _answers(tasks["sales"], ["0999999001"])["values"][0] != quiet
    purchase = tasks["purchase"]
    purchase.refresh_article_keys()
    _, result = purchase.run_ids([buyer, "a-new-customer"], k=graph.num_nodes[ARTICLE])
    names = result.graph.ids[ARTICLE]
    for row, scores in zip(result.articles.tolist(), result.scores, strict=True):
        ranked = [names[a].decode() for a in row]
        assert "0999999001" in ranked and torch.isfinite(scores[ranked.index("0999999001")])
