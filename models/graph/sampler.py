"""Vectorised temporal neighbour sampling over the snapshot's time-sorted CSR.

Disjoint trees, one per seed, as PyG's temporal ``NeighborLoader(disjoint=True)`` builds:
hop ``h + 1`` samples up to ``fanouts[h]`` neighbours of every hop-``h`` node through the
other node type's adjacency, using only edges strictly before the seed time of the node's
tree. Python loops run over hops and fanout positions only, never over nodes or seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from models.graph.subgraph import SubgraphBatch
from models.graph.trees import Trees
from models.schema import EDGE_TYPES, INCOMING, NEIGHBOUR_TYPE, NODE_TYPES, EdgeType
from models.store.csr import TemporalCSR
from models.store.kept import KeptEdges
from models.store.keyed import keyed_csr
from models.store.snapshot import GraphSnapshot


def max_tree_sizes(fanouts: tuple[int, ...], seed_type: str, num_seeds: int) -> tuple[dict[str, int],
                                                                                     dict[EdgeType, int]]:
    """Worst-case node and edge counts per type of ``num_seeds`` trees with every fanout full."""
    nodes = {t: 0 for t in NODE_TYPES}
    edges = {e: 0 for e in EDGE_TYPES}
    nodes[seed_type], width, parent_type = num_seeds, num_seeds, seed_type
    for fanout in fanouts:
        child_type, width = NEIGHBOUR_TYPE[parent_type], width * fanout
        nodes[child_type] += width
        edges[INCOMING[parent_type]] += width  # a child sends its message to its parent
        parent_type = child_type
    return nodes, edges


@dataclass(frozen=True)
class SamplerConfig:
    """How many neighbours to sample per hop, and which.

    Args:
        fanouts: per hop, the most neighbours sampled for each node of the previous hop.
        strategy: ``"last"`` takes the most recent edges before the seed time (deterministic,
            serving); ``"uniform"`` draws uniformly without replacement among them (training).
        per_day: if positive, at most this many edges of one node on one day are candidates (the
            last ones of the day), so ``last`` reaches back over several distinct days instead of
            filling its fanout from a single large basket; ``0``: no limit.
    """

    fanouts: tuple[int, ...] = (12, 4)  # what training.fit's recipe samples (docs/training.md)
    strategy: Literal["last", "uniform"] = "last"
    per_day: int = 0

    def __post_init__(self) -> None:
        if not self.fanouts or any(int(f) < 1 for f in self.fanouts):
            raise ValueError(f"fanouts must be positive, got {self.fanouts}")
        if self.per_day < 0:
            raise ValueError(f"per_day must be 0 (no limit) or positive, got {self.per_day}")
        if self.strategy not in ("last", "uniform"):
            raise ValueError(f"strategy must be 'last' or 'uniform', got {self.strategy!r}")


class TemporalSampler:
    """Samples :class:`SubgraphBatch` computation trees from a :class:`GraphSnapshot`.

    Args:
        snapshot: the graph; its arrays stay memory-mapped. :meth:`sample` may be given another
            graph of the same node types, e.g. the current version of a
            :class:`models.store.live.LiveGraph` (a :class:`models.store.live_view.LiveView`).
        config: fanouts and strategy.
    """

    def __init__(self, snapshot: GraphSnapshot, config: SamplerConfig | None = None) -> None:
        self.snapshot = snapshot
        self.config = config or SamplerConfig()
        self._kept_cache: dict[str, tuple[TemporalCSR, KeptEdges]] = {}

    def _kept(self, node_type: str, csr: TemporalCSR) -> KeptEdges:
        """The candidate edges under ``per_day`` of one CSR (built once per sampler and CSR; a live
        graph's CSR builds its own)."""
        if hasattr(csr, "kept"):
            return csr.kept(self.config.per_day)
        cached = self._kept_cache.get(node_type)
        if cached is None or cached[0].rowptr is not csr.rowptr:
            cached = self._kept_cache[node_type] = (
                csr, KeptEdges.build(csr.day.numpy(), csr.rowptr.numpy(), self.config.per_day))
        return cached[1]

    def sample(
        self,
        seed_type: str,
        seeds: Tensor,
        seed_time: Tensor,
        generator: torch.Generator | None = None,
        graph: GraphSnapshot | None = None,
    ) -> SubgraphBatch:
        """Sample one tree per seed.

        Args:
            seed_type: ``"customer"`` or ``"article"``.
            seeds: ``(B,)`` int64 dense indices of the seed nodes.
            seed_time: ``(B,)`` int64 seed times (days); every tree uses only edges with
                ``day < seed_time`` of its seed, at every hop.
            generator: random source for ``"uniform"`` (ignored by ``"last"``).
            graph: the graph to sample (default: the sampler's snapshot).

        Returns:
            The batch; seeds are the first ``B`` nodes of ``seed_type``, in order.
        """
        graph = self.snapshot if graph is None else graph
        seeds, seed_time = self._check_seeds(graph, seed_type, seeds, seed_time)
        trees = Trees(seed_type, seeds, seed_time)
        for fanout in self.config.fanouts:
            parent = trees.levels[-1]
            which, ids, day = self._children(graph, parent.node_type, parent.ids,
                                             seed_time.index_select(0, parent.batch), fanout, generator)
            local = trees.add_level(ids, day, parent.batch.index_select(0, which))
            trees.add_edges(parent.node_type, local, parent.local.index_select(0, which))
        return trees.batch()

    def sample_shared(self, seed_type: str, seeds: Tensor, seed_time: int,
                      graph: GraphSnapshot | None = None) -> SubgraphBatch:
        """The trees of :meth:`sample` for seeds that all share one seed time, with every subtree
        that several trees hold computed once: a model reads the same seed embeddings from it.

        With one seed time, a node's subtree depends on its id alone ("last" is deterministic) and
        its inputs on its id and the day of the edge it was reached through, so each hop keeps
        one node per distinct ``(id, day)`` and samples the children of each distinct id once;
        an edge joins every parent node to each child of its id, as often as in the disjoint
        trees (a SAGE aggregate over them is the same). Only ``strategy="last"``.

        Args:
            seed_type: ``"customer"`` or ``"article"``.
            seeds: ``(B,)`` int64 distinct dense indices of the seed nodes.
            seed_time: the seed time (day) of every tree.
            graph: the graph to sample (default: the sampler's snapshot).

        Returns:
            The batch: seeds are the first ``B`` nodes of ``seed_type``; ``batch`` is ``0`` for
            every non-seed node (each is shared by several trees; all have ``seed_time``).
        """
        if self.config.strategy != "last":
            raise ValueError("sample_shared needs strategy='last' (the same subtree in every tree)")
        graph = self.snapshot if graph is None else graph
        seeds, times = self._check_seeds(graph, seed_type, seeds, torch.full_like(seeds, int(seed_time)))
        trees = Trees(seed_type, seeds, times)
        for fanout in self.config.fanouts:
            parent = trees.levels[-1]
            distinct, of_parent = torch.unique(parent.ids, return_inverse=True)
            which, ids, day = self._children(graph, parent.node_type, distinct,
                                             torch.full_like(distinct, int(seed_time)), fanout, None)
            # One node per distinct (id, day) among the children.
            first_day = int(day.min()) if day.numel() else 0
            days = int(day.max()) - first_day + 1 if day.numel() else 1
            pairs, of_child = torch.unique(ids * days + (day - first_day), return_inverse=True)
            local = trees.add_level(pairs // days, pairs % days + first_day, torch.zeros_like(pairs))
            # Every parent node gets the children of its id (``which`` is sorted by distinct id).
            per_id = torch.bincount(which, minlength=distinct.numel())
            first = per_id.cumsum(0) - per_id
            repeats = per_id.index_select(0, of_parent)
            parent_rows = torch.repeat_interleave(torch.arange(parent.ids.numel()), repeats)
            offset = torch.arange(parent_rows.numel()) - torch.repeat_interleave(repeats.cumsum(0) - repeats,
                                                                                  repeats)
            child_rows = first.index_select(0, of_parent.index_select(0, parent_rows)) + offset
            trees.add_edges(parent.node_type, local.index_select(0, of_child.index_select(0, child_rows)),
                            parent.local.index_select(0, parent_rows))
        return trees.batch()

    def _children(self, graph: GraphSnapshot, node_type: str, ids: Tensor, before: Tensor, fanout: int,
                  generator: torch.Generator | None) -> tuple[Tensor, Tensor, Tensor]:
        """Up to ``fanout`` neighbours of each node among its edges with ``day < before``:
        ``(parent, ids, day)``, each ``(K,)`` int64, ``parent`` (sorted) indexing ``ids``' nodes."""
        csr = keyed_csr(graph, node_type)  # the CSR to the child type
        start, end = csr.row_bounds_before(ids, before)
        if self.config.per_day:
            kept = self._kept(node_type, csr)
            which, rank = self._select(kept.cumulative.index_select(0, start),
                                       kept.cumulative.index_select(0, end), fanout, generator)
            pos = kept.positions.index_select(0, rank)
        else:
            which, pos = self._select(start, end, fanout, generator)
        return which, csr.col.index_select(0, pos).long(), csr.day.index_select(0, pos).long()

    def max_sizes(self, seed_type: str, num_seeds: int) -> tuple[dict[str, int], dict[EdgeType, int]]:
        """Worst-case node and edge counts per type of a batch of ``num_seeds`` seeds (every fanout full)."""
        return max_tree_sizes(self.config.fanouts, seed_type, num_seeds)

    def _select(
        self, start: Tensor, end: Tensor, fanout: int, generator: torch.Generator | None
    ) -> tuple[Tensor, Tensor]:
        """Pick up to ``fanout`` CSR positions in ``[start, end)`` per parent; returns ``(parent, pos)``."""
        available = end - start
        take = available.clamp(max=fanout)
        if self.config.strategy == "last":
            rank = torch.arange(fanout).expand(available.numel(), fanout)
            slot = torch.where(rank < take.unsqueeze(1), available.unsqueeze(1) - 1 - rank, -1)
        else:
            slot = uniform_subset(available, take, fanout, generator)
        flat = slot.reshape(-1)
        keep = (flat >= 0).nonzero().squeeze(1)
        parent = keep // fanout
        return parent, start.index_select(0, parent) + flat.index_select(0, keep)

    def _check_seeds(self, graph: GraphSnapshot, seed_type: str, seeds: Tensor,
                     seed_time: Tensor) -> tuple[Tensor, Tensor]:
        if seed_type not in NODE_TYPES:
            raise ValueError(f"seed_type must be one of {NODE_TYPES}, got {seed_type!r}")
        seeds, seed_time = seeds.long().reshape(-1).cpu(), seed_time.long().reshape(-1).cpu()
        if seeds.shape != seed_time.shape:
            raise ValueError(f"seeds {tuple(seeds.shape)} and seed_time {tuple(seed_time.shape)} differ")
        num = graph.num_nodes[seed_type]
        if seeds.numel() and (int(seeds.min()) < 0 or int(seeds.max()) >= num):
            raise ValueError(f"{seed_type} seed index out of range [0, {num})")
        return seeds, seed_time


def uniform_subset(
    available: Tensor, take: Tensor, fanout: int, generator: torch.Generator | None = None
) -> Tensor:
    """Per row, ``take[i]`` distinct offsets drawn uniformly from ``[0, available[i])``.

    Floyd's algorithm run for all rows at once: step ``s`` draws ``r`` in ``[0, j]`` with
    ``j = available - take + s`` and keeps ``r``, or ``j`` if ``r`` was already chosen,
    which yields every ``take``-subset with equal probability.

    Args:
        available: ``(F,)`` int64 number of candidates per row.
        take: ``(F,)`` int64 how many to draw per row, ``take <= min(available, fanout)``.
        fanout: width of the result.
        generator: random source.

    Returns:
        ``(F, fanout)`` int64 offsets, ``-1`` in the unused slots ``>= take``.
    """
    steps = torch.arange(fanout)
    high = (available - take).unsqueeze(1) + steps  # (F, fanout): j of each step
    # float64 draws keep floor(u * (j + 1)) exact for any realistic degree.
    draw = torch.rand(available.numel(), fanout, dtype=torch.float64, generator=generator)
    pick = (draw * (high + 1)).long().minimum(high)
    for step in range(1, int(take.max()) if take.numel() else 0):
        seen = (pick[:, :step] == pick[:, step : step + 1]).any(dim=1)
        pick[:, step] = torch.where(seen, high[:, step], pick[:, step])
    return torch.where(steps < take.unsqueeze(1), pick, -1)
