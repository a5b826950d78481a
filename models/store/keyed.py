"""Per-snapshot search structures over the time-sorted CSR: prefix sums and the keyed row search.

The sampler, the temporal features and the purchase history all ask "which of this node's edges
are before its seed time"; :class:`KeyedCSR` answers it with one binary search of the prefix
arrays' sorted ``(node, day)`` key. Both are built once per snapshot and process.
"""

from __future__ import annotations

import logging
import time
import weakref
from dataclasses import dataclass

from torch import Tensor

from models.store.csr import TemporalCSR
from models.store.snapshot_prefix import OTHER, EdgePrefix, in_memory_prefix

log = logging.getLogger(__name__)

_IN_MEMORY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def prefix_sums(snapshot, node_type: str) -> tuple[EdgePrefix, float]:
    """The prefix sums of ``node_type``'s CSR and the mean price: the snapshot's memory-mapped
    arrays, or for a snapshot built without them, a private copy computed once per process."""
    prefix = snapshot.prefix if getattr(snapshot, "prefix", None) is not None else _IN_MEMORY.get(snapshot)
    if prefix is None:
        started = time.perf_counter()
        prefix = _IN_MEMORY[snapshot] = in_memory_prefix(snapshot.adjacency, snapshot.price.numpy())
        size = sum(t.nbytes for e in prefix.edges.values() for t in (e.spend, e.day_starts, e.key))
        log.warning("%s has no stored prefix arrays (built before they were): computed them in %.1fs, %d MB "
                    "private to this process; store them once with: python -m models.store.upgrade %s",
                    snapshot.directory, time.perf_counter() - started, size // 2**20, snapshot.directory)
    return prefix.edges[node_type], prefix.mean_price


@dataclass(frozen=True)
class KeyedCSR(TemporalCSR):
    """A snapshot CSR whose :meth:`row_bounds_before` is one binary search of the prefix arrays'
    sorted ``(node, day)`` key, instead of one vectorised search pass per halving of the widest
    row (the same bounds; a batch of a few nodes paid ~10 passes of small torch ops).

    Args:
        prefix: the CSR's :class:`models.store.snapshot_prefix.EdgePrefix`.
    """

    prefix: EdgePrefix | None = None

    def row_bounds_before(self, nodes: Tensor, time: Tensor) -> tuple[Tensor, Tensor]:
        return self.rowptr.index_select(0, nodes), self.prefix.before(nodes, time)


_KEYED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def keyed_csr(snapshot, node_type: str) -> KeyedCSR:
    """``snapshot``'s ``node_type`` -> other-type CSR with the key search (built once per snapshot); a
    live graph's version (:class:`models.store.live_view.LiveView`) hands out its own."""
    own = getattr(snapshot, "keyed_csr", None)
    if own is not None:
        return own(node_type)
    per_type = _KEYED.setdefault(snapshot, {})
    if node_type not in per_type:
        csr = snapshot.adjacency[(node_type, OTHER[node_type])]
        per_type[node_type] = KeyedCSR(csr.rowptr, csr.col, csr.day, prefix_sums(snapshot, node_type)[0])
    return per_type[node_type]
