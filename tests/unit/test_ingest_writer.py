"""The write path over a real snapshot and WAL: exactly-once appends, idempotent retries, refusals that
leave the log untouched, two writers racing for one customer, and batches every live graph applies."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.schema import ARTICLE, CUSTOMER
from models.store.live import LiveGraph
from models.store.snapshot import GraphSnapshot
from serve.ingest.config import IngestConfig
from serve.ingest.problems import BatchRejected
from serve.ingest.service import open_ingestor
from serve.ingest.writer import Accepted, Ingestor
from tests.ingest_helpers import build_snapshot, node_ids, transaction_rows


@pytest.fixture(scope="module")
def snapshot(tiny_csv_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> GraphSnapshot:
    return build_snapshot(tiny_csv_dir, tmp_path_factory.mktemp("snapshot"))


@pytest.fixture()
def config(tmp_path: Path) -> IngestConfig:
    return IngestConfig(state_dir=tmp_path / "state", max_rows=50)


def writer(config: IngestConfig, snapshot: GraphSnapshot) -> Ingestor:
    return open_ingestor(config, snapshot.directory)


def test_batches_are_numbered_and_a_retried_key_is_answered_from_the_log(config, snapshot) -> None:
    first = writer(config, snapshot)
    rows = transaction_rows(snapshot, 3)
    assert first.ingest("transactions", rows, key="k1") == Accepted(1, 3, replayed=False)
    assert first.ingest("transactions", transaction_rows(snapshot, 2, start=5)).sequence == 2
    # A retry, even through another process's writer, is the first answer and appends nothing.
    again = writer(config, snapshot).ingest("transactions", rows, key="k1")
    assert (again.sequence, again.accepted, again.replayed) == (1, 3, True)
    assert config.open_log().last_sequence() == 2


def test_a_key_reused_for_another_batch_is_a_conflict(config, snapshot) -> None:
    ingestor = writer(config, snapshot)
    ingestor.ingest("transactions", transaction_rows(snapshot, 2), key="k")
    for kind, rows in (("transactions", transaction_rows(snapshot, 3)),
                       ("customers", [{"customer_id": "someone new"}])):
        with pytest.raises(BatchRejected) as caught:
            ingestor.ingest(kind, rows, key="k")
        assert caught.value.status == 409
        assert "already used for a different transactions batch" in caught.value.detail
    assert ingestor.log.last_sequence() == 1


@pytest.mark.parametrize(("kind", "rows", "key", "status"), [
    ("transactions", "late", None, 422),
    ("transactions", "unknown customer", None, 422),
    ("transactions", "too many", None, 413),
    ("transactions", "good", "bad key \x07", 422),
    ("customers", "existing", None, 422),
    ("articles", "twice", None, 422),
])
def test_every_refusal_leaves_the_log_where_it_was(config, snapshot, kind, rows, key, status) -> None:
    ingestor = writer(config, snapshot)
    ingestor.ingest("transactions", transaction_rows(snapshot, 2))
    good = transaction_rows(snapshot, 2, start=4)
    bad = {"late": [*good, transaction_rows(snapshot, 1, day_offset=-30)[0]],
           "unknown customer": [*good, {**good[0], "customer_id": "nobody"}],
           "too many": transaction_rows(snapshot, 51), "good": good,
           "existing": [{"customer_id": "new one"}, {"customer_id": node_ids(snapshot, CUSTOMER, 1)[0]}],
           "twice": [{"article_id": "0999"}, {"article_id": "0999"}]}[rows]
    with pytest.raises(BatchRejected) as caught:
        ingestor.ingest(kind, bad, key=key)
    assert caught.value.status == status
    assert ingestor.log.last_sequence() == 1 and ingestor.view.sequence == 1
    assert "new one" not in ingestor.view.added[CUSTOMER]


def test_new_nodes_can_be_bought_in_a_later_batch_and_not_created_twice(config, snapshot) -> None:
    ingestor = writer(config, snapshot)
    ingestor.ingest("customers", [{"customer_id": "brand-new", "age": 30, "FN": 1}])
    ingestor.ingest("articles", [{"article_id": "0999999999", "colour_group_code": 9}])
    row = {"t_dat": transaction_rows(snapshot, 1)[0]["t_dat"], "customer_id": "brand-new",
           "article_id": "0999999999", "price": 0.01, "sales_channel_id": 1}
    assert writer(config, snapshot).ingest("transactions", [row]).sequence == 3
    with pytest.raises(BatchRejected, match="already exists"):
        writer(config, snapshot).ingest("customers", [{"customer_id": "brand-new"}])


def stale_once(ingestor: Ingestor) -> None:
    """The next catch-up of ``ingestor`` does nothing, as if another writer appended just after it."""
    real, calls = ingestor.view.catch_up, []

    def catch_up(log: object) -> int:
        calls.append(1)
        return 0 if len(calls) == 1 else real(log)

    ingestor.view.catch_up = catch_up


def test_two_writers_racing_to_create_one_customer_create_it_once(config, snapshot) -> None:
    one, two = writer(config, snapshot), writer(config, snapshot)
    two.view.catch_up(two.log)
    one.ingest("customers", [{"customer_id": "contested"}])
    stale_once(two)  # two validates "contested" as new; the log refuses its append; it validates again
    with pytest.raises(BatchRejected, match="customer 'contested' already exists"):
        two.ingest("customers", [{"customer_id": "contested"}])
    assert config.open_log().last_sequence() == 1


def test_a_writer_behind_the_log_appends_after_what_it_missed(config, snapshot) -> None:
    one, two = writer(config, snapshot), writer(config, snapshot)
    two.view.catch_up(two.log)
    one.ingest("transactions", transaction_rows(snapshot, 1, start=9))
    stale_once(two)
    assert two.ingest("transactions", transaction_rows(snapshot, 2)).sequence == 2
    assert [b.sequence for b in config.open_log().read(0)] == [1, 2]


def test_every_accepted_batch_applies_to_a_live_graph(config, snapshot) -> None:
    ingestor = writer(config, snapshot)
    ingestor.ingest("customers", [{"customer_id": "n1", "age": 44, "FN": "1.0", "postal_code": "x"},
                                  {"customer_id": "n2"}])
    ingestor.ingest("articles", [{"article_id": "a-new", "colour_group_code": 9, "prod_name": "dropped"}])
    rows = [*transaction_rows(snapshot, 4),
            {**transaction_rows(snapshot, 1)[0], "customer_id": "n1", "article_id": "a-new"}]
    ingestor.ingest("transactions", rows)
    graph = LiveGraph(snapshot)
    assert graph.apply_many(config.open_log().read(0)) == 3 and graph.sequence == 3
    assert graph.lookup(CUSTOMER, ["n1", "n2"]).min() >= 0 and graph.lookup(ARTICLE, ["a-new"])[0] >= 0
    assert graph.delta_edges == 5 and graph.now_day == snapshot.max_day + 2
