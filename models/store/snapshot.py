"""The graph snapshot: node features and time-sorted adjacency as memory-mapped arrays.

Built once from :class:`models.store.tables.RelTables` into a directory of plain ``.npy`` files
and opened by every training and serving process with ``mmap``, so the edge arrays are
never copied: several processes share one copy in the page cache and opening is O(1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from torch import Tensor

from models.progress import progress_bar
from models.schema import ARTICLE, CUSTOMER, MAX_ID_BYTES, NODE_TYPES
from models.store.csr import TemporalCSR, sort_edges
from models.store.ids import Id, lookup_sorted
from models.store.snapshot_files import (
    DIRECTIONS,
    FORMAT_VERSION,
    META_FILE,
    PRICE_DIRECTION,
    SnapshotError,
    as_tensor,
    edge_array,
    fingerprint,
    load_arrays,
    load_prefix_arrays,
    node_array,
    read_meta,
    write_meta,
)
from models.store.snapshot_prefix import SnapshotPrefix, compute_prefix, prefix_digest, snapshot_prefix
from models.store.tables import NodeTable, RelTables, Transactions

__all__ = ["GraphSnapshot", "SnapshotError", "write_snapshot"]


@dataclass(frozen=True, eq=False, repr=False)
class GraphSnapshot:
    """Read-only graph of customers, articles and their purchases; see :meth:`build` and :meth:`open`.

    Args:
        directory: where the arrays live.
        ids: per node type, ``(N_t,)`` sorted ``S<w>`` ids as in the data (UTF-8, any width up to
            :data:`models.schema.MAX_ID_BYTES`; see :mod:`models.store.ids`); dense index = rank.
        categorical: per node type, ``(N_t, C_t)`` int64 codes (``0`` = missing).
        numeric: per node type, ``(N_t, F_t)`` float32 standardised features.
        categorical_names: per node type, the ``C_t`` column names.
        numeric_names: per node type, the ``F_t`` feature names.
        cardinalities: per node type, the number of values of each categorical column.
        adjacency: per ``(src type, dst type)``, a :class:`TemporalCSR` over all ``E`` purchases.
        price: ``(E,)`` float32 price of each edge of ``adjacency[("customer", "article")]``.
        min_day: first transaction day.
        max_day: last transaction day.
        end_time: ``max_day + 1``, the seed time at which serving predicts.
        fingerprint: sha256 of the content, recorded and checked by checkpoint bundles.
        prefix: the memory-mapped :mod:`models.store.snapshot_prefix` arrays; ``None`` in a snapshot built
            before they were stored (:mod:`models.graph.temporal_features` then computes them in memory).
        sequence: the last ingestion log sequence the snapshot holds (``meta.json``'s ``log_sequence``:
            set by :mod:`models.store.compact`; ``0`` for a snapshot built from files), where a
            :class:`models.store.live.LiveGraph` over it resumes applying the log.
    """

    directory: Path
    ids: dict[str, np.ndarray]
    categorical: dict[str, Tensor]
    numeric: dict[str, Tensor]
    categorical_names: dict[str, tuple[str, ...]]
    numeric_names: dict[str, tuple[str, ...]]
    cardinalities: dict[str, tuple[int, ...]]
    adjacency: dict[tuple[str, str], TemporalCSR]
    price: Tensor
    min_day: int
    max_day: int
    end_time: int
    fingerprint: str
    prefix: SnapshotPrefix | None = None
    sequence: int = 0

    def __repr__(self) -> str:
        counts = ", ".join(f"{t}s={n:,}" for t, n in self.num_nodes.items())
        return (f"GraphSnapshot({str(self.directory)!r}, {counts}, transactions={self.num_transactions:,}, "
                f"days={self.min_day}..{self.max_day})")

    @property
    def temporal(self) -> bool:
        """``True``: a snapshot holds time-stamped edges, so its nodes get temporal aggregates
        (see :class:`models.graph.features.FeatureSource`)."""
        return True

    @property
    def num_nodes(self) -> dict[str, int]:
        return {t: int(ids.shape[0]) for t, ids in self.ids.items()}

    @property
    def num_transactions(self) -> int:
        return int(self.price.numel())

    def lookup(self, node_type: str, ids: np.ndarray | Sequence[Id]) -> np.ndarray:
        """``(K,)`` int64 dense indices of ids (``str``, ``int`` or ``bytes``) of ``node_type``; ``-1``
        where unknown."""
        return lookup_sorted(self.ids[node_type], ids)

    def transactions(self) -> Transactions:
        """The full transactions table in customer-major, then day order (fresh in-memory arrays)."""
        csr = self.adjacency[PRICE_DIRECTION]
        rowptr = csr.rowptr.numpy()
        customer = np.repeat(np.arange(csr.num_rows, dtype=np.int64), np.diff(rowptr))
        return Transactions(
            customer=customer,
            article=csr.col.numpy().astype(np.int64),
            day=np.array(csr.day.numpy()),
            price=np.array(self.price.numpy()),
        )

    def verify(self) -> None:
        """Re-hash every array (reads them all) and raise :class:`SnapshotError` if the content changed."""
        meta = read_meta(self.directory)
        if fingerprint(load_arrays(self.directory, meta), meta["features"]) != self.fingerprint:
            raise SnapshotError(f"{self.directory}: contents do not match the fingerprint in {META_FILE}")
        prefix = load_prefix_arrays(self.directory, meta)
        if prefix is not None and prefix_digest(prefix) != meta["prefix"]["sha256"]:
            raise SnapshotError(f"{self.directory}: prefix arrays do not match the sha256 in {META_FILE}")

    @classmethod
    def open(cls, directory: str | Path) -> GraphSnapshot:
        """Memory-map a snapshot directory written by :meth:`build`, checking every file's shape and dtype.

        Raises:
            SnapshotError: a file is missing, truncated, corrupt or inconsistent with ``meta.json``.
        """
        directory = Path(directory)
        meta = read_meta(directory)
        arrays = load_arrays(directory, meta)
        features = meta["features"]
        adjacency = {}
        for direction in DIRECTIONS:
            rowptr = arrays[edge_array(direction, "rowptr")]
            if rowptr[0] != 0 or rowptr[-1] != meta["num_transactions"]:
                raise SnapshotError(f"{directory / edge_array(direction, 'rowptr')}.npy: bad row pointers")
            adjacency[direction] = TemporalCSR(
                *(as_tensor(arrays[edge_array(direction, f)]) for f in ("rowptr", "col", "day"))
            )
        prefix = load_prefix_arrays(directory, meta)
        return cls(
            directory=directory,
            ids={t: arrays[node_array(t, "ids")] for t in NODE_TYPES},
            categorical={t: as_tensor(arrays[node_array(t, "categorical")]) for t in NODE_TYPES},
            numeric={t: as_tensor(arrays[node_array(t, "numeric")]) for t in NODE_TYPES},
            categorical_names={t: tuple(features[t]["categorical_names"]) for t in NODE_TYPES},
            numeric_names={t: tuple(features[t]["numeric_names"]) for t in NODE_TYPES},
            cardinalities={t: tuple(int(c) for c in features[t]["cardinalities"]) for t in NODE_TYPES},
            adjacency=adjacency,
            price=as_tensor(arrays[edge_array(PRICE_DIRECTION, "price")]),
            min_day=int(meta["min_day"]),
            max_day=int(meta["max_day"]),
            end_time=int(meta["end_time"]),
            fingerprint=str(meta["fingerprint"]),
            prefix=None if prefix is None else snapshot_prefix(
                {name: as_tensor(a) for name, a in prefix.items()}, meta["prefix"]),
            sequence=int(meta.get("log_sequence", 0)),
        )

    @classmethod
    def build(cls, tables: RelTables, directory: str | Path, progress: bool = True) -> GraphSnapshot:
        """Write ``tables`` as a snapshot directory (overwriting one there) and open it.

        Raises:
            ValueError: the tables break their contract (unsorted ids, indices out of range, no rows).
        """
        nodes = {CUSTOMER: tables.customers, ARTICLE: tables.articles}
        tx = tables.transactions
        _check_tables(nodes, tx)
        steps = progress_bar(total=len(NODE_TYPES) + len(DIRECTIONS) + 2, desc="snapshot", enabled=progress)
        endpoints = {CUSTOMER: tx.customer, ARTICLE: tx.article}
        edges: dict[tuple[str, str], dict[str, np.ndarray]] = {}
        for direction in DIRECTIONS:
            src, dst = endpoints[direction[0]], endpoints[direction[1]]
            order, rowptr = sort_edges(src, tx.day, len(nodes[direction[0]]))
            edges[direction] = {"rowptr": rowptr, "col": dst[order].astype(np.int32),
                                "day": tx.day[order].astype(np.int32)}
            if direction == PRICE_DIRECTION:
                edges[direction]["price"] = tx.price[order].astype(np.float32)
        return write_snapshot(directory, nodes, edges, steps=steps)


def write_snapshot(directory: str | Path, nodes: dict[str, NodeTable],
                   edges: dict[tuple[str, str], dict[str, np.ndarray]], extra: dict[str, Any] | None = None,
                   steps: Any = None) -> GraphSnapshot:
    """Write a snapshot directory from its node tables and both directions' sorted CSR arrays, and open it.

    Args:
        directory: created if missing; ``meta.json`` is removed first and written last.
        nodes: per node type, the table (ids sorted).
        edges: per direction, ``rowptr``, ``col`` and ``day`` (and ``price`` for the customer -> article
            one), rows sorted by ``(node, day)``.
        extra: more ``meta.json`` fields (e.g. ``log_sequence``).
        steps: a progress bar to advance (one step per node table and direction, two more at the end).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / META_FILE).unlink(missing_ok=True)  # mark incomplete until the end
    arrays: dict[str, np.ndarray] = {}
    for t, table in nodes.items():
        arrays |= _save(directory, _node_arrays(t, table))
        steps and steps.update()
    for direction in DIRECTIONS:
        arrays |= _save(directory, {edge_array(direction, f): a for f, a in edges[direction].items()})
        steps and steps.update()
    adjacency = {d: TemporalCSR(*(as_tensor(arrays[edge_array(d, f)]) for f in ("rowptr", "col", "day")))
                 for d in DIRECTIONS}
    prefix = write_prefix(directory, adjacency, arrays[edge_array(PRICE_DIRECTION, "price")])
    steps and steps.update()
    features = {t: _feature_meta(table) for t, table in nodes.items()}
    day = arrays[edge_array(PRICE_DIRECTION, "day")]
    meta = {
        "format_version": FORMAT_VERSION,
        "num_nodes": {t: len(table) for t, table in nodes.items()},
        "num_transactions": int(day.shape[0]),
        "min_day": int(day.min()),
        "max_day": int(day.max()),
        "end_time": int(day.max()) + 1,
        "features": features,
        "fingerprint": fingerprint(arrays, features),
        "prefix": prefix,
        **(extra or {}),
    }
    if steps:
        steps.update()
        steps.close()
    write_meta(directory, meta)
    return GraphSnapshot.open(directory)


