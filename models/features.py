"""Model inputs: the feature rows and graph of one sampled batch, gathered from a snapshot."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from models.schema import EdgeType
from models.subgraph import SubgraphBatch
from models.temporal_features import NUM_TEMPORAL, temporal_features


@dataclass(frozen=True)
class TableSpec:
    """What the encoder of one node type must accept.

    Args:
        cardinalities: per categorical column, the largest code (codes run ``0..cardinality``).
        num_numeric: number of numeric feature columns.
    """

    cardinalities: tuple[int, ...]
    num_numeric: int


class FeatureSource(Protocol):
    """Anything holding per-type feature tables, e.g. :class:`models.snapshot.GraphSnapshot`."""

    categorical: Mapping[str, Tensor | np.ndarray]
    numeric: Mapping[str, Tensor | np.ndarray]
    cardinalities: Mapping[str, tuple[int, ...]]


def has_history(source: FeatureSource) -> bool:
    """Whether ``source`` holds edges (a snapshot), so nodes also get their temporal aggregates."""
    return hasattr(source, "adjacency")


def table_specs(source: FeatureSource) -> dict[str, TableSpec]:
    """Per node type, the :class:`TableSpec` of ``source``'s feature tables (with the temporal
    aggregates of :mod:`models.temporal_features` when ``source`` is a snapshot)."""
    extra = NUM_TEMPORAL if has_history(source) else 0
    return {
        t: TableSpec(tuple(int(c) for c in source.cardinalities[t]), int(source.numeric[t].shape[1]) + extra)
        for t in source.categorical
    }


@dataclass
class ModelInputs:
    """Everything the model reads for one batch; real nodes first, optional padding after.

    Args:
        cat: per node type, ``(N_t, C_t)`` int64 categorical codes.
        num: per node type, ``(N_t, F_t)`` float32 numeric features.
        rel_time: per node type, ``(N_t,)`` float32 days from the node's time to its seed time.
        edge_index: per edge type, ``(2, E)`` int64 local ``(src, dst)`` indices.
        seed_type: node type of the seeds; seeds are its first ``num_seeds`` rows.
        num_seeds: number of real seeds ``B``.
        seed_rows: rows of ``seed_type`` the model returns (``B``, or a bucket's seed capacity).
    """

    cat: dict[str, Tensor]
    num: dict[str, Tensor]
    rel_time: dict[str, Tensor]
    edge_index: dict[EdgeType, Tensor]
    seed_type: str
    num_seeds: int
    seed_rows: int

    def num_nodes(self) -> dict[str, int]:
        return {t: int(v.shape[0]) for t, v in self.cat.items()}

    def num_edges(self) -> dict[EdgeType, int]:
        return {e: int(v.shape[1]) for e, v in self.edge_index.items()}

    def to(self, device: torch.device | str) -> ModelInputs:
        """These inputs with every tensor on ``device`` (``self`` if already there)."""
        device = torch.device(device)
        tensors = (*self.cat.values(), *self.num.values(), *self.rel_time.values(), *self.edge_index.values())
        if all(v.device == device for v in tensors):
            return self

        def move(d: dict) -> dict:
            return {k: v.to(device, non_blocking=True) for k, v in d.items()}

        return ModelInputs(move(self.cat), move(self.num), move(self.rel_time), move(self.edge_index),
                           self.seed_type, self.num_seeds, self.seed_rows)


def _take(table: Tensor | np.ndarray, index: Tensor) -> Tensor:
    if isinstance(table, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(table[index.numpy()]))
    return table.index_select(0, index)


def gather_inputs(source: FeatureSource, batch: SubgraphBatch) -> ModelInputs:
    """Look up the feature rows of every sampled node.

    Args:
        source: feature tables indexed by the batch's global node ids (a snapshot).
        batch: the sampler's output.

    Returns:
        Unpadded inputs with ``seed_rows == num_seeds``.
    """
    rel_time = batch.rel_time()
    num = {t: _take(source.numeric[t], ids).float() for t, ids in batch.node_ids.items()}
    if has_history(source):
        # Each node's aggregates are taken at its tree's seed time: the model sees, for every node,
        # its history up to the prediction time and nothing after.
        num = {t: torch.cat([v, temporal_features(source, t, batch.node_ids[t],
                                                  batch.seed_time.index_select(0, batch.batch[t]))], dim=1)
               for t, v in num.items()}
    return ModelInputs(
        cat={t: _take(source.categorical[t], ids) for t, ids in batch.node_ids.items()},
        num=num,
        rel_time={t: rel_time[t].float() for t in batch.node_ids},
        edge_index=dict(batch.edge_index),
        seed_type=batch.seed_type,
        num_seeds=batch.num_seeds,
        seed_rows=batch.num_seeds,
    )
