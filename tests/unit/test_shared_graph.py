"""A published live-graph version, mapped by another reader, reads exactly like the owner's live graph.

The live graph itself is compared with a rebuilt snapshot in test_live_graph.py; here every reader of
the graph (CSR rows, temporal features, the sampler's trees, purchase history, popularity, lookups)
reads the owner's :class:`LiveGraph` and a :class:`SharedGraph` over its published versions, as an
inference worker does, and must get the same values; also across a new version and a new base.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from models.graph.history import snapshot_history, snapshot_popularity
from models.graph.sampler import SamplerConfig, TemporalSampler
from models.graph.temporal_features import temporal_features
from models.schema import ARTICLE, CUSTOMER, NODE_TYPES
from models.store import live_csr
from models.store.keyed import keyed_csr
from models.store.live import LiveGraph
from models.store.records import IngestBatch
from models.store.shared_codec import VersionFileError, base_references, read_version
from models.store.shared_graph import GraphNotPublished, SharedGraph
from models.store.shared_header import HeaderBusy, version_file
from models.store.shared_publisher import Publisher
from models.store.snapshot import GraphSnapshot
from models.store.tables import RelTables, Transactions
from serve.ingest import progress
from training.synth.tables import tables_from_purchases

CUSTOMERS, ARTICLES, CUT = 40, 30, 150


def _transactions(tables: RelTables, index: np.ndarray, sequence: int) -> IngestBatch:
    tx = tables.transactions
    return IngestBatch(sequence, "transactions", {
        "day": [int(d) for d in tx.day[index]],
        "customer_id": [tables.customers.ids[c].decode() for c in tx.customer[index]],
        "article_id": [tables.articles.ids[a].decode() for a in tx.article[index]],
        "price": [float(p) for p in tx.price[index]], "sales_channel_id": [1] * len(index)})


@pytest.fixture(scope="module", params=["merged", "overlay"])
def owner(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    """The owner's live graph and publisher; ``overlay``: every version read through the overlay (as a
    graph past ``MERGED_MAX_EDGES`` is), ``merged``: versions copied into virtual order."""
    patch = pytest.MonkeyPatch()
    if request.param == "overlay":
        patch.setattr(live_csr, "MERGED_MAX_EDGES", 0)
    rng = np.random.default_rng(5)
    size = 1200
    customer = rng.integers(0, CUSTOMERS - 2, size)
    article = np.where(rng.random(size) < 0.2, 0, rng.integers(0, ARTICLES - 2, size))
    day = np.sort(rng.integers(100, 160, size))
    tables = tables_from_purchases(customer, article, day, CUSTOMERS, ARTICLES, seed=2)
    tx = tables.transactions
    base_rows, later = np.flatnonzero(tx.day <= CUT), np.flatnonzero(tx.day > CUT)
    root = tmp_path_factory.mktemp("shared")
    base = GraphSnapshot.build(RelTables(tables.customers, tables.articles,
                                         Transactions(tx.customer[base_rows], tx.article[base_rows],
                                                      tx.day[base_rows], tx.price[base_rows])),
                               root / "base", progress=False)
    publisher = Publisher(root / "published")
    graph = LiveGraph(base)
    publisher.publish(graph.view())
    yield graph, publisher, tables, later
    patch.undo()


def _buffers(path: Path) -> set[bytes]:
    """The out-of-band arrays of a version file (see models/store/shared_codec.py for the layout)."""
    data = path.read_bytes()
    (count,) = struct.unpack_from("<Q", data, 8)
    return {data[o:o + n] for o, n in (struct.unpack_from("<QQ", data, 16 + 16 * i) for i in range(count))}


def _same_reads(a, b) -> None:
    assert (a.sequence, a.num_transactions, a.min_day, a.max_day) == (b.sequence, b.num_transactions,
                                                                       b.min_day, b.max_day)
    assert a.prefix.mean_price == b.prefix.mean_price
    for t in NODE_TYPES:
        nodes = torch.arange(a.num_nodes[t])
        assert a.num_nodes[t] == b.num_nodes[t] and list(a.ids[t]) == list(b.ids[t])
        assert torch.equal(a.categorical[t].index_select(0, nodes), b.categorical[t].index_select(0, nodes))
        for day in (CUT - 20, CUT + 1, a.end_time):
            time = torch.full_like(nodes, day)
            ka, kb = keyed_csr(a, t), keyed_csr(b, t)
            bounds = ka.row_bounds_before(nodes, time)
            for x, y in zip(bounds, kb.row_bounds_before(nodes, time), strict=True):
                assert torch.equal(x, y)
            positions = torch.arange(int(ka.row_bounds_before(nodes, time)[1].max()))
            assert torch.equal(ka.col.index_select(0, positions), kb.col.index_select(0, positions))
            assert torch.equal(temporal_features(a, t, nodes, time), temporal_features(b, t, nodes, time))
            for per_day in (0, 2):
                sampler = TemporalSampler(a, SamplerConfig((3, 2), "last", per_day))
                got, want = (sampler.sample(t, nodes, time, graph=g) for g in (b, a))
                for key, value in want.node_ids.items():
                    assert torch.equal(got.node_ids[key], value)
    customers, articles = torch.arange(a.num_nodes[CUSTOMER]), torch.arange(a.num_nodes[ARTICLE])
    for x, y in zip(snapshot_history(a, customers, torch.full_like(customers, a.end_time)),
                    snapshot_history(b, customers, torch.full_like(customers, b.end_time)), strict=True):
        assert torch.equal(x, y)
    assert torch.equal(snapshot_popularity(a, articles, torch.full_like(articles, a.end_time)),
                       snapshot_popularity(b, articles, torch.full_like(articles, b.end_time)))


def test_a_reader_follows_every_published_version_exactly(owner) -> None:
    graph, publisher, tables, later = owner
    reader = SharedGraph(publisher.directory)
    _same_reads(graph.view(), reader.view())
    base_arrays = {bytes(np.asarray(a).data) for a in base_references(graph.base).values()
                   if isinstance(a, torch.Tensor | np.ndarray) and a.nbytes > 64}
    for sequence, part in enumerate(np.array_split(later, 4), start=graph.sequence + 1):
        graph.apply(_transactions(tables, part, sequence))
        publisher.publish(graph.view())
        assert not base_arrays & _buffers(version_file(publisher.directory, publisher.version))
        assert reader.sequence == sequence  # the first read after publishing sees it
        _same_reads(graph.view(), reader.view())
    new = IngestBatch(graph.sequence + 1, "customers", {"customer_id": ["newcomer"]})
    graph.apply(new)
    publisher.publish(graph.view())
    assert reader.lookup(CUSTOMER, ["newcomer"]).tolist() == [CUSTOMERS]
    assert reader.delta_edges == graph.delta_edges and reader.new_nodes == graph.new_nodes
    _same_reads(graph.view(), reader.view())
    old = reader.view()
    publisher.publish(graph.view())
    publisher.publish(graph.view())  # the file of ``old`` is removed: its mapping stays readable
    assert not any(p.name == f"v{publisher.version - 2}.graph" for p in publisher.directory.iterdir())
    _same_reads(graph.view(), old)


def test_a_restarted_publisher_goes_on_numbering(owner) -> None:
    graph, publisher, _, _ = owner
    again = Publisher(publisher.directory)
    assert again.version == publisher.version
    assert again.publish(graph.view()).version == publisher.version + 1
    publisher.version = again.version


def test_no_version_or_a_broken_file_is_a_clear_error(tmp_path: Path, owner) -> None:
    with pytest.raises(GraphNotPublished, match=r"within 0\.1 s"):
        SharedGraph(tmp_path / "nothing", wait_s=0.1)
    (tmp_path / "broken.graph").write_bytes(b"not a graph")
    with pytest.raises(VersionFileError, match="not a graph version file"):
        read_version(tmp_path / "broken.graph", owner[0].base)


def test_a_header_left_mid_write_keeps_the_version_held(owner, monkeypatch: pytest.MonkeyPatch) -> None:
    graph, publisher, _, _ = owner
    reader = SharedGraph(publisher.directory)
    held = reader.view()
    monkeypatch.setattr(progress, "shared_dir", lambda state_dir: publisher.directory)
    reported = progress.read_progress("state")
    header = publisher.header
    lock = struct.unpack_from("<Q", header._map, 0)[0]
    struct.pack_into("<Q", header._map, 0, lock + 1)  # an owner killed while writing the header
    struct.pack_into("<Q", header._map, 8, publisher.version + 1)  # ... after the version number
    try:
        assert reader.view() is held or reader.view().sequence == held.sequence
        with pytest.raises(HeaderBusy):
            header.read(wait_s=0.01)
        assert progress.read_progress("state") == reported  # /ingest/status: the last version read
    finally:
        struct.pack_into("<Q", header._map, 8, publisher.version)
        struct.pack_into("<Q", header._map, 0, lock + 2)
    assert publisher.publish(graph.view()).version == header.read().version  # the next owner writes on