def write_prefix(directory: Path, adjacency: dict[tuple[str, str], TemporalCSR],
                 price: np.ndarray) -> dict[str, Any]:
    """Compute and save the :mod:`models.store.snapshot_prefix` arrays; returns their ``meta.json`` entry."""
    arrays, meta = compute_prefix(adjacency, price)
    _save(directory, arrays)
    return meta | {"sha256": prefix_digest(arrays)}


def add_prefix(directory: str | Path) -> GraphSnapshot:
    """Store the prefix arrays in a snapshot built without them (in place) and reopen it.

    The fingerprint does not change, so the bundles trained on the snapshot still match it. A
    snapshot that has them is left alone (rewriting files a running server maps would crash it).

    Raises:
        SnapshotError: the snapshot cannot be opened.
    """
    directory = Path(directory)
    snapshot = GraphSnapshot.open(directory)
    if snapshot.prefix is not None:
        return snapshot
    meta = read_meta(directory)
    meta["prefix"] = write_prefix(directory, snapshot.adjacency, snapshot.price.numpy())
    write_meta(directory, meta)
    return GraphSnapshot.open(directory)


def _node_arrays(node_type: str, table: NodeTable) -> dict[str, np.ndarray]:
    return {
        node_array(node_type, "ids"): table.ids,
        node_array(node_type, "categorical"): np.asarray(table.categorical, dtype=np.int64),
        node_array(node_type, "numeric"): np.asarray(table.numeric, dtype=np.float32),
    }


