"""The sampler's output: a batch of disjoint temporal computation trees, one per seed."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from models.schema import EdgeType


@dataclass
class SubgraphBatch:
    """Sampled subgraph for a batch of seeds, ready for PyG hetero layers.

    Every seed owns its own tree (disjoint sampling, as PyG does for temporal sampling),
    so a node id may appear several times. Seeds are the first ``num_seeds`` rows of
    ``seed_type``, in the order they were given to the sampler.

    Args:
        seed_type: node type of the seeds (``"customer"`` or ``"article"``).
        num_seeds: number of seeds ``B``.
        node_ids: per node type, ``(N_t,)`` int64 global index into the snapshot's table.
        node_time: per node type, ``(N_t,)`` int64 day of the node: the seed time for a seed,
            otherwise the day of the edge through which the node was sampled.
        batch: per node type, ``(N_t,)`` int64 index of the seed whose tree holds the node.
        seed_time: ``(B,)`` int64 seed times (days). Only edges with ``day < seed_time`` are sampled.
        edge_index: per edge type ``(src, rel, dst)``, ``(2, E)`` int64 local indices:
            row 0 the sampled neighbour (src type), row 1 the node it was sampled for (dst type).
    """

    seed_type: str
    num_seeds: int
    node_ids: dict[str, torch.Tensor]
    node_time: dict[str, torch.Tensor]
    batch: dict[str, torch.Tensor]
    seed_time: torch.Tensor
    edge_index: dict[EdgeType, torch.Tensor]

    def num_nodes(self) -> dict[str, int]:
        return {t: int(v.numel()) for t, v in self.node_ids.items()}

    def num_edges(self) -> dict[EdgeType, int]:
        return {e: int(v.shape[1]) for e, v in self.edge_index.items()}

    def rel_time(self) -> dict[str, torch.Tensor]:
        """Per node type, ``(N_t,)`` float32 days between the tree's seed time and the node's time."""
        return {t: (self.seed_time[self.batch[t]] - self.node_time[t]).float() for t in self.node_ids}
