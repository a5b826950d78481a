"""The live graph's merged arrays (a version's CSR and prefix sums copied into virtual order) read
exactly what the overlay reads at every position: merged whole (gathered or in slices), and
continued from the last version's arrays with only the rows logged since.

The overlay (:class:`models.store.overlay.Overlay`, each read mapped index by index) is the general
path; ``tests/unit/test_live_graph.py`` checks both against a rebuilt snapshot.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import models.store.live_csr as live_csr
import models.store.live_merged as live_merged
from models.schema import NODE_TYPES
from models.store.delta import build_delta
from models.store.live import LiveGraph
from models.store.live_csr import LiveCSR
from models.store.live_merged import Buffers, Merged, step
from models.store.records import IngestBatch
from models.store.snapshot import GraphSnapshot
from models.store.snapshot_prefix import OTHER
from models.store.tables import RelTables, Transactions
from training.synth.tables import tables_from_purchases

CUSTOMERS, ARTICLES, CUT, BATCH = 50, 25, 140, 23


@pytest.fixture(scope="module")
def base_and_batches(tmp_path_factory: pytest.TempPathFactory) -> tuple[GraphSnapshot, list[IngestBatch]]:
    rng = np.random.default_rng(7)
    size = 1200
    tables = tables_from_purchases(rng.integers(0, CUSTOMERS, size), rng.integers(0, ARTICLES, size),
                                   np.sort(rng.integers(100, 160, size)), CUSTOMERS, ARTICLES, seed=2)
    tx = tables.transactions
    base_rows = np.flatnonzero(tx.day <= CUT)
    late = base_rows[-90:][::3]  # on and before the base's last day: rows with a copied tail
    ingested = np.concatenate([np.flatnonzero(tx.day > CUT)[:150], late, np.flatnonzero(tx.day > CUT)[150:]])
    base_rows = np.setdiff1d(base_rows, late)
    subset = Transactions(*(a[base_rows] for a in (tx.customer, tx.article, tx.day, tx.price)))
    base = GraphSnapshot.build(RelTables(tables.customers, tables.articles, subset),
                               tmp_path_factory.mktemp("merged") / "base", progress=False)
    customers = [i.decode() for i in tables.customers.ids] + ["new-customer"]
    articles = [i.decode() for i in tables.articles.ids]
    batches = [IngestBatch(1, "customers", {"customer_id": ["new-customer"]})]
    for start in range(0, len(ingested), BATCH):
        part = ingested[start:start + BATCH]
        buyer = [customers[c] for c in tx.customer[part]]
        if start == BATCH * 3:
            buyer[0] = "new-customer"
        batches.append(IngestBatch(len(batches) + 1, "transactions", {
            "day": [int(d) for d in tx.day[part]], "customer_id": buyer,
            "article_id": [articles[a] for a in tx.article[part]],
            "price": [float(p) for p in tx.price[part]]}))
    return base, batches


def _overlay_only(csr: LiveCSR, monkeypatch: pytest.MonkeyPatch) -> LiveCSR:
    """The same version read through the overlay alone (the general path)."""
    with monkeypatch.context() as patch:
        patch.setattr(live_csr, "MERGED_MAX_EDGES", -1)
        general = LiveCSR(csr.base, csr.base_prefix, csr.delta, csr.num_rows, {})
    assert not general.merged
    return general


def _reads(csr: LiveCSR) -> dict[str, torch.Tensor]:
    """Every row pointer, edge and prefix sum, and the day search over every row and a spread of days."""
    positions, boundaries = torch.arange(csr.num_edges), torch.arange(csr.num_edges + 1)
    rows = torch.arange(csr.num_rows)
    ids, time = (t.reshape(-1) for t in torch.meshgrid(rows, torch.arange(95, 170, 3), indexing="ij"))
    start, end = csr.row_bounds_before(ids, time)
    return {"rowptr": csr.rowptr.index_select(0, torch.arange(csr.num_rows + 1)),
            "col": csr.col.index_select(0, positions).long(),
            "day": csr.day.index_select(0, positions).long(),
            "spend": csr.prefix.spend.index_select(0, boundaries),
            "day_starts": csr.prefix.day_starts.index_select(0, boundaries).long(),
            "start": start, "end": end, "before": csr.prefix.before(ids, time)}


def _views(base: GraphSnapshot, batches: list[IngestBatch], one_by_one: bool):
    graph = LiveGraph(base)
    if one_by_one:
        for batch in batches:
            graph.apply(batch)
    else:
        graph.apply_many(batches)
    return graph.view()


@pytest.mark.parametrize("pieces_max_rows", [0, 10**6], ids=["gathered", "slices"])
def test_a_whole_merge_reads_the_overlays_values_bit_for_bit(base_and_batches, pieces_max_rows: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    base, batches = base_and_batches
    monkeypatch.setattr(live_merged, "PIECES_MAX_ROWS", pieces_max_rows)
    view = _views(base, batches, one_by_one=False)  # one build: nothing to continue from
    for t in NODE_TYPES:
        csr = view.adjacency[(t, OTHER[t])]
        assert csr.merged and isinstance(csr.col, torch.Tensor)
        want = _reads(_overlay_only(csr, monkeypatch))
        for name, got in _reads(csr).items():
            assert torch.equal(got, want[name]), (t, name)


def test_a_continued_merge_reads_the_overlays_values(base_and_batches,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    base, batches = base_and_batches
    steps = []
    monkeypatch.setattr(live_csr, "build_delta", lambda *a: steps.append(len(a[-1])) or build_delta(*a))
    view = _views(base, batches, one_by_one=True)  # every version continues the last one's arrays
    new_edges = next(iter(view.adjacency.values())).delta.new_edges
    assert len(steps) == 2 * (len(batches) - 1) and sum(steps) == 2 * new_edges  # per direction
    whole = _views(base, batches, one_by_one=False)
    for t in NODE_TYPES:
        direction = (t, OTHER[t])
        csr = view.adjacency[direction]
        assert csr.kept_cache["merged"].num_rows == csr.num_rows
        want, merged_whole = _reads(_overlay_only(csr, monkeypatch)), _reads(whole.adjacency[direction])
        for name, got in _reads(csr).items():
            if name == "spend":  # sums taken in another order: equal to rounding
                torch.testing.assert_close(got, want[name], rtol=1e-13, atol=1e-12)
                torch.testing.assert_close(got, merged_whole[name], rtol=1e-13, atol=1e-12)
            else:
                assert torch.equal(got, want[name]) and torch.equal(got, merged_whole[name]), (t, name)


def test_a_version_continues_only_the_same_log() -> None:
    rows = (np.arange(5), np.arange(5) % 3, np.full(5, 100), np.linspace(0.1, 0.5, 5))
    previous = Merged(None, None, 4, tuple(a[:3] for a in rows))
    found = step(previous, rows, 4)
    assert found is not None and all(np.array_equal(a, b[3:]) for a, b in zip(found[1], rows, strict=True))
    other = (rows[0], rows[1], rows[2] + 1, rows[3])  # another day for the same rows: not a continuation
    assert step(previous, other, 4) is None
    assert step(previous, rows, 3) is None  # fewer nodes than the last version
    assert step(Merged(None, None, 4, rows), tuple(a[:3] for a in rows), 4) is None  # fewer rows
    assert step(None, rows, 4) is None and step(previous, None, 4) is None


def test_past_the_limit_every_read_goes_through_the_overlay(base_and_batches, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    base, batches = base_and_batches
    monkeypatch.setattr(live_csr, "MERGED_MAX_EDGES", base.num_transactions)
    view = _views(base, batches[:3], one_by_one=True)
    assert not any(csr.merged for csr in view.adjacency.values())
    assert all(csr.merged for csr in _views(base, batches[:1], one_by_one=True).adjacency.values()
               if isinstance(csr, LiveCSR))


def test_an_array_is_reused_only_once_nothing_holds_it() -> None:
    buffers = Buffers()
    first = buffers.get("col", np.int32, 100)
    held = torch.from_numpy(first[:10])  # a tensor over a view of it, as a version holds its arrays
    del first
    second = buffers.get("col", np.int32, 101)
    assert not np.shares_memory(second, held.numpy())
    address = second.__array_interface__["data"][0]
    del second
    third = buffers.get("col", np.int32, 99)  # the free one again, never the held one
    assert third.__array_interface__["data"][0] == address and not np.shares_memory(third, held.numpy())
    assert buffers.get("col", np.int64, 10).dtype == np.int64


def test_a_version_still_read_keeps_its_values(base_and_batches) -> None:
    base, batches = base_and_batches
    graph = LiveGraph(base)
    graph.apply_many(batches[:4])
    old = graph.view()
    before = {t: _reads(old.adjacency[(t, OTHER[t])]) for t in NODE_TYPES}
    for batch in batches[4:12]:  # each builds a version into buffers nothing holds
        graph.apply(batch)
    for t in NODE_TYPES:
        for name, value in _reads(old.adjacency[(t, OTHER[t])]).items():
            assert torch.equal(value, before[t][name]), (t, name)
