"""The temporal features kept between live-graph versions equal those computed afresh, bit for bit,
and only the nodes whose edges moved are computed again."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

import models.graph.temporal_cache as temporal_cache
import models.store.live_csr as live_csr
from models.feature_definitions import NUM_TEMPORAL
from models.graph.temporal_cache import ROW_BYTES, TemporalCache
from models.graph.temporal_features import temporal_features
from models.schema import ARTICLE, CUSTOMER, NODE_TYPES
from models.store.live import LiveGraph
from models.store.records import IngestBatch
from models.store.shared_codec import read_version, write_version
from models.store.snapshot import GraphSnapshot
from models.store.tables import RelTables
from training.synth.tables import tables_from_purchases

CUSTOMERS, ARTICLES, CUT = 40, 30, 150


def _batch(sequence: int, tables: RelTables, rows: list[tuple[int, int, int]]) -> IngestBatch:
    customer_ids = [i.decode() for i in tables.customers.ids]
    article_ids = [i.decode() for i in tables.articles.ids]
    return IngestBatch(sequence, "transactions", {
        "day": [d for _, _, d in rows], "customer_id": [customer_ids[c] for c, _, _ in rows],
        "article_id": [article_ids[a] for _, a, _ in rows],
        "price": [0.01 * (1 + c % 5) for c, _, _ in rows]})


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[GraphSnapshot, RelTables]:
    rng = np.random.default_rng(7)
    size = 900
    tables = tables_from_purchases(rng.integers(0, CUSTOMERS - 2, size), rng.integers(0, ARTICLES, size),
                                   np.sort(rng.integers(20, CUT + 1, size)), CUSTOMERS, ARTICLES, seed=2)
    return GraphSnapshot.build(tables, Path(tmp_path_factory.mktemp("base")), progress=False), tables


def _equal_everywhere(cache: TemporalCache, view, seed_time: int) -> None:
    for node_type in NODE_TYPES:
        count = view.num_nodes[node_type]
        ids = torch.cat([torch.arange(count), torch.arange(0, count, 3)])  # repeats too
        expected = temporal_features(view, node_type, ids, torch.full_like(ids, seed_time))
        assert torch.equal(cache.features(view, node_type, ids, seed_time), expected)


@pytest.mark.parametrize("read", ["merged", "overlay"])
def test_kept_features_equal_fresh_ones_and_only_touched_nodes_are_recomputed(
        base: tuple[GraphSnapshot, RelTables], read: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if read == "overlay":
        monkeypatch.setattr(live_csr, "MERGED_MAX_EDGES", -1)
    snapshot, tables = base
    live, cache, seed_time = LiveGraph(snapshot), TemporalCache(), CUT + 2
    _equal_everywhere(cache, live.view(), seed_time)
    assert cache.computed == CUSTOMERS + ARTICLES
    rows = [(3, 5, CUT + 1), (3, 6, CUT + 1), (11, 5, CUT)]  # on the last days
    live.apply(_batch(1, tables, rows))
    _equal_everywhere(cache, live.view(), seed_time)  # the mean price moved for every node
    assert cache.computed == CUSTOMERS + ARTICLES + 2 + 2  # customers 3 and 11, articles 5 and 6
    live.apply(_batch(2, tables, [(20, 7, 40)]))  # a late row, long before the base's last day
    _equal_everywhere(cache, live.view(), seed_time)
    assert cache.computed == CUSTOMERS + ARTICLES + 4 + 2
    live.apply(_batch(3, tables, [(21, 8, CUT + 5)]))  # after the seed time: counted nowhere, still refreshed
    _equal_everywhere(cache, live.view(), seed_time)


def test_new_nodes_a_new_seed_time_and_a_new_base(base: tuple[GraphSnapshot, RelTables],
                                                   tmp_path: Path) -> None:
    snapshot, tables = base
    live, cache = LiveGraph(snapshot), TemporalCache()
    _equal_everywhere(cache, live.view(), CUT + 1)
    live.apply(IngestBatch(1, "customers", {"customer_id": ["new-customer"]}))
    live.apply(IngestBatch(2, "transactions", {"day": [CUT], "customer_id": ["new-customer"],
                                               "article_id": [tables.articles.ids[4].decode()],
                                               "price": [0.02]}))
    view = live.view()
    assert view.num_nodes[CUSTOMER] == CUSTOMERS + 1
    _equal_everywhere(cache, view, CUT + 1)
    computed = cache.computed
    _equal_everywhere(cache, view, CUT - 30)  # another seed time: every node again
    assert cache.computed == computed + CUSTOMERS + 1 + ARTICLES
    other = GraphSnapshot.build(tables, tmp_path / "other", progress=False)
    computed = cache.computed
    _equal_everywhere(cache, other, CUT - 30)  # another base (a compaction): every node again
    assert cache.computed == computed + CUSTOMERS + ARTICLES
    assert cache.features(other, ARTICLE, torch.empty(0, dtype=torch.long), CUT).shape == (0, NUM_TEMPORAL)


def test_a_bounded_cache_starts_again_instead_of_growing(base: tuple[GraphSnapshot, RelTables]) -> None:
    snapshot, _ = base
    rows = 25  # room for 25 kept rows and the slot tables
    cache = TemporalCache(max_bytes=rows * ROW_BYTES + (CUSTOMERS + ARTICLES) * 8)
    for start in range(0, CUSTOMERS, 10):
        ids = torch.arange(start, start + 10)
        expected = temporal_features(snapshot, CUSTOMER, ids, torch.full_like(ids, CUT))
        assert torch.equal(cache.features(snapshot, CUSTOMER, ids, CUT), expected)
    assert cache.restarts == 1  # 20 rows kept, the third call's 10 more would pass 25
    assert cache.computed == CUSTOMERS
    big = torch.arange(CUSTOMERS)  # one call larger than the bound is still answered
    assert torch.equal(cache.features(snapshot, CUSTOMER, big, CUT),
                       temporal_features(snapshot, CUSTOMER, big, torch.full_like(big, CUT)))
    assert cache.restarts == 2


def test_fill_keeps_every_node_or_the_busiest_ones(base: tuple[GraphSnapshot, RelTables]) -> None:
    snapshot, _ = base
    everything = TemporalCache()
    assert everything.fill(snapshot, CUT) == CUSTOMERS + ARTICLES
    computed = everything.computed
    _equal_everywhere(everything, snapshot, CUT)
    assert everything.computed == computed  # nothing left to compute
    slots = 8 * (CUSTOMERS + ARTICLES)
    some = TemporalCache(max_bytes=2 * (slots + 14 * ROW_BYTES))  # room for 14 rows in half the bound
    assert some.fill(snapshot, CUT) == 8 + 6  # shared out by the node types' sizes (40 and 30)
    rowptr = snapshot.adjacency[(CUSTOMER, ARTICLE)].rowptr
    degree = rowptr[1:] - rowptr[:-1]
    busiest = torch.topk(degree, 8).indices
    computed = some.computed
    some.features(snapshot, CUSTOMER, busiest, CUT)
    assert some.computed == computed
    _equal_everywhere(some, snapshot, CUT)


def test_refresh_computes_every_moved_node_at_once(base: tuple[GraphSnapshot, RelTables]) -> None:
    snapshot, tables = base
    live, cache, seed_time = LiveGraph(snapshot), TemporalCache(), CUT + 2
    _equal_everywhere(cache, live.view(), seed_time)
    live.apply(_batch(1, tables, [(3, 5, CUT + 1), (3, 6, CUT + 1), (11, 5, CUT)]))
    assert cache.refresh(live.view(), seed_time) == 2 + 2  # customers 3 and 11, articles 5 and 6
    computed = cache.computed
    _equal_everywhere(cache, live.view(), seed_time)
    assert cache.computed == computed  # nothing left stale for the calls
    assert cache.refresh(live.view(), seed_time) == 0
    assert cache.refresh(live.view(), seed_time + 1) == 0  # kept for another seed time: not touched


@pytest.mark.parametrize("read", ["merged", "overlay"])
def test_readers_copy_the_rows_the_owner_publishes_and_compute_what_they_skipped(
        base: tuple[GraphSnapshot, RelTables], read: str, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    if read == "overlay":
        monkeypatch.setattr(live_csr, "MERGED_MAX_EDGES", -1)
    snapshot, tables = base
    live, owner, seed_time = LiveGraph(snapshot), TemporalCache(), CUT + 2
    reader, computing = TemporalCache(), TemporalCache()

    def published(since, name: str):
        view = live.view()
        rows = owner.rows_to_publish(view, seed_time, since=since)
        write_version(dataclasses.replace(view, temporal_rows=rows), tmp_path / name)
        return view, read_version(tmp_path / name, snapshot)

    first, mapped = published(None, "v1")
    with torch.inference_mode():  # as the owner's key refresh fills it: inference tensors
        _equal_everywhere(owner, first, seed_time)
    _equal_everywhere(reader, mapped, seed_time)
    _equal_everywhere(computing, first, seed_time)
    live.apply(_batch(1, tables, [(3, 5, CUT + 1), (3, 6, CUT + 1), (11, 5, CUT)]))
    second, mapped = published(first, "v2")
    moved = {t: r.tolist() for t, r in mapped.temporal_rows.ids.items()}
    assert moved == {CUSTOMER: [3, 11], ARTICLE: [5, 6]}
    computed = reader.computed
    assert reader.refresh(mapped, seed_time) == 4 and reader.copied == 4 and reader.computed == computed
    _equal_everywhere(reader, mapped, seed_time)  # bit for bit what computing gives
    assert reader.computed == computed
    live.apply(_batch(2, tables, [(20, 7, CUT)]))
    third, _ = published(second, "v3")  # not read: the reader skips it
    live.apply(_batch(3, tables, [(21, 7, CUT + 1)]))
    fourth, mapped = published(third, "v4")
    assert mapped.temporal_rows.ids[CUSTOMER].tolist() == [21]  # only what moved since the last one
    assert reader.refresh(mapped, seed_time) == 3  # customers 20 and 21, article 7
    assert (reader.copied, reader.computed) == (4 + 2, computed + 1)  # customer 20 computed
    _equal_everywhere(reader, mapped, seed_time)
    assert not owner.rows_to_publish(fourth, seed_time).ids  # no earlier version: readers fill their own
    monkeypatch.setattr(temporal_cache, "PUBLISHED_MAX_ROWS", 2)
    live.apply(_batch(4, tables, [(22, 9, CUT + 1), (23, 9, CUT + 1)]))  # three nodes moved: past 2
    assert not owner.rows_to_publish(live.view(), seed_time, since=fourth).ids
    later = dataclasses.replace(mapped, temporal_rows=dataclasses.replace(mapped.temporal_rows,
                                                                          seed_time=seed_time + 1))
    other = TemporalCache()
    _equal_everywhere(other, later, seed_time)  # rows of another seed day are not read
    assert other.copied == 0
