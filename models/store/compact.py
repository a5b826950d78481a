"""Compaction: one version of the live graph written out as an ordinary snapshot.

:func:`materialize` reads every edge of a :class:`models.store.live_view.LiveView` at its virtual
positions (:mod:`models.store.overlay`), which are by construction the positions of the rebuilt CSR,
so the result is the snapshot a rebuild from the base's rows followed by the log's would write: with
no new nodes, byte for byte (and so the same fingerprint). New nodes take their place in the sorted
ids, so dense indices change; answers, given by id, do not (the model has no per-node embeddings).
``meta.json`` records ``log_sequence``: the last log batch the snapshot holds.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import torch

from models.schema import NODE_TYPES
from models.store.delta import _ranges
from models.store.live_nodes import ENCODINGS_FILE
from models.store.live_view import LiveView
from models.store.overlay import VirtualArray
from models.store.snapshot import GraphSnapshot, write_snapshot
from models.store.snapshot_files import DIRECTIONS, PRICE_DIRECTION
from models.store.tables import NodeTable

CHUNK = 1 << 22  # edges gathered at a time (bounds the index arrays' memory at full size)


def _node_table(view: LiveView, node_type: str) -> tuple[NodeTable, np.ndarray | None]:
    """The node table of ``node_type``, ids sorted, and its order (new index -> live index), ``None``
    when no node was added."""
    base = view.base
    names = (base.categorical_names[node_type], base.numeric_names[node_type], base.cardinalities[node_type])
    ids = view.ids[node_type]
    if isinstance(ids, np.ndarray):
        table = NodeTable(ids, base.categorical[node_type].numpy(), base.numeric[node_type].numpy(), *names)
        return table, None
    raw = ids.tolist()
    every = np.array(raw, dtype=f"S{max(len(i) for i in raw)}")
    order = np.argsort(every, kind="stable")
    index = torch.from_numpy(order)
    return NodeTable(every[order], view.categorical[node_type].index_select(0, index).numpy(),
                     view.numeric[node_type].index_select(0, index).numpy(), *names), order


def _gather(arrays: dict[str, object], positions: np.ndarray) -> dict[str, np.ndarray]:
    """Every array's values at ``positions``, read in chunks."""
    out = {}
    for name, array in arrays.items():
        parts = [array.index_select(0, torch.from_numpy(positions[i:i + CHUNK])).numpy()
                 for i in range(0, len(positions), CHUNK)]
        out[name] = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
    return out


def materialize(view: LiveView, directory: str | Path) -> GraphSnapshot:
    """Write ``view`` (base + delta) as a snapshot in ``directory`` and open it (see the module docstring)."""
    base = view.base
    nodes, orders = {}, {}
    for t in NODE_TYPES:
        nodes[t], orders[t] = _node_table(view, t)
    edges = {}
    for direction in DIRECTIONS:
        src, dst = direction
        csr = view.adjacency[direction]
        if not view.changed:
            edges[direction] = {"rowptr": csr.rowptr.numpy(), "col": csr.col.numpy(), "day": csr.day.numpy()}
            if direction == PRICE_DIRECTION:
                edges[direction]["price"] = base.price.numpy()
            continue
        rowptr = csr.rowptr.index_select(0, torch.arange(len(view.ids[src]) + 1)).numpy()
        if orders[src] is None:
            positions = np.arange(csr.num_edges, dtype=np.int64)
            new_rowptr = rowptr
        else:
            starts, ends = rowptr[:-1][orders[src]], rowptr[1:][orders[src]]
            positions = _ranges(starts, ends)[0]
            new_rowptr = np.zeros(len(starts) + 1, dtype=np.int64)
            np.cumsum(ends - starts, out=new_rowptr[1:])
        arrays = {"col": csr.col, "day": csr.day}
        if direction == PRICE_DIRECTION:
            arrays["price"] = VirtualArray(csr.overlay, base.price.numpy(),
                                           csr.delta.price.numpy().astype(np.float32), csr.num_edges)
        gathered = _gather(arrays, positions)
        if orders[dst] is not None:
            new_index = np.empty_like(orders[dst])
            new_index[orders[dst]] = np.arange(len(orders[dst]))
            gathered["col"] = new_index[gathered["col"]]
        edges[direction] = {"rowptr": new_rowptr, "col": gathered["col"].astype(np.int32),
                            "day": gathered["day"].astype(np.int32)}
        if direction == PRICE_DIRECTION:
            edges[direction]["price"] = gathered["price"].astype(np.float32)
    snapshot = write_snapshot(directory, nodes, edges, extra={"log_sequence": view.sequence})
    encodings = base.directory / ENCODINGS_FILE
    if encodings.is_file():
        shutil.copyfile(encodings, Path(directory) / ENCODINGS_FILE)
    return snapshot
