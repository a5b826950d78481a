"""Building one :class:`models.store.live_view.LiveView` from the base and everything applied since."""

from __future__ import annotations

from models.schema import ARTICLE, CUSTOMER, NODE_TYPES
from models.store.delta import build_delta
from models.store.keyed import prefix_sums
from models.store.live_csr import LiveCSR
from models.store.live_nodes import JoinedIds, JoinedRows
from models.store.live_parse import Pending
from models.store.live_view import LiveView
from models.store.snapshot import GraphSnapshot
from models.store.snapshot_files import PRICE_DIRECTION
from models.store.snapshot_prefix import OTHER, SnapshotPrefix


def build_view(base: GraphSnapshot, sequence: int, pending: Pending, kept_cache: dict,
               end_time: int) -> LiveView:
    """The version of the live graph holding ``pending`` on top of ``base``.

    Args:
        base: the memory-mapped snapshot.
        sequence: the last log sequence ``pending`` holds.
        pending: the new nodes and transactions since the base.
        kept_cache: where each direction's base :class:`models.store.kept.KeptEdges` are kept across versions.
        end_time: the view's seed day.
    """
    prefixes = {t: prefix_sums(base, t) for t in NODE_TYPES}
    customer, article, day, price = pending.transactions()
    new_nodes = {t: len(n.ids) for t, n in pending.nodes.items()}
    if not len(day) and not any(new_nodes.values()):
        return LiveView(base, sequence, dict(base.ids), dict(base.categorical), dict(base.numeric),
                        dict(base.adjacency), SnapshotPrefix({t: p for t, (p, _) in prefixes.items()},
                                                             prefixes[CUSTOMER][1]),
                        base.min_day, base.max_day, end_time, base.num_transactions, pending.nodes)
    ids, categorical, numeric = {}, {}, {}
    for t in NODE_TYPES:
        nodes = pending.nodes[t]
        if not nodes.ids:
            ids[t], categorical[t], numeric[t] = base.ids[t], base.categorical[t], base.numeric[t]
            continue
        codes, values = nodes.tables((base.categorical[t].shape[1], base.numeric[t].shape[1]))
        ids[t] = JoinedIds(base.ids[t], tuple(nodes.ids))
        categorical[t] = JoinedRows(base.categorical[t], codes)
        numeric[t] = JoinedRows(base.numeric[t], values)
    ends = {CUSTOMER: (customer, article), ARTICLE: (article, customer)}
    adjacency, edges = {}, {}
    for t in NODE_TYPES:
        direction = (t, OTHER[t])
        src, dst = ends[t]
        csr = base.adjacency[direction]
        delta = build_delta(csr, prefixes[t][0], base.price if direction == PRICE_DIRECTION else None,
                            base.num_nodes[t], src, dst, day, price)
        adjacency[direction] = LiveCSR(csr, prefixes[t][0], delta, len(ids[t]),
                                       kept_cache.setdefault(direction, {}))
        edges[t] = adjacency[direction].prefix
    delta = adjacency[PRICE_DIRECTION].delta
    total = base.num_transactions + delta.new_edges
    mean_price = (prefixes[CUSTOMER][1] * base.num_transactions + delta.new_spend) / total
    min_day = min(base.min_day, int(day.min())) if len(day) else base.min_day
    max_day = max(base.max_day, int(day.max())) if len(day) else base.max_day
    return LiveView(base, sequence, ids, categorical, numeric, adjacency, SnapshotPrefix(edges, mean_price),
                    min_day, max_day, end_time, total, pending.nodes)