def _feature_meta(table: NodeTable) -> dict[str, Any]:
    return {
        "categorical_names": list(table.categorical_names),
        "numeric_names": list(table.numeric_names),
        "cardinalities": [int(c) for c in table.cardinalities],
    }


def _save(directory: Path, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    for name, array in arrays.items():
        np.save(directory / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
    return arrays


def _check_tables(nodes: dict[str, NodeTable], tx: Transactions) -> None:
    for t, table in nodes.items():
        ids = table.ids
        if ids.dtype.kind != "S" or ids.ndim != 1:
            raise ValueError(f"{t} ids must be a 1-d fixed-width bytes array, got {ids.dtype} {ids.shape}")
        if ids.dtype.itemsize > MAX_ID_BYTES and int(np.char.str_len(ids).max(initial=0)) > MAX_ID_BYTES:
            raise ValueError(f"{t} ids must be at most {MAX_ID_BYTES} bytes each, got {ids.dtype}")
        if len(ids) > 1 and not bool(np.all(ids[1:] > ids[:-1])):
            raise ValueError(f"{t} ids must be sorted and unique")
        if len(ids) and ids[0] == b"":  # sorted: an empty id would come first
            raise ValueError(f"{t} ids must not be empty")
        if table.categorical.shape[0] != len(ids) or table.numeric.shape[0] != len(ids):
            raise ValueError(f"{t} feature rows differ from the number of ids ({len(ids)})")
    if len(tx) == 0:
        raise ValueError("cannot build a snapshot without transactions")
    for t, index in ((CUSTOMER, tx.customer), (ARTICLE, tx.article)):
        if int(index.min()) < 0 or int(index.max()) >= len(nodes[t]):
            raise ValueError(f"transaction {t} index out of range [0, {len(nodes[t])})")
