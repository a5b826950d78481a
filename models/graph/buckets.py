"""Static shape buckets: a small ladder of node/edge capacities, and padding a batch up to one.

Padding follows ``torch_geometric.transforms.Pad``: pad nodes are appended to every node type
(at least one always exists), pad edges join the first pad node of their source type to the
first pad node of their destination type, and pad features are zeros (code ``0``). Real nodes
therefore aggregate exactly what they would unpadded, and seeds stay the first rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from models.nn.inputs import ModelInputs
from models.schema import EdgeType

MaxSizes = Callable[[str, int], tuple[dict[str, int], dict[EdgeType, int]]]


@dataclass(frozen=True)
class Bucket:
    """Capacities of one padded shape.

    Args:
        seeds: seed rows the model returns (``ModelInputs.seed_rows`` after padding).
        nodes: per node type, rows after padding (real nodes + at least one pad node).
        edges: per edge type, columns after padding.
    """

    seeds: int
    nodes: dict[str, int]
    edges: dict[EdgeType, int]

    @property
    def name(self) -> str:
        """Short label for metrics: total node capacity, e.g. ``n4160``."""
        return f"n{sum(self.nodes.values())}"

    def holds(self, num_seeds: int, nodes: dict[str, int], edges: dict[EdgeType, int]) -> bool:
        """Whether a batch with these counts fits, keeping one pad node per type."""
        return (num_seeds <= self.seeds and all(nodes[t] < cap for t, cap in self.nodes.items())
                and all(edges[e] <= cap for e, cap in self.edges.items()))

    def to_dict(self) -> dict:
        return {"seeds": self.seeds, "nodes": dict(self.nodes),
                "edges": {"__".join(e): c for e, c in self.edges.items()}}

    @classmethod
    def from_dict(cls, values: dict) -> Bucket:
        return cls(int(values["seeds"]), {t: int(c) for t, c in values["nodes"].items()},
                   {tuple(k.split("__")): int(c) for k, c in values["edges"].items()})


def _align(value: float, align: int) -> int:
    return max(align, math.ceil(value / align) * align)


@dataclass(frozen=True)
class BucketLadder:
    """Buckets for batches of one seed type, in increasing size (every capacity non-decreasing).

    Args:
        seed_type: node type of the seeds of the batches these buckets hold.
        buckets: the ladder, smallest first.
    """

    seed_type: str
    buckets: tuple[Bucket, ...]

    def choose(self, inputs: ModelInputs) -> Bucket:
        """The smallest bucket holding ``inputs``; ``ValueError`` if even the largest cannot."""
        if inputs.seed_type != self.seed_type:
            raise ValueError(f"a {self.seed_type} ladder cannot hold a batch of {inputs.seed_type} seeds")
        nodes, edges = inputs.num_nodes(), inputs.num_edges()
        for bucket in self.buckets:
            if bucket.holds(inputs.num_seeds, nodes, edges):
                return bucket
        raise ValueError(f"batch with {inputs.num_seeds} seeds, nodes {nodes}, edges {edges} "
                         f"exceeds the largest bucket {self.buckets[-1].to_dict()}")

    @classmethod
    def geometric(cls, max_sizes: MaxSizes, seed_type: str, max_seeds: int, factor: float = 2.0,
                  align: int = 8) -> BucketLadder:
        """Capacities ``worst(max_seeds) / factor**k`` down to ``worst(1)``, each + 1 pad node.

        Args:
            max_sizes: worst-case ``(nodes, edges)`` of ``num_seeds`` seeds, e.g.
                :meth:`models.graph.sampler.TemporalSampler.max_sizes`.
            seed_type: node type of the seeds.
            max_seeds: largest batch; every batch of up to this many seeds fits the top bucket.
            factor: ratio between consecutive levels (> 1).
            align: capacities are rounded up to a multiple of this.
        """
        if factor <= 1.0 or max_seeds < 1:
            raise ValueError("factor must exceed 1 and max_seeds must be positive")
        top_nodes, top_edges = max_sizes(seed_type, max_seeds)
        low_nodes, low_edges = max_sizes(seed_type, 1)
        buckets: list[Bucket] = []
        scale = 1.0
        while True:
            nodes = {t: _align(max(n * scale, low_nodes[t]) + 1, align) for t, n in top_nodes.items()}
            edges = {e: _align(max(n * scale, low_edges[e]), align) for e, n in top_edges.items()}
            seeds = min(max_seeds, nodes[seed_type] - 1)
            bucket = Bucket(seeds, nodes, edges)
            if not buckets or bucket != buckets[-1]:
                buckets.append(bucket)
            if all(n * scale <= low_nodes[t] for t, n in top_nodes.items()):
                break
            scale /= factor
        return cls(seed_type, tuple(reversed(buckets)))

    @classmethod
    def fitted(cls, samples: Iterable[ModelInputs], max_sizes: MaxSizes, seed_type: str, max_seeds: int,
               factor: float = 2.0, align: int = 8, headroom: float = 1.1) -> BucketLadder:
        """Levels shaped like observed batches, growing to the worst case so every batch still fits.

        Worst-case-shaped levels waste most of a bucket when node types fill their fanouts
        unevenly (hop 2 fills about the square of hop 1). Here level ``k`` below the largest
        sample holds every sample whose total node count is at most ``largest / factor**k`` (its
        capacities are those samples' per-type maxima times ``headroom``); above it, levels grow
        by ``factor`` up to the worst case, so a batch larger than any sample pads by at most
        about ``factor`` instead of jumping to the worst case.

        Args:
            samples: batches representative of what will run (e.g. a few sampled from the
                snapshot at the batch sizes that will be served or trained).
            max_sizes: worst-case sizes, as for :meth:`geometric`.
            seed_type: node type of the seeds.
            max_seeds: largest batch.
            factor: ratio of total node counts between consecutive levels (> 1).
            align: capacities are rounded up to a multiple of this.
            headroom: slack over the observed maxima for batches a little larger than seen.
        """
        if factor <= 1.0 or headroom < 1.0:
            raise ValueError("factor must exceed 1 and headroom must be at least 1")
        top = cls.geometric(max_sizes, seed_type, max_seeds, factor, align).buckets[-1]
        sizes = [(s.num_nodes(), s.num_edges()) for s in samples]
        totals = [sum(nodes.values()) for nodes, _ in sizes]

        def level(group: list, scale: float) -> Bucket:
            nodes = {t: min(cap, _align(max(g[0][t] for g in group) * scale + 1, align))
                     for t, cap in top.nodes.items()}
            edges = {e: min(cap, _align(max(g[1][e] for g in group) * scale, align))
                     for e, cap in top.edges.items()}
            return Bucket(min(max_seeds, nodes[seed_type] - 1), nodes, edges)

        levels = []
        threshold = max(totals, default=0.0)
        while sizes and threshold >= min(totals):
            group = [size for size, total in zip(sizes, totals, strict=True) if total <= threshold]
            levels.insert(0, level(group, headroom))
            threshold /= factor
        scale = headroom * factor
        while sizes and levels[-1] != top and level(sizes, scale).nodes != top.nodes:
            levels.append(level(sizes, scale))
            scale *= factor
        unique = [b for i, b in enumerate(levels) if i == 0 or b != levels[i - 1]]
        return cls(seed_type, (*unique, top) if not unique or unique[-1] != top else tuple(unique))

    def to_dict(self) -> dict:
        return {"seed_type": self.seed_type, "buckets": [b.to_dict() for b in self.buckets]}

    @classmethod
    def from_dict(cls, values: dict) -> BucketLadder:
        return cls(values["seed_type"], tuple(Bucket.from_dict(v) for v in values["buckets"]))


def pad_rows(values: Tensor, rows: int) -> Tensor:
    """Zero-pad ``values`` ``(B, ...)`` to ``(rows, ...)``."""
    return F.pad(values, (0, 0) * (values.dim() - 1) + (0, rows - values.shape[0]))


def pad_inputs(inputs: ModelInputs, bucket: Bucket) -> ModelInputs:
    """Pad every node type and edge type of ``inputs`` to ``bucket``'s capacities.

    Args:
        inputs: an unpadded batch that ``bucket.holds``.
        bucket: target shape.

    Returns:
        Inputs of exactly the bucket's shapes, ``seed_rows == bucket.seeds``.
    """
    nodes = inputs.num_nodes()
    edge_index = {}
    for e, index in inputs.edge_index.items():
        first_pad = torch.tensor([[nodes[e[0]]], [nodes[e[2]]]], device=index.device)
        edge_index[e] = torch.cat([index, first_pad.expand(2, bucket.edges[e] - index.shape[1])], dim=1)
    return ModelInputs(
        cat={t: pad_rows(v, bucket.nodes[t]) for t, v in inputs.cat.items()},
        num={t: pad_rows(v, bucket.nodes[t]) for t, v in inputs.num.items()},
        rel_time={t: pad_rows(v, bucket.nodes[t]) for t, v in inputs.rel_time.items()},
        edge_index=edge_index,
        seed_type=inputs.seed_type,
        num_seeds=inputs.num_seeds,
        seed_rows=bucket.seeds,
    )


def empty_inputs(bucket: Bucket, seed_type: str, num_columns: dict[str, tuple[int, int]]) -> ModelInputs:
    """Inputs of ``bucket``'s shape holding only padding, to compile or warm a bucket.

    Args:
        bucket: the shape.
        seed_type: node type of the seeds (the ladder's).
        num_columns: per node type, ``(C_t, F_t)`` categorical and numeric column counts.
    """
    empty = ModelInputs(
        cat={t: torch.zeros(0, c, dtype=torch.long) for t, (c, _) in num_columns.items()},
        num={t: torch.zeros(0, f) for t, (_, f) in num_columns.items()},
        rel_time={t: torch.zeros(0) for t in num_columns},
        edge_index={e: torch.zeros(2, 0, dtype=torch.long) for e in bucket.edges},
        seed_type=seed_type, num_seeds=0, seed_rows=0)
    return pad_inputs(empty, bucket)
