"""Computation trees as a sampler grows them: one level of nodes per hop, and the edges between
levels, collected into a :class:`models.graph.subgraph.SubgraphBatch` at the end.

:class:`models.graph.sampler.TemporalSampler` decides which neighbours each hop takes (disjoint
trees or trees shared by seeds of one seed time); this module only numbers the nodes each hop adds
and records who sends a message to whom.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from models.graph.subgraph import SubgraphBatch
from models.schema import EDGE_TYPES, INCOMING, NEIGHBOUR_TYPE, NODE_TYPES, EdgeType


@dataclass(frozen=True)
class _Level:
    """The nodes one hop adds (all of one type), each ``(M,)`` int64."""

    node_type: str
    ids: Tensor
    time: Tensor
    batch: Tensor
    local: Tensor  # index among all sampled nodes of node_type


def _gather(levels: list[_Level], node_type: str, field: str) -> Tensor:
    parts = [getattr(level, field) for level in levels if level.node_type == node_type]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.long)


class Trees:
    """The levels and edges sampled so far, grown one hop at a time.

    Args:
        seed_type: the seeds' node type.
        seeds: ``(B,)`` int64 seed node ids, the first level.
        seed_time: ``(B,)`` int64 their seed times.
    """

    def __init__(self, seed_type: str, seeds: Tensor, seed_time: Tensor) -> None:
        tree = torch.arange(seeds.numel())
        self.seed_type, self.seed_time = seed_type, seed_time
        self.levels = [_Level(seed_type, seeds, seed_time, tree, tree)]
        self.edges: dict[EdgeType, list[Tensor]] = {e: [] for e in EDGE_TYPES}
        self.count = {t: 0 for t in NODE_TYPES}
        self.count[seed_type] = seeds.numel()

    def add_level(self, ids: Tensor, day: Tensor, batch: Tensor) -> Tensor:
        """Append the next hop's nodes (of the type next to the last level's); their local indices."""
        child_type = NEIGHBOUR_TYPE[self.levels[-1].node_type]
        local = torch.arange(self.count[child_type], self.count[child_type] + ids.numel())
        self.count[child_type] += ids.numel()
        self.levels.append(_Level(child_type, ids, day, batch, local))
        return local

    def add_edges(self, parent_type: str, child: Tensor, parent: Tensor) -> None:
        """Edges from the ``child`` local indices to the ``parent`` ones (the child's message)."""
        self.edges[INCOMING[parent_type]].append(torch.stack([child, parent]))

    def batch(self) -> SubgraphBatch:
        return SubgraphBatch(
            seed_type=self.seed_type,
            num_seeds=self.levels[0].ids.numel(),
            node_ids={t: _gather(self.levels, t, "ids") for t in NODE_TYPES},
            node_time={t: _gather(self.levels, t, "time") for t in NODE_TYPES},
            batch={t: _gather(self.levels, t, "batch") for t in NODE_TYPES},
            seed_time=self.seed_time,
            edge_index={
                e: torch.cat(parts, dim=1) if parts else torch.zeros(2, 0, dtype=torch.long)
                for e, parts in self.edges.items()
            },
        )
